"""The stdin guard: a cell's reads of stdin fail at once instead of blocking.

The kernel has no interactive stdin (fd 0 is /dev/null; the host's pipe is
the protocol), so ``input()``, ``getpass()`` and reads of ``sys.stdin``
raise StdinNotImplementedError, and the request's ``done`` says that stdin
was asked for.
"""

import io
import sys

STDIN_MESSAGE = ("input() is not supported: this kernel has no interactive "
                 "stdin; pass data in code instead")


class StdinNotImplementedError(NotImplementedError):
    """Raised when a cell asks for interactive input, which has no source."""


StdinNotImplementedError.__module__ = "builtins"


class _StdinFilenoError(StdinNotImplementedError, io.UnsupportedOperation):
    """fileno() of the absent stdin; also UnsupportedOperation for probes."""


_StdinFilenoError.__module__ = "builtins"


class NoStdin(io.TextIOBase):
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


def refuse_getpass(prompt="Password: ", stream=None):
    """getpass.getpass() that reads sys.stdin rather than /dev/tty: in the
    kernel that fails at once, as input() does."""
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line[:-1] if line.endswith("\n") else line


refuse_getpass.__name__ = refuse_getpass.__qualname__ = "getpass"
