"""The chart of a matplotlib figure (docs/charts.md).

Each axes is read from its artists after the figure was drawn (its ticks and
tick labels are then set): lines and scatters are series, a BarContainer's
rectangles are bars, wedges are a pie.  What the artists cannot tell (the
numbers a pie was drawn from, that bars are a histogram, a box plot's stats)
display.py's wrappers of Axes.pie, Axes.hist and Axes.bxp leave on them under
``_pykernel_chart``; without it a pie's values are null and a histogram reads
as bars.  Coordinates are read as arrays (numpy is matplotlib's), converted
back through the axis (dates, pandas periods, categories) only for the points
kept, so a figure of 10,000 points costs a millisecond or two.
"""

import numpy

from . import charts, charts_matplotlib_parts as parts


def figure_chart(fig):
    """The chart of *fig*, or None when nothing is drawn on it."""
    axes = [ax for ax in fig.get_axes() if not hasattr(ax, "_colorbar")]
    if not any(_has_data(ax) for ax in axes):
        return None
    if len(axes) == 1:
        return axes_chart(axes[0])
    elements = [axes_chart(ax) for ax in axes[:charts.MAX_SERIES]]
    chart = {"type": "superchart", "title": charts.text(_suptitle(fig)),
             "elements": elements, "source": "matplotlib"}
    if len(axes) > charts.MAX_SERIES:
        chart["elements_dropped"] = len(axes) - charts.MAX_SERIES
    return chart


def _has_data(ax):
    try:
        return bool(ax.has_data())
    except Exception:
        return True


def _suptitle(fig):
    try:
        return fig.get_suptitle()
    except Exception:   # before matplotlib 3.8
        suptitle = getattr(fig, "_suptitle", None)
        return suptitle.get_text() if suptitle is not None else None


def axes_chart(ax):
    """The chart of one axes; `unknown` when it cannot be read."""
    try:
        return _axes_chart(ax)
    except KeyboardInterrupt:
        raise
    except BaseException:
        chart = {"type": "unknown", "title": _title(ax), "elements": [],
                 "source": "matplotlib"}
        try:
            chart.update(_axis_fields(ax, _Axis(ax.xaxis), _Axis(ax.yaxis)))
        except Exception:
            pass
        return chart


def _title(ax):
    try:
        return charts.text(ax.get_title())
    except Exception:
        return None


def _axes_chart(ax):
    x, y = _Axis(ax.xaxis), _Axis(ax.yaxis)
    if getattr(ax, "name", None) == "3d":
        raise ValueError("3D axes have no chart of their own")   # -> unknown
    kinds = parts.sort_artists(ax)
    made = [build(artists) for artists, build in (
        (kinds.lines, lambda a: _series_chart("line", a, x, y, kinds)),
        (kinds.scatters, lambda a: _series_chart("scatter", a, x, y, kinds)),
        (kinds.bars, lambda a: parts.bar_chart(a, x, y)),
        (kinds.hists, lambda a: parts.histogram_chart(a, x, y)),
        (kinds.boxes, lambda a: parts.box_chart(a, x, y))) if artists]
    charts_by_kind = [chart for chart, _ in made]
    dropped = sum(lost for _, lost in made)
    if kinds.wedges and not charts_by_kind:
        elements, lost = parts.pie_chart(kinds.wedges)
        chart = {"type": "pie", "title": _title(ax), "elements": elements,
                 "source": "matplotlib"}
        if lost:
            chart["elements_dropped"] = lost
        return chart
    if not charts_by_kind:
        chart = {"type": "unknown", "elements": []}
    elif len(charts_by_kind) == 1:
        chart = charts_by_kind[0]
    else:
        for part in charts_by_kind:
            part.pop("swap", None)
        chart = {"type": "mixed", "elements": charts_by_kind}
    swap = chart.pop("swap", False)
    result = {"type": chart.pop("type"), "title": _title(ax)}
    result.update(_axis_fields(ax, y if swap else x, x if swap else y))
    result["reference_lines"] = [
        {"orientation": orientation, "value": (y if orientation == "horizontal"
                                               else x).value(value),
         "label": label}
        for orientation, value, label in kinds.references]
    result.update(chart)
    result["source"] = "matplotlib"
    if dropped:
        result["elements_dropped"] = dropped
    return result


def _axis_fields(ax, x, y):
    """The axis fields of docs/charts.md; *x* is the axis the chart calls x
    (the category axis of horizontal bars is matplotlib's y)."""
    fields = {}
    for name, axis in (("x", x), ("y", y)):
        label = charts.text(axis.axis.get_label_text())
        fields[name + "_label"] = label
        fields[name + "_unit"] = charts.unit(label)
    for name, axis in (("x", x), ("y", y)):
        ticks, labels = _ticks(axis.axis)
        fields[name + "_scale"] = axis.scale(ticks, labels)
        fields[name + "_ticks"] = axis.values(ticks)
        fields[name + "_tick_labels"] = labels
        fields[name + "_limits"] = axis.values(
            ax.get_xlim() if axis.axis is ax.xaxis else ax.get_ylim())
    legend = ax.get_legend()
    fields["legend"] = ([charts.text(t.get_text()) or ""
                         for t in legend.get_texts()[:charts.MAX_SERIES]]
                        if legend is not None else None)
    return fields


def _ticks(axis):
    """(locations, labels) of an axis' major ticks.  The labels are the
    formatter's for the locations, as drawing gives them: get_ticklabels()
    would ask the locator twice more, which is most of a chart's cost."""
    # at most MAX_ITEMS: a categorical axis has a tick per category
    ticks = axis.get_majorticklocs()[:charts.MAX_ITEMS]
    try:
        labels = axis.get_major_formatter().format_ticks(ticks)
    except Exception:
        labels = [t.get_text() for t in axis.get_ticklabels()[:charts.MAX_ITEMS]]
    return ticks, [_tick_text(label) for label in labels]


def _tick_text(label):
    """A tick label as it reads: matplotlib's mathtext ``$\\mathdefault{10^{3}}$``
    (log axes) as ``10^{3}``."""
    if label.startswith("$") and label.endswith("$") and len(label) > 1:
        label = label[1:-1]
        if label.startswith("\\mathdefault{") and label.endswith("}"):
            label = label[len("\\mathdefault{"):-1]
    return charts.text(label) or ""


def _series_chart(kind, artists, x, y, kinds):
    elements = [_series(kind, artist, number, x, y, kinds)
                for artist, number in artists[:charts.MAX_SERIES]]
    return ({"type": kind, "elements": elements},
            max(0, len(artists) - charts.MAX_SERIES))


def _series(kind, artist, number, x, y, kinds):
    if kind == "line":
        xy = artist.get_xydata()
    else:
        xy = artist.get_offsets()
    xy = numpy.ma.filled(numpy.ma.asarray(xy, dtype=float), numpy.nan) \
        if numpy.ma.isMaskedArray(xy) else numpy.asarray(xy, dtype=float)
    if xy.ndim != 2 or xy.shape[0] == 0:
        xy = numpy.empty((0, 2))
    count = xy.shape[0]
    keep = None
    if count > charts.MAX_POINTS:
        keep = numpy.asarray(charts.keep_indices(xy[:, 1]), dtype=numpy.intp)
        xy = xy[keep]
    series = {"label": parts.series_label(artist, number,
                                          kinds.labels.get(id(artist))),
              "points": [list(pair) for pair in zip(x.values(xy[:, 0], True),
                                                    y.values(xy[:, 1], True))],
              "count": count}
    if keep is not None:
        series["downsampled"] = True
    bounds = kinds.errors.get(id(artist))
    if bounds is not None and len(bounds) == count:    # errorbar's, per point
        bounds = bounds if keep is None else bounds[keep]
        series["y_errors"] = [list(pair) for pair in zip(
            y.values(bounds[:, 0]), y.values(bounds[:, 1]))]
    return series


class _Axis:
    """One axis: its scale, and its data coordinates as the schema's values
    (ISO strings on a date axis, category names on a categorical one)."""

    def __init__(self, axis):
        self.axis = axis
        self.kind = "number"
        self.freq = None
        self.names = None
        converter = _converter(axis)
        module = type(converter).__module__ or ""
        cls = type(converter).__name__
        if "Period" in cls:
            freq = getattr(axis.axes, "freq", None)
            if freq is not None:
                self.kind, self.freq = "period", freq
        elif module.startswith("matplotlib.dates") or "Datetime" in cls \
                or "DateConverter" in cls:
            self.kind = "date"
        elif "Category" in cls:
            mapping = getattr(axis.get_units(), "_mapping", None)
            if mapping:
                self.kind = "category"
                self.names = {float(v): str(k) for k, v in mapping.items()}

    def scale(self, ticks, labels):
        if self.kind in ("date", "period"):
            return "datetime"
        scale = self.axis.get_scale()
        if scale != "linear":
            return scale
        # E2B's rule: ticks 0..n-1, each labelled with something else
        if len(ticks) and all(float(t) == i and label != str(i)
                              for i, (t, label) in enumerate(zip(ticks, labels))):
            return "categorical"
        return "linear"

    def value(self, v):
        return self.values([v])[0]

    def values(self, array, names=False):
        """Coordinates (an array of floats) as a list of schema values; with
        *names*, a category's name for its number (points, not ticks)."""
        array = numpy.asarray(array, dtype=float)
        if self.kind == "date":
            return _dates(array)
        if self.kind == "period":
            return _periods(array, self.freq)
        out = array.tolist()
        if names and self.kind == "category":
            names = self.names
            out = [names.get(v, v) for v in out]
        if not numpy.isfinite(array).all():
            out = [v if isinstance(v, str) else charts.number(v) for v in out]
        return out


def _converter(axis):
    get = getattr(axis, "get_converter", None)
    return get() if get is not None else getattr(axis, "converter", None)


_EPOCH = None


def _dates(days):
    """matplotlib's date numbers (days since its epoch) as ISO strings."""
    global _EPOCH
    if _EPOCH is None:
        import matplotlib.dates
        _EPOCH = numpy.datetime64(matplotlib.dates.get_epoch(), "us")
    # beyond ~270,000 years the microseconds overflow; beyond year 9999
    # tolist() gives ints, not datetimes: neither is a date
    finite = numpy.isfinite(days) & (numpy.abs(days) < 1e8)
    micros = numpy.where(finite, numpy.round(days * 86400e6), 0).astype("int64")
    stamps = (_EPOCH + micros.astype("timedelta64[us]")).tolist()
    return [stamp.isoformat() if ok and hasattr(stamp, "isoformat") else None
            for stamp, ok in zip(stamps, finite.tolist())]


def _periods(ordinals, freq):
    """pandas' period ordinals (its time-series axes) as ISO strings."""
    import pandas
    finite = numpy.isfinite(ordinals)
    try:
        index = pandas.PeriodIndex.from_ordinals(
            numpy.where(finite, numpy.round(ordinals), 0).astype("int64"), freq=freq)
        stamps = index.to_timestamp()
    except Exception:   # out of pandas' range
        return [None] * len(ordinals)
    return [stamp.isoformat() if ok else None
            for stamp, ok in zip(stamps, finite.tolist())]
