"""pykernel's kernel process: ``python -u runner.py``.

Only an entry point.  The runner itself is the ``pykernel_runner`` package next to this
file, imported as modules so Python keeps their compiled bytecode in ``__pycache__``
between kernels; a script run as ``__main__`` is compiled again on every start, and
compiling the runner is most of what a kernel's start-up would cost beyond the
interpreter's own.
"""

import sys

# Our own bytecode is cached even where the environment says to write none
# (PYTHONDONTWRITEBYTECODE=1 is common in containers): that setting is for the
# user's modules, and it is restored before any of theirs is imported.
_user_setting, sys.dont_write_bytecode = sys.dont_write_bytecode, False
import pykernel_runner  # noqa: E402
sys.dont_write_bytecode = _user_setting

pykernel_runner.main()
