"""The far side of a launcher (``docker exec -i``, ``ssh``, ``bwrap``, ...).

The host starts ``<launcher> python3 -u -c <bootstrap> <sha256> <memory> <grace>``;
the bootstrap reads this file and the runner's files from stdin, checks their
hash and runs this with ``FILES`` (alternating names and contents, as bytes).
Nothing on the far side is assumed: no shared filesystem, no pykernel install.

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

SIGNALS = {b"SIGINT": 2, b"SIGTERM": 15, b"SIGKILL": 9}
# How much of the kernel's output is held for a host that is not reading.
HELD_FOR_HOST = 4 << 20


def main():
    memory_limit, grace = sys.argv[2], float(sys.argv[3]) / 1000
    # A local launcher (bwrap, unshare) passes the host's environment on; the
    # agent's ssh socket was the launcher's to use, never the kernel's.
    os.environ.pop("SSH_AUTH_SOCK", None)
    if not adopt_orphans():
        sys.stderr.write("pykernel: this far side cannot adopt the kernel's orphans (no "
                         "PR_SET_CHILD_SUBREAPER): a process a cell starts in a session "
                         "of its own (setsid) outlives the kernel\n")
    directory = write_runner(FILES)  # noqa: F821 (given by the bootstrap)
    to_kernel_r, to_kernel_w = os.pipe()
    from_kernel_r, from_kernel_w = os.pipe()
    supervisor = os.getpid()
    kernel = os.fork()
    if kernel == 0:
        os.dup2(to_kernel_r, 0)
        os.dup2(from_kernel_w, 1)
        for fd in (to_kernel_r, to_kernel_w, from_kernel_r, from_kernel_w):
            os.close(fd)
        run_kernel(directory, memory_limit, supervisor)
    os.close(to_kernel_r)
    os.close(from_kernel_w)
    status = Supervisor(kernel, to_kernel_w, from_kernel_r, grace).run()
    remove_tree(directory)
    os._exit(status)


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


def run_kernel(directory, memory_limit, supervisor):
    """Become the kernel: runner.py as ``__main__``, in this interpreter (a
    second one would double the start-up)."""
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
    sys.modules["__main__"] = main
    try:
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


def die_with(supervisor):
    """On Linux the kernel is killed when its supervisor ends, however it ends
    (a cell can kill it: same user): nobody would stop the kernel otherwise."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)     # PR_SET_PDEATHSIG, SIGKILL
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
        import ctypes
        return ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0   # PR_SET_CHILD_SUBREAPER
    except Exception:
        return False


def end_descendants(within=5.0):
    """SIGKILL every process below this one, as Linux's /proc lists them
    (elsewhere it finds none), for at most ``within`` seconds.

    Each is stopped before its children are read, so none can fork a child the
    walk misses, and all of a pass are killed together once stopped.  Nothing
    is reaped during a pass, so no pid it signals can be reused.  Passes repeat
    until this process has no child left: a child list read from /proc can miss
    a process that moves while it is read (a subreaper's new orphan), waitpid
    cannot."""
    import signal
    import time
    deadline = time.monotonic() + within
    while True:
        found = set()
        parents = [os.getpid()]
        while parents:
            batch = [pid for pid in _children(parents.pop())
                     if pid not in found and _state(pid) not in (None, "Z", "X")]
            for pid in batch:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except OSError:
                    pass
            for pid in batch:
                _wait_stopped(pid, deadline)
            found.update(batch)
            parents.extend(batch)
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if not _reap_ended() or time.monotonic() >= deadline:
            return
        if not found:
            time.sleep(0.001)   # children still dying, or missed: look again


def _reap_ended():
    """Reap every child that has ended; whether any child is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


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
    def __init__(self, kernel, to_kernel, from_kernel, grace):
        self.kernel = kernel
        self.to_kernel = to_kernel          # None once closed
        self.from_kernel = from_kernel      # None at its end
        self.grace = grace
        self.status = None                  # the kernel's wait status, once reaped
        self.link_open = True
        self.kill_at = None                 # when the kernel's group is killed
        self.from_host = bytearray()        # an incomplete line of the host's
        self.for_kernel = bytearray()
        self.for_host = bytearray()
        self.mid_line = False               # the kernel's last byte was not "\n"
        self.own = []                       # our frames, waiting for a line end

    def run(self):
        import select
        import signal
        import time
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w, self.to_kernel, 1):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        # A terminal's Ctrl-C is the kernel's business, the launcher's hang-up
        # or termination is the link's end.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        ended = []
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda *_: ended.append(True))
        while True:
            self.reap()
            if self.status is not None and self.from_kernel is None:
                break
            now = time.monotonic()
            if ended:
                self.link_closed(now)
            if self.kill_at is not None and now >= self.kill_at:
                if self.status is not None:
                    break   # its output is still held open by something that escaped
                self.signal_kernel(9)
                self.kill_at = now + 1
            poller = select.poll()
            poller.register(wake_r, select.POLLIN)
            if self.link_open:
                poller.register(0, select.POLLIN)
            if self.from_kernel is not None and len(self.for_host) < HELD_FOR_HOST:
                poller.register(self.from_kernel, select.POLLIN)
            if self.for_host and self.link_open:
                poller.register(1, select.POLLOUT)
            if self.for_kernel and self.to_kernel is not None:
                poller.register(self.to_kernel, select.POLLOUT)
            wait = None if self.kill_at is None else max(0, self.kill_at - now)
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
        # A second sweep, for what the first one ran out of time for.
        end_descendants()
        return self.report()

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
                # also what left its group (adopted by this subreaper meanwhile).
                self.signal_kernel(9)
                end_descendants()
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
            self.link_closed(time.monotonic())
            return
        start = len(self.from_host)
        self.from_host += data
        end = self.from_host.rfind(b"\n", start)
        if end < 0:
            return
        lines = self.from_host[:end + 1]
        del self.from_host[:end + 1]
        for line in bytes(lines).split(b"\n")[:-1]:
            line += b"\n"
            if line.startswith(b'{"type":"signal"'):
                name = line.partition(b'"signal":"')[2].partition(b'"')[0]
                if name in SIGNALS and self.status is None:
                    self.signal_kernel(SIGNALS[name])
            elif line.startswith(b'{"type":"heartbeat"'):
                self.send_own(line)
            else:
                self.for_kernel += line
        self.write_kernel()

    def link_closed(self, now):
        """The host is gone: the kernel reads the end of its stdin (and ends,
        as a local kernel does) and gets the grace to do so before its group
        is killed."""
        if not self.link_open:
            return
        self.link_open = False
        self.for_host.clear()
        self.own.clear()
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
            self.link_closed(time.monotonic())
            return
        del self.for_host[:written]

    def send_own(self, line):
        if self.mid_line:
            self.own.append(line)
        else:
            self.for_host += line

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
        if not self.link_open:
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
        if not self.for_kernel and not self.link_open:
            self.close_to_kernel()

    def close_to_kernel(self):
        if self.to_kernel is not None:
            os.close(self.to_kernel)
            self.to_kernel = None

    def report(self):
        """Tell the host how the kernel ended, and end the same way."""
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
                frame = b"\n" + frame
            self.for_host += frame
            os.set_blocking(1, True)
            try:
                while self.for_host:
                    del self.for_host[:os.write(1, self.for_host)]
            except OSError:
                pass
        return exit_code


main()
