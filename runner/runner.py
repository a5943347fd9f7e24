"""pykernel's kernel process: ``python -u runner.py``.

Only an entry point.  The runner itself is the ``pykernel_runner`` package next to this
file; in the sandbox this process first becomes the init of the kernel's PID namespace.
Its bytecode comes from the host, compiled once per interpreter and handed over as a
sealed memfd (``PYKERNEL_BYTECODE=fd:<n>``) that nothing can change: a script run as
``__main__`` is compiled again on every start, and compiling the runner would cost more
than the rest of a kernel's start-up.  Nothing on disk is read for it, Python's own
``__pycache__`` included, so bytecode a cell planted anywhere never runs in a later
kernel.  A launched kernel gets it from the far side's supervisor, which forked it with
the bytecode checked and in hand (``__pykernel_bytecode__`` in this module's globals).
"""

import os
import sys


def _init_of_namespace():
    """In the sandbox this process is PID 1 of its own PID namespace, and Linux
    ignores every signal PID 1 sends itself while its action is the default: a
    cell's ``os.kill(os.getpid(), SIGKILL)`` would do nothing.  So PID 1 stays a
    small init, as in a container: it forks the kernel (PID 2, an ordinary
    process), reaps whatever is orphaned to it, and when the kernel ends it ends
    too, which kills everything left in the namespace.  Its exit code is the
    kernel's, or 128 + the signal that killed it (the host reads it back).

    It forks before anything else is loaded, and stays in this interpreter: the
    pages it shares with the kernel cost the kernel some copying as it writes them
    (~2 ms at start), less than a fresh interpreter for the init would cost the
    machine (~9 ms of CPU per kernel, felt when sessions start together)."""
    # The C module: the `signal` wrapper imports enum and more.  SIGINT is held back
    # across the fork: the group's SIGINT is the kernel's, never the init's.
    import _signal
    _signal.pthread_sigmask(_signal.SIG_BLOCK, [_signal.SIGINT])
    kernel = os.fork()
    if kernel == 0:
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, [_signal.SIGINT])
        return
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    # The host's bytecode is the kernel's to read, not the init's to keep.
    bytecode = os.environ.get("PYKERNEL_BYTECODE", "")
    if bytecode.startswith("fd:"):
        try:
            os.close(int(bytecode[3:]))
        except (OSError, ValueError):
            pass
    # The protocol pipes are the kernel's alone: the host learns the kernel is gone when
    # they close, which an init holding copies would put off until it ends.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        if pid == kernel:
            if os.WIFSIGNALED(status):
                os._exit(128 + os.WTERMSIG(status))
            os._exit(os.WEXITSTATUS(status))


# A zygote (pykernel_runner.zygote) is the init of its namespace itself: it forks kernels
# that each make namespaces of their own, and serves until the host goes.
_ZYGOTE = os.environ.pop("PYKERNEL_ZYGOTE", None)
if os.getpid() == 1 and _ZYGOTE is None:
    _init_of_namespace()


def _runner_bytecode():
    """Load every module of the runner's package (and, through ``code_for``, the
    prelude) from the host's sealed bytecode, never from ``__pycache__``; compile
    from source when there is none (the host's first kernel for this interpreter,
    or one that cannot run the compile step) or an entry is missing or unusable."""
    import _imp
    import marshal

    given = os.environ.pop("PYKERNEL_BYTECODE", "")
    # A launched kernel's: the far side's supervisor checked it and forked this
    # process with it in hand (runner/pykernel_far.py); nothing else sets it.
    handed = globals().pop("__pykernel_bytecode__", None)
    ext = sys.modules["_frozen_importlib_external"]
    index, data = {}, b""
    if handed is not None or given.startswith("fd:"):
        try:
            if handed is not None:
                data = handed
            else:
                fd = int(given[3:])
                try:
                    data = os.pread(fd, os.fstat(fd).st_size, 0)
                finally:
                    os.close(fd)
            # "<magic> <name> <offset> <length> ...", then the code objects.
            header, _, data = data.partition(b"\n")
            words = header.decode().split()
            if bytes.fromhex(words[0]) == ext.MAGIC_NUMBER:
                index = {words[i]: (int(words[i + 1]), int(words[i + 2]))
                         for i in range(1, len(words) - 2, 3)}
        except (OSError, ValueError, IndexError):
            index = {}
    origins = {}

    def code_for(name, path):
        at = index.get(name)
        if at:
            try:
                code = marshal.loads(memoryview(data)[at[0]:at[0] + at[1]])
                # Its file name, as a .pyc's is: a launched kernel's bytecode was
                # compiled for another directory (tracebacks and the runner's own
                # frame filter go by it).
                _imp._fix_co_filename(code, path)
                origins[name] = "host"
                return code
            except (ValueError, EOFError, TypeError):
                pass
        origins[name] = "source"
        with open(path, "rb") as f:
            return compile(f.read(), path, "exec", dont_inherit=True)

    class Loader(ext.SourceFileLoader):
        def get_code(self, fullname):
            return code_for(fullname, self.path)

    class Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name.partition(".")[0] != "pykernel_runner":
                return None
            spec = ext.PathFinder.find_spec(name, path)
            if spec is not None and isinstance(spec.loader, ext.SourceFileLoader):
                spec.loader = Loader(spec.loader.name, spec.loader.path)
            return spec

    Finder.code_for = staticmethod(code_for)
    # Where each module's code came from ("host" or "source"), for the tests.
    Finder.origins = origins
    sys.meta_path.insert(0, Finder)


_runner_bytecode()
import pykernel_runner  # noqa: E402

if _ZYGOTE is not None:
    import json
    from pykernel_runner import zygote
    # Returns in each forked kernel, which goes on as any kernel does.
    zygote.serve(json.loads(_ZYGOTE), _init_of_namespace)
pykernel_runner.main()
