"""Output capture: the cells' stdout and stderr, framed per request, in order.

fds 1 and 2 become pipes that a pump thread each forwards as stdout/stderr
frames of the running request, so ``os.system``, subprocesses and C code are
captured too (a cell that may have handed its pipes to a child gets fresh ones
when it ends, so what the child writes later is late output, not the next
cell's); ``sys.stdout``/``sys.stderr`` are proxies whose text a flusher
thread, started on first output, hands to the pumps.  Proxy text travels in
order with the pipe's bytes (a marker written into the pipe says where it
goes), and before any frame of a request (display, result, error, done) the
kernel writes a marker into each pipe and waits until the pump has passed it:
the host sees output in the order it was written, and all of it before
``done``.
"""

import codecs
import collections
import fcntl as _fcntl
import io
import itertools
import os
import select as _select
import threading
import time

from .channel import diag, safe_str
from .forward import Forwarder
from .signals import interrupts

# The runner's own writes; cells get a wrapped os.write (see write_after_pending).
_os_write = os.write

_FLUSH_INTERVAL = 0.005     # seconds proxy output may wait to be coalesced
_FLUSH_CHARS = 1 << 20      # ... or until this much is waiting: a tight print loop
                            # must not pile up its output in memory
DRAIN_TIMEOUT = 2.0         # bound on waiting for fd output before `done`
_NO_MEMORY_PAUSE = 0.01     # seconds a pump waits when it cannot allocate a read
RUN_ATTR = "_pykernel_run"          # a Thread's request id, set at start()
_REPOLL_INTERVAL = 0.05     # seconds between looks for new pipes without a wake pipe
_UNSET = object()


class _EndedCell:
    """The request of output read from a pipe an ended cell left to a child:
    no request's id, so it is always late."""

    def __repr__(self):
        return "<an ended cell>"


_ENDED_CELL = _EndedCell()

# ioctl asking how many bytes a pipe holds (Linux; other systems share the value
# or fail the ioctl, and then drains simply use markers).
_FIONREAD = 0x541B

_current_thread = threading.current_thread


class Output:
    """Coalesces proxy writes and hands them to the pumps, in write order.

    Writers append ``(request id, stream, text)`` to a deque without a lock.
    Within _FLUSH_INTERVAL a flusher thread (or at once an explicit flush)
    passes the text to the pump of the stream's pipe, which sends it when it
    reaches the marker written for it; so text printed by Python and bytes
    written to fd 1/2 by children reach the host in the order written.
    """

    def __init__(self, channel):
        self._channel = channel
        self._captures = {}         # stream name -> FdCapture
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

    def deliver_late(self):
        """Give the request that starts now the late output held while no
        request ran."""
        for capture in list(self._captures.values()):
            capture.forwarder.deliver_late()

    def arm(self):
        """Have the flusher pass pending output on soon."""
        with interrupts:   # armed but never woken would stall the output
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
            try:
                self.flush()
            except Exception as exc:
                # A dead flusher would leave printed text waiting for the next drain.
                diag("flushing output failed: %s" % type(exc).__name__)

    def flush(self):
        """Pass all pending text to the pumps (which send it soon)."""
        if self._in_child:
            return
        if not self._pending:
            if self._lock.locked():
                # The flusher thread took the text and has not handed it on yet: a
                # drain that returned now could let `done` overtake it.
                with self._lock:
                    pass
            return
        with interrupts, self._lock:
            pending = self._pending
            self.pending_chars = 0
            run = stream = previous = None
            texts = []
            try:
                for _ in range(len(pending)):
                    item_run, item_stream, text = pending.popleft()
                    if texts and (item_stream is not stream or item_run != run):
                        previous = self._pass_on(run, stream, texts, previous)
                        texts = []
                    run, stream = item_run, item_stream
                    texts.append(text)
                if texts:
                    self._pass_on(run, stream, texts, previous)
            except Exception as exc:
                # Text taken from the queue and not passed on is lost: say so in its
                # stream rather than fail the print (or kill the flusher thread).
                capture = self._captures.get(stream)
                if capture is not None:
                    capture.forwarder.drop(run, sum(map(len, texts)), exc)

    def _pass_on(self, run, stream, texts, previous):
        """Hand *texts* (not joined: a huge print is not copied) to the pump."""
        capture = self._captures.get(stream)
        if previous is not None and previous[0] is not capture:
            # stdout and stderr have a pump each: keep their order by letting
            # the earlier one send its text first
            previous[0].wait_seen(previous[1], DRAIN_TIMEOUT)
        if capture is None:
            self._channel.send({"type": stream, "id": run, "data": "".join(texts)})
            return None
        token = capture.enqueue(run, texts)
        if token is None:   # fd 1/2 is not our pipe any more: send directly
            capture.forwarder.send(run, texts)
            return None
        return capture, token

    def after_fork_in_child(self):
        self._in_child = True
        self._pending = collections.deque()
        self.pending_chars = 0      # approximate: writers add, flush resets
        self.armed = True       # nothing may start a flusher in the child


class StreamProxy(io.TextIOBase):
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
            # A plain copy: the pump measures and slices the text, and a
            # subclass's __len__ or __getitem__ is not the runner's to call.
            s = str.__str__(s)
        if s:
            run = getattr(_current_thread(), RUN_ATTR, _UNSET)
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


class _Pipe:
    """One pipe that stood in for fd 1 or 2: its read end, and what the pump
    holds of it (a marker cut by a read, a character cut by a read)."""

    __slots__ = ("read_fd", "identity", "tail", "decode")

    def __init__(self, read_fd, identity):
        self.read_fd = read_fd
        self.identity = identity
        self.tail = b""
        self.decode = codecs.getincrementaldecoder("utf-8")("replace").decode


def _pipe_above_stdio():
    """A pipe (both ends close-on-exec) whose ends are not fds 0-2: a cell may
    have closed fd 1 or 2, and the pipe is dup2'd onto it."""
    ends = list(os.pipe())
    for i, end in enumerate(ends):
        if end <= 2:
            try:
                ends[i] = _fcntl.fcntl(end, _fcntl.F_DUPFD_CLOEXEC, 3)
            finally:
                os.close(end)
    return ends


class FdCapture:
    """Pipes standing in for fd 1 or 2, pumped into frames by a thread.

    Markers written into the pipe order things with the bytes around them: a
    proxy's text is held until the pump reaches the marker written when the
    text was flushed, and before ``done`` the main thread writes a marker and
    waits until the pump has forwarded everything in front of it.  A write of
    at most PIPE_BUF bytes is atomic, so a marker arrives whole, though
    possibly split across reads.

    Output belongs to the cell that wrote it: a cell that may have handed its
    pipe to a child (a subprocess, a fork) gets it replaced by a fresh one once
    it ends (``renew``).  The pump reads the old pipe until its last writer is
    gone (its end, then it is closed), and what it reads there is late output,
    never the running cell's own.
    """

    _tag = b"\x00\x1bpykernel-sync-" + os.urandom(6).hex().encode() + b":"
    _marker_len = len(_tag) + 9     # tag, 8 hex digits, NUL
    _tokens = itertools.count(1)

    def __init__(self, fd, stream, channel, running, seen_changed):
        self.fd = fd
        self.stream = stream
        self._running = running
        self._seen_changed = seen_changed   # a Condition shared by the pumps
        self._held = collections.deque()    # (token, run, texts) from proxies
        self.forwarder = Forwarder(stream, channel, running)
        self.seen = 0
        # Every pipe still read, by read fd: the current one (fd 1/2's) and
        # old ones children still hold.  Added by the main thread, removed by
        # the pump at a pipe's end.
        self._pipes = {}
        self._current = None
        # Tells the pump a pipe was added.  Without it (a cell closed it) the
        # pump looks for new pipes every _REPOLL_INTERVAL.
        self._wake_r, self._wake_w = _pipe_above_stdio()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        # Held by the pump from a read until what it read is forwarded, so that
        # "the pipe is empty and the pump holds nothing" can be checked at once.
        self._busy = threading.Lock()
        self.renew()
        self._start_pump()

    def _start_pump(self):
        self._pumping = True
        threading.Thread(target=self._pump, name="pykernel-" + self.stream,
                         daemon=True).start()

    def renew(self):
        """Point fd 1/2 at a fresh pipe.  The old one is read on until no
        writer is left; what comes through it from now on is late."""
        read_fd, write_fd = _pipe_above_stdio()
        try:
            pipe = _Pipe(read_fd, self._pipe_identity(read_fd))
            self._pipes[read_fd] = pipe
            self._current = pipe
            os.dup2(write_fd, self.fd)      # inheritable: children write here
        except BaseException:
            if self._pipes.pop(read_fd, None) is not None:
                self._current = None
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        try:
            _os_write(self._wake_w, b"\0")
        except OSError:
            pass        # full (the pump is behind) or closed: it finds the pipe anyway

    def restore(self):
        """Point fd 1/2 at a pipe again if a cell closed or replaced it, and
        pump it again if the pump ended."""
        try:
            current = self._current
            if current is None or self._pipe_identity(self.fd) != current.identity:
                self.renew()
        except OSError as exc:
            diag("cannot restore fd %d: %s" % (self.fd, exc))
        if not self._pumping:   # ended by something it could not catch
            try:
                self._start_pump()
            except RuntimeError as exc:     # no thread to be had: next time
                self._pumping = False
                diag("cannot restart the %s pump: %s" % (self.stream, exc))

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
            current = self._current
            if current is None or self._pipe_identity(self.fd) != current.identity:
                return None
            _os_write(self.fd, self._tag + b"%08x\x00" % token)
        except OSError:
            return None
        return token

    def owns_fd(self):
        """Whether fd 1/2 is the current pipe (not a file a cell put there)."""
        try:
            current = self._current
            return current is not None and self._pipe_identity(self.fd) == current.identity
        except OSError:
            return False

    def enqueue(self, run, texts):
        """Hold *texts* until the pump reaches a marker written now."""
        entry = (next(self._tokens), run, texts)
        self._held.append(entry)    # before the marker: the pump may be quick
        token = None
        try:
            token = self.mark(entry[0])
        finally:
            if token is None:   # not held after all: the caller sends or drops it
                try:
                    self._held.remove(entry)
                except ValueError:
                    pass
        return token

    def wait_seen(self, token, timeout):
        """Wait until the pump has forwarded everything before *token*; give up
        after *timeout* seconds in which it forwarded nothing."""
        deadline = time.monotonic() + timeout
        frames = self.forwarder.frames
        with self._seen_changed:
            while self.seen < token:
                remaining = deadline - time.monotonic()
                if remaining <= 0 and self.forwarder.frames != frames:
                    # Slow, not stuck: a long text is on its way (200 MiB takes
                    # seconds), and `done` must not overtake its tail.
                    frames = self.forwarder.frames
                    deadline = time.monotonic() + timeout
                    continue
                if remaining <= 0:
                    diag("%s pipe not drained within %.1f s" % (self.stream, timeout))
                    self.release_held()
                    return False
                self._seen_changed.wait(remaining)
        return True

    def release_held(self):
        """Send held text whose marker will not come."""
        while self._held:
            try:
                _, run, texts = self._held.popleft()
            except IndexError:
                break
            self.forwarder.send(run, texts)

    def quiet(self):
        """Whether everything written to the pipe so far has been forwarded: the
        pipe is empty and the pump is not between a read and its frames.  Then
        a drain needs no marker, and a cell that wrote nothing to fd 1/2 does
        not wait on the pump threads twice."""
        with self._busy:
            current = self._current
            if current is None or self._held or current.tail or self.forwarder.dropped:
                return False    # (a notice still owed is sent when the pump passes a marker)
            try:
                pending = _fcntl.ioctl(current.read_fd, _FIONREAD, b"\0\0\0\0")
            except OSError:
                return False
            return pending == b"\0\0\0\0"

    def _pump(self):
        try:
            readable = _select.poll()
            polled = set()
            wake = self._wake_r
            readable.register(wake, _select.POLLIN)
            timeout = None
            while True:
                for read_fd in list(self._pipes):    # pipes added since the last turn
                    if read_fd not in polled:
                        readable.register(read_fd, _select.POLLIN)
                        polled.add(read_fd)
                try:
                    # wait without reading, so `quiet` can look
                    events = readable.poll(timeout)
                    with self._busy:
                        for read_fd, flags in events:
                            if read_fd == wake:
                                if not self._woken(flags):
                                    # A cell closed the wake pipe: look for new pipes now and then.
                                    readable.unregister(wake)
                                    wake, timeout = None, _REPOLL_INTERVAL * 1000
                                continue
                            pipe = self._pipes.get(read_fd)
                            if pipe is None or not self._pump_once(pipe, flags):
                                readable.unregister(read_fd)
                                polled.discard(read_fd)
                                self._ended(read_fd, pipe, flags)
                except Exception as exc:
                    # Last resort (the failures foreseen are handled where they
                    # happen): what this read held is lost, the pump goes on.
                    diag("%s pump: %s: %s" % (self.stream, type(exc).__name__,
                                              safe_str(exc)))
                    for pipe in list(self._pipes.values()):
                        pipe.tail = b""
                    time.sleep(_NO_MEMORY_PAUSE)
        finally:
            self._pumping = False

    def _woken(self, flags):
        """Empty the wake pipe; False if it is not usable any more."""
        if flags & (_select.POLLNVAL | _select.POLLERR | _select.POLLHUP):
            return False
        try:
            while os.read(self._wake_r, 256):
                pass
        except BlockingIOError:
            pass
        except OSError:
            return False
        return True

    def _ended(self, read_fd, pipe, flags):
        """Forget a pipe no one writes to any more, and close its read end."""
        if pipe is None:
            return      # not one of ours: never close a number we do not own
        if self._pipes.get(read_fd) is pipe:
            del self._pipes[read_fd]
            if pipe is self._current:   # a cell closed fd 1/2: `restore` renews it
                self._current = None
        if not flags & _select.POLLNVAL:    # (closed already: its number may be another's)
            try:
                os.close(read_fd)
            except OSError:
                pass

    def _pump_once(self, pipe, flags):
        """Read and forward one chunk of *pipe*; False at its end."""
        if flags & _select.POLLNVAL:
            return False
        try:
            chunk = os.read(pipe.read_fd, 65536)
        except BlockingIOError:
            return True
        except MemoryError:
            # Nothing was read; the bytes wait in the pipe until memory is freed
            # (a drain waits for them DRAIN_TIMEOUT at most).
            time.sleep(_NO_MEMORY_PAUSE)
            return True
        except OSError:
            return False
        if not chunk:
            return False
        # Bytes from a pipe that is no longer fd 1/2's are late: a child, a fork
        # or a grandchild of an ended cell wrote them.
        run = self._running() if pipe is self._current else _ENDED_CELL
        tag, tag_len, marker_len = self._tag, len(self._tag), self._marker_len
        held = pipe.tail
        data = held + chunk if held else chunk
        held = b""
        i = data.find(tag)
        while i >= 0 and len(data) >= i + marker_len:
            self._forward(pipe, run, data[:i])
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
        self._forward(pipe, run, data)
        pipe.tail = held
        return True

    def _forward(self, pipe, run, data):
        """Send bytes read from *pipe* as text of *run*."""
        try:
            text = pipe.decode(data)
        except Exception as exc:    # MemoryError: the bytes are dropped, not the pump
            if run is _ENDED_CELL:
                run = self._running()
            self.forwarder.drop(run, len(data), exc)    # (a byte counted as a character)
            return
        if text:
            self.forwarder.send(run, (text,))

    def _reached(self, token):
        queue = self._held
        while queue and queue[0][0] <= token:
            _, run, texts = queue.popleft()
            self.forwarder.send(run, texts)
        self.forwarder.report_drops()
        if token > self.seen:
            with self._seen_changed:
                self.seen = token
                self._seen_changed.notify_all()

    def close_in_child(self):
        for read_fd in list(self._pipes) + [self._wake_r, self._wake_w]:
            try:
                os.close(read_fd)
            except OSError:
                pass
