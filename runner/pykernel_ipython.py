"""pykernel as a Jupyter kernel, to the code it runs.

Libraries ask whether they run in a notebook and show things differently when
they do: pandas lays a wide frame out in 80 columns with all of its columns
(in a terminal: ``column_0 ... column_11``), plotly shows a figure as its
bundle, rich writes HTML.  They ask in two ways, and both answer here:

* the builtin ``get_ipython()`` (pandas, rich, the usual ``is_notebook()``
  snippet): a builtin in every kernel (the runner defines it), it returns
  the kernel's shell, a ``ZMQInteractiveShell``: ipykernel's class name,
  which is what these libraries compare; it has a ``kernel`` (pandas looks
  for one), a ``config`` naming ``IPKernelApp``, ``user_ns``, ``events``,
  ``display_pub``, and runs magics and shell commands (``run_line_magic``,
  ``run_cell_magic``, ``system``, ``getoutput``) with pykernel's magics;
* IPython itself (``IPython.get_ipython()``: plotly, matplotlib, polars,
  transformers): where IPython is installed, its ``get_ipython()`` returns
  the same shell, and its display functions are pykernel's.

Where IPython is installed, ``from IPython.display import display, HTML``
(which code written for notebooks does constantly) works as in Jupyter: its
``display``, ``update_display``, ``clear_output`` and ``publish_display_data``
send pykernel's display and clear frames, its display objects (HTML,
Markdown, Image, JSON, SVG, Latex, Javascript, Pretty, ...) give their
bundles through their ``_repr_*_`` methods, and its ``DisplayHandle`` updates
by id.  Metadata (an image's width) is accepted and not sent: the protocol
has none.

Where IPython is not installed, ``import IPython`` still fails as it would
anywhere: a stand-in package would have to answer for all that libraries
consult once they find IPython (its version, formatters, traitlets), and
would hide a later ``%pip install ipython``.

Libraries whose notebook output needs more than that:

* plotly: ``fig.show()`` shows the figure's bundle through pykernel's
  display, with or without IPython (and nbformat, which plotly demands for
  it); the default renderer is ``plotly_mimetype``, ipykernel's, unless
  ``PLOTLY_RENDERER`` names one;
* rich: its Jupyter output, which it drops silently when IPython is missing,
  is a display;
* tqdm: ``tqdm.auto`` picks its notebook bar only under ipykernel (its
  module in ``sys.modules``), so it writes the text bar.

The runner imports this module the first time ``get_ipython()`` is called
or one of those modules is imported; start-up pays only for the builtin.
"""

import os
import sys

_api = None             # the runner's primitives (kernel.PreludeAPI)
_load_magics = None     # -> pykernel_magics.Magics
_display_module = None  # -> pykernel_display
_shell = None


def setup(api, load_magics, display_module):
    """Give the module the runner's primitives."""
    global _api, _load_magics, _display_module
    _api = api
    _load_magics = load_magics
    _display_module = display_module


def shell():
    """The kernel's shell, made on first use."""
    global _shell
    if _shell is None:
        _shell = ZMQInteractiveShell()
    return _shell


def _new_display_id():
    return os.urandom(16).hex()


# -- the shell ----------------------------------------------------------------------

class ZMQInteractiveShell:
    """What ``get_ipython()`` returns: ipykernel's shell as far as the code
    in a notebook commonly uses it."""

    def __init__(self):
        self.kernel = _Kernel()
        self.config = {"IPKernelApp": {}}
        self.events = _Events()
        self.display_pub = _DisplayPublisher()

    def __repr__(self):
        return "<pykernel shell (ZMQInteractiveShell look-alike)>"

    @property
    def user_ns(self):
        return _api.namespace

    user_global_ns = user_ns

    def run_line_magic(self, magic_name, line, _stack_depth=1):
        """``%magic_name line``, with $names from the caller."""
        frame = sys._getframe(_stack_depth)
        return _load_magics().line_magic(magic_name.lstrip("%"), line, frame)

    def run_cell_magic(self, magic_name, line, cell):
        """``%%magic_name line`` with *cell* as its body."""
        frame = sys._getframe(1)
        return _load_magics().cell_magic(magic_name.lstrip("%"), line, cell,
                                         frame.f_lineno, frame)

    def magic(self, arg_s):
        """``magic("name args")``: IPython's older spelling of run_line_magic."""
        name, _, line = arg_s.strip().partition(" ")
        return self.run_line_magic(name, line.strip(), _stack_depth=2)

    def system(self, cmd):
        """``!cmd``: run it, its output streamed."""
        _load_magics().system(cmd, sys._getframe(1))

    def getoutput(self, cmd, split=True, depth=0):
        """``!cmd``'s output: an SList of lines, or one string."""
        lines = _load_magics().getoutput(cmd, sys._getframe(depth + 1))
        return lines if split else lines.n

    def ev(self, expr):
        return eval(expr, self.user_ns)

    def ex(self, cmd):
        exec(cmd, self.user_ns)

    def push(self, variables, interactive=True):
        """Put variables in the user's namespace: a dict, or names (a list,
        or a string of them) of the caller's variables."""
        if not isinstance(variables, dict):
            names = variables.split() if isinstance(variables, str) else variables
            frame = sys._getframe(1)
            variables = {name: eval(name, frame.f_globals, frame.f_locals)
                         for name in names}
        self.user_ns.update(variables)

    def showtraceback(self, exc_tuple=None, *args, **kwargs):
        import traceback
        etype, value, tb = exc_tuple or sys.exc_info()
        traceback.print_exception(etype, value, tb)

    def enable_gui(self, gui=None):
        """Nothing to do: there is no GUI event loop, figures show inline."""

    def enable_matplotlib(self, gui=None):
        """Figures always show inline (as PNG) after the cell."""
        return "inline", "agg"


class _Kernel:
    """ipykernel's kernel object, which libraries look for (pandas: to know
    a notebook from a terminal); it does nothing itself."""

    def __repr__(self):
        return "<pykernel kernel>"


class _Events:
    """``events.register(name, callback)``: callbacks are kept (a library
    registers them and may unregister them later) but never called: the
    runner has no IPython execution events."""

    def __init__(self):
        self.callbacks = {}

    def register(self, event, function):
        if not callable(function):
            raise TypeError("Need a callable, got %r" % (function,))
        self.callbacks.setdefault(event, []).append(function)

    def unregister(self, event, function):
        try:
            self.callbacks.get(event, []).remove(function)
        except ValueError:
            raise ValueError("Function %r is not registered as a %s callback"
                             % (function, event)) from None

    def trigger(self, event, *args, **kwargs):
        for function in list(self.callbacks.get(event, [])):
            function(*args, **kwargs)


class _DisplayPublisher:
    """The shell's ``display_pub``: publishes through pykernel's display."""

    def publish(self, data, metadata=None, source=None, *, transient=None,
                update=False, **kwargs):
        _publish(data, transient, update)

    def clear_output(self, wait=False):
        _api.send_clear(wait)


def _publish(data, transient, update):
    display_id = (transient or {}).get("display_id")
    _api.display([data], raw=True, display_id=display_id, update=bool(update))


# -- patches, by module ---------------------------------------------------------------

def patch(module):
    """Patch *module* as its first import ends (see the runner's
    NOTEBOOK_MODULES)."""
    _PATCHES[module.__name__](module)


def _patch_getipython(module):
    def get_ipython():
        """The kernel's shell (pykernel's, as Jupyter's kernel has one)."""
        return shell()
    get_ipython.__wrapped__ = module.get_ipython
    module.get_ipython = get_ipython


def _patch_display_functions(module):
    """IPython's display(), clear_output() and publish_display_data(), in
    IPython.core.display_functions (IPython 8 and later) or
    IPython.core.display (IPython 7), send pykernel's frames."""
    handle_class = getattr(module, "DisplayHandle", None)

    def display(*objs, include=None, exclude=None, metadata=None,
                transient=None, display_id=None, raw=False, clear=False,
                **kwargs):
        update = bool(kwargs.get("update"))
        if display_id is None and transient:
            display_id = transient.get("display_id")
        if display_id is True:
            display_id = _new_display_id()
        if not display_id:
            display_id = None
        if update and display_id is None:
            raise TypeError("display_id required for update_display")
        if clear:
            _api.send_clear(True)
        _api.display(objs, raw=raw, display_id=display_id, update=update,
                     include=include, exclude=exclude)
        if display_id is not None and handle_class is not None:
            return handle_class(display_id)
        return None

    def clear_output(wait=False):
        _api.send_clear(wait)

    def publish_display_data(data, metadata=None, source=None, *,
                             transient=None, **kwargs):
        _publish(data, transient, kwargs.get("update"))

    for name, function in (("display", display), ("clear_output", clear_output),
                           ("publish_display_data", publish_display_data)):
        original = getattr(module, name, None)
        if callable(original) and getattr(original, "__module__", None) == module.__name__:
            function.__doc__ = original.__doc__
            function.__wrapped__ = original
            setattr(module, name, function)


def _patch_plotly(module):
    """plotly.io._renderers: the default renderer, and show()."""
    renderers = module.renderers
    to_dict = module.validate_coerce_fig_to_dict
    if not os.environ.get("PLOTLY_RENDERER"):
        # ipykernel's; without it plotly picks "browser", or nothing, or with
        # our shell "plotly_mimetype+notebook" (which sends plotly.js, MBs).
        renderers.default = "plotly_mimetype"

    def show(fig, renderer=None, validate=True, **kwargs):
        # As plotly's show(), minus its demands for IPython and nbformat; the
        # bundle gets the figure's text/plain, as display(fig) gives.
        fig_dict = to_dict(fig, validate)
        bundle = renderers._build_mime_bundle(fig_dict, renderers_string=renderer,
                                              **kwargs)
        if bundle:
            display = _display_module()
            bundle = display.clean_bundle(bundle)
            bundle.setdefault("text/plain", display.plain_text(fig))
            _api.display([bundle], raw=True)
        renderers._perform_external_rendering(fig_dict, renderers_string=renderer,
                                              **kwargs)

    show.__doc__ = module.show.__doc__
    show.__wrapped__ = module.show
    module.show = show


def _patch_rich(module):
    """rich.jupyter: rich's notebook output becomes a display even without
    IPython (rich would drop it)."""
    renderable = module.JupyterRenderable
    render = module._render_segments

    def display(segments, text):
        _api.display([renderable(render(segments), text)])

    display.__wrapped__ = module.display
    module.display = display


_PATCHES = {
    "IPython.core.getipython": _patch_getipython,
    "IPython.core.display_functions": _patch_display_functions,
    "IPython.core.display": _patch_display_functions,
    "plotly.io._renderers": _patch_plotly,
    "rich.jupyter": _patch_rich,
}
