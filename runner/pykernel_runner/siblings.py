"""The files beside the package: pykernel_display, pykernel_magics, the prelude.

They are loaded when first needed, not at start-up, and like the runner's own
modules their bytecode comes from the host's cache (see runner.py).  Bundles are
built here: plain values get their repr, anything else goes to
pykernel_display, imported the first time a non-trivial object is displayed.
"""

import os
import sys

from .channel import diag, jsonable, safe_str

# runner.py's directory: the package's parent.
RUNNER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PLAIN_TYPES = (str, int, float, bool, type(None))
_display = None         # the pykernel_display module, once something needs it
_send_display = None    # the kernel's display primitive (connect())


def on_path():
    """Let the siblings be imported."""
    # The kernel's init turned sys.path[0] into '' (imports from the cwd); at
    # the end the runner's directory shadows nothing, and the names are ours alone.
    if RUNNER_DIR not in sys.path:
        sys.path.append(RUNNER_DIR)


def prelude_code(path):
    """The prelude's code object, from the host's bytecode cache through the
    finder runner.py installed (compiling the prelude would cost more than the
    rest of start-up's Python work), else compiled from source."""
    for finder in sys.meta_path:
        code_for = getattr(finder, "code_for", None)
        if code_for is not None:
            try:
                return code_for("pykernel_prelude", path)
            except Exception:
                break
    with open(path, encoding="utf-8") as f:
        return compile(f.read(), path, "exec", dont_inherit=True)


def connect(send_display):
    """Give pykernel_display, once imported, the kernel's display primitive."""
    global _send_display
    _send_display = send_display


def build_bundle(obj, raw=False):
    """Return the MIME bundle for *obj*; the one place bundles are made.

    Plain values get their repr here; anything else is left to
    pykernel_display (rich reprs, figures, images), imported on first use.
    With *raw*, *obj* is a bundle already and is only made safe to send.
    Never raises, except KeyboardInterrupt, so an interrupt still stops a
    slow repr.
    """
    if raw or type(obj) not in _PLAIN_TYPES:
        try:
            display = display_module()
        except Exception as exc:
            diag("rich display is unavailable: %s" % safe_str(exc))
        else:
            return display.clean_bundle(obj) if raw else display.build_bundle(obj)
        if raw:
            return obj
    try:
        text = repr(obj)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        text = "<repr failed: %s: %s>" % (type(exc).__name__, safe_str(exc))
    return {"text/plain": text}


def display_module():
    """pykernel_display, imported and set up on first use."""
    global _display
    if _display is None:
        on_path()
        import pykernel_display
        pykernel_display.setup(jsonable, _send_display)
        _display = pykernel_display
    return _display


def display_loaded():
    return _display is not None


def patch_pyplot(module):
    """plt.show() displays the figures inline; never fails the import."""
    try:
        display_module().patch_pyplot(module)
    except Exception as exc:
        diag("could not patch matplotlib.pyplot.show: %s" % safe_str(exc))
