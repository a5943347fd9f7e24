"""The Python side of pykernel: runs cells for a host over NDJSON pipes.

The host starts ``python -u runner.py`` in its own session and speaks one JSON
object per line: requests on fd 0, frames back on fd 1, runner diagnostics on
fd 2 (docs/runner-contract.md is the wire contract).  At start-up the runner
moves those three descriptors to private, non-inheritable copies, so nothing a
cell does can read or corrupt protocol lines:

* fd 0 becomes /dev/null, so children and ``input()`` never block on the host;
* fds 1 and 2 become pipes that two pump threads forward as stdout/stderr
  frames, so ``os.system``, subprocesses and C code are captured too;
* ``sys.stdout``/``sys.stderr`` are proxies that frame text per request.

Threads: the main thread runs init and every cell (so SIGINT raises
KeyboardInterrupt where the user's code is); a reader thread takes requests
off the protocol stream (answering pings itself); two pump threads forward fd
1/2; a watchdog ends the process if the host dies; a flusher thread, started
on first output, hands proxy text to the pumps.  Proxy text travels in order
with the pipe's bytes (a marker written into the pipe says where it goes), and
before any frame of a request (display, result, error, done) the runner writes
a marker into each pipe and waits until the pump has passed it: the host sees
output in the order it was written, and all of it before ``done``.

Start-up time is a product feature: only cheap modules are imported at start
(the C parts of json and signal: the Python wrappers import re and enum, some
4 ms in a clean interpreter); ``_ast`` comes with the first cell;
``linecache`` and ``traceback`` (which import re) once the kernel has been
idle for a moment; ``asyncio`` only for a cell that uses top-level ``await``.
Modules the runner patches (getpass, _posixsubprocess) are patched when
something imports them.
"""

import _signal
import builtins
import fcntl as _fcntl
import select as _select
import codecs
import collections
import io
import itertools
import os
import sys
import threading
import time

STDIN_MESSAGE = ("input() is not supported: this kernel has no interactive "
                 "stdin; pass data in code instead")

# The runner's own writes; cells get a wrapped os.write (see _write_after_pending).
_os_write = os.write
_os_writev = os.writev

_FLUSH_INTERVAL = 0.005     # seconds proxy output may wait to be coalesced
_FLUSH_CHARS = 1 << 20      # ... or until this much is waiting: a tight print loop
                            # must not pile up its output in memory
_DRAIN_TIMEOUT = 2.0        # bound on waiting for fd output before `done`
_EXIT_DRAIN_TIMEOUT = 0.5   # the same, when the cell calls os._exit()
_WATCHDOG_INTERVAL = 0.25
_WARM_UP_WHEN_IDLE = 0.05   # seconds without a request before the warm-up
_CO_COROUTINE = 0x0080      # inspect.CO_COROUTINE, without importing inspect
_FUTURE_ANNOTATIONS = 0x1000000     # __future__.annotations.compiler_flag
_RUN_ATTR = "_pykernel_run"         # a Thread's request id, set at start()
_UNSET = object()

_current_thread = threading.current_thread
_os_exit = os._exit


class StdinNotImplementedError(NotImplementedError):
    """Raised when a cell asks for interactive input, which has no source."""


StdinNotImplementedError.__module__ = "builtins"


class _StdinFilenoError(StdinNotImplementedError, io.UnsupportedOperation):
    """fileno() of the absent stdin; also UnsupportedOperation for probes."""


_StdinFilenoError.__module__ = "builtins"


def _diag(message):
    """Last-resort diagnostics: the host keeps the tail of this stream."""
    try:
        data = ("pykernel runner: %s\n" % message).encode("utf-8", "replace")
        while data:
            data = data[_os_write(_diag_fd, data):]
    except Exception:
        pass


_diag_fd = 2    # replaced by the private copy in _Kernel.__init__


def _safe_str(obj):
    try:
        return str(obj)
    except Exception:
        return "<unprintable %s object>" % type(obj).__name__


def _safe_repr(obj):
    try:
        return repr(obj)
    except Exception as exc:
        return "<repr failed: %s: %s>" % (type(exc).__name__, _safe_str(exc))


_PLAIN_TYPES = (str, int, float, bool, type(None))
_RUNNER_DIR = os.path.dirname(os.path.abspath(__file__))
_display = None     # the pykernel_display module, once something needs it


def _build_bundle(obj, raw=False):
    """Return the MIME bundle for *obj*; the one place bundles are made.

    Plain values get their repr here; anything else is left to
    pykernel_display (rich reprs, figures, images), imported on first use.
    With *raw*, *obj* is a bundle already and is only made safe to send.
    Never raises, except KeyboardInterrupt, so an interrupt still stops a
    slow repr.
    """
    if raw or type(obj) not in _PLAIN_TYPES:
        try:
            display = _display_module()
        except Exception as exc:
            _diag("rich display is unavailable: %s" % _safe_str(exc))
        else:
            return display.clean_bundle(obj) if raw else display.build_bundle(obj)
        if raw:
            return obj
    try:
        text = repr(obj)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        text = "<repr failed: %s: %s>" % (type(exc).__name__, _safe_str(exc))
    return {"text/plain": text}


def _display_module():
    """pykernel_display, imported and set up on first use."""
    global _display
    if _display is None:
        # _init turned sys.path[0] into '' (imports from the cwd); at the end
        # the runner's directory shadows nothing, and the name is ours alone.
        if _RUNNER_DIR not in sys.path:
            sys.path.append(_RUNNER_DIR)
        with _own_bytecode():
            import pykernel_display
        pykernel_display.setup(_jsonable, _send_display)
        _display = pykernel_display
    return _display


def _send_display(bundle):
    _kernel.send_display(bundle)


def _patch_pyplot(module):
    """plt.show() displays the figures inline; never fails the import."""
    try:
        _display_module().patch_pyplot(module)
    except Exception as exc:
        _diag("could not patch matplotlib.pyplot.show: %s" % _safe_str(exc))


# -- JSON lines ---------------------------------------------------------------

def _json_default(obj):
    """Convert what json cannot encode; NaN is left to _jsonable."""
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    if isinstance(obj, (bytes, bytearray)):
        return repr(obj)
    for convert in (_as_index, _as_list, _as_float):
        try:
            value = convert(obj)
        except Exception:
            continue
        if value is not _UNSET:
            return value
    return _safe_repr(obj)


def _as_index(obj):
    return int(obj.__index__()) if hasattr(obj, "__index__") else _UNSET


def _as_list(obj):
    # numpy arrays and scalars, without importing numpy
    tolist = getattr(obj, "tolist", None)
    return tolist() if callable(tolist) else _UNSET


def _as_float(obj):
    return float(obj) if hasattr(obj, "__float__") else _UNSET


def _jsonable(value, depth=0, path=None):
    """A copy of *value* that json.dumps(allow_nan=False) accepts."""
    if value is None or value is True or value is False or isinstance(value, str):
        return value
    if isinstance(value, float):
        return value if value - value == 0.0 else None   # NaN and +-Infinity
    if isinstance(value, int):
        return int(value)
    if depth > 100:
        return _safe_repr(value)
    if path is None:
        path = set()
    if isinstance(value, (dict, list, tuple)):
        if id(value) in path:
            return "<circular reference>"
        path.add(id(value))
        try:
            if isinstance(value, dict):
                return {_json_key(k): _jsonable(v, depth + 1, path)
                        for k, v in list(value.items())}
            return [_jsonable(v, depth + 1, path) for v in value]
        finally:
            path.discard(id(value))
    try:
        converted = _json_default(value)
    except Exception:
        converted = _safe_repr(value)
    if isinstance(converted, (dict, list, tuple, float, int)):
        return _jsonable(converted, depth + 1, path)
    return converted if isinstance(converted, str) else _safe_repr(value)


def _json_key(key):
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    if isinstance(key, (int, float)):
        return repr(key)
    return _safe_repr(key)


class _JSONContext:
    """Decoding options for the C scanner, as json.JSONDecoder has them."""
    strict = True
    object_hook = object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float
    memo = {}


try:
    from _json import (encode_basestring as _c_encode_str,
                       make_encoder as _c_make_encoder,
                       make_scanner as _c_make_scanner)
except ImportError:     # not CPython: the json package has what we need
    import json
    _encode_json = json.JSONEncoder(ensure_ascii=False, allow_nan=False,
                                    separators=(",", ":"),
                                    default=_json_default).encode
    _decode_json = json.loads
else:
    # json.dumps(obj, ensure_ascii=False, allow_nan=False, default=...,
    # separators=(",", ":"), check_circular=False)
    _encode_chunks = _c_make_encoder(None, _json_default, _c_encode_str, None,
                                     ":", ",", False, False, False)
    _scan_json = _c_make_scanner(_JSONContext)

    def _encode_json(obj):
        return "".join(_encode_chunks(obj, 0))

    def _decode_json(text):
        text = text.strip()
        value, end = _scan_json(text, 0)
        if end != len(text):
            raise ValueError("extra data after the JSON value")
        return value


def _frame_bytes(frame):
    """*frame* as strict JSON in valid UTF-8, without its newline (a 20 MB
    frame is not copied once more to append one); never fails."""
    try:
        line = _encode_json(frame)
    except Exception:   # NaN/Infinity, circular data, a failing default
        line = _encode_json(_jsonable(frame))
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (print('\ud800')): the host accepts neither raw nor
        # escaped ones, so pair what pairs and replace the rest with U+FFFD.
        line = line.encode("utf-16-le", "surrogatepass").decode(
            "utf-16-le", "replace")
        return line.encode("utf-8")


class _InterruptGuard:
    """Defers KeyboardInterrupt while the main thread writes a frame.

    A SIGINT that lands half-way through a protocol line would corrupt it, so
    the handler only records it while the main thread is inside this guard;
    leaving the outermost guard delivers it.
    """

    def __init__(self):
        self._main = threading.main_thread().ident
        self.depth = 0
        self.deferred = False
        self.deliver = None     # set by the kernel: re-runs the SIGINT logic

    def __enter__(self):
        if threading.get_ident() == self._main:
            self.depth += 1

    def __exit__(self, *exc_info):
        if threading.get_ident() == self._main:
            self.depth -= 1
            if not self.depth and self.deferred:
                self.deferred = False
                self.deliver()


_interrupts = _InterruptGuard()


class _Channel:
    """The saved real stdout: every protocol line is written here.

    A frame sent with ``hold=True`` waits in memory for the next frame and
    leaves with it in one write: a cell's result or error is always followed
    at once by its ``done``, and each write wakes the host.
    """

    def __init__(self, fd, on_broken):
        self.fd = fd                # kept after disown(), for a forked child
        self._fd = fd
        self._lock = threading.Lock()
        self._on_broken = on_broken
        self._held = b""
        self.divert = None          # %%capture: takes frames it keeps

    def send(self, frame, hold=False):
        if self._fd is None:    # a forked child: the host is not ours
            return
        divert = self.divert
        if divert is not None and divert(frame):
            return
        data = _frame_bytes(frame)
        with _interrupts, self._lock:
            parts = [self._held, data, b"\n"] if self._held else [data, b"\n"]
            if hold:
                self._held = b"".join(parts)
            else:
                self._held = b""
                self._write(parts)

    def release(self):
        """Write a held frame now."""
        with _interrupts, self._lock:
            if self._held and self._fd is not None:
                parts, self._held = [self._held], b""
                self._write(parts)

    def _write(self, parts):
        """Write *parts* (bytes) whole, in as few system calls as the pipe allows."""
        parts = [memoryview(p) for p in parts]
        try:
            while parts:
                written = _os_writev(self._fd, parts)
                while parts and written >= len(parts[0]):
                    written -= len(parts[0])
                    parts.pop(0)
                if written:
                    parts[0] = parts[0][written:]
        except OSError as exc:
            self._on_broken(exc)

    def disown(self):
        self._fd = None
        self._held = b""


# -- output -------------------------------------------------------------------

class _Output:
    """Coalesces proxy writes and hands them to the pumps, in write order.

    Writers append ``(request id, stream, text)`` to a deque without a lock.
    Within _FLUSH_INTERVAL a flusher thread (or at once an explicit flush)
    passes the text to the pump of the stream's pipe, which sends it when it
    reaches the marker written for it; so text printed by Python and bytes
    written to fd 1/2 by children reach the host in the order written.
    """

    def __init__(self, channel):
        self._channel = channel
        self._captures = {}         # stream name -> _FdCapture
        self._pending = collections.deque()
        self.pending_chars = 0      # approximate: writers add, flush resets
        self._lock = threading.Lock()
        self.armed = False
        self._wake = threading.Event()
        self._flusher = None
        self._in_child = False

    def append(self, item):
        self._pending.append(item)

    def attach(self, capture):
        self._captures[capture.stream] = capture

    def arm(self):
        """Have the flusher pass pending output on soon."""
        with _interrupts:   # armed but never woken would stall the output
            self.armed = True
            if self._flusher is None:
                flusher = threading.Thread(target=self._flush_soon_loop,
                                           name="pykernel-flusher", daemon=True)
                try:
                    flusher.start()
                except RuntimeError:
                    # No thread to be had (a process limit): write through.
                    self.armed = False
                    self.flush()
                    return
                self._flusher = flusher
            self._wake.set()

    def _flush_soon_loop(self):
        while True:
            self._wake.wait()
            self._wake.clear()
            time.sleep(_FLUSH_INTERVAL)
            self.armed = False
            self.flush()

    def flush(self):
        """Pass all pending text to the pumps (which send it soon)."""
        if self._in_child or not self._pending:
            return
        with _interrupts, self._lock:
            pending = self._pending
            self.pending_chars = 0
            items = [pending.popleft() for _ in range(len(pending))]
            if not items:
                return
            run, stream, texts = items[0][0], items[0][1], []
            previous = None
            for item_run, item_stream, text in items:
                if item_stream is not stream or item_run != run:
                    previous = self._pass_on(run, stream, texts, previous)
                    run, stream, texts = item_run, item_stream, []
                texts.append(text)
            self._pass_on(run, stream, texts, previous)

    def _pass_on(self, run, stream, texts, previous):
        capture = self._captures.get(stream)
        if previous is not None and previous[0] is not capture:
            # stdout and stderr have a pump each: keep their order by letting
            # the earlier one send its text first
            previous[0].wait_seen(previous[1], _DRAIN_TIMEOUT)
        text = "".join(texts)
        token = capture.enqueue(run, text) if capture is not None else None
        if token is None:   # fd 1/2 is not our pipe any more: send directly
            self._channel.send({"type": stream, "id": run, "data": text})
            return None
        return capture, token

    def after_fork_in_child(self):
        self._in_child = True
        self._pending = collections.deque()
        self.pending_chars = 0      # approximate: writers add, flush resets
        self.armed = True       # nothing may start a flusher in the child


class _StreamProxy(io.TextIOBase):
    """``sys.stdout``/``sys.stderr``: text written here becomes frames of the
    request the writing thread belongs to."""

    encoding = "utf-8"
    errors = "replace"
    newlines = None
    line_buffering = True
    mode = "w"

    def __init__(self, name, fd, output, running):
        self._stream = name
        self._fd = fd
        self._output = output
        self._running = running     # the request id for threads of unknown origin
        self.buffer = _BinaryProxy(self)

    @property
    def name(self):
        return "<%s>" % self._stream

    def write(self, s):
        if s.__class__ is not str:
            if not isinstance(s, str):
                raise TypeError("write() argument must be str, not %s"
                                % type(s).__name__)
        if s:
            run = getattr(_current_thread(), _RUN_ATTR, _UNSET)
            if run is _UNSET:
                run = self._running()
            output = self._output
            output.append((run, self._stream, s))
            output.pending_chars += len(s)
            if output.pending_chars > _FLUSH_CHARS:
                output.flush()
            elif not output.armed:
                output.arm()
        return len(s)

    def _write_through(self, s):
        # After fork(): the child's frames would interleave with ours, so its
        # output goes to fd 1/2 and reaches the host through the pumps.
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s"
                            % type(s).__name__)
        data = s.encode("utf-8", "replace")
        while data:
            data = data[_os_write(self._fd, data):]
        return len(s)

    def flush(self):
        self._output.flush()

    def fileno(self):
        return self._fd

    def isatty(self):
        return False

    def readable(self):
        return False

    def writable(self):
        return True

    def seekable(self):
        return False

    def close(self):
        """The proxy stays open: closing stdout must not end the kernel's
        output."""


class _BinaryProxy:
    """``sys.stdout.buffer``: bytes are decoded (UTF-8) and written as text."""

    mode = "wb"

    def __init__(self, text):
        self._text = text
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def write(self, data):
        self._text.write(self._decoder.decode(bytes(data)))
        return len(data)

    def flush(self):
        self._text.flush()

    def fileno(self):
        return self._text.fileno()

    def isatty(self):
        return False

    def writable(self):
        return True

    def readable(self):
        return False

    def close(self):
        pass


class _NoStdin(io.TextIOBase):
    """``sys.stdin``: every read fails at once instead of blocking."""

    encoding = "utf-8"
    errors = "strict"
    newlines = None
    name = "<stdin>"
    mode = "r"

    def __init__(self, on_request):
        self._on_request = on_request

    @property
    def buffer(self):
        return self

    def _refuse(self, *args):
        self._on_request()
        raise StdinNotImplementedError(STDIN_MESSAGE)

    read = readline = readlines = __next__ = _refuse

    def fileno(self):
        raise _StdinFilenoError(STDIN_MESSAGE)

    def isatty(self):
        return False

    def readable(self):
        return True

    def close(self):
        """site's Quitter closes stdin before exiting; keep it harmless."""


class _FdCapture:
    """A pipe standing in for fd 1 or 2, pumped into frames by a thread.

    Markers written into the pipe order things with the bytes around them: a
    proxy's text is held until the pump reaches the marker written when the
    text was flushed, and before ``done`` the main thread writes a marker and
    waits until the pump has forwarded everything in front of it.  A write of
    at most PIPE_BUF bytes is atomic, so a marker arrives whole, though
    possibly split across reads.
    """

    _tag = b"\x00\x1bpykernel-sync-" + os.urandom(6).hex().encode() + b":"
    _marker_len = len(_tag) + 9     # tag, 8 hex digits, NUL
    _tokens = itertools.count(1)

    def __init__(self, fd, stream, channel, running, seen_changed):
        read_fd, write_fd = os.pipe()
        os.dup2(write_fd, fd)       # inheritable: children write here
        os.close(write_fd)
        self.fd = fd
        self.stream = stream
        self._read_fd = read_fd
        self._channel = channel
        self._running = running
        self._seen_changed = seen_changed   # a Condition shared by the pumps
        self._identity = self._pipe_identity(fd)
        self._held = collections.deque()    # (token, run, text) from proxies
        self.seen = 0
        # Held by the pump from a read until what it read is forwarded, so that
        # "the pipe is empty and the pump holds nothing" can be checked at once.
        self._busy = threading.Lock()
        self._start_pump()

    def _start_pump(self):
        self._pumping = True
        threading.Thread(target=self._pump, name="pykernel-" + self.stream,
                         daemon=True).start()

    def restore(self):
        """Point fd 1/2 at the pipe again if a cell closed or replaced it."""
        try:
            if self._pipe_identity(self.fd) == self._identity:
                return
        except OSError:
            pass                    # closed
        try:
            # No spare write end is kept open (a cell could find and write to it);
            # Linux reopens a pipe's write side through its read end's /proc entry.
            write_fd = os.open("/proc/self/fd/%d" % self._read_fd, os.O_WRONLY)
            if write_fd != self.fd:     # a closed fd 1/2 is the lowest free one
                os.dup2(write_fd, self.fd)
                os.close(write_fd)
            else:
                os.set_inheritable(write_fd, True)
            if not self._pumping:       # it saw the end of the pipe when fd 1/2 closed
                self._start_pump()
        except OSError as exc:
            _diag("cannot restore fd %d: %s" % (self.fd, exc))

    @staticmethod
    def _pipe_identity(fd):
        st = os.fstat(fd)
        return st.st_dev, st.st_ino

    def mark(self, token=None):
        """Write a marker into the pipe; its token, or None if fd 1/2 is no
        longer our pipe (a cell may have closed or replaced it)."""
        if token is None:
            token = next(self._tokens)
        try:
            if self._pipe_identity(self.fd) != self._identity:
                return None
            _os_write(self.fd, self._tag + b"%08x\x00" % token)
        except OSError:
            return None
        return token

    def enqueue(self, run, text):
        """Hold *text* until the pump reaches a marker written now."""
        entry = (next(self._tokens), run, text)
        self._held.append(entry)    # before the marker: the pump may be quick
        if self.mark(entry[0]) is None:
            try:
                self._held.remove(entry)
            except ValueError:
                pass
            return None
        return entry[0]

    def wait_seen(self, token, timeout):
        """Wait until the pump has forwarded everything before *token*."""
        deadline = time.monotonic() + timeout
        with self._seen_changed:
            while self.seen < token:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    _diag("%s pipe not drained within %.1f s" % (self.stream, timeout))
                    self.release_held()
                    return False
                self._seen_changed.wait(remaining)
        return True

    def release_held(self):
        """Send held text whose marker will not come."""
        while self._held:
            try:
                _, run, text = self._held.popleft()
            except IndexError:
                break
            self._send(run, text)

    def _send(self, run, text):
        self._channel.send({"type": self.stream, "id": run, "data": text})

    def quiet(self):
        """Whether everything written to the pipe so far has been forwarded: the
        pipe is empty and the pump is not between a read and its frames.  Then
        a drain needs no marker, and a cell that wrote nothing to fd 1/2 does
        not wait on the pump threads twice."""
        with self._busy:
            if self._held or self._tail:
                return False
            try:
                pending = _fcntl.ioctl(self._read_fd, _FIONREAD, b"\0\0\0\0")
            except OSError:
                return False
            return pending == b"\0\0\0\0"

    def _pump(self):
        decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        tag, tag_len, marker_len = self._tag, len(self._tag), self._marker_len
        held = b""
        readable = _select.poll()
        readable.register(self._read_fd, _select.POLLIN)
        while True:
            readable.poll()     # wait without reading, so `quiet` can look
            with self._busy:
                if not self._pump_once(decode, tag, tag_len, marker_len, held):
                    self._pumping = False
                    return
                held = self._tail

    _tail = b""

    def _pump_once(self, decode, tag, tag_len, marker_len, held):
        """Read and forward one chunk; False at the end of the pipe."""
        try:
            chunk = os.read(self._read_fd, 65536)
        except BlockingIOError:
            self._tail = held
            return True
        except OSError:
            return False
        if not chunk:
            return False
        data = held + chunk if held else chunk
        held = b""
        i = data.find(tag)
        while i >= 0 and len(data) >= i + marker_len:
            text = decode(data[:i])
            if text:
                self._send(self._running(), text)
            self._reached(int(data[i + tag_len:i + marker_len - 1], 16))
            data = data[i + marker_len:]
            i = data.find(tag)
        if i < 0:
            # the tail may be the start of a marker cut by the read
            i = data.rfind(b"\x00", max(0, len(data) - tag_len + 1))
            if i >= 0 and not tag.startswith(data[i:]):
                i = -1
        if i >= 0:
            held, data = data[i:], data[:i]
        text = decode(data)
        if text:
            self._send(self._running(), text)
        self._tail = held
        return True

    def _reached(self, token):
        queue = self._held
        while queue and queue[0][0] <= token:
            _, run, text = queue.popleft()
            self._send(run, text)
        if token > self.seen:
            with self._seen_changed:
                self.seen = token
                self._seen_changed.notify_all()

    def close_in_child(self):
        os.close(self._read_fd)


# -- requests and the bridge --------------------------------------------------

class _Requests:
    """The protocol's input, read by the main thread between requests and by a
    thread while one runs.

    An idle kernel reads the next request on the main thread itself, so a
    request wakes one thread, not a reader that then wakes the main thread: on
    a virtual machine each wake-up of a sleeping thread costs tens of
    microseconds.  While a request runs, frames for it (bridge replies, pings,
    exit) must still be read, so `during_request` lets a thread read until
    `after_request`.  Whoever reads holds `_reading` from the read until the
    lines are dispatched, and the thread only reads after checking, under it,
    that the pipe still holds bytes: the two never wait in read() together.
    """

    def __init__(self, fd, dispatch, at_end):
        self._fd = fd
        self._dispatch = dispatch   # handles one line; requests come back via put()
        self._at_end = at_end       # the host closed the pipe
        self._items = collections.deque()
        self._partial = []          # the start of a line cut by a read
        self._reading = threading.Lock()
        self._active = threading.Event()
        self._wake_r = self._wake_w = None   # made with the thread: most kernels never need it
        self._thread = None

    def put(self, request):
        self._items.append(request)

    def next(self, timeout=None):
        """The next request, read on the calling (main) thread; None if
        *timeout* seconds pass without one."""
        while not self._items:
            with self._reading:
                if self._items:
                    break
                if timeout is not None and not _readable(self._fd, timeout):
                    return None
                self._read_once()
        return self._items.popleft()

    def read_available(self):
        """Dispatch what the host has written so far, without waiting for more
        (main thread).  Taking `_reading` also waits out a dispatch the thread
        is in the middle of."""
        with self._reading:
            if _readable(self._fd, 0):
                self._read_once()

    def during_request(self):
        """Have the reader thread read frames while a request runs."""
        if self._thread is None:
            if self._wake_r is None:
                self._wake_r, self._wake_w = os.pipe()
            thread = threading.Thread(target=self._read_while_active,
                                      name="pykernel-requests", daemon=True)
            try:
                thread.start()
            except RuntimeError as exc:    # no thread to be had (a process limit)
                _diag("cannot start the request reader yet: %s" % exc)
                return
            self._thread = thread
        self._active.set()

    def after_request(self):
        """The main thread reads again: stop the reader thread's polling."""
        if not self._active.is_set():
            return
        self._active.clear()
        try:
            os.write(self._wake_w, b"w")
        except OSError:     # full: it has wake-ups enough
            pass

    def _read_while_active(self):
        watch = _select.poll()
        watch.register(self._fd, _select.POLLIN)
        watch.register(self._wake_r, _select.POLLIN)
        while True:
            self._active.wait()
            ready = dict(watch.poll())
            if self._wake_r in ready:
                os.read(self._wake_r, 4096)
                continue
            with self._reading:
                if self._active.is_set() and _readable(self._fd, 0):
                    self._read_once()

    def _read_once(self):
        """One read, its complete lines dispatched (the caller holds _reading)."""
        try:
            chunk = os.read(self._fd, 65536)
        except OSError as exc:
            _diag("reading protocol stdin failed: %s" % exc)
            chunk = b""
        if not chunk:
            self._at_end()
            return
        lines = chunk.split(b"\n")
        if len(lines) > 1:
            self._partial.append(lines[0])
            lines[0] = b"".join(self._partial)
            self._partial = []
        if lines[-1]:
            self._partial.append(lines[-1])
        for line in lines[:-1]:
            self._dispatch(line)


def _readable(fd, timeout):
    """Whether *fd* has bytes (or its end) within *timeout* seconds."""
    watch = _select.poll()
    watch.register(fd, _select.POLLIN)
    return bool(watch.poll(None if timeout is None else timeout * 1000))


class _PendingCall:
    """A bridge call waiting for the host's reply."""

    __slots__ = ("name", "run", "done", "ok", "value")

    def __init__(self, name, run):
        self.name = name
        self.run = run
        self.done = threading.Event()
        self.ok = False
        self.value = None

    def settle(self, ok, value):
        self.ok, self.value = ok, value
        self.done.set()


class _PreludeAPI:
    """The runner's primitives, injected into the prelude as ``__pykernel__``."""

    def __init__(self, kernel):
        self.send_display = kernel.send_display
        self.send_clear = kernel.send_clear
        self.emit_status = kernel.emit_status
        self.bridge_call = kernel.bridge_call
        self.build_bundle = _build_bundle
        self.hidden_names = kernel.hidden_names
        self.status_mime = kernel.status_mime
        self.env_prefix = kernel.env_prefix
        self.kv_path = kernel.kv_path       # the session's kv store file, or None
        self.namespace = kernel.namespace
        self.capture_frames = kernel.capture_frames
        self.reload_prelude = kernel.reload_prelude

    def __repr__(self):
        return "<pykernel runner API>"


# -- the kernel ---------------------------------------------------------------

class _Outcome:
    __slots__ = ("status", "cancelled", "last_frame")

    def __init__(self):
        self.status = "ok"
        self.cancelled = False
        self.last_frame = None  # the result or error, sent with `done`


class _Kernel:
    """The kernel process: its channel and state, the main loop that runs
    requests, and the primitives the prelude builds on."""

    def __init__(self):
        global _diag_fd
        self.pid = os.getpid()
        self._forked = False            # True in a child made by os.fork()
        self._parent = os.getppid()
        self._proto_in = os.dup(0)      # os.dup: non-inheritable
        proto_out = os.dup(1)
        _diag_fd = os.dup(2)
        self._channel = _Channel(proto_out, self._host_gone)
        self._output = _Output(self._channel)

        self.running = None             # id of the request being executed
        self._main_thread = threading.main_thread()
        self._interruptible = False
        self._interrupted_runs = set()
        self._stop_at_start = set()     # requests the host stopped before they ran
        self._sigint_ignored = False    # a SIGINT came while no cell ran
        self._stdin_requested = False
        self.execution_count = 0
        self._hidden_cells = itertools.count(1)
        self._cell_files = set()
        self._sources = {}      # cell lines not yet given to linecache
        self._compile_flags = 0
        self._loop = None
        self._warmed_up = False
        self._requests = _Requests(self._proto_in, self._dispatch, self.terminate)
        self._calls = {}
        self._call_ids = itertools.count(1)
        self._seen_changed = threading.Condition(threading.Lock())

        self.namespace = None
        self.hidden_names = set()
        self.status_mime = "application/x-pykernel-status"
        self.env_prefix = "PYKERNEL_"
        self.kv_path = None
        self._prelude_path = None
        self._magics = None     # pykernel_magics.Magics, for the first magic

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
            _FdCapture(1, "stdout", self._channel, running, self._seen_changed),
            _FdCapture(2, "stderr", self._channel, running, self._seen_changed),
        ]
        for capture in self._captures:
            self._output.attach(capture)
        sys.stdin = _NoStdin(self._note_stdin_request)
        sys.stdout = _StreamProxy("stdout", 1, self._output, running)
        sys.stderr = _StreamProxy("stderr", 2, self._output, running)
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
        _signal.signal(_signal.SIGINT, self._on_sigint)
        _interrupts.deliver = self._deliver_interrupt
        builtins.StdinNotImplementedError = StdinNotImplementedError
        _start_thread.original = threading.Thread.start
        threading.Thread.start = _start_thread
        os._exit = _exit_process
        # Text printed before a child starts must reach its pipe first.
        for name in ("system", "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                setattr(os, name, _flushing_first(getattr(os, name), self._output))
        output = self._output
        os.write = _write_after_pending(os.write, output)

        def patch_fork_exec(module):    # subprocess starts children with this
            module.fork_exec = _flushing_first(module.fork_exec, output)

        def patch_getpass(module):      # rather than open /dev/tty
            module.getpass = _refuse_getpass

        _PatchOnImport.install({"_posixsubprocess": patch_fork_exec,
                                "getpass": patch_getpass,
                                "matplotlib.pyplot": _patch_pyplot})
        os.register_at_fork(before=self._output.flush,
                            after_in_child=self._after_fork_in_child)
        try:
            import faulthandler     # builtin; a crash leaves a trace for the host
            faulthandler.enable(_diag_fd)
        except Exception:
            pass
        threading.Thread(target=self._watch_parent, name="pykernel-watchdog",
                         daemon=True).start()

    def _get_running(self):
        return self.running

    # ending

    def terminate(self, host_present=False):
        """Send what is pending, then end the process.

        When the host asked (the `exit` frame) the runner exits with status 0 and the host
        ends whatever is left of the process group; when the host is gone, nobody else
        will, so the whole group goes down with the runner.
        """
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
        _diag("protocol stdout is gone (%s); exiting" % exc)
        self._kill_group_and_exit()

    def _watch_parent(self):
        while True:
            time.sleep(_WATCHDOG_INTERVAL)
            if self.running is not None:
                # A long request: read the host's frames (an exit) while it runs.
                self._requests.during_request()
            if os.getppid() != self._parent:
                _diag("the host process is gone; exiting")
                self.terminate()

    def _after_fork_in_child(self):
        self.pid = os.getpid()
        self._forked = True
        self._channel.disown()
        self._output.after_fork_in_child()
        _StreamProxy.write = _StreamProxy._write_through
        _StreamProxy.flush = lambda self: None
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

    # signals

    def _on_sigint(self, signum, frame):
        if not self._interruptible:
            # Between requests SIGINT is ignored; the next cell reads the host's
            # `interrupt` frame, written before the signal, before it starts.
            self._sigint_ignored = True
            return
        if _interrupts.depth:
            _interrupts.deferred = True
            return
        self._interrupted_runs.add(self.running)
        raise KeyboardInterrupt

    def _interrupt_request(self, run):
        """The host's `interrupt` frame, sent just before its SIGINT.  The signal
        does the interrupting; the frame matters when the signal came before the
        cell was running and was ignored: the cell then stops as it starts."""
        self._stop_at_start.add(run)

    def _deliver_interrupt(self):
        self._on_sigint(_signal.SIGINT, None)

    # the protocol's input

    def _dispatch(self, line):
        if not line.strip():
            return
        try:
            request = _decode_json(line.decode("utf-8"))
        except Exception as exc:    # the C scanner also raises StopIteration
            _diag("ignored a line that is not JSON (%s): %r" % (exc, line[:200]))
            return
        if not isinstance(request, dict):
            _diag("ignored a frame that is not an object: %r" % line[:200])
            return
        kind = request.get("type")
        if kind is None and "code" in request:
            kind = request["type"] = "execute"
        if kind in ("execute", "init"):
            self._requests.put(request)
        elif kind == "reply":
            self._settle_call(request)
        elif kind == "interrupt":
            self._interrupt_request(request.get("id"))
        elif kind == "ping":
            self._channel.send({"type": "pong", "id": request.get("id")})
        elif kind == "exit":
            self.terminate(host_present=True)
        else:
            _diag("ignored a frame of unknown type %r" % (kind,))

    # frames of a request

    def _emit(self, frame, hold=False):
        """Send a request frame after the output written before it."""
        self._drain_output(_DRAIN_TIMEOUT)
        self._channel.send(frame, hold)

    def send_display(self, bundle, display_id=None, update=False):
        if not isinstance(bundle, dict):
            raise TypeError("a display bundle is a dict of MIME type to data, "
                            "not %s" % type(bundle).__name__)
        frame = {"type": "display", "id": _thread_run(), "bundle": bundle}
        if display_id is not None:
            frame["displayId"] = str(display_id)
        if update:
            frame["update"] = True
        self._emit(frame)

    def send_clear(self, wait=False):
        self._emit({"type": "clear", "id": _thread_run(), "wait": bool(wait)})

    def emit_status(self, op, **data):
        data["op"] = op
        self.send_display({self.status_mime: data})

    def capture_frames(self, sink):
        """Offer the running request's frames to *sink* (``%%capture``): a
        frame for which it returns true is not sent.  Output written before
        this call is sent first; calling the returned function sends what
        is written until then to the sink, and ends the capture."""
        run = _thread_run()
        channel = self._channel
        outer = channel.divert
        self._drain_output(_DRAIN_TIMEOUT)

        def divert(frame):
            if frame.get("id") == run and sink(frame):
                return True
            return outer is not None and outer(frame)

        def stop():
            try:
                self._drain_output(_DRAIN_TIMEOUT)
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
        run = _thread_run()
        if run in self._interrupted_runs:
            raise RuntimeError("bridge call '%s' aborted: eval cell was "
                               "interrupted" % (name,))
        call_id = "py-%d" % next(self._call_ids)
        call = self._calls[call_id] = _PendingCall(name, run)
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
            _diag("ignored a reply for unknown call %r" % (reply.get("callId"),))
        elif reply.get("ok"):
            call.settle(True, reply.get("value"))
        else:
            call.settle(False, _safe_str(reply.get("error", "bridge call failed")))

    def _abort_calls(self, run):
        for call in list(self._calls.values()):
            if call.run == run:
                call.settle(False, "bridge call '%s' aborted: eval cell was "
                                   "interrupted" % (call.name,))

    # stdin

    def _note_stdin_request(self):
        if _thread_run() == self.running:
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
                else:
                    self._execute(request)
            except KeyboardInterrupt:
                # Interrupts are only raised while a cell runs and the cell
                # catches them; this is the last line of defence.
                _diag("a late KeyboardInterrupt reached the main loop")

    def _warm_up(self):
        """Import what cells may need, while nothing waits for the kernel."""
        self._warmed_up = True
        import _ast, traceback  # noqa: F401,E401
        self._register_sources()

    def _init(self, request):
        try:
            self._apply_cwd_env(request)
            self.status_mime = request.get("statusMime") or self.status_mime
            self.env_prefix = request.get("envPrefix") or self.env_prefix
            self.kv_path = request.get("kvPath") or None
            sys.argv = [""]
            here = {os.path.dirname(os.path.abspath(__file__)),
                    os.path.dirname(os.path.realpath(__file__))}
            if sys.path and sys.path[0] in here:
                sys.path[0] = ""    # imports resolve from the cwd, as in a REPL
            self._make_namespace()
            self._main_thread.__dict__[_RUN_ATTR] = request.get("id")
            self.running = request.get("id")
            prelude = request.get("prelude")
            if prelude:
                self._load_prelude(prelude)
            self._output.flush()
        except BaseException:
            import traceback
            _diag("init failed:\n" + traceback.format_exc())
            _os_exit(1)
        finally:
            self.running = None
            self._main_thread.__dict__[_RUN_ATTR] = None
        self._channel.send({
            "type": "ready", "id": request.get("id"), "pid": self.pid,
            "python": "%d.%d.%d" % sys.version_info[:3],
            "executable": sys.executable,
        })

    def _make_namespace(self):
        if self.namespace is None:  # a second init replaces the namespace, not this
            self._runner_module = sys.modules.get("__main__")   # keep it alive
        module = type(sys)("__main__")
        module.__builtins__ = builtins
        sys.modules["__main__"] = module
        self.namespace = module.__dict__

    def _load_prelude(self, path):
        code = _prelude_code(path)
        _INTERNAL_FILES.add(path)
        self._prelude_path = path
        namespace = self.namespace
        before = set(namespace)
        namespace["__pykernel__"] = _PreludeAPI(self)
        exec(code, namespace)
        self.hidden_names.update(set(namespace) - before)

    def reload_prelude(self):
        """Run the prelude again, after ``%reset`` cleared its names."""
        if self._prelude_path:
            self._load_prelude(self._prelude_path)

    @staticmethod
    def _apply_cwd_env(request):
        cwd = request.get("cwd")
        if cwd:
            os.chdir(cwd)
        for key, value in (request.get("env") or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value if isinstance(value, str) else str(value)

    def _execute(self, request):
        run = request.get("id")
        counts = request.get("storeHistory", True) and not request.get("silent")
        if counts:
            self.execution_count += 1
            filename = "<cell %d>" % self.execution_count
        else:
            filename = "<hidden cell %d>" % next(self._hidden_cells)
        self._stdin_requested = False
        self.running = run
        self._main_thread.__dict__[_RUN_ATTR] = run
        outcome = self._run_cell(request, filename)
        if self._forked:
            _os_exit(0)     # a fork() in the cell returned here: end the child
        if not request.get("silent") and self._figures_may_show():
            # Figures follow the cell's result, as in Jupyter.
            if outcome.last_frame is not None:
                self._emit(outcome.last_frame, hold=True)
                outcome.last_frame = None
            self._show_open_figures(run, outcome)
        if run in self._interrupted_runs:
            self._abort_calls(run)
        # One drain for the output before the result (nothing of the cell ran since)
        # and before `done`; the result or error and `done` then leave in one write.
        self._drain_output(_DRAIN_TIMEOUT)
        if outcome.last_frame is not None:
            self._channel.send(outcome.last_frame, hold=True)
        self._channel.send({"type": "done", "id": run, "status": outcome.status,
                            "executionCount": self.execution_count,
                            "cancelled": outcome.cancelled,
                            "stdinRequested": self._stdin_requested})
        self._main_thread.__dict__[_RUN_ATTR] = None
        self.running = None
        self._stop_at_start.clear()     # any left name requests that have ended
        self._requests.after_request()
        if not self._forked:
            # What this cell broke is mended for the next, after its `done` is out.
            self._repair_streams()

    @staticmethod
    def _figures_may_show():
        """False while nothing was displayed and pyplot is not imported."""
        return _display is not None or "matplotlib.pyplot" in sys.modules

    def _show_open_figures(self, run, outcome):
        """Display the pyplot figures the cell left open, as part of the cell
        (even one that failed, as Jupyter does); interruptible like it."""
        try:
            try:
                self._interruptible = True
                _display_module().end_cell()
            finally:
                self._interruptible = False
        except KeyboardInterrupt as exc:
            if not outcome.cancelled:
                outcome.status = "error"
                outcome.cancelled = True
                self._emit(self._error_frame(run, exc), hold=True)
        except BaseException as exc:
            _diag("showing the open figures failed: %s" % _safe_str(exc))

    def _run_cell(self, request, filename):
        """Run one cell; report its result or error.  Never raises."""
        outcome = _Outcome()
        try:
            try:
                self._interruptible = True
                # From here on SIGINT raises KeyboardInterrupt in the cell.  One that
                # came earlier was ignored, but its `interrupt` frame, written before
                # it, is in the pipe by now.
                if self._sigint_ignored:
                    self._sigint_ignored = False
                    self._requests.read_available()
                if request.get("id") in self._stop_at_start:
                    self._interrupted_runs.add(request.get("id"))
                    raise KeyboardInterrupt
                # Informational; it leaves with the next frame, not in a write of its own.
                self._channel.send({"type": "started", "id": request.get("id")}, hold=True)
                self._apply_cwd_env(request)
                source = request.get("code") or ""
                body, last, show = self._compile(source, filename)
                if body is not None:
                    self._run_code(body)
                if last is not None:
                    value = self._run_code(last)
                    if show and value is not None and not request.get("silent"):
                        outcome.last_frame = {"type": "result", "id": request.get("id"),
                                              "bundle": _build_bundle(value)}
                        self._remember_result(value)
            finally:
                self._interruptible = False
        except SystemExit as exc:
            if exc.code is not None and exc.code != 0:
                outcome.status = "error"
                outcome.last_frame = self._error_frame(request.get("id"), exc)
        except KeyboardInterrupt as exc:
            outcome.status = "error"
            outcome.cancelled = True
            outcome.last_frame = self._error_frame(request.get("id"), exc)
        except BaseException as exc:
            outcome.status = "error"
            outcome.last_frame = self._error_frame(request.get("id"), exc)
        return outcome

    def _compile(self, source, filename):
        """Compile *source* as (body, last expression or None, show result)."""
        import _ast
        self._remember_source(filename, source)
        if _may_have_magics(source):
            source = self._load_magics().transform(source)
        flags = self._compile_flags | _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        if _one_line_expression_candidate(source):
            # Half the cost of the general path, which builds the AST as Python
            # objects; a one-line cell that is not an expression fails fast.
            try:
                return None, compile(source, filename, "eval", flags,
                                     dont_inherit=True), True
            except SyntaxError:
                pass
        tree = compile(source, filename, "exec", flags | _ast.PyCF_ONLY_AST,
                       dont_inherit=True)
        body = last = show = None
        if tree.body and isinstance(tree.body[-1], _ast.Expr):
            node = tree.body.pop()
            show = not _ends_with_semicolon(source, node)
            last = compile(_ast.Expression(node.value), filename, "eval",
                           flags, dont_inherit=True)
        if tree.body or last is None:
            body = compile(tree, filename, "exec", flags, dont_inherit=True)
            # `from __future__ import annotations` lasts for the session
            self._compile_flags |= body.co_flags & _FUTURE_ANNOTATIONS
        return body, last, show

    def _load_magics(self):
        """pykernel_magics, imported for the first cell that may hold a
        magic (at the end of sys.path, as pykernel_display is)."""
        if self._magics is None:
            if _RUNNER_DIR not in sys.path:
                sys.path.append(_RUNNER_DIR)
            with _own_bytecode():
                import pykernel_magics
            _INTERNAL_FILES.add(pykernel_magics.__file__)
            self._magics = pykernel_magics.Magics(_PreludeAPI(self))
        return self._magics

    def _remember_source(self, filename, source):
        """Give tracebacks, warnings and inspect the cell's lines."""
        self._cell_files.add(filename)
        self._sources[filename] = (len(source), None, source.splitlines(True),
                                   filename)
        if "linecache" in sys.modules:  # else: when it is imported (it imports re)
            self._register_sources()

    def _register_sources(self):
        import linecache
        linecache.cache.update(self._sources)
        self._sources.clear()

    def _run_code(self, code):
        if code.co_flags & _CO_COROUTINE:
            return self._run_coroutine(eval(code, self.namespace))
        return eval(code, self.namespace)

    def _run_coroutine(self, coroutine):
        """Run a top-level-await cell on the session's one event loop."""
        import asyncio
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        task = loop.create_task(coroutine)
        try:
            return loop.run_until_complete(task)
        except BaseException:
            if not task.done():
                task.cancel()
                try:
                    loop.run_until_complete(task)
                except BaseException:
                    pass
            elif not task.cancelled():
                task.exception()    # retrieved: no "never retrieved" warning
            raise

    def _remember_result(self, value):
        builtins.___ = getattr(builtins, "__", None)
        builtins.__ = getattr(builtins, "_", None)
        builtins._ = value

    def _error_frame(self, run, exc):
        """The `error` frame for *exc*, with the user's frames only."""
        import traceback
        self._register_sources()
        sys.last_type, sys.last_value = type(exc), exc
        _strip_internal_frames(exc, self._cell_files)
        sys.last_traceback = exc.__traceback__
        try:
            lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        except Exception:
            lines = ["%s: %s\n" % (type(exc).__name__, _safe_str(exc))]
        return {"type": "error", "id": run, "ename": type(exc).__name__,
                "evalue": _safe_str(exc), "traceback": lines}

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


class _own_bytecode:
    """Cache the runner's own modules' bytecode whatever the user's setting
    (PYTHONDONTWRITEBYTECODE, -B), which stays in force for their modules."""

    def __enter__(self):
        self._user_setting = sys.dont_write_bytecode
        sys.dont_write_bytecode = False

    def __exit__(self, *exc_info):
        sys.dont_write_bytecode = self._user_setting


def _prelude_code(path):
    """The prelude's code object, from the bytecode cache beside it when that
    is current, as for the modules imported from the runner's directory:
    compiling the prelude would cost more than the rest of start-up's Python
    work.  The import system's own loader (loaded at start; nothing is
    imported) checks the cache against the source and writes it."""
    try:
        loader = sys.modules["_frozen_importlib_external"].SourceFileLoader(
            "pykernel_prelude", path)
        with _own_bytecode():
            return loader.get_code("pykernel_prelude")
    except Exception:
        with open(path, encoding="utf-8") as f:
            return compile(f.read(), path, "exec", dont_inherit=True)


# ioctl asking how many bytes a pipe holds (Linux; other systems share the value
# or fail the ioctl, and then drains simply use markers).
_FIONREAD = 0x541B

_kernel = None
# Frames from these files never appear in a user's traceback (the prelude's
# path is added when it is loaded).
_INTERNAL_FILES = {_Kernel._execute.__code__.co_filename}


def _thread_run():
    """The id of the request the calling thread belongs to."""
    run = getattr(_current_thread(), _RUN_ATTR, _UNSET)
    if run is _UNSET:
        return _kernel.running if _kernel is not None else None
    return run


def _start_thread(thread):
    # A thread belongs to the request of the thread that starts it, so its
    # output is framed with that id even after the request has ended.
    thread.__dict__[_RUN_ATTR] = _thread_run()
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


class _PatchOnImport:
    """A sys.meta_path hook that patches a module as its first import ends,
    so the runner need not import the module at start-up."""

    def __init__(self, patches):
        self._patches = patches     # module name -> function(module)

    @classmethod
    def install(cls, patches):
        for name in [name for name in patches if name in sys.modules]:
            patches.pop(name)(sys.modules[name])
        sys.meta_path.insert(0, cls(patches))

    def find_spec(self, name, path=None, target=None):
        if name not in self._patches:
            return None
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
                continue
            spec = find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, self._patches.pop(name))
                return spec
        return None


class _PatchingLoader:
    """Runs the real loader, then the patch; otherwise the real loader."""

    def __init__(self, loader, patch):
        self._loader = loader
        self._patch = patch

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._patch(module)


def _flushing_first(start_child, output):
    """Wrap a function that starts a child so pending output goes first."""
    def call(*args, **kwargs):
        output.flush()
        return start_child(*args, **kwargs)
    call.__name__ = call.__qualname__ = start_child.__name__
    call.__doc__ = start_child.__doc__
    return call


def _write_after_pending(write, output):
    """os.write() for cells: bytes for fd 1/2 go after text printed before them."""
    def call(fd, data):
        if (fd == 1 or fd == 2) and output.pending_chars:
            output.flush()
        return write(fd, data)
    call.__name__ = call.__qualname__ = "write"
    call.__doc__ = write.__doc__
    return call


def _refuse_getpass(prompt="Password: ", stream=None):
    """getpass.getpass() that reads sys.stdin rather than /dev/tty: in the
    kernel that fails at once, as input() does."""
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line[:-1] if line.endswith("\n") else line


_refuse_getpass.__name__ = _refuse_getpass.__qualname__ = "getpass"


def _may_have_magics(source):
    """Whether a line of *source* starts with % or !, or assigns one (x =
    !cmd): the cheap test that keeps other cells from importing
    pykernel_magics, which then decides with tokenize."""
    if "%" not in source and "!" not in source:
        return False
    for line in source.split("\n"):
        if line.lstrip()[:1] in ("%", "!"):
            return True
        equals = line.find("=")
        while equals >= 0:
            if line[equals + 1:].lstrip()[:1] in ("%", "!"):
                return True
            equals = line.find("=", equals + 1)
    return False


def _one_line_expression_candidate(source):
    """Whether *source* may compile as an expression: one line, and no
    backslash (an invalid escape would warn twice when the attempt fails)."""
    line = source.rstrip()
    return "\n" not in line and "\r" not in line and "\\" not in source


def _ends_with_semicolon(source, node):
    """True if a `;` follows the cell's final expression (comments aside)."""
    lines = source.split("\n")
    row = node.end_lineno - 1
    if row >= len(lines):
        return False
    first = lines[row].encode("utf-8")[node.end_col_offset:].decode(
        "utf-8", "replace")
    for line in [first] + lines[row + 1:]:
        if ";" in line.split("#", 1)[0]:
            return True
    return False


def _strip_internal_frames(exc, cell_files):
    """Cut the runner's frames out of tracebacks: the user sees frames from
    the first ``<cell N>`` frame on, minus runner and prelude frames."""
    seen, todo = set(), [exc]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        exc.__traceback__ = _user_frames(exc.__traceback__, cell_files)
        todo += [exc.__cause__, exc.__context__]
        group = getattr(exc, "exceptions", None)
        if isinstance(group, tuple):
            todo += [e for e in group if isinstance(e, BaseException)]


def _user_frames(tb, cell_files):
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    start = 0
    for i, entry in enumerate(entries):
        if entry.tb_frame.f_code.co_filename in cell_files:
            start = i
            break
    kept = [entry for entry in entries[start:]
            if entry.tb_frame.f_code.co_filename not in _INTERNAL_FILES]
    for entry, after in zip(kept, kept[1:]):
        entry.tb_next = after
    if not kept:
        return None
    kept[-1].tb_next = None
    return kept[0]


def main():
    global _kernel
    try:
        _kernel = _Kernel()
        _kernel.serve()
    except BaseException:
        # A runner bug: stdout/stderr are proxies by now, so report to the
        # host's diagnostics stream before going.
        import traceback
        _diag("internal error:\n" + traceback.format_exc())
        _os_exit(70)


if __name__ == "__main__":
    main()
