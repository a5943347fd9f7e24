"""The kernel process: its start-up, the main loop that runs requests, and
the primitives the prelude builds on.

Threads: the main thread runs init and every cell (so SIGINT raises
KeyboardInterrupt where the user's code is); between requests it reads them
itself, and while one runs a reader thread takes the host's frames
(answering pings itself); two pump threads forward fd 1/2 and a flusher
hands them proxy text (capture); a watchdog ends the process if the host
dies.
"""

import _signal
import builtins
import itertools
import os
import sys
import threading
import time

from . import lazy
from .capture import DRAIN_TIMEOUT, RUN_ATTR, FdCapture, Output, StreamProxy
from .cells import INTERNAL_FILES, Cells, completeness
from .channel import Channel, decode_json, diag, safe_str, use_diag_fd
from .patches import PatchOnImport, flushing_first, write_after_pending
from .requests import PendingCall, Requests
from .signals import interrupts
from .stdin import NoStdin, StdinNotImplementedError, refuse_getpass

_EXIT_DRAIN_TIMEOUT = 0.5   # bound on waiting for fd output when the cell calls os._exit()
_ATEXIT_TIMEOUT = 5.0       # bound on the atexit handlers run at a shutdown the host asked for
_WATCHDOG_INTERVAL = 0.25
_WARM_UP_WHEN_IDLE = 0.05   # seconds without a request before the warm-up
_UNSET = object()
DEFAULT_AGENT = "deep"      # agent() without agent=, when the host sets no defaultAgent

_current_thread = threading.current_thread
_os_exit = os._exit


class PreludeAPI:
    """The runner's primitives, injected into the prelude as ``__pykernel__``."""

    def __init__(self, kernel):
        self.send_display = kernel.send_display
        self.send_clear = kernel.send_clear
        self.emit_status = kernel.emit_status
        self.bridge_call = kernel.bridge_call
        self.build_bundle = lazy.build_bundle
        self.display = lazy.display
        self.hidden_names = kernel.hidden_names
        self.status_mime = kernel.status_mime
        self.env_prefix = kernel.env_prefix
        self.kv_path = kernel.kv_path       # the session's kv store file, or None
        self.default_agent = kernel.default_agent   # agent() without agent=
        self.kv_via_host = kernel.kv_via_host   # the store is reached by bridge calls
        self.namespace = kernel.namespace
        self.capture_frames = kernel.capture_frames
        self.reload_prelude = kernel.reload_prelude

    def __repr__(self):
        return "<pykernel runner API>"


class _Outcome:
    __slots__ = ("status", "cancelled", "last_frame")

    def __init__(self):
        self.status = "ok"
        self.cancelled = False
        self.last_frame = None  # the result or error, sent with `done`


class Kernel:
    """The kernel process: its channel and state, the main loop that runs
    requests, and the primitives the prelude builds on."""

    def __init__(self):
        self.pid = os.getpid()
        self._forked = False            # True in a child made by os.fork()
        self._parent = os.getppid()
        self._proto_in = os.dup(0)      # os.dup: non-inheritable
        proto_out = os.dup(1)
        self._diag_fd = os.dup(2)
        use_diag_fd(self._diag_fd)
        self._channel = Channel(proto_out, self._host_gone)
        self._output = Output(self._channel)

        self.running = None             # id of the request being executed
        self._request_env = None        # what its env changed, undone after it
        self._main_thread = threading.main_thread()
        self._stdin_requested = False
        self.execution_count = 0
        self._hidden_cells = itertools.count(1)
        self._cells = Cells(self._magics_api)
        self._warmed_up = False
        self._requests = Requests(self._proto_in, self._dispatch, self.terminate)
        self._calls = {}
        self._call_ids = itertools.count(1)
        self._seen_changed = threading.Condition(threading.Lock())

        self.namespace = None
        self.hidden_names = set()
        self.status_mime = "application/x-pykernel-status"
        self.env_prefix = "PYKERNEL_"
        self.kv_path = None
        self.kv_via_host = False
        self.default_agent = DEFAULT_AGENT
        self._prelude_path = None
        self._refusals = None           # the refusals module, in a sandboxed kernel
        # A child may hold fds 1/2 (a subprocess, a fork): they get fresh pipes before
        # the next cell, so that what the child writes later is not that cell's.
        self._child_started = False

        self._redirect_fds()
        self._patch_process()

    # start-up

    def _redirect_fds(self):
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.close(null)
        self._null_rdev = os.fstat(0).st_rdev
        running = self._get_running
        self._captures = [
            FdCapture(1, "stdout", self._channel, running, self._seen_changed),
            FdCapture(2, "stderr", self._channel, running, self._seen_changed),
        ]
        for capture in self._captures:
            self._output.attach(capture)
        sys.stdin = NoStdin(self._note_stdin_request)
        sys.stdout = StreamProxy("stdout", 1, self._output, running)
        sys.stderr = StreamProxy("stderr", 2, self._output, running)
        self._streams = (sys.stdin, sys.stdout, sys.stderr)

    def _repair_streams(self):
        """Undo what an earlier cell broke: fds 0/1/2 closed or replaced, and
        sys.stdin/stdout/stderr replaced by something that cannot be used.  A
        working replacement (a file, a StringIO) is the user's choice and stays."""
        try:
            if os.fstat(0).st_rdev != self._null_rdev:
                raise OSError
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != 0:
                os.dup2(null, 0)
                os.close(null)
            else:
                os.set_inheritable(0, True)
        for capture in self._captures:
            capture.restore()
        for name, proxy, needed in (("stdin", self._streams[0], "readline"),
                                    ("stdout", self._streams[1], "write"),
                                    ("stderr", self._streams[2], "write")):
            current = getattr(sys, name, None)
            if current is not proxy and not callable(getattr(current, needed, None)):
                setattr(sys, name, proxy)

    def _patch_process(self):
        os.environ.setdefault("MPLBACKEND", "Agg")
        interrupts.install(self._get_running)
        lazy.connect(self.send_display, self._magics_api, self._cells._load_magics)
        builtins.StdinNotImplementedError = StdinNotImplementedError
        # As in IPython, a builtin: pandas looks for it when it is imported.
        builtins.get_ipython = lazy.get_ipython
        _start_thread.original = threading.Thread.start
        threading.Thread.start = _start_thread
        os._exit = _exit_process
        # Text printed before a child starts must reach its pipe first, and the
        # pipes a child may keep are replaced before the next cell.
        before_child = self._before_child
        for name in ("system", "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                setattr(os, name, flushing_first(getattr(os, name), before_child))
        os.write = write_after_pending(os.write, self._output, self._late_write)

        def patch_fork_exec(module):    # subprocess starts children with this
            module.fork_exec = flushing_first(module.fork_exec, before_child)

        def patch_getpass(module):      # rather than open /dev/tty
            module.getpass = refuse_getpass

        patches = {"_posixsubprocess": patch_fork_exec,
                   "getpass": patch_getpass,
                   "matplotlib.pyplot": lazy.patch_pyplot}
        patches.update(dict.fromkeys(lazy.NOTEBOOK_MODULES, lazy.patch_for_notebook))
        PatchOnImport.install(patches)
        os.register_at_fork(before=before_child,
                            after_in_child=self._after_fork_in_child)
        try:
            import faulthandler     # builtin; a crash leaves a trace for the host
            faulthandler.enable(self._diag_fd)
        except Exception:
            pass
        threading.Thread(target=self._watch_parent, name="pykernel-watchdog",
                         daemon=True).start()

    def _get_running(self):
        return self.running

    def _before_child(self):
        self._child_started = True
        self._output.flush()

    def _renew_pipes(self):
        """Give fds 1/2 fresh pipes if a child may still hold the current ones:
        one was started (through Python's calls) since they were made.  Not
        after every cell: that cost each cell ~0.1 ms (bench/late_output.js)."""
        if not self._child_started:
            return
        self._child_started = False
        for capture in self._captures:
            try:
                capture.renew()
            except OSError as exc:
                diag("cannot renew the %s pipe: %s" % (capture.stream, exc))

    def _late_write(self, fd, data):
        """os.write(1 or 2) by a thread of an ended cell: the bytes become that
        cell's text, so they are late output and not the running cell's (fd 1/2
        is the running cell's pipe).  None when they are written as they are."""
        run = getattr(_current_thread(), RUN_ATTR, _UNSET)
        if run is _UNSET or run == self.running or self._forked:
            return None
        if not self._captures[fd - 1].owns_fd():
            return None     # a file the cell put in fd 1/2's place
        view = memoryview(data)     # a TypeError for what os.write refuses
        self._streams[fd].write(bytes(view).decode("utf-8", "replace"))
        return view.nbytes

    # ending

    def terminate(self, host_present=False):
        """Send what is pending, then end the process.

        When the host asked (the `exit` frame) the runner exits with status 0 and the host
        ends whatever is left of the process group; when the host is gone, nobody else
        will, so the whole group goes down with the runner.
        """
        if host_present and "atexit" in sys.modules:
            # A shutdown the host asked for is a normal exit, so atexit handlers run
            # as they would in Jupyter (files flushed, temporary state removed).  On
            # a thread of their own, for at most _ATEXIT_TIMEOUT: this may be the
            # request reader, and a handler that never returns must not keep the
            # runner alive (the host's grace period ends it too, if the host lives).
            # Their failures are printed by atexit.
            handlers = threading.Thread(target=sys.modules["atexit"]._run_exitfuncs,
                                        name="pykernel-atexit", daemon=True)
            try:
                handlers.start()
                handlers.join(_ATEXIT_TIMEOUT)
            except BaseException:
                pass
        try:
            self._drain_output(_EXIT_DRAIN_TIMEOUT)
            self._channel.release()
        except BaseException:
            pass
        if host_present:
            _os_exit(0)
        self._kill_group_and_exit()

    def _kill_group_and_exit(self):
        try:
            # SIGKILL to the whole group, the runner last of all, so no child
            # is orphaned; only when the group is ours (the host made us a
            # session leader), never a group we merely joined.
            if os.getpgid(0) == self.pid:
                os.killpg(self.pid, _signal.SIGKILL)
        finally:
            _os_exit(0)

    def _host_gone(self, exc):
        diag("protocol stdout is gone (%s); exiting" % exc)
        self._kill_group_and_exit()

    def _watch_parent(self):
        while True:
            time.sleep(_WATCHDOG_INTERVAL)
            if self.running is not None:
                # A long request: read the host's frames (an exit) while it runs.
                self._requests.during_request()
            if os.getppid() != self._parent:
                diag("the host process is gone; exiting")
                self.terminate()

    def _after_fork_in_child(self):
        self.pid = os.getpid()
        self._forked = True
        self._channel.disown()
        self._output.after_fork_in_child()
        StreamProxy.write = StreamProxy._write_through
        StreamProxy.flush = lambda self: None
        for fd in (self._proto_in, self._channel.fd):
            try:
                os.close(fd)
            except OSError:
                pass
        for capture in self._captures:
            try:
                capture.close_in_child()
            except OSError:
                pass

    # the protocol's input

    def _dispatch(self, line):
        if not line.strip():
            return
        try:
            request = decode_json(line.decode("utf-8"))
        except Exception as exc:    # the C scanner also raises StopIteration
            diag("ignored a line that is not JSON (%s): %r" % (exc, line[:200]))
            return
        if not isinstance(request, dict):
            diag("ignored a frame that is not an object: %r" % line[:200])
            return
        kind = request.get("type")
        if kind is None and "code" in request:
            kind = request["type"] = "execute"
        if kind in ("execute", "init", "preload", "isComplete"):
            self._requests.put(request)
        elif kind == "reply":
            self._settle_call(request)
        elif kind == "interrupt":
            interrupts.request(request.get("id"))
        elif kind == "ping":
            self._channel.send({"type": "pong", "id": request.get("id")})
        elif kind == "exit":
            self.terminate(host_present=True)
        else:
            diag("ignored a frame of unknown type %r" % (kind,))

    # frames of a request

    def _emit(self, frame, hold=False):
        """Send a request frame after the output written before it."""
        self._drain_output(DRAIN_TIMEOUT)
        self._channel.send(frame, hold)

    def send_display(self, bundle, display_id=None, update=False):
        if not isinstance(bundle, dict):
            raise TypeError("a display bundle is a dict of MIME type to data, "
                            "not %s" % type(bundle).__name__)
        frame = {"type": "display", "id": thread_run(), "bundle": bundle}
        if display_id is not None:
            frame["displayId"] = str(display_id)
        if update:
            frame["update"] = True
        self._emit(frame)

    def send_clear(self, wait=False):
        self._emit({"type": "clear", "id": thread_run(), "wait": bool(wait)})

    def emit_status(self, op, **data):
        data["op"] = op
        self.send_display({self.status_mime: data})

    def capture_frames(self, sink):
        """Offer the running request's frames to *sink* (``%%capture``): a
        frame for which it returns true is not sent.  Output written before
        this call is sent first; calling the returned function sends what
        is written until then to the sink, and ends the capture."""
        run = thread_run()
        channel = self._channel
        outer = channel.divert
        self._drain_output(DRAIN_TIMEOUT)

        def divert(frame):
            if frame.get("id") == run and sink(frame):
                return True
            return outer is not None and outer(frame)

        def stop():
            try:
                self._drain_output(DRAIN_TIMEOUT)
            finally:
                channel.divert = outer

        channel.divert = divert
        return stop

    # the bridge

    def bridge_call(self, name, args=None):
        """Call *name* on the host and block until its reply."""
        if self._forked:
            raise RuntimeError("bridge call %r: not available in a forked "
                               "child process" % (name,))
        run = thread_run()
        if run in interrupts.interrupted_runs:
            raise RuntimeError("bridge call '%s' aborted: eval cell was "
                               "interrupted" % (name,))
        call_id = "py-%d" % next(self._call_ids)
        call = self._calls[call_id] = PendingCall(name, run)
        self._requests.during_request()     # the reply comes while a cell runs
        try:
            self._emit({"type": "call", "id": run, "callId": call_id,
                        "name": name, "args": args})
            call.done.wait()
        finally:
            self._calls.pop(call_id, None)
        if not call.ok:
            raise RuntimeError(call.value)
        return call.value

    def _settle_call(self, reply):
        call = self._calls.get(reply.get("callId"))
        if call is None:
            diag("ignored a reply for unknown call %r" % (reply.get("callId"),))
        elif reply.get("ok"):
            call.settle(True, reply.get("value"))
        else:
            call.settle(False, safe_str(reply.get("error", "bridge call failed")))

    def _abort_calls(self, run):
        for call in list(self._calls.values()):
            if call.run == run:
                call.settle(False, "bridge call '%s' aborted: eval cell was "
                                   "interrupted" % (call.name,))

    # stdin

    def _note_stdin_request(self):
        if thread_run() == self.running:
            self._stdin_requested = True

    # the main loop

    def serve(self):
        while True:
            try:
                request = self._requests.next(
                    None if self._warmed_up else _WARM_UP_WHEN_IDLE)
                if request is None:
                    self._warm_up()
                elif request["type"] == "init":
                    self._init(request)
                elif request["type"] == "preload":
                    self._preload(request)
                elif request["type"] == "isComplete":
                    # On the main thread, between cells: compiling takes the
                    # warnings filters, which a running cell may be using.
                    self._channel.send({"type": "completeness", "id": request.get("id"),
                                        "status": completeness(request.get("code") or "")})
                else:
                    self._execute(request)
            except KeyboardInterrupt:
                # Interrupts are only raised while a cell runs and the cell
                # catches them; this is the last line of defence.
                diag("a late KeyboardInterrupt reached the main loop")

    def _warm_up(self):
        """Import what cells may need, while nothing waits for the kernel."""
        self._warmed_up = True
        import _ast, traceback  # noqa: F401,E401
        self._cells.register_sources()

    def _init(self, request):
        try:
            self._apply_cwd_env(request)
            self.status_mime = request.get("statusMime") or self.status_mime
            self.env_prefix = request.get("envPrefix") or self.env_prefix
            self.kv_path = request.get("kvPath") or None
            self.kv_via_host = bool(request.get("kvViaHost"))
            self.default_agent = request.get("defaultAgent") or DEFAULT_AGENT
            policy = request.get("sandbox")
            if policy is not None or self._refusals is not None:
                from . import refusals  # a kernel without a sandbox never loads it
                refusals.install(policy, thread_run)
                self._refusals = refusals
            sys.argv = [""]
            here = {lazy.RUNNER_DIR,    # runner.py's, the package's parent
                    os.path.dirname(os.path.dirname(os.path.realpath(__file__)))}
            if sys.path and sys.path[0] in here:
                # Imports resolve from the cwd, as in a REPL, and never reach the
                # runner's files: its modules are the package's, found through it.
                sys.path[0] = ""
            self._make_namespace()
            self._main_thread.__dict__[RUN_ATTR] = request.get("id")
            self.running = request.get("id")
            prelude = request.get("prelude")
            if prelude:
                # A launched kernel's runner directory is the far side's own: the
                # host names the prelude relative to it.
                self._load_prelude(os.path.join(lazy.RUNNER_DIR, prelude))
            self._output.flush()
        except BaseException:
            import traceback
            diag("init failed:\n" + traceback.format_exc())
            _os_exit(1)
        finally:
            self.running = None
            self._main_thread.__dict__[RUN_ATTR] = None
        self._channel.send({
            "type": "ready", "id": request.get("id"), "pid": self.pid,
            "python": "%d.%d.%d" % sys.version_info[:3],
            "executable": sys.executable,
        })

    def _preload(self, request):
        """Import the modules a pool's spare keeps ready, as the runner's own:
        nothing enters the user's namespace, and what an import prints belongs to
        this request, which the host discards.  A module that fails is reported,
        not raised: the others are still worth having."""
        errors = {}
        self._main_thread.__dict__[RUN_ATTR] = request.get("id")
        self.running = request.get("id")
        try:
            for name in request.get("modules") or ():
                try:
                    __import__(name)
                except BaseException as exc:     # SystemExit, KeyboardInterrupt too
                    errors[name] = "%s: %s" % (type(exc).__name__, safe_str(exc))
            self._drain_output(DRAIN_TIMEOUT)
        finally:
            self.running = None
            self._main_thread.__dict__[RUN_ATTR] = None
        self._channel.send({"type": "preloaded", "id": request.get("id"),
                            "errors": errors})

    def _make_namespace(self):
        if self.namespace is None:  # a second init replaces the namespace, not this
            self._runner_module = sys.modules.get("__main__")   # keep it alive
        module = type(sys)("__main__")
        module.__builtins__ = builtins
        sys.modules["__main__"] = module
        self.namespace = self._cells.namespace = module.__dict__

    def _load_prelude(self, path):
        code = lazy.prelude_code(path)
        INTERNAL_FILES.add(path)
        self._prelude_path = path
        namespace = self.namespace
        before = set(namespace)
        namespace["__pykernel__"] = PreludeAPI(self)
        exec(code, namespace)
        self.hidden_names.update(set(namespace) - before)

    def _magics_api(self):
        return PreludeAPI(self)

    def reload_prelude(self):
        """Run the prelude again, after ``%reset`` cleared its names."""
        if self._prelude_path:
            self._load_prelude(self._prelude_path)

    @staticmethod
    def _apply_cwd_env(request, changed=None):
        """Apply a request's cwd and env, noting in *changed* what the env was
        before, as {name: (before, set)}, for `_restore_env`: filled as it goes,
        so a variable that cannot be set (a name with '=') leaves the ones set
        before it to be undone."""
        cwd = request.get("cwd")
        if cwd:
            os.chdir(cwd)
        if changed is None:
            changed = {}
        for key, value in (request.get("env") or {}).items():
            if value is not None and not isinstance(value, str):
                value = str(value)
            changed[key] = (os.environ.get(key), value)
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    @staticmethod
    def _restore_env(changed):
        """Undo an execute request's env once it has ended: it is for that
        request only.  A variable the cell itself set since keeps the cell's
        value, as any other change a cell makes does."""
        for key, (before, was_set) in changed.items():
            if os.environ.get(key) != was_set:
                continue
            if before is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = before

    def _execute(self, request):
        run = request.get("id")
        counts = request.get("storeHistory", True) and not request.get("silent")
        if counts:
            self.execution_count += 1
            filename = "<cell %d>" % self.execution_count
        else:
            filename = "<hidden cell %d>" % next(self._hidden_cells)
        self._stdin_requested = False
        if self._child_started:     # a child started between cells
            self._renew_pipes()
        self.running = run
        self._main_thread.__dict__[RUN_ATTR] = run
        refusals = self._refusals
        if refusals is not None:
            refusals.start_cell(run)
        outcome = self._run_cell(request, filename)
        if self._forked:
            _os_exit(0)     # a fork() in the cell returned here: end the child
        if not request.get("silent") and self._figures_may_show():
            # Figures follow the cell's result, as in Jupyter.
            if outcome.last_frame is not None:
                self._emit(outcome.last_frame, hold=True)
                outcome.last_frame = None
            self._show_open_figures(run, outcome)
        if refusals is not None:
            try:
                refusals.end_cell(self.emit_status)
            except Exception as exc:    # a report lost, never the kernel
                diag("reporting the sandbox's refusals failed: %s" % safe_str(exc))
        if run in interrupts.interrupted_runs:
            self._abort_calls(run)
        # One drain for the output before the result (nothing of the cell ran since)
        # and before `done`; the result or error and `done` then leave in one write.
        self._drain_output(DRAIN_TIMEOUT)
        if outcome.last_frame is not None:
            self._channel.send(outcome.last_frame, hold=True)
        if self._request_env:
            self._restore_env(self._request_env)
            self._request_env = None
        # Forget the stop requests of requests that have ended, before `done`: once
        # it is out the host writes the next request, and the reader thread may
        # read that request's `interrupt` frame before this thread gets here.
        interrupts.stop_at_start.clear()
        self._channel.send({"type": "done", "id": run, "status": outcome.status,
                            "executionCount": self.execution_count,
                            "cancelled": outcome.cancelled,
                            "stdinRequested": self._stdin_requested})
        self._main_thread.__dict__[RUN_ATTR] = None
        self.running = None
        interrupts.stop_at_start.discard(run)   # one that came after the clear
        self._requests.after_request()
        if not self._forked:
            # What this cell broke is mended for the next, after its `done` is out.
            self._repair_streams()
            self._renew_pipes()

    @staticmethod
    def _figures_may_show():
        """False while nothing was displayed and pyplot is not imported."""
        return lazy.display_loaded() or "matplotlib.pyplot" in sys.modules

    def _show_open_figures(self, run, outcome):
        """Display the pyplot figures the cell left open, as part of the cell
        (even one that failed, as Jupyter does); interruptible like it."""
        try:
            try:
                interrupts.interruptible = True
                lazy.display_module().end_cell()
            finally:
                interrupts.interruptible = False
        except KeyboardInterrupt as exc:
            if not outcome.cancelled:
                outcome.status = "error"
                outcome.cancelled = True
                self._emit(self._cells.error_frame(run, exc), hold=True)
        except BaseException as exc:
            diag("showing the open figures failed: %s" % safe_str(exc))

    def _run_cell(self, request, filename):
        """Run one cell; report its result or error.  Never raises."""
        outcome = _Outcome()
        try:
            try:
                interrupts.interruptible = True
                # From here on SIGINT raises KeyboardInterrupt in the cell.  One that
                # came earlier was ignored, but its `interrupt` frame, written before
                # it, is in the pipe by now.
                if interrupts.ignored:
                    interrupts.ignored = False
                    self._requests.read_available()
                if request.get("id") in interrupts.stop_at_start:
                    interrupts.interrupted_runs.add(request.get("id"))
                    raise KeyboardInterrupt
                # Informational; it leaves with the next frame, not in a write of its own.
                self._channel.send({"type": "started", "id": request.get("id")}, hold=True)
                self._output.deliver_late()
                self._request_env = {}
                self._apply_cwd_env(request, self._request_env)
                source = request.get("code") or ""
                silent = bool(request.get("silent"))
                counts = request.get("storeHistory", True) and not silent
                lazy.execution_count = self.execution_count + (0 if counts else 1)
                events = lazy.shell_events()
                cell = events.before_cell(source, silent, counts) if events else None
                value = error = None
                compiled = False
                try:
                    body, last, show = self._cells.compile(source, filename)
                    compiled = True
                    if body is not None:
                        self._cells.run(body)
                    if last is not None:
                        value = self._cells.run(last)
                        if show and value is not None and not silent:
                            # An object with _ipython_display_ shows itself, as
                            # IPython's display hook lets it: no result of its own.
                            if not lazy.displays_itself(value):
                                outcome.last_frame = {"type": "result", "id": request.get("id"),
                                                      "bundle": lazy.build_bundle(value)}
                            self._cells.remember_result(value)
                        else:
                            value = None
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    # IPython's post_execute and post_run_cell, after the cell's
                    # value is shown (the shell may have been made by the cell).
                    lazy.execution_count = self.execution_count + 1
                    events = lazy.shell_events()
                    if events is not None:
                        events.after_cell(cell, value, error, compiled)
            finally:
                interrupts.interruptible = False
        except SystemExit as exc:
            if exc.code is not None and exc.code != 0:
                outcome.status = "error"
                outcome.last_frame = self._cells.error_frame(request.get("id"), exc)
        except KeyboardInterrupt as exc:
            outcome.status = "error"
            outcome.cancelled = True
            outcome.last_frame = self._cells.error_frame(request.get("id"), exc)
        except BaseException as exc:
            outcome.status = "error"
            if self._refusals is not None:
                self._refusals.note_error(exc)
            outcome.last_frame = self._cells.error_frame(request.get("id"), exc)
        return outcome

    def _drain_output(self, timeout):
        """Send everything written so far, by proxies and to fds 1/2."""
        if self._forked:
            return
        self._output.flush()
        marked = [(c, c.mark()) for c in self._captures if not c.quiet()]
        deadline = time.monotonic() + timeout
        for capture, token in marked:
            if token is not None:
                capture.wait_seen(token, max(0.0, deadline - time.monotonic()))


_kernel = None


def thread_run():
    """The id of the request the calling thread belongs to."""
    run = getattr(_current_thread(), RUN_ATTR, _UNSET)
    if run is _UNSET:
        return _kernel.running if _kernel is not None else None
    return run


def _start_thread(thread):
    # A thread belongs to the request of the thread that starts it, so its
    # output is framed with that id even after the request has ended.
    thread.__dict__[RUN_ATTR] = thread_run()
    return _start_thread.original(thread)


_start_thread.__name__ = _start_thread.__qualname__ = "start"
_start_thread.__doc__ = threading.Thread.start.__doc__


def _exit_process(status):
    """os._exit that first sends the output the cell wrote."""
    kernel = _kernel
    if kernel is not None and os.getpid() == kernel.pid and not kernel._forked:
        try:
            kernel._drain_output(_EXIT_DRAIN_TIMEOUT)
            kernel._channel.release()
        except BaseException:
            pass
    _os_exit(status)


_exit_process.__name__ = _exit_process.__qualname__ = "_exit"
_exit_process.__doc__ = _os_exit.__doc__


def main():
    global _kernel
    try:
        _kernel = Kernel()
        _kernel.serve()
    except BaseException:
        # A runner bug: stdout/stderr are proxies by now, so report to the
        # host's diagnostics stream before going.
        import traceback
        diag("internal error:\n" + traceback.format_exc())
        _os_exit(70)
