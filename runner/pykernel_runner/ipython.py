"""pykernel as a Jupyter kernel, to the code it runs.

Libraries ask whether they run in a notebook and show things differently when
they do: pandas lays a wide frame out in 80 columns with all of its columns
(in a terminal: ``column_0 ... column_11``), plotly shows a figure as its
bundle, rich writes HTML.  They ask in two ways, and both answer here:

* the builtin ``get_ipython()`` (pandas, rich, the usual ``is_notebook()``
  snippet): a builtin in every kernel (the runner defines it), it returns
  the kernel's shell, a ``ZMQInteractiveShell``: ipykernel's class name,
  which is what these libraries compare; it has a ``kernel`` (pandas looks
  for one), a ``config`` naming ``IPKernelApp``, ``colors`` (sympy's
  ``init_printing`` picks its formulas' colour by it), ``user_ns``,
  ``execution_count``, ``events`` (the kernel fires them around each cell:
  matplotlib redraws on post_execute), ``display_pub``, a
  ``display_formatter`` whose formatters take printers for types
  (``for_type``: sympy's ``init_printing``, pandas' table schema), which
  pykernel's bundles then use, and runs magics and shell commands
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
* altair: a chart displays as its Vega-Lite bundle (JupyterLab's way, so it
  carries its chart as data) instead of HTML that loads Vega from a CDN: the
  default renderer is ``pykernel``, altair's ``mimetype`` with a text/plain
  that names the chart instead of troubleshooting a frontend;
* tqdm: ``tqdm.auto`` picks its notebook bar only under ipykernel (its
  module in ``sys.modules``), so it writes the text bar;
* matplotlib_inline (``module://matplotlib_inline.backend_inline`` chosen
  as the backend): its InlineBackend wants a traitlets parent and an
  InteractiveShellABC; it gets no parent, and our shell is registered as one.

The runner imports this module the first time ``get_ipython()`` is called
or one of those modules is imported; start-up pays only for the builtin.
"""

import os
import sys

_api = None             # the runner's primitives (kernel.PreludeAPI)
_execution_count = None     # -> the shell's execution_count
_load_magics = None     # -> magics.Magics
_display_module = None  # -> the display module
_shell = None


def setup(api, load_magics, display_module, execution_count):
    """Give the module the runner's primitives."""
    global _api, _load_magics, _display_module, _execution_count
    _api = api
    _load_magics = load_magics
    _display_module = display_module
    _execution_count = execution_count


def shell():
    """The kernel's shell, made on first use."""
    global _shell
    if _shell is None:
        _shell = ZMQInteractiveShell()
    return _shell


def shell_made():
    return _shell is not None


def has_printers():
    """Whether code registered printers (or its own formatters) with the
    shell, so that even an int or a str may be drawn differently."""
    if _shell is None:
        return False
    for formatter in _shell.display_formatter.formatters.values():
        if not isinstance(formatter, _Formatter):
            return True
        if formatter.type_printers or formatter.deferred_printers \
                or formatter.singleton_printers:
            return True
    return False


def _new_display_id():
    return os.urandom(16).hex()


# -- the shell ----------------------------------------------------------------------

class ZMQInteractiveShell:
    """What ``get_ipython()`` returns: ipykernel's shell as far as the code
    in a notebook commonly uses it."""

    # IPython's default scheme; sympy's init_printing reads it for the
    # colour of the formulas it renders as PNG.
    colors = "neutral"

    def __init__(self):
        self.kernel = _Kernel()
        self.config = {"IPKernelApp": {}}
        self.events = _Events(self)
        self.display_pub = _DisplayPublisher()
        self.display_formatter = _DisplayFormatter()
        self.last_execution_succeeded = True
        self.last_execution_result = None
        self.user_ns_hidden = {}
        self.configurables = []
        self.ast_transformers = []          # kept; the runner does not apply them
        self.input_transformers_post = []   # likewise
        self.input_transformers_cleanup = []
        self.custom_exceptions = ()

    def __repr__(self):
        return "<pykernel shell (ZMQInteractiveShell look-alike)>"

    @property
    def execution_count(self):
        """The running cell's number, or the next one's between cells (and
        during a cell that does not count), as IPython's."""
        return _execution_count()

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

    def has_trait(self, name):
        """IPython's shells are traitlets objects; libraries ask them for a
        trait before reading it (``has_trait("kernel")``)."""
        return name in _TRAITS and hasattr(self, name)

    def set_hook(self, name, hook, priority=50, str_key=None, re_key=None):
        """Accepted and not called: the runner has none of IPython's hooks."""

    def set_custom_exc(self, exc_tuple, handler):
        """Accepted and not called: errors are reported by the runner."""
        self.custom_exceptions = exc_tuple

    def register_magic_function(self, func, magic_kind="line", magic_name=None):
        """Accepted and not registered: the runner's magics are its own."""

    def showsyntaxerror(self, filename=None, running_compiled_code=False):
        self.showtraceback()

    def get_parent(self):
        return None

    def enable_gui(self, gui=None):
        """Nothing to do: there is no GUI event loop, figures show inline."""

    def enable_matplotlib(self, gui=None):
        """Figures always show inline (as PNG) after the cell."""
        return "inline", "agg"


# What has_trait() answers for: the shell's attributes IPython declares as traits.
_TRAITS = frozenset(("kernel", "config", "colors", "display_formatter",
                     "display_pub", "user_ns", "execution_count",
                     "ast_transformers", "input_transformers_post",
                     "last_execution_succeeded", "last_execution_result",
                     "configurables"))


class _Kernel:
    """ipykernel's kernel object, which libraries look for (pandas: to know
    a notebook from a terminal); it does nothing itself.  It has no
    ``comm_manager``: there is no frontend to open comms with, and a
    library that finds none falls back (ipywidgets 8 uses the ``comm``
    package's inert comm, so a widget shows its text/plain)."""

    def __repr__(self):
        return "<pykernel kernel>"


# IPython's events, in the order a cell fires them (see before_cell/after_cell).
_EVENTS = ("shell_initialized", "pre_execute", "pre_run_cell", "post_execute",
           "post_run_cell")


class _Events:
    """``events.register(name, callback)``, as IPython's EventManager: the
    kernel fires pre_execute and pre_run_cell(info) before each cell,
    post_execute and post_run_cell(result) after it (matplotlib redraws on
    post_execute; timing and logging extensions use the others)."""

    def __init__(self, shell):
        self.shell = shell
        self.callbacks = {name: [] for name in _EVENTS}

    def register(self, event, function):
        if not callable(function):
            raise TypeError("Need a callable, got %r" % (function,))
        callbacks = self.callbacks[event]   # KeyError for an unknown event, as IPython
        if function not in callbacks:
            callbacks.append(function)

    def unregister(self, event, function):
        if function in self.callbacks[event]:
            return self.callbacks[event].remove(function)
        raise ValueError("Function %r is not registered as a %s callback"
                         % (function, event))

    def trigger(self, event, *args, **kwargs):
        """Call the callbacks; one that fails is reported as IPython reports
        it (a line on stdout, its traceback) and the others still run."""
        for function in self.callbacks[event][:]:
            try:
                function(*args, **kwargs)
            except (Exception, KeyboardInterrupt):
                print("Error in callback {} (for {}), with arguments args {},kwargs {}:"
                      .format(function, event, args, kwargs))
                self.shell.showtraceback()


class ExecutionInfo:
    """What pre_run_cell callbacks get: the cell about to run."""

    def __init__(self, raw_cell, store_history, silent, shell_futures=True,
                 cell_id=None):
        self.raw_cell = raw_cell
        self.store_history = store_history
        self.silent = silent
        self.shell_futures = shell_futures
        self.cell_id = cell_id

    def __repr__(self):
        return ("<ExecutionInfo object at %x, raw_cell=%r store_history=%s "
                "silent=%s shell_futures=%s cell_id=%s>"
                % (id(self), self.raw_cell[:50], self.store_history, self.silent,
                   self.shell_futures, self.cell_id))


class ExecutionResult:
    """What post_run_cell callbacks get: how the cell ended."""

    def __init__(self, info):
        self.info = info
        self.execution_count = None
        self.error_before_exec = None
        self.error_in_exec = None
        self.result = None

    @property
    def success(self):
        return self.error_before_exec is None and self.error_in_exec is None

    def raise_error(self):
        if self.error_before_exec is not None:
            raise self.error_before_exec
        if self.error_in_exec is not None:
            raise self.error_in_exec

    def __repr__(self):
        return ("<ExecutionResult object at %x, execution_count=%s "
                "error_before_exec=%s error_in_exec=%s info=%r result=%r>"
                % (id(self), self.execution_count, self.error_before_exec,
                   self.error_in_exec, self.info, self.result))


def before_cell(source, silent, store_history):
    """Fire a cell's first events (the kernel calls this once a shell
    exists); returns what after_cell needs."""
    shell = _shell
    info = ExecutionInfo(source, store_history, silent)
    result = ExecutionResult(info)
    if store_history:
        result.execution_count = shell.execution_count
    shell.events.trigger("pre_execute")
    if not silent:
        shell.events.trigger("pre_run_cell", info)
    return result


def after_cell(result, value=None, error=None, compiled=True):
    """Fire a cell's last events (the kernel has counted the cell by then):
    *error* is what it raised (before it ran when not *compiled*), *value*
    its result.  *result* is None when the shell was made during the cell."""
    shell = _shell
    if result is None:
        result = ExecutionResult(ExecutionInfo("", True, False))
        result.execution_count = shell.execution_count - 1
    if error is not None:
        if compiled:
            result.error_in_exec = error
        else:
            result.error_before_exec = error
    result.result = value
    shell.last_execution_succeeded = result.success
    shell.last_execution_result = result
    shell.events.trigger("post_execute")
    if not result.info.silent:
        shell.events.trigger("post_run_cell", result)


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
# The method each formatter calls on an object without a printer.
_PRINT_METHODS = {"text/html": "_repr_html_", "text/markdown": "_repr_markdown_",
                  "image/svg+xml": "_repr_svg_", "image/png": "_repr_png_",
                  "application/pdf": "_repr_pdf_", "image/jpeg": "_repr_jpeg_",
                  "text/latex": "_repr_latex_", "application/json": "_repr_json_",
                  "application/javascript": "_repr_javascript_"}


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
        self.print_method = _PRINT_METHODS.get(format_type)
        self.enabled = True
        self.type_printers = {}
        self.deferred_printers = {}     # (module, name) -> printer
        self.singleton_printers = {}    # id(obj) -> printer

    def __call__(self, obj):
        """*obj* in this MIME type, as IPython's formatters answer when
        called: its printer's data, else its ``_repr_*_`` method's, else
        None (text/plain: the pretty text)."""
        if not self.enabled:
            return None
        if self.format_type == "text/plain":
            return _display_module().plain_text(obj)
        try:
            printer = self.singleton_printers.get(id(obj)) or self.printer_for(type(obj))
            if printer is not None:
                return printer(obj)
            method = getattr(obj, self.print_method, None) if self.print_method else None
            return method() if callable(method) else None
        except Exception:
            return None

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
    none.  A formatter put in place of ours (``rich.pretty.install()``)
    draws every object."""
    if _shell is None:
        return None
    formatter = _shell.display_formatter.formatters.get("text/plain")
    if isinstance(formatter, _Formatter):
        if formatter.enabled and (formatter.type_printers or formatter.deferred_printers):
            return formatter.printer_of
        return None
    if callable(formatter) and getattr(formatter, "enabled", True):
        def draw(obj, p, cycle):
            text = formatter(obj)
            if not isinstance(text, str):
                raise TypeError("the text/plain formatter gave no text")
            p.text(text)
        return lambda cls: draw
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


def _patch_altair(module):
    """altair.vegalite.vN.display: its default renderer."""
    renderers = getattr(module, "renderers", None)
    if renderers is None or "mimetype" not in renderers.names():
        return
    active = renderers.active
    if active != "default":
        return      # another default chosen at import (an entry point) stays as enabled
    renderers.enable("mimetype")
    mimetype = renderers.get()

    def render(spec, **metadata):
        bundle = mimetype(spec, **metadata)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict) and isinstance(data.get("text/plain"), str):
            # "<VegaLite 6 object>", then a paragraph on enabling renderers
            # in a frontend: not for a model that reads the text
            data["text/plain"] = data["text/plain"].strip().split("\n", 1)[0]
        return bundle

    renderers.register("pykernel", render)
    renderers.enable("pykernel")


def _patch_rich(module):
    """rich.jupyter: rich's notebook output becomes a display even without
    IPython (rich would drop it)."""
    renderable = module.JupyterRenderable
    render = module._render_segments

    def display(segments, text):
        _api.display([renderable(render(segments), text)])

    display.__wrapped__ = module.display
    module.display = display


def _patch_interactiveshell(module):
    """IPython's components (matplotlib_inline's InlineBackend among them)
    take a shell only if it is an InteractiveShellABC: ours is one."""
    module.InteractiveShellABC.register(ZMQInteractiveShell)


def _patch_inline_config(module):
    """matplotlib_inline's InlineBackend, made with our shell as its traitlets
    parent (``module://matplotlib_inline.backend_inline`` chosen as the
    backend), is made without one: our shell holds no traitlets config.  It
    then registers its figure formatters and post_execute flush with the
    shell, as in ipykernel."""
    backend = module.InlineBackend
    original = backend.instance.__func__

    def instance(cls, *args, **kwargs):
        if isinstance(kwargs.get("parent"), ZMQInteractiveShell):
            del kwargs["parent"]
        return original(cls, *args, **kwargs)

    instance.__doc__ = original.__doc__
    backend.instance = classmethod(instance)


_PATCHES = {
    "IPython.core.getipython": _patch_getipython,
    "IPython.core.interactiveshell": _patch_interactiveshell,
    "matplotlib_inline.config": _patch_inline_config,
    "IPython.core.display_functions": _patch_display_functions,
    "IPython.core.display": _patch_display_functions,
    "plotly.io._renderers": _patch_plotly,
    "altair.vegalite.v4.display": _patch_altair,
    "altair.vegalite.v5.display": _patch_altair,
    "altair.vegalite.v6.display": _patch_altair,
    "rich.jupyter": _patch_rich,
}
