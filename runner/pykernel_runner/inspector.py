"""``obj?`` and ``obj??``: the text IPython's pager shows for an object.

An agent types ``df.merge?`` to read a docstring.  IPython answers with its
inspector's fields (``Signature:``, ``Docstring:``, ``File:``, ``Type:`` ...,
and ``Source:`` in place of the docstring for ``??``), which ipykernel sends
as a ``page`` payload and JupyterLab shows as the cell's output; here the
same text is printed.  The fields, their order and their layout are
IPython's (``IPython.core.oinspect``), without its colours.  A name that
does not resolve prints ``Object `name` not found.``, as IPython does.
"""

import inspect
import os

_STRING_MAX = 200                   # longer string forms are cut in the middle (`?` only)
_HALF = (_STRING_MAX - 5) // 2
_OBJECT_INIT_DOC = inspect.getdoc(object.__init__)
_BUILTIN_TYPE_DOCS = {inspect.getdoc(t) for t in (
    object, type, int, float, str, bytes, list, tuple, dict, set, frozenset, bool)}
_MISSING = object()


def page_text(target, namespace, detail):
    """The pager text for *target* (``name``, ``a.b``, ``seq[0]``) looked up in
    *namespace* then the builtins; *detail* 1 adds the source (``??``).
    None when the target does not resolve."""
    obj = _resolve(target, namespace)
    if obj is _MISSING:
        return None
    return format_fields(_fields(obj, target, detail))


def _resolve(target, namespace):
    import builtins
    import re
    parts = re.findall(r"\.?([^.\[\]]+)|\[(-?\d+)\]", target)
    if not parts or not parts[0][0]:
        return _MISSING
    name = parts[0][0]
    if name in namespace:
        obj = namespace[name]
    elif hasattr(builtins, name):
        obj = getattr(builtins, name)
    else:
        return _MISSING
    try:
        for attr, index in parts[1:]:
            obj = obj[int(index)] if index else getattr(obj, attr)
    except Exception:
        return _MISSING
    return obj


def _fields(obj, name, detail):
    """[(title, text)] in IPython's order for *obj*'s kind."""
    doc = _getdoc(obj) or "<no docstring>"
    source = _source(obj) if detail else None
    file = _file(obj)
    if source is not None and doc in source:
        doc = None      # the source shows it
    if inspect.isclass(obj) or _is_simple_callable(obj):
        fields = []
        if inspect.isclass(obj):
            fields.append(("Init signature", _signature(obj, name)))
        else:
            fields.append(("Signature", _signature(obj, name)))
        fields.append(("Docstring", doc))
        if source is not None:
            fields.append(("Source", source))
        elif inspect.isclass(obj):
            fields.append(("Init docstring", _init_doc(obj)))
        fields += [("File", file), ("Type", type(obj).__name__)]
        if inspect.isclass(obj):
            names = [sub.__name__ for sub in type.__subclasses__(obj)]
            fields.append(("Subclasses", ", ".join(
                names if len(names) < 10 else names[:10] + ["..."])))
        return fields
    fields = [("Signature", _signature(obj, name) if callable(obj) else None),
              ("Type", type(obj).__name__), ("String form", _string_form(obj, detail))]
    try:
        fields.append(("Length", str(len(obj))))
    except Exception:
        pass
    fields.append(("File", file))
    fields.append(("Source", source) if source is not None else ("Docstring", doc))
    class_doc = _getdoc(type(obj))
    if doc and class_doc and class_doc != doc and class_doc not in _BUILTIN_TYPE_DOCS:
        fields.append(("Class docstring", class_doc))
    fields.append(("Init docstring", _init_doc(type(obj))))
    call = getattr(type(obj), "__call__", None)
    if callable(obj) and call is not None:
        fields.append(("Call docstring", _getdoc(call)))
    return fields


def format_fields(fields):
    """IPython's layout: titles padded to the widest, a body with several
    lines starting on the line after its title."""
    fields = [(title, body) for title, body in fields if body is not None]
    width = max(len(title) for title, _ in fields)
    lines = []
    for title, body in fields:
        body = body.strip("\n")
        lines.append("%s:%s%s%s" % (title, " " * (width - len(title)),
                                    "\n" if "\n" in body else " ", body))
    return "\n".join(lines)


def _is_simple_callable(obj):
    return (inspect.isfunction(obj) or inspect.ismethod(obj)
            or inspect.isbuiltin(obj) or inspect.ismethoddescriptor(obj))


def _getdoc(obj):
    try:
        doc = inspect.getdoc(obj)
    except Exception:
        return None
    return doc if isinstance(doc, str) else None


def _init_doc(cls):
    init = getattr(cls, "__init__", None)
    doc = _getdoc(init) if init is not None else None
    return None if doc == _OBJECT_INIT_DOC else doc


def _signature(obj, name):
    try:
        return name.rsplit(".", 1)[-1] + str(inspect.signature(obj))
    except Exception:
        return None


def _string_form(obj, detail):
    try:
        text = str(obj)
    except Exception:
        return None
    if not detail and len(text) > _STRING_MAX:
        text = text[:_HALF] + " <...> " + text[-_HALF:]
        text = ("\n" + " " * len("string_form")).join(
            line.strip() for line in text.split("\n"))
    return text


def _file(obj):
    for candidate in (obj, type(obj)):
        try:
            path = inspect.getfile(inspect.unwrap(candidate))
        except Exception:
            continue
        if path.endswith("<string>"):
            return "Dynamically generated function. No source code available."
        home = os.path.expanduser("~")
        if home != "/" and path.startswith(home + os.sep):
            path = "~" + path[len(home):]   # as IPython's compress_user
        return path
    return None


def _source(obj):
    import linecache
    linecache.checkcache()
    for candidate in (obj, type(obj)):
        try:
            return inspect.getsource(inspect.unwrap(candidate)).rstrip()
        except Exception:
            continue
    return None
