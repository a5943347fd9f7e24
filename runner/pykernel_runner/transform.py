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

Besides the magics, the input rules IPython applies before a cell is parsed:
``strip_prompts`` takes the ``>>> ``/``... `` and ``In [1]: ``/``   ...: ``
prompts off a pasted session, ``obj?``/``obj??`` (and ``?obj``) become
calls of the help magics, and ``automagic_call`` says what a one-line cell
such as ``cd /tmp`` (a magic without its ``%``) becomes.
"""

import re
import tokenize

_SYSTEM = "__pykernel_system__"         # !cmd: stream, return None
_GETOUTPUT = "__pykernel_getoutput__"   # x = !cmd (streamed), !!cmd: an SList
_LINE = "__pykernel_magic__"            # %name args
_CELL = "__pykernel_cell_magic__"       # %%name args + body
HELPER_NAMES = (_SYSTEM, _GETOUTPUT, _LINE, _CELL)

_ASSIGN_TARGET = re.compile(r"[^\W\d][\w.]*(\s*,\s*[^\W\d][\w.]*)*\s*$")

# `obj?`, `obj.attr??`, `seq[0]?`: the help target ends the line (IPython's
# rule: the `?` is the line's last token; names, attributes, integer indexes).
_HELP_END = re.compile(r"(%{0,2}(?!\d)[\w*]+(?:\.(?!\d)[\w*]+|\[-?\d+\])*)(\?\??)$")

# A one-line cell's first word and the rest, as IPython splits a line for
# automagic: the word may hold dots (`cd.x` is looked up whole).
_FIRST_WORD = re.compile(r"\s*([\w.*]*)(.*)$", re.DOTALL)

# Pasted prompts.  Python's: with a `>>>` line anywhere (outside a string
# opened without a prompt), every line loses its `>>>` or `...` prompt, each
# allowing indentation before it and one space or tab after.  IPython's:
# when the first line starts with `In [N]: ` (or the second with a `...:`
# continuation), every line loses its `In [N]: ` or `   ...: ` prompt.
_PS1_ANYWHERE = re.compile(r"^\s*>>>")
_PS1 = re.compile(r"^\s*>>>[ \t]?")
_PS2 = re.compile(r"^\s*\.\.\.[ \t]?")
_TRIPLE_QUOTE = re.compile(r"(?<!\\)(\"\"\"|\'\'\')")
_STRING_PREFIX = re.compile(r"(?i)[rubf]*$")
_IPYTHON_PROMPT = re.compile(r"^(?:(?:(?:\[nav\]|\[ins\])? )?In \[\d+\]: |\s*\.{3,}: ?)")


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
    elif code.startswith("?"):
        call = _help_call(code.lstrip("?").strip(), code.startswith("??"))
    elif code.startswith("%"):
        call = _help_end_call(code) or _line_magic_call(code[1:])
    else:
        call = _assignment_call(code) or _help_end_call(code)
    return None if call is None else indent + call + end


def _help_call(target, more):
    """``?obj``/``obj?`` as a call of %pinfo, ``??`` of %pinfo2 (which adds
    the source)."""
    if not target:
        return None
    return "%s(%r, %r)" % (_LINE, "pinfo2" if more else "pinfo", target)


def _help_end_call(code):
    """``obj?`` / ``obj??``: the help call, or None when the line does not
    end in a help target (a `?` in a comment or a string is no help)."""
    if not code.endswith("?"):
        return None
    match = _HELP_END.search(code)
    if match is None:
        return None
    before = code[:match.start()]
    if "#" in before or "'" in before or '"' in before:
        return None
    return _help_call(match.group(1), match.group(2) == "??")


def may_have_help(source):
    """Whether a line of *source* may be a help request (ends in `?` or
    starts with one): the cheap test before the transformer decides."""
    if "?" not in source:
        return False
    for line in source.split("\n"):
        line = line.strip()
        if line.endswith("?") or line.startswith("?"):
            return True
    return False


def automagic_call(source, is_magic, is_shadowed):
    """The call a one-line cell becomes when its first word is a magic
    named without its ``%`` (``cd /tmp``, ``pwd``, ``cat notes.txt``), as
    IPython's automagic decides: the cell is one line, the word is a magic
    (*is_magic*), no variable, builtin or keyword shadows it
    (*is_shadowed*), and the rest of the line does not start with `=` or
    `,` (``ls = 3`` and ``cd, x = 1, 2`` assign).  None otherwise."""
    lines = source.splitlines(True)
    blank = 0
    while blank < len(lines) and not lines[blank].strip():
        blank += 1      # IPython drops leading blank lines first
    if len(lines) - blank != 1:
        return None
    line = lines[blank].rstrip("\r\n")
    match = _FIRST_WORD.match(line)
    word, rest = match.group(1), match.group(2)
    if not word or not is_magic(word):
        return None
    if rest.lstrip()[:1] in ("=", ",") or is_shadowed(word.split(".", 1)[0]):
        return None
    return "%s%s(%r, %r)%s" % ("".join(lines[:blank]), _LINE, word, rest.strip(),
                               lines[blank][len(line):])


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
        # Streamed as it comes, like ``!cmd``, and captured for the name.
        call = "%s(%r, stream=True)" % (_GETOUTPUT, value.lstrip("!").strip())
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


def strip_prompts(source):
    """*source* without the prompts of a pasted Python or IPython session,
    one line for each line; None when it has none (see _PS1 and
    _IPYTHON_PROMPT for the rules, IPython's)."""
    lines = source.split("\n")
    changed = False
    if ">>>" in source:
        stripped = _strip_python_prompts(lines)
        if stripped is not None:
            lines, changed = stripped, True
    if _IPYTHON_PROMPT.match(lines[0]) or (
            len(lines) > 1 and _IPYTHON_PROMPT.match(lines[1])):
        lines = [_IPYTHON_PROMPT.sub("", line, count=1) for line in lines]
        changed = True
    return "\n".join(lines) if changed else None


def _strip_python_prompts(lines):
    """The lines without their `>>>`/`...` prompts, each block of lines
    that lost one dedented; the lines of a string opened without a prompt
    (a docstring's examples) are left alone.  None without a prompt."""
    in_string = _lines_in_plain_strings(lines)
    if not any(not kept and _PS1_ANYWHERE.match(line)
               for line, kept in zip(lines, in_string)):
        return None
    out, lost = [], []
    for line, kept in zip(lines, in_string):
        new = line
        if not kept:
            new = _PS1.sub("", line, count=1) if _PS1.match(line) else \
                _PS2.sub("", line, count=1)
        out.append(new)
        lost.append(new != line)
    import textwrap
    result, start = [], 0
    while start < len(out):
        end = start
        while end < len(out) and in_string[end] == in_string[start]:
            end += 1
        block = out[start:end]
        if not in_string[start] and any(lost[start:end]):
            block = textwrap.dedent("\n".join(block)).split("\n")
        result.extend(block)
        start = end
    return result


def _lines_in_plain_strings(lines):
    """For each line, whether it lies in a triple-quoted string that was
    opened without a prompt before it (a heuristic, as IPython's: quotes
    are found by pattern, not by tokenizing)."""
    inside = []
    quote = None        # the open string's quotes
    plain = False       # it was opened without a prompt
    prompt_seen = False
    for line in lines:
        inside.append(quote is not None and plain)
        for match in _TRIPLE_QUOTE.finditer(line):
            if quote is None:
                quote = match.group(1)
                before = line[:match.start()]
                bare = _PS2.sub("", _PS1.sub("", before, count=1), count=1)
                prompted = bare != before and prompt_seen
                plain = not prompted and bool(_STRING_PREFIX.match(bare.strip()))
                inside[-1] = plain
            elif quote == match.group(1):
                quote, plain = None, False
        prompt_seen = prompt_seen or bool(_PS1_ANYWHERE.match(line))
    return inside
