"""pykernel prelude: the helpers every cell can use.

The runner executes this file once per process in the user's namespace, with
``__pykernel__`` (the runner's primitives) already defined there, and hides
every name defined here from the user's listings.  Helpers that are not for
the user start with an underscore; nothing else is left behind.
"""


def display(*objs, raw=False, display_id=None, update=False):
    """Show each object as a rich display, in order with printed output.

    With ``raw=True`` each object is already a MIME bundle (a dict such as
    ``{"text/plain": "hi"}``).  A ``display_id`` names the display so that
    ``update_display`` can replace it later.
    """
    for obj in objs:
        bundle = obj if raw else __pykernel__.build_bundle(obj)
        __pykernel__.send_display(bundle, display_id=display_id, update=update)


def update_display(obj, *, display_id, raw=False):
    """Replace the display made earlier with the same ``display_id``."""
    display(obj, raw=raw, display_id=display_id, update=True)


def clear_output(wait=False):
    """Clear this cell's output (with ``wait=True``: when new output comes)."""
    __pykernel__.send_clear(wait)


def env(key=None, value=None):
    """Read or set environment variables.

    ``env()`` returns a dict of all of them, ``env(key)`` one value (or None),
    ``env(key, value)`` sets one and returns the value.
    """
    import os
    if key is None:
        return dict(os.environ)
    if value is None:
        return os.environ.get(key)
    os.environ[key] = str(value)
    return os.environ[key]


def _emit_status(op, **data):
    """Send a status event (``{"op": op, ...}``) to the host."""
    __pykernel__.emit_status(op, **data)
