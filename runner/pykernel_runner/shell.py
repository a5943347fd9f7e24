"""Shell children: ``!cmd``, ``x = !cmd``, ``%%bash`` and ``%pip`` run here.

Shell children read /dev/null, stay in the kernel's process group (so an
interrupt of the group reaches them), stream their output to the cell as it
comes, are terminated when the cell is interrupted, and have what is shown
or captured capped at 1 MiB or 3000 lines with one notice; the rest is read
and discarded, so a chatty child neither blocks nor floods the host.
"""

import codecs
import os
import re
import sys
import time

from . import refusals

SHELL_CAP_BYTES = 1024 * 1024
SHELL_CAP_LINES = 3000
CAP_NOTICE = "[output truncated: shell output capped at 1 MiB / 3000 lines]\n"

_POLL_INTERVAL = 0.1        # seconds between checks that a child has exited
_AFTER_EXIT_DRAIN = 1.0     # bound on reading what a child's own children write
_TERMINATE_GRACE = 1.0      # SIGTERM, then SIGKILL, for an interrupted child


class SList(list):
    """The lines a shell command printed (``x = !cmd``), IPython style."""

    returncode = None

    @property
    def n(self):
        """The lines joined with newlines."""
        return "\n".join(self)

    @property
    def s(self):
        """The lines joined with spaces."""
        return " ".join(self)

    @property
    def l(self):    # noqa: E743 (IPython's name)
        """The lines as a list."""
        return self

    @property
    def p(self):
        """The lines that name existing paths, as pathlib.Path objects."""
        import pathlib
        return [pathlib.Path(line) for line in self if os.path.exists(line)]

    nlstr, spstr, list, paths = n, s, l, p

    def grep(self, pattern, prune=False, field=None):
        """Lines matching *pattern* (a regex, case-insensitive, or a
        predicate); with *field*, only that whitespace-separated field is
        matched; with *prune*, the lines that do not match."""
        if callable(pattern):
            matches = pattern
        else:
            matches = re.compile(pattern, re.IGNORECASE).search

        def target(line):
            if field is None:
                return line
            fields = line.split()
            try:
                return fields[field]
            except IndexError:
                return ""

        return self._derived(line for line in self
                             if bool(matches(target(line))) != bool(prune))

    def fields(self, *indices):
        """Whitespace-separated fields of each line: with no indices, a list
        of lists; else each line's chosen fields joined by a space."""
        split = [line.split() for line in self]
        if not indices:
            return split
        chosen = []
        for fields in split:
            picked = []
            for index in indices:
                try:
                    picked.append(fields[index])
                except IndexError:
                    pass
            if picked:
                chosen.append(" ".join(picked))
        return self._derived(chosen)

    def sort(self, field=None, nums=False):
        """A new SList sorted by the whole line or by whitespace-separated
        *field* (as in ``fields``); with *nums*, by the number its digits
        make (so 21 comes after 3; 0 where there are none).  As IPython's,
        it returns the sorted copy and leaves this one as it is."""
        def key(line):
            text = line
            if field is not None:
                parts = line.split()
                try:
                    text = parts[field]
                except IndexError:
                    text = ""
            if not nums:
                return text
            digits = "".join(ch for ch in text if ch.isdigit())
            return int(digits) if digits else 0
        return self._derived(sorted(self, key=key))

    def _derived(self, lines):
        result = SList(lines)
        result.returncode = self.returncode
        return result


class _OutputCap:
    """Counts what a child printed (both streams) against the shell cap."""

    def __init__(self):
        self.bytes_left = SHELL_CAP_BYTES
        self.lines_left = SHELL_CAP_LINES
        self.hit = False
        self.noticed = False

    def take(self, data):
        """The part of *data* still under the cap; ``hit`` once some of it
        is dropped."""
        if self.hit:
            return b""
        size = min(len(data), self.bytes_left)
        if self.lines_left <= 0:
            size = 0
        elif data.count(b"\n", 0, size) >= self.lines_left:
            end = -1
            for _ in range(self.lines_left):
                end = data.index(b"\n", end + 1)
            size = end + 1
        self.bytes_left -= size
        self.lines_left -= data.count(b"\n", 0, size)
        self.hit = size < len(data)
        return data[:size]


def shell_argv(command, shell=None):
    """argv that runs *command* with bash (sh when there is no bash): bash
    takes the bash-isms agents write, and for one simple command it execs
    it directly."""
    import shutil
    shell = shell or shutil.which("bash") or "/bin/sh"
    return [shell, "-c", command]


def _child_env(defaults=None):
    env = dict(os.environ)
    # Python children flush each write, so `!python script.py` streams as
    # it would on a terminal.
    env.setdefault("PYTHONUNBUFFERED", "1")
    for key, value in (defaults or {}).items():
        env.setdefault(key, value)
    return env


def run_child(argv, capture=False, tee=False, env=None):
    """Run *argv*, stream its output to the cell, return (returncode, text).

    stdout goes to ``sys.stdout`` (or, with *capture*, into the returned
    text; with *tee* as well, to both) and stderr to ``sys.stderr``, chunk
    by chunk as it is read.  An interrupt terminates the child and
    propagates.
    """
    import select
    import subprocess
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_child_env(env), close_fds=True)
    cap = _OutputCap()
    captured = []
    def show(text):
        sys.stdout.write(text)

    def keep_and_show(text):
        captured.append(text)
        show(text)

    keep = keep_and_show if tee else captured.append
    sinks = {
        proc.stdout.fileno(): _Sink(keep if capture else show),
        proc.stderr.fileno(): _Sink(lambda text: sys.stderr.write(text)),
    }
    for sink in sinks.values():
        # What the sandbox refused the child shows only in what it prints.
        sink.scanner = refusals.shell_scanner()
    try:
        poller = select.poll()
        for fd in sinks:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        open_fds, exited_at = set(sinks), None
        while open_fds:
            events = poller.poll(_POLL_INTERVAL * 1000)
            for fd, _ in events:
                data = os.read(fd, 65536)
                if not data:
                    poller.unregister(fd)
                    open_fds.discard(fd)
                    continue
                kept = cap.take(data)
                if kept:
                    sinks[fd].write(kept)
                if cap.hit and not cap.noticed:
                    cap.noticed = True
                    _finish_sinks(sinks)
                    sys.stderr.write(CAP_NOTICE)
            if proc.poll() is not None:
                # The child is gone; what its own background children keep
                # writing is read a little longer, then left behind.
                now = time.monotonic()
                exited_at = exited_at or now
                if not events or now - exited_at > _AFTER_EXIT_DRAIN:
                    break
        _finish_sinks(sinks)
        returncode = proc.wait()
    except BaseException:
        _stop_child(proc)
        raise
    finally:
        proc.stdout.close()
        proc.stderr.close()
    return returncode, "".join(captured)


class _Sink:
    """Decodes one stream's bytes (UTF-8, incrementally) into a writer, and
    shows the text to the scanner for sandbox refusals, if any."""

    scanner = None

    def __init__(self, write):
        self._write = write
        self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode

    def write(self, data, final=False):
        text = self._decode(data, final)
        if self.scanner is not None and (text or final):
            self.scanner.feed(text, final)
        if text:
            self._write(text)


def _finish_sinks(sinks):
    for sink in sinks.values():
        sink.write(b"", final=True)


def _stop_child(proc):
    """End an interrupted child and what it started.  They had SIGINT with
    the kernel's process group already; whatever ignores it gets SIGTERM,
    then SIGKILL."""
    import signal
    try:
        started = _descendants(proc.pid)
        _signal_all([proc.pid] + started, signal.SIGTERM)
        try:
            proc.wait(_TERMINATE_GRACE)
        except Exception:
            pass
        # orphans keep their pids when they are reparented
        _signal_all(started + _descendants(proc.pid), signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    except BaseException:
        try:
            proc.kill()
        except Exception:
            pass


def _descendants(pid):
    """Pids of the live descendants of *pid* (read from /proc; none where
    there is no /proc)."""
    children = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(pids, signum):
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def state_exit(returncode):
    """A failed command is said, not silent."""
    if returncode > 0:
        sys.stderr.write("Command exited with code %d\n" % returncode)
    elif returncode < 0:
        sys.stderr.write("Command killed by signal %d\n" % -returncode)
