"""Sandbox refusals: what the kernel's sandbox refused a cell, named to the host.

The host's ``init`` carries the sandbox's policy (docs/protocol.md#init): the
directories writes are confined to, those kept read-only beneath them, the
hidden paths, what the network reaches.  The sandbox enforces it (a read-only
view, Landlock, a network namespace); this module only notices, while a cell
runs, what the policy refuses, so the agent is told instead of finding a bare
OSError, or nothing at all when a library swallowed it.  Three sources:

* an audit hook (``sys.addaudithook``): opens, file changes, directory
  listings, name lookups and connections, seen before they fail, so a refusal
  the cell's own ``try``/``except`` hides is reported too;
* an OSError that escapes the cell (EROFS, EACCES, EPERM, or ENOENT of a
  hidden path) whose path the policy explains;
* what shell children print (``!cmd``, ``%%bash``, ``%pip``): the usual
  messages of Python and coreutils that name a path the policy explains.

A write is reported when its real path is outside every writable directory or
beneath a read-only one, and the operation could otherwise have happened (its
directory exists; what it removes or changes exists; what it makes does not):
a write that would fail with ENOENT or EEXIST anyway was not refused.  Never
for ``/dev``, the process's own ``/proc`` entries, or ``__pycache__`` (Python
runs without its cache, and every import tries to write it).  A read is
reported when the path is, or is beneath, a hidden entry; a connection, when
the network is not open and the address is not the kernel's own (loopback, its
host name).  Only the cell's own threads count; forked children (os.fork,
multiprocessing) report nothing.

Each distinct refusal becomes, at the end of the cell, one status event
``{op: 'sandbox', denied: 'write'|'read', path}`` or ``{denied: 'connect',
host}``; past MAX_PER_CELL, one ``{denied: 'more', count}`` counts the rest.
An audit hook can never be removed and runs for every audited event of the
process (every import opens files), so it is installed only when the policy can
refuse something, and its first test is one frozenset lookup.
"""

import errno
import os
import sys
import threading

MAX_PER_CELL = 10
_SEEN_LIMIT = 10000     # distinct refusals remembered per cell, to count the rest
_REAL_PATHS_LIMIT = 4096

_WRITE_FLAGS = (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
_NEVER = ("/dev/", "/proc/self/", "/proc/thread-self/")

# The audit events a write check applies to, with where their path and dir_fd
# are and what the operation needs in order to happen: "new" (its directory
# exists, it does not), "existing" (it exists), "create" (its directory exists).
# shutil's events are not here: shutil's work reaches these underneath.
_WRITE_EVENTS = {
    "os.mkdir": ((0, 2, "new"),),
    "os.rename": ((0, 2, "existing"), (1, 3, "create")),
    "os.remove": ((0, 1, "existing"),),
    "os.rmdir": ((0, 1, "existing"),),
    "os.chmod": ((0, 2, "existing"),),
    "os.chown": ((0, 3, "existing"),),
    "os.utime": ((0, 3, "existing"),),
    "os.symlink": ((1, 2, "new"),),
    "os.link": ((1, 3, "new"),),
    "os.truncate": ((0, None, "existing"),),
    "os.setxattr": ((0, None, "existing"),),
    "os.removexattr": ((0, None, "existing"),),
}
_READ_EVENTS = ("os.listdir", "os.scandir")
_NET_EVENTS = ("socket.connect", "socket.sendto", "socket.getaddrinfo")
_EXPLAINED_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT)

_policy = None      # the kernel's _Policy, once init carried one
_cell = None        # the running cell's _Report; None between cells
_current_run = None     # -> the request id of the calling thread
_events = frozenset()   # the audit events the policy can refuse
_hooked = False     # the audit hook is installed (it cannot be removed)
_hides = False      # the policy hides something
_hidden_exact = frozenset()     # the hidden entries, and what is beneath
_hidden_prefixes = ()           # them starts with (for the hook, as locals)
# A path as a cell named it -> its real path (False: never reported), and the
# cwd relative paths were resolved against; both forgotten when the cwd changes
# and when a cell starts (a reported path is checked again before it is).
_real_paths = {}
_cwd = None
_pid_dir = "/proc/%d/" % os.getpid()


class _Policy:
    """The policy from ``init``, in the forms the checks test fastest."""

    def __init__(self, raw):
        writable = raw.get("writable")
        self.writable = None if writable is None else _Tree(writable)
        self.read_only = _Tree(raw.get("readOnly") or ())
        self.hidden = _Tree(raw.get("hidden") or ())
        self.network = raw.get("network") or "open"
        self.allow = [str(name).lower() for name in raw.get("allow") or ()]
        self._own_name = None
        if self.network != "open":
            try:
                import socket   # not otherwise: it costs milliseconds of a start
                self._own_name = socket.gethostname().lower()
            except Exception:
                pass
        events = set()
        if self.writable is not None or self.read_only or self.hidden:
            events.update(_WRITE_EVENTS)
            events.add("open")
        if self.hidden:
            events.update(_READ_EVENTS)
            events.add("open")
        if self.network != "open":
            events.update(_NET_EVENTS)
        if events:
            events.add("os.chdir")      # relative paths resolve against the cwd
        self.events = frozenset(events)

    def refuses_write(self, real):
        if self.read_only.holds(real):
            return True
        return self.writable is not None and not self.writable.holds(real)

    def refuses_name(self, name):
        """Whether looking up or connecting to *name* leaves the kernel."""
        name = name.lower().rstrip(".")
        if name in ("", "localhost", self._own_name) or name.endswith(".localhost"):
            return False
        if name.startswith(("127.", "::ffff:127.")) or name in ("::1", "0.0.0.0", "::"):
            return False
        if self.network == "allow":
            for allowed in self.allow:
                if name == allowed or (allowed.startswith("*.")
                                       and name.endswith(allowed[1:])):
                    return False
        return True


class _Tree:
    """Paths and everything beneath them."""

    def __init__(self, paths):
        paths = [os.path.normpath(str(p)) for p in paths if str(p).startswith("/")]
        self._exact = frozenset(paths)
        self._prefixes = tuple(p.rstrip("/") + "/" for p in paths)

    def __bool__(self):
        return bool(self._exact)

    def parts(self):
        return self._exact, self._prefixes

    def holds(self, path):
        return path in self._exact or path.startswith(self._prefixes)


class _Report:
    """The refusals of one cell: each distinct one once, in order."""

    def __init__(self, run):
        self.run = run
        self.lock = threading.Lock()
        self.seen = set()
        self.found = []
        self.more = 0

    def add(self, denied, field, value):
        if _current_run() != self.run:
            return      # a thread of an earlier cell, or the runner's own
        key = (denied, value)
        with self.lock:
            if key in self.seen:
                return
            if len(self.seen) < _SEEN_LIMIT:
                self.seen.add(key)
            if len(self.found) < MAX_PER_CELL:
                self.found.append((denied, field, value))
            else:
                self.more += 1


def install(raw_policy, current_run):
    """Take the policy of ``init``; install the audit hook, once, when it can
    refuse something.  *current_run* gives the calling thread's request id."""
    global _policy, _current_run, _events, _hooked
    global _hides, _hidden_exact, _hidden_prefixes
    policy = _Policy(raw_policy) if isinstance(raw_policy, dict) else None
    _policy = policy if policy is not None and policy.events else None
    _current_run = current_run
    _events = _policy.events if _policy is not None else frozenset()
    _hides = _policy is not None and bool(_policy.hidden)
    if _hides:
        _hidden_exact, _hidden_prefixes = _policy.hidden.parts()
    if _events and not _hooked:
        _hooked = True
        sys.addaudithook(_audit)


def start_cell(run):
    """Refusals from now on are request *run*'s."""
    global _cell, _pid_dir
    _forget_paths()
    _pid_dir = "/proc/%d/" % os.getpid()
    _cell = _Report(run) if _policy is not None else None


def end_cell(emit_status):
    """Report what the cell was refused, one status event each."""
    global _cell
    report, _cell = _cell, None
    if report is None:
        return
    with report.lock:
        found, more = list(report.found), report.more
    for denied, field, value in found:
        emit_status("sandbox", **{"denied": denied, field: value})
    if more:
        emit_status("sandbox", denied="more", count=more)


def note_error(exc):
    """An exception that escapes the cell: its OSError (or one it was raised
    from) is reported when the policy explains it."""
    if _cell is None:
        return
    try:
        for _ in range(5):
            if exc is None:
                break
            if isinstance(exc, OSError) and exc.errno in _EXPLAINED_ERRNOS:
                for name in (exc.filename, exc.filename2):
                    if name is not None and not isinstance(name, int):
                        _explain(name, exc.errno)
            exc = exc.__cause__ or exc.__context__
    except Exception:
        pass    # an exception whose attributes raise: nothing to report


def shell_scanner():
    """A scanner for a shell child's output stream (``feed(text)``), or None
    when nothing can be refused."""
    if _cell is None:
        return None
    return _ShellScanner(_cell)


# the audit hook

def _audit(event, args):
    # Every audited event of the process comes here (each import opens files,
    # compiles, ...): the first test is the cheapest there is, and a read, the
    # most frequent of the events that pass it, costs a lookup or two more.
    if event not in _events:
        return
    report = _cell
    try:
        if event == "open":
            if report is None:
                return
            path, _, flags = args
            if flags & _WRITE_FLAGS:
                _check_write(path, None,
                             "create" if flags & os.O_CREAT else "existing", report)
            elif _hides and path.__class__ is str:
                real = _real_paths.get(path)
                if real is None:
                    real = _real_path(path)
                if real and (real in _hidden_exact or real.startswith(_hidden_prefixes)):
                    report.add("read", "path", real)
            elif _hides:
                _check_read(path, None, report)
        elif event == "os.chdir":
            _forget_paths()
        elif report is None:
            return
        elif event in _WRITE_EVENTS:
            for at, fd_at, needs in _WRITE_EVENTS[event]:
                dir_fd = args[fd_at] if fd_at is not None else None
                _check_write(args[at], dir_fd, needs, report)
        elif event in _READ_EVENTS:
            _check_read("." if args[0] is None else args[0], None, report)
        elif event == "socket.getaddrinfo":
            _on_lookup(args, report)
        else:
            _on_connect(args, report)
    except Exception:
        pass    # a check that fails reports nothing; the cell goes on


def _forget_paths():
    global _cwd
    _real_paths.clear()
    _cwd = None


def _check_write(path, dir_fd, needs, report):
    if isinstance(path, int):
        return
    real = _real_path(path, dir_fd)
    if not real:
        return
    if _hides and _policy.hidden.holds(real):
        report.add("read", "path", real)
        return
    if not _policy.refuses_write(real):
        return
    parent = os.path.dirname(real)
    if os.path.basename(parent) == "__pycache__":
        return
    if needs == "existing":
        if not os.path.lexists(real):
            return
    elif not os.path.isdir(parent) or (needs == "new" and os.path.lexists(real)):
        return
    report.add("write", "path", real)


def _check_read(path, dir_fd, report):
    if isinstance(path, int):
        return
    real = _real_path(path, dir_fd)
    if real and _policy.hidden.holds(real):
        report.add("read", "path", real)


def _on_lookup(args, report):
    host, port = args[0], args[1]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str) or _is_address(host):
        return      # an address is checked when it is connected to
    if _policy.refuses_name(host):
        report.add("connect", "host", _host_port(host, port))


def _on_connect(args, report):
    import socket
    sock, address = args[0], args[1]
    if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6):
        return
    if not isinstance(address, tuple) or len(address) < 2:
        return
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if isinstance(host, str) and _policy.refuses_name(host):
        report.add("connect", "host", _host_port(host, address[1]))


def _is_address(host):
    if ":" in host:
        return True
    parts = host.split(".")
    return len(parts) == 4 and all(part.isdigit() for part in parts)


def _host_port(host, port):
    if ":" in host:
        host = "[%s]" % host
    return host if port in (None, 0, "") else "%s:%s" % (host, port)


# paths

def _real_path(path, dir_fd=None):
    """*path* as an absolute real path, its last component unresolved (it may
    not exist yet, and a symlink there is what the call acts on); False for
    what is never reported."""
    global _cwd
    if not isinstance(path, str):
        path = os.fsdecode(os.fspath(path))
    given = path
    if dir_fd is not None and dir_fd >= 0:
        if not path.startswith("/"):
            path = os.readlink("/proc/self/fd/%d" % dir_fd) + "/" + path
        given = None    # not remembered: the descriptor names the directory
    else:
        real = _real_paths.get(path)
        if real is not None:
            return real
        if not path.startswith("/"):
            if _cwd is None:
                _cwd = os.getcwd()
            path = _cwd + "/" + path
    if path.startswith(_NEVER):
        real = False
    else:
        parent, name = path.rsplit("/", 1)
        if name in ("", ".", ".."):
            real = os.path.realpath(path)
        else:
            real = os.path.realpath(parent or "/").rstrip("/") + "/" + name
        if real.startswith(_NEVER) or real.startswith(_pid_dir):
            real = False
    if given is not None:
        if len(_real_paths) >= _REAL_PATHS_LIMIT:
            _real_paths.clear()
        _real_paths[given] = real
    return real


def _explain(path, code):
    """Report *path*, named by an error with errno *code*, when the policy
    explains that error."""
    report = _cell
    if report is None or _policy is None or code not in _EXPLAINED_ERRNOS:
        return      # EEXIST, ENOTEMPTY, ...: not the sandbox's doing
    try:
        real = _real_path(path)
        if not real:
            return
        if _hides and _policy.hidden.holds(real):
            report.add("read", "path", real)
        elif code == errno.ENOENT or not _policy.refuses_write(real):
            return
        elif code != errno.EROFS and os.path.exists(real) and not os.access(real, os.R_OK):
            return      # a file the user may not read: no write was refused
        elif os.path.basename(os.path.dirname(real)) != "__pycache__":
            report.add("write", "path", real)
    except Exception:
        pass


# what shell children print

_ERRNO_OF_MESSAGE = {
    "Read-only file system": errno.EROFS,
    "Permission denied": errno.EACCES,
    "Operation not permitted": errno.EPERM,
    "No such file or directory": errno.ENOENT,
}
_patterns = None


def _shell_patterns():
    global _patterns
    if _patterns is None:
        import re
        messages = "(%s)" % "|".join(_ERRNO_OF_MESSAGE)
        _patterns = (
            # Python: [Errno 30] Read-only file system: '/path'
            re.compile(r"\[Errno (\d+)\] [^\n:]*: '(/[^'\n]*)'"),
            # coreutils: cannot touch '/path': Read-only file system
            re.compile("[\u2018'\"](/[^\u2019'\"\n]*)[\u2019'\"][^\n]*?: " + messages),
            # /path: Read-only file system (a shell's redirect, cat, ...)
            re.compile(r"(?:^|[\s:])(/[^\s:'\"\u2018\u2019]+): " + messages),
        )
    return _patterns


class _ShellScanner:
    """Finds the messages of refused operations in a child's output, a line at
    a time (a message may be split across reads)."""

    _LINE_LIMIT = 8192

    def __init__(self, report):
        self._report = report
        self._partial = ""

    def feed(self, text, final=False):
        if _cell is not self._report:
            return
        text = self._partial + text
        lines, _, self._partial = text.rpartition("\n")
        if final:
            lines, self._partial = text, ""
        self._partial = self._partial[-self._LINE_LIMIT:]
        if lines and ("/" in lines):
            self._scan(lines)

    def _scan(self, text):
        python, quoted, bare = _shell_patterns()
        for match in python.finditer(text):
            _explain(match.group(2), int(match.group(1)))
        for pattern in (quoted, bare):
            for match in pattern.finditer(text):
                _explain(match.group(1), _ERRNO_OF_MESSAGE[match.group(2)])
