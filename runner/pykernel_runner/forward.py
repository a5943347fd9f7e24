"""Stream frames out: a stream's text sent as frames of a request, in slices,
degrading instead of failing.

The pump threads and the proxies send the cells' output through here.  A
huge print leaves in slices of _SLICE_CHARS characters, so sending it needs
memory for a slice (encoded twice on its way to the pipe), not for three more
copies of the whole text: under ``memoryLimitBytes`` a print whose string
fits in memory is sent whole.  What cannot be sent (the kernel is out of
memory, a ``%%capture`` sink fails) is dropped, counted, and reported by a
notice in the same stream of the same request.  No failure reaches the
caller: a pump thread that died would lose every later cell's output and
block children writing to fd 1/2.

Late output (text of a request that has ended: a thread or a background
child still printing after its cell) is never mixed into another request's
own output: it goes to the running request marked ``"late": true``, or, while
none runs, waits (at most _LATE_HOLD_CHARS of it) for the next request.
"""

import threading

from .channel import diag, safe_str

_SLICE_CHARS = 1 << 18      # characters per stream frame of a long text
_LATE_HOLD_CHARS = 1 << 16  # late text kept while no request runs


def _slices(texts):
    """*texts* concatenated and cut into pieces of at most _SLICE_CHARS, never
    copying a long text whole (a single short text is passed as it is)."""
    batch, size = [], 0
    for text in texts:
        start = 0
        while len(text) - start > _SLICE_CHARS - size:
            end = start + _SLICE_CHARS - size
            if end > start and "\ud800" <= text[end - 1] <= "\udbff":
                end -= 1    # keep a surrogate pair in one frame, where it is mended
            batch.append(text[start:end])
            yield "".join(batch)
            batch, size, start = [], 0, end
        if start < len(text):
            batch.append(text[start:] if start else text)
            size += len(text) - start
    if batch:
        yield "".join(batch)


def _cause(exc):
    if isinstance(exc, MemoryError):
        return "the kernel ran out of memory while sending them"
    try:
        return "sending them failed (%s: %s)" % (type(exc).__name__, safe_str(exc))
    except Exception:
        return "sending them failed"


class Forwarder:
    """Sends one stream's text (``stdout`` or ``stderr``) as frames; never raises.

    Called from the stream's pump thread and, when a drain times out or fd 1/2
    is not the pipe any more, from the thread that flushes.
    """

    def __init__(self, stream, channel, running):
        self.stream = stream
        self._channel = channel
        self._running = running     # -> the id of the request running now, or None
        self._late = []             # late text while no request runs
        self._late_chars = 0
        self._late_dropped = 0      # late characters past _LATE_HOLD_CHARS
        # Guards the count of dropped text; reentrant because a %%capture sink
        # runs inside a send.
        self._lock = threading.RLock()
        self.dropped = 0            # characters dropped and not yet reported
        self._dropped_run = None
        self._cause = None
        self._line_start = True     # whether the last text sent ended a line
        self.frames = 0             # frames sent: a drain waits on while this grows

    def send(self, run, texts):
        """Send *texts* (strings, in order) as frames of request *run*; as late
        output if *run* is not the request running now."""
        current = self._running()
        if current is None:     # nobody to give it to yet (a child writing between cells)
            self._hold_late(texts)
            return
        late = run != current
        if late or self._late or self._late_dropped:
            self.deliver_late()     # what was held goes first, in order
        run = current
        if self.dropped:
            self.report_drops()     # a notice still owed goes before later text
        if len(texts) == 1 and len(texts[0]) <= _SLICE_CHARS:
            # The common case, a print's worth: one frame, no slicing.
            try:
                self._send_frame(run, texts[0], late)
            except Exception as exc:
                self.drop(run, len(texts[0]), exc)
            return
        total = sent = 0
        try:
            total = sum(map(len, texts))
            for piece in _slices(texts):
                self._send_frame(run, piece, late)
                sent += len(piece)
        except Exception as exc:
            # The rest of this text is dropped, not sent after a hole: the notice
            # stands where the text stops.
            self.drop(run, total - sent, exc)

    def _hold_late(self, texts):
        """Keep late text written while no request runs, for the next one."""
        try:
            with self._lock:
                for text in texts:
                    room = _LATE_HOLD_CHARS - self._late_chars
                    kept = text if len(text) <= room else text[:max(room, 0)]
                    if kept:
                        self._late.append(kept)
                        self._late_chars += len(kept)
                    self._late_dropped += len(text) - len(kept)
        except Exception as exc:    # MemoryError: nothing to send it with now
            diag("late output of %s lost: %s" % (self.stream, safe_str(exc)))

    def deliver_late(self):
        """Send the late text held while no request ran to the request running
        now (called as a request starts, and before its own text)."""
        if not self._late and not self._late_dropped:
            return
        run = self._running()
        if run is None:
            return
        with self._lock:
            texts, self._late, self._late_chars = self._late, [], 0
            dropped, self._late_dropped = self._late_dropped, 0
        if dropped:
            texts.append("%s[pykernel: %s more characters of late %s were dropped]\n" % (
                "" if texts and texts[-1].endswith("\n") else "\n",
                format(dropped, ","), self.stream))
        try:
            for piece in _slices(texts):
                self._send_frame(run, piece, True)
        except Exception as exc:
            diag("late output of %s lost: %s" % (self.stream, safe_str(exc)))

    def _send_frame(self, run, text, late=False):
        if text:
            frame = {"type": self.stream, "id": run, "data": text}
            if late:
                frame["late"] = True
            self._channel.send(frame)
            self._line_start = text[-1] == "\n"
            self.frames += 1

    def drop(self, run, size, exc):
        """Count *size* characters of *run*'s output as lost to *exc*, and
        report them now if a notice can be sent, else at the next chance."""
        with self._lock:
            if self.dropped and self._dropped_run != run and not self.report_drops():
                diag("a notice of %d dropped characters of %s never reached request %r"
                     % (self.dropped, self.stream, self._dropped_run))
                self.dropped = 0
            self._dropped_run = run
            self.dropped += size
            self._cause = _cause(exc)
            self.report_drops()

    def report_drops(self):
        """Send the notice of dropped text, if one is owed; False if it could
        not be sent (it is tried again on the next send or drain)."""
        if not self.dropped:    # the common case, at every marker: no lock taken
            return True
        with self._lock:
            if not self.dropped:
                return True
            try:
                notice = "%s[pykernel: %s characters of %s were dropped here: %s]\n" % (
                    "" if self._line_start else "\n", format(self.dropped, ","),
                    self.stream, self._cause)
                self._send_frame(self._dropped_run, notice)
            except Exception:
                return False
            self.dropped = 0
            return True
