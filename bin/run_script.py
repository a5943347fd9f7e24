"""Runs a script in a pykernel kernel as ``python`` runs it.

bin/pykernel.js sends this file as one cell, followed by one call of
``_pykernel_run_script`` (``pykernel run``, ``-c``, ``-``); the kernel runs
nothing else before it shuts down, so what the script changes in ``sys``
stays changed, as in a real interpreter at exit.

The script gets a module of its own as ``__main__``, ``sys.argv`` and
``sys.path[0]`` as python sets them, and tracebacks that start at its own
frames. ``sys.exit(code)`` is handled as the interpreter does at exit: None
or 0 ends the cell normally, another int leaves as ``SystemExit(code & 0xFF)``,
anything else is printed to stderr and leaves as ``SystemExit(1)``; the CLI
exits with that status.
"""


def _pykernel_run_script(filename, source, argv, data=None):
    """Run *source* as __main__ under *filename* (the path of the file to run
    when *source* is None, else "<string>" or "<stdin>") with *argv*. *data*
    is the file's bytes in base64, read by the host (the file may be outside
    what the kernel sees); the file is read here when it is None."""
    import builtins
    import os
    import sys
    import types
    from pykernel_runner.cells import INTERNAL_FILES

    # This cell is the CLI's machinery, not the user's code: its frames are
    # left out of tracebacks like the runner's own.
    INTERNAL_FILES.add(sys._getframe().f_code.co_filename)

    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    path_entry = ""
    if source is None:
        filename = os.path.abspath(filename)    # as python 3.9+ gives __file__
        main.__file__ = filename
        path_entry = os.path.dirname(filename)
        if data is not None:
            import base64
            import io
            import linecache
            import tokenize
            source = base64.b64decode(data)     # bytes: a coding cookie is honoured
            # Tracebacks show the script's lines even where the kernel cannot open it.
            try:
                text = tokenize.TextIOWrapper(io.BytesIO(source),
                                              tokenize.detect_encoding(io.BytesIO(source).readline)[0]).read()
                linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
            except (SyntaxError, LookupError, UnicodeDecodeError):
                pass
        else:
            with open(filename, "rb") as f:
                source = f.read()
    code = compile(source, filename, "exec", dont_inherit=True)

    sys.argv = list(argv)
    if sys.path and sys.path[0] == "":  # the kernel's stand-in for the script's directory
        sys.path[0] = path_entry
    else:
        sys.path.insert(0, path_entry)
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    except SystemExit as exc:
        status = _exit_status(exc.code)
        if status:
            raise SystemExit(status) from None


def _exit_status(code):
    """The process exit status CPython gives ``SystemExit(code)``."""
    import sys
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1
