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
  ``display_pub``, a ``display_formatter`` whose formatters take printers
  for types (``for_type``: sympy's ``init_printing``, pandas' table schema),
  which pykernel's bundles then use, and runs magics and shell commands
  (``run_line_magic``, ``run_cell_magic``, ``system``, ``getoutput``) with
  pykernel's magics;
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
_load_magics = None     # -> magics.Magics
_display_module = None  # -> the display module
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
        self.display_formatter = _DisplayFormatter()

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


# MIME types of IPython's formatters, text/plain first.
_FORMATTED_TYPES = ("text/plain", "text/html", "text/markdown", "image/svg+xml",
                    "image/png", "application/pdf", "image/jpeg", "text/latex",
                    "application/json", "application/javascript")
_MISSING = object()


class _DisplayFormatter:
    """The shell's ``display_formatter``: ``formatters[mime]`` take printers
    for types; ``format(obj)`` is pykernel's bundle."""

    def __init__(self):
        self.formatters = {mime: _Formatter(mime) for mime in _FORMATTED_TYPES}

    @property
    def active_types(self):
        return [mime for mime, formatter in self.formatters.items()
                if getattr(formatter, "enabled", True)]

    def format(self, obj, include=None, exclude=None):
        bundle = _display_module().build_bundle(obj)
        bundle = {mime: data for mime, data in bundle.items()
                  if (not include or mime in include)
                  and (not exclude or mime not in exclude)}
        return bundle, {}


class _Formatter:
    """One MIME type's printers by type, as IPython's formatters keep them
    (``for_type``, ``for_type_by_name``, ``pop``, ``lookup``).  A text/plain
    printer draws with the pretty printer: ``func(obj, p, cycle)``; the
    others return the data: ``func(obj)``."""

    def __init__(self, format_type):
        self.format_type = format_type
        self.enabled = True
        self.type_printers = {}
        self.deferred_printers = {}     # (module, name) -> printer
        self.singleton_printers = {}    # id(obj) -> printer

    def for_type(self, typ, func=None):
        if isinstance(typ, str):
            module, name = typ.rsplit(".", 1)
            return self.for_type_by_name(module, name, func)
        old = self.printer_for(typ)
        if func is not None:
            self.type_printers[typ] = func
        return old

    def for_type_by_name(self, type_module, type_name, func=None):
        key = (type_module, type_name)
        old = self.deferred_printers.get(key)
        if old is None:
            old = next((printer for cls, printer in self.type_printers.items()
                        if (cls.__module__, cls.__name__) == key), None)
        if func is not None:
            self.deferred_printers[key] = func
        return old

    def pop(self, typ, default=_MISSING):
        if isinstance(typ, str):
            key = tuple(typ.rsplit(".", 1))
            found = self.deferred_printers.pop(key, _MISSING)
        else:
            found = self.type_printers.pop(typ, _MISSING)
            if found is _MISSING:
                key = (typ.__module__, typ.__name__)
                found = self.deferred_printers.pop(key, _MISSING)
        if found is _MISSING:
            if default is _MISSING:
                raise KeyError("No registered printer for %r" % (typ,))
            return default
        return found

    def lookup_by_type(self, typ):
        printer = self.printer_for(typ)
        if printer is None:
            raise KeyError("No registered printer for %r" % (typ,))
        return printer

    def lookup(self, obj):
        printer = self.singleton_printers.get(id(obj))
        return printer if printer is not None else self.lookup_by_type(type(obj))

    def __contains__(self, typ):
        return self.printer_for(typ) is not None

    def printer_for(self, cls):
        """The printer for *cls* or its nearest base, or None."""
        if not (self.type_printers or self.deferred_printers):
            return None
        for klass in getattr(cls, "__mro__", (cls,)):
            printer = self.printer_of(klass)
            if printer is not None:
                return printer
        return None

    def printer_of(self, klass):
        """The printer registered for exactly *klass*, or None."""
        printer = self.type_printers.get(klass)
        if printer is None and self.deferred_printers:
            key = (getattr(klass, "__module__", None), getattr(klass, "__name__", None))
            if key in self.deferred_printers:
                printer = self.type_printers[klass] = self.deferred_printers.pop(key)
        return printer


def text_printers():
    """The text/plain printers code registered, for the pretty module: a
    function (class -> its own printer or None), or None when there are
    none."""
    if _shell is None:
        return None
    formatter = _shell.display_formatter.formatters.get("text/plain")
    if isinstance(formatter, _Formatter) and formatter.enabled \
            and (formatter.type_printers or formatter.deferred_printers):
        return formatter.printer_of
    return None


def formatted(obj):
    """{mime: data} from the printers code registered for obj's type, and
    from formatters it put in place of ours (pandas' table schema), except
    text/plain (the pretty module asks text_printers)."""
    if _shell is None:
        return {}
    data = {}
    for mime, formatter in list(_shell.display_formatter.formatters.items()):
        if mime == "text/plain" or not getattr(formatter, "enabled", True):
            continue
        try:
            if isinstance(formatter, _Formatter):
                printer = formatter.singleton_printers.get(id(obj)) \
                    or formatter.printer_for(type(obj))
                value = printer(obj) if printer is not None else None
            elif callable(formatter):
                value = formatter(obj)
            else:
                continue
        except Exception:
            continue    # as a failing _repr_*_ is skipped
        if isinstance(value, tuple) and len(value) == 2:
            value = value[0]    # (data, metadata)
        if value is not None:
            data[mime] = value
    return data


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
