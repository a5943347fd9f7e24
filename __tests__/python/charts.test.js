'use strict'
// Charts as data (docs/charts.md): the chart JSON a matplotlib figure carries beside its PNG,
// read from a real kernel's result. The first group is E2B's chart_data_extractor test inputs,
// run as cells, checking every field and value E2B's tests check; the rest is what we give
// beyond it. One kernel runs every case.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startKernel, ok } = require('../helpers/kernel')

const CHART = 'application/vnd.pykernel.chart+json'
const isoDate = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?$/

/** The charts of the figures a cell shows, in order. */
async function chartsOf(kernel, code) {
  const { result } = await ok(kernel, `import matplotlib.pyplot as plt\n${code}`)
  return result.displays.filter((d) => 'image/png' in d).map((d) => d[CHART])
}

async function chartOf(kernel, code) {
  const charts = await chartsOf(kernel, code)
  assert.equal(charts.length, 1, `one figure shown, got ${charts.length}`)
  assert.ok(charts[0], 'the figure has a chart')
  return charts[0]
}

const floats = (values) => values.every((v) => typeof v === 'number')

test('charts as data from matplotlib', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())

  await t.test('no chart module is imported until a figure is shown', async () => {
    await ok(kernel, 'import sys\nx = [1, 2]\nprint(x)')
    await ok(kernel, 'import matplotlib.pyplot as plt')
    const before = await ok(kernel, "'pykernel_runner.charts' in sys.modules, 'pykernel_runner.charts_matplotlib' in sys.modules")
    assert.equal(before.result.result['text/plain'], '(False, False)')
    await chartOf(kernel, 'plt.plot([1, 2])')
    const after = await ok(kernel, "'pykernel_runner.charts' in sys.modules")
    assert.equal(after.result.result['text/plain'], 'True')
  })

  // -- E2B's test inputs ------------------------------------------------------------------

  await t.test('E2B test_bar', async () => {
    const chart = await chartOf(kernel, `
authors = ["Author A", "Author B", "Author C", "Author D"]
plt.figure(figsize=(10, 6))
plt.bar(authors, [100, 200, 300, 400], label="Books Sold", color="blue")
plt.xlabel("Authors"); plt.ylabel("Number of Books Sold"); plt.title("Book Sales by Authors")
plt.tight_layout()`)
    assert.equal(chart.type, 'bar')
    assert.equal(chart.source, 'matplotlib')
    assert.equal(chart.title, 'Book Sales by Authors')
    assert.equal(chart.x_label, 'Authors')
    assert.equal(chart.y_label, 'Number of Books Sold')
    assert.equal(chart.x_unit, null)
    assert.equal(chart.y_unit, null)
    assert.deepEqual(chart.elements.map((b) => b.value), [100, 200, 300, 400])
    assert.deepEqual(chart.elements.map((b) => b.label), ['Author A', 'Author B', 'Author C', 'Author D'])
    assert.deepEqual(chart.elements.map((b) => b.group), Array(4).fill('Books Sold'))
    assert.equal(chart.orientation, 'vertical')
    assert.equal(chart.stacked, false)
    assert.equal(chart.grouped, false)
    assert.equal(chart.x_scale, 'categorical')
    assert.deepEqual(chart.x_tick_labels, ['Author A', 'Author B', 'Author C', 'Author D'])
  })

  await t.test('E2B test_blank: a figure with nothing drawn has no chart', async () => {
    const { result } = await ok(kernel, 'import matplotlib.pyplot as plt\nfigure, _ = plt.subplots()')
    for (const bundle of result.displays) assert.equal(bundle[CHART], undefined)
  })

  await t.test('E2B test_box_and_whiskers', async () => {
    const chart = await chartOf(kernel, `
data = {"Class A": [85, 90, 78, 92, 88], "Class B": [95, 89, 76, 91, 84, 87], "Class C": [75, 82, 88, 79, 86]}
fig, ax = plt.subplots(figsize=(10, 6))
ax.boxplot(data.values(), tick_labels=data.keys())
ax.set_title("Exam Scores Distribution"); ax.set_xlabel("Class"); ax.set_ylabel("Score")
ax.boxplot(data.values(), tick_labels=data.keys(), patch_artist=True)
plt.tight_layout()`)
    assert.equal(chart.type, 'box_and_whisker')
    assert.equal(chart.title, 'Exam Scores Distribution')
    assert.equal(chart.x_label, 'Class')
    assert.equal(chart.y_label, 'Score')
    assert.equal(chart.x_unit, null)
    assert.equal(chart.y_unit, null)
    assert.equal(chart.elements.length, 3)
    for (const box of chart.elements) {
      assert.ok(floats([box.min, box.first_quartile, box.median, box.third_quartile, box.max]), JSON.stringify(box))
      assert.equal(typeof box.label, 'string')
    }
    assert.deepEqual(chart.elements.map((b) => b.label), ['Class A', 'Class B', 'Class C'])
    // numpy's quartiles of Class B: 84.75, 88, 90.5; 76 lies beyond the lower whisker
    assert.deepEqual(chart.elements[1], {
      label: 'Class B', min: 84, first_quartile: 84.75, median: 88, third_quartile: 90.5, max: 95, outliers: [76],
    })
  })

  await t.test('E2B test_categorical_scale', async () => {
    const chart = await chartOf(kernel, 'plt.figure(figsize=(10, 6))\nplt.plot([1, 2, 3, 4, 5], ["A", "B", "C", "D", "E"])')
    assert.equal(chart.type, 'line')
    assert.equal(chart.x_scale, 'linear')
    assert.equal(chart.y_scale, 'categorical')
    assert.deepEqual(chart.elements[0].points, [[1, 'A'], [2, 'B'], [3, 'C'], [4, 'D'], [5, 'E']])
  })

  const e2bLine = `
import numpy as np, datetime
dates = [datetime.date(2023, 9, 1) + datetime.timedelta(seconds=i) for i in range(100)]
x = np.linspace(0, 2 * np.pi, 100)
plt.figure(figsize=(10, 6))
plt.plot(dates, np.sin(x), label="sin(x)")
`
  await t.test('E2B test_datetime_scale', async () => {
    const chart = await chartOf(kernel, e2bLine)
    assert.equal(chart.type, 'line')
    assert.equal(chart.x_scale, 'datetime')
    assert.equal(chart.y_scale, 'linear')
  })

  await t.test('E2B test_line', async () => {
    const chart = await chartOf(kernel, `${e2bLine}
plt.plot(dates, np.cos(x), label="cos(x)")
plt.xlabel("Time (s)"); plt.ylabel("Amplitude (Hz)"); plt.title("Plot of sin(x) and cos(x)")`)
    assert.equal(chart.type, 'line')
    assert.equal(chart.title, 'Plot of sin(x) and cos(x)')
    assert.equal(chart.x_label, 'Time (s)')
    assert.equal(chart.y_label, 'Amplitude (Hz)')
    assert.equal(chart.x_unit, 's')
    assert.equal(chart.y_unit, 'Hz')
    assert.equal(chart.x_scale, 'datetime')
    assert.equal(chart.y_scale, 'linear')
    assert.ok(chart.x_ticks.every((x) => isoDate.test(x)), JSON.stringify(chart.x_ticks))
    assert.ok(floats(chart.y_ticks))
    assert.ok(chart.x_tick_labels.concat(chart.y_tick_labels).every((s) => typeof s === 'string'))
    assert.equal(chart.elements.length, 2)
    const [sin, cos] = chart.elements
    assert.equal(sin.label, 'sin(x)')
    assert.equal(sin.points.length, 100)
    assert.equal(sin.count, 100)
    assert.ok(sin.points.every(([x, y]) => isoDate.test(x) && typeof y === 'number'))
    assert.equal(sin.points[0][0], '2023-09-01T00:00:00')
    assert.equal(cos.label, 'cos(x)')
    assert.equal(cos.points.length, 100)
    assert.ok(chart.x_limits.every((x) => isoDate.test(x)), JSON.stringify(chart.x_limits))
  })

  await t.test('E2B test_log_graph', async () => {
    const chart = await chartOf(kernel, `
import numpy as np
x = np.linspace(0, 100, 100)
plt.figure(figsize=(10, 6))
plt.plot(x, np.exp(x), label="y = e^x")
plt.yscale("log")
plt.xlabel("X-axis"); plt.ylabel("Y-axis (log scale)"); plt.title("Chart with Log Scale on Y-axis")
plt.legend(); plt.grid(True)`)
    assert.equal(chart.type, 'line')
    assert.equal(chart.title, 'Chart with Log Scale on Y-axis')
    assert.equal(chart.x_label, 'X-axis')
    assert.equal(chart.y_label, 'Y-axis (log scale)')
    assert.equal(chart.x_unit, null)
    assert.equal(chart.y_unit, 'log scale')
    assert.equal(chart.x_scale, 'linear')
    assert.equal(chart.y_scale, 'log')
    assert.ok(floats(chart.x_ticks) && floats(chart.y_ticks))
    assert.ok(chart.x_tick_labels.concat(chart.y_tick_labels).every((s) => typeof s === 'string'))
    assert.equal(chart.y_tick_labels[1], '10^{1}', 'mathtext read as text')
    assert.equal(chart.elements.length, 1)
    assert.equal(chart.elements[0].label, 'y = e^x')
    assert.equal(chart.elements[0].points.length, 100)
    assert.ok(chart.elements[0].points.every(([x, y]) => typeof x === 'number' && typeof y === 'number'))
    assert.deepEqual(chart.legend, ['y = e^x'])
    assert.equal(chart.elements.length, 1, 'grid lines are no series')
  })

  await t.test('E2B test_pie, with values and fractions', async () => {
    const chart = await chartOf(kernel, `
fig, ax = plt.subplots(figsize=(8, 8))
plt.xlabel("x"); plt.ylabel("y")
ax.pie([90, 10], labels=["No", "No, in blue"], autopct="%1.1f%%", startangle=90, colors=plt.cm.Pastel1.colors[:2])
ax.axis("equal"); plt.title("Will I wake up early tomorrow?")`)
    assert.equal(chart.type, 'pie')
    assert.equal(chart.title, 'Will I wake up early tomorrow?')
    assert.deepEqual(chart.elements, [
      { label: 'No', angle: 324, radius: 1, value: 90, fraction: 0.9 },
      { label: 'No, in blue', angle: 36, radius: 1, value: 10, fraction: 0.1 },
    ])
  })

  await t.test('E2B test_scatter', async () => {
    const chart = await chartOf(kernel, `
import numpy as np
plt.figure(figsize=(10, 6))
plt.xlabel("A"); plt.ylabel("B")
plt.scatter(np.random.rand(5), np.random.rand(5), c="blue", label="Dataset 1")
plt.scatter(np.random.rand(10), np.random.rand(10), c="red", label="Dataset 2")`)
    assert.equal(chart.type, 'scatter')
    assert.equal(chart.title, null)
    assert.equal(chart.x_label, 'A')
    assert.equal(chart.y_label, 'B')
    assert.equal(chart.x_scale, 'linear')
    assert.equal(chart.y_scale, 'linear')
    assert.ok(floats(chart.x_ticks) && floats(chart.y_ticks))
    assert.deepEqual(chart.elements.map((s) => [s.label, s.points.length]), [['Dataset 1', 5], ['Dataset 2', 10]])
    assert.ok(chart.elements[0].points.every((p) => p.length === 2 && floats(p)))
  })

  await t.test('E2B test_supergraph', async () => {
    const chart = await chartOf(kernel, `
import numpy as np
x1 = np.linspace(0, 10, 100)
fig, axs = plt.subplots(1, 2, figsize=(10, 8))
fig.suptitle("Multiple Charts Example", fontsize=16)
axs[0].plot(x1, np.sin(x1), "r"); axs[0].set_title("Sine Wave"); axs[0].grid(True)
axs[1].scatter(np.random.rand(5), np.random.rand(5), c="blue", label="Dataset 1")
axs[1].set_xlabel("X"); axs[1].set_ylabel("Y"); axs[1].set_title("Scatter Plot"); axs[1].grid(True)`)
    assert.equal(chart.type, 'superchart')
    assert.equal(chart.title, 'Multiple Charts Example')
    assert.equal(chart.elements.length, 2)
    const [line, scatter] = chart.elements
    assert.equal(line.type, 'line')
    assert.equal(line.title, 'Sine Wave')
    assert.equal(line.x_label, null)
    assert.equal(line.y_label, null)
    assert.equal(line.elements.length, 1)
    assert.equal(line.elements[0].points.length, 100)
    assert.equal(line.elements[0].label, 'Line 0', "E2B's numbering of an unlabelled line")
    assert.equal(scatter.type, 'scatter')
    assert.equal(scatter.title, 'Scatter Plot')
    assert.equal(scatter.x_label, 'X')
    assert.equal(scatter.y_label, 'Y')
    assert.equal(scatter.elements.length, 1)
    assert.equal(scatter.elements[0].points.length, 5)
  })

  await t.test('E2B test_unknown: two circles', async () => {
    const chart = await chartOf(kernel, `
fig, ax = plt.subplots()
ax.add_artist(plt.Circle((0, 0), 1, color="blue", fill=False, linewidth=2))
ax.add_artist(plt.Circle((0, 0), 2, color="red", fill=False, linewidth=2))
ax.grid(True)
plt.title("Two Concentric Circles")`)
    assert.equal(chart.type, 'unknown')
    assert.equal(chart.title, 'Two Concentric Circles')
    assert.deepEqual(chart.elements, [])
    assert.equal(chart.x_scale, 'linear', 'an unknown chart on axes has the axis fields')
  })

  // -- beyond E2B ---------------------------------------------------------------------------

  await t.test('bars with an axhline: a bar chart with a reference line', async () => {
    const chart = await chartOf(kernel, "plt.bar(['a', 'b', 'c'], [1, 2, 3])\nplt.axhline(2, color='r', label='target')")
    assert.equal(chart.type, 'bar')
    assert.deepEqual(chart.reference_lines, [{ orientation: 'horizontal', value: 2, label: 'target' }])
    assert.deepEqual(chart.elements.map((b) => b.value), [1, 2, 3])
  })

  await t.test('bars with a trend line: mixed, a bar chart and a line chart', async () => {
    const chart = await chartOf(kernel, `
plt.bar(['a', 'b', 'c'], [1, 2, 3], label='sales')
plt.plot(['a', 'b', 'c'], [1.5, 2, 2.5], label='trend')
plt.legend()`)
    assert.equal(chart.type, 'mixed')
    assert.deepEqual(chart.elements.map((c) => c.type).sort(), ['bar', 'line'])
    const bars = chart.elements.find((c) => c.type === 'bar')
    const line = chart.elements.find((c) => c.type === 'line')
    assert.deepEqual(bars.elements.map((b) => [b.label, b.group, b.value]), [['a', 'sales', 1], ['b', 'sales', 2], ['c', 'sales', 3]])
    assert.deepEqual(line.elements[0].points, [['a', 1.5], ['b', 2], ['c', 2.5]])
    assert.deepEqual(chart.legend.slice().sort(), ['sales', 'trend'])
    assert.equal(chart.x_scale, 'categorical', 'the axis fields are on the mixed chart')
    assert.equal(bars.swap, undefined)
  })

  await t.test('plt.hist: every bin, more bins than tick labels', async () => {
    const chart = await chartOf(kernel, `
import numpy as np
data = np.random.default_rng(1).normal(size=1000)
counts, edges, _ = plt.hist(data, bins=40, label='normal')
expected = (counts.tolist(), edges.tolist())`)
    const { result } = await ok(kernel, 'import json\njson.dumps(expected)')
    const [counts, edges] = JSON.parse(result.result['text/plain'].slice(1, -1))
    assert.equal(chart.type, 'histogram')
    assert.equal(chart.density, false)
    assert.equal(chart.stacked, false)
    assert.equal(chart.orientation, 'vertical')
    assert.equal(chart.elements.length, 1)
    const [set] = chart.elements
    assert.equal(set.label, 'normal')
    assert.equal(set.count, 40)
    assert.equal(set.bin_edges.length, 41)
    assert.ok(chart.x_tick_labels.length < 40)
    assert.deepEqual(set.counts, counts)
    // to the last bit: the host parses floats as the runner wrote them
    assert.deepEqual(set.bin_edges, edges)
    assert.equal(set.counts.reduce((a, b) => a + b), 1000)
  })

  await t.test('plt.hist: density, several datasets, stacked, horizontal', async () => {
    const [density, stacked, horizontal] = await chartsOf(kernel, `
import numpy as np
rng = np.random.default_rng(2)
a, b = rng.normal(size=200), rng.normal(1, size=100)
plt.figure(); plt.hist(a, bins=5, density=True)
plt.figure(); plt.hist([a, b], bins=[-4, -2, 0, 2, 4], stacked=True, label=['a', 'b'])
plt.figure(); plt.hist(a, bins=3, orientation='horizontal'); plt.ylabel('value (m)'); plt.xlabel('count')`)
    assert.equal(density.type, 'histogram')
    assert.equal(density.density, true)
    const widths = density.elements[0].bin_edges.slice(1).map((e, i) => e - density.elements[0].bin_edges[i])
    const area = density.elements[0].counts.reduce((sum, c, i) => sum + c * widths[i], 0)
    assert.ok(Math.abs(area - 1) < 1e-9, `densities integrate to 1, got ${area}`)
    assert.equal(stacked.stacked, true)
    assert.deepEqual(stacked.elements.map((e) => e.label), ['a', 'b'])
    assert.deepEqual(stacked.elements[1].bin_edges, [-4, -2, 0, 2, 4])
    assert.equal(stacked.elements[0].counts.reduce((x, y) => x + y), 200, "the lower dataset's own counts")
    assert.equal(stacked.elements[1].counts.reduce((x, y) => x + y), 100, "the upper one's own, not the running total")
    assert.equal(horizontal.orientation, 'horizontal')
    assert.equal(horizontal.elements[0].count, 3)
    assert.equal(horizontal.x_label, 'value (m)', 'x names the bins axis')
    assert.equal(horizontal.x_unit, 'm')
    assert.equal(horizontal.y_label, 'count')
  })

  await t.test('barh, grouped bars, stacked bars', async () => {
    const [barh, grouped, stacked] = await chartsOf(kernel, `
import numpy as np
plt.figure(); plt.barh(['apples', 'pears'], [3, 5]); plt.xlabel('Count'); plt.ylabel('Fruit')
plt.figure(); x = np.arange(3)
plt.bar(x - 0.2, [1, 2, 3], 0.4, label='2023'); plt.bar(x + 0.2, [2, 3, 4], 0.4, label='2024')
plt.xticks(x, ['p', 'q', 'r'])
plt.figure(); plt.bar(['a', 'b'], [1, 2], label='low'); plt.bar(['a', 'b'], [3, 4], bottom=[1, 2], label='high')`)
    assert.equal(barh.type, 'bar')
    assert.equal(barh.orientation, 'horizontal')
    assert.deepEqual(barh.elements.map((b) => [b.label, b.value]), [['apples', 3], ['pears', 5]])
    assert.equal(barh.x_label, 'Fruit', 'x names the category axis')
    assert.equal(barh.y_label, 'Count')
    assert.equal(grouped.grouped, true)
    assert.equal(grouped.stacked, false)
    assert.deepEqual(grouped.elements.map((b) => [b.label, b.group, b.value]),
      [['p', '2023', 1], ['q', '2023', 2], ['r', '2023', 3], ['p', '2024', 2], ['q', '2024', 3], ['r', '2024', 4]])
    assert.equal(stacked.stacked, true)
    assert.equal(stacked.grouped, false)
    assert.deepEqual(stacked.elements.filter((b) => b.group === 'high').map((b) => [b.label, b.value, b.bottom]),
      [['a', 3, 1], ['b', 4, 2]])
  })

  await t.test('axis limits: set, reversed, on a date axis', async () => {
    const [set, dated] = await chartsOf(kernel, `
import datetime
plt.figure(); plt.plot([1, 2, 3], [4, 5, 6]); plt.xlim(0, 10); plt.gca().invert_yaxis()
plt.figure(); plt.plot([datetime.date(2024, 1, 1), datetime.date(2024, 3, 1)], [1, 2])
plt.xlim(datetime.date(2023, 12, 1), datetime.date(2024, 4, 1))`)
    assert.deepEqual(set.x_limits, [0, 10])
    assert.ok(set.y_limits[0] > set.y_limits[1], 'a reversed axis gives low > high')
    assert.deepEqual(dated.x_limits, ['2023-12-01T00:00:00', '2024-04-01T00:00:00'])
    assert.deepEqual(dated.elements[0].points, [['2024-01-01T00:00:00', 1], ['2024-03-01T00:00:00', 2]])
  })

  await t.test('error bars: on bars and on an errorbar series', async () => {
    const [bars, series] = await chartsOf(kernel, `
plt.figure(); plt.bar(['a', 'b'], [1, 2], yerr=[0.25, 0.5])
plt.figure(); plt.errorbar([1, 2, 3], [1, 2, 3], yerr=[0.5, 0.5, 1.0], label='measured')`)
    assert.deepEqual(bars.elements.map((b) => b.error), [[0.75, 1.25], [1.5, 2.5]])
    assert.equal(series.type, 'line')
    assert.equal(series.elements.length, 1, 'caps and bars are no series')
    assert.equal(series.elements[0].label, 'measured')
    assert.deepEqual(series.elements[0].y_errors, [[0.5, 1.5], [1.5, 2.5], [2, 4]])
  })

  await t.test('NaN is null; numbers are numbers', async () => {
    const chart = await chartOf(kernel, "plt.plot([1, 2, 3], [1, float('nan'), 3])")
    assert.deepEqual(chart.elements[0].points, [[1, 1], [2, null], [3, 3]])
  })

  await t.test('legend: its entries, null without one', async () => {
    const [withLegend, without] = await chartsOf(kernel, `
plt.figure(); plt.plot([1, 2], label='up'); plt.plot([2, 1], label='down'); plt.legend()
plt.figure(); plt.plot([1, 2], label='up')`)
    assert.deepEqual(withLegend.legend, ['up', 'down'])
    assert.equal(without.legend, null)
  })

  await t.test('pandas dates: df.plot() and plt.plot(df.index, ...); datetime64', async () => {
    const [frame, index, monthly, dt64] = await chartsOf(kernel, `
import pandas as pd, numpy as np
df = pd.DataFrame({'temp': [1.0, 2.0, 3.0]}, index=pd.date_range('2024-01-01', periods=3, freq='D'))
df.plot()
plt.figure(); plt.plot(df.index, df.temp)
pd.DataFrame({'m': [1.0, 2.0]}, index=pd.date_range('2024-01-01', periods=2, freq='MS')).plot()
plt.figure(); plt.scatter(np.array(['2024-05-01', '2024-05-02'], dtype='datetime64[D]'), [1, 2])`)
    const days = [['2024-01-01T00:00:00', 1], ['2024-01-02T00:00:00', 2], ['2024-01-03T00:00:00', 3]]
    assert.equal(frame.x_scale, 'datetime')
    assert.deepEqual(frame.elements[0].points, days)
    assert.equal(frame.elements[0].label, 'temp')
    assert.ok(frame.x_ticks.every((x) => isoDate.test(x)))
    assert.equal(index.x_scale, 'datetime')
    assert.deepEqual(index.elements[0].points, days)
    assert.deepEqual(monthly.elements[0].points, [['2024-01-01T00:00:00', 1], ['2024-02-01T00:00:00', 2]])
    assert.deepEqual(dt64.elements[0].points, [['2024-05-01T00:00:00', 1], ['2024-05-02T00:00:00', 2]])
  })

  await t.test('bars on a date axis are named by their date; an image or a 3D axes is unknown', async () => {
    const [bars, image, solid] = await chartsOf(kernel, `
import datetime, numpy as np
plt.figure(); plt.bar([datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)], [3, 4])
plt.figure(); plt.imshow(np.eye(3)); plt.colorbar(); plt.title('identity')
plt.figure().add_subplot(projection='3d').plot([1, 2], [3, 4], [5, 6])`)
    assert.deepEqual(bars.elements.map((b) => [b.label, b.value]), [['2024-01-01T00:00:00', 3], ['2024-01-02T00:00:00', 4]])
    assert.equal(image.type, 'unknown', 'one chart: the colorbar is no axes of its own')
    assert.equal(image.title, 'identity')
    assert.equal(solid.type, 'unknown')
  })

  await t.test('a series over 500 points keeps 500, with its extremes, first and last', async () => {
    const chart = await chartOf(kernel, `
import numpy as np
y = np.sin(np.arange(10000) / 100.0)
y[4321] = 7.5; y[8765] = -9.25; y[100:2000] = np.nan
plt.plot(np.arange(10000) * 2, y)`)
    const [series] = chart.elements
    assert.equal(series.count, 10000)
    assert.equal(series.downsampled, true)
    assert.ok(series.points.length <= 500 && series.points.length > 400, `${series.points.length}`)
    assert.deepEqual(series.points[0], [0, 0])
    assert.equal(series.points.at(-1)[0], 19998)
    assert.ok(series.points.some(([x, y]) => x === 8642 && y === 7.5))
    assert.ok(series.points.some(([x, y]) => x === 17530 && y === -9.25))
    assert.ok(series.points.every(([, y]) => y !== null), 'a missing y is never an extreme')
    const xs = series.points.map(([x]) => x)
    assert.deepEqual(xs, xs.slice().sort((a, b) => a - b), 'in order')
  })

  await t.test('ticks: at most 1,000 on a categorical axis of 5,000 categories', async () => {
    const c = await chartOf(kernel, 'plt.figure(); plt.plot([f"c{i}" for i in range(5000)], range(5000)); plt.show()')
    assert.equal(c.x_ticks.length, 1000)
    assert.equal(c.x_tick_labels.length, 1000)
  })

  await t.test('caps: 64 series, elements_dropped counts the rest', async () => {
    const chart = await chartOf(kernel, 'for i in range(70): plt.plot([0, 1], [i, i + 1])')
    assert.equal(chart.elements.length, 64)
    assert.equal(chart.elements_dropped, 6)
  })

  await t.test('an axes that fails to read is unknown; the cell and the PNG stand', async () => {
    const charts = await chartsOf(kernel, `
fig, (a, b) = plt.subplots(1, 2)
a.plot([1, 2]); b.plot([3, 4])
b.get_legend = lambda: 1 / 0`)
    assert.equal(charts[0].type, 'superchart')
    assert.deepEqual(charts[0].elements.map((c) => c.type), ['line', 'unknown'])
    assert.equal(charts[0].elements[1].elements.length, 0)
  })

  await t.test('the wrappers are transparent: same result, signature and __wrapped__', async () => {
    const { result } = await ok(kernel, `
import inspect, matplotlib.axes
Axes = matplotlib.axes.Axes
r = plt.pie([1, 3])
plt.close('all')
(inspect.signature(Axes.pie) == inspect.signature(Axes.pie.__wrapped__),
 Axes.hist.__name__, hasattr(Axes.bxp, '__wrapped__'), len(r[0]))`)
    assert.equal(result.result['text/plain'], "(True, 'hist', True, 2)")
  })
})
