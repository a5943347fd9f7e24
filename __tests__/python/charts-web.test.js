'use strict'
// Charts as data from plotly figures and Vega-Lite specs (docs/charts.md, "From plotly and
// Vega-Lite"): the chart JSON beside the figure in its bundle, with the real plotly, pandas,
// numpy and altair of the test venv. One kernel for every case.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startKernel, run } = require('../helpers/kernel')

const CHART = 'application/vnd.pykernel.chart+json'

async function ok(kernel, code) {
  const out = await run(kernel, code)
  assert.equal(out.result.status, 'ok', `${code}\n-> ${JSON.stringify(out.result.error)}`)
  return out.result
}

/** The charts of a cell's displays and of its result, in order. */
async function charts(kernel, code) {
  const result = await ok(kernel, code)
  const bundles = [...(result.displays || []), ...(result.result ? [result.result] : [])]
  return bundles.map((b) => b[CHART]).filter(Boolean)
}

/** The one chart of a cell. */
async function chart(kernel, code) {
  const found = await charts(kernel, code)
  assert.equal(found.length, 1, `one chart from:\n${code}\n-> ${JSON.stringify(found).slice(0, 500)}`)
  return found[0]
}

const pick = (object, keys) => Object.fromEntries(keys.map((k) => [k, object[k]]))

test('charts from plotly and Vega-Lite', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await ok(kernel, [
    'import numpy as np, pandas as pd',
    'import plotly.express as px, plotly.graph_objects as go',
    'from plotly.subplots import make_subplots',
    'import altair as alt',
  ].join('\n'))

  await t.test("altair's default renderer is pykernel's: the Vega-Lite bundle, a text/plain that names the chart", async () => {
    const r = await ok(kernel, [
      "display(alt.Chart(pd.DataFrame({'a': [1, 2]})).mark_bar().encode(x='a', y='a'))",
      'print(alt.renderers.active)',
    ].join('\n'))
    assert.equal(r.stdout, 'pykernel\n')
    const bundle = r.displays[0]
    const keys = Object.keys(bundle).sort()
    assert.ok(keys.some((k) => k.startsWith('application/vnd.vegalite.')), keys.join(', '))
    assert.ok(!keys.includes('text/html'), 'no HTML that loads Vega from a CDN')
    assert.match(bundle['text/plain'], /^<VegaLite \d+ object>$/)
    assert.equal(bundle['application/vnd.pykernel.chart+json'].type, 'bar')
  })

  await t.test('px.line over dates: a line chart with ISO dates, labels and units', async () => {
    const c = await chart(kernel, [
      "df = pd.DataFrame({'day': pd.date_range('2023-09-01', periods=3), 'v': [1.5, 3, 2]})",
      "px.line(df, x='day', y='v', title='Sales', labels={'v': 'Revenue (USD)'})",
    ].join('\n'))
    assert.deepEqual(pick(c, ['type', 'source', 'title', 'x_label', 'x_scale', 'y_label', 'y_unit', 'y_scale', 'legend']), {
      type: 'line', source: 'plotly', title: 'Sales', x_label: 'day', x_scale: 'datetime',
      y_label: 'Revenue (USD)', y_unit: 'USD', y_scale: 'linear', legend: null,
    })
    assert.deepEqual(c.elements, [{
      label: 'Line 1',
      points: [['2023-09-01T00:00:00', 1.5], ['2023-09-02T00:00:00', 3], ['2023-09-03T00:00:00', 2]],
      count: 3,
    }])
    assert.deepEqual(c.x_limits, ['2023-09-01T00:00:00', '2023-09-03T00:00:00'])
    assert.deepEqual([c.x_ticks, c.x_tick_labels], [[], []], 'no tickvals given: no ticks')
  })

  await t.test('bars: stacked with error bars, grouped by default, horizontal', async () => {
    const stacked = await chart(kernel, [
      "fig = go.Figure([go.Bar(name='A', x=['p', 'q'], y=[1, 2], error_y={'type': 'data', 'array': [0.5, 1]}),",
      "                 go.Bar(name='B', x=['p', 'q'], y=[3, 4])])",
      "fig.update_layout(barmode='stack')",
    ].join('\n'))
    assert.deepEqual(pick(stacked, ['type', 'orientation', 'stacked', 'grouped', 'x_scale', 'legend', 'y_limits']), {
      type: 'bar', orientation: 'vertical', stacked: true, grouped: false, x_scale: 'categorical',
      legend: ['A', 'B'], y_limits: [0, 6],
    })
    assert.deepEqual(stacked.elements, [
      { label: 'p', group: 'A', value: 1, bottom: 0, error: [0.5, 1.5] },
      { label: 'q', group: 'A', value: 2, bottom: 0, error: [1, 3] },
      { label: 'p', group: 'B', value: 3, bottom: 1 },
      { label: 'q', group: 'B', value: 4, bottom: 2 },
    ])
    const grouped = await chart(kernel, "go.Figure([go.Bar(x=['p'], y=[1]), go.Bar(x=['p'], y=[2])])")
    assert.deepEqual([grouped.stacked, grouped.grouped], [false, true])
    assert.deepEqual(grouped.elements.map((e) => e.group), ['Group 1', 'Group 2'])
    const flat = await chart(kernel, [
      "fig = go.Figure(go.Bar(x=[5, 7], y=['u', 'v'], orientation='h'))",
      "fig.update_layout(xaxis_title='Count (n)', yaxis_title='Kind')",
    ].join('\n'))
    // E2B's rule: x names the category axis whichever way the bars point
    assert.deepEqual(pick(flat, ['orientation', 'x_label', 'x_scale', 'y_label', 'y_unit', 'y_limits']), {
      orientation: 'horizontal', x_label: 'Kind', x_scale: 'categorical', y_label: 'Count (n)', y_unit: 'n', y_limits: [0, 7],
    })
    assert.deepEqual(flat.elements.map((e) => [e.label, e.value]), [['u', 5], ['v', 7]])
  })

  await t.test('px.pie: slices with value, fraction and angle; labels without values are counted', async () => {
    const c = await chart(kernel, "px.pie(values=[90, 10], names=['No', 'Yes'], title='Answers')")
    assert.deepEqual(c, {
      type: 'pie', title: 'Answers', source: 'plotly',
      elements: [
        { label: 'No', angle: 324, radius: 1, value: 90, fraction: 0.9 },
        { label: 'Yes', angle: 36, radius: 1, value: 10, fraction: 0.1 },
      ],
    })
    const counted = await chart(kernel, "go.Figure(go.Pie(labels=['a', 'b', 'a', 'a']))")
    assert.deepEqual(counted.elements.map((e) => [e.label, e.value, e.fraction]), [['a', 3, 0.75], ['b', 1, 0.25]])
  })

  await t.test('go.Box: linear quartiles, whiskers within 1.5 IQR, outliers', async () => {
    const c = await chart(kernel, "go.Figure(go.Box(y=[1, 2, 3, 4, 5, 6, 7, 8, 9, 40], name='b'))")
    assert.equal(c.type, 'box_and_whisker')
    assert.deepEqual(c.elements, [{
      label: 'b', min: 1, first_quartile: 3.25, median: 5.5, third_quartile: 7.75, max: 9, outliers: [40],
    }])
    const given = await chart(kernel, "go.Figure(go.Box(q1=[2], median=[3], q3=[4], lowerfence=[0], upperfence=[6], name='g'))")
    assert.deepEqual(given.elements, [{
      label: 'g', min: 0, first_quartile: 2, median: 3, third_quartile: 4, max: 6, outliers: [],
    }])
  })

  await t.test('histograms: plotly.js auto-bins, nbinsx, xbins and histnorm', async () => {
    const auto = await chart(kernel, "px.histogram(pd.DataFrame({'h': [150, 152, 160, 161, 170]}), x='h', nbins=3)")
    assert.deepEqual(pick(auto, ['type', 'orientation', 'stacked', 'density', 'y_label']), {
      type: 'histogram', orientation: 'vertical', stacked: false, density: false, y_label: 'count',
    })
    assert.deepEqual(auto.elements, [{ label: null, bin_edges: [149.5, 159.5, 169.5, 179.5], counts: [2, 2, 1], count: 3 }])
    const small = await chart(kernel, 'go.Figure(go.Histogram(x=[1, 2, 2, 3, 3, 3]))')
    assert.deepEqual(small.elements[0].bin_edges, [0.5, 1.5, 2.5, 3.5], 'integers centred in bins of 1')
    assert.deepEqual(small.elements[0].counts, [1, 2, 3])
    const given = await chart(kernel, "go.Figure(go.Histogram(x=[1, 2, 2, 3, 3, 3], xbins={'start': 0, 'end': 4, 'size': 2}, histnorm='probability density'))")
    assert.deepEqual(given.elements[0].bin_edges, [0, 2, 4])
    assert.deepEqual(given.elements[0].counts, [1 / 6 / 2, 5 / 6 / 2])
    assert.equal(given.density, true)
  })

  await t.test('a heatmap is unknown with its shape; other trace types are named', async () => {
    const c = await chart(kernel, 'go.Figure(go.Heatmap(z=np.arange(6).reshape(2, 3)))')
    assert.deepEqual(pick(c, ['type', 'shape', 'trace_types', 'elements', 'source']), {
      type: 'unknown', shape: [2, 3], trace_types: ['heatmap'], elements: [], source: 'plotly',
    })
    const polar = await chart(kernel, 'go.Figure(go.Scatterpolar(r=[1, 2], theta=[0, 90]))')
    assert.deepEqual(pick(polar, ['type', 'trace_types']), { type: 'unknown', trace_types: ['scatterpolar'] })
  })

  await t.test('make_subplots: a superchart, a chart per axes pair in order, titled', async () => {
    const c = await chart(kernel, [
      "fig = make_subplots(rows=1, cols=3, subplot_titles=['Bars', 'Line', 'Empty'])",
      "fig.add_trace(go.Scatter(x=[1, 2], y=[3, 4], mode='lines'), row=1, col=2)",
      "fig.add_trace(go.Bar(x=['a', 'b'], y=[1, 2]), row=1, col=1)",
      "fig.update_layout(title='Overview')",
    ].join('\n'))
    assert.equal(c.type, 'superchart')
    assert.equal(c.title, 'Overview')
    assert.deepEqual(c.elements.map((e) => [e.type, e.title, e.elements.length]), [['bar', 'Bars', 2], ['line', 'Line', 1], ['unknown', 'Empty', 0]])
  })

  await t.test('bars with a line on one axes: mixed, a chart per kind', async () => {
    const c = await chart(kernel, "go.Figure([go.Bar(x=['a', 'b'], y=[1, 2], name='n'), go.Scatter(x=['a', 'b'], y=[1.5, 2.5], name='trend')])")
    assert.equal(c.type, 'mixed')
    assert.deepEqual(c.elements.map((e) => e.type), ['bar', 'line'])
    assert.deepEqual(c.elements[1].elements[0].points, [['a', 1.5], ['b', 2.5]])
    assert.deepEqual(pick(c, ['x_scale', 'legend']), { x_scale: 'categorical', legend: ['n', 'trend'] })
  })

  await t.test('add_hline and add_vline: reference lines with their annotation', async () => {
    const c = await chart(kernel, [
      'fig = go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 5, 2]))',
      "fig.add_hline(y=2.5, annotation_text='mean')",
      'fig.add_vline(x=2)',
      'fig.update_xaxes(range=[0, 4], tickvals=[1, 2, 3], ticktext=["one", "two", "three"])',
    ].join('\n'))
    assert.deepEqual(c.reference_lines, [
      { orientation: 'horizontal', value: 2.5, label: 'mean' },
      { orientation: 'vertical', value: 2, label: null },
    ])
    assert.deepEqual(pick(c, ['x_limits', 'x_ticks', 'x_tick_labels', 'y_limits']), {
      x_limits: [0, 4], x_ticks: [1, 2, 3], x_tick_labels: ['one', 'two', 'three'], y_limits: [1, 5],
    })
  })

  await t.test('a figure as the cell result, through fig.show() and display() carries the chart', async () => {
    await ok(kernel, "fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], mode='markers'))")
    // plotly's _ipython_display_ shows a figure that is a cell's result (as in Jupyter)
    const asResult = await ok(kernel, 'fig')
    assert.equal(asResult.displays.length, 1)
    const c = asResult.displays[0][CHART]
    assert.deepEqual(pick(c, ['type', 'source', 'elements']), {
      type: 'scatter', source: 'plotly', elements: [{ label: 'Line 1', points: [[1, 3], [2, 4]], count: 2 }],
    })
    assert.ok(asResult.displays[0]['application/vnd.plotly.v1+json'], 'the figure stays in the bundle')
    for (const code of ['fig.show()', 'display(fig)']) {
      const shown = await ok(kernel, code)
      assert.equal(shown.displays.length, 1, code)
      assert.deepEqual(shown.displays[0][CHART], c, code)
    }
  })

  await t.test('10,000 points: downsampled with exact extremes, in a few milliseconds', async () => {
    const result = await ok(kernel, [
      'import time, json, plotly.io as pio, pykernel_runner.charts as charts',
      'x = np.linspace(0, 20, 10_000)',
      "fig = go.Figure(go.Scatter(x=x, y=np.sin(x) * x, mode='markers'))",
      "bundle = {'application/vnd.plotly.v1+json': json.loads(pio.to_json(fig))}",
      'def timed():',
      '    start = time.perf_counter()',
      '    assert charts.bundle_chart(bundle) is not None',
      '    return time.perf_counter() - start',
      'display(fig)',
      'round(min(timed() for _ in range(20)) * 1000, 2)',
    ].join('\n'))
    const c = result.displays[0][CHART]
    const [series] = c.elements
    assert.equal(series.count, 10000)
    assert.equal(series.downsampled, true)
    assert.ok(series.points.length <= 500 && series.points.length > 400, `${series.points.length} points`)
    const ys = series.points.map((p) => p[1])
    const expect = await ok(kernel, 'float((np.sin(x) * x).max()), float((np.sin(x) * x).min())')
    assert.equal(`(${Math.max(...ys)}, ${Math.min(...ys)})`, expect.result['text/plain'])
    t.diagnostic(`chart of a 10k-point figure: ${result.result['text/plain']} ms (best of 20, in the kernel)`)
  })

  await t.test('typed arrays of every dtype plotly writes are decoded', async () => {
    const c = await chart(kernel, [
      'fig = go.Figure([',
      "    go.Scatter(x=np.array([0, 1, 2], dtype='int8'), y=np.array([-1, 300, 70000], dtype='int32'), name='i'),",
      "    go.Scatter(x=np.array([0, 1, 2], dtype='uint16'), y=np.array([0.5, 1.5, 2.5], dtype='float32'), name='f'),",
      "    go.Scatter(x=np.array([0, 1, 2], dtype='uint8'), y=np.array([-200, 2, 3], dtype='int16'), name='s'),",
      "    go.Scatter(x=np.array([0, 1, 2], dtype='uint32'), y=np.array([0.25, 2.0, np.nan]), name='d')])",
      'fig',
    ].join('\n'))
    assert.deepEqual(c.elements.map((e) => e.points), [
      [[0, -1], [1, 300], [2, 70000]],
      [[0, 0.5], [1, 1.5], [2, 2.5]],
      [[0, -200], [1, 2], [2, 3]],
      [[0, 0.25], [1, 2], [2, null]],
    ])
    const raw = await ok(kernel, 'import plotly.io as pio, json\njson.loads(pio.to_json(fig))["data"][0]["y"]["dtype"]')
    assert.equal(raw.result['text/plain'], "'i4'", 'plotly writes typed arrays (the case decoded here)')
  })

  await t.test('altair bar, line, point and arc charts', async () => {
    await ok(kernel, "df = pd.DataFrame({'k': ['x', 'y', 'z', 'x'], 'v': [1, 2, 3, 4], 'd': pd.date_range('2023-09-01', periods=4), 'c': ['u', 'w', 'u', 'w']})")
    const bar = await chart(kernel, "alt.Chart(df).mark_bar().encode(x='k', y='sum(v)').properties(title='Totals')")
    assert.deepEqual(pick(bar, ['type', 'source', 'mark', 'title', 'x_label', 'x_scale', 'y_label', 'y_scale', 'orientation', 'stacked']), {
      type: 'bar', source: 'vega-lite', mark: 'bar', title: 'Totals', x_label: 'k', x_scale: 'categorical',
      y_label: 'Sum of v', y_scale: 'linear', orientation: 'vertical', stacked: false,
    })
    assert.deepEqual(bar.encoding.y, { aggregate: 'sum', field: 'v', type: 'quantitative' })
    assert.deepEqual(bar.elements, [
      { label: 'x', group: 'Group 1', value: 5 }, { label: 'y', group: 'Group 1', value: 2 }, { label: 'z', group: 'Group 1', value: 3 },
    ])
    const line = await chart(kernel, "alt.Chart(df).mark_line().encode(x='d:T', y='v:Q', color='c:N')")
    assert.deepEqual(pick(line, ['type', 'x_scale', 'legend']), { type: 'line', x_scale: 'datetime', legend: ['u', 'w'] })
    assert.deepEqual(line.elements.map((e) => [e.label, e.points]), [
      ['u', [['2023-09-01T00:00:00', 1], ['2023-09-03T00:00:00', 3]]],
      ['w', [['2023-09-02T00:00:00', 2], ['2023-09-04T00:00:00', 4]]],
    ])
    const point = await chart(kernel, "alt.Chart(df).mark_point().encode(x='v', y='v')")
    assert.deepEqual([point.type, point.elements[0].count], ['scatter', 4])
    const arc = await chart(kernel, "alt.Chart(df).mark_arc().encode(theta='v', color='k')")
    assert.deepEqual(arc.elements.map((e) => [e.label, e.value, e.angle]), [['x', 5, 180], ['y', 2, 72], ['z', 3, 108]])
  })

  await t.test('altair layers are mixed, concatenations a superchart', async () => {
    const layered = await chart(kernel, [
      "bars = alt.Chart(df).mark_bar().encode(x='k', y='v')",
      "rule = alt.Chart(pd.DataFrame({'m': [2.5]})).mark_rule().encode(y='m')",
      "points = alt.Chart(df).mark_point().encode(x='k', y='v')",
      'bars + points + rule',
    ].join('\n'))
    assert.equal(layered.type, 'mixed')
    assert.deepEqual(layered.elements.map((e) => [e.type, e.mark]), [['bar', 'bar'], ['scatter', 'point']])
    assert.deepEqual(layered.reference_lines, [{ orientation: 'horizontal', value: 2.5, label: null }])
    assert.equal(layered.x_label, 'k')
    const concat = await chart(kernel, "(bars | alt.Chart(df).mark_line().encode(x='v', y='v')).properties(title='Both')")
    assert.deepEqual([concat.type, concat.title, concat.elements.map((e) => e.type)], ['superchart', 'Both', ['bar', 'line']])
    const facet = await chart(kernel, "bars.facet('c')")
    assert.deepEqual(pick(facet, ['type', 'mark', 'source']), { type: 'unknown', mark: null, source: 'vega-lite' })
  })

  await t.test('a raw Vega-Lite bundle with inline values', async () => {
    const c = await chart(kernel, `display({'application/vnd.vegalite.v5+json': {
      'data': {'values': [{'a': 'A', 'b': 28}, {'a': 'B', 'b': 55}]},
      'mark': {'type': 'bar'}, 'title': {'text': 'Raw'},
      'encoding': {'x': {'field': 'a', 'type': 'ordinal'}, 'y': {'field': 'b', 'type': 'quantitative', 'title': 'Weight (kg)'}}},
      'text/plain': 'a chart'}, raw=True)`)
    assert.deepEqual(pick(c, ['type', 'title', 'y_label', 'y_unit', 'y_limits']), { type: 'bar', title: 'Raw', y_label: 'Weight (kg)', y_unit: 'kg', y_limits: [0, 55] })
    assert.deepEqual(c.elements.map((e) => [e.label, e.value]), [['A', 28], ['B', 55]])
  })

  await t.test('a label that starts like a date is a category; numbers at the edge of the float range give no infinity', async () => {
    const labels = await chart(kernel, "go.Figure(go.Bar(x=['2023-01-01 launch', '2023-02-01 review'], y=[1, 2]))")
    assert.notEqual(labels.x_scale, 'datetime')
    assert.deepEqual(labels.elements.map((e) => e.label), ['2023-01-01 launch', '2023-02-01 review'])
    const box = await chart(kernel, 'go.Figure(go.Box(y=[-1.7e308, 1.7e308], name="edge"))')
    const [element] = box.elements
    // interpolated without b - a, which overflows: finite quartiles, a median of 0
    assert.equal(element.median, 0)
    for (const q of [element.first_quartile, -element.third_quartile]) assert.ok(Math.abs(q + 0.85e308) < 1e294, String(q))
    assert.deepEqual([element.min, element.max], [-1.7e308, 1.7e308])
  })

  await t.test('malformed plotly and Vega-Lite bundles give no chart and never fail the cell', async () => {
    const malformed = [
      "{'data': 'nope', 'layout': 3}",
      "{'layout': {}}",
      "{'data': [1, None, {'type': 'bar', 'x': {'dtype': 'f8', 'bdata': '!!'}, 'y': 5}], 'layout': []}",
      "{'data': [{'type': 'scatter', 'x': {'dtype': 'zz', 'bdata': 'AA=='}}]}",
    ]
    for (const figure of malformed) {
      const result = await ok(kernel, `display({'application/vnd.plotly.v1+json': ${figure}, 'text/plain': 'f'}, raw=True)`)
      assert.equal(result.displays.length, 1)
      assert.equal(result.displays[0][CHART], undefined, figure)
    }
    for (const spec of ["{'data': 'x'}", "{'layer': 3}", '[1, 2]', "'spec'"]) {
      const result = await ok(kernel, `display({'application/vnd.vegalite.v4+json': ${spec}, 'text/plain': 's'}, raw=True)`)
      assert.equal(result.displays.length, 1)
      assert.equal(result.displays[0][CHART], undefined, spec)
    }
    const odd = await ok(kernel, "display({'application/vnd.plotly.v1+json': {'data': [{'type': 'bar', 'x': 'ab', 'y': {'no': 1}, 'error_y': 7}]}}, raw=True)")
    assert.equal(odd.displays.length, 1, 'the bundle is still shown')
  })
})
