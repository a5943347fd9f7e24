"""IPython-style magics and shell commands for pykernel cells.

The runner imports this module only for a cell that may hold a magic (a line
starting with ``%`` or ``!``, or ``= !`` / ``= %``), so cells without magics
never pay for it.  It has two halves:

* the transformer, ``Magics.transform(source)``, which rewrites magic lines
  into calls of hidden helpers (``__pykernel_magic__('pwd', '')``) before
  the cell is parsed.  Only a line that starts a logical line is rewritten:
  the source is fed to ``tokenize`` one line at a time, and a line is looked
  at when the tokenizer asks for it, so the tokens seen so far say whether it
  starts a statement or sits inside a string, brackets or a backslash
  continuation.  A rewritten line replaces the original before the
  tokenizer reads it, and every output line stands for one input line, so
  tracebacks keep their line numbers.  A cell magic (``%%name``) takes the
  whole cell: its first line becomes one call carrying the body.
* the magics themselves (``%pip``, ``%cd``, ``!cmd``, ``%%capture`` ...),
  run through the runner's primitives (``__pykernel__`` in the prelude).

Shell children read /dev/null, stay in the kernel's process group (so an
interrupt of the group reaches them), stream their output to the cell as it
comes, are terminated when the cell is interrupted, and have what is shown
or captured capped at 1 MiB or 3000 lines with one notice; the rest is read
and discarded, so a chatty child neither blocks nor floods the host.
"""

import builtins
import codecs
import os
import re
import sys
import time
import tokenize

SHELL_CAP_BYTES = 1024 * 1024
SHELL_CAP_LINES = 3000
CAP_NOTICE = "[output truncated: shell output capped at 1 MiB / 3000 lines]\n"

_SYSTEM = "__pykernel_system__"         # !cmd: stream, return None
_GETOUTPUT = "__pykernel_getoutput__"   # x = !cmd, !!cmd: return an SList
_LINE = "__pykernel_magic__"            # %name args
_CELL = "__pykernel_cell_magic__"       # %%name args + body
HELPER_NAMES = (_SYSTEM, _GETOUTPUT, _LINE, _CELL)

_POLL_INTERVAL = 0.1        # seconds between checks that a child has exited
_AFTER_EXIT_DRAIN = 1.0     # bound on reading what a child's own children write
_TERMINATE_GRACE = 1.0      # SIGTERM, then SIGKILL, for an interrupted child
_MAX_SCRIPT_ARG = 32 * 1024  # longer %%bash bodies run from a file (Linux
                             # caps one argument at 128 KiB, 4 bytes a char)

_ASSIGN_TARGET = re.compile(r"[^\W\d][\w.]*(\s*,\s*[^\W\d][\w.]*)*\s*$")
_DOLLAR_NAME = re.compile(r"[^\W\d]\w*(\.[^\W\d]\w*)*")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL", re.IGNORECASE)


class UsageError(Exception):
    """A magic was called the wrong way."""


UsageError.__module__ = "builtins"


# -- the transformer ----------------------------------------------------------

def transform(source):
    """*source* with its magic lines rewritten, or None when it has none."""
    lines = _split_lines(source)
    cell = _transform_cell_magic(lines)
    if cell is not None:
        return cell
    out = []
    blanks = []     # stand-ins for the lines a magic continued onto
    state = _LogicalLines()
    pending = iter(lines)
    changed = False

    def readline():
        nonlocal changed
        if blanks:
            line = blanks.pop()
        else:
            line = next(pending, "")
            if line and state.starts_statement(len(out) + 1):
                rewritten, joined = _rewrite_logical_line(line, pending)
                if rewritten is not None:
                    line, changed = rewritten, True
                    blanks.extend("\n" * joined)
        out.append(line)
        return line

    try:
        for token in tokenize.generate_tokens(readline):
            state.see(token)
    except (tokenize.TokenError, SyntaxError):
        # The cell does not tokenize (it will not compile either): lines
        # after the failure stay as written and Python reports the error.
        pass
    if not changed:
        return None
    out.extend(blanks)
    out.extend(pending)
    return "".join(out)


def _split_lines(source):
    """Lines ending in '\\n' (the tokenizer's line ends; str.splitlines also
    splits at form feeds and U+2028, which may sit inside a string)."""
    lines = [line + "\n" for line in source.split("\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    return lines


class _LogicalLines:
    """Follows the tokens of a cell to tell whether the next physical line
    starts a statement: the previous line must have ended one (NEWLINE) or
    been blank or a comment (NL) outside brackets.  Inside a multi-line
    string no token comes until the string ends, and a backslash
    continuation ends in no NEWLINE, so both fail the test."""

    def __init__(self):
        self._depth = 0
        self._last = None       # (type, row) of the latest token

    def see(self, token):
        if token.type == tokenize.OP:
            if token.string in "([{":
                self._depth += 1
            elif token.string in ")]}":
                self._depth = max(0, self._depth - 1)
        self._last = (token.type, token.start[0])

    def starts_statement(self, row):
        if row == 1:
            return True
        if self._last is None or self._depth:
            return False
        kind, last_row = self._last
        return kind in (tokenize.NEWLINE, tokenize.NL) and last_row == row - 1


def _rewrite_logical_line(line, pending):
    """Rewrite a magic line, with the lines it continues onto (a trailing
    backslash joins the next line, as in a shell); (None, 0) if *line* is
    not a magic, else (the call, how many more lines it took)."""
    rewritten = _rewrite_line(line)
    if rewritten is None:
        return None, 0
    joined = 0
    while line.rstrip("\r\n").endswith("\\"):
        following = next(pending, None)
        if following is None:
            break
        line = line.rstrip("\r\n")[:-1] + " " + following.lstrip(" \t")
        joined += 1
    return (_rewrite_line(line) if joined else rewritten), joined


def _rewrite_line(line):
    """The call a magic line becomes, with its indent and line end; None for
    a line that is not a magic."""
    text = line.rstrip("\r\n")
    end = line[len(text):]
    code = text.lstrip(" \t\f")
    indent = text[:len(text) - len(code)]
    if code.startswith("!!"):
        call = "%s(%r)" % (_GETOUTPUT, code[2:].strip())
    elif code.startswith("!"):
        call = "%s(%r)" % (_SYSTEM, code[1:].strip())
    elif code.startswith("%"):
        call = _line_magic_call(code[1:])
    else:
        call = _assignment_call(code)
    return None if call is None else indent + call + end


def _line_magic_call(text):
    """``name args`` (after the '%') as a call; ``%%name`` here, past the
    first line, is looked up as a line magic and reported as not found."""
    parts = text.split(None, 1)
    if not parts:
        return None
    name = parts[0]
    if not name.lstrip("%").isidentifier() or name.startswith("%%"):
        return None
    args = parts[1].strip() if len(parts) > 1 else ""
    return "%s(%r, %r)" % (_LINE, name, args)


def _assignment_call(code):
    """``x = !cmd`` and ``a, b = %name args``."""
    target, equals, value = code.partition("=")
    if not equals or not _ASSIGN_TARGET.match(target):
        return None
    value = value.lstrip()
    if value.startswith("!"):
        call = "%s(%r)" % (_GETOUTPUT, value.lstrip("!").strip())
    elif value.startswith("%"):
        call = _line_magic_call(value[1:])
    else:
        return None
    return None if call is None else "%s = %s" % (target.rstrip(), call)


def _transform_cell_magic(lines):
    """A cell whose first line (blank lines aside) is ``%%name args``: one
    call with the body, then blank lines so the line count stays."""
    for first, line in enumerate(lines):
        if line.strip():
            break
    else:
        return None
    head = lines[first].strip()
    if not head.startswith("%%"):
        return None
    parts = head[2:].split(None, 1)
    if not parts or not parts[0].isidentifier():
        return None
    args = parts[1] if len(parts) > 1 else ""
    body = "".join(lines[first + 1:])
    call = "%s(%r, %r, %r, %d)" % (_CELL, parts[0], args, body, first + 2)
    return "\n" * first + call + "\n" * (len(lines) - first)


# -- shell commands -------------------------------------------------------------

class SList(list):
    """The lines a shell command printed (``x = !cmd``), IPython style."""

    returncode = None

    @property
    def n(self):
        """The lines joined with newlines."""
        return "\n".join(self)

    @property
    def s(self):
        """The lines joined with spaces."""
        return " ".join(self)

    @property
    def l(self):    # noqa: E743 (IPython's name)
        """The lines as a list."""
        return self

    @property
    def p(self):
        """The lines that name existing paths, as pathlib.Path objects."""
        import pathlib
        return [pathlib.Path(line) for line in self if os.path.exists(line)]

    nlstr, spstr, list, paths = n, s, l, p

    def grep(self, pattern, prune=False, field=None):
        """Lines matching *pattern* (a regex, case-insensitive, or a
        predicate); with *field*, only that whitespace-separated field is
        matched; with *prune*, the lines that do not match."""
        if callable(pattern):
            matches = pattern
        else:
            matches = re.compile(pattern, re.IGNORECASE).search

        def target(line):
            if field is None:
                return line
            fields = line.split()
            try:
                return fields[field]
            except IndexError:
                return ""

        return self._derived(line for line in self
                             if bool(matches(target(line))) != bool(prune))

    def fields(self, *indices):
        """Whitespace-separated fields of each line: with no indices, a list
        of lists; else each line's chosen fields joined by a space."""
        split = [line.split() for line in self]
        if not indices:
            return split
        chosen = []
        for fields in split:
            picked = []
            for index in indices:
                try:
                    picked.append(fields[index])
                except IndexError:
                    pass
            if picked:
                chosen.append(" ".join(picked))
        return self._derived(chosen)

    def sort(self, field=None, nums=False):
        """A new SList sorted by the whole line or by whitespace-separated
        *field* (as in ``fields``); with *nums*, by the number its digits
        make (so 21 comes after 3; 0 where there are none).  As IPython's,
        it returns the sorted copy and leaves this one as it is."""
        def key(line):
            text = line
            if field is not None:
                parts = line.split()
                try:
                    text = parts[field]
                except IndexError:
                    text = ""
            if not nums:
                return text
            digits = "".join(ch for ch in text if ch.isdigit())
            return int(digits) if digits else 0
        return self._derived(sorted(self, key=key))

    def _derived(self, lines):
        result = SList(lines)
        result.returncode = self.returncode
        return result


class _OutputCap:
    """Counts what a child printed (both streams) against the shell cap."""

    def __init__(self):
        self.bytes_left = SHELL_CAP_BYTES
        self.lines_left = SHELL_CAP_LINES
        self.hit = False
        self.noticed = False

    def take(self, data):
        """The part of *data* still under the cap; ``hit`` once some of it
        is dropped."""
        if self.hit:
            return b""
        size = min(len(data), self.bytes_left)
        if self.lines_left <= 0:
            size = 0
        elif data.count(b"\n", 0, size) >= self.lines_left:
            end = -1
            for _ in range(self.lines_left):
                end = data.index(b"\n", end + 1)
            size = end + 1
        self.bytes_left -= size
        self.lines_left -= data.count(b"\n", 0, size)
        self.hit = size < len(data)
        return data[:size]


def _shell_argv(command, shell=None):
    """argv that runs *command* with bash (sh when there is no bash): bash
    takes the bash-isms agents write, and for one simple command it execs
    it directly."""
    import shutil
    shell = shell or shutil.which("bash") or "/bin/sh"
    return [shell, "-c", command]


def _child_env(defaults=None):
    env = dict(os.environ)
    # Python children flush each write, so `!python script.py` streams as
    # it would on a terminal.
    env.setdefault("PYTHONUNBUFFERED", "1")
    for key, value in (defaults or {}).items():
        env.setdefault(key, value)
    return env


def run_child(argv, capture=False, env=None):
    """Run *argv*, stream its output to the cell, return (returncode, text).

    stdout goes to ``sys.stdout`` (or, with *capture*, into the returned
    text) and stderr to ``sys.stderr``, chunk by chunk as it is read.  An
    interrupt terminates the child and propagates.
    """
    import select
    import subprocess
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_child_env(env), close_fds=True)
    cap = _OutputCap()
    captured = []
    sinks = {
        proc.stdout.fileno(): _Sink(captured.append if capture else
                                    (lambda text: sys.stdout.write(text))),
        proc.stderr.fileno(): _Sink(lambda text: sys.stderr.write(text)),
    }
    try:
        poller = select.poll()
        for fd in sinks:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        open_fds, exited_at = set(sinks), None
        while open_fds:
            events = poller.poll(_POLL_INTERVAL * 1000)
            for fd, _ in events:
                data = os.read(fd, 65536)
                if not data:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    continue
                kept = cap.take(data)
                if kept:
                    sinks[fd].write(kept)
                if cap.hit and not cap.noticed:
                    cap.noticed = True
                    _finish_sinks(sinks)
                    sys.stderr.write(CAP_NOTICE)
            if proc.poll() is not None:
                # The child is gone; what its own background children keep
                # writing is read a little longer, then left behind.
                now = time.monotonic()
                exited_at = exited_at or now
                if not events or now - exited_at > _AFTER_EXIT_DRAIN:
                    break
        _finish_sinks(sinks)
        returncode = proc.wait()
    except BaseException:
        _stop_child(proc)
        raise
    finally:
        proc.stdout.close()
        proc.stderr.close()
    return returncode, "".join(captured)


class _Sink:
    """Decodes one stream's bytes (UTF-8, incrementally) into a writer."""

    def __init__(self, write):
        self._write = write
        self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode

    def write(self, data, final=False):
        text = self._decode(data, final)
        if text:
            self._write(text)


def _finish_sinks(sinks):
    for sink in sinks.values():
        sink.write(b"", final=True)


def _stop_child(proc):
    """End an interrupted child and what it started.  They had SIGINT with
    the kernel's process group already; whatever ignores it gets SIGTERM,
    then SIGKILL."""
    import signal
    try:
        started = _descendants(proc.pid)
        _signal_all([proc.pid] + started, signal.SIGTERM)
        try:
            proc.wait(_TERMINATE_GRACE)
        except Exception:
            pass
        # orphans keep their pids when they are reparented
        _signal_all(started + _descendants(proc.pid), signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    except BaseException:
        try:
            proc.kill()
        except Exception:
            pass


def _descendants(pid):
    """Pids of the live descendants of *pid* (read from /proc; none where
    there is no /proc)."""
    children = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(pids, signum):
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def _state_exit(returncode):
    """A failed command is said, not silent."""
    if returncode > 0:
        sys.stderr.write("Command exited with code %d\n" % returncode)
    elif returncode < 0:
        sys.stderr.write("Command killed by signal %d\n" % -returncode)


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
            returncode, _ = run_child(_shell_argv(command))
            frame.f_globals["_exit_code"] = returncode
            _state_exit(returncode)

    def getoutput(self, command, frame=None):
        """``x = !cmd``: its stdout lines as an SList; stderr streams."""
        return self._getoutput(command, frame or sys._getframe(1))

    def _getoutput(self, command, frame):
        command = expand(command, frame)
        returncode, text = run_child(_shell_argv(command), capture=True)
        frame.f_globals["_exit_code"] = returncode
        _state_exit(returncode)
        lines = SList(text.splitlines())
        lines.returncode = returncode
        return lines

    def line_magic(self, name, args, frame=None):
        frame = frame or sys._getframe(1)
        magic = self._line.get(name)
        if magic is None:
            raise NameError("UsageError: Line magic function '%%%s' not found."
                            % name)
        return magic(args, frame)

    def cell_magic(self, name, args, body, first_line, frame=None):
        frame = frame or sys._getframe(1)
        magic = self._cell.get(name)
        if magic is None:
            raise NameError("UsageError: Cell magic function '%%%%%s' not found."
                            % name)
        return magic(args, body, frame, first_line)

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
        import loads the new version."""
        argv = _split_args(expand(args, frame))
        if not argv:
            raise UsageError("%pip needs a pip command: %pip install NAME")
        command = next((arg for arg in argv if not arg.startswith("-")), "")
        before = _distributions()
        names = set()
        if command == "uninstall":
            for arg in argv[argv.index(command) + 1:]:
                if _normalize(arg) in before:
                    names |= _import_names(before[_normalize(arg)][1])
        returncode, _ = run_child(
            [sys.executable, "-m", "pip"] + argv,
            env={"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1",
                 "PIP_YES": "1"})
        import importlib
        importlib.invalidate_caches()
        after = _distributions()
        changed = sorted(key for key, (_, dist) in after.items()
                         if key not in before
                         or _signature(before[key][1]) != _signature(dist))
        for key in changed:
            names |= _import_names(after[key][1])
        evicted = _evict(names)
        _state_exit(returncode)
        if evicted:
            print("Note: %s unloaded from sys.modules; the next import loads "
                  "what is installed now" % ", ".join(evicted))
        self._api.emit_status(
            "pip", command=command, returncode=returncode, evicted=evicted,
            changed=["%s==%s" % (after[key][0], after[key][1].version)
                     for key in changed],
            removed=sorted(before[key][0] for key in set(before) - set(after)))

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
        _state_exit(returncode)

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


# -- %pip: which modules a distribution provides ----------------------------------

def _normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _distributions():
    """Installed distributions as {normalized name: (name, distribution)};
    the first on sys.path (the one imports see) wins."""
    from importlib import metadata
    found = {}
    for dist in metadata.distributions():
        try:
            name = dist.metadata["Name"]
        except Exception:
            continue
        if name and _normalize(name) not in found:
            found[_normalize(name)] = (name, dist)
    return found


def _signature(dist):
    return dist.version, str(getattr(dist, "_path", ""))


def _import_names(dist):
    """The top-level import names of *dist*: top_level.txt, plus the
    packages and modules its RECORD lists (wheels without top_level.txt)."""
    names = set()
    try:
        text = dist.read_text("top_level.txt") or ""
    except Exception:
        text = ""
    for line in text.split():
        names.add(line.strip().split("/")[0])
    try:
        files = dist.files or []
    except Exception:
        files = []
    for path in files:
        parts = path.parts
        if not parts or parts[0] in ("..", "__pycache__"):
            continue
        top = parts[0]
        if top.endswith((".dist-info", ".egg-info", ".data")):
            continue
        if len(parts) == 1:
            stem, dot, suffix = top.partition(".")
            if suffix.split(".")[-1] not in ("py", "pyc", "so", "pyd"):
                continue
            top = stem
        names.add(top)
    return {name for name in names if name.isidentifier()}


def _evict(names):
    """Remove these top-level modules and their submodules from sys.modules
    (never standard-library ones, nor the runner's); the names that were
    imported."""
    protected = set(getattr(sys, "stdlib_module_names", ())) | set(
        sys.builtin_module_names) | {__name__.partition(".")[0]}
    names = set(names) - protected
    evicted = set()
    for module in list(sys.modules):
        top = module.partition(".")[0]
        if top in names:
            del sys.modules[module]
            evicted.add(top)
    return sorted(evicted)
