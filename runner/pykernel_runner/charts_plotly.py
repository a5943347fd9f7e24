"""The chart of a plotly figure, from its JSON (docs/charts.md).

The figure arrives as plotly's JSON encoder writes it, ``{data, layout}``:
traces are grouped by the axes they are drawn on (one chart per pair, a
superchart for several), each trace mapped by its type.  What plotly.js
computes in the browser (histogram bins, box quartiles) is computed here the
way it does, as closely as a few lines allow.  plotly >= 6 writes numeric
arrays as typed arrays (``{"dtype", "bdata", "shape"?}``, little-endian).
"""

import array
import base64
import math
import sys

from . import charts, charts_bins
from .charts_web import (as_number, box_stats, capped, coordinate, coordinates, limits,
                         pie_slices, scale_of, series)

# Trace types drawn on x/y axes; the others have a domain (pie, ...) or a
# scene, geo or polar subplot, and no x/y axis fields.
_CARTESIAN = frozenset((
    "scatter", "scattergl", "bar", "box", "histogram", "heatmap", "heatmapgl",
    "contour", "histogram2d", "histogram2dcontour", "violin", "candlestick",
    "ohlc", "waterfall", "funnel", "image", "carpet", "contourcarpet",
    "scattercarpet"))

_AXIS_TYPES = {"log": "log", "date": "datetime", "category": "categorical",
               "multicategory": "categorical", "linear": "linear"}

# Typed arrays' dtypes, as the array module spells them (all of the right
# size on the platforms CPython runs on; checked below anyway).
_TYPECODES = {"i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I",
              "f4": "f", "f8": "d"}
_SIZES = {"i1": 1, "u1": 1, "i2": 2, "u2": 2, "i4": 4, "u4": 4, "f4": 4, "f8": 8}


def figure_chart(figure):
    """The chart of a plotly figure dict, or None (no traces, or not a
    figure)."""
    traces = figure.get("data")
    layout = figure.get("layout")
    layout = layout if isinstance(layout, dict) else {}
    if not isinstance(traces, list):
        return None
    traces = [(i, _decoded(t)) for i, t in enumerate(traces)
              if isinstance(t, dict) and t.get("visible", True) is True]
    if not traces:
        return None
    cartesian, others = {}, []
    for index, trace in traces:
        kind = trace.get("type") or "scatter"
        if kind in _CARTESIAN:
            key = (_axis_id(trace.get("xaxis"), "x"), _axis_id(trace.get("yaxis"), "y"))
            cartesian.setdefault(key, []).append((index, trace))
        else:
            others.append((index, trace))
    for key in _layout_axes(layout):
        cartesian.setdefault(key, [])
    legend = _legend(layout, traces)
    made = [_axes_chart(key, cartesian[key], layout, legend)
            for key in sorted(cartesian, key=_axes_order)]
    made += [_domain_chart(index, trace) for index, trace in others]
    if not any(_drawn(chart) for chart in made):
        return None
    title = _title(layout.get("title"))
    if len(made) == 1:
        made[0]["title"] = title
        return made[0]
    for chart, key in zip(made, sorted(cartesian, key=_axes_order)):
        chart["title"] = _subplot_title(layout, key)
    superchart = {"type": "superchart", "title": title, "source": "plotly"}
    return capped(superchart, made, charts.MAX_SERIES)


def _drawn(chart):
    """Whether a chart shows anything: elements, or traces we do not map."""
    return bool(chart.get("elements")) or "trace_types" in chart


# -- arrays -------------------------------------------------------------------

def values(value):
    """A data array as a list: a JSON list, or a typed array decoded (a 2-D
    one as a list of rows); None for anything else."""
    if isinstance(value, list):
        return value
    if isinstance(value, tuple):
        return list(value)
    if not (isinstance(value, dict) and isinstance(value.get("bdata"), str)):
        return None
    dtype = value.get("dtype")
    if dtype not in _TYPECODES:
        return None
    items = array.array(_TYPECODES[dtype])
    if items.itemsize != _SIZES[dtype]:
        return None
    raw = base64.b64decode(value["bdata"])
    items.frombytes(raw[:len(raw) - len(raw) % items.itemsize])
    if sys.byteorder == "big":
        items.byteswap()
    flat = items.tolist()
    shape = value.get("shape")
    if isinstance(shape, str) and "," in shape:
        try:
            columns = int(shape.split(",")[1])
        except ValueError:
            return flat
        if columns > 0:
            return [flat[i:i + columns] for i in range(0, len(flat), columns)]
    return flat


def _decoded(trace):
    """A copy of *trace* with its typed arrays (and its error bars') decoded
    once."""
    trace = {key: values(value) if _typed(value) else value for key, value in trace.items()}
    for key in ("error_x", "error_y"):
        if isinstance(trace.get(key), dict):
            trace[key] = {k: values(v) if _typed(v) else v for k, v in trace[key].items()}
    return trace


def _typed(value):
    return isinstance(value, dict) and "bdata" in value


def _positions(trace, axis, count):
    """The trace's x (or y) data, or plotly's x0 + dx * i when it has none."""
    given = values(trace.get(axis))
    if given is not None:
        return given
    start = as_number(trace.get(axis + "0"))
    step = as_number(trace.get("d" + axis))
    start = 0 if start is None else start
    step = 1 if step is None else step
    return [start + step * i for i in range(count)]


# -- layout -------------------------------------------------------------------

def _title(title):
    if isinstance(title, dict):
        title = title.get("text")
    return charts.text(title) if isinstance(title, (str, int, float)) else None


def _axis_id(value, letter):
    """'x', 'x2', ... from a trace's xaxis (plotly's default is 'x')."""
    if isinstance(value, str) and value.startswith(letter):
        return value
    return letter


def _axis_number(axis_id):
    try:
        return int(axis_id[1:] or 1)
    except ValueError:
        return 0


def _axes_order(key):
    return (_axis_number(key[0]), _axis_number(key[1]))


def _layout_axis(layout, axis_id):
    """layout.xaxis2 for 'x2'."""
    axis = layout.get(axis_id[0] + "axis" + axis_id[1:])
    return axis if isinstance(axis, dict) else {}


def _layout_axes(layout):
    """The axes pairs the layout declares (make_subplots declares every
    subplot's, with or without traces)."""
    for name, axis in layout.items():
        if name.startswith("xaxis") and isinstance(axis, dict):
            anchor = axis.get("anchor")
            if isinstance(anchor, str) and anchor.startswith("y"):
                yield ("x" + name[5:], anchor)


def _subplot_title(layout, key):
    """make_subplots' subplot_titles: annotations centred above a subplot."""
    x_domain = _layout_axis(layout, key[0]).get("domain")
    y_domain = _layout_axis(layout, key[1]).get("domain")
    annotations = layout.get("annotations")
    if not (isinstance(x_domain, list) and len(x_domain) == 2
            and isinstance(y_domain, list) and len(y_domain) == 2
            and isinstance(annotations, list)):
        return None
    try:
        centre, top = (x_domain[0] + x_domain[1]) / 2, y_domain[1]
    except TypeError:
        return None
    for note in annotations:
        if (isinstance(note, dict) and note.get("xref") == "paper"
                and note.get("yref") == "paper" and note.get("yanchor") == "bottom"
                and _near(note.get("x"), centre) and _near(note.get("y"), top)):
            return charts.text(note.get("text"))
    return None


def _near(a, b):
    return isinstance(a, (int, float)) and abs(a - b) < 1e-6


def _legend(layout, traces):
    """index -> legend entry of each trace plotly lists, or None when the
    figure shows no legend (one trace, unless asked for)."""
    listed = [(i, t) for i, t in traces if t.get("showlegend") is not False
              and (t.get("type") or "scatter") in _CARTESIAN]
    shown = layout.get("showlegend")
    if shown is None:
        shown = len(listed) > 1 or any(t.get("showlegend") is True for _, t in traces)
    if not shown:
        return None
    return {i: charts.text(t.get("name")) or "trace %d" % i for i, t in listed}


def _axis_fields(axis, scale, positions):
    """label, unit, scale, ticks, tick labels and limits of one axis."""
    label = _title(axis.get("title"))
    fields = {"label": label, "unit": charts.unit(label), "scale": scale}
    ticks = values(axis.get("tickvals")) or []
    tick_labels = values(axis.get("ticktext"))
    fields["ticks"] = [coordinate(t, scale) if scale != "categorical" else charts.text(t)
                       for t in ticks][:charts.MAX_ITEMS]
    if tick_labels is None:
        tick_labels = [str(t) for t in ticks]
    fields["tick_labels"] = [charts.text(t) or "" for t in tick_labels][:charts.MAX_ITEMS]
    fields["limits"] = _limits(axis, scale, positions)
    return fields


def _limits(axis, scale, positions):
    given = axis.get("range")
    if (isinstance(given, list) and len(given) == 2 and axis.get("autorange") is not True
            and None not in given):
        if scale == "log":
            return [_power(given[0]), _power(given[1])]
        if scale == "categorical":
            return [as_number(given[0]), as_number(given[1])]
        return [coordinate(given[0], scale), coordinate(given[1], scale)]
    if scale == "categorical":
        count = len({p for p in positions if p is not None})
        found = [-0.5, count - 0.5] if count else None
    else:
        found = limits(positions)
    if found is not None and axis.get("autorange") == "reversed":
        found.reverse()
    return found


def _power(exponent):
    """plotly gives a log axis' range in powers of ten."""
    exponent = as_number(exponent)
    try:
        return None if exponent is None else charts.number(10 ** exponent)
    except OverflowError:
        return None


def _reference_lines(layout, key, scales):
    """Lines across the whole axes: shapes of type line from edge to edge of
    the axes' domain (fig.add_hline / add_vline), on this pair of axes."""
    shapes = layout.get("shapes")
    if not isinstance(shapes, list):
        return []
    lines = []
    for shape in shapes:
        if not isinstance(shape, dict) or shape.get("type") != "line":
            continue
        for orientation, across, along, axis_id, scale in (
                ("horizontal", "x", "y", key[1], scales[1]),
                ("vertical", "y", "x", key[0], scales[0])):
            if (shape.get(along + "ref", along) == axis_id
                    and _spans(shape, across, key[0] if across == "x" else key[1])
                    and shape.get(along + "0") == shape.get(along + "1")
                    and shape.get(along + "0") is not None):
                value = shape[along + "0"]
                lines.append({"orientation": orientation,
                              "value": coordinate(value, scale),
                              "label": _line_label(layout, shape, along, value)})
    return lines[:charts.MAX_SERIES]


def _spans(shape, letter, axis_id):
    ref = shape.get(letter + "ref", letter)
    if ref not in ("paper", axis_id + " domain"):
        return False
    return {shape.get(letter + "0"), shape.get(letter + "1")} == {0, 1}


def _line_label(layout, shape, along, value):
    """The shape's own label, or the annotation add_hline(annotation_text=)
    places at the line's value."""
    label = shape.get("label")
    if isinstance(label, dict) and label.get("text"):
        return charts.text(label["text"])
    annotations = layout.get("annotations")
    for note in annotations if isinstance(annotations, list) else ():
        if (isinstance(note, dict) and note.get(along + "ref") == shape.get(along + "ref")
                and note.get(along) == value and note.get("text")):
            return charts.text(note["text"])
    return None


# -- one pair of axes ---------------------------------------------------------

def _axes_chart(key, traces, layout, legend):
    """The chart of the traces drawn on one pair of axes (x, y ids)."""
    x_axis, y_axis = _layout_axis(layout, key[0]), _layout_axis(layout, key[1])
    shapes = [(index, trace, _trace_shape(trace)) for index, trace in traces]
    scales = (_scale(x_axis, [v for _, _, s in shapes for v in s[0][:100]]),
              _scale(y_axis, [v for _, _, s in shapes for v in s[1][:100]]))
    barmode = layout.get("barmode") or "group"
    kinds, order, xs, ys = {}, [], [], []
    for index, trace, _ in shapes:
        kind, made = _trace_part(index, trace, traces, scales, barmode, legend)
        if kind not in kinds:
            order.append(kind)
            kinds[kind] = {"elements": [], "extra": {}}
        kinds[kind]["elements"].extend(made["elements"])
        extra = dict(made.get("extra", {}))
        types = kinds[kind]["extra"].get("trace_types", []) + extra.pop("trace_types", [])
        kinds[kind]["extra"] = {**extra, **kinds[kind]["extra"]}
        if types:
            kinds[kind]["extra"]["trace_types"] = sorted(set(types), key=types.index)
        xs.extend(made["x"])
        ys.extend(made["y"])
    parts = []
    for kind in order:
        part = {"type": kind, **kinds[kind]["extra"]}
        if kind == "unknown":
            part["elements"] = []
        else:
            capped(part, _numbered(kind, kinds[kind]["elements"]), _cap(kind))
        parts.append(part)
    x_fields = _axis_fields(x_axis, scales[0], xs)
    y_fields = _axis_fields(y_axis, scales[1], ys)
    if len(parts) == 1 and parts[0].get("orientation") == "horizontal" \
            and parts[0]["type"] in ("bar", "box_and_whisker"):
        # E2B's rule: x names the category axis, y the value axis
        x_fields, y_fields = y_fields, x_fields
    if not parts:
        chart = {"type": "unknown", "elements": []}
    elif len(parts) == 1:
        chart = parts[0]
    else:
        chart = {"type": "mixed"}
        capped(chart, parts, charts.MAX_SERIES)
    chart["title"] = None
    chart["source"] = "plotly"
    for name, fields in (("x", x_fields), ("y", y_fields)):
        for field in ("label", "unit", "scale", "ticks", "tick_labels", "limits"):
            chart[name + "_" + field] = fields[field]
    chart["legend"] = (None if legend is None else
                       [legend[i] for i, _ in traces if i in legend][:charts.MAX_SERIES])
    chart["reference_lines"] = _reference_lines(layout, key, scales)
    return chart


def _cap(kind):
    return charts.MAX_SERIES if kind in ("line", "scatter", "histogram") else charts.MAX_ITEMS


def _numbered(kind, elements):
    """Unlabelled series become Line 1, Line 2, ... (E2B's numbering)."""
    if kind in ("line", "scatter"):
        number = 0
        for element in elements:
            if element["label"] is None:
                number += 1
                element["label"] = "Line %d" % number
    return elements


def _scale(axis, data):
    kind = axis.get("type")
    if kind in _AXIS_TYPES:
        return _AXIS_TYPES[kind]
    return scale_of(data)


def _trace_shape(trace):
    """The raw data a trace puts on x and on y (what decides the axes' type
    when the layout does not say)."""
    kind = trace.get("type") or "scatter"
    x, y = values(trace.get("x")), values(trace.get("y"))
    if kind == "box" and x is None and y is not None and trace.get("name"):
        x = [trace["name"]]
    if kind == "box" and y is None and x is not None and trace.get("name"):
        y = [trace["name"]]
    if kind == "bar" and y is not None and x is None:
        x = list(range(len(y))) if trace.get("orientation") != "h" else None
    return (x or [], y or [])


def _trace_part(index, trace, traces, scales, barmode, legend):
    """(kind, {elements, x, y, extra}) of one trace: its elements and the
    positions it covers on each axis (for the limits)."""
    kind = trace.get("type") or "scatter"
    name = charts.text(trace.get("name"))
    if kind in ("scatter", "scattergl"):
        mode = trace.get("mode")
        shown = "scatter" if isinstance(mode, str) and "lines" not in mode else "line"
        return shown, _scatter(trace, name, scales)
    if kind == "bar":
        return "bar", _bars(index, trace, traces, scales, barmode)
    if kind == "histogram":
        return _histogram(index, trace, traces, scales, barmode)
    if kind == "box":
        return "box_and_whisker", _boxes(index, trace, scales)
    extra = {"trace_types": [kind]}
    if kind in ("heatmap", "heatmapgl", "contour"):
        z = values(trace.get("z"))
        if isinstance(z, list):
            rows = len(z)
            cols = max((len(r) for r in z if isinstance(r, list)), default=0)
            extra["shape"] = [rows, cols]
    return "unknown", {"elements": [], "x": [], "y": [], "extra": extra}


def _scatter(trace, name, scales):
    ys = values(trace.get("y"))
    xs = values(trace.get("x"))
    if ys is None and xs is None:
        return {"elements": [], "x": [], "y": []}
    if ys is None:
        ys = _positions(trace, "y", len(xs))
    xs = _positions(trace, "x", len(ys))
    n = min(len(xs), len(ys))
    xs = coordinates(xs[:n], scales[0])
    ys = coordinates(ys[:n], scales[1])
    errors = _errors(trace.get("error_y"), ys)
    element = series(name, xs, ys, errors)
    return {"elements": [element], "x": xs, "y": ys}


def _errors(spec, centres):
    """[low, high] drawn around each centre by an error_x/error_y, or None."""
    if not isinstance(spec, dict) or spec.get("visible") is False:
        return None
    kind = spec.get("type") or ("data" if "array" in spec else "percent")
    if kind == "data":
        plus = values(spec.get("array"))
        if plus is None:
            return None
        minus = values(spec.get("arrayminus"))
        symmetric = spec.get("symmetric", minus is None)
        minus = plus if symmetric or minus is None else minus
    elif kind in ("percent", "constant", "sqrt"):
        if spec.get("visible") is not True and "value" not in spec:
            return None
        plus = [_delta(kind, spec.get("value", 10), c) for c in centres]
        minus_value = spec.get("value", 10) if spec.get("symmetric", "valueminus" not in spec) \
            else spec.get("valueminus", 10)
        minus = [_delta(kind, minus_value, c) for c in centres]
    else:
        return None
    bounds = []
    for i, centre in enumerate(centres):
        high = as_number(plus[i]) if i < len(plus) else None
        low = as_number(minus[i]) if i < len(minus) else None
        if not isinstance(centre, (int, float)) or high is None or low is None:
            bounds.append([None, None])
        else:
            bounds.append([centre - low, centre + high])
    return bounds


def _delta(kind, value, centre):
    value = as_number(value)
    if not isinstance(centre, (int, float)) or value is None:
        return None
    if kind == "percent":
        return abs(centre) * value / 100
    if kind == "sqrt":
        return math.sqrt(abs(centre))
    return value


def _is_horizontal(trace):
    """A box lies along x when its orientation says 'h', or when it has
    only x data."""
    if trace.get("orientation") in ("h", "v"):
        return trace["orientation"] == "h"
    return "y" not in trace and "x" in trace


def _bars(index, trace, traces, scales, barmode):
    horizontal = trace.get("orientation") == "h"
    cat_axis, value_axis = ("y", "x") if horizontal else ("x", "y")
    cat_scale = scales[1] if horizontal else scales[0]
    heights = values(trace.get(value_axis)) or []
    cats = _positions(trace, cat_axis, len(heights))
    bar_traces = [i for i, t in traces if (t.get("type") or "scatter") in ("bar", "histogram")]
    several = len(bar_traces) > 1
    stacked = several and barmode in ("stack", "relative")
    group = charts.text(trace.get("name")) or "Group %d" % (bar_traces.index(index) + 1)
    bottoms = _stack_bottoms(index, traces, horizontal) if stacked else None
    heights = [as_number(v) for v in heights[:len(cats)]]
    errors = _errors(trace.get("error_x" if horizontal else "error_y"),
                     [None if h is None else h + (bottoms[i] if bottoms else 0)
                      for i, h in enumerate(heights)])
    elements, positions, reach = [], [], [0]
    for i, height in enumerate(heights):
        where = coordinate(cats[i], cat_scale)
        positions.append(where)
        bar = {"label": charts.text(where), "group": group, "value": height}
        if bottoms is not None:
            bar["bottom"] = bottoms[i]
            if height is not None:
                reach += [bottoms[i], bottoms[i] + height]
        elif height is not None:
            reach.append(height)
        if errors is not None:
            bar["error"] = errors[i]
            reach += [e for e in errors[i] if e is not None]
        elements.append(bar)
    extra = {"orientation": "horizontal" if horizontal else "vertical",
             "stacked": stacked, "grouped": several and barmode == "group"}
    cat_positions, value_positions = positions, reach
    if horizontal:
        return {"elements": elements, "x": value_positions, "y": cat_positions, "extra": extra}
    return {"elements": elements, "x": cat_positions, "y": value_positions, "extra": extra}


def _stack_bottoms(index, traces, horizontal):
    """Where each bar of trace *index* starts when the bars of the traces
    before it are stacked under it (negative ones below zero, as plotly's
    'relative' mode does, and 'stack' for non-negative data)."""
    value_axis, cat_axis = ("x", "y") if horizontal else ("y", "x")
    up, down = {}, {}
    for i, trace in traces:
        if trace.get("type") != "bar" or (trace.get("orientation") == "h") != horizontal:
            continue
        heights = values(trace.get(value_axis)) or []
        cats = _positions(trace, cat_axis, len(heights))
        bottoms = []
        for cat, height in zip(cats, heights):
            height = as_number(height) or 0
            cat = cat if isinstance(cat, (str, int, float)) else repr(cat)
            pile = up if height >= 0 else down
            bottoms.append(pile.get(cat, 0))
            pile[cat] = pile.get(cat, 0) + height
        if i == index:
            return bottoms
    return None


def _boxes(index, trace, scales):
    """The boxes of a box trace: one, or one per category when the trace
    gives both the data and their categories (plotly express)."""
    horizontal = _is_horizontal(trace)
    value_axis, cat_axis = ("x", "y") if horizontal else ("y", "x")
    cat_scale = scales[1] if horizontal else scales[0]
    name = charts.text(trace.get("name")) or "trace %d" % index
    data = values(trace.get(value_axis))
    cats = values(trace.get(cat_axis))
    boxes = []
    q1 = values(trace.get("q1"))
    if q1 is not None:
        boxes = _given_boxes(trace, q1, cats, name, cat_scale)
    elif data is not None:
        extent = math.inf if trace.get("boxpoints") is False else 1.5
        if cats is None or len(cats) != len(data):
            groups = {name: data}
        else:
            groups = {}
            for cat, value in zip(cats, data):
                groups.setdefault(charts.text(coordinate(cat, cat_scale)), []).append(value)
        for label, group in groups.items():
            box = box_stats(label, group, extent)
            if box is not None:
                boxes.append(box)
    reach = [v for b in boxes for v in (b["min"], b["max"], *b["outliers"])]
    positions = [b["label"] for b in boxes]
    extra = {"orientation": "horizontal" if horizontal else "vertical"}
    if horizontal:
        return {"elements": boxes, "x": reach, "y": positions, "extra": extra}
    return {"elements": boxes, "x": positions, "y": reach, "extra": extra}


def _given_boxes(trace, q1, cats, name, cat_scale):
    """Boxes whose statistics the trace gives (q1, median, q3 and fences)."""
    median = values(trace.get("median")) or []
    q3 = values(trace.get("q3")) or []
    low = values(trace.get("lowerfence")) or []
    high = values(trace.get("upperfence")) or []
    boxes = []
    for i, first in enumerate(q1):
        def at(items, default=None):
            return as_number(items[i]) if i < len(items) else default
        label = charts.text(coordinate(cats[i], cat_scale)) if cats and i < len(cats) \
            else (name if len(q1) == 1 else "%s %d" % (name, i + 1))
        first, third = as_number(first), at(q3)
        boxes.append({"label": label, "min": at(low, first), "first_quartile": first,
                      "median": at(median), "third_quartile": third,
                      "max": at(high, third), "outliers": []})
    return boxes


# -- histograms ---------------------------------------------------------------

def _histogram(index, trace, traces, scales, barmode):
    horizontal = trace.get("orientation") == "h" or (
        "orientation" not in trace and "x" not in trace and "y" in trace)
    bin_axis = "y" if horizontal else "x"
    scale = scales[1] if horizontal else scales[0]
    data = values(trace.get(bin_axis)) or []
    name = charts.text(trace.get("name"))
    if scale == "categorical":
        return "bar", _category_counts(index, trace, data, name, horizontal)
    numbers = _histogram_numbers(data, scale)
    shared = _bin_group(index, trace, traces, scales, barmode)
    edges = _bins(trace, bin_axis, shared if shared else numbers, scale)
    counts = _count(trace, bin_axis, numbers, edges)
    histnorm = trace.get("histnorm") or ""
    counts = charts_bins.normalised(counts, edges, histnorm)
    several = sum(1 for _, t in traces if t.get("type") == "histogram") > 1
    shown_edges = [coordinate(e, scale) for e in edges] if scale == "datetime" else edges
    element = {"label": name, "bin_edges": shown_edges, "counts": counts,
               "count": len(counts)}
    extra = {"orientation": "horizontal" if horizontal else "vertical",
             "stacked": several and barmode in ("stack", "relative"),
             "density": histnorm in ("density", "probability density")}
    reach = [0] + [c for c in counts if c is not None]
    ends = [shown_edges[0], shown_edges[-1]] if shown_edges else []
    if horizontal:
        return "histogram", {"elements": [element], "x": reach, "y": ends, "extra": extra}
    return "histogram", {"elements": [element], "x": ends, "y": reach, "extra": extra}


def _category_counts(index, trace, data, name, horizontal):
    """A histogram of categories is bars, one per category."""
    counts = {}
    for value in data:
        label = charts.text(value)
        counts[label] = counts.get(label, 0) + 1
    group = name or "trace %d" % index
    bars = [{"label": label, "group": group, "value": count} for label, count in counts.items()]
    extra = {"orientation": "horizontal" if horizontal else "vertical",
             "stacked": False, "grouped": False}
    lengths = [0] + list(counts.values())
    if horizontal:
        return {"elements": bars, "x": lengths, "y": list(counts), "extra": extra}
    return {"elements": bars, "x": list(counts), "y": lengths, "extra": extra}


def _histogram_numbers(data, scale):
    """The data as numbers to bin (dates as milliseconds since the epoch,
    as plotly.js bins them)."""
    if scale == "datetime":
        return [charts_bins.epoch(v) for v in data]
    return [as_number(v) for v in data]


def _bin_group(index, trace, traces, scales, barmode):
    """The data of all histograms binned with this one: plotly bins the
    histograms of one axes together unless they are overlaid (or by
    bingroup)."""
    group = trace.get("bingroup")
    mates = [t for i, t in traces if t.get("type") == "histogram"
             and ((group and t.get("bingroup") == group)
                  or (not group and barmode != "overlay" and not t.get("bingroup")))]
    if len(mates) < 2:
        return None
    found = []
    for mate in mates:
        horizontal = mate.get("orientation") == "h" or (
            "orientation" not in mate and "x" not in mate and "y" in mate)
        axis = "y" if horizontal else "x"
        found += _histogram_numbers(values(mate.get(axis)) or [],
                                    scales[1] if horizontal else scales[0])
    return found


def _bins(trace, axis, numbers, scale):
    """The bin edges plotly.js would draw: xbins' start/end/size where the
    trace gives them, else its auto-binning (nbinsx as the target)."""
    spec = trace.get(axis + "bins")
    spec = spec if isinstance(spec, dict) else {}
    read = charts_bins.epoch if scale == "datetime" else as_number
    return charts_bins.edges(numbers, read(spec.get("start")), read(spec.get("end")),
                             as_number(spec.get("size")), as_number(trace.get("nbins" + axis)),
                             scale == "datetime")


def _count(trace, axis, numbers, edges):
    """Counts per bin, or with histfunc and the other axis' data, their sum,
    average, min or max."""
    func = trace.get("histfunc") or "count"
    other = values(trace.get("y" if axis == "x" else "x"))
    weights = [as_number(w) for w in other] if func != "count" and other is not None else None
    return charts_bins.fold(numbers, weights, func, edges)


# -- traces without x/y axes --------------------------------------------------

def _domain_chart(index, trace):
    kind = trace.get("type") or "scatter"
    if kind != "pie":
        return {"type": "unknown", "title": None, "elements": [], "source": "plotly",
                "trace_types": [kind]}
    given = values(trace.get("values"))
    labels = values(trace.get("labels"))
    if labels is None:
        start = as_number(trace.get("label0")) or 0
        step = as_number(trace.get("dlabel"))
        step = 1 if step is None else step
        labels = [start + step * i for i in range(len(given or []))]
    if given is None:
        given = [1] * len(labels)   # plotly counts the labels
    chart = {"type": "pie", "title": None, "source": "plotly"}
    return capped(chart, pie_slices(labels, given), charts.MAX_ITEMS)
