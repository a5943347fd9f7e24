"""The protocol channel: frames out as strict JSON lines, lines in decoded,
and the runner's own diagnostics.

Every frame is written to the saved real stdout, whole, under one lock.
No line is longer than MAX_FRAME_BYTES, past which the host kills the kernel:
long stream output leaves in several frames, and a display, result or error
too large for one is replaced by a notice saying so.
Every line is strict JSON (no NaN or Infinity), and values JSON cannot hold
(sets, bytes, numpy scalars and arrays, arbitrary objects) are converted,
never dropped.  On CPython the C encoder and scanner of ``_json`` are used
directly: the ``json`` package would import ``re`` at start-up.
Diagnostics go to the host's stderr pipe (fd 2 at start-up), which the host
keeps the tail of for its error messages; the kernel moves them to a private
copy of that descriptor before fd 2 becomes the cells' stderr.
"""

import os
import threading

from .signals import interrupts

# The runner's own writes; cells get a wrapped os.write (see the kernel's patches).
_os_write = os.write
_os_writev = os.writev


# The longest line the host reads (newline excluded); a longer one gets the
# kernel killed.  The host's MAX_FRAME_BYTES (src/wire/frame_reader.rs) is the same.
MAX_FRAME_BYTES = 64 << 20

# Stream text comes here already cut into frames short enough (forward.py's
# slices), so only other frames can be too long for a line.


# -- diagnostics --------------------------------------------------------------

_diag_fd = 2    # replaced by the private copy (use_diag_fd) when the kernel starts


def use_diag_fd(fd):
    """Write diagnostics to *fd* from now on."""
    global _diag_fd
    _diag_fd = fd


def diag(message):
    """Last-resort diagnostics: the host keeps the tail of this stream."""
    try:
        data = ("pykernel runner: %s\n" % message).encode("utf-8", "replace")
        while data:
            data = data[_os_write(_diag_fd, data):]
    except Exception:
        pass


def safe_str(obj):
    try:
        return str(obj)
    except Exception:
        return "<unprintable %s object>" % type(obj).__name__


def safe_repr(obj):
    try:
        return repr(obj)
    except Exception as exc:
        return "<repr failed: %s: %s>" % (type(exc).__name__, safe_str(exc))


# -- JSON lines ---------------------------------------------------------------

_UNSET = object()


def _json_default(obj):
    """Convert what json cannot encode; NaN is left to jsonable."""
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
    return safe_repr(obj)


def _as_index(obj):
    return int(obj.__index__()) if hasattr(obj, "__index__") else _UNSET


def _as_list(obj):
    # numpy arrays and scalars, without importing numpy
    tolist = getattr(obj, "tolist", None)
    return tolist() if callable(tolist) else _UNSET


def _as_float(obj):
    return float(obj) if hasattr(obj, "__float__") else _UNSET


def jsonable(value, depth=0, path=None):
    """A copy of *value* that json.dumps(allow_nan=False) accepts."""
    if value is None or value is True or value is False or isinstance(value, str):
        return value
    if isinstance(value, float):
        return value if value - value == 0.0 else None   # NaN and +-Infinity
    if isinstance(value, int):
        return int(value)
    if depth > 100:
        return safe_repr(value)
    if path is None:
        path = set()
    if isinstance(value, (dict, list, tuple)):
        if id(value) in path:
            return "<circular reference>"
        path.add(id(value))
        try:
            if isinstance(value, dict):
                return {_json_key(k): jsonable(v, depth + 1, path)
                        for k, v in list(value.items())}
            return [jsonable(v, depth + 1, path) for v in value]
        finally:
            path.discard(id(value))
    try:
        converted = _json_default(value)
    except Exception:
        converted = safe_repr(value)
    if isinstance(converted, (dict, list, tuple, float, int)):
        return jsonable(converted, depth + 1, path)
    return converted if isinstance(converted, str) else safe_repr(value)


def _json_key(key):
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    if isinstance(key, (int, float)):
        return repr(key)
    return safe_repr(key)


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
    decode_json = json.loads
else:
    # json.dumps(obj, ensure_ascii=False, allow_nan=False, default=...,
    # separators=(",", ":"), check_circular=False)
    _encode_chunks = _c_make_encoder(None, _json_default, _c_encode_str, None,
                                     ":", ",", False, False, False)
    _scan_json = _c_make_scanner(_JSONContext)

    def _encode_json(obj):
        return "".join(_encode_chunks(obj, 0))

    def decode_json(text):
        text = text.strip()
        value, end = _scan_json(text, 0)
        if end != len(text):
            raise ValueError("extra data after the JSON value")
        return value


def frame_bytes(frame):
    """*frame* as strict JSON in valid UTF-8, without its newline (a 20 MB
    frame is not copied once more to append one); never fails."""
    try:
        line = _encode_json(frame)
    except Exception:   # NaN/Infinity, circular data, a failing default
        line = _encode_json(jsonable(frame))
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (print('\ud800')): the host accepts neither raw nor
        # escaped ones, so pair what pairs and replace the rest with U+FFFD.
        line = line.encode("utf-16-le", "surrogatepass").decode(
            "utf-16-le", "replace")
        return line.encode("utf-8")


# -- frames too long for a line ----------------------------------------------

def _within_limit(frame, data):
    """*data* (the frame encoded), or a stand-in that fits when it is too long:
    the host would kill the kernel for it.  None when nothing can stand in."""
    if len(data) <= MAX_FRAME_BYTES:
        return data
    kind = frame.get("type")
    note = ("[pykernel: this %s was %.1f MiB as a protocol frame, over the %d MiB "
            "limit; it was not sent]" % (kind, len(data) / 1048576.0,
                                        MAX_FRAME_BYTES >> 20))
    if kind == "call":
        # Raised in the cell, by the call: it can pass the data another way.
        raise ValueError("bridge call %r: its arguments are %.1f MiB as JSON, over "
                         "the %d MiB a protocol frame may hold; pass large data "
                         "in a file instead" % (frame.get("name"),
                                                len(data) / 1048576.0,
                                                MAX_FRAME_BYTES >> 20))
    if kind in ("display", "result"):
        stand_in = dict(frame, bundle={"text/plain": note})
    elif kind == "error":
        # The message's start and the traceback's end say the most; both are
        # cut to a few MiB at most (6 bytes a character as JSON, at worst).
        traceback = frame.get("traceback")
        traceback = traceback if isinstance(traceback, list) else []
        stand_in = dict(frame, ename=safe_str(frame.get("ename"))[:1000],
                        evalue=safe_str(frame.get("evalue"))[:1 << 16] + "\n" + note,
                        traceback=[safe_str(line)[:4096] for line in traceback[-200:]]
                        + [note + "\n"])
    else:
        diag("dropped a %s frame of %d bytes: over the frame limit" % (kind, len(data)))
        return None
    return frame_bytes(stand_in)


# -- the channel --------------------------------------------------------------

class Channel:
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
        self._held = []             # a held frame's parts, written with the next
        self.divert = None          # %%capture: takes frames it keeps

    def send(self, frame, hold=False):
        if self._fd is None:    # a forked child: the host is not ours
            return
        divert = self.divert
        if divert is not None and divert(frame):
            return
        data = _within_limit(frame, frame_bytes(frame))
        if data is None:
            return
        with interrupts, self._lock:
            # Parts, not joined: a large frame is not copied once more.
            parts = self._held + [data, b"\n"]
            if hold:
                self._held = parts
            else:
                self._held = []
                self._write(parts)

    def release(self):
        """Write a held frame now."""
        with interrupts, self._lock:
            if self._held and self._fd is not None:
                parts, self._held = self._held, []
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
        self._held = []
