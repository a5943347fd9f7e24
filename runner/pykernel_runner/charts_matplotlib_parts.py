"""The artists of one matplotlib axes sorted by kind, and the charts of its
bars, histograms, box plots and pies (docs/charts.md); charts_matplotlib
reads the series and the axes."""

import numpy

from . import charts

MARK = "_pykernel_chart"    # what display.py's wrappers leave on artists


class Kinds:
    """The artists of an axes by kind."""

    def __init__(self):
        self.lines = []         # (Line2D, number)
        self.scatters = []      # (PathCollection, number)
        self.bars = []          # BarContainer
        self.hists = []         # the wrapper's record of each dataset
        self.boxes = []         # the wrapper's record of each box
        self.wedges = []
        self.references = []   # (orientation, value, label)
        self.errors = {}        # id(data line) -> array of [low, high]
        self.labels = {}        # id(data line) -> its container's label
        self.others = 0


def sort_artists(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer, ErrorbarContainer, StemContainer
    from matplotlib.lines import Line2D
    from matplotlib.patches import Wedge
    from matplotlib.text import Text

    kinds = Kinds()
    owned = set()       # parts of a container read with it
    seen = set()
    for container in ax.containers:
        if isinstance(container, BarContainer):
            owned.update(map(id, container.patches))
            if not any(isinstance(getattr(p, MARK, None), dict)
                       for p in container.patches[:1]):
                kinds.bars.append(container)
        elif isinstance(container, StemContainer):
            # the markers are the series; stems and baseline are drawing
            owned.update((id(container.stemlines), id(container.baseline)))
            kinds.labels[id(container.markerline)] = container.get_label()
        elif isinstance(container, ErrorbarContainer):
            data_line, caplines, collections = container.lines
            owned.update(map(id, caplines))
            owned.update(map(id, collections))
            if data_line is not None:
                kinds.labels[id(data_line)] = container.get_label()
            if data_line is not None and getattr(container, "has_yerr", False):
                bounds = _error_bounds(collections, vertical=True)
                if bounds is not None:
                    kinds.errors[id(data_line)] = bounds
    children = getattr(ax, "_children", None)
    if children is None:
        children = ax.lines + ax.collections + ax.patches + ax.images
    for number, artist in enumerate(children):
        if isinstance(artist, Text):
            continue
        record = getattr(artist, MARK, None)
        if isinstance(record, dict):
            if id(record) not in seen:
                seen.add(id(record))
                if "hist" in record:
                    kinds.hists.append(record)
                elif "box" in record:
                    kinds.boxes.append(record)
            if "pie_value" in record:
                kinds.wedges.append(artist)
            continue
        if id(artist) in owned:
            continue
        if isinstance(artist, Line2D):
            reference = _reference(ax, artist)
            if reference is not None:
                kinds.references.append(reference)
            else:
                kinds.lines.append((artist, number))
        elif isinstance(artist, PathCollection):
            kinds.scatters.append((artist, number))
        elif isinstance(artist, Wedge):
            kinds.wedges.append(artist)
        else:
            kinds.others += 1
    return kinds


def _reference(ax, line):
    """(orientation, value, label) of a line across the whole axes (axhline,
    axvline: one coordinate in axes units), else None."""
    try:
        across = line.get_transform().contains_branch_seperately(ax.transData)
    except Exception:
        return None
    if across == (False, True):
        orientation, values = "horizontal", line.get_ydata(orig=False)
    elif across == (True, False):
        orientation, values = "vertical", line.get_xdata(orig=False)
    else:
        return None
    if len(values) < 1:
        return None
    return orientation, values[0], _public_label(line)


def _public_label(artist):
    label = artist.get_label()
    return None if not label or label.startswith("_") else charts.text(label)


def series_label(artist, number, label=None):
    """A series' label (*label* when its container has it: errorbar's); an
    unlabelled one is `Line N` as E2B numbers it (its place among the axes'
    children)."""
    if not label or label.startswith("_"):
        label = artist.get_label()
    if isinstance(label, str) and label.startswith("_child") \
            and label[6:].isdigit():
        return "Line " + label[6:]
    if not label or label.startswith("_"):
        return "Line %d" % number
    return charts.text(label)


def _error_bounds(collections, vertical):
    """The [low, high] of each error bar of *collections* (errorbar's
    LineCollections) running along y (*vertical*) or x, as an array."""
    for collection in collections:
        segments = collection.get_segments()
        if not segments:
            continue
        first = numpy.asarray(segments[0], dtype=float)
        if first.shape != (2, 2):
            continue
        along = 1 if vertical else 0
        if first[0, 1 - along] != first[1, 1 - along]:
            continue
        data = numpy.asarray(segments, dtype=float)
        if data.ndim != 3:
            return None
        values = data[:, :, along]
        return numpy.stack([values.min(axis=1), values.max(axis=1)], axis=1)
    return None


def _axis_names(axis):
    """(tick positions, tick labels) of an axis, for naming categories."""
    ticks = numpy.asarray(axis.get_ticklocs(), dtype=float)
    labels = [t.get_text() for t in axis.get_ticklabels()]
    return ticks[:len(labels)], labels


def _name_at(position, ticks, labels, tolerance, axis):
    """The category at *position*: the label of the tick there (within
    *tolerance*: grouped bars sit beside their tick); on a date axis the
    date itself."""
    if axis.kind in ("date", "period"):
        return axis.value(position)
    if len(ticks):
        nearest = int(numpy.abs(ticks - position).argmin())
        if abs(ticks[nearest] - position) <= tolerance and labels[nearest]:
            return charts.text(labels[nearest])
    value = axis.value(position)
    if isinstance(value, float):
        return "%g" % value
    return charts.text(value) or ""


def _tolerance(ticks):
    if len(ticks) > 1:
        return float(numpy.min(numpy.abs(numpy.diff(ticks)))) / 2
    return 0.5


def bar_chart(containers, x, y):
    horizontal = getattr(containers[0], "orientation", None) == "horizontal"
    category, value_axis = (y, x) if horizontal else (x, y)
    ticks, labels = _axis_names(category.axis)
    tolerance = _tolerance(ticks)
    rows = []
    for index, container in enumerate(containers):
        group = container.get_label()
        if not group or group.startswith("_container"):
            group = "Group " + (group[10:] if group else str(index))
        rects = container.patches
        geometry = numpy.array([[r.get_x(), r.get_width(), r.get_y(), r.get_height()]
                                for r in rects], dtype=float).reshape(-1, 4)
        if horizontal:
            centers = geometry[:, 2] + geometry[:, 3] / 2
            starts, lengths = geometry[:, 0], geometry[:, 1]
        else:
            centers = geometry[:, 0] + geometry[:, 1] / 2
            starts, lengths = geometry[:, 2], geometry[:, 3]
        values = getattr(container, "datavalues", None)
        if values is None or len(values) != len(rects):
            values = lengths
        errors = None
        errorbar = getattr(container, "errorbar", None)
        if errorbar is not None:
            errors = _error_bounds(errorbar.lines[2], vertical=not horizontal)
            if errors is not None and len(errors) != len(rects):
                errors = None
        rows.append((charts.text(group), centers, starts, values, errors))
    stacked = any(numpy.any(starts != 0) for _, _, starts, _, _ in rows[1:])
    grouped = (not stacked and len(rows) > 1
               and not numpy.array_equal(rows[0][1], rows[1][1]))
    elements = []
    total = 0
    for group, centers, starts, values, errors in rows:
        total += len(centers)
        for i in range(len(centers)):
            if len(elements) >= charts.MAX_ITEMS:
                break
            bar = {"label": _name_at(centers[i], ticks, labels, tolerance, category),
                   "group": group, "value": _number(values[i])}
            if stacked:
                bar["bottom"] = value_axis.value(starts[i])
            if errors is not None:
                bar["error"] = value_axis.values(errors[i])
            elements.append(bar)
    chart = {"type": "bar", "elements": elements,
             "orientation": "horizontal" if horizontal else "vertical",
             "stacked": bool(stacked), "grouped": bool(grouped),
             "swap": horizontal}
    return chart, total - len(elements)


def _number(value):
    if isinstance(value, numpy.generic):
        value = value.item()
    return charts.number(value)


def histogram_chart(records, x, y):
    horizontal = records[0].get("orientation") == "horizontal"
    bins_axis = y if horizontal else x
    elements = []
    for index, record in enumerate(records[:charts.MAX_SERIES]):
        edges, counts = record["edges"], record["counts"]
        elements.append({
            "label": charts.text(record.get("label")) or "Dataset %d" % (index + 1),
            "bin_edges": bins_axis.values(edges[:charts.MAX_ITEMS + 1]),
            "counts": [charts.number(c) for c in counts[:charts.MAX_ITEMS]],
            "count": len(counts)})
    chart = {"type": "histogram", "elements": elements,
             "orientation": "horizontal" if horizontal else "vertical",
             "stacked": bool(records[0].get("stacked")),
             "density": bool(records[0].get("density")),
             "swap": horizontal}
    return chart, max(0, len(records) - charts.MAX_SERIES)


def box_chart(records, x, y):
    horizontal = records[0].get("orientation") == "horizontal"
    category = y if horizontal else x
    ticks, labels = _axis_names(category.axis)
    tolerance = _tolerance(ticks)
    by_place = {}
    for record in records:      # a box drawn again at its place replaces it
        by_place[record["position"]] = record
    elements = []
    for position, record in list(by_place.items())[:charts.MAX_ITEMS]:
        stats = record["box"]
        label = stats.get("label")
        elements.append({
            "label": charts.text(label) if label is not None
            else _name_at(position, ticks, labels, tolerance, category),
            "min": _number(stats.get("whislo")),
            "first_quartile": _number(stats.get("q1")),
            "median": _number(stats.get("med")),
            "third_quartile": _number(stats.get("q3")),
            "max": _number(stats.get("whishi")),
            "outliers": [_number(v) for v in
                         numpy.asarray(stats.get("fliers", []), dtype=float).ravel()
                         .tolist()[:charts.MAX_POINTS]]})
    chart = {"type": "box_and_whisker", "elements": elements,
             "orientation": "horizontal" if horizontal else "vertical",
             "swap": horizontal}
    return chart, max(0, len(by_place) - charts.MAX_ITEMS)


def pie_chart(wedges):
    elements = []
    for wedge in wedges[:charts.MAX_ITEMS]:
        sweep = abs(float(wedge.theta2) - float(wedge.theta1))
        record = getattr(wedge, MARK, None)
        value = record.get("pie_value") if isinstance(record, dict) else None
        elements.append({"label": charts.text(wedge.get_label()) or "",
                         "angle": _round(sweep), "radius": _number(wedge.r),
                         "value": charts.number(value),
                         "fraction": _round(sweep / 360)})
    return elements, max(0, len(wedges) - charts.MAX_ITEMS)


def _round(value):
    """8 significant digits, as E2B rounds angles (324, not 323.99999999999994)."""
    return charts.number(float("%.8g" % value))
