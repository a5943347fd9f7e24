"""The zygote: imports a preload list once and forks every new kernel from itself.

``runner.py`` becomes the zygote when the host sets ``PYKERNEL_ZYGOTE`` (the preload
list, as JSON).  It imports the runner package and the preload list, then serves fork
requests on fd 0, a unix SOCK_SEQPACKET socket to the host: one JSON object per
message, with file descriptors alongside (SCM_RIGHTS).  docs/protocol.md#zygote
describes the messages.

A module of the package, not a script of its own: the zygote is ``runner.py``, started
as every kernel is, and ``serve`` returns in each forked kernel, which goes on to the
runner's ``main()`` in the same interpreter, with the package already imported (its
pages shared with the zygote) and this module's bytecode, like the rest of the
package's, from the host's cache.

A forked kernel shares the zygote's pages copy-on-write, so pandas imported once costs
every later kernel nothing to start and little memory.  What a fork must redo is redone
in the child: the pipes to the host, the cwd and variables, the session, the sandbox,
the random seeds.  The zygote itself starts no thread (a fork copies only the thread
that forks), and says in ``ready`` how many threads its imports left running.

Isolation.  The zygote runs in the namespaces the host gave it (user, PID, mount with
the runner read-only, IPC, and the network one when the network is off), but not under
Landlock or seccomp: Landlock forbids mount(2), seccomp refuses new namespaces, and
every kernel makes both.  So each kernel gets namespaces of its own beneath the
zygote's (user, PID, mount, IPC, network when off): the zygote clones its init straight
into them (``_clone_into_namespaces``).  The init builds the filesystem view the host
decided for it (the steps of ``src/sandbox/view.rs``, its own ``/proc`` among them),
joins a fresh keyring, drops every capability, enters the Landlock domain the host
built for it (passed with the request) and installs the host's seccomp filters, then
forks the kernel, PID 2, which inherits all of it, before any cell runs: the same
sandbox, step for step, as a spawned kernel's.  Kernels see neither the zygote nor each
other.  The preload imports are the pool owner's modules, never a cell's code, and they
run with no pid of the host or of any kernel in sight.

Exits.  The zygote reaps its kernels, reports each exit, and keeps the zombie (and so
its pid) until the host says ``reap``: the host signals a kernel's process group by
pid, and must never hit a pid that was reused meanwhile.
"""

import json
import os
import select
import socket
import sys

_MAX_MESSAGE = 1 << 20
_MAX_FDS = 8

# Linux constants (the same on every architecture pykernel builds for).
_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MS_REC, _MS_PRIVATE = 1 << 14, 1 << 18
_PR_CAPBSET_DROP = 24
_PR_GET_SECUREBITS, _PR_SET_SECUREBITS = 27, 28
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_SECBIT_NOROOT_AND_LOCKED = 3
_CAP_SETFCAP = 31
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
_OPEN_TREE_CLONE, _MOVE_MOUNT_F_EMPTY_PATH = 1, 4
_MOUNT_ATTR_RDONLY = 1
_MS_RDONLY, _MS_REMOUNT, _MS_BIND = 1, 32, 4096
_O_PATH = 0o10000000
_LANDLOCK_RULE_PATH_BENEATH = 1
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_KEYCTL_JOIN_SESSION_KEYRING = 1
_EPERM, _ENOSYS = 1, 38
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_M_ARENA_MAX = -8
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_SYS_CLONE3 = 435
_SIGCHLD = 17


class _Refused(Exception):
    """A step of a kernel's set-up failed: what it was, with the errno's words."""


def serve(preload, init_of_namespace):
    """Runs the zygote.  Returns only in a forked kernel, which then runs the
    runner's ``main()``; the zygote itself ends when the host closes fd 0."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if os.getpid() == 1:    # in namespaces of its own (see _Zygote.namespaces)
        _narrow_capabilities(libc)
    control = socket.socket(fileno=0)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)        # what the imports print goes nowhere
    os.close(null)
    errors = {}
    for name in preload:
        try:
            __import__(name)
        except BaseException as exc:        # SystemExit, KeyboardInterrupt too
            errors[name] = "%s: %s" % (type(exc).__name__, exc)
    # What every kernel loads on its way to its first cell, loaded here once: its
    # pages are then shared, and a zygote that started before the host's bytecode
    # was ready does not leave each of its kernels compiling them from source.
    from . import lazy, refusals  # noqa: F401
    lazy.prelude_code(os.path.join(lazy.RUNNER_DIR, "prelude.py"))
    # Enabled once here, so that a kernel's own enable (onto its diagnostics fd) only
    # points it elsewhere: enabling allocates the alternate signal stack and installs
    # the handlers, some 85 pages written in each kernel (~0.3 ms) otherwise.  A crash
    # of the zygote, or of a kernel before it has its own, goes to fd 2: the zygote's
    # log, or that kernel's stderr.
    import faulthandler
    faulthandler.enable(2)
    import gc
    import threading
    # What the imports made is never collected here: kept out of the collector's sight,
    # a kernel's collections do not touch (and so copy) the pages these objects share.
    gc.collect()
    gc.freeze()
    zygote = _Zygote(control, libc, init_of_namespace)
    _send(control, {
        "op": "ready", "errors": errors, "watch": _watched_files(),
        "threads": len(os.listdir("/proc/self/task")),
        "pythonThreads": threading.active_count(),
        "namespaces": zygote.namespaces,
    })
    return zygote.loop()


def _watched_files():
    """What the zygote's imports depend on, as [path, mtime_ns, size]: every directory
    on sys.path (pip adds and removes entries there) and the file of every module
    loaded from outside the standard library.  The host compares them before each
    fork: after a ``%pip install`` or an edited module, new kernels need a new zygote
    (the old one's imports are stale)."""
    stdlib = os.path.dirname(os.__file__)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and not path.startswith(stdlib):
            paths.append(path)
    watched = []
    for path in sorted(set(paths)):
        try:
            st = os.stat(path)
        except OSError:
            continue
        watched.append([path, st.st_mtime_ns, st.st_size])
    return watched


def _narrow_capabilities(libc):
    """Keeps CAP_SETFCAP alone, before anything is imported.

    The host starts the zygote keeping the capabilities it has in its own user
    namespace (all of them when the host runs as root, none otherwise), because a
    kernel's user namespace may map root only if the process that made it had
    CAP_SETFCAP.  Nothing else is needed: each kernel gets every capability in the
    namespaces it makes itself, and drops them all."""
    for cap in range(64):
        if cap != _CAP_SETFCAP:
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)     # EINVAL past the last one
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    libc.prctl(_PR_SET_SECUREBITS, _SECBIT_NOROOT_AND_LOCKED, 0, 0, 0)
    _set_capabilities(libc, 1 << _CAP_SETFCAP)


def _set_capabilities(libc, mask):
    """Sets the effective and permitted sets to `mask` (capabilities 0-31), none
    inheritable."""
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    data = (Data * 2)()
    data[0].effective = data[0].permitted = mask
    return libc.capset(ctypes.byref(Header(_LINUX_CAPABILITY_VERSION_3, 0)), data)


def _send(control, message, fds=()):
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(control, [data], list(fds))
    else:
        control.send(data)


class _Zygote:
    def __init__(self, control, libc, init_of_namespace):
        self.control = control
        self.libc = libc
        self.init_of_namespace = init_of_namespace
        # The host made us the init of a PID namespace when the sandbox has them; then
        # every kernel gets namespaces of its own too.
        self.namespaces = os.getpid() == 1
        # Whose ids a kernel's user namespace maps (its own, once in it, are unmapped
        # until it writes its maps).
        self.uid, self.gid = os.getuid(), os.getgid()
        # False once clone3 was refused: the kernels are forked as before.
        self.clone3 = self.namespaces
        self.children = {}          # pidfd -> (request id, pid)
        self.zombies = {}           # request id -> (pidfd, pid): reported, not reaped
        self.poller = select.poll()

    def loop(self):
        poller = self.poller
        poller.register(self.control, select.POLLIN)
        while True:
            for fd, _ in poller.poll():
                if fd == self.control.fileno():
                    try:
                        data, fds, _, _ = socket.recv_fds(self.control, _MAX_MESSAGE, _MAX_FDS)
                    except InterruptedError:
                        continue
                    if not data:
                        os._exit(0)     # the host is gone: so are we, and our kernels
                    try:
                        request = json.loads(data)
                    except ValueError:
                        _close_all(fds)
                        continue
                    if request.get("op") == "fork":
                        kernel = self.fork(request, fds)
                        if kernel is not None:
                            return      # in the forked kernel
                        continue
                    _close_all(fds)
                    if request.get("op") == "reap":
                        self.reap(request.get("id"))
                elif fd in self.children:
                    poller.unregister(fd)
                    self.report_exit(fd)

    def fork(self, request, fds):
        """Forks the kernel of `request`.  Returns True in the kernel; in the zygote,
        answers ``forked`` (with a pidfd) or ``failed`` and returns None."""
        rid = request.get("id")
        report_r, report_w = os.pipe()
        network = bool((request.get("sandbox") or {}).get("network", True))
        cloned = False
        try:
            if self.clone3 and _single_threaded():
                child = _clone_into_namespaces(_namespace_flags(network))
                cloned = child is not None
                if not cloned:
                    self.clone3 = False
            if not cloned:
                child = os.fork()
        except OSError as exc:
            os.close(report_r)
            os.close(report_w)
            _close_all(fds)
            _send(self.control, {"op": "failed", "id": rid, "error": "fork: %s" % exc})
            return None
        if child == 0:
            os.close(report_r)
            try:
                self.become_kernel(request, fds, report_w, network, cloned)
            except BaseException as exc:
                if not isinstance(exc, _Refused):
                    # Name the step: the line of set-up it failed at.
                    tb = exc.__traceback__
                    while tb.tb_next is not None:
                        tb = tb.tb_next
                    exc = "%s (at line %d of %s)" % (exc, tb.tb_lineno, tb.tb_frame.f_code.co_name)
                try:
                    os.write(report_w, ("error:%s\n" % (exc,)).encode())
                finally:
                    os._exit(127)
            return True
        os.close(report_w)
        _close_all(fds)
        report = b""
        while True:     # until every process of the set-up let go of the pipe
            chunk = os.read(report_r, 4096)
            if not chunk:
                break
            report += chunk
        os.close(report_r)
        lines = report.decode("utf-8", "replace").splitlines()
        pid = next((int(l[4:]) for l in lines if l.startswith("pid:")), None)
        error = next((l[6:] for l in lines if l.startswith("error:")), None)
        if self.namespaces and not cloned:
            # The first child only made the namespaces: its child, the kernel's init,
            # is ours now (we are this namespace's init).
            os.waitpid(child, 0)
        else:
            pid = child
        if error is not None or pid is None:
            if pid is not None:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
            _send(self.control, {"op": "failed", "id": rid,
                                 "error": error or "the kernel process did not start"})
            return None
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (rid, pid)
        self.poller.register(pidfd, select.POLLIN)
        _send(self.control, {"op": "forked", "id": rid}, [pidfd])
        return None

    def report_exit(self, pidfd):
        rid, pid = self.children.pop(pidfd)
        try:
            info = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            info = None
        status = None
        if info is not None:
            if info.si_code == os.CLD_EXITED:
                status = {"code": info.si_status}
            else:
                status = {"signal": info.si_status}
        self.zombies[rid] = (pidfd, pid)
        _send(self.control, {"op": "exited", "id": rid, "status": status})

    def reap(self, rid):
        entry = self.zombies.pop(rid, None)
        if entry is None:
            return
        pidfd, pid = entry
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(pidfd)

    # ---- in the forked child -------------------------------------------------------

    def become_kernel(self, request, fds, report_w, network, cloned):
        """Turns this forked child into a kernel: its pipes, place, variables, limits,
        namespaces and sandbox.  Returns in the kernel process.  A `cloned` child is
        already the init of its namespaces; `network` says whether the kernel keeps
        the host's network (the plan's; none: off)."""
        stdin, stdout, stderr = fds[:3]
        rest = list(fds[3:])
        landlock = rest.pop(0) if request.get("landlock") and rest else -1
        sandbox = request.get("sandbox") or {}
        proxy = rest.pop(0) if sandbox.get("proxyPort") and rest else -1
        # fd 0 becomes the kernel's stdin: the socket object must not close it later.
        self.control.detach()
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        keep = {0, 1, 2, report_w, landlock, proxy}
        for fd in _open_fds():
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.control = self.poller = None
        self.children.clear()
        self.zombies.clear()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request.get("env") or {})
        limit = request.get("memoryLimit")
        if limit:
            import resource
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if request.get("arenaMax"):
            # What MALLOC_ARENA_MAX does at exec, for a process that was never exec'd.
            self.libc.mallopt(_M_ARENA_MAX, int(request["arenaMax"]))
        if self.namespaces:
            if cloned:
                self._map_ids()
            else:
                self.enter_namespaces(network, report_w)
            self.set_up_init(network, landlock, sandbox, proxy)
        else:
            os.setsid()
            if request.get("sandbox"):      # none with the sandbox off: nothing changes
                self.confine(landlock, sandbox)
            os.write(report_w, ("pid:%d\n" % os.getpid()).encode())
        if landlock >= 0:
            os.close(landlock)
        if proxy >= 0:
            os.close(proxy)
        os.close(report_w)
        if self.namespaces:
            self.init_of_namespace()    # returns in the kernel, PID 2
        # Kernels share no random state: the `random` module reseeds itself in every
        # fork; numpy's global generator does not.
        _reseed()

    def enter_namespaces(self, network, report_w):
        """Where clone3 is refused: this forked child makes the namespaces, then forks
        their init, which returns; this process ends once it has named the init."""
        self._check(self.libc.unshare(_namespace_flags(network)), "making the kernel's namespaces")
        self._map_ids()
        init = os.fork()
        if init:
            os.write(report_w, ("pid:%d\n" % init).encode())
            os._exit(0)

    def _map_ids(self):
        """Maps the zygote's ids, and no other, in the new user namespace."""
        for path, text in (("/proc/self/setgroups", "deny"),
                           ("/proc/self/uid_map", "%d %d 1\n" % (self.uid, self.uid)),
                           ("/proc/self/gid_map", "%d %d 1\n" % (self.gid, self.gid))):
            with open(path, "w") as f:
                f.write(text)

    def set_up_init(self, network, landlock, sandbox, proxy):
        """In the init of the kernel's PID namespace: its session, filesystem view,
        network and sandbox, which the kernel it forks inherits."""
        libc = self.libc
        os.setsid()
        steps = sandbox.get("view")
        if steps:
            _View(libc, self._check).apply(steps)
        else:
            self._check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None),
                        "making the kernel's mounts private")
            self._check(libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                                   None), "mounting the kernel's /proc")
        if not network:
            _loopback_up()
        if proxy >= 0:
            _send_proxy_listener(proxy, int(sandbox["proxyPort"]))
        self.confine(landlock, sandbox)

    def confine(self, landlock, sandbox):
        """What every kernel gives up before its first cell: the host's keyring, every
        capability, Landlock's domain and the seccomp filters (sandbox/privileges.rs,
        landlock_rules.rs and seccomp.rs say why)."""
        libc = self.libc
        keyctl = sandbox.get("keyctl")
        if keyctl is not None and libc.syscall(keyctl, _KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
            import ctypes
            if ctypes.get_errno() != _ENOSYS:
                self._check(-1, "leaving the host's keyring")
        for cap in range(64):
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)     # EINVAL past the last one
        libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        locked = libc.prctl(_PR_GET_SECUREBITS, 0, 0, 0, 0) & _SECBIT_NOROOT_AND_LOCKED
        if (locked != _SECBIT_NOROOT_AND_LOCKED
                and libc.prctl(_PR_SET_SECUREBITS, _SECBIT_NOROOT_AND_LOCKED, 0, 0, 0) != 0
                and os.geteuid() == 0):
            # A zygote without namespaces gave them up itself (its kernels inherit that);
            # without CAP_SETPCAP a host that is not root has no uid 0 to lock out.
            self._check(-1, "dropping the kernel's capabilities")
        if landlock >= 0:
            access = int(sandbox.get("landlockViewAccess") or 0)
            if access:
                for path in sandbox.get("viewWritable") or ():
                    self._allow_beneath(landlock, os.fsencode(path), access)
            self.landlock(landlock)
        self._check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "setting no_new_privs")
        self._drop_capability_sets()
        for program in sandbox.get("seccomp") or ():
            self._install_seccomp(bytes.fromhex(program))

    def _allow_beneath(self, ruleset, path, access):
        """The view's own mounts the kernel writes (its /dev/shm and /dev/pts, the
        overlay of its environment) in the Landlock ruleset: the host could not name
        them, they did not exist there."""
        import ctypes

        class PathBeneath(ctypes.Structure):
            _pack_ = 1
            _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
        try:
            attr = PathBeneath(access, fd)
            self._check(self.libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH,
                                          ctypes.byref(attr), 0),
                        "granting %s in the kernel's Landlock domain" % path.decode())
        finally:
            os.close(fd)

    def _install_seccomp(self, program):
        import ctypes

        class Program(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        ops = ctypes.create_string_buffer(program, len(program))
        prog = Program(len(program) // 8, ctypes.addressof(ops))
        self._check(self.libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0),
                    "installing the kernel's seccomp filter")

    def landlock(self, fd):
        libc = self.libc
        self._check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
                    "entering the kernel's Landlock domain")
        self._check(libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, fd, 0),
                    "entering the kernel's Landlock domain")

    def _drop_capability_sets(self):
        """A spawned kernel loses its capabilities at exec; a forked one never execs,
        so its sets are emptied here (after Landlock, which needs them or no_new_privs)."""
        self._check(_set_capabilities(self.libc, 0), "dropping the kernel's capabilities")

    def _check(self, result, what):
        if result != 0:
            import ctypes
            errno = ctypes.get_errno()
            raise _Refused("%s: %s" % (what, os.strerror(errno)))


def _namespace_flags(network):
    flags = _CLONE_NEWUSER | _CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC
    if not network:
        flags |= _CLONE_NEWNET
    return flags


def _clone_into_namespaces(flags):
    """clone3(2) with `flags`: returns the child's pid in the zygote, 0 in the child,
    which is the init of a PID namespace of its own; None where clone3 is refused
    (a container's seccomp filter answers ENOSYS or EPERM; then the old way is
    taken, which says what fails if namespaces are what is refused).

    One fork of the zygote's heap, where unshare(2) takes two (a child to unshare,
    which cannot enter the PID namespace it makes, then that namespace's init), each
    copying the page tables of every page the preload imports wrote.  Done as os.fork
    does it: the interpreter's own fork hooks around it, the GIL held throughout
    (ctypes.PyDLL).  What glibc's fork adds (its fork handlers, its locks reset in the
    child) matters only with other threads, and the zygote then forks as before (see
    _single_threaded); the init's own fork of the kernel is glibc's."""
    import ctypes
    api = ctypes.pythonapi
    syscall = ctypes.PyDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    # struct clone_args up to tls: flags, pidfd, child_tid, parent_tid, exit_signal,
    # stack (none: the child goes on on a copy of this one, as after fork), stack_size, tls.
    args = (ctypes.c_uint64 * 8)(flags, 0, 0, 0, _SIGCHLD, 0, 0, 0)
    api.PyOS_BeforeFork()
    pid = syscall(_SYS_CLONE3, ctypes.byref(args), ctypes.sizeof(args))
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    api.PyOS_AfterFork_Parent()
    if pid > 0:
        return pid
    errno = ctypes.get_errno()
    if errno in (_ENOSYS, _EPERM):
        return None
    raise OSError(errno, "clone3: " + os.strerror(errno))


def _single_threaded():
    """Whether the zygote has no thread but this one.  Its imports may have started
    native pools (OpenBLAS), whose fork handlers (pthread_atfork) stop them before a
    fork; a raw clone runs no handler, so the init would inherit a pool whose threads
    it does not have, and hang in that handler when it forks the kernel.  The first
    fork of such a zygote is os.fork()'s, which stops the pool for good: the zygote
    never calls into it again."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


class _View:
    """Builds a forked kernel's filesystem view: the host's steps (``src/sandbox/view.rs``,
    which says what each is for), applied in order in the kernel's new mount namespace."""

    def __init__(self, libc, check):
        import ctypes
        self.ctypes = ctypes
        self.libc = libc
        self.check = check
        self.slots = {}

    def apply(self, steps):
        for step in steps:
            op, args = step[0], step[1:]
            getattr(self, "_" + op.replace("-", "_"))(*args)

    def _mount(self, source, target, fstype, flags, data, what):
        enc = lambda v: None if v is None else v.encode()
        self.check(self.libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), what)

    def _set_attr(self, path, recursive, attr_set, attr_clear, what):
        ctypes = self.ctypes

        class MountAttr(ctypes.Structure):
            _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                        ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

        attr = MountAttr(attr_set, attr_clear, 0, 0)
        self.check(self.libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path.encode(),
                                     _AT_RECURSIVE if recursive else 0, ctypes.byref(attr),
                                     ctypes.sizeof(attr)), what)

    def _private(self):
        self._mount(None, "/", None, _MS_REC | _MS_PRIVATE, None, "making the kernel's mounts private")

    def _read_only(self, path):
        self._set_attr(path, True, _MOUNT_ATTR_RDONLY, 0, "making %s read-only" % path)

    def _writable(self, path):
        self._set_attr(path, False, 0, _MOUNT_ATTR_RDONLY, "making %s writable" % path)

    def _bind(self, source, target):
        self._mount(source, target, None, _MS_BIND | _MS_REC, None,
                    "binding %s at %s" % (source, target))

    def _mask(self, path):
        try:
            self._bind("/dev/null", path)
        except _Refused:
            import ctypes
            import errno
            # The socket went away between the host's look and this kernel's start.
            if ctypes.get_errno() not in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR):
                raise

    def _bind_read_only(self, path, kept):
        self._bind(path, path)
        self._mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | kept, None,
                    "making %s read-only" % path)

    def _clone(self, slot, source):
        fd = self.libc.syscall(_SYS_OPEN_TREE, _AT_FDCWD, source.encode(),
                               _OPEN_TREE_CLONE | _AT_RECURSIVE | os.O_CLOEXEC)
        self.check(0 if fd >= 0 else -1, "keeping %s" % source)
        self.slots[slot] = fd

    def _attach(self, slot, target):
        fd = self.slots.pop(slot)
        try:
            self.check(self.libc.syscall(_SYS_MOVE_MOUNT, fd, b"", _AT_FDCWD, target.encode(),
                                         _MOVE_MOUNT_F_EMPTY_PATH), "mounting %s again" % target)
        finally:
            os.close(fd)

    def _mount_fs(self, fstype, target, flags, data):
        self._mount(fstype, target, fstype, flags, data or None,
                    "mounting a %s at %s" % (fstype, target))

    def _remount(self, target, flags):
        self._mount(None, target, None, _MS_REMOUNT | _MS_BIND | flags, None, "remounting %s" % target)

    def _mkdir(self, path):
        os.mkdir(path, 0o755)

    def _mkfile(self, path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))

    def _symlink(self, target, link):
        os.symlink(target, link)

    def _chdir(self, path):
        os.chdir(path)


def _loopback_up():
    import fcntl
    import struct
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH", fcntl.ioctl(s, _SIOCGIFFLAGS, struct.pack("16sH", b"lo", 0)))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | _IFF_UP))


def _send_proxy_listener(channel, port):
    """Listens on 127.0.0.1:*port* in the kernel's own network namespace and sends the
    listener to the host, which serves it as the kernel's proxy (the host's
    ``src/sandbox/egress_proxy.rs``): no port of the host's is opened."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        with socket.socket(fileno=os.dup(channel)) as to_host:
            socket.send_fds(to_host, [b"l"], [listener.fileno()])
    finally:
        listener.close()


def _open_fds():
    try:
        return sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    except OSError:
        return list(range(3, 256))


def _close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _reseed():
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        try:
            numpy_random.seed()
        except Exception:
            pass
