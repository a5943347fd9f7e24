"""Signals: when SIGINT interrupts a cell.

Only the C part of signal is imported: the Python wrapper imports enum.
"""

import _signal
import threading


class Interrupts:
    """SIGINT raises KeyboardInterrupt in the main thread while a cell runs,
    and never half-way through a protocol line.

    Between requests SIGINT is ignored (and noted): the host writes its
    ``interrupt`` frame before the signal, so the next cell reads that frame
    before it starts.  Used as a context manager it defers the signal while
    the main thread writes a frame: a SIGINT that lands half-way through a
    protocol line would corrupt it, so the handler only records it there, and
    leaving the outermost guard delivers it.
    """

    def __init__(self):
        self._main = threading.main_thread().ident
        self.depth = 0
        self.deferred = False
        self.interruptible = False      # a cell is running: SIGINT raises
        self.ignored = False            # a SIGINT came while no cell ran
        self.interrupted_runs = set()
        self.stop_at_start = set()      # requests the host stopped before they ran
        self._running = None            # the kernel's running request id

    def install(self, running):
        """Handle SIGINT; *running* returns the id of the request being run."""
        self._running = running
        _signal.signal(_signal.SIGINT, self.on_sigint)

    def __enter__(self):
        if threading.get_ident() == self._main:
            self.depth += 1

    def __exit__(self, *exc_info):
        if threading.get_ident() == self._main:
            self.depth -= 1
            if not self.depth and self.deferred:
                self.deferred = False
                self.on_sigint(_signal.SIGINT, None)

    def on_sigint(self, signum, frame):
        if not self.interruptible:
            # Between requests SIGINT is ignored; the next cell reads the host's
            # `interrupt` frame, written before the signal, before it starts.
            self.ignored = True
            return
        if self.depth:
            self.deferred = True
            return
        self.interrupted_runs.add(self._running())
        raise KeyboardInterrupt

    def request(self, run):
        """The host's `interrupt` frame, sent just before its SIGINT.  The signal
        does the interrupting; the frame matters when the signal came before the
        cell was running and was ignored: the cell then stops as it starts."""
        self.stop_at_start.add(run)


interrupts = Interrupts()
