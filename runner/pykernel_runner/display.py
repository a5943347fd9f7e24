"""Rich display for pykernel: MIME bundles for objects, and pyplot figures.

The runner imports this module the first time it needs a bundle for an
object that is not a plain str, int, float, bool or None, or when a cell
imports ``matplotlib.pyplot``; start-up never pays for it.  It imports no
third-party library itself: matplotlib figures, PIL images, pandas frames and
plotly figures are recognised by what they offer (duck typing, module names).

A bundle is built in this order, the first source of a MIME type winning:

1. a matplotlib Figure: ``image/png`` (as IPython's inline backend renders it);
2. ``_repr_mimebundle_(include=None, exclude=None)``: a dict, or a
   ``(data, metadata)`` tuple whose metadata is dropped (the protocol has none);
3. the ``_repr_*_`` methods in _REPR_METHODS;
4. ``text/plain``: the pretty text IPython would show (the pretty module),
   unless step 2 gave one.  It is left out only when it would say nothing
   but what the object is (``<IPython.core.display.HTML object>``, or
   ``<__main__.Report at 0x...>`` for a class without a repr of its own) and
   the bundle has HTML or Markdown: a host that prefers plain text to HTML
   then shows the content, not the placeholder.

A method that raises, or returns None or a value of the wrong type, is
skipped: a broken ``_repr_html_`` must not fail the cell.  Binary images
travel as base64 text, and every non-text value is made strict JSON by the
runner's converter, so a bundle can always be framed.  Only
KeyboardInterrupt gets through, so an interrupt still stops a slow repr.

One raster image per bundle: ``_repr_jpeg_`` is only asked when there is no
PNG yet, because Pillow offers both and a host counts and keeps every image
it receives.

Figures: the runner calls end_cell() after each cell; every open pyplot
figure that was not displayed during the cell is then displayed once, and all
figures are closed, as Jupyter's inline backend does.  ``plt.show()`` with a
non-interactive backend displays (and closes) the open figures at once.
"""

import binascii
import sys

# (method, MIME type, kind of value accepted)
_REPR_METHODS = (
    ("_repr_html_", "text/html", "text"),
    ("_repr_markdown_", "text/markdown", "text"),
    ("_repr_svg_", "image/svg+xml", "text"),
    ("_repr_png_", "image/png", "png"),
    ("_repr_jpeg_", "image/jpeg", "jpeg"),
    ("_repr_json_", "application/json", "json"),
    ("_repr_latex_", "text/latex", "text"),
    ("_repr_javascript_", "application/javascript", "text"),
)

# With one of these, a placeholder text/plain is left out (see step 4).
_READABLE = ("text/html", "text/markdown")

_MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "jpeg": b"\xff\xd8"}

# Backends that cannot show a window: plt.show() displays inline with these.
_NON_INTERACTIVE = frozenset(("agg", "cairo", "pdf", "pgf", "ps", "svg",
                              "template"))

_CO_VARKEYWORDS = 0x08

# The ipython module: consulted once a cell has imported it, never imported from here.
_IPYTHON = __package__ + ".ipython"

_pretty = None              # the pretty module, imported for the first text/plain
_jsonable = None            # the runner's strict-JSON converter (setup())
_send_display = None        # the runner's display primitive (setup())
_shown_figures = []         # figures displayed during the running cell


def setup(jsonable, send_display):
    """Give the module the runner's JSON converter and display primitive."""
    global _jsonable, _send_display
    _jsonable = jsonable
    _send_display = send_display


# -- bundles ------------------------------------------------------------------

def build_bundle(obj):
    """The MIME bundle (MIME type -> str or JSON value) for *obj*."""
    try:
        return _build(obj)
    except KeyboardInterrupt:
        raise
    except BaseException:   # an object hostile beyond the checks below
        return {"text/plain": _plain(obj)}


def _build(obj):
    bundle = {}
    if _is_figure(obj):
        _remember_shown(obj)
        png = _figure_png(obj)
        if png is not None:
            bundle["image/png"] = png
            # after the PNG: drawing it set the tick labels the chart reads
            _charts().add_chart(bundle, _charts().figure_chart(obj))
    _add_mimebundle(bundle, obj)
    _add_registered(bundle, obj)
    for method, mime, kind in _REPR_METHODS:
        if mime in bundle or (mime == "image/jpeg" and "image/png" in bundle):
            continue
        try:
            value = _convert(_call_repr(obj, method), kind)
        except KeyboardInterrupt:
            raise
        except BaseException:
            value = None
        if value is not None:
            bundle[mime] = value
    if not isinstance(bundle.get("text/plain"), str):
        bundle.pop("text/plain", None)
        text = plain_text(obj)
        if not (any(mime in bundle for mime in _READABLE)
                and _names_only(obj, text)):
            bundle["text/plain"] = text
    _add_web_chart(bundle)
    return bundle


def displays_itself(obj):
    """Call ``obj._ipython_display_()`` if it has one, as IPython's display()
    does (the object then displays what it wants); False when it has none or
    it failed (the object is then displayed as any other)."""
    method = getattr(type(obj), "_ipython_display_", None)
    if method is None or not callable(method):
        return False
    try:
        obj._ipython_display_()
    except KeyboardInterrupt:
        raise
    except BaseException:
        return False
    return True


def _names_only(obj, text):
    """Whether *text* only names obj's class: the pretty text of an object
    without a repr of its own, object's repr, or the one IPython's display
    objects (HTML, Markdown, ...) share."""
    try:
        cls = type(obj)
        return text in ("<%s.%s at 0x%x>" % (cls.__module__, cls.__qualname__, id(obj)),
                        "<%s.%s object>" % (cls.__module__, cls.__name__),
                        object.__repr__(obj))
    except Exception:
        return False


def clean_bundle(bundle):
    """A copy of a raw bundle that frames well: str keys, bytes as text or
    base64, other values strict JSON."""
    if not isinstance(bundle, dict):
        return bundle       # send_display names the mistake
    cleaned = {key: _clean_value(key, value) for key, value in bundle.items()
               if isinstance(key, str)}
    _add_web_chart(cleaned)
    return cleaned


# -- charts -------------------------------------------------------------------

# Bundles of these MIME types (plotly's figure, Vega-Lite's spec, any version)
# get a chart made from them.
_WEB_CHART_PREFIXES = ("application/vnd.plotly.", "application/vnd.vegalite.")


def _charts():
    from . import charts
    return charts


def _add_web_chart(bundle):
    """The chart of a plotly or Vega-Lite bundle, added to it; the charts
    module is imported only for such a bundle."""
    if "application/vnd.pykernel.chart+json" in bundle:
        return      # made already (plotly's show() cleans its bundle twice)
    if any(isinstance(key, str) and key.startswith(_WEB_CHART_PREFIXES)
           for key in bundle):
        charts = _charts()
        charts.add_chart(bundle, charts.bundle_chart(bundle))


def _call_repr(obj, method):
    try:
        func = getattr(obj, method, None)
        if func is None or not callable(func):
            return None
        value = func()
    except KeyboardInterrupt:
        raise
    except BaseException:
        return None
    if isinstance(value, tuple) and len(value) == 2:
        value = value[0]    # IPython allows (data, metadata)
    return value


def _convert(value, kind):
    """*value* as bundle data of *kind*, or None if it is not usable."""
    if value is None:
        return None
    if kind == "text":
        if isinstance(value, (bytes, bytearray)):   # SVG may come as bytes
            return bytes(value).decode("utf-8", "replace")
        return value if isinstance(value, str) else None
    if kind in _MAGIC:
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
            return _b64(data) if data.startswith(_MAGIC[kind]) else None
        if isinstance(value, str):
            # IPython takes a str as base64 already; only real images pass.
            try:
                data = binascii.a2b_base64(value.encode("ascii"))
            except (ValueError, UnicodeEncodeError, binascii.Error):
                return None
            return _b64(data) if data.startswith(_MAGIC[kind]) else None
        return None
    if kind == "json":
        if isinstance(value, (dict, list, tuple)):
            return _jsonable(value)
        return None
    return None


def _add_mimebundle(bundle, obj):
    method = getattr(type(obj), "_repr_mimebundle_", None)
    if method is None:
        return
    try:
        func = getattr(obj, "_repr_mimebundle_")
        if _takes_include(func):
            data = func(include=None, exclude=None)
        else:
            data = func()
    except KeyboardInterrupt:
        raise
    except BaseException:
        return
    if isinstance(data, tuple) and len(data) == 2:
        data = data[0]
    if not isinstance(data, dict):
        return
    try:
        items = list(data.items())
    except Exception:
        return
    for key, value in items:
        if isinstance(key, str) and key not in bundle and value is not None:
            try:
                bundle[key] = _clean_value(key, value)
            except KeyboardInterrupt:
                raise
            except BaseException:
                pass


def _add_registered(bundle, obj):
    """What printers registered with get_ipython().display_formatter give
    for obj; as in IPython they come after _repr_mimebundle_ and before the
    _repr_*_ methods."""
    ipython = sys.modules.get(_IPYTHON)
    if ipython is None:
        return
    for mime, value in ipython.formatted(obj).items():
        if mime not in bundle:
            try:
                bundle[mime] = _clean_value(mime, value)
            except KeyboardInterrupt:
                raise
            except BaseException:
                pass


def _takes_include(func):
    """Whether *func* accepts include=/exclude= (not all objects' do)."""
    code = getattr(getattr(func, "__func__", func), "__code__", None)
    if code is None:
        return True     # a builtin or C method: IPython passes them
    if code.co_flags & _CO_VARKEYWORDS:
        return True
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    return "include" in names and "exclude" in names


def _clean_value(mime, value):
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value)
        if mime.startswith("text/") or mime.endswith(("json", "+xml")):
            return value.decode("utf-8", "replace")
        return _b64(value)
    return _jsonable(value)


def plain_text(obj):
    """The text/plain of *obj*: pretty as in IPython, else its repr."""
    try:
        global _pretty
        if _pretty is None:
            from . import pretty as _pretty
        ipython = sys.modules.get(_IPYTHON)
        printers = ipython.text_printers() if ipython is not None else None
        return _pretty.pretty(obj, printers=printers)
    except KeyboardInterrupt:
        raise
    except BaseException:
        # A repr that fails, or a _repr_pretty_ that misuses the printer:
        # the repr alone, or what went wrong.
        return _plain(obj)


def _plain(obj):
    try:
        text = repr(obj)
        if isinstance(text, str):
            return text
        raise TypeError("__repr__ returned non-string (type %s)"
                        % type(text).__name__)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        try:
            detail = str(exc)
        except BaseException:
            detail = "<unprintable %s>" % type(exc).__name__
        return "<repr failed: %s: %s>" % (type(exc).__name__, detail)


def _b64(data):
    return binascii.b2a_base64(data, newline=False).decode("ascii")


# -- matplotlib ---------------------------------------------------------------

def _is_figure(obj):
    module = getattr(type(obj), "__module__", None)
    if not isinstance(module, str) or not module.startswith("matplotlib"):
        return False
    try:
        return hasattr(obj, "savefig") and hasattr(obj, "canvas")
    except Exception:
        return False


def _figure_png(fig):
    """The figure as base64 PNG, as IPython's inline backend saves it;
    None for an empty figure or one that fails to render."""
    try:
        if not fig.axes and not getattr(fig, "lines", None):
            return None     # nothing drawn: Jupyter shows no image either
        import io
        buffer = io.BytesIO()
        # At the figure's own dpi, as IPython's inline backend does: without it
        # matplotlib uses rcParams["savefig.dpi"] (a style or an agent may set it).
        fig.canvas.print_figure(buffer, format="png", bbox_inches="tight",
                                dpi=fig.dpi,
                                facecolor=fig.get_facecolor(),
                                edgecolor=fig.get_edgecolor())
        return _b64(buffer.getvalue())
    except KeyboardInterrupt:
        raise
    except BaseException:
        return None


def _remember_shown(fig):
    if not any(shown is fig for shown in _shown_figures):
        _shown_figures.append(fig)


def _open_figures(pyplot):
    helpers = sys.modules.get("matplotlib._pylab_helpers")
    if helpers is not None:
        return [manager.canvas.figure
                for manager in helpers.Gcf.get_all_fig_managers()]
    return [pyplot.figure(num) for num in pyplot.get_fignums()]


def show_figures():
    """Display each open pyplot figure not yet displayed in this cell, then
    close them all."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    try:
        figures = _open_figures(pyplot)
    except KeyboardInterrupt:
        raise
    except BaseException:
        figures = []
    try:
        for fig in figures:
            if any(shown is fig for shown in _shown_figures):
                continue
            bundle = build_bundle(fig)
            if "image/png" in bundle:
                _send_display(bundle)
    finally:
        try:
            pyplot.close("all")
        except KeyboardInterrupt:
            raise
        except BaseException:
            pass


def end_cell():
    """After a cell: show its undisplayed figures; forget what it showed."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    try:
        if pyplot is not None:
            # a pyplot imported again (after %pip evicted it, or a reload)
            # missed the import hook
            try:
                patch_pyplot(pyplot)
            except Exception:
                pass
        show_figures()
    finally:
        del _shown_figures[:]


def patch_pyplot(pyplot):
    """Make ``plt.show()`` display inline when no window can open; let the
    chart of a figure know what its pies, histograms and box plots were
    drawn from."""
    try:
        _wrap_axes_methods()
    except Exception:
        pass
    original = pyplot.show
    if getattr(original, "_pykernel_inline", False):
        return

    def show(*args, **kwargs):
        try:
            backend = str(pyplot.get_backend()).lower()
        except Exception:
            backend = "agg"
        if backend not in _NON_INTERACTIVE:
            return original(*args, **kwargs)
        show_figures()
        return None

    show.__name__ = show.__qualname__ = "show"
    show.__doc__ = original.__doc__
    show.__wrapped__ = original
    show._pykernel_inline = True
    pyplot.show = show


# -- what the chart of a figure cannot read back from its artists -------------
#
# A pie's wedges hold angles, not the numbers they were drawn from; a
# histogram's bars look like any bars; a box plot's stats are lines.  So
# Axes.pie, Axes.hist and Axes.bxp (which boxplot calls) are wrapped: each
# marks the artists it returns with what it was given, under _pykernel_chart.
# The wrappers return what the method returns, take what it takes, and never
# fail where the method did not.

def _wrap_axes_methods():
    axes = sys.modules.get("matplotlib.axes")
    if axes is None:
        return
    cls = axes.Axes
    for name, mark in (("pie", _mark_pie), ("hist", _mark_hist),
                       ("bxp", _mark_bxp)):
        original = cls.__dict__.get(name)
        if original is None or getattr(original, "_pykernel_chart", False):
            continue
        setattr(cls, name, _marking(original, mark))


def _marking(original, mark):
    import functools

    @functools.wraps(original)
    def method(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        try:
            mark(result, args, kwargs)
        except Exception:
            pass
        return result

    method._pykernel_chart = True
    return method


def _argument(args, kwargs, index, name):
    value = args[index] if len(args) > index else kwargs.get(name)
    data = kwargs.get("data")
    if isinstance(value, str) and data is not None:
        value = data[value]
    return value


def _mark_pie(result, args, kwargs):
    wedges = getattr(result, "wedges", None)
    values = getattr(result, "values", None)    # matplotlib >= 3.11
    if wedges is None:
        wedges = result[0]
        values = _argument(args, kwargs, 0, "x")
    values = [float(v) for v in values]
    if len(values) == len(wedges):
        for wedge, value in zip(wedges, values):
            wedge._pykernel_chart = {"pie_value": value}


def _mark_hist(result, args, kwargs):
    counts, edges, patches = result
    orientation = kwargs.get("orientation", "vertical")
    stacked = bool(kwargs.get("stacked", False))
    labels = kwargs.get("label")
    if isinstance(labels, str) or labels is None:
        labels = [labels]
    # one dataset: counts is one array and patches one container
    if len(patches) and not isinstance(patches[0], (list, tuple)) \
            and not hasattr(patches[0], "patches"):
        counts, patches = [counts], [patches]
    below = None
    for index, (drawn, artists) in enumerate(zip(counts, patches)):
        drawn = [float(c) for c in drawn]
        own = drawn if not stacked or below is None else \
            [c - b for c, b in zip(drawn, below)]
        below = drawn
        record = {"hist": index, "edges": [float(e) for e in edges],
                  "counts": own, "density": bool(kwargs.get("density", False)),
                  "stacked": stacked, "orientation": orientation,
                  "label": labels[index] if index < len(labels) else None}
        for artist in artists:
            artist._pykernel_chart = record


def _mark_bxp(result, args, kwargs):
    stats = list(_argument(args, kwargs, 0, "bxpstats"))
    positions = _argument(args, kwargs, 1, "positions")
    positions = list(positions) if positions is not None \
        else list(range(1, len(stats) + 1))
    orientation = kwargs.get("orientation") or "vertical"
    if kwargs.get("vert") is False:
        orientation = "horizontal"
    records = [{"box": dict(stat), "position": float(position),
                "orientation": orientation}
               for stat, position in zip(stats, positions)]
    for key in ("boxes", "medians", "whiskers", "caps", "fliers", "means"):
        artists = result.get(key, [])
        per_box = len(artists) // len(records) if records else 0
        for index, artist in enumerate(artists):
            if per_box:
                artist._pykernel_chart = records[min(index // per_box,
                                                     len(records) - 1)]
