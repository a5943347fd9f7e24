"""pykernel prelude: the helpers every cell can use.

The runner executes this file once per process in the user's namespace, with
``__pykernel__`` (the runner's primitives) already defined there, and hides
every name defined here from the user's listings.  Helpers that are not for
the user start with an underscore; nothing else is left behind.

Not a module of the runner's package, on purpose: it is code run in the
user's ``__main__``, whose top-level names all become the user's, so nothing
imports it and no module name leads to it.  The host names this file in
``init`` (docs/protocol.md#init); its bytecode comes from the host's cache,
compiled under the name ``pykernel_prelude`` (see runner.py).

Start-up time matters: nothing is imported at load time; each helper imports
what it needs when it is first called.

Helpers that need the host go through the in-band bridge
(``__pykernel__.bridge_call(name, args)``, which blocks the calling thread
until the host's ``onCall`` answers).  What a host is asked, by call name:

* ``<name>`` (from ``tool.<name>(**args)``): the keyword arguments as a dict.
* ``read``: ``{"path"}`` for a ``scheme://`` path (``:a-b`` appended when an
  offset or limit is given); the reply is the text, or ``{"text": ...}``.
  A scheme the host maps to a directory of its own (``uriRoots``) never gets
  here: the host reads it itself (see below).

Calls the host (src/kernel/host_calls.rs) answers itself and never passes on
under their own names, so a host tool named ``read`` or ``write`` keeps its own:

* ``__pykernel.kv``: the kv store (``kv``).
* ``__pykernel.read``: ``{"path", "offset", "limit"}`` from ``read()`` of a
  ``scheme://`` path.  The reply is ``{"text"}`` from a mapped root,
  ``{"refused": {"exception", "message"}}``, or ``{"reply": ...}``: the answer
  of the host's ``read`` call above, for a scheme with no root.
* ``__pykernel.write``: ``{"path", "content", "encoding"}`` from ``write()`` of
  a ``scheme://`` path: ``content`` is the str itself (``"utf-8"``) or the
  bytes in base64 (``"base64"``).  The reply is ``{"path", "bytes"}`` (the file
  written on the host) or ``{"refused": ...}`` (also for a scheme with no root).
* ``agent``: ``{"prompt", "agent", "model"?, "label"?, "schema"?, "handle"?,
  "isolated"?, "apply"?, "merge"?}`` (``agent`` always named: the host's
  ``defaultAgent`` when the cell gives none); the reply is the text, or ``{"text",
  "details": {"id", "agent", ...}, "data"?}`` (other ``details`` fields, such as
  the outcome of an isolated run, reach the node ``handle=True`` returns).
* ``completion``: ``{"prompt", "model", "system"?, "schema"?}``; the reply is
  the text, or ``{"text", "data"?}``.
* ``concurrency``: ``{}``, once per ``parallel``/``pipeline`` stage; the reply
  is ``{"limit": n}`` or ``n`` (0: no limit).  Without an answer, 8.
* ``budget``: ``{}``; the reply is ``{"total", "spent", "hard"}``.
"""


def display(*objs, raw=False, display_id=None, update=False, include=None,
            exclude=None, metadata=None, clear=False):
    """Show each object as a rich display, in order with printed output.

    With ``raw=True`` each object is already a MIME bundle (a dict such as
    ``{"text/plain": "hi"}``).  A ``display_id`` names the display so that
    ``update_display`` can replace it later (``display_id=True`` makes one
    up); then a handle with ``update(obj)`` is returned, as IPython does.
    ``include``/``exclude`` keep or drop MIME types, ``clear=True`` clears
    the output first; ``metadata`` is accepted and not sent.
    """
    handle = None
    if display_id is True:
        import os
        display_id = os.urandom(16).hex()
    if display_id is not None and display_id is not False:
        display_id = str(display_id)
        handle = _DisplayHandle(display_id)
    else:
        display_id = None
    if clear:
        clear_output(wait=True)
    __pykernel__.display(objs, raw=raw, display_id=display_id, update=update,
                         include=include, exclude=exclude)
    return handle


def update_display(obj, *, display_id, raw=False, include=None, exclude=None,
                   metadata=None):
    """Replace the display made earlier with the same ``display_id``."""
    display(obj, raw=raw, display_id=display_id, update=True, include=include,
            exclude=exclude)


def clear_output(wait=False):
    """Clear this cell's output (with ``wait=True``: when new output comes)."""
    __pykernel__.send_clear(wait)


class _DisplayHandle:
    """What ``display(..., display_id=...)`` returns: the display, by id."""

    def __init__(self, display_id):
        self.display_id = display_id

    def display(self, obj, **kwargs):
        display(obj, display_id=self.display_id, **kwargs)

    def update(self, obj, **kwargs):
        update_display(obj, display_id=self.display_id, **kwargs)

    def __repr__(self):
        return "<DisplayHandle display_id=%s>" % self.display_id


def env(key=None, value=None):
    """Read or set environment variables.

    ``env()`` returns a dict of all of them, ``env(key)`` one value (or None),
    ``env(key, value)`` sets one and returns the value.
    """
    import os
    if key is None:
        return dict(os.environ)
    if value is None:
        return os.environ.get(key)
    os.environ[key] = str(value)
    return os.environ[key]


def _emit_status(op, **data):
    """Send a status event (``{"op": op, ...}``) to the host."""
    __pykernel__.emit_status(op, **data)


# -- progress -------------------------------------------------------------------

def log(msg):
    """Report progress to the host: a status event ``log`` with the message
    (for the host's UI; it is not part of the cell's text output)."""
    _emit_status("log", message=str(msg))


def phase(title):
    """Mark the start of a phase of the work: a status event ``phase``."""
    _emit_status("phase", title=str(title))


# -- files ------------------------------------------------------------------------

def read(path, offset=1, limit=None):
    """The text of a file, or of its lines ``offset`` (1-based) onwards, at
    most ``limit`` of them.

    A ``scheme://`` path (``artifact://21``, ``mcp://server/resource``,
    ``agent://...``) is read by the host; a line range may be part of it
    (``artifact://21:3-4``) or given as offset/limit.  A scheme the host maps
    to a directory (``local://notes.md`` with ``uriRoots``) is a file there,
    read by the host: at most 8 MiB at once, FileNotFoundError when missing,
    PermissionError for a path that leads out of the directory.  ``file://``
    and plain paths are read here, as UTF-8 (undecodable bytes replaced).
    """
    import os
    offset = 1 if offset is None else _whole_number("offset", offset)
    if limit is not None:
        limit = _whole_number("limit", limit)
        if limit <= 0:
            return ""
    offset = max(1, offset)
    if _is_host_path(path):
        selector = ""
        if offset > 1 or limit is not None:
            selector = ":%d-%s" % (offset, "" if limit is None else offset + limit - 1)
        answer = _on_host(__pykernel__.bridge_call(
            "__pykernel.read", {"path": path, "offset": offset, "limit": limit}))
        if "reply" in answer:       # the host's own read call answered it
            reply = answer["reply"]
            text = reply["text"] if isinstance(reply, dict) and "text" in reply else reply
        else:
            text = answer.get("text")
        _emit_status("read", path=path + selector,
                     chars=len(text) if isinstance(text, str) else None)
        return text
    path = _local_path(path)
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if offset > 1 or limit is not None:
        lines = text.split("\n")
        last = lines.pop()      # after the final newline: '' unless unterminated
        lines = [line + "\n" for line in lines]
        if last:
            lines.append(last)
        end = len(lines) if limit is None else offset - 1 + limit
        text = "".join(lines[offset - 1:end])
    _emit_status("read", path=os.path.abspath(path), chars=len(text))
    return text


def write(path, content):
    """Write ``content`` (str as UTF-8, or bytes) to a local file, creating
    its parent directories; returns what was written (characters for str,
    bytes for bytes).

    A ``scheme://`` path is written by the host when it maps the scheme to a
    directory (``local://notes.md`` with ``uriRoots``): a file there, its
    directories made, at most 8 MiB at once.  Any other scheme raises
    ValueError.
    """
    import os
    if _is_host_path(path):
        return _write_on_host(path, content)
    path = _local_path(path)
    absolute = os.path.abspath(path)
    os.makedirs(os.path.dirname(absolute), exist_ok=True)
    if isinstance(content, (bytes, bytearray, memoryview)):
        with open(absolute, "wb") as f:
            written = f.write(content)
        _emit_status("write", path=absolute, bytes=written)
    elif isinstance(content, str):
        with open(absolute, "w", encoding="utf-8", newline="") as f:
            written = f.write(content)
        _emit_status("write", path=absolute, chars=written,
                     bytes=len(content.encode("utf-8", "surrogatepass")))
    else:
        raise TypeError("write() takes str or bytes content, not %s"
                        % type(content).__name__)
    return written


# The most a host-mapped write takes at once (MAX_BYTES in src/store/uri_roots.rs).
_HOST_WRITE_MAX_BYTES = 8 << 20

# A host's refusal of a mapped read or write, by name, as the exception raised.
_HOST_FILE_ERRORS = {
    "FileNotFoundError": FileNotFoundError, "PermissionError": PermissionError,
    "IsADirectoryError": IsADirectoryError, "NotADirectoryError": NotADirectoryError,
    "ValueError": ValueError, "OSError": OSError,
}


def _on_host(answer):
    """The host's answer to ``__pykernel.read``/``__pykernel.write``, or its
    refusal raised."""
    if not isinstance(answer, dict):
        raise RuntimeError("the host's answer is not understood: %r" % (answer,))
    refused = answer.get("refused")
    if isinstance(refused, dict):
        error = _HOST_FILE_ERRORS.get(refused.get("exception"), OSError)
        raise error(refused.get("message", "refused by the host"))
    return answer


def _write_on_host(path, content):
    """``write()`` of a ``scheme://`` path: sent to the host, which writes it
    beneath the directory it maps the scheme to."""
    if isinstance(content, (bytes, bytearray, memoryview)):
        import base64
        data = bytes(content)
        args = {"path": path, "content": base64.b64encode(data).decode("ascii"),
                "encoding": "base64"}
        written, status = len(data), {"bytes": len(data)}
    elif isinstance(content, str):
        data = content.encode("utf-8")
        args = {"path": path, "content": content, "encoding": "utf-8"}
        written, status = len(content), {"chars": len(content), "bytes": len(data)}
    else:
        raise TypeError("write() takes str or bytes content, not %s"
                        % type(content).__name__)
    if len(data) > _HOST_WRITE_MAX_BYTES:
        raise ValueError("%s: %d bytes is more than write() takes at once (8 MiB) "
                         "for a host path: write it in parts to several files, or "
                         "save it to a local path" % (path, len(data)))
    _on_host(__pykernel__.bridge_call("__pykernel.write", args))
    _emit_status("write", path=path, **status)
    return written


def _whole_number(name, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("read(): %s must be an int, not %s"
                        % (name, type(value).__name__))
    return value


def _is_host_path(path):
    """Whether *path* is a ``scheme://...`` string the host resolves."""
    if not isinstance(path, str):
        return False
    scheme, sep, _ = path.partition("://")
    return (bool(sep) and scheme[:1].isalpha() and scheme.lower() != "file"
            and all(c.isalnum() or c in "+-." for c in scheme)
            and scheme.isascii())


def _local_path(path):
    import os
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if path.lower().startswith("file://"):
        from urllib.parse import unquote
        path = unquote(path[len("file://"):])
    return os.path.expanduser(path)


# -- the namespace ---------------------------------------------------------------

_DEFS_LIMIT = 200


class _Defs(list):
    """What ``defs()`` returns: ``"name: shape"`` strings, shown one a line."""

    more = 0

    def __repr__(self):
        if not self:
            return "(no user definitions)"
        lines = list(self)
        if self.more:
            lines.append("... and %d more" % self.more)
        return "\n".join(lines)


def defs():
    """The names your cells defined (sorted, at most 200), each with a short
    shape of its value: ``df: DataFrame (3x2)``, ``xs: list[5]``,
    ``f: function(a, b)``, ``n: int``.  Prelude helpers and names starting
    with ``_`` are left out."""
    namespace = __pykernel__.namespace
    hidden = __pykernel__.hidden_names
    names = sorted(name for name in list(namespace)
                   if not name.startswith("_") and name not in hidden)
    result = _Defs("%s: %s" % (name, _shape(namespace[name]))
                   for name in names[:_DEFS_LIMIT])
    result.more = max(0, len(names) - _DEFS_LIMIT)
    return result


def _shape(value):
    """A short description of *value*: its type and size, never its content."""
    import sys
    kind = type(value)
    try:
        if isinstance(value, type):
            return "class"
        if isinstance(value, type(sys)):
            return "module %s" % value.__name__
        code = getattr(value, "__code__", None)
        if code is not None and hasattr(code, "co_varnames"):
            prefix = "async function" if code.co_flags & 0x80 else "function"
            parameters = _parameters(code)
            if getattr(value, "__self__", None) is not None:     # a bound method
                parameters = parameters.partition(", ")[2]
            return "%s(%s)" % (prefix, parameters)
        if callable(value) and kind.__name__ in ("builtin_function_or_method",
                                                   "method", "partial"):
            return "function(...)"
        shape = getattr(value, "shape", None) if not isinstance(value, (str, bytes)) else None
        if isinstance(shape, tuple) and shape and all(isinstance(n, int) for n in shape):
            return "%s (%s)" % (kind.__name__, "x".join(str(n) for n in shape))
        for builtin in (str, bytes, bytearray, list, tuple, dict, set, frozenset):
            if isinstance(value, builtin):
                name = builtin.__name__ if kind.__name__.startswith("_") else kind.__name__
                return "%s[%d]" % (name, len(value))
        if isinstance(value, (int, float, complex, bool)) or value is None:
            return kind.__name__
        if hasattr(kind, "__len__"):
            return "%s[%d]" % (kind.__name__, len(value))
    except Exception:
        pass
    return kind.__name__


def _parameters(code):
    """``a, b, *args, key, **kw`` from a function's code object."""
    names = code.co_varnames
    positional = code.co_argcount
    keyword_only = code.co_kwonlyargcount
    parts = list(names[:positional])
    positional_only = getattr(code, "co_posonlyargcount", 0)
    if positional_only:
        parts.insert(positional_only, "/")
    rest = positional + keyword_only
    if code.co_flags & 0x04:            # CO_VARARGS
        parts.append("*" + names[rest])
        rest += 1
    elif keyword_only:
        parts.append("*")
    parts.extend(names[positional:positional + keyword_only])
    if code.co_flags & 0x08:            # CO_VARKEYWORDS
        parts.append("**" + names[rest])
    return ", ".join(parts)


# -- the host: tools, agents, completions ------------------------------------

class _Tool:
    """One host tool: calling it sends its keyword arguments to the host."""

    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __call__(self, args=None, **kwargs):
        if args is None:
            merged = {}
        elif isinstance(args, dict):
            merged = dict(args)
        else:
            raise TypeError("tool.%s() takes keyword arguments or one dict, not %s"
                            % (self._name, type(args).__name__))
        merged.update(kwargs)
        return __pykernel__.bridge_call(self._name, merged)

    def __repr__(self):
        return "<tool.%s>" % self._name


class _Tools:
    """``tool.<name>(**args)`` calls the host's tool ``name`` with ``args``
    and returns its reply; ``tool["name"]`` works for any name."""

    __slots__ = ()

    def __getattr__(self, name):
        if name.startswith("_"):        # keeps probes such as _repr_html_ away
            raise AttributeError(name)
        return _Tool(name)

    def __getitem__(self, name):
        return _Tool(str(name))

    def __repr__(self):
        return "<tool: tool.<name>(**args) calls a host tool>"


tool = _Tools()


def agent(prompt, *, agent=None, model=None, label=None, schema=None,
          handle=False, isolated=None, apply=None, merge=None):
    """Run a subagent through the host and return its final text.

    ``agent`` names the subagent; None is the host's default (its
    ``defaultAgent``, else "deep").  With ``schema`` (a JSON Schema dict) the
    agent's output is parsed as JSON and the object returned.  With
    ``handle=True`` a node dict is returned instead: ``{"text", "output",
    "handle", "id", "agent"}``, ``handle`` being the agent's ``agent://<id>``
    (None when the host gave no id), plus ``"data"`` (the parsed object) when
    ``schema`` is set, plus every other field of the host's ``details`` (what
    an isolated run produced, say), a camelCase one also under its snake_case
    name (``patchPath`` as ``patch_path`` too).

    ``isolated`` (run the subagent in its own copy of the workspace),
    ``apply`` (bring its changes back) and ``merge`` (merge them into the
    caller's branch) are True, False or None (the host decides); they reach
    the host as given, and only when not None.
    """
    for key, value in (("isolated", isolated), ("apply", apply), ("merge", merge)):
        if value is not None and not isinstance(value, bool):
            raise TypeError("agent(): %s must be True, False or None, not %s"
                            % (key, type(value).__name__))
    if agent is None:
        agent = __pykernel__.default_agent
    args = {"prompt": prompt, "agent": agent}
    for key, value in (("model", model), ("label", label), ("schema", schema),
                       ("isolated", isolated), ("apply", apply), ("merge", merge)):
        if value is not None:
            args[key] = value
    if handle:
        args["handle"] = True
    reply = __pykernel__.bridge_call("agent", args)
    text, data, has_data = _reply_text(reply)
    if schema is not None and not has_data:
        data, has_data = _parse_json("agent", text), True
    if not handle:
        return data if has_data else text
    details = reply.get("details") if isinstance(reply, dict) else None
    if not isinstance(details, dict):
        details = reply if isinstance(reply, dict) else {}
    agent_id = details.get("id")
    node = {
        "text": text,
        "output": text,
        "handle": None if agent_id is None else "agent://%s" % agent_id,
        "id": agent_id,
        "agent": details.get("agent") if agent_id is not None else None,
    }
    if has_data:
        node["data"] = data
    for key, value in details.items():
        if key not in node and key not in _REPLY_FIELDS:
            node[key] = value
    # Hosts written in TypeScript name their details in camelCase, where cells
    # read snake_case: both names are given, and never over one the host sent.
    for key, value in details.items():
        snake = _snake_case(key)
        if snake != key and snake not in node and snake not in _REPLY_FIELDS:
            node[snake] = value
    return node


# Fields of an agent reply that are not details of the run (when a host puts its
# details at the top level of the reply instead of under "details").
_REPLY_FIELDS = frozenset(("text", "data", "details"))


def _snake_case(name):
    """``patchPath`` -> ``patch_path``, ``baseURL`` -> ``base_url``; a name
    without capitals as it is."""
    if not isinstance(name, str) or name.islower() or not name.isidentifier():
        return name
    import re
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_",
                  name).lower()


def completion(prompt, *, model="default", system=None, schema=None):
    """One stateless completion from the host's model ``model`` ("smol",
    "default", "slow" or a model name); with ``system`` as the system prompt.
    With ``schema`` (a JSON Schema dict) the reply is parsed as JSON and the
    object returned; otherwise the text."""
    args = {"prompt": prompt, "model": model}
    if system is not None:
        args["system"] = system
    if schema is not None:
        args["schema"] = schema
    text, data, has_data = _reply_text(__pykernel__.bridge_call("completion", args))
    if schema is None:
        return text
    return data if has_data else _parse_json("completion", text)


def _reply_text(reply):
    """(text, data, has data) of an agent or completion reply."""
    if isinstance(reply, dict):
        return reply.get("text"), reply.get("data"), "data" in reply
    return reply, None, False


def _parse_json(helper, text):
    """*text* parsed as JSON; a ```json fence around it is allowed."""
    import json
    if not isinstance(text, str):
        return text
    body = text.strip()
    if body.startswith("```") and body.endswith("```"):
        body = body[3:-3]
        if body.startswith("json"):
            body = body[4:]
    try:
        return json.loads(body)
    except ValueError as exc:
        raise ValueError("%s(): the reply is not the JSON the schema asks for "
                         "(%s); it begins %r" % (helper, exc, text[:200])) from None


class _Budget:
    """The host's budget, read live: ``budget.total`` (None: unlimited),
    ``budget.hard``, ``budget.spent()`` and ``budget.remaining()`` (inf when
    unlimited).  Each read asks the host (bridge call ``budget``)."""

    __slots__ = ()

    @staticmethod
    def _snapshot():
        reply = __pykernel__.bridge_call("budget", {})
        return reply if isinstance(reply, dict) else {}

    @property
    def total(self):
        return self._snapshot().get("total")

    @property
    def hard(self):
        return bool(self._snapshot().get("hard"))

    def spent(self):
        return self._snapshot().get("spent") or 0

    def remaining(self):
        snapshot = self._snapshot()
        total = snapshot.get("total")
        if total is None:
            return float("inf")
        return max(0, total - (snapshot.get("spent") or 0))

    def __repr__(self):
        try:
            snapshot = self._snapshot()
        except Exception:
            return "<budget: unavailable>"
        return "<budget: total=%s spent=%s hard=%s>" % (
            snapshot.get("total"), snapshot.get("spent") or 0,
            bool(snapshot.get("hard")))


budget = _Budget()


# -- fan-out ---------------------------------------------------------------------

_DEFAULT_CONCURRENCY = 8


def parallel(thunks):
    """Run zero-argument callables at once, on threads, and return their
    results in input order.

    At most the host's concurrency limit run at a time (8 when the host
    names none).  If any raised, the first one's (by position) exception is
    raised once all have finished.  An interrupt stops the fan-out: nothing
    new starts, calls in flight are aborted, and what the cell set before
    stays.
    """
    thunks = list(thunks)
    for thunk in thunks:
        if not callable(thunk):
            raise TypeError("parallel() takes zero-argument callables (such as "
                            "lambda: agent(...)), not %s" % type(thunk).__name__)
    return _fan_out(_call, thunks)


def pipeline(items, *stages):
    """Pass every item through each stage (a one-argument callable) in turn:
    the items of a stage run in parallel (as ``parallel`` does), and all of
    them finish a stage before any enters the next.  Returns the last
    stage's results in input order."""
    for stage in stages:
        if not callable(stage):
            raise TypeError("pipeline() stages are one-argument callables, not %s"
                            % type(stage).__name__)
    results = list(items)
    for stage in stages:
        results = _fan_out(stage, results)
    return results


def _call(thunk):
    return thunk()


def _concurrency_limit(count):
    """How many of *count* tasks may run at once, as the host says."""
    try:
        reply = __pykernel__.bridge_call("concurrency", {})
    except Exception:   # no bridge, or a host that does not answer this
        reply = None
    limit = reply.get("limit") if isinstance(reply, dict) else reply
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit < 0:
        limit = _DEFAULT_CONCURRENCY
    limit = int(limit)
    return count if limit == 0 else max(1, min(count, limit))


def _fan_out(function, items):
    """``[function(item) for item in items]`` on worker threads."""
    import threading
    count = len(items)
    if not count:
        return []
    width = _concurrency_limit(count) if count > 1 else 1
    results = [None] * count
    errors = {}
    lock = threading.Lock()
    settled = threading.Event()
    # Workers take the next index until none is left or the fan-out is
    # cancelled; the main thread only waits, so an interrupt reaches it there.
    state = {"next": 0, "left": count, "cancelled": False}

    def work():
        while True:
            with lock:
                index = state["next"]
                if state["cancelled"] or index >= count:
                    return
                state["next"] = index + 1
            try:
                results[index] = function(items[index])
            except BaseException as exc:
                errors[index] = exc
            with lock:
                state["left"] -= 1
                if not state["left"]:
                    settled.set()

    try:
        for number in range(width):
            threading.Thread(target=work, name="pykernel-parallel-%d" % number,
                             daemon=True).start()
        settled.wait()
    except BaseException:
        # Interrupted: start nothing more.  Calls in flight fail as the cell
        # ends ("aborted: eval cell was interrupted") and their threads end.
        state["cancelled"] = True
        raise
    if errors:
        raise errors[min(errors)]
    return results


# -- the key-value store ---------------------------------------------------------

_KV_MAX_KEY_CHARS = 256
_KV_MAX_VALUE_BYTES = 256 * 1024


class _KvStore:
    """The session's key-value store: JSON values that outlive the kernel
    (a reset, a restart) and that the host reads too (``KvStore`` in
    JavaScript, same file).

    ``kv.get(key, default=None)``, ``kv.set(key, value)``,
    ``kv.delete(key)`` (whether it was there), ``kv.list()`` (sorted keys).
    Keys are 1 to 256 characters without ``/``, ``\\`` or NUL; a value is at
    most 256 KiB as JSON, the store at most 4 MiB.  Every change happens
    under a lock and lands whole, so writers in other processes never lose
    each other's keys.

    The host keeps the store and answers each call (a bridge call it never
    passes on): a cell never opens the store's files, so kv works whatever
    the sandbox lets the kernel write, and no session's cell can reach
    another session's store.
    """

    __slots__ = ()

    @property
    def path(self):
        """The store's file on the host (None when the kernel has no store, or
        its host is elsewhere)."""
        return __pykernel__.kv_path

    def get(self, key, default=None):
        _kv_check_key(key)
        found = _kv_on_host("get", key=key)
        return found["value"] if "value" in found else default

    def set(self, key, value):
        import json
        _kv_check_key(key)
        try:
            encoded = json.dumps(value, ensure_ascii=False, allow_nan=False,
                                 separators=(",", ":")).encode("utf-8")
        except (TypeError, ValueError) as exc:  # sets, objects; NaN; lone surrogates
            error = TypeError if isinstance(exc, TypeError) else ValueError
            raise error("kv value for %r is not storable as JSON: %s"
                        % (key, exc)) from None
        if len(encoded) > _KV_MAX_VALUE_BYTES:
            raise ValueError("kv value for %r is %d bytes encoded; the limit is "
                             "%d bytes (256 KiB). Store less, or write a file and "
                             "keep its path." % (key, len(encoded), _KV_MAX_VALUE_BYTES))
        _kv_on_host("set", key=key, value=json.loads(encoded))
        _emit_status("kv", action="set", key=key)

    def delete(self, key):
        _kv_check_key(key)
        if not _kv_on_host("delete", key=key):
            return False
        _emit_status("kv", action="delete", key=key)
        return True

    def list(self):
        return _kv_on_host("list")

    def __repr__(self):
        if __pykernel__.kv_path:
            return "<kv store %s (kept by the host)>" % __pykernel__.kv_path
        if __pykernel__.kv_via_host:
            return "<kv store (kept by the host)>"
        return "<kv store (none: the kernel has no artifactsDir and sessionId)>"


# The host's refusals, by code, as the exceptions Python code expects of them.
_KV_ERRORS = {"ERR_KV_KEY": ValueError, "ERR_KV_LIMIT": ValueError,
              "ERR_ARTIFACTS_DIR": PermissionError}


def _kv_on_host(op, **args):
    """One store operation, answered by the host (``kv_call`` in src/kernel/host_calls.rs):
    its answer, or its refusal raised as the matching exception."""
    if not __pykernel__.kv_via_host:
        raise RuntimeError("the kv store needs artifactsDir and sessionId on the "
                           "kernel (none was given, so there is no store)")
    args["op"] = op
    answer = __pykernel__.bridge_call("__pykernel.kv", args)
    if isinstance(answer, dict) and isinstance(answer.get("refused"), dict):
        refused = answer["refused"]
        raise _KV_ERRORS.get(refused.get("code"), RuntimeError)(refused.get("message", ""))
    return answer


kv = _KvStore()


def _kv_check_key(key):
    if not isinstance(key, str):
        raise TypeError("kv keys are strings, not %s" % type(key).__name__)
    if not 1 <= len(key) <= _KV_MAX_KEY_CHARS:
        reason = "keys are 1 to 256 characters"
    elif "/" in key or "\\" in key or "\0" in key:
        reason = "keys may not contain '/', '\\' or NUL"
    else:
        return
    raise ValueError("invalid kv key %r: %s" % (key[:80], reason))
