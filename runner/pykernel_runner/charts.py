"""Charts as data: what a figure shows, as JSON a model can read.

The display module asks here for the chart of a bundle it built: a matplotlib
figure's (``charts_matplotlib``), or a plotly or Vega-Lite bundle's
(``charts_web``).  The chart travels under CHART_MIME beside the figure's
image; docs/charts.md is the schema.  Imported with the display module's first
figure or chart bundle, never at start-up; a chart that cannot be made is left
out, never an error of the cell.

The helpers here are the schema's shared rules (units in labels, numbers as
JSON numbers, series cut to MAX_POINTS keeping the
extremes), so every source spells them alike.
"""

import math
import re
import sys

CHART_MIME = "application/vnd.pykernel.chart+json"

# The caps of docs/charts.md ("Limits").
MAX_POINTS = 500        # points kept per series
MAX_SERIES = 64         # series per chart, charts per superchart
MAX_ITEMS = 1000        # bars, slices, boxes per chart
MAX_TEXT = 200          # characters of a label or tick

# `Time (s)` -> s, `Speed [m/s]` -> m/s (E2B's rule: the first of either).
_UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")


def figure_chart(fig):
    """The chart of a matplotlib figure, or None (nothing drawn, or it
    failed).  Call after the figure was drawn (its tick labels are then
    set)."""
    try:
        from . import charts_matplotlib
        return charts_matplotlib.figure_chart(fig)
    except KeyboardInterrupt:
        raise
    except BaseException:
        return None


def bundle_chart(bundle):
    """The chart of a bundle holding a plotly figure or a Vega-Lite spec, or
    None."""
    try:
        from . import charts_web
        return charts_web.bundle_chart(bundle)
    except KeyboardInterrupt:
        raise
    except BaseException:
        return None


def add_chart(bundle, chart):
    """Put *chart* into *bundle* under CHART_MIME, unless the bundle has one
    (a library or the cell may give its own)."""
    if chart is not None and CHART_MIME not in bundle:
        bundle[CHART_MIME] = chart


# -- the schema's shared rules ------------------------------------------------

def text(value):
    """A label or tick as the schema keeps it: a str of at most MAX_TEXT
    characters; None for an empty or missing one."""
    if value is None:
        return None
    value = value if isinstance(value, str) else str(value)
    if not value:
        return None
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT - 1] + "…"


def unit(label):
    """The unit named in an axis label, or None."""
    if not label:
        return None
    match = _UNIT.search(label)
    if match is None:
        return None
    return match.group(1) or match.group(2)


def number(value):
    """*value* as a JSON number: an int stays an int, a float that is whole
    is kept as it is (100.0 reads as 100 in JSON), NaN and infinities are
    None.  Anything that is not a number is None."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        value = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def downsample(xs, ys, limit=MAX_POINTS):
    """*xs*, *ys* (lists of equal length) cut to at most *limit* points:
    the first, the last, and in each of (limit - 2) / 2 stretches between
    them the points with the lowest and the highest y, in order.  The
    extremes of y are thus exact; a y that is no number (None, NaN) is never
    taken for one.  Returns (xs, ys, downsampled)."""
    if len(ys) <= limit:
        return xs, ys, False
    keep = keep_indices(ys, limit)
    return [xs[i] for i in keep], [ys[i] for i in keep], True


def keep_indices(ys, limit=MAX_POINTS):
    """The indices downsample() keeps of *ys* (a list, or a float array when
    numpy is loaded), ascending; all of them when there are at most *limit*."""
    n = len(ys)
    if n <= limit:
        return list(range(n))
    stretches = max(1, (limit - 2) // 2)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        return _keep_numpy(numpy, ys, n, stretches)
    keep = [0]
    inner = n - 2
    for s in range(stretches):
        start = 1 + inner * s // stretches
        end = 1 + inner * (s + 1) // stretches
        low = high = None
        for i in range(start, end):
            y = number(ys[i])
            if y is None:
                continue
            if low is None or y < low_y:
                low, low_y = i, y
            if high is None or y > high_y:
                high, high_y = i, y
        keep.extend(sorted({i for i in (low, high) if i is not None}))
    keep.append(n - 1)
    return keep


def _keep_numpy(numpy, ys, n, stretches):
    """keep_indices() over whole arrays: each stretch is a row of a matrix
    (the shorter ones padded), so a figure of 10,000 points costs no Python
    loop."""
    try:
        y = numpy.asarray(ys, dtype=float)
    except (TypeError, ValueError):
        y = numpy.array([numpy.nan if number(v) is None else number(v)
                         for v in ys], dtype=float)
    inner = n - 2
    s = numpy.arange(stretches + 1)
    bounds = 1 + inner * s // stretches
    starts, ends = bounds[:-1], bounds[1:]
    width = int((ends - starts).max())
    index = starts[:, None] + numpy.arange(width)[None, :]
    inside = index < ends[:, None]
    index = numpy.minimum(index, n - 1)
    rows = y[index]
    valid = inside & numpy.isfinite(rows)
    row = numpy.arange(stretches)
    picked = [numpy.array([0, n - 1])]
    for column in (numpy.where(valid, rows, numpy.inf).argmin(axis=1),
                   numpy.where(valid, rows, -numpy.inf).argmax(axis=1)):
        # a stretch of no numbers at all gives none
        picked.append(index[row, column][valid[row, column]])
    return numpy.unique(numpy.concatenate(picked)).tolist()
