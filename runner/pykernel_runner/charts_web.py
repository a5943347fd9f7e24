"""The chart of a plotly figure or a Vega-Lite spec (docs/charts.md).

Both arrive as JSON in a display bundle, never as live objects: plotly's
figure dict (``application/vnd.plotly.v1+json``) is mapped by
``charts_plotly``, a Vega-Lite spec (``application/vnd.vegalite.v*+json``)
by ``charts_vegalite``.  Here are the pick of the bundle and what both
share: dates as ISO strings, series cut to the caps, box statistics.
"""

import math
import re

from . import charts

_PLOTLY = "application/vnd.plotly."
_VEGALITE = "application/vnd.vegalite."

# `2023-09-01 00:00:00` and pandas' `2023-09-01T00:00:00.000000`, as plotly
# writes them; the fraction is dropped when it is zero.
# The tail is a time zone at most: "2023-01-01 launch" is a label, not a date.
_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[ T](\d{2}:\d{2}(?::\d{2})?)(\.\d+)?)?"
                   r"(Z|[+-]\d{2}(?::?\d{2})?)?$")


def bundle_chart(bundle):
    """The chart of the first plotly figure or Vega-Lite spec in *bundle*,
    or None."""
    for key, value in bundle.items():
        if not isinstance(value, dict):
            continue
        if key.startswith(_PLOTLY):
            from . import charts_plotly
            return charts_plotly.figure_chart(value)
        if key.startswith(_VEGALITE):
            from . import charts_vegalite
            return charts_vegalite.spec_chart(value)
    return None


# -- values -------------------------------------------------------------------

def iso_text(value):
    """A date string as an ISO 8601 string (``T`` between date and time, no
    zero fraction); None when it does not look like a date."""
    if not isinstance(value, str):
        return None
    match = _DATE.match(value.strip())
    if match is None:
        return None
    day, clock, fraction, rest = match.groups()
    rest = rest or ""
    if clock is None:
        return day + rest
    if len(clock) == 5:
        clock += ":00"
    if fraction and fraction.strip(".0"):
        clock += fraction
    return day + "T" + clock + rest


def looks_like_date(value):
    return isinstance(value, str) and _DATE.match(value.strip()) is not None


def as_number(value):
    """A data value as a number: numbers, and strings that spell one (as
    plotly reads them on a linear axis); None otherwise."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    return charts.number(value)


def scale_of(values):
    """The scale data alone implies (plotly's and Vega-Lite's rule, roughly):
    datetime for date strings, categorical for other strings, else linear."""
    for value in values:
        if value is None:
            continue
        if isinstance(value, str):
            if looks_like_date(value):
                return "datetime"
            if as_number(value) is None:
                return "categorical"
            continue
        if isinstance(value, (int, float)):
            return "linear"
    return "linear"


def coordinate(value, scale):
    """A position on an axis of *scale*: an ISO string on a date axis, a
    string on a categorical one, else a number."""
    if scale == "datetime":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _epoch_ms(value)
        return charts.text(iso_text(value) or value)
    if scale == "categorical":
        return charts.text(value)
    return as_number(value)


def coordinates(items, scale):
    """coordinate() of each of *items*; a column of plain numbers (the
    common case, thousands of them) is only checked for NaN and infinities."""
    if scale not in ("datetime", "categorical"):
        number_types = (int, float)
        if all(type(v) in number_types for v in items):
            return [v if v - v == 0 else None for v in items]
    return [coordinate(v, scale) for v in items]


def _epoch_ms(ms):
    """Milliseconds since the epoch (plotly's and Vega's numbers on a date
    axis) as an ISO string."""
    import datetime
    try:
        moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)
    except (OverflowError, ValueError):
        return None
    return moment.isoformat()


def limits(values):
    """[low, high] of the positions in *values* (numbers, or ISO strings,
    which sort as dates), or None."""
    present = [v for v in values if v is not None]
    try:
        return [min(present), max(present)] if present else None
    except TypeError:       # numbers and strings mixed: the numbers
        numbers = [v for v in present if isinstance(v, (int, float))]
        return [min(numbers), max(numbers)] if numbers else None


# -- elements -----------------------------------------------------------------

def series(label, xs, ys, y_errors=None):
    """A line or scatter series of parallel lists, cut to charts.MAX_POINTS
    (the y errors follow the points kept)."""
    n = len(ys)
    element = {"label": label}
    kept, _, downsampled = charts.downsample(list(range(n)), ys)
    element["points"] = [[xs[i], ys[i]] for i in kept]
    element["count"] = n
    if downsampled:
        element["downsampled"] = True
    if y_errors is not None:
        element["y_errors"] = [y_errors[i] for i in kept]
    return element


def capped(chart, elements, limit):
    """*elements* cut to *limit* on *chart*, with elements_dropped counting
    the rest."""
    if len(elements) > limit:
        chart["elements_dropped"] = chart.get("elements_dropped", 0) + len(elements) - limit
        elements = elements[:limit]
    chart["elements"] = elements
    return chart


def quantile(ordered, p):
    """The p-quantile of sorted numbers, linearly interpolated (numpy's
    default, plotly's quartilemethod 'linear', d3's and so Vega's)."""
    position = (len(ordered) - 1) * p
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    t = position - low
    # a*(1-t) + b*t: b - a overflows for numbers near the float's range
    return ordered[low] * (1 - t) + ordered[high] * t


def box_stats(label, values, extent=1.5):
    """A box of the schema from raw numbers: quartiles, whiskers at the most
    extreme points within *extent* IQRs of the box, the rest outliers (at
    most charts.MAX_POINTS kept).  None without numbers."""
    ordered = sorted(v for v in (charts.number(v) for v in values) if v is not None)
    if not ordered:
        return None
    q1, median, q3 = (quantile(ordered, p) for p in (0.25, 0.5, 0.75))
    low_fence = q1 - extent * (q3 - q1)
    high_fence = q3 + extent * (q3 - q1)
    inside = [v for v in ordered if low_fence <= v <= high_fence] or [q1, q3]
    outliers = [v for v in ordered if v < low_fence or v > high_fence]
    number = charts.number      # an infinity (a fence past the range) is null
    return {"label": label, "min": number(inside[0]), "first_quartile": number(q1),
            "median": number(median), "third_quartile": number(q3),
            "max": number(inside[-1]), "outliers": outliers[:charts.MAX_POINTS]}


def pie_slices(labels, values):
    """Slices of a pie: equal labels summed (as plotly and a stacked arc
    draw them), negative and missing values left out."""
    totals = {}
    for label, value in zip(labels, values):
        value = charts.number(value)
        if value is None or value < 0:
            continue
        totals[label] = totals.get(label, 0) + value
    whole = sum(totals.values())
    slices = []
    for label, value in totals.items():
        fraction = value / whole if whole else 0
        slices.append({"label": charts.text(label), "angle": fraction * 360,
                       "radius": 1, "value": value, "fraction": fraction})
    return slices
