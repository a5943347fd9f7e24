"""Cells: compiled and run in the user's namespace; errors with the user's frames.

A cell is split like a REPL's input: its body is exec'd, and a final
expression is eval'd so its value can be shown.  Top-level ``await`` runs
on one event loop kept across cells.  Tracebacks show the user's frames
only, with the cell as ``<cell N>``, and tracebacks, warnings and inspect
see the cell's lines.
"""

import builtins
import sys

from .channel import safe_str

_CO_COROUTINE = 0x0080      # inspect.CO_COROUTINE, without importing inspect
_ALLOW_TOP_LEVEL_AWAIT = 0x2000     # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, without importing ast
_FUTURE_ANNOTATIONS = 0x1000000     # __future__.annotations.compiler_flag
_FUTURE_MASK = None     # every __future__ feature's compiler flag, when first needed
# A prompt of a pasted Python (`>>>`) or IPython (`In [1]:`, `...:`) session.
_PROMPT_MARKS = (">>>", "In [", "...:")

# A final expression that ran as part of an awaiting body left its value here.
_LAST_VALUE = "_pykernel_last_value"
_FROM_BODY = object()

# Frames from these files never appear in a user's traceback: the runner's own
# modules (added by the package as it is imported), the prelude's path when it
# is loaded and the magics' modules (magics, transform, shell).
INTERNAL_FILES = set()


class Cells:
    """Compiles and runs cells in the user's namespace (the kernel sets
    ``namespace`` at init); keeps what compiling a cell carries over to the
    next (``from __future__ import annotations``, the event loop)."""

    def __init__(self, magics_api):
        self.namespace = None
        self._magics_api = magics_api   # -> the primitives the magics build on
        self._magics = None     # magics.Magics, for the first magic
        self._cell_files = set()
        self._sources = {}      # cell lines not yet given to linecache
        self._compile_flags = 0
        self._loop = None

    def compile(self, source, filename):
        """Compile *source* as (body, last expression or None, show result)."""
        import _ast
        source = _without_leading_indent(source)
        self.remember_source(filename, source)
        if any(mark in source for mark in _PROMPT_MARKS):
            from .transform import strip_prompts
            source = strip_prompts(source) or source
        if _may_have_magics(source):
            source = self._load_magics().transform(source)
        if _may_be_automagic(source, self.namespace):
            source = self._load_magics().automagic(source)
        flags = self._compile_flags | _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        if _one_line_expression_candidate(source):
            # Half the cost of the general path, which builds the AST as Python
            # objects; a one-line cell that is not an expression fails fast.
            try:
                return None, compile(source, filename, "eval", flags,
                                     dont_inherit=True), True
            except SyntaxError:
                pass
        tree = compile(source, filename, "exec", flags | _ast.PyCF_ONLY_AST,
                       dont_inherit=True)
        flags = self._take_late_futures(tree, filename, flags)
        body = last = show = None
        if tree.body and isinstance(tree.body[-1], _ast.Expr):
            node = tree.body.pop()
            show = not _ends_with_semicolon(source, node)
            last = compile(_ast.Expression(node.value), filename, "eval",
                           flags, dont_inherit=True)
        if tree.body or last is None:
            body = compile(tree, filename, "exec", flags, dont_inherit=True)
            # `from __future__ import annotations` lasts for the session
            self._compile_flags |= body.co_flags & _FUTURE_ANNOTATIONS
            if last is not None and (body.co_flags | last.co_flags) & _CO_COROUTINE:
                # The cell awaits: all of it must run on the event loop, in one
                # turn (`t = asyncio.create_task(f())` before `await t` needs a
                # running loop, as does a final `create_task` after an await),
                # so the final expression joins the body, its value kept aside.
                where = {name: getattr(node, name) for name in
                         ("lineno", "col_offset", "end_lineno", "end_col_offset")}
                tree.body.append(_ast.Assign(
                    targets=[_ast.Name(_LAST_VALUE, _ast.Store(), **where)],
                    value=node.value, **where))
                body = compile(tree, filename, "exec", flags, dont_inherit=True)
                last = _FROM_BODY
        return body, last, show

    def _take_late_futures(self, tree, filename, flags):
        """Take the ``from __future__`` imports out of *tree* that Python
        would refuse where they stand (after other statements); their
        features apply to the whole cell and the session, *flags* with them.

        IPython compiles a cell statement by statement, keeping the future
        features as ``codeop.Compile`` does, so such an import works there;
        compiled as one module the cell would be a SyntaxError.  Each import
        is compiled alone (an unknown feature is still the SyntaxError it is
        in IPython) and run at once for the names it binds; its feature
        applies to the statements before it in the cell too."""
        import _ast
        late = []
        for index, node in enumerate(tree.body):
            if (isinstance(node, _ast.ImportFrom) and node.module == "__future__"
                    and not _in_future_position(tree.body, index)):
                late.append(node)
        if not late:
            return flags
        # A `pass` stands in for each: a cell that ends with one has no result.
        tree.body = [_ast.Pass(lineno=node.lineno, col_offset=node.col_offset,
                               end_lineno=node.end_lineno,
                               end_col_offset=node.end_col_offset)
                     if node in late else node for node in tree.body]
        for node in late:
            code = compile(_ast.Module(body=[node], type_ignores=[]), filename,
                           "exec", flags, dont_inherit=True)
            flags |= _future_flags(code.co_flags)
            self._compile_flags |= _future_flags(code.co_flags)
            exec(code, self.namespace)
        return flags

    def _load_magics(self):
        """The magics, imported for the first cell that may hold a magic."""
        if self._magics is None:
            from . import magics, shell, transform
            INTERNAL_FILES.update((magics.__file__, shell.__file__, transform.__file__))
            self._magics = magics.Magics(self._magics_api())
        return self._magics

    def remember_source(self, filename, source):
        """Give tracebacks, warnings and inspect the cell's lines."""
        self._cell_files.add(filename)
        self._sources[filename] = (len(source), None, source.splitlines(True),
                                   filename)
        if "linecache" in sys.modules:  # else: when it is imported (it imports re)
            self.register_sources()

    def register_sources(self):
        import linecache
        linecache.cache.update(self._sources)
        self._sources.clear()

    def run(self, code):
        if code is _FROM_BODY:
            return self.namespace.pop(_LAST_VALUE, None)
        if code.co_flags & _CO_COROUTINE:
            return self._run_coroutine(eval(code, self.namespace))
        return eval(code, self.namespace)

    def _run_coroutine(self, coroutine):
        """Run a top-level-await cell on the session's one event loop."""
        import asyncio
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        task = loop.create_task(coroutine)
        try:
            return loop.run_until_complete(task)
        except BaseException:
            if not task.done():
                task.cancel()
                try:
                    loop.run_until_complete(task)
                except BaseException:
                    pass
            elif not task.cancelled():
                task.exception()    # retrieved: no "never retrieved" warning
            raise

    def remember_result(self, value):
        builtins.___ = getattr(builtins, "__", None)
        builtins.__ = getattr(builtins, "_", None)
        builtins._ = value

    def error_frame(self, run, exc):
        """The `error` frame for *exc*, with the user's frames only."""
        import traceback
        self.register_sources()
        sys.last_type, sys.last_value = type(exc), exc
        _strip_internal_frames(exc, self._cell_files)
        sys.last_traceback = exc.__traceback__
        try:
            lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        except Exception:
            lines = ["%s: %s\n" % (type(exc).__name__, safe_str(exc))]
        return {"type": "error", "id": run, "ename": type(exc).__name__,
                "evalue": safe_str(exc), "traceback": lines}


def completeness(source):
    """Whether *source*, a REPL's lines so far joined by newlines (a blank
    last line: the user entered one), is a cell to run: ``"complete"``,
    ``"incomplete"`` (more lines needed) or ``"invalid"`` (it cannot compile
    however it goes on; a REPL runs it anyway, so Python reports the error).

    ``codeop.compile_command``'s answer in ``'single'`` mode, as
    ``Lib/code.py`` asks it: a compound statement is complete once a blank
    line follows it.  It is asked after the input rules a cell goes through
    (``Cells.compile``): the indent of a pasted block, pasted prompts, and
    magic lines (``%name``, ``!cmd``, ``obj?``), which become calls and so
    are complete on their line; a ``%%name`` cell takes the lines after it
    as its body, until a blank line.  Top-level ``await`` compiles, as in a
    cell.  Nothing runs and the namespace is not touched."""
    import codeop
    import warnings
    try:
        source = _without_leading_indent(source)
        lines = source.split("\n")
        if _starts_cell_magic(next((line for line in lines if line.strip()), "")):
            return "complete" if len(lines) > 1 and not lines[-1].strip() else "incomplete"
        if any(mark in source for mark in _PROMPT_MARKS):
            from .transform import strip_prompts
            source = strip_prompts(source) or source
        if _may_have_magics(source):
            from .transform import transform
            source = transform(source) or source
        compiler = codeop.CommandCompiler()
        compiler.compiler.flags |= _ALLOW_TOP_LEVEL_AWAIT
        # What compiling warns of (an invalid escape) is for the cell to show when
        # it runs; here it would reach the next cell as late stderr.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = compiler(source, "<input>", "single")
    except Exception:     # SyntaxError, ValueError (a null byte), OverflowError, ...
        # Run as it is: compiling it then reports the error as a cell's.
        return "invalid"
    return "incomplete" if code is None else "complete"


def _starts_cell_magic(line):
    """Whether *line* is a ``%%name args`` line (transform's rule)."""
    head = line.strip()
    name = head[2:].split(None, 1)
    return head.startswith("%%") and bool(name) and name[0].isidentifier()


def _without_leading_indent(source):
    """*source* without the indentation of its first non-blank line, taken off
    every line that has it, as IPython does: a cell pasted from inside a
    function or a Markdown list runs instead of raising IndentationError."""
    if source[:1] not in (" ", "\t", "\n", "\r"):
        return source
    lines = source.split("\n")
    for first in lines:
        if first.strip():
            break
    else:
        return source
    indent = first[:len(first) - len(first.lstrip(" \t"))]
    if not indent:
        return source
    cut = len(indent)
    return "\n".join(line[cut:] if line.startswith(indent) else line
                     for line in lines)


def _future_flags(co_flags):
    """The compiler flags of __future__ features among *co_flags*."""
    global _FUTURE_MASK
    if _FUTURE_MASK is None:
        import __future__
        _FUTURE_MASK = 0
        for name in __future__.all_feature_names:
            _FUTURE_MASK |= getattr(__future__, name).compiler_flag
    return co_flags & _FUTURE_MASK


def _in_future_position(body, index):
    """Whether the statement at *index* may be a future import: only a
    docstring and other future imports come before it."""
    import _ast
    for position, node in enumerate(body[:index]):
        if isinstance(node, _ast.ImportFrom) and node.module == "__future__":
            continue
        if (position == 0 and isinstance(node, _ast.Expr)
                and isinstance(node.value, _ast.Constant)
                and isinstance(node.value.value, str)):
            continue
        return False
    return True


def _may_have_magics(source):
    """Whether a line of *source* starts with % or !, or assigns one (x =
    !cmd), or starts or ends with `?` (help): the cheap test that keeps
    other cells from importing the magics, which then decide with
    tokenize."""
    if "%" not in source and "!" not in source and "?" not in source:
        return False
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped[:1] in ("%", "!", "?") or stripped.endswith("?"):
            return True
        equals = line.find("=")
        while equals >= 0:
            if line[equals + 1:].lstrip()[:1] in ("%", "!"):
                return True
            equals = line.find("=", equals + 1)
    return False


def _may_be_automagic(source, namespace):
    """Whether *source* may be a magic named without its `%` (``cd /tmp``):
    one line whose first word is a name (``1+1`` is no candidate) that no
    variable, builtin or keyword takes, not
    followed by `=` or `,` (an assignment, such as a session's first ``x =
    1``) nor at once by `.` (no magic's name has one; ``cd ..`` is a
    magic); the magics then decide (transform.automagic_call)."""
    text = source.strip()
    if "\n" in text or "\r" in text:
        return False
    word, rest = text, ""
    for end, char in enumerate(text):
        if not (char.isalnum() or char == "_"):
            word, rest = text[:end], text[end:]
            break
    if (not word.isidentifier() or rest[:1] == "." or rest.lstrip()[:1] in ("=", ",")
            or word in namespace or hasattr(builtins, word)):
        return False
    import keyword
    return not keyword.iskeyword(word)


def _one_line_expression_candidate(source):
    """Whether *source* may compile as an expression: one line, and no
    backslash (an invalid escape would warn twice when the attempt fails)."""
    line = source.rstrip()
    return "\n" not in line and "\r" not in line and "\\" not in source


def _ends_with_semicolon(source, node):
    """True if a `;` follows the cell's final expression (comments aside)."""
    lines = source.split("\n")
    row = node.end_lineno - 1
    if row >= len(lines):
        return False
    first = lines[row].encode("utf-8")[node.end_col_offset:].decode(
        "utf-8", "replace")
    for line in [first] + lines[row + 1:]:
        if ";" in line.split("#", 1)[0]:
            return True
    return False


def _strip_internal_frames(exc, cell_files):
    """Cut the runner's frames out of tracebacks: the user sees frames from
    the first ``<cell N>`` frame on, minus runner and prelude frames."""
    seen, todo = set(), [exc]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        exc.__traceback__ = _user_frames(exc.__traceback__, cell_files)
        todo += [exc.__cause__, exc.__context__]
        group = getattr(exc, "exceptions", None)
        if isinstance(group, tuple):
            todo += [e for e in group if isinstance(e, BaseException)]


def _user_frames(tb, cell_files):
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    start = 0
    for i, entry in enumerate(entries):
        if entry.tb_frame.f_code.co_filename in cell_files:
            start = i
            break
    kept = [entry for entry in entries[start:]
            if entry.tb_frame.f_code.co_filename not in INTERNAL_FILES]
    for entry, after in zip(kept, kept[1:]):
        entry.tb_next = after
    if not kept:
        return None
    kept[-1].tb_next = None
    return kept[0]
