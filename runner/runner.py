"""pykernel's kernel process: ``python -u runner.py``.

Only an entry point.  The runner itself is ``pykernel_runner.py`` next to this file,
imported as a module so Python keeps its compiled bytecode in ``__pycache__`` between
kernels; a script run as ``__main__`` is compiled again on every start, and compiling
the runner is most of what a kernel's start-up would cost beyond the interpreter's own.
"""

import pykernel_runner

pykernel_runner.main()
