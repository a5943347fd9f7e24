"""The protocol's input: requests, and replies to bridge calls in flight."""

import collections
import os
import select as _select
import threading

from .channel import diag


class Requests:
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
                diag("cannot start the request reader yet: %s" % exc)
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
            diag("reading protocol stdin failed: %s" % exc)
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


class PendingCall:
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

