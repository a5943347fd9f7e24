"""The Python side of pykernel: runs cells for a host over NDJSON pipes.

The host starts ``python -u runner.py`` in its own session and speaks one JSON
object per line: requests on fd 0, frames back on fd 1, runner diagnostics on
fd 2 (docs/protocol.md is the wire document).  At start-up the runner
moves those three descriptors to private, non-inheritable copies, so nothing a
cell does can read or corrupt protocol lines:

* fd 0 becomes /dev/null, so children and ``input()`` never block on the host;
* fds 1 and 2 become pipes that two pump threads forward as stdout/stderr
  frames, so ``os.system``, subprocesses and C code are captured too;
* ``sys.stdout``/``sys.stderr`` are proxies that frame text per request.

The modules, from the bottom up:

* ``signals``: when SIGINT interrupts a cell;
* ``channel``: frames as strict JSON lines, each written whole; lines
  decoded; the runner's own diagnostics;
* ``forward``: a stream's text sent as frames in slices; what cannot be sent
  (out of memory) dropped with a notice, never raised;
* ``capture``: the cells' stdout and stderr, framed per request, in order;
* ``stdin``: reads of stdin fail at once instead of blocking;
* ``requests``: the protocol's input, read between and during requests;
* ``lazy``: the modules below the line and the prelude, loaded when first
  needed; bundles;
* ``cells``: compiling and running cells; tracebacks of the user's frames;
* ``patches``: patching the process without importing what is patched;
* ``kernel``: start-up, the main loop, init, requests run, the bridge.

Imported only when first needed (``lazy``), or by the zygote:

* ``display``: MIME bundles for objects, pyplot figures;
* ``charts``: a figure's chart as data (docs/charts.md), with
  ``charts_matplotlib`` (and ``charts_matplotlib_parts``: bars, histograms,
  box plots, pies) and ``charts_web`` (plotly, Vega-Lite: the bundle's
  figure or spec to ``charts_plotly``, with ``charts_bins`` for plotly.js'
  histogram bins, or ``charts_vegalite``);
* ``pretty``: the text/plain of values, as IPython's pretty printer lays it out;
* ``ipython``: the kernel as a notebook to its code (``get_ipython()``);
* ``transform``: a cell's magic lines rewritten into calls of hidden helpers;
  pasted prompts stripped, ``obj?`` and automagic (``cd /tmp``);
* ``inspector``: the pager text of ``obj?`` / ``obj??``;
* ``shell``: shell children (``!cmd``, ``%%bash``, ``%pip``), streamed and capped;
* ``magics``: the magics, and the helpers rewritten lines call;
* ``pip_modules``: which modules ``%pip`` changed, evicted or left for a restart;
* ``refusals``: what the sandbox refused a cell, named to the host (a
  sandboxed kernel's init loads it);
* ``zygote``: ``runner.py`` as a zygote, forking kernels that share its imports.

Start-up time is a product feature: only cheap modules are imported at start
(the C parts of json and signal: the Python wrappers import re and enum, some
4 ms in a clean interpreter); ``_ast`` comes with the first cell;
``linecache`` and ``traceback`` (which import re) once the kernel has been
idle for a moment; ``asyncio`` only for a cell that uses top-level ``await``.
Modules the runner patches (getpass, _posixsubprocess) are patched when
something imports them.  Every module of the package, those imported later
too, is loaded from the host's bytecode (runner.py).
"""

import sys

from .cells import INTERNAL_FILES
from .kernel import main
from .stdin import STDIN_MESSAGE, StdinNotImplementedError

__all__ = ["main", "STDIN_MESSAGE", "StdinNotImplementedError"]

# The runner's own frames never appear in a user's traceback.
INTERNAL_FILES.update(
    module.__file__ for name, module in list(sys.modules.items())
    if name == __name__ or name.startswith(__name__ + "."))
