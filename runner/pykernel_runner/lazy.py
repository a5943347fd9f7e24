"""What the runner loads when first needed: the display, ipython and magics
modules of the package (display imports pretty), and the prelude's code.

None of them is imported at start-up; their bytecode comes from the host's
cache all the same (see runner.py).  Bundles are built and displays sent here:
plain values get their repr, anything else goes to the display module,
imported the first time a non-trivial object is displayed.  ``get_ipython()``
is here too, a builtin from the start, that imports the ipython module the
first time it is called (pandas calls it when it is imported).

They are imported through the package alone: no directory of the runner is on
the user's sys.path, so a cell's imports never reach the runner's files.
"""

import os
import sys

from .channel import diag, jsonable, safe_str

# runner.py's directory: the package's parent.
RUNNER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PLAIN_TYPES = (str, int, float, bool, type(None))
# Modules patched as their first import ends (ipython.patch): IPython's
# display functions, get_ipython and shell ABC, matplotlib_inline's config,
# plotly's show, altair's renderer, rich's Jupyter output.
NOTEBOOK_MODULES = ("IPython.core.getipython", "IPython.core.display_functions",
                    "IPython.core.display", "IPython.core.interactiveshell",
                    "matplotlib_inline.config", "plotly.io._renderers",
                    "altair.vegalite.v4.display", "altair.vegalite.v5.display",
                    "altair.vegalite.v6.display", "rich.jupyter")
_display = None         # the display module, once something needs it
_ipython = None         # the ipython module, likewise
_send_display = None    # the kernel's display primitive (connect())
_make_api = None        # -> the runner's primitives for the ipython module
_load_magics = None     # -> magics.Magics, for the shell's magics
# The shell's execution_count, as IPython counts: the running cell's number,
# or the next one's (the kernel sets it around each cell).
execution_count = 1


def prelude_code(path):
    """The prelude's code object, from the host's bytecode cache through the
    finder runner.py installed (compiling the prelude would cost more than the
    rest of start-up's Python work), else compiled from source.  Kept: a
    zygote loads it once for every kernel it forks (``zygote.serve``)."""
    code = _prelude_codes.get(path)
    if code is None:
        code = _prelude_codes[path] = _load_prelude_code(path)
    return code


_prelude_codes = {}


def _load_prelude_code(path):
    for finder in sys.meta_path:
        code_for = getattr(finder, "code_for", None)
        if code_for is not None:
            try:
                return code_for("pykernel_prelude", path)
            except Exception:
                break
    with open(path, encoding="utf-8") as f:
        return compile(f.read(), path, "exec", dont_inherit=True)


def connect(send_display, make_api=None, load_magics=None):
    """Give the display module, once imported, the kernel's display primitive,
    and the ipython module the runner's primitives and magics."""
    global _send_display, _make_api, _load_magics
    _send_display = send_display
    _make_api = make_api
    _load_magics = load_magics


def display(objs, raw=False, display_id=None, update=False, include=None,
            exclude=None):
    """Send each of *objs* as a display: the prelude's display() and
    IPython's, routed here, are this.  With *raw* each object is a bundle
    already; *include*/*exclude* keep or drop MIME types.  No objects and a
    display id make an empty display that updates can fill, as in IPython."""
    if not objs and display_id is not None:
        _send_display({}, display_id=display_id, update=update)
        return
    for obj in objs:
        if not raw and type(obj) not in _PLAIN_TYPES and _displays_itself(obj):
            continue
        bundle = build_bundle(obj, raw=raw)
        if (include or exclude) and isinstance(bundle, dict):
            bundle = {mime: data for mime, data in bundle.items()
                      if (not include or mime in include)
                      and (not exclude or mime not in exclude)}
            if not bundle:
                continue
        _send_display(bundle, display_id=display_id, update=update)


def displays_itself(obj):
    """Whether *obj* displayed itself through ``_ipython_display_`` (called
    here when its class has one; plain values never do)."""
    if type(obj) in _PLAIN_TYPES:
        return False
    try:
        if getattr(type(obj), "_ipython_display_", None) is None:
            return False
    except Exception:
        return False
    return _displays_itself(obj)


def _displays_itself(obj):
    try:
        display = display_module()
    except Exception:
        return False
    return display.displays_itself(obj)


def build_bundle(obj, raw=False):
    """Return the MIME bundle for *obj*; the one place bundles are made.

    Plain values get their repr here; anything else is left to
    the display module (rich reprs, figures, images), imported on first use.
    With *raw*, *obj* is a bundle already and is only made safe to send.
    Never raises, except KeyboardInterrupt, so an interrupt still stops a
    slow repr.
    """
    if raw or type(obj) not in _PLAIN_TYPES or _printers_registered():
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


def _printers_registered():
    """Whether code registered printers with the shell (sympy's
    init_printing does, for int and float too): then plain values are
    drawn by the display module as well."""
    return _ipython is not None and _ipython.has_printers()


def display_module():
    """The display module, imported and set up on first use."""
    global _display
    if _display is None:
        from . import display
        display.setup(jsonable, _send_display)
        _display = display
    return _display


def display_loaded():
    return _display is not None


def ipython_module():
    """The ipython module, imported and set up on first use."""
    global _ipython
    if _ipython is None:
        from . import ipython
        ipython.setup(_make_api(), _load_magics, display_module,
                      lambda: execution_count)
        _ipython = ipython
    return _ipython


def get_ipython():
    """The kernel's shell, as IPython's get_ipython() returns in Jupyter
    (the ipython module says what it offers)."""
    return ipython_module().shell()


def shell_events():
    """The ipython module once a shell exists (its before_cell/after_cell
    fire IPython's execution events), else None: a kernel whose code never
    asked for the shell pays nothing."""
    if _ipython is not None and _ipython.shell_made():
        return _ipython
    return None


def patch_for_notebook(module):
    """Make *module* (IPython's display functions, plotly, rich) work as in
    a notebook; never fails the import."""
    try:
        ipython_module().patch(module)
    except Exception as exc:
        diag("could not patch %s: %s" % (getattr(module, "__name__", module),
                                          safe_str(exc)))


def patch_pyplot(module):
    """plt.show() displays the figures inline; never fails the import."""
    try:
        display_module().patch_pyplot(module)
    except Exception as exc:
        diag("could not patch matplotlib.pyplot.show: %s" % safe_str(exc))
