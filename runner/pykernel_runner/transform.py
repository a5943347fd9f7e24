"""The cell transformer: magic lines rewritten into calls of hidden helpers.

``transform(source)`` rewrites a cell's magic lines (``%name args``, ``!cmd``,
``x = !cmd``, a ``%%name`` cell) into calls of the helpers named in
HELPER_NAMES (``__pykernel_magic__('pwd', '')``), which the magics module puts
in the namespace, before the cell is parsed.  Only a line that starts a
logical line is rewritten: the source is fed to ``tokenize`` one line at a
time, and a line is looked at when the tokenizer asks for it, so the tokens
seen so far say whether it starts a statement or sits inside a string,
brackets or a backslash continuation.  A rewritten line replaces the original
before the tokenizer reads it, and every output line stands for one input
line, so tracebacks keep their line numbers.  A cell magic (``%%name``) takes
the whole cell: its first line becomes one call carrying the body.
"""

import re
import tokenize

_SYSTEM = "__pykernel_system__"         # !cmd: stream, return None
_GETOUTPUT = "__pykernel_getoutput__"   # x = !cmd, !!cmd: return an SList
_LINE = "__pykernel_magic__"            # %name args
_CELL = "__pykernel_cell_magic__"       # %%name args + body
HELPER_NAMES = (_SYSTEM, _GETOUTPUT, _LINE, _CELL)

_ASSIGN_TARGET = re.compile(r"[^\W\d][\w.]*(\s*,\s*[^\W\d][\w.]*)*\s*$")


def transform(source):
    """*source* with its magic lines rewritten, or None when it has none."""
    lines = _split_lines(source)
    cell = _transform_cell_magic(lines)
    if cell is not None:
        return cell
    out = []
    blanks = []     # stand-ins for the lines a magic continued onto
    state = _LogicalLines()
    pending = iter(lines)
    changed = False

    def readline():
        nonlocal changed
        if blanks:
            line = blanks.pop()
        else:
            line = next(pending, "")
            if line and state.starts_statement(len(out) + 1):
                rewritten, joined = _rewrite_logical_line(line, pending)
                if rewritten is not None:
                    line, changed = rewritten, True
                    blanks.extend("\n" * joined)
        out.append(line)
        return line

    try:
        for token in tokenize.generate_tokens(readline):
            state.see(token)
    except (tokenize.TokenError, SyntaxError):
        # The cell does not tokenize (it will not compile either): lines
        # after the failure stay as written and Python reports the error.
        pass
    if not changed:
        return None
    out.extend(blanks)
    out.extend(pending)
    return "".join(out)


def _split_lines(source):
    """Lines ending in '\\n' (the tokenizer's line ends; str.splitlines also
    splits at form feeds and U+2028, which may sit inside a string)."""
    lines = [line + "\n" for line in source.split("\n")]
    lines[-1] = lines[-1][:-1]
    if not lines[-1]:
        lines.pop()
    return lines


class _LogicalLines:
    """Follows the tokens of a cell to tell whether the next physical line
    starts a statement: the previous line must have ended one (NEWLINE) or
    been blank or a comment (NL) outside brackets.  Inside a multi-line
    string no token comes until the string ends, and a backslash
    continuation ends in no NEWLINE, so both fail the test."""

    def __init__(self):
        self._depth = 0
        self._last = None       # (type, row) of the latest token

    def see(self, token):
        if token.type == tokenize.OP:
            if token.string in "([{":
                self._depth += 1
            elif token.string in ")]}":
                self._depth = max(0, self._depth - 1)
        self._last = (token.type, token.start[0])

    def starts_statement(self, row):
        if row == 1:
            return True
        if self._last is None or self._depth:
            return False
        kind, last_row = self._last
        return kind in (tokenize.NEWLINE, tokenize.NL) and last_row == row - 1


def _rewrite_logical_line(line, pending):
    """Rewrite a magic line, with the lines it continues onto (a trailing
    backslash joins the next line, as in a shell); (None, 0) if *line* is
    not a magic, else (the call, how many more lines it took)."""
    rewritten = _rewrite_line(line)
    if rewritten is None:
        return None, 0
    joined = 0
    while line.rstrip("\r\n").endswith("\\"):
        following = next(pending, None)
        if following is None:
            break
        line = line.rstrip("\r\n")[:-1] + " " + following.lstrip(" \t")
        joined += 1
    return (_rewrite_line(line) if joined else rewritten), joined


def _rewrite_line(line):
    """The call a magic line becomes, with its indent and line end; None for
    a line that is not a magic."""
    text = line.rstrip("\r\n")
    end = line[len(text):]
    code = text.lstrip(" \t\f")
    indent = text[:len(text) - len(code)]
    if code.startswith("!!"):
        call = "%s(%r)" % (_GETOUTPUT, code[2:].strip())
    elif code.startswith("!"):
        call = "%s(%r)" % (_SYSTEM, code[1:].strip())
    elif code.startswith("%"):
        call = _line_magic_call(code[1:])
    else:
        call = _assignment_call(code)
    return None if call is None else indent + call + end


def _line_magic_call(text):
    """``name args`` (after the '%') as a call; ``%%name`` here, past the
    first line, is looked up as a line magic and reported as not found."""
    parts = text.split(None, 1)
    if not parts:
        return None
    name = parts[0]
    if not name.lstrip("%").isidentifier() or name.startswith("%%"):
        return None
    args = parts[1].strip() if len(parts) > 1 else ""
    return "%s(%r, %r)" % (_LINE, name, args)


def _assignment_call(code):
    """``x = !cmd`` and ``a, b = %name args``."""
    target, equals, value = code.partition("=")
    if not equals or not _ASSIGN_TARGET.match(target):
        return None
    value = value.lstrip()
    if value.startswith("!"):
        call = "%s(%r)" % (_GETOUTPUT, value.lstrip("!").strip())
    elif value.startswith("%"):
        call = _line_magic_call(value[1:])
    else:
        return None
    return None if call is None else "%s = %s" % (target.rstrip(), call)


def _transform_cell_magic(lines):
    """A cell whose first line (blank lines aside) is ``%%name args``: one
    call with the body, then blank lines so the line count stays."""
    for first, line in enumerate(lines):
        if line.strip():
            break
    else:
        return None
    head = lines[first].strip()
    if not head.startswith("%%"):
        return None
    parts = head[2:].split(None, 1)
    if not parts or not parts[0].isidentifier():
        return None
    args = parts[1] if len(parts) > 1 else ""
    body = "".join(lines[first + 1:])
    call = "%s(%r, %r, %r, %d)" % (_CELL, parts[0], args, body, first + 2)
    return "\n" * first + call + "\n" * (len(lines) - first)
