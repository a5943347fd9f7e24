"""Pretty ``text/plain`` for results and displays, laid out as IPython does.

A notebook user reads a dict of ten keys one key per line, a set sorted, and
``list(range(400))`` as 400 short lines, not one line that a line cap cuts.
IPython gets there with its pretty printer; this module gives the same text
without IPython (our own code, written from IPython's documented behaviour and
checked against its output, see __tests__/pretty.test.js):

* lines of at most 79 characters where the value allows it;
* a container that does not fit breaks after every item; an item that fits
  stays on one line; a broken container's items are indented one column per
  level of nesting (not aligned to the opening bracket as ``pprint`` does);
* dicts keep insertion order; sets and frozensets are sorted (by ``str`` when
  their items do not compare); a sequence shows its first 1000 items, then
  ``...``;
* an object whose class defines ``__repr__`` shows that repr, its lines kept;
  one that does not shows ``<module.Class at 0x...>``; classes show
  ``module.Name``, functions ``<function module.name(signature)>``;
  exceptions, ``re.compile(...)``, ``namespace(...)``, ``defaultdict``,
  ``OrderedDict``, ``deque``, ``Counter``, ``UserList``, ``os.environ`` and
  mapping proxies are spelled as IPython spells them;
* a printer registered for a class (``get_ipython().display_formatter
  .formatters["text/plain"].for_type(cls, func)``, see the ipython module)
  draws its instances, ``func(obj, p, cycle)``;
* an object with ``_repr_pretty_(p, cycle)`` draws itself with the printer
  *p*, which offers the methods IPython's printer documents (``text``,
  ``breakable``, ``break_``, ``begin_group``/``end_group``, ``group``,
  ``indent``, ``pretty``, ``indentation``, ``max_seq_length``).

How: printing builds a tree of groups (text, places where a line may break,
forced line breaks), then one pass lays it out.  A group stays on one line
when it holds no forced break and it fits, together with the text that
follows it up to the next place a line may break; otherwise each of its own
break places becomes a new line at the indentation current when the place
was made.  Groups are decided outside in.  Where IPython's streaming printer
decides otherwise (a multi-line repr inside a list inside a list: IPython may
leave the inner list on one line), docs/python.md says so.

The runner imports this module with the display module, only for values that
are not a plain str, int, float, bool or None; it imports nothing at load
time (``inspect`` only to show a function's signature).
"""

import sys

MAX_WIDTH = 79
MAX_SEQ_LENGTH = 1000

# Exact types whose repr is one line (a str's repr escapes its newlines).
_ATOMS = frozenset((int, float, str, bool, type(None), complex))


def pretty(obj, max_width=MAX_WIDTH, max_seq_length=MAX_SEQ_LENGTH,
           printers=None):
    """The pretty text of *obj*.  Errors of its reprs propagate.  *printers*
    (class -> printer or None) gives printers registered for classes, which
    come first at their place in a class's MRO (IPython's for_type)."""
    printer = Printer(max_width, max_seq_length, printers)
    printer.pretty(obj)
    return printer.getvalue()


# -- the tree ------------------------------------------------------------------

class _Group:
    __slots__ = ("items", "width", "breaks", "forced")

    def __init__(self):
        self.items = []     # str, _Break, _Newline or _Group
        self.width = 0      # on one line
        self.breaks = False     # holds a place where a line may break
        self.forced = False     # holds a forced line break


class _Break:
    """A place where a line may break: *sep* when it does not."""
    __slots__ = ("sep", "indent")

    def __init__(self, sep, indent):
        self.sep = sep
        self.indent = indent


class _Newline:
    __slots__ = ("indent",)

    def __init__(self, indent):
        self.indent = indent


class _Scope:
    """``with p.group(...)`` / ``with p.indent(n)``, without contextlib."""

    def __init__(self, enter, leave):
        self._enter = enter
        self._leave = leave

    def __enter__(self):
        self._enter()
        return self

    def __exit__(self, *exc_info):
        self._leave()
        return False


class Printer:
    """What ``_repr_pretty_(p, cycle)`` is given as *p*."""

    newline = "\n"
    verbose = False

    def __init__(self, max_width=MAX_WIDTH, max_seq_length=MAX_SEQ_LENGTH,
                 printers=None):
        self._registered = printers
        self.max_width = max_width
        self.max_seq_length = max_seq_length
        self.indentation = 0
        self._root = _Group()
        self._open = [self._root]
        self._printing = []     # ids of the objects being printed: cycles

    # what _repr_pretty_ methods call

    def text(self, obj):
        group = self._open[-1]
        group.items.append(obj)
        group.width += len(obj)

    def breakable(self, sep=" "):
        group = self._open[-1]
        group.items.append(_Break(sep, self.indentation))
        group.width += len(sep)
        group.breaks = True

    def break_(self):
        group = self._open[-1]
        group.items.append(_Newline(self.indentation))
        group.breaks = group.forced = True

    def begin_group(self, indent=0, open=""):   # noqa: A002 (IPython's name)
        if open:
            self.text(open)
        group = _Group()
        self._open[-1].items.append(group)
        self._open.append(group)
        self.indentation += indent

    def end_group(self, dedent=0, close=""):
        self.indentation -= dedent
        if len(self._open) > 1:     # an unbalanced end_group leaves the root
            group = self._open.pop()
            parent = self._open[-1]
            parent.width += group.width
            parent.breaks = parent.breaks or group.breaks
            parent.forced = parent.forced or group.forced
        if close:
            self.text(close)

    def group(self, indent=0, open="", close=""):   # noqa: A002
        return _Scope(lambda: self.begin_group(indent, open),
                      lambda: self.end_group(indent, close))

    def indent(self, indent):
        def enter():
            self.indentation += indent

        def leave():
            self.indentation -= indent
        return _Scope(enter, leave)

    def flush(self):
        """Nothing to do: the text is laid out by getvalue()."""

    def _enumerate(self, seq):
        """(index, item) for the first max_seq_length items; ``, ...`` after."""
        limit = self.max_seq_length
        for index, item in enumerate(seq):
            if limit and index >= limit:
                self.text(",")
                self.breakable()
                self.text("...")
                return
            yield index, item

    def pretty(self, obj):
        """Add *obj*, in a group of its own, as its printer draws it."""
        if type(obj) in _ATOMS and self._registered is None:
            # One line of text: a group around it would change nothing.
            self.text(repr(obj))
            return
        key = id(obj)
        cycle = key in self._printing
        self._printing.append(key)
        self.begin_group()
        try:
            _printer_for(obj, self._registered)(obj, self, cycle)
        finally:
            self.end_group()
            self._printing.pop()

    # layout

    def getvalue(self):
        while len(self._open) > 1:
            self.end_group()
        out = []
        _Layout(out, self.max_width).lay(self._root, False, [])
        return "".join(out)


class _Layout:
    def __init__(self, out, max_width):
        self.out = out
        self.max_width = max_width
        self.column = 0

    def lay(self, group, flat, outer):
        """Write *group*; *outer* holds (items, index) of the enclosing
        groups, for the text that follows a group on its line."""
        out = self.out
        items = group.items
        for index, item in enumerate(items):
            kind = type(item)
            if kind is str:
                out.append(item)
                self.column += len(item)
            elif kind is _Group:
                if flat or self._fits(item, items, index, outer):
                    self.lay(item, True, None)
                else:
                    outer.append((items, index))
                    self.lay(item, False, outer)
                    outer.pop()
            elif kind is _Break and flat:
                out.append(item.sep)
                self.column += len(item.sep)
            else:
                out.append("\n" + " " * item.indent)
                self.column = item.indent

    def _fits(self, group, items, index, outer):
        room = self.max_width - self.column - group.width
        if group.forced or room < 0:
            return False
        # The text after the group, up to the next place a line breaks,
        # is on the same line.
        used, stopped = _head(items, index + 1, room)
        for enclosing, at in reversed(outer):
            if stopped or used > room:
                break
            more, stopped = _head(enclosing, at + 1, room - used)
            used += more
        return used <= room


def _head(items, start, room):
    """Width of items[start:] up to their first break, and whether a break
    ends it; counting stops once more than *room*."""
    used = 0
    for position in range(start, len(items)):
        item = items[position]
        kind = type(item)
        if kind is str:
            used += len(item)
        elif kind is _Group:
            if item.breaks:
                more, _ = _head(item.items, 0, room - used)
                return used + more, True
            used += item.width
        else:
            return used, True
        if used > room:
            return used, True
    return used, False


# -- printers by type --------------------------------------------------------------

def _printer_for(obj, registered=None):
    if obj is None or obj is True or obj is False or obj is Ellipsis \
            or obj is NotImplemented:
        return _repr_lines
    try:
        cls = obj.__class__
        if not isinstance(cls, type):
            cls = type(obj)
    except Exception:
        cls = type(obj)
    printers = _printers()
    for klass in cls.__mro__:
        printer = registered(klass) if registered is not None else None
        if printer is not None:
            return printer
        printer = printers.get(klass)
        if printer is not None:
            return printer
        printer = _BY_NAME.get((_attr(klass, "__module__"), _attr(klass, "__name__")))
        if printer is not None:
            printers[klass] = printer
            return printer
        namespace = klass.__dict__
        if "_repr_pretty_" in namespace:
            method = _attr(klass, "_repr_pretty_")
            if callable(method):
                return method
        if klass is not object and "__repr__" in namespace \
                and callable(_attr(klass, "__repr__")):
            return _repr_lines
    return _default


def _attr(obj, name):
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _repr_lines(obj, p, cycle):
    """repr(obj), a forced line break between its lines."""
    lines = repr(obj).splitlines()
    p.begin_group()
    for index, line in enumerate(lines):
        if index:
            p.break_()
        p.text(line)
    p.end_group()


def _default(obj, p, cycle):
    cls = _attr(obj, "__class__") or type(obj)
    if _attr(cls, "__repr__") is not object.__repr__:
        _repr_lines(obj, p, cycle)
        return
    p.begin_group(1, "<")
    p.pretty(cls)
    p.text(" at 0x%x" % id(obj))
    if cycle:
        p.text(" ...")
    p.end_group(1, ">")


def _items(p, items, draw):
    """The items of a container, each drawn by *draw*, a comma and a break
    place between them."""
    for index, item in p._enumerate(items):
        if index:
            p.text(",")
            p.breakable()
        draw(item)


def _sequence(opening, closing):
    def printer(obj, p, cycle):
        if cycle:
            p.text(opening + "..." + closing)
            return
        p.begin_group(len(opening), opening)
        _items(p, obj, p.pretty)
        if isinstance(obj, tuple) and len(obj) == 1:
            p.text(",")
        p.end_group(len(opening), closing)
    return printer


def _mapping(opening, closing):
    def printer(obj, p, cycle):
        if cycle:
            p.text("{...}")
            return

        def draw(key):
            p.pretty(key)
            p.text(": ")
            p.pretty(obj[key])
        p.begin_group(len(opening), opening)
        _items(p, obj.keys(), draw)
        p.end_group(len(opening), closing)
    return printer


def _set(opening, closing):
    def printer(obj, p, cycle):
        if cycle:
            p.text(opening + "..." + closing)
            return
        if not obj:
            p.text(type(obj).__name__ + "()")
            return
        items = obj
        if not p.max_seq_length or len(obj) < p.max_seq_length:
            items = _sorted(obj)
        p.begin_group(len(opening), opening)
        _items(p, items, p.pretty)
        p.end_group(len(opening), closing)
    return printer


def _sorted(items):
    """Sorted if the items compare, else by str, else as they come."""
    items = list(items)
    for key in (None, str):
        try:
            return sorted(items, key=key)
        except Exception:
            pass
    return items


class _Raw:
    """Text drawn as it is (a flag name, a raw string literal)."""

    def __init__(self, text):
        self.text = text

    def _repr_pretty_(self, p, cycle):
        p.text(self.text)


def _call(p, name, args=(), kwargs=()):
    """``name(arg, ..., key=value, ...)``, a break place after each comma."""
    opening = name + "("
    p.begin_group(len(opening), opening)
    first = True
    for arg in args:
        if not first:
            p.text(",")
            p.breakable()
        first = False
        p.pretty(arg)
    for key, value in kwargs:
        if not first:
            p.text(",")
            p.breakable()
        first = False
        p.begin_group(len(key) + 1, key + "=")
        p.pretty(value)
        p.end_group(len(key) + 1)
    p.end_group(len(opening), ")")


def _type(obj, p, cycle):
    # A metaclass with a repr of its own (enums) keeps it.
    for klass in type(obj).__mro__:
        if "__repr__" in klass.__dict__:
            if klass is not type:
                _repr_lines(obj, p, cycle)
                return
            break
    name = _attr(obj, "__qualname__")
    if not isinstance(name, str):
        name = _attr(obj, "__name__")
        if not isinstance(name, str):
            name = "<unknown type>"
    module = _attr(obj, "__module__")
    if module in (None, "builtins", "__builtin__", "exceptions"):
        p.text(name)
    else:
        p.text("%s.%s" % (module, name))


def _function(obj, p, cycle):
    name = _attr(obj, "__qualname__") or obj.__name__
    module = obj.__module__
    if module and module not in ("builtins", "__builtin__", "exceptions"):
        name = "%s.%s" % (module, name)
    try:
        import inspect
        name += str(inspect.signature(obj))
    except (ValueError, TypeError):
        pass
    p.text("<function %s>" % name)


def _exception(obj, p, cycle):
    cls = obj.__class__
    name = getattr(cls, "__qualname__", cls.__name__)
    if cls.__module__ not in ("builtins", "exceptions"):
        name = "%s.%s" % (cls.__module__, name)
    _call(p, name, getattr(obj, "args", ()))


def _super(obj, p, cycle):
    p.begin_group(8, "<super: ")
    p.pretty(obj.__thisclass__)
    p.text(",")
    p.breakable()
    p.pretty(obj.__self__)
    p.end_group(8, ">")


_FLAGS = ("IGNORECASE", "LOCALE", "MULTILINE", "DOTALL", "UNICODE", "VERBOSE",
          "DEBUG")


def _pattern(obj, p, cycle):
    re = sys.modules["re"]
    args = [_Raw("r" + repr(obj.pattern).replace("\\\\", "\\"))]
    if obj.flags:
        names = ["re." + flag for flag in _FLAGS
                 if obj.flags & getattr(re, flag)]
        args.append(_Raw("|".join(names)))
    _call(p, "re.compile", args)


def _named_call(draw):
    """A printer ``ClassName(...)``; ``ClassName(...)`` for a cycle."""
    def printer(obj, p, cycle):
        name = obj.__class__.__name__
        if cycle:
            _call(p, name, [_Raw("...")])
        else:
            draw(obj, p, name)
    return printer


def _namespace(obj, p, cycle):
    if cycle:
        _call(p, "namespace", [_Raw("...")])
    else:
        _call(p, "namespace", (), list(obj.__dict__.items()))


def _defaultdict(obj, p, name):
    _call(p, name, [obj.default_factory, dict(obj)])


def _ordered_dict(obj, p, name):
    _call(p, name, [list(obj.items())] if len(obj) else [])


def _deque(obj, p, name):
    kwargs = [("maxlen", obj.maxlen)] if obj.maxlen is not None else []
    _call(p, name, [list(obj)], kwargs)


def _counter(obj, p, name):
    _call(p, name, [dict(obj.most_common())] if len(obj) else [])


def _user_list(obj, p, name):
    _call(p, name, [obj.data])


# Types found by (module, name), so their modules need not be imported here.
_BY_NAME = {
    ("re", "Pattern"): _pattern,
    ("collections", "defaultdict"): _named_call(_defaultdict),
    ("collections", "OrderedDict"): _named_call(_ordered_dict),
    ("collections", "deque"): _named_call(_deque),
    ("collections", "Counter"): _named_call(_counter),
    ("collections", "UserList"): _named_call(_user_list),
}

_PRINTERS = None


def _printers():
    global _PRINTERS
    if _PRINTERS is None:
        import os

        class _Method:
            def method(self):
                pass
        _PRINTERS = {
            int: _repr_lines, float: _repr_lines, str: _repr_lines,
            bytes: _repr_lines, range: _repr_lines, slice: _repr_lines,
            tuple: _sequence("(", ")"),
            list: _sequence("[", "]"),
            dict: _mapping("{", "}"),
            set: _set("{", "}"),
            frozenset: _set("frozenset({", "})"),
            super: _super,
            type: _type,
            type(_printers): _function,             # functions
            type(len): _function,                   # builtin functions
            type(_Method().method): _repr_lines,    # bound methods
            type(sys.implementation): _namespace,   # types.SimpleNamespace
            type(type.__dict__): _mapping("mappingproxy({", "})"),
            BaseException: _exception,
        }
        if type(os.environ) is not dict:
            _PRINTERS[type(os.environ)] = _mapping("environ{", "}")
    return _PRINTERS
