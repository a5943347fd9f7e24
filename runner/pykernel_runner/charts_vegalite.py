"""The chart of a Vega-Lite spec, from its JSON (docs/charts.md).

A spec says what to draw, not what was drawn: its mark gives the type, its
encoding the axes.  The spec's mark and encoding travel in the chart as
they are; the elements are filled only when the data are in the spec
(``data.values``, or ``datasets`` named by ``data.name``, as altair writes
them) and the encodings are plain fields, aggregated at most by a simple
aggregate, with no transform.  Layers become a mixed chart, concatenations
a superchart; facets and repeats stay unknown.
"""

import json

from . import charts
from .charts_web import (box_stats, capped, coordinate, coordinates, limits,
                         pie_slices, scale_of, series)

_TYPES = {"bar": "bar", "line": "line", "trail": "line", "point": "scatter",
          "circle": "scatter", "square": "scatter", "tick": "scatter",
          "arc": "pie", "boxplot": "box_and_whisker"}

_SCALES = {"temporal": "datetime", "nominal": "categorical", "ordinal": "categorical"}

# A scale's own type, where it says more than the field's type: pow and sqrt
# are the schema's "function" (a scale by a function other than log).
_SCALE_TYPES = {"log": "log", "symlog": "symlog", "pow": "function", "sqrt": "function",
                "time": "datetime", "utc": "datetime", "band": "categorical",
                "point": "categorical", "ordinal": "categorical"}

_AGGREGATES = {
    "count": len,
    "sum": sum,
    "mean": lambda v: sum(v) / len(v),
    "average": lambda v: sum(v) / len(v),
    "min": min,
    "max": max,
    "median": lambda v: _median(v),
}

_AXES = ("label", "unit", "scale", "ticks", "tick_labels", "limits")

_MAX_ENCODING = 20000       # characters of JSON


def spec_chart(spec):
    """The chart of a Vega-Lite spec, or None (no view in it)."""
    datasets = spec.get("datasets")
    return _view(spec, datasets if isinstance(datasets, dict) else {}, None, {})


def _view(spec, datasets, data, encoding):
    """The chart of a view: a single, layered or concatenated one, with the
    data and encoding it inherits."""
    if not isinstance(spec, dict):
        return None
    data = spec.get("data", data)
    title = _title(spec.get("title"))
    own = spec.get("encoding")
    encoding = {**encoding, **own} if isinstance(own, dict) else encoding
    if isinstance(spec.get("layer"), list):
        return _layers(spec["layer"], title, datasets, data, encoding,
                       spec.get("transform"))
    for key in ("hconcat", "vconcat", "concat"):
        if isinstance(spec.get(key), list):
            parts = [_view(part, datasets, data, {}) or _unknown(None)
                     for part in spec[key]]
            chart = {"type": "superchart", "title": title, "source": "vega-lite"}
            return capped(chart, parts, charts.MAX_SERIES)
    if "facet" in spec or "repeat" in spec or "spec" in spec:
        return _unknown(title)
    if "mark" not in spec:
        return None
    transformed = spec.get("transform") is not None
    return _single(spec, title, _rows(data, datasets, transformed), encoding)


def _unknown(title):
    return {"type": "unknown", "title": title, "elements": [], "source": "vega-lite",
            "mark": None}


def _title(title):
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(str(line) for line in title)
    return charts.text(title) if isinstance(title, (str, int, float)) else None


def _rows(data, datasets, transformed):
    """The view's inline rows, or None (data from a URL, a generator, or
    changed by a transform)."""
    if transformed or not isinstance(data, dict):
        return None
    rows = data.get("values")
    if rows is None and isinstance(data.get("name"), str):
        rows = datasets.get(data["name"])
    if not isinstance(rows, list):
        return None
    return [row if isinstance(row, dict) else {"data": row} for row in rows]


# -- one view -----------------------------------------------------------------

def _single(spec, title, rows, encoding):
    mark = spec["mark"]
    mark = mark.get("type") if isinstance(mark, dict) else mark
    mark = mark if isinstance(mark, str) else None
    kind = _TYPES.get(mark, "unknown")
    chart = {"type": kind, "title": title, "elements": [], "source": "vega-lite",
             "mark": mark, "encoding": _small(encoding)}
    scales = {name: _scale(encoding.get(name), rows) for name in ("x", "y")}
    table = _table(rows, encoding) if kind != "unknown" else None
    if table is not None:
        make = {"line": _series, "scatter": _series, "bar": _bars, "pie": _slices,
                "box_and_whisker": _boxes}[kind]
        make(chart, table, encoding, scales, spec["mark"])
    if kind == "pie":
        return chart
    xs = [r.get("x") for r in table] if table else []
    ys = [r.get("y") for r in table] if table else []
    fields = {"x": _axis(encoding.get("x"), scales["x"], xs, kind),
              "y": _axis(encoding.get("y"), scales["y"], ys, kind)}
    if chart.get("orientation") == "horizontal":
        # E2B's rule: x names the category axis, y the value axis
        fields = {"x": fields["y"], "y": fields["x"]}
    for name in ("x", "y"):
        for field in _AXES:
            chart[name + "_" + field] = fields[name][field]
    chart["legend"] = _legend(encoding, table, kind)
    chart["reference_lines"] = _rule_lines(encoding, rows) if mark == "rule" else []
    return chart


def _small(encoding):
    """The encoding as the spec gives it, or None when it is too large to
    travel with the chart (a domain or sort order of thousands of values)."""
    try:
        size = len(json.dumps(encoding, default=str))
    except (TypeError, ValueError, RecursionError):
        return None
    return encoding if size <= _MAX_ENCODING else None


def _scale(definition, rows):
    """A channel's scale: from its type (and scale type), else from its
    data; None for a channel not encoded."""
    if not isinstance(definition, dict):
        return None
    scale = definition.get("scale")
    if isinstance(scale, dict) and scale.get("type") in _SCALE_TYPES:
        return _SCALE_TYPES[scale["type"]]
    kind = definition.get("type")
    if kind in _SCALES:
        return _SCALES[kind]
    if kind == "quantitative" or definition.get("aggregate"):
        return "linear"
    if definition.get("timeUnit"):
        return "datetime"
    field = definition.get("field")
    if rows and isinstance(field, str):
        return scale_of([row.get(field) for row in rows[:100]])
    return None


def _axis(definition, scale, positions, kind):
    """The x or y fields of the chart from the channel's definition."""
    fields = dict.fromkeys(_AXES)
    fields.update(ticks=[], tick_labels=[], scale=scale)
    if not isinstance(definition, dict):
        return fields
    label = definition["title"] if "title" in definition else _default_title(definition)
    label = _title(label)
    fields["label"] = label
    fields["unit"] = charts.unit(label)
    axis = definition.get("axis")
    ticks = axis.get("values") if isinstance(axis, dict) else None
    if isinstance(ticks, list):
        fields["ticks"] = [coordinate(t, scale) for t in ticks][:charts.MAX_ITEMS]
        fields["tick_labels"] = [charts.text(t) or "" for t in ticks][:charts.MAX_ITEMS]
    fields["limits"] = _limits(definition, scale, positions, kind)
    return fields


def _default_title(definition):
    """Vega-Lite's own axis title: the field, "Sum of b", "b (binned)"."""
    field = definition.get("field")
    aggregate = definition.get("aggregate")
    if aggregate == "count" and not field:
        return "Count of Records"
    if not isinstance(field, str):
        return None
    if isinstance(aggregate, str):
        return "%s of %s" % (aggregate.capitalize(), field)
    if definition.get("bin"):
        return field + " (binned)"
    if isinstance(definition.get("timeUnit"), str):
        return "%s (%s)" % (field, definition["timeUnit"])
    return field


def _limits(definition, scale, positions, kind):
    """The scale's domain, or the data's extent (with zero, as Vega-Lite's
    quantitative scales have it unless told otherwise; not rounded to nice
    numbers); None on a categorical scale."""
    given = definition.get("scale")
    given = given if isinstance(given, dict) else {}
    domain = given.get("domain")
    if isinstance(domain, list) and len(domain) == 2 and scale != "categorical":
        return [coordinate(domain[0], scale), coordinate(domain[1], scale)]
    if scale in ("categorical", None):
        return None
    found = limits(coordinates(positions, scale))
    if found is not None and scale == "linear" and given.get("zero", True) is not False \
            and kind in ("bar", "line", "scatter", "box_and_whisker") \
            and not isinstance(found[0], str):
        found = [min(0, found[0]), max(0, found[1])]
    if found is not None and given.get("reverse"):
        found.reverse()
    return found


def _legend(encoding, table, kind):
    """The entries of a color legend of categories, sorted as Vega-Lite
    sorts a nominal domain; None without one."""
    color = encoding.get("color")
    if not isinstance(color, dict) or color.get("type") == "quantitative" \
            or not isinstance(color.get("field"), str) or kind == "pie":
        return None
    if not table:
        return []
    return [charts.text(v) for v in _sorted({r.get("color") for r in table})][:charts.MAX_SERIES]


def _sorted(items):
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=str)


# -- the data -----------------------------------------------------------------

def _table(rows, encoding):
    """The rows as {channel: value} for the encoded channels, aggregated as
    the encoding asks; None when the data are not at hand or an encoding is
    more than a plain field (binned, time units, an unknown aggregate)."""
    if rows is None:
        return None
    defs = {}
    for channel, definition in encoding.items():
        if not isinstance(definition, dict) or "value" in definition or "datum" in definition:
            continue
        if channel in ("tooltip", "href", "text", "url", "description"):
            continue
        field = definition.get("field")
        aggregate = definition.get("aggregate")
        if definition.get("bin") or definition.get("timeUnit") or "repeat" in str(field):
            return None
        if aggregate is not None and aggregate not in _AGGREGATES:
            return None
        if not isinstance(field, str) and aggregate != "count":
            return None
        defs[channel] = (field.replace("\\.", ".") if isinstance(field, str) else None,
                         aggregate)
    if not any(aggregate for _, aggregate in defs.values()):
        return [{c: row.get(f) for c, (f, _) in defs.items()} for row in rows]
    keys = [c for c, (_, a) in defs.items() if not a]
    groups = {}
    for row in rows:
        key = tuple(_hashable(row.get(defs[c][0])) for c in keys)
        group = groups.setdefault(key, {c: [] for c, (_, a) in defs.items() if a})
        for channel in group:
            field = defs[channel][0]
            value = 1 if field is None else charts.number(row.get(field))
            if value is not None:
                group[channel].append(value)
    table = []
    for key, folded in groups.items():
        entry = dict(zip(keys, key))
        for channel, items in folded.items():
            aggregate = defs[channel][1]
            entry[channel] = _AGGREGATES[aggregate](items) if items or aggregate == "count" \
                else None
        table.append(entry)
    return table


def _hashable(value):
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def _median(items):
    ordered = sorted(items)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _series(chart, table, encoding, scales, mark):
    """Lines and points: one series per color value (Vega-Lite's sorted
    domain), lines in x order as Vega-Lite draws them."""
    groups = {}
    for row in table:
        groups.setdefault(_hashable(row.get("color")), []).append(row)
    elements = []
    for color in _sorted(groups):
        group = groups[color]
        if chart["type"] == "line":
            try:
                group = sorted(group, key=lambda r: r.get("x"))
            except TypeError:
                pass
        xs = coordinates([r.get("x") for r in group], scales["x"])
        ys = coordinates([r.get("y") for r in group], scales["y"])
        elements.append(series(charts.text(color), xs, ys))
    number = 0
    for element in elements:
        if element["label"] is None:
            number += 1
            element["label"] = "Line %d" % number
    capped(chart, elements, charts.MAX_SERIES)


def _value_channel(encoding, scales):
    """Which of x and y holds a bar's or box's length: the quantitative one
    (y when both or neither are)."""
    x_measures = scales.get("x") in ("linear", "log", "symlog")
    y_measures = scales.get("y") in ("linear", "log", "symlog")
    return "x" if x_measures and not y_measures else "y"


def _bars(chart, table, encoding, scales, mark):
    value, category = ("x", "y") if _value_channel(encoding, scales) == "x" else ("y", "x")
    offset = category + "Offset"
    grouped = offset in encoding and isinstance(encoding[offset], dict)
    group_channel = offset if grouped else "color"
    stack = encoding.get(value, {}).get("stack", "zero") if isinstance(
        encoding.get(value), dict) else "zero"
    stacked = not grouped and group_channel in encoding and stack not in (None, False)
    rows = sorted(table, key=lambda r: str(r.get(group_channel))) if stacked else table
    bars, up, down = [], {}, {}
    for row in rows:
        length = charts.number(row.get(value))
        where = charts.text(coordinate(row.get(category), scales.get(category)))
        group = row.get(group_channel)
        bar = {"label": where, "group": charts.text(group) if group is not None else "Group 1",
               "value": length}
        if stacked:
            pile = up if (length or 0) >= 0 else down
            bar["bottom"] = pile.get(where, 0)
            pile[where] = pile.get(where, 0) + (length or 0)
        bars.append(bar)
    chart["orientation"] = "horizontal" if value == "x" else "vertical"
    chart["stacked"] = stacked
    chart["grouped"] = grouped
    capped(chart, bars, charts.MAX_ITEMS)


def _slices(chart, table, encoding, scales, mark):
    labels = [row.get("color") for row in table]
    capped(chart, pie_slices(labels, [row.get("theta") for row in table]), charts.MAX_ITEMS)


def _boxes(chart, table, encoding, scales, mark):
    value, category = ("x", "y") if _value_channel(encoding, scales) == "x" else ("y", "x")
    extent = mark.get("extent", 1.5) if isinstance(mark, dict) else 1.5
    extent = float("inf") if extent == "min-max" else charts.number(extent) or 1.5
    field = encoding.get(value, {}).get("field")
    groups = {}
    for row in table:
        where = row.get(category)
        label = charts.text(coordinate(where, scales.get(category))) if where is not None \
            else charts.text(field)
        groups.setdefault(label, []).append(row.get(value))
    boxes = [box_stats(label, items, extent) for label, items in groups.items()]
    chart["orientation"] = "horizontal" if value == "x" else "vertical"
    capped(chart, [b for b in boxes if b is not None], charts.MAX_ITEMS)


# -- layers -------------------------------------------------------------------

def _layers(layers, title, datasets, data, encoding, transform):
    """A layered view: one chart per kind of layer (a mixed chart when there
    are several kinds), rule marks across the axes as reference lines."""
    made = [_view({**layer, "transform": transform} if transform and isinstance(layer, dict)
                  else layer, datasets, data, encoding) for layer in layers]
    made = [m for m in made if m is not None]
    if not made:
        return None
    kinds, lines = {}, []
    for chart, layer in zip(made, layers):
        if chart.get("mark") == "rule":
            lines += chart.get("reference_lines") or []
            continue
        if chart.get("mark") == "text" and len(made) > 1:
            continue
        if chart["type"] in kinds:
            kinds[chart["type"]]["elements"] += chart["elements"]
        else:
            kinds[chart["type"]] = chart
    parts = list(kinds.values()) or made[:1]
    axes = next((p for p in parts if "x_scale" in p), None)
    if len(parts) == 1:
        chart = parts[0]
    else:
        chart = {"type": "mixed", "source": "vega-lite"}
        if axes is not None:
            chart.update({k: v for k, v in axes.items() if k[:2] in ("x_", "y_")})
            chart["legend"] = axes.get("legend")
        for part in parts:
            for name in ("title", "source", "legend", "reference_lines"):
                part.pop(name, None)
            for name in ("x", "y"):
                for field in _AXES:
                    part.pop(name + "_" + field, None)
        capped(chart, parts, charts.MAX_SERIES)
    chart["title"] = title or chart.get("title")
    if axes is not None or lines:
        chart["reference_lines"] = lines[:charts.MAX_SERIES]
    return chart


def _rule_lines(encoding, rows):
    """A rule with only y (or only x) is a line across the axes: one per
    datum, or per row of its data."""
    x, y = encoding.get("x"), encoding.get("y")
    if (x is None) == (y is None):
        return []
    orientation, definition = ("horizontal", y) if x is None else ("vertical", x)
    if not isinstance(definition, dict):
        return []
    scale = "datetime" if definition.get("type") == "temporal" else "linear"
    if "datum" in definition:
        points = [definition["datum"]]
    else:
        table = _table(rows, {"value": definition})
        points = [row.get("value") for row in table or ()]
    return [{"orientation": orientation, "value": coordinate(p, scale), "label": None}
            for p in points[:charts.MAX_SERIES]]
