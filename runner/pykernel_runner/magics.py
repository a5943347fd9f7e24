"""IPython-style magics for pykernel cells: ``%pip``, ``%cd``, ``%%capture`` ...,
and what ``!cmd`` and ``x = !cmd`` call.

The runner imports this module only for a cell that may hold a magic (a line
starting with ``%`` or ``!``, or ``= !`` / ``= %``), so cells without magics
never pay for it.  The transformer (the transform module) rewrites the cell's
magic lines into calls of hidden helpers; ``Magics`` puts those helpers in the
namespace and runs the magics through the runner's primitives (``__pykernel__``
in the prelude); shell commands run as the shell module's children.
"""

import builtins
import os
import re
import sys
import time

from .shell import SList, run_child, shell_argv, state_exit
from .pip_modules import (distributions, evict, import_names, normalize, signature,
                          with_compiled_extensions)
from .transform import HELPER_NAMES, automagic_call, transform

_MAX_SCRIPT_ARG = 32 * 1024  # longer %%bash bodies run from a file (Linux
                             # caps one argument at 128 KiB, 4 bytes a char)

# IPython's shell aliases on Linux, magics without a `%` of their own: the
# command, with the arguments at %l or else after it.  `--color` is left
# out: its escape codes would reach the agent as text.
_ALIASES = {
    "mkdir": "mkdir", "rmdir": "rmdir", "mv": "mv", "rm": "rm", "cp": "cp",
    "cat": "cat", "ll": "ls -F -o",
    "lf": "ls -F -o %l | grep ^-", "lk": "ls -F -o %l | grep ^l",
    "ldir": "ls -F -o %l | grep /$", "lx": "ls -F -o %l | grep ^-..x",
}

# The cell magics that display their body: (MIME type, the text/plain of
# the IPython display object they make).
_DISPLAY_CELLS = {
    "html": ("text/html", "<IPython.core.display.HTML object>"),
    "markdown": ("text/markdown", "<IPython.core.display.Markdown object>"),
    "latex": ("text/latex", "<IPython.core.display.Latex object>"),
    "javascript": ("application/javascript", "<IPython.core.display.Javascript object>"),
    "js": ("application/javascript", "<IPython.core.display.Javascript object>"),
    "svg": ("image/svg+xml", "<IPython.core.display.SVG object>"),
}
# Where pykernel's displays leave out a text/plain that only names the
# object (the display module's rule): a host that prefers plain text to
# HTML or Markdown then shows the content.
_READABLE = ("text/html", "text/markdown")

_DOLLAR_NAME = re.compile(r"[^\W\d]\w*(\.[^\W\d]\w*)*")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL", re.IGNORECASE)


class UsageError(Exception):
    """A magic was called the wrong way."""


UsageError.__module__ = "builtins"


def expand(text, frame):
    """IPython's variable expansion: ``$name``/``$name.attr`` and
    ``{expr}`` from the caller's variables, ``$$`` for a dollar; nothing in
    single quotes.  If any part fails the text is used as written, so
    ``$HOME`` and awk's ``{print $1}`` reach the shell."""
    if "$" not in text and "{" not in text:
        return text
    names = dict(frame.f_globals)
    names.update(frame.f_locals)
    out, i, quoted = [], 0, False
    try:
        while i < len(text):
            char = text[i]
            if char == "'":
                quoted = not quoted
            elif quoted:
                pass
            elif text.startswith("$$", i):
                out.append("$")
                i += 2
                continue
            elif char == "$":
                match = _DOLLAR_NAME.match(text, i + 1)
                if match:
                    value = names[match.group().split(".")[0]]
                    for attr in match.group().split(".")[1:]:
                        value = getattr(value, attr)
                    out.append(str(value))
                    i = match.end()
                    continue
            elif char == "{":
                end = _closing_brace(text, i)
                out.append(str(eval(text[i + 1:end], names)))
                i = end + 1
                continue
            out.append(char)
            i += 1
    except Exception:
        return text
    return "".join(out)


def _closing_brace(text, start):
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if not depth:
                return i
    raise ValueError("unbalanced {")


def _one_arg(text):
    """A single (possibly quoted) argument, or the whole text: ``%cd my
    dir`` and ``%cd "my dir"`` name the same directory."""
    import shlex
    text = text.strip()
    try:
        words = shlex.split(text)
    except ValueError:
        return text
    return words[0] if len(words) == 1 else text


def _split_args(text):
    import shlex
    try:
        return shlex.split(text, comments=True)
    except ValueError as exc:
        raise UsageError("cannot parse the arguments %r: %s" % (text, exc))


def _format_time(seconds, precision=3):
    """1.23 s, 45.6 ms, 789 µs, 12 ns (IPython's style)."""
    if seconds >= 60:
        minutes, seconds = divmod(seconds, 60)
        hours, minutes = divmod(int(minutes), 60)
        parts = ([("%dh" % hours)] if hours else []) + ["%dmin" % minutes]
        return " ".join(parts + ["%.*gs" % (precision, seconds)])
    for scale, unit in ((1.0, "s"), (1e3, "ms"), (1e6, "\u00b5s")):
        if seconds * scale >= 1.0:
            return "%.*g %s" % (precision, seconds * scale, unit)
    return "%.*g ns" % (precision, seconds * 1e9)


def _cpu_times():
    """(user, system) CPU seconds of this process, to the microsecond."""
    try:
        import resource
    except ImportError:
        times = os.times()
        return times.user, times.system
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def _plural(count, word):
    return "%s %s%s" % ("{:,}".format(count), word, "" if count == 1 else "s")


class TimeitResult:
    """What ``%timeit -o`` returns: per-loop times of each run, in seconds."""

    def __init__(self, loops, repeat, all_runs):
        self.loops = loops
        self.repeat = repeat
        self.all_runs = all_runs
        self.timings = [run / loops for run in all_runs]
        self.best = min(self.timings)
        self.worst = max(self.timings)
        self.average = sum(self.timings) / len(self.timings)
        self.stdev = (sum((t - self.average) ** 2 for t in self.timings)
                      / len(self.timings)) ** 0.5

    def __str__(self):
        return "%s \u00b1 %s per loop (mean \u00b1 std. dev. of %s, %s each)" % (
            _format_time(self.average), _format_time(self.stdev),
            _plural(self.repeat, "run"), _plural(self.loops, "loop"))

    __repr__ = __str__


def _timeit_options(text):
    """Leading ``-n N -r R -q -o`` options of %timeit, and the rest."""
    options = {"n": 0, "r": 7, "q": False, "o": False}
    while True:
        match = re.match(r"\s*-([nr])\s*(\d+)(?=\s|$)|\s*-([qo])(?=\s|$)", text)
        if not match:
            return options, text.strip()
        if match.group(1):
            options[match.group(1)] = int(match.group(2))
        else:
            options[match.group(3)] = True
        text = text[match.end():]


class CapturedIO:
    """What ``%%capture name`` kept of its cell: ``stdout``, ``stderr`` and
    ``outputs`` (the displays); ``show()`` (or calling it) replays them."""

    def __init__(self, send_display):
        self._stdout = []
        self._stderr = []
        self.outputs = []
        self._send_display = send_display

    @property
    def stdout(self):
        return "".join(self._stdout)

    @property
    def stderr(self):
        return "".join(self._stderr)

    def show(self):
        if self._stdout:
            sys.stdout.write(self.stdout)
        if self._stderr:
            sys.stderr.write(self.stderr)
        for output in self.outputs:
            output.display()

    __call__ = show

    def __str__(self):
        return self.stdout

    def __repr__(self):
        return "<CapturedIO: %d chars of stdout, %d of stderr, %d outputs>" % (
            len(self.stdout), len(self.stderr), len(self.outputs))


class RichOutput:
    """One captured display: its MIME bundle in ``data``."""

    def __init__(self, data, send_display):
        self.data = data
        self.metadata = {}
        self._send_display = send_display

    def display(self):
        self._send_display(self.data)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.data

    def __repr__(self):
        return "<RichOutput %s>" % ", ".join(sorted(self.data))


# -- the magics -------------------------------------------------------------------

_MODULE_NAMES = ("__name__", "__doc__", "__builtins__", "__loader__",
                 "__spec__", "__package__")


class Magics:
    """The magics of one kernel, built on the runner's primitives *api*
    (``__pykernel__``: namespace, hidden_names, emit_status, send_display,
    build_bundle, status_mime, capture_frames, reload_prelude).

    Line magics are the ``_line_<name>(args, frame)`` methods and cell magics
    the ``_cell_<name>(args, body, frame, first_line)`` ones; *frame* is the
    cell's frame, whose variables ``$name`` and ``{expr}`` expand from and
    whose file and line Python bodies are compiled with, so their
    tracebacks point into the cell.
    """

    def __init__(self, api):
        self._api = api
        self._namespace = api.namespace
        self._previous_dir = None
        self._line = {name[6:]: getattr(self, name)
                      for name in dir(self) if name.startswith("_line_")}
        self._cell = {name[6:]: getattr(self, name)
                      for name in dir(self) if name.startswith("_cell_")}

    def transform(self, source):
        """*source* with magics rewritten (or unchanged when it has none)."""
        rewritten = transform(source)
        if rewritten is None:
            return source
        self.install()
        return rewritten

    def automagic(self, source):
        """A one-line cell naming a magic without its ``%`` (``cd /tmp``,
        ``pwd``), rewritten into the magic's call when IPython's automagic
        would run it (see transform.automagic_call); else *source*."""
        import keyword
        namespace = self._namespace

        def is_magic(word):
            return word in self._line or word in _ALIASES

        def is_shadowed(word):
            return (word in namespace or hasattr(builtins, word)
                    or keyword.iskeyword(word))

        call = automagic_call(source, is_magic, is_shadowed)
        if call is None:
            return source
        self.install()
        return call

    def install(self):
        """Put the hidden helpers the rewritten lines call in the namespace."""
        helpers = (self.system, self.getoutput, self.line_magic, self.cell_magic)
        self._namespace.update(zip(HELPER_NAMES, helpers))
        self._api.hidden_names.update(HELPER_NAMES)

    # what rewritten lines call

    def system(self, command, frame=None):
        """``!cmd``: stream its output; a failure is stated.  *frame* is the
        caller's (``get_ipython().system`` passes its caller's)."""
        frame = frame or sys._getframe(1)
        command = expand(command, frame)
        if command:
            returncode, _ = run_child(shell_argv(command))
            frame.f_globals["_exit_code"] = returncode
            state_exit(returncode)

    def getoutput(self, command, frame=None, stream=False):
        """``x = !cmd`` (with *stream*) and ``!!cmd``: its stdout lines as an
        SList; stderr streams, and with *stream* stdout too, as it comes.
        ``!!cmd`` does not stream its stdout: its value is shown instead."""
        return self._getoutput(command, frame or sys._getframe(1), stream)

    def _getoutput(self, command, frame, stream=False):
        command = expand(command, frame)
        returncode, text = run_child(shell_argv(command), capture=True,
                                     tee=stream)
        frame.f_globals["_exit_code"] = returncode
        state_exit(returncode)
        lines = SList(text.splitlines())
        lines.returncode = returncode
        return lines

    def line_magic(self, name, args, frame=None):
        frame = frame or sys._getframe(1)
        magic = self._line.get(name)
        if magic is None and name in _ALIASES:
            return self._alias(_ALIASES[name], args, frame)
        if magic is None:
            raise NameError("UsageError: Line magic function '%%%s' not found."
                            % name)
        return magic(args, frame)

    def cell_magic(self, name, args, body, first_line, frame=None):
        frame = frame or sys._getframe(1)
        if name in _DISPLAY_CELLS:
            return self._display_cell(name, body)
        magic = self._cell.get(name)
        if magic is None:
            raise NameError("UsageError: Cell magic function '%%%%%s' not found."
                            % name)
        return magic(args, body, frame, first_line)

    def _alias(self, command, args, frame):
        """A shell alias (``cat notes.txt``): its command run as ``!cmd``
        (which expands ``$name`` and ``{expr}``)."""
        args = args.strip()
        if "%l" in command:
            command = command.replace("%l", args)
        elif args:
            command += " " + args
        return self.system(command, frame)

    def _display_cell(self, name, body):
        """``%%html`` and its kind: the body displayed as its MIME type."""
        mime, plain = _DISPLAY_CELLS[name]
        bundle = {mime: body}
        if mime not in _READABLE:
            bundle["text/plain"] = plain
        self._api.send_display(bundle)

    # helpers

    def _user_names(self):
        hidden = self._api.hidden_names
        return sorted(name for name in self._namespace
                      if not name.startswith("_") and name not in hidden)

    def _compile(self, source, frame, mode, first_line=None):
        """Compile cell code so its line numbers are the cell's."""
        if first_line is None:
            first_line = frame.f_lineno
        source = "\n" * (first_line - 1) + source
        return compile(source, frame.f_code.co_filename, mode, dont_inherit=True)

    def _run_body(self, body, frame, first_line):
        """Run a cell magic's Python body as a cell; the value of its final
        expression (None when it ends with ';')."""
        import ast
        source = self.transform("\n" * (first_line - 1) + body)
        filename = frame.f_code.co_filename
        tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST,
                       dont_inherit=True)
        last = None
        if (tree.body and isinstance(tree.body[-1], ast.Expr)
                and not body.rstrip().endswith(";")):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec", dont_inherit=True),
             frame.f_globals, frame.f_locals)
        if last is None:
            return None
        return eval(compile(last, filename, "eval", dont_inherit=True),
                    frame.f_globals, frame.f_locals)

    # files and directories

    def _line_pwd(self, args, frame):
        return os.getcwd()

    def _line_cd(self, args, frame):
        target = _one_arg(expand(args, frame)) or "~"
        if target == "-":
            if self._previous_dir is None:
                raise UsageError("%cd -: no previous directory")
            target = self._previous_dir
        before = os.getcwd()
        os.chdir(os.path.expanduser(target))
        self._previous_dir = before
        path = os.getcwd()
        print(path)
        self._api.emit_status("cd", path=path)

    def _line_ls(self, args, frame):
        if args.strip().startswith("-"):
            # `ls -la`: options are the shell's, as IPython's ls alias runs it
            return self._alias("ls -F", args, frame)
        path = _one_arg(expand(args, frame)) or "."
        return sorted(os.listdir(os.path.expanduser(path)))

    def _line_load(self, args, frame):
        path = os.path.expanduser(_one_arg(expand(args, frame)))
        if not path:
            raise UsageError("%load needs a file: %load path/to/file.py")
        with open(path, encoding="utf-8") as f:
            source = f.read()
        print(source, end="" if source.endswith("\n") else "\n")
        code = compile(self.transform(source), os.path.abspath(path), "exec",
                       dont_inherit=True)
        exec(code, frame.f_globals, frame.f_locals)

    def _line_run(self, args, frame):
        """runpy.run_path as __main__ with sys.argv = [path, *args]; the
        script's globals are merged into the namespace."""
        import runpy
        argv = _split_args(expand(args, frame))
        if not argv:
            raise UsageError("%run needs a file: %run script.py [args]")
        argv[0] = os.path.expanduser(argv[0])
        if not os.path.exists(argv[0]):
            raise UsageError("File `%s` not found." % argv[0])
        with _ArgvSetTo(argv):
            try:
                result = runpy.run_path(argv[0], run_name="__main__")
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise
                return
            except Exception as exc:
                raise _from_frames_of(exc, argv[0])
        frame.f_globals.update((name, value) for name, value in result.items()
                               if name not in _MODULE_NAMES)

    # help: obj? and obj??

    def _line_pinfo(self, args, frame):
        self._pinfo(args, frame, 0)

    def _line_pinfo2(self, args, frame):
        self._pinfo(args, frame, 1)

    def _pinfo(self, target, frame, detail):
        from .inspector import format_fields, page_text
        target = target.strip()
        text = None
        if not target.startswith("%"):
            names = dict(frame.f_globals)
            names.update(frame.f_locals)
            text = page_text(target, names, detail)
        name = target.lstrip("%")
        if text is None and name in _ALIASES:
            text = format_fields([("Docstring", "Alias to the system command:\n  %s"
                                   % _ALIASES[name])])
        elif text is None and (name in self._line or name in self._cell):
            # a magic: `%cd?`, or `cd?` when no variable is called cd
            magic = self._line.get(name) or self._cell.get(name)
            doc = " ".join((magic.__doc__ or "").split()) or "<no docstring>"
            text = format_fields([("Docstring", doc)])
        if text is None:
            print("Object `%s` not found." % target)
        else:
            print(text)

    # the environment

    def _line_env(self, args, frame):
        args = expand(args, frame).strip()
        if not args:
            return {key: "<hidden>" if _SECRET_NAME.search(key) else value
                    for key, value in sorted(os.environ.items())}
        if "=" in args:
            key, value = args.split("=", 1)
        else:
            parts = args.split(None, 1)
            if len(parts) == 1:
                if args not in os.environ:
                    raise UsageError("Environment does not have key: %s" % args)
                return os.environ[args]
            key, value = parts
        self._set_env(key.strip(), value.strip())

    def _line_set_env(self, args, frame):
        args = expand(args, frame).strip()
        parts = args.split(None, 1)
        if parts and "=" in parts[0]:
            parts = args.split("=", 1)
        if len(parts) != 2:
            raise UsageError("%set_env needs a name and a value: %set_env NAME value")
        self._set_env(parts[0], parts[1].strip())

    @staticmethod
    def _set_env(key, value):
        if not key:
            raise UsageError("an environment variable needs a name")
        os.environ[key] = value
        shown = "<hidden>" if _SECRET_NAME.search(key) else value
        print("env: %s=%s" % (key, shown))

    # timing

    def _line_time(self, args, frame):
        """Run a statement or expression once; print CPU and wall time;
        return the expression's value."""
        args = args.strip()
        if not args:
            raise UsageError("%time needs a statement: %time f(x)")
        try:
            code = self._compile(args, frame, "eval")
        except SyntaxError:
            code = self._compile(args, frame, "exec")
        return self._timed(lambda: eval(code, frame.f_globals, frame.f_locals))

    def _cell_time(self, args, body, frame, first_line):
        return self._timed(lambda: self._run_body(body, frame, first_line))

    def _timed(self, run):
        cpu, wall = _cpu_times(), time.perf_counter()
        value = run()
        wall = time.perf_counter() - wall
        now = _cpu_times()
        user, system = now[0] - cpu[0], now[1] - cpu[1]
        print("CPU times: user %s, sys: %s, total: %s\nWall time: %s" % (
            _format_time(user), _format_time(system),
            _format_time(user + system), _format_time(wall)))
        self._api.emit_status("time", elapsedMs=round(wall * 1000, 3))
        return value

    def _line_timeit(self, args, frame):
        options, statement = _timeit_options(args)
        if not statement:
            raise UsageError("%timeit needs a statement: %timeit f(x)")
        return self._timeit(statement, "pass", options, frame)

    def _cell_timeit(self, args, body, frame, first_line):
        options, setup = _timeit_options(args)
        return self._timeit(body, setup or "pass", options, frame)

    def _timeit(self, statement, setup, options, frame):
        """Repeat runs as IPython does: loops per run chosen so a run takes
        at least 0.2 s (unless -n), 7 runs (unless -r)."""
        import timeit
        names = frame.f_globals
        if frame.f_locals is not names:
            names = dict(names, **frame.f_locals)
        timer = timeit.Timer(statement, setup, time.perf_counter, names)
        try:
            loops = options["n"] or timer.autorange()[0]
            result = TimeitResult(loops, max(1, options["r"]),
                                  timer.repeat(max(1, options["r"]), loops))
        except Exception as exc:
            raise _from_frames_of(exc, "<timeit-src>")
        if not options["q"]:
            print(result)
        self._api.emit_status("timeit", msPerLoop=result.average * 1000,
                              stdevMs=result.stdev * 1000, loops=loops,
                              runs=result.repeat)
        return result if options["o"] else None

    # the namespace

    def _line_who(self, args, frame):
        names = self._who(args)
        print("\t".join(names) if names else "Interactive namespace is empty.")

    def _line_who_ls(self, args, frame):
        return self._who(args)

    def _who(self, args):
        types = set(args.split())
        return [name for name in self._user_names()
                if not types or type(self._namespace[name]).__name__ in types]

    def _line_whos(self, args, frame):
        names = self._who(args)
        if not names:
            print("Interactive namespace is empty.")
            return
        rows = [(name, type(self._namespace[name]).__name__,
                 _short_value(self._namespace[name])) for name in names]
        width = max(len("Variable"), *(len(row[0]) for row in rows)) + 3
        type_width = max(len("Type"), *(len(row[1]) for row in rows)) + 3
        lines = ["Variable".ljust(width) + "Type".ljust(type_width) + "Data/Info",
                 "-" * (width + type_width + len("Data/Info"))]
        lines += [n.ljust(width) + t.ljust(type_width) + v for n, t, v in rows]
        print("\n".join(lines))

    def _line_reset(self, args, frame):
        """Clear every name but the module's own, then load the prelude and
        the magic helpers again (no prompt: there is no stdin)."""
        unknown = [arg for arg in args.split() if arg not in ("-f", "-s")]
        if unknown:
            raise UsageError("%%reset takes only -f (got %s)" % " ".join(unknown))
        removed = len(self._user_names())
        namespace = self._namespace
        for name in list(namespace):
            if name not in _MODULE_NAMES:
                del namespace[name]
        for name in ("_", "__", "___"):
            builtins.__dict__.pop(name, None)
        self._api.reload_prelude()
        self.install()
        self._api.emit_status("reset", removed=removed)

    # packages

    def _line_pip(self, args, frame):
        """pip in this interpreter, streamed; the modules of distributions
        it installed, upgraded or removed leave sys.modules, so the next
        import loads the new version. A package with a compiled extension
        already imported stays as it is: a process cannot load a second
        copy of an extension, so only a fresh kernel sees the new one."""
        argv = _split_args(expand(args, frame))
        if not argv:
            raise UsageError("%pip needs a pip command: %pip install NAME")
        command = next((arg for arg in argv if not arg.startswith("-")), "")
        before = distributions()
        names = set()
        if command == "uninstall":
            for arg in argv[argv.index(command) + 1:]:
                if normalize(arg) in before:
                    names |= import_names(before[normalize(arg)][1])
        returncode, _ = run_child(
            [sys.executable, "-m", "pip"] + argv,
            env={"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1",
                 "PIP_YES": "1"})
        import importlib
        importlib.invalidate_caches()
        after = distributions()
        changed = sorted(key for key, (_, dist) in after.items()
                         if key not in before
                         or signature(before[key][1]) != signature(dist))
        for key in changed:
            names |= import_names(after[key][1])
        compiled = with_compiled_extensions(names)
        evicted = evict(names - set(compiled))
        state_exit(returncode)
        if evicted:
            print("Note: %s unloaded from sys.modules; the next import loads "
                  "what is installed now" % ", ".join(evicted))
        if compiled:
            print("Note: %s %s compiled extensions already imported, which "
                  "cannot be loaded again in this process: the version imported "
                  "stays in use. Restart the kernel to use what is installed now "
                  "(a call with { reset: true }, or a new kernel); %%reset only "
                  "clears names." % (", ".join(compiled),
                                     "has" if len(compiled) == 1 else "have"))
        self._api.emit_status(
            "pip", command=command, returncode=returncode, evicted=evicted,
            restart_needed=compiled,
            changed=["%s==%s" % (after[key][0], after[key][1].version)
                     for key in changed],
            removed=sorted(before[key][0] for key in set(before) - set(after)))

    def _line_clear(self, args, frame):
        """Clear the cell's output (ipykernel's %clear)."""
        self._api.send_clear()

    def _line_less(self, args, frame):
        """Show a file (ipykernel pages it; here it is printed)."""
        path = os.path.expanduser(_one_arg(expand(args, frame)))
        if not path:
            raise UsageError("%less needs a file: %less path")
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        print(text, end="" if text.endswith("\n") else "\n")

    _line_more = _line_less

    def _line_matplotlib(self, args, frame):
        """Accepted and ignored: figures are always shown (as PNG) after
        the cell, whatever backend IPython habits ask for."""

    def _line_sx(self, args, frame):
        return self._getoutput(args, frame)

    _line_system = _line_sx

    # cell magics

    def _cell_bash(self, args, body, frame, first_line):
        import shutil
        bash = shutil.which("bash")
        if bash is None:
            raise UsageError("%%bash: bash is not installed here; use %%sh")
        self._shell_cell(bash, args, body)

    def _cell_sh(self, args, body, frame, first_line):
        self._shell_cell("/bin/sh", args, body)

    def _shell_cell(self, shell, args, body):
        """Run the body as a script, streamed; a non-zero exit is stated on
        stderr, as IPython (which raises nothing by default) would not."""
        if args.strip():
            raise UsageError("%%%%%s takes no options here (got %r)"
                             % (os.path.basename(shell), args.strip()))
        if len(body) < _MAX_SCRIPT_ARG:
            returncode, _ = run_child([shell, "-c", body])
        else:   # too long for one argument (E2BIG): run it from a file
            import tempfile
            with tempfile.NamedTemporaryFile("w", suffix=".sh",
                                             encoding="utf-8") as script:
                script.write(body)
                script.flush()
                returncode, _ = run_child([shell, script.name])
        state_exit(returncode)

    def _cell_capture(self, args, body, frame, first_line):
        """Keep this cell's stdout, stderr and displays (status events
        pass) in a CapturedIO, stored as *name* when one is given."""
        words = args.split()
        flags = {word for word in words if word.startswith("-")}
        names = [word for word in words if not word.startswith("-")]
        unknown = flags - {"--no-stdout", "--no-stderr", "--no-display"}
        if unknown or len(names) > 1:
            raise UsageError("usage: %%capture [--no-stdout] [--no-stderr] "
                             "[--no-display] [name]")
        api = self._api
        captured = CapturedIO(api.send_display)
        keep = {"stdout": "--no-stdout" not in flags,
                "stderr": "--no-stderr" not in flags,
                "display": "--no-display" not in flags}

        def sink(frame_):
            kind = frame_.get("type")
            if not keep.get(kind) or frame_.get("late"):
                return False    # late output is an earlier cell's, not this one's
            if kind == "display":
                bundle = frame_.get("bundle")
                if not isinstance(bundle, dict) or api.status_mime in bundle:
                    return False
                captured.outputs.append(RichOutput(bundle, api.send_display))
            else:
                (captured._stdout if kind == "stdout" else
                 captured._stderr).append(frame_.get("data") or "")
            return True

        stop = api.capture_frames(sink)
        try:
            value = self._run_body(body, frame, first_line)
            if value is not None:
                api.send_display(api.build_bundle(value))
            _show_figures()
        finally:
            stop()
            if names:
                frame.f_globals[names[0]] = captured

    def _cell_writefile(self, args, body, frame, first_line):
        argv = _split_args(expand(args, frame))
        append = bool(argv) and argv[0] in ("-a", "--append")
        if append:
            argv = argv[1:]
        if len(argv) != 1:
            raise UsageError("usage: %%writefile [-a] path")
        path = os.path.expanduser(argv[0])
        if body and not body.endswith("\n"):
            body += "\n"
        exists = os.path.exists(path)
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(body)
        print("%s %s" % ("Appending to" if append else
                         "Overwriting" if exists else "Writing", argv[0]))
        self._api.emit_status("writefile", path=os.path.abspath(path),
                              bytes=len(body.encode("utf-8")), append=append)

    _cell_file = _cell_writefile    # IPython's alias


def _from_frames_of(exc, filename):
    """*exc* with its traceback starting at the first frame of *filename*
    (the user's script or statement, not runpy's or timeit's frames)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    return exc if tb is None else exc.with_traceback(tb)


def _show_figures():
    """Display the open pyplot figures now (while %%capture still takes
    them, as IPython's capture takes inline figures)."""
    display = sys.modules.get(__package__ + ".display")
    show = getattr(display, "show_figures", None)
    if show is not None and "matplotlib.pyplot" in sys.modules:
        show()


class _ArgvSetTo:
    """sys.argv set for a block, then restored."""

    def __init__(self, argv):
        self._argv = argv

    def __enter__(self):
        self._saved = sys.argv
        sys.argv = list(self._argv)

    def __exit__(self, *exc_info):
        sys.argv = self._saved


def _short_value(value, width=60):
    try:
        text = repr(value)
    except Exception as exc:
        text = "<repr failed: %s>" % type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."
