"""Histogram bins as plotly.js makes them in the browser.

A plotly histogram trace holds the raw data; the bins are computed where the
figure is drawn.  These are plotly.js' rules (``Axes.autoBin``: a "nice"
size near the target, edges on a tick below the data, integer data centred
in their bins), followed as closely as a few lines allow, so the chart's
bins are ours but match what the figure shows in the common cases.
"""

import datetime
import math

from . import charts
from .charts_web import as_number, iso_text


# Bin sizes on a date axis, in milliseconds: plotly.js' tick steps up to two
# weeks; longer ones are whole days (plotly's months and years are not kept).
_SECOND, _DAY = 1000, 86400000
_DATE_STEPS = [s * _SECOND for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
                                     3600, 7200, 10800, 21600, 43200)] + \
    [d * _DAY for d in (1, 2, 7, 14)]


def edges(numbers, start, end, size, nbins, dates=False):
    """Bin edges over *numbers*: from *start* to *end* by *size* where
    given (None where not), the rest as plotly.js' auto-binning picks it
    (*nbins* the target count); at most charts.MAX_ITEMS bins.  With
    *dates* the numbers are milliseconds since the epoch."""
    numbers = [v for v in numbers if v is not None]
    if not numbers:
        return []
    size = size if size and size > 0 else None
    auto_start, auto_end, auto_size = auto_bins(numbers, nbins if nbins and nbins > 0 else None,
                                                size, dates)
    size = size or auto_size
    start = auto_start if start is None else start
    if end is None:
        end = auto_end if start == auto_start else start + size * (
            math.floor((max(numbers) - start) / size) + 1)
    count = max(1, min(charts.MAX_ITEMS, math.ceil((end - start) / size - 1e-9)))
    # 12 digits: no 0.30000000000000004 from adding sizes
    return [charts.number(float("%.12g" % (start + size * i))) for i in range(count + 1)]


def auto_bins(data, nbins, size, dates=False):
    """plotly.js' Axes.autoBin for a linear axis: a "nice" size (1, 2 or 5
    times a power of ten) near the target, the first edge a tick below the
    data, shifted half a bin when the data sit on the edges."""
    low, high = min(data), max(data)
    if size is None:
        if nbins:
            rough = (high - low) / nbins
        else:
            distinct = sorted(set(data))
            min_diff = (high - low) or 1
            for a, b in zip(distinct, distinct[1:]):
                min_diff = min(min_diff, b - a)
            power = 10 ** math.floor(math.log10(min_diff))
            ratio = min_diff / power
            floor_step = max([s for s in (0.9, 1.9, 4.9, 9.9) if s <= ratio] or [0.9])
            mean = sum(data) / len(data)
            spread = math.sqrt(sum((v - mean) ** 2 for v in data) / len(data))
            rough = max(power * floor_step, 2 * spread / len(data) ** 0.4)
        size = _nice_date(rough) if dates else _nice(rough or 1)
    if dates:
        start = math.floor(low / size) * size
    else:
        start = _shift(math.ceil(low / size) * size - size, data, size, low)
    count = 1 + math.floor((high - start) / size)
    return start, start + count * size, size


def _nice(rough):
    """plotly.js' tick rounding: the next of 2, 5, 10 times a power of ten
    above rough / power."""
    power = 10 ** math.floor(math.log10(rough))
    ratio = rough / power
    step = next((s for s in (2, 5, 10) if s > ratio), 10)
    return power * step


def _nice_date(rough):
    step = next((s for s in _DATE_STEPS if s >= rough), None)
    return step if step is not None else _DAY * _nice(rough / _DAY)


def _shift(start, data, size, low):
    """plotly.js' autoShiftNumericBins: integer data centred in their bins,
    data crowding the edges moved half a bin."""
    def near_edge(v):
        return (1 + (v - start) * 100 / size) % 100 < 2
    if all(float(v).is_integer() for v in data):
        if size < 1:
            return low - 0.5 * size
        start -= 0.5
        return start + size if start + size < low else start
    mid = sum(1 for v in data if near_edge(v + size / 2))
    if mid < len(data) * 0.1:
        edges = sum(1 for v in data if near_edge(v))
        if edges > len(data) * 0.3 or near_edge(low) or near_edge(max(data)):
            return start + size / 2 if start + size / 2 < low else start - size / 2
    return start


def fold(numbers, weights, func, edges):
    """Per bin: the count of *numbers* in it, or with *weights* (parallel
    numbers) their sum, average ("avg"), min or max (plotly's histfunc)."""
    if len(edges) < 2:
        return []
    start, size, n = edges[0], edges[1] - edges[0], len(edges) - 1
    folded = [[] for _ in range(n)]
    for i, v in enumerate(numbers):
        if v is None:
            continue
        slot = math.floor((v - start) / size)
        if 0 <= slot < n:
            if weights is None:
                folded[slot].append(1)
            elif i < len(weights) and weights[i] is not None:
                folded[slot].append(weights[i])
    if weights is None or func == "sum":
        return [sum(bin_) for bin_ in folded]
    if func == "avg":
        return [sum(b) / len(b) if b else 0 for b in folded]
    if func in ("min", "max"):
        pick = min if func == "min" else max
        return [pick(b) if b else 0 for b in folded]
    return [len(b) for b in folded]


def normalised(counts, edges, histnorm):
    total = sum(counts)
    size = edges[1] - edges[0] if len(edges) > 1 else 1
    if histnorm == "percent" and total:
        return [100 * c / total for c in counts]
    if histnorm == "probability" and total:
        return [c / total for c in counts]
    if histnorm == "density" and size:
        return [c / size for c in counts]
    if histnorm == "probability density" and total and size:
        return [c / total / size for c in counts]
    return counts


def epoch(value):
    """A date (an ISO string) as milliseconds since the epoch, as plotly.js
    bins dates; a number as it is; None otherwise."""
    text = iso_text(value) if isinstance(value, str) else None
    if text is None:
        return as_number(value)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.replace(tzinfo=None) - moment.utcoffset()
    return (moment - datetime.datetime(1970, 1, 1)).total_seconds() * 1000
