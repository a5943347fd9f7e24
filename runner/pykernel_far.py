"""The far side of a launcher (``docker exec -i``, ``ssh``, ``bwrap``, ...).

The host starts ``<launcher> python3 -u -c <bootstrap> <sha256> <memory> <grace>
<bytecode sha256 or ->``.  The bootstrap finds the far user's cache (see
``Cache``) and takes this file and the runner's files from it when an entry
there has the sha256 the host passed; otherwise it asks the host for them (its
first line says which, ``farPayload``), reads them from stdin and checks their
hash.  Then it runs this with ``FILES`` (alternating names and contents, as
bytes), ``SOURCE`` (this file's text), ``CACHE`` (the cache's directory or
None), ``BODY`` (what was sent, to be cached; None when it came from the cache)
and ``BYTECODE`` (the cached bytecode, when its sha256 is the one the host
passed; this script's code came from it then).  Nothing on the far side is
assumed: no shared filesystem, no pykernel install.

The runner's bytecode is cached too, but only used when the host vouches for
it: the host passes the sha256 it was told (``farBytecode``) by an earlier
start's compile.  A cell runs as the cache's owner and can rewrite any entry;
the hashes the host passes make that harmless (a changed entry is never run:
the runner is asked for again, the bytecode compiled again).

Standalone, outside the runner's package, on purpose: it runs before the
runner exists on the far side (it writes it there), from bytes the bootstrap
compiled, with nothing but the standard library; it is not one of the files
it writes, and no kernel imports it.

Two processes come out of it:

* the kernel: the runner, written to a fresh private directory (mode 0700,
  removed when the kernel ends, never reused, so nothing a cell writes there
  reaches a later kernel), in its own session, reading and writing pipes;
* this supervisor, between the link and the kernel.  Signals do not cross a
  launcher, so the host sends them in band and the supervisor delivers them to
  the kernel's process group; it answers heartbeats itself, so a cell that
  holds the GIL for minutes is not taken for a dead link; when the link closes
  (the host is gone, or killed the launcher) it gives the kernel the grace the
  host gave it and then kills its whole process group; and when the kernel
  ends it says how (``kernelExit``), since a launcher's exit status cannot
  tell ``os._exit(137)`` from SIGKILL.

What a cell moves out of the kernel's group (``setsid``, a daemon's double
fork) ends with the kernel too: on Linux the supervisor is a child subreaper,
so those processes become its children when their parents end, and once the
kernel is gone it kills every process below itself.  Where that is missing
(not Linux) it says so on stderr, and they outlive the kernel.

The supervisor relays bytes, not frames, except that it reads the host's
lines to find its own (``signal``, ``heartbeat``), and writes its frames to
the host only between the kernel's lines.  It never blocks on either side:
the host's frames are kept for a kernel that is not reading, and the kernel's
output waits (the kernel then blocks, as it would on a local pipe) while the
host is not reading.
"""

import os
import sys
# The C module (the interpreter loaded it already): the `signal` wrapper imports enum,
# functools and collections, ~8 ms of CPU taken from the kernel starting beside us.
from _signal import SIGKILL, SIGSTOP

SIGNALS = {b"SIGINT": 2, b"SIGTERM": 15, b"SIGKILL": 9}
# How much of the kernel's output is held for a host that is not reading.
HELD_FOR_HOST = 4 << 20
# How long the runner's compile may keep the far side up after its kernel ended.
COMPILE_WAIT = 30.0


def main():
    payload_sha, memory_limit = sys.argv[1], sys.argv[2]
    grace = float(sys.argv[3]) / 1000
    # How long a dropped link may stay away before the kernel is ended; "-": not at all.
    reattach = sys.argv[5] if len(sys.argv) > 5 else "-"
    reattach = float(reattach) / 1000 if reattach != "-" else None
    # A local launcher (bwrap, unshare) passes the host's environment on; the
    # agent's ssh socket was the launcher's to use, never the kernel's.
    os.environ.pop("SSH_AUTH_SOCK", None)
    if not adopt_orphans():
        sys.stderr.write("pykernel: this far side cannot adopt the kernel's orphans (no "
                         "PR_SET_CHILD_SUBREAPER): a process a cell starts in a session "
                         "of its own (setsid) outlives the kernel\n")
    cache = Cache(CACHE, payload_sha)  # noqa: F821 (given by the bootstrap)
    if BODY is not None:  # noqa: F821 (the runner was sent: keep it for the next start)
        cache.store(cache.runner_name, BODY)  # noqa: F821
    directory = write_runner(FILES)  # noqa: F821 (given by the bootstrap)
    # Bytecode only from a cache that kept the runner from an earlier start (one that
    # is wiped with each kernel would only cost a compile per start), and only what the
    # host vouches for; anything else is compiled again, away from the kernel: to be
    # stored, or, in a cache we may only read (a sandbox's read-only view of it), to
    # vouch for the entry there if it is what the compile makes.
    bytecode, compile_it = None, False
    if cache.directory is not None and BODY is None:  # noqa: F821
        bytecode = BYTECODE  # noqa: F821 (the bootstrap checked it against the host's hash)
        compile_it = bytecode is None and (
            os.access(cache.directory, os.W_OK)
            or os.path.exists(os.path.join(cache.directory, cache.bytecode_name)))
    to_kernel_r, to_kernel_w = os.pipe()
    from_kernel_r, from_kernel_w = os.pipe()
    # A kernel that may outlive its link writes its stderr to us, not to the launcher's
    # pipe: a later link's is the one it must reach.
    errors_r, errors_w = os.pipe() if reattach else (None, None)
    listener = attach_listener(directory) if reattach else None
    supervisor = os.getpid()
    kernel = os.fork()
    if kernel == 0:
        os.dup2(to_kernel_r, 0)
        os.dup2(from_kernel_w, 1)
        if errors_w is not None:
            os.dup2(errors_w, 2)
        for fd in (to_kernel_r, to_kernel_w, from_kernel_r, from_kernel_w, errors_r, errors_w):
            if fd is not None:
                os.close(fd)
        if listener is not None:
            listener.close()
        run_kernel(directory, memory_limit, supervisor, bytecode)
    os.close(to_kernel_r)
    os.close(from_kernel_w)
    if errors_w is not None:
        os.close(errors_w)
    del bytecode
    compiler = start_compiler(cache, SOURCE, FILES) if compile_it else None  # noqa: F821
    supervisor = Supervisor(kernel, to_kernel_w, from_kernel_r, grace, compiler)
    # What the bootstrap read and wrote on the link before us: the link's byte counts,
    # by which a later link resumes both streams, start after them.
    supervisor.received = 0 if BODY is None else len(b"%d\n" % len(BODY)) + len(BODY)  # noqa: F821
    supervisor.sent = supervisor.acked = len(b'{"type":"farPayload","need":%s}\n' % (
        b"false" if BODY is None else b"true"))  # noqa: F821
    if reattach:
        supervisor.keep_for_reattach(reattach, listener, errors_r,
                                     os.path.join(directory, "attach"))
    status = supervisor.run()
    remove_tree(directory)
    os._exit(status)


class Cache:
    """The far user's cache of what the host sends: the runner (``runner-<sha256>``,
    the bytes the bootstrap checked) and its bytecode (``bytecode-<sha256>-<magic>``).
    The bootstrap found the directory (private: the user's own, a real directory,
    nobody else may write it) or None.  What is read from it is checked against a
    hash the host passed: a cell of the same user can change any of it."""

    def __init__(self, directory, payload_sha):
        self.directory = directory
        self.runner_name = "runner-" + payload_sha
        magic = sys.modules["_frozen_importlib_external"].MAGIC_NUMBER.hex()
        self.bytecode_name = "bytecode-%s-%s" % (payload_sha, magic)

    def store(self, name, data):
        """Replaces the entry at once (a temporary file of our own, renamed over it):
        a start that reads it meanwhile sees the old bytes or the new, never part."""
        if self.directory is None:
            return
        temp = os.path.join(self.directory, ".tmp-" + os.urandom(8).hex())
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with open(fd, "wb") as f:
                f.write(data)
            os.rename(temp, os.path.join(self.directory, name))
        except OSError:
            try:
                os.unlink(temp)
            except OSError:
                pass


def compile_runner(source, files):
    """The runner's bytecode as runner.py reads it: a header line (the magic number
    in hex, then each module's name, offset and length) and the marshalled code
    objects.  Their file names are placeholders: runner.py gives each code object
    the path its module is loaded from.  This script's own code comes first, as
    ``pykernel_far``, for the bootstrap (compiling it costs a start ~7 ms), and
    runner.py's is ``__main__``, for ``run_kernel`` (~3 ms); no module has either
    name, so runner.py's loader never takes them for one."""
    import marshal
    ext = sys.modules["_frozen_importlib_external"]
    blob = marshal.dumps(compile(source, "pykernel_far.py", "exec", dont_inherit=True))
    header = [ext.MAGIC_NUMBER.hex(), "pykernel_far", "0", str(len(blob))]
    blobs, offset = [blob], len(blob)
    for name, text in zip(files[::2], files[1::2]):
        name = name.decode()
        if name == "runner.py":
            module = "__main__"
        elif name == "prelude.py":
            module = "pykernel_prelude"
        else:
            module = name[:-len(".py")]
            if module.endswith("/__init__"):
                module = module[:-len("/__init__")]
            module = module.replace("/", ".")
        blob = marshal.dumps(compile(text, "/pykernel-far/" + name, "exec",
                                     dont_inherit=True))
        header += [module, str(offset), str(len(blob))]
        blobs.append(blob)
        offset += len(blob)
    return " ".join(header).encode() + b"\n" + b"".join(blobs)


def start_compiler(cache, source, files):
    """Compiles the runner in a child of its own, beside the kernel (which compiles
    what it imports from source meanwhile), stores it, and says its sha256 on the
    returned pipe: the hash of the bytes it made, not of what the cache holds
    afterwards, so what a cell writes there is never vouched for.  Its pid and the
    pipe's read end, or None."""
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:
        try:
            # Nothing of the link's or the kernel's pipes: the kernel must see its
            # stdin end when the supervisor closes it, not when the compile does.
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            os.closerange(3, write_end)
            os.closerange(write_end + 1, 1 << 16)
            os.nice(10)
            import hashlib
            data = compile_runner(source, files)
            cache.store(cache.bytecode_name, data)
            os.write(write_end, hashlib.sha256(data).hexdigest().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    return pid, read_end


def write_runner(files):
    """The runner's files in a new private directory: the first of $TMPDIR,
    /tmp, /var/tmp, /dev/shm and the home directory that can hold one."""
    bases = [os.environ.get("TMPDIR"), "/tmp", "/var/tmp", "/dev/shm",
             os.path.expanduser("~")]
    errors = []
    for base in filter(None, bases):
        directory = os.path.join(base, "pykernel-far-" + os.urandom(8).hex())
        try:
            os.mkdir(directory, 0o700)
        except OSError as exc:
            errors.append("%s: %s" % (base, exc.strerror))
            continue
        for name, text in zip(files[::2], files[1::2]):
            path = os.path.join(directory, name.decode())
            parent = os.path.dirname(path)
            if not os.path.isdir(parent):
                os.mkdir(parent, 0o700)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with open(fd, "wb") as f:
                f.write(text)
        return directory
    sys.exit("pykernel: no directory on the far side can hold the runner (%s)"
             % "; ".join(errors))


def attach_listener(directory):
    """The socket a later link reaches this supervisor through (``ATTACH`` in
    ``src/start/launcher.rs`` connects to it): in the runner's private directory, so
    only the far user can, and only the host that holds the token is let in.  Bound
    from within the directory, so a long $TMPDIR does not exceed a socket path's
    limit.  None, said on stderr, when it cannot be made (the link is then not
    kept)."""
    import socket
    here = os.open(".", os.O_RDONLY)
    try:
        os.chdir(directory)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind("attach")
        listener.listen(4)
        listener.setblocking(False)
        return listener
    except OSError as exc:
        sys.stderr.write("pykernel: the far side cannot take a later link (%s): a dropped "
                         "link ends the kernel\n" % exc)
        return None
    finally:
        os.fchdir(here)
        os.close(here)


def run_kernel(directory, memory_limit, supervisor, bytecode):
    """Become the kernel: runner.py as ``__main__``, in this interpreter (a
    second one would double the start-up), with the runner's bytecode when the
    cache had it."""
    os.setsid()     # its own group: in-band signals reach it and its children
    die_with(supervisor)
    if memory_limit != "-":
        import resource
        limit = int(memory_limit)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    runner = os.path.join(directory, "runner.py")
    sys.argv = [runner]
    sys.path[0] = directory
    main = type(sys)("__main__")
    main.__file__ = runner
    import builtins
    main.__builtins__ = builtins
    # The checked bytecode, for runner.py to load its modules from: handed over in
    # this process (bytes: nothing can change them), not through a sealed memfd as a
    # local kernel gets it, which would copy it twice (~1 ms).
    main.__pykernel_bytecode__ = bytecode
    sys.modules["__main__"] = main
    try:
        code = bytecode is not None and main_code(bytecode, runner)
        if not code:
            with open(runner, "rb") as f:
                code = compile(f.read(), runner, "exec", dont_inherit=True)
        exec(code, main.__dict__)
    except SystemExit as exc:
        os._exit(exc.code if isinstance(exc.code, int) else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        os._exit(1)
    os._exit(0)


def main_code(bytecode, path):
    """runner.py's code in the checked bytecode (``__main__``), named ``path`` as
    runner.py names its modules' code; None when it is not there."""
    import _imp
    import marshal
    try:
        end = bytecode.index(b"\n")
        words = bytecode[:end].split()
        at = words.index(b"__main__", 1)
        offset = end + 1 + int(words[at + 1])
        code = marshal.loads(memoryview(bytecode)[offset:offset + int(words[at + 2])])
        _imp._fix_co_filename(code, path)
        return code
    except (ValueError, IndexError, EOFError, TypeError):
        return None


def die_with(supervisor):
    """On Linux the kernel is killed when its supervisor ends, however it ends
    (a cell can kill it: same user): nobody would stop the kernel otherwise."""
    if not sys.platform.startswith("linux"):
        return
    try:
        prctl(1, 9)     # PR_SET_PDEATHSIG, SIGKILL
    except Exception:
        return
    if os.getppid() != supervisor:      # it ended before the call
        os._exit(1)


def adopt_orphans():
    """Make this process a child subreaper (Linux 3.4+): a process below it
    whose parent ends becomes its child, not init's, however far it strays
    from the kernel's group and session.  Whether it could."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return prctl(36, 1) == 0    # PR_SET_CHILD_SUBREAPER
    except Exception:
        return False


_prctl = None


def prctl(option, arg):
    """prctl(2) with one argument; raises when it cannot be called.  Through the
    C module ``_ctypes`` alone: the ``ctypes`` package around it costs a start
    ~3 ms to import, before the fork.  The kernel, forked after the supervisor's
    call, finds the function made."""
    global _prctl
    if _prctl is None:
        try:
            import _ctypes

            class Int(_ctypes._SimpleCData):
                _type_ = "i"

            class Function(_ctypes.CFuncPtr):
                _flags_ = _ctypes.FUNCFLAG_CDECL
                _restype_ = Int

            class Library:
                _handle = _ctypes.dlopen(None, 0)

            _prctl = Function(("prctl", Library))
        except Exception:     # another interpreter's _ctypes: the package, then
            import ctypes
            _prctl = ctypes.CDLL(None).prctl
    return _prctl(option, arg, 0, 0, 0)


def end_descendants(within=5.0, spare=None):
    """SIGKILL every process below this one, as Linux's /proc lists them
    (elsewhere it finds none), for at most ``within`` seconds.

    Each is stopped before its children are read, so none can fork a child the
    walk misses, and all of a pass are killed together once stopped.  Nothing
    is reaped during a pass, so no pid it signals can be reused.  Passes repeat
    until this process has no child left: a child list read from /proc can miss
    a process that moves while it is read (a subreaper's new orphan), waitpid
    cannot."""
    import time
    deadline = time.monotonic() + within
    while True:
        found = set()
        parents = [os.getpid()]
        while parents:
            batch = [pid for pid in _children(parents.pop())
                     if pid not in found and pid != spare
                     and _state(pid) not in (None, "Z", "X")]
            for pid in batch:
                try:
                    os.kill(pid, SIGSTOP)
                except OSError:
                    pass
            for pid in batch:
                _wait_stopped(pid, deadline)
            found.update(batch)
            parents.extend(batch)
        for pid in found:
            try:
                os.kill(pid, SIGKILL)
            except OSError:
                pass
        if not _reap_ended(spare) or time.monotonic() >= deadline:
            return
        if not found:
            time.sleep(0.001)   # children still dying, or missed: look again


def _reap_ended(spare=None):
    """Reap every child that has ended; whether any child but ``spare`` is left
    (one that /proc does not list yet then goes to the supervisor's last sweep)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return spare is None or any(c != spare for c in _children(os.getpid()))


def _children(pid):
    """The children of ``pid``, from each of its threads' ``children`` list,
    or (a kernel built without them) from every process's parent."""
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return []
    found = []
    for task in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                found.extend(int(child) for child in f.read().split())
        except FileNotFoundError:
            return _children_by_parent(pid)
        except OSError:
            pass
    return found


def _children_by_parent(pid):
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None and int(stat[1]) == pid:
                found.append(int(name))
    return found


def _stat(pid):
    """``state ppid ...`` of /proc/<pid>/stat (after the command's name,
    which may hold spaces and parentheses), or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().rpartition(b")")[2].decode().split()
    except (OSError, IndexError):
        return None


def _state(pid):
    stat = _stat(pid)
    return stat[0] if stat else None


def _wait_stopped(pid, deadline):
    """Until ``pid`` has stopped or ended; a process in uninterruptible sleep
    stops only when it wakes, so for at most 100 ms."""
    import time
    until = min(deadline, time.monotonic() + 0.1)
    while _state(pid) not in (None, "T", "t", "Z", "X") and time.monotonic() < until:
        time.sleep(0.0005)


def remove_tree(directory):
    for root, dirs, files in os.walk(directory, topdown=False):
        for name in files:
            try:
                os.unlink(os.path.join(root, name))
            except OSError:
                pass
        for name in dirs:
            try:
                os.rmdir(os.path.join(root, name))
            except OSError:
                pass
    try:
        os.rmdir(directory)
    except OSError:
        pass


class Supervisor:
    def __init__(self, kernel, to_kernel, from_kernel, grace, compiler=None):
        import time
        self.kernel = kernel
        self.to_kernel = to_kernel          # None once closed
        self.from_kernel = from_kernel      # None at its end
        self.grace = grace
        self.status = None                  # the kernel's wait status, once reaped
        self.link_open = True
        # The link is gone for good: the kernel has read its stdin's end, or will.
        self.link_ended = False
        # Whether the host has sent anything: a link whose input ends before that is a
        # launcher that gave us no stdin, which the host is told in words.
        self.heard_host = False
        # The host still reads what we write: its stdin to us may have ended (a
        # shutdown closes it after `exit`) while it waits for our end.
        self.output_open = True
        self.kill_at = None                 # when the kernel's group is killed
        self.from_host = bytearray()        # an incomplete line of the host's
        self.for_kernel = bytearray()
        self.for_host = bytearray()
        self.mid_line = False               # the kernel's last byte was not "\n"
        self.own = []                       # our frames, waiting for a line end
        # The runner's compile (start_compiler): its pid, the pipe it says its hash on
        # (None at its end), how long it may take, and what it said.
        self.compiler, self.compiled_out = compiler or (None, None)
        self.compile_until = time.monotonic() + COMPILE_WAIT
        self.compiled = b""
        self.compiled_frame = b""           # for report() when the link has closed
        # The host's nonce for this link (a farNonce line): our farBytecode frame
        # carries it, so the host can tell it from one a cell writes.
        self.nonce = None
        # The link's byte counts (main() sets where they start): what we read from the
        # host, what we wrote to it, and how much of that the host said it has.
        self.received = self.sent = self.acked = 0
        # A kept link (keep_for_reattach): off unless the host asked for it.
        self.reattach = None
        self.errors = None                  # the kernel's stderr, when it comes to us

    def keep_for_reattach(self, grace, listener, errors, path):
        """A link that drops is waited for ``grace`` seconds: the kernel runs on, its
        output is held (up to HELD_FOR_HOST, then it blocks on its pipe), and a later
        link that brings the host's token takes the dropped one's place and resumes both
        streams where the host and we left them.  What we wrote is kept until the
        host says it has it (``farAck``), since a dropped link loses what it carried."""
        self.reattach = grace if listener is not None else None
        self.listener = listener
        self.listener_path = os.fsencode(path)
        self.token = None                   # the host's secret for the next link
        self.detached_until = None          # while the link is away: when to give up
        self.closing = False                # the host said farClose: its end is final
        self.unacked = bytearray()          # written to the host, not yet acknowledged
        self.acked_to_host = self.received  # what our last farAck told the host
        self.uncounted = 0                  # leading bytes of for_host outside the counts
        self.attaching = {}                 # fd -> a connection whose request is awaited
        self.attached = None                # the connection of the link's attach process
        self.errors = errors

    def run(self):
        import select
        import time
        import _signal as signal
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w, self.to_kernel, 1):
            os.set_blocking(fd, False)
        if self.compiled_out is not None:
            os.set_blocking(self.compiled_out, False)
        if self.errors is not None:
            os.set_blocking(2, False)
            os.set_blocking(self.errors, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        # A terminal's Ctrl-C is the kernel's business, the launcher's hang-up
        # or termination is the link's end (a hang-up only its drop when it is kept).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        ended, hung_up = [], []
        signal.signal(signal.SIGTERM, lambda *_: ended.append(True))
        signal.signal(signal.SIGHUP, lambda *_: hung_up.append(True))
        while True:
            self.reap()
            now = time.monotonic()
            compiling = self.compiling(now)
            if hung_up:
                del hung_up[:]
                if self.reattach:
                    self.link_dropped(now)
                else:
                    ended.append(True)
            if ended:
                self.output_open = False
                self.link_closed(now)
            if self.reattach and self.detached_until is not None and now >= self.detached_until:
                self.detached_until = None
                self.link_closed(now)
            waiting = self.reattach and self.detached_until is not None
            if (self.status is not None and self.from_kernel is None and not compiling
                    and not waiting):
                break
            if self.kill_at is not None and now >= self.kill_at:
                if self.status is not None:
                    if not compiling and not waiting:
                        break   # its output is still held open by something that escaped
                    self.kill_at = now + 0.1    # look again once the compile is done
                else:
                    self.signal_kernel(9)
                    self.kill_at = now + 1
            poller = select.poll()
            poller.register(wake_r, select.POLLIN)
            if self.link_open:
                poller.register(0, select.POLLIN)
            if self.from_kernel is not None and self.held() < HELD_FOR_HOST:
                poller.register(self.from_kernel, select.POLLIN)
            if self.for_host and self.link_open:
                poller.register(1, select.POLLOUT)
            if self.for_kernel and self.to_kernel is not None:
                poller.register(self.to_kernel, select.POLLOUT)
            if compiling:
                poller.register(self.compiled_out, select.POLLIN)
            if self.reattach:
                if not self.link_ended:
                    poller.register(self.listener, select.POLLIN)
                for fd in self.attaching:
                    poller.register(fd, select.POLLIN)
            if self.errors is not None:
                poller.register(self.errors, select.POLLIN)
            wait = None if self.kill_at is None else max(0, self.kill_at - now)
            if compiling:
                wait = max(0, min(self.compile_until - now, 1e9 if wait is None else wait))
            if waiting:
                until = max(0, self.detached_until - now)
                wait = until if wait is None else min(wait, until)
            for fd, event in poller.poll(None if wait is None else wait * 1000):
                if fd == wake_r:
                    os.read(wake_r, 512)
                elif fd == 0:
                    self.read_host()
                elif fd == self.from_kernel:
                    self.read_kernel()
                elif fd == 1:
                    self.write_host()
                elif fd == self.to_kernel:
                    self.write_kernel()
                elif fd == self.compiled_out:
                    self.read_compiler()
                elif fd == self.errors:
                    self.relay_errors()
                elif not self.reattach:
                    pass
                elif fd == self.listener.fileno():
                    self.accept_attach()
                elif fd in self.attaching:
                    self.read_attach(fd)
        # A second sweep, for what the first one ran out of time for.
        end_descendants()
        return self.report()

    def held(self):
        """The kernel's output we hold: not yet written, and (a kept link) written
        but not yet acknowledged."""
        return len(self.for_host) + (len(self.unacked) if self.reattach else 0)

    def reap(self):
        # Orphans of the kernel's are ours to reap too when we are a PID
        # namespace's init (`unshare --pid`, `bwrap --unshare-pid --as-pid-1`).
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.kernel:
                self.status = status
                # What it started ends with it, as when a local kernel is shut down,
                # also what left its group (adopted by this subreaper meanwhile); the
                # compile is let finish while the host listens.
                self.signal_kernel(9)
                end_descendants(spare=self.compiler if self.output_open else None)
                import time
                self.kill_at = time.monotonic() + 2

    def signal_kernel(self, number):
        try:
            os.killpg(self.kernel, number)
        except OSError:
            pass

    # the host's side

    def read_host(self):
        import time
        try:
            data = os.read(0, 1 << 18)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if not self.heard_host:
                sys.stderr.write("pykernel: the link closed before the host sent anything: "
                                 "the launcher gives the far side no stdin (docker, podman "
                                 "and kubectl exec need -i)\n")
            self.link_dropped(time.monotonic())
            return
        self.heard_host = True
        self.received += len(data)
        start = len(self.from_host)
        self.from_host += data
        end = self.from_host.rfind(b"\n", start)
        if end < 0:
            return
        lines = self.from_host[:end + 1]
        del self.from_host[:end + 1]
        heartbeat = False
        for line in bytes(lines).split(b"\n")[:-1]:
            line += b"\n"
            if line.startswith(b'{"type":"signal"'):
                name = line.partition(b'"signal":"')[2].partition(b'"')[0]
                if name in SIGNALS and self.status is None:
                    self.signal_kernel(SIGNALS[name])
            elif line.startswith(b'{"type":"heartbeat"'):
                self.send_own(line)
                heartbeat = True
            elif line.startswith(b'{"type":"farNonce"'):
                nonce = line.partition(b'"nonce":"')[2].partition(b'"')[0]
                if self.nonce is None and nonce.isalnum():
                    self.nonce = nonce
                    self.report_compiled()
                    token = line.partition(b'"token":"')[2].partition(b'"')[0]
                    if self.reattach and len(token) >= 32 and token.isalnum():
                        self.token = token
                        # Where a later link finds us, in hex: a path may hold anything.
                        self.send_own(b'{"type":"farAttach","path":"%s","nonce":"%s"}\n'
                                      % (self.listener_path.hex().encode(), self.nonce))
            elif line.startswith(b'{"type":"farAck"'):
                if self.reattach:
                    self.host_has(line)
            elif line.startswith(b'{"type":"farClose"'):
                if self.reattach:
                    self.closing = True
            else:
                self.for_kernel += line
        if self.reattach and self.nonce is not None and (
                heartbeat or self.received - self.acked_to_host >= 1 << 16):
            self.acked_to_host = self.received
            self.send_own(b'{"type":"farAck","received":%d,"nonce":"%s"}\n'
                          % (self.received, self.nonce))
        self.write_kernel()

    def link_dropped(self, now):
        """The link ended: for good, unless it is kept (see keep_for_reattach) and
        the host did not say it is closing it."""
        if (not self.reattach or self.closing or self.token is None or self.link_ended):
            self.link_closed(now)
            return
        if not self.link_open:
            return
        self.link_open = False
        self.output_open = False
        self.detached_until = now + self.reattach
        # Let go of the dropped link's pipes, so what carried it can end.
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        os.set_blocking(1, False)
        if self.attached is not None:
            self.attached.close()
            self.attached = None

    def link_closed(self, now):
        """The host is gone: the kernel reads the end of its stdin (and ends,
        as a local kernel does) and gets the grace to do so before its group
        is killed."""
        if self.link_ended:
            return
        self.link_ended = True
        self.link_open = False
        self.for_host.clear()
        self.own.clear()
        if self.reattach:
            self.detached_until = None
            self.unacked.clear()
            for fd in list(self.attaching):
                self.attaching.pop(fd).close()
        if not self.for_kernel:
            self.close_to_kernel()
        if self.kill_at is None or self.kill_at > now + self.grace:
            self.kill_at = now + self.grace

    def write_host(self):
        try:
            written = os.write(1, self.for_host)
        except BlockingIOError:
            return
        except OSError:
            import time
            self.output_open = False
            self.link_dropped(time.monotonic())
            return
        if self.reattach:
            uncounted = min(written, self.uncounted)
            self.uncounted -= uncounted
            self.unacked += self.for_host[uncounted:written]
            self.sent += written - uncounted
        del self.for_host[:written]

    def send_own(self, line):
        if self.mid_line:
            self.own.append(line)
        else:
            self.for_host += line

    # a kept link (keep_for_reattach)

    def host_has(self, line):
        """A farAck: the host has our bytes up to ``received``; we need not keep them."""
        try:
            received = int(line.partition(b'"received":')[2].partition(b"}")[0])
        except ValueError:
            return
        if self.acked <= received <= self.sent:
            del self.unacked[:received - self.acked]
            self.acked = received

    def accept_attach(self):
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        connection.setblocking(False)
        # A few at a time: a cell of the far user can connect too, and must not
        # make us hold descriptors without end.
        while len(self.attaching) >= 4:
            oldest = next(iter(self.attaching))
            self.attaching.pop(oldest).close()
        self.attaching[connection.fileno()] = connection

    def read_attach(self, fd):
        """An attach process's request (``{"type":"farAttach","token":...,"next":...,
        "received":...}``, the host's line) with its stdin, stdout and stderr: the
        new link.  Taken when the token is the host's; then the next one is
        ``next``, so a token serves one link (a repeated one is refused)."""
        import socket
        connection = self.attaching.pop(fd)
        fds = []
        try:
            request, ancillary, _, _ = connection.recvmsg(
                4096, socket.CMSG_SPACE(3 * 4))
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    import array
                    given = array.array("i")
                    given.frombytes(data[:len(data) - len(data) % given.itemsize])
                    fds.extend(given)
        except OSError:
            request = b""
        reason = self.refusal(request, fds)
        if reason is not None:
            if len(fds) >= 2:
                try:
                    os.write(fds[1], b'{"type":"farRefused","reason":"%s"}\n' % reason)
                except OSError:
                    pass
            for given in fds:
                os.close(given)
            connection.close()
            return
        received = int(request.partition(b'"received":')[2].partition(b"}")[0])
        self.token = request.partition(b'"next":"')[2].partition(b'"')[0]
        for given, fd in zip(fds, (0, 1, 2)):
            os.dup2(given, fd)
        for given in fds:
            os.close(given)
        for fd in (0, 1, 2):
            os.set_blocking(fd, False)
        if self.uncounted:      # an earlier answer not yet written: this one replaces it
            del self.for_host[:self.uncounted]
        if self.attached is not None:
            self.attached.close()
        self.attached = connection      # its process waits for us to let it go
        # Resume our stream where the host's copy ends: what it did not get is sent
        # again, after the answer, which is outside the counts as the request is.
        again = self.unacked[received - self.acked:]
        self.unacked = bytearray()
        self.sent = self.acked = received
        answer = b'{"type":"farAttached","received":%d}\n' % self.received
        self.for_host = bytearray(answer) + again + self.for_host
        self.uncounted = len(answer)
        self.acked_to_host = self.received
        self.link_open = self.output_open = True
        self.detached_until = None
        self.write_host()

    def refusal(self, request, fds):
        """Why an attach request is refused (a word for the host), or None."""
        from _operator import _compare_digest
        if len(fds) != 3 or not request.startswith(b'{"type":"farAttach"'):
            return b"request"
        if self.link_ended:
            return b"gone"
        token = request.partition(b'"token":"')[2].partition(b'"')[0]
        following = request.partition(b'"next":"')[2].partition(b'"')[0]
        if self.token is None or not _compare_digest(token, self.token):
            return b"token"
        if len(following) < 32 or not following.isalnum() or following == token:
            return b"request"
        try:
            received = int(request.partition(b'"received":')[2].partition(b"}")[0])
        except ValueError:
            return b"request"
        if not self.acked <= received <= self.sent:
            return b"range"
        return None

    def relay_errors(self):
        """The kernel's stderr, to the link's stderr when there is one (diagnostics:
        dropped when nobody can take them)."""
        try:
            data = os.read(self.errors, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            os.close(self.errors)
            self.errors = None
            return
        if self.link_open:
            try:
                os.write(2, data)
            except OSError:
                pass

    # the runner's compile

    def compiling(self, now):
        """Whether the compile is still to be waited for: it has not said its hash,
        the host can still hear it, and it has time left."""
        if self.compiled_out is None:
            return False
        if self.output_open and now < self.compile_until:
            return True
        os.close(self.compiled_out)
        self.compiled_out = None
        return False

    def read_compiler(self):
        try:
            data = os.read(self.compiled_out, 128)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.compiled += data
            return
        os.close(self.compiled_out)
        self.compiled_out = None
        self.report_compiled()

    def report_compiled(self):
        """Tell the host the hash of the bytecode the compile made and stored, once
        it and the host's nonce are both known."""
        if (self.compiled_out is None and len(self.compiled) == 64 and self.compiled.isalnum()
                and self.nonce is not None):
            frame = (b'{"type":"farBytecode","sha256":"%s","nonce":"%s"}\n'
                     % (self.compiled, self.nonce))
            self.compiled = b""
            if self.link_open:
                self.send_own(frame)
            else:
                self.compiled_frame = frame

    # the kernel's side

    def read_kernel(self):
        try:
            data = os.read(self.from_kernel, 1 << 18)
        except OSError:
            data = b""
        if not data:
            os.close(self.from_kernel)
            self.from_kernel = None
            return
        if self.link_ended:
            return      # nobody to tell; read on so the kernel is not stuck
        if self.own and self.mid_line:
            end = data.find(b"\n")
            if end >= 0:
                self.for_host += data[:end + 1]
                data = data[end + 1:]
                self.mid_line = False
        if self.own and not self.mid_line:
            self.for_host += b"".join(self.own)
            self.own.clear()
        if data:
            self.for_host += data
            self.mid_line = not data.endswith(b"\n")
        if self.link_open:
            self.write_host()

    def write_kernel(self):
        if self.to_kernel is None:
            self.for_kernel.clear()
            return
        try:
            written = os.write(self.to_kernel, self.for_kernel)
        except BlockingIOError:
            return
        except OSError:     # the kernel is gone
            self.for_kernel.clear()
            self.close_to_kernel()
            return
        del self.for_kernel[:written]
        if not self.for_kernel and self.link_ended:
            self.close_to_kernel()

    def close_to_kernel(self):
        if self.to_kernel is not None:
            os.close(self.to_kernel)
            self.to_kernel = None

    def report(self):
        """Tell the host how the kernel ended, and end the same way."""
        if self.compiled_frame and self.output_open:
            # The host closed its side (a shutdown) but reads on until we end.
            try:
                os.set_blocking(1, True)
                os.write(1, (b"\n" if self.mid_line else b"") + self.compiled_frame)
            except OSError:
                pass
        status = self.status
        if os.WIFSIGNALED(status):
            code, signal, exit_code = "null", os.WTERMSIG(status), 128 + os.WTERMSIG(status)
        else:
            code = exit_code = os.WEXITSTATUS(status)
            signal = "null"
        if self.link_open:
            frame = ('{"type":"kernelExit","code":%s,"signal":%s}\n'
                     % (code, signal)).encode()
            if self.mid_line:
                # Our frames that waited for the kernel's line end go first.
                frame = b"\n" + b"".join(self.own) + frame
            self.for_host += frame
            os.set_blocking(1, True)
            try:
                while self.for_host:
                    del self.for_host[:os.write(1, self.for_host)]
            except OSError:
                pass
        return exit_code


main()
