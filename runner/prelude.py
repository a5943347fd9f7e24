"""pykernel prelude: the helpers every cell can use.

The runner executes this file once per process in the user's namespace, with
``__pykernel__`` (the runner's primitives) already defined there, and hides
every name defined here from the user's listings.  Helpers that are not for
the user start with an underscore; nothing else is left behind.
"""


def display(*objs, raw=False, display_id=None, update=False, include=None,
            exclude=None, metadata=None, clear=False):
    """Show each object as a rich display, in order with printed output.

    With ``raw=True`` each object is already a MIME bundle (a dict such as
    ``{"text/plain": "hi"}``).  A ``display_id`` names the display so that
    ``update_display`` can replace it later (``display_id=True`` makes one
    up); then a handle with ``update(obj)`` is returned, as IPython does.
    ``include``/``exclude`` keep or drop MIME types, ``clear=True`` clears
    the output first; ``metadata`` is accepted and not sent.
    """
    handle = None
    if display_id is True:
        import os
        display_id = os.urandom(16).hex()
    if display_id is not None and display_id is not False:
        display_id = str(display_id)
        handle = _DisplayHandle(display_id)
    else:
        display_id = None
    if clear:
        clear_output(wait=True)
    for obj in objs:
        bundle = __pykernel__.build_bundle(obj, raw=raw)
        if (include or exclude) and isinstance(bundle, dict):
            bundle = {mime: data for mime, data in bundle.items()
                      if (not include or mime in include)
                      and (not exclude or mime not in exclude)}
            if not bundle:
                continue
        __pykernel__.send_display(bundle, display_id=display_id, update=update)
    return handle


def update_display(obj, *, display_id, raw=False, include=None, exclude=None,
                   metadata=None):
    """Replace the display made earlier with the same ``display_id``."""
    display(obj, raw=raw, display_id=display_id, update=True, include=include,
            exclude=exclude)


def clear_output(wait=False):
    """Clear this cell's output (with ``wait=True``: when new output comes)."""
    __pykernel__.send_clear(wait)


class _DisplayHandle:
    """What ``display(..., display_id=...)`` returns: the display, by id."""

    def __init__(self, display_id):
        self.display_id = display_id

    def display(self, obj, **kwargs):
        display(obj, display_id=self.display_id, **kwargs)

    def update(self, obj, **kwargs):
        update_display(obj, display_id=self.display_id, **kwargs)

    def __repr__(self):
        return "<DisplayHandle display_id=%s>" % self.display_id


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
