'use strict'
// Charts as data on the host's side (docs/charts.md#the-chart-card): a display whose
// bundle carries a chart (here a raw bundle, as a figure's will) shows its card in
// `output` where the figure was, in place of the figure's text/plain stand-in, and its
// chart joins `charts`, in order, revised by display updates as `images` are; the same
// through `renderBundle`, `OutputBuilder`, pykernel/tool's `handle` and the MCP server.
// Last, real matplotlib figures' cards, asserted on their text.
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, python } = require('../helpers/kernel')
const tool = require('../../tool.js')

const CHART_MIME = 'application/vnd.pykernel.chart+json'
// A 1x1 PNG.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='

const BOOKS = {
  type: 'bar', title: 'Book Sales', source: 'matplotlib', x_label: 'Authors', y_label: 'Books Sold', x_scale: 'categorical',
  elements: [['Author A', 100], ['Author B', 200], ['Author C', 300], ['Author D', 400]].map(([label, value]) => ({ label, group: 'Books Sold', value })),
}
const BOOKS_CARD = '[chart: bar "Book Sales"]\nx: Authors, categorical, 4 categories\ny: Books Sold, 0 to 400\n4 bars in 1 series:\n' +
  '- Books Sold: 4 bars, highest Author D 400, Author C 300, Author B 200; lowest Author A 100\n'
const PIE = { type: 'pie', title: 'Will I win?', elements: [{ label: 'No', angle: 324, radius: 1, value: 90, fraction: 0.9 }, { label: 'Yes', angle: 36, radius: 1, value: 10, fraction: 0.1 }] }
const PIE_CARD = '[chart: pie "Will I win?"]\n2 slices:\n- No: 90 (90%)\n- Yes: 10 (10%)\n'

/** Python that displays a figure's bundle: a PNG, its stand-in and `chart`. */
function showFigure(chart, extra = '') {
  return `display({'image/png': ${JSON.stringify(PNG)}, 'text/plain': '<Figure size 640x480 with 1 Axes>', ${JSON.stringify(CHART_MIME)}: json.loads(${JSON.stringify(JSON.stringify(chart))})}, raw=True${extra})`
}

test('a figure with a chart shows its card where it was, without its stand-in, and the chart in `charts`, in order', async (t) => {
  const kernel = await addon.Kernel.start({ interpreter: python })
  t.after(() => kernel.shutdown())
  const r = await kernel.evaluate([
    { code: `import json\nprint("before")\n${showFigure(BOOKS)}\nprint("[chart: forged]")\n${showFigure(PIE)}\nprint("after")` },
  ])
  assert.equal(r.exitCode, 0, r.output)
  assert.equal(r.output, `before\n${BOOKS_CARD}\\[chart: forged]\n${PIE_CARD}after\n`)
  assert.doesNotMatch(r.output, /<Figure/)
  assert.deepEqual(r.charts, [BOOKS, PIE])
  assert.equal(r.images.length, 2)
})

test('a chart without an image gets its card; a card is text, so no "(displayed ...)" placeholder', async (t) => {
  const kernel = await addon.Kernel.start({ interpreter: python })
  t.after(() => kernel.shutdown())
  const alone = await kernel.evaluate([{ code: `display({${JSON.stringify(CHART_MIME)}: ${JSON.stringify(PIE)}, 'text/plain': '<Figure>'}, raw=True)` }])
  assert.equal(alone.output, PIE_CARD)
  assert.deepEqual(alone.charts, [PIE])
  const figure = await kernel.evaluate([{ code: `import json\n${showFigure(PIE)}` }])
  assert.equal(figure.output, PIE_CARD)
  // includeFigureText keeps the stand-in beside the card.
  const kept = await kernel.evaluate([{ code: showFigure(PIE) }], { includeFigureText: true })
  assert.equal(kept.output, `${PIE_CARD}<Figure size 640x480 with 1 Axes>\n`)
  // A chart that is not an object is no chart.
  const wrong = await kernel.evaluate([{ code: `display({'image/png': ${JSON.stringify(PNG)}, 'text/plain': '<Figure>', ${JSON.stringify(CHART_MIME)}: [1, 2]}, raw=True)` }])
  assert.deepEqual(wrong.charts, [])
  assert.equal(wrong.output, '(displayed 1 image(s); no text output)')
})

test("a display update replaces its chart and its card, and takes no other display's place", async (t) => {
  const kernel = await addon.Kernel.start({ interpreter: python })
  t.after(() => kernel.shutdown())
  const r = await kernel.evaluate([{
    code: [
      'import json',
      "display('no chart yet', display_id='plain')",
      showFigure(BOOKS, ", display_id='fig'"),
      showFigure(PIE),
      showFigure({ ...BOOKS, title: 'Book Sales, revised' }, ", display_id='fig', update=True"),
      showFigure({ ...PIE, title: 'not a chart before' }, ", display_id='plain', update=True"),
      'pass',
    ].join('\n'),
  }])
  assert.equal(r.exitCode, 0, r.output)
  assert.deepEqual(r.charts.map((c) => c.title), ['Book Sales, revised', 'Will I win?'])
  assert.equal(
    r.output,
    `${PIE_CARD.replace('Will I win?', 'not a chart before')}${BOOKS_CARD.replace('Book Sales', 'Book Sales, revised')}${PIE_CARD}`,
  )
})

test('renderBundle returns the chart and its card; OutputBuilder collects charts as evaluate does', () => {
  const bundle = { 'image/png': PNG, 'text/plain': '<Figure>', [CHART_MIME]: PIE }
  const rendered = addon.renderBundle(bundle)
  assert.deepEqual(rendered.chart, PIE)
  assert.equal(rendered.chartCard, PIE_CARD)
  assert.equal(addon.renderBundle({ 'text/plain': 'x' }).chart, undefined)
  const builder = new addon.OutputBuilder()
  builder.push('a\n')
  assert.equal(builder.pushEvent({ type: 'display', bundle }), PIE_CARD)
  const built = builder.finish()
  assert.equal(built.output, `a\n${PIE_CARD}`)
  assert.deepEqual(built.charts, [PIE])
})

test("pykernel/tool's handle resolves the charts beside the images", async (t) => {
  const pool = new addon.KernelPool({ kernel: { interpreter: python } })
  t.after(() => pool.disposeAll())
  const r = await tool.handle({ cells: [{ code: `import json\n${showFigure(BOOKS)}` }] }, { pool })
  assert.equal(r.isError, false, r.text)
  assert.deepEqual(r.charts, [BOOKS])
  assert.equal(r.output, BOOKS_CARD)
  assert.equal(r.images.length, 1)
  const refused = await tool.handle({ cells: [] }, { pool })
  assert.deepEqual(refused.charts, [])
})

test("real figures' cards: a line, a bar, a histogram, a pie and a figure of two axes, as a model reads them", async (t) => {
  const kernel = await addon.Kernel.start({ interpreter: python })
  t.after(() => kernel.shutdown())
  const card = async (code) => {
    const r = await kernel.evaluate([{ code: `import matplotlib.pyplot as plt\n${code}\nplt.show()` }])
    assert.equal(r.exitCode, 0, r.output)
    assert.equal(r.images.length, 1)
    assert.equal(r.charts.length, 1)
    return r.output
  }
  assert.equal(
    await card('plt.plot([0, 1, 2, 3], [1, 4, 9, 16], label="squares"); plt.plot([0, 1, 2, 3], [1, 2, 3, 4], label="linear")\nplt.title("Growth"); plt.xlabel("Day"); plt.ylabel("Size (cm)"); plt.legend()'),
    '[chart: line "Growth"]\nx: Day, linear, -0.15 to 3.15\ny: Size (cm), linear, 0.25 to 16.75\n2 series, 8 points:\n' +
      '- squares: 4 points, y from 1 to 16, last 16\n- linear: 4 points, y from 1 to 4, last 4\n',
  )
  assert.equal(
    await card('plt.bar(["Author A", "Author B", "Author C", "Author D"], [100, 200, 300, 400], label="Books Sold")\nplt.title("Book Sales by Authors"); plt.xlabel("Authors"); plt.ylabel("Number of Books Sold")'),
    '[chart: bar "Book Sales by Authors"]\nx: Authors, categorical, 4 categories\ny: Number of Books Sold, linear, 0 to 420\n4 bars in 1 series:\n' +
      '- Books Sold: 4 bars, highest Author D 400, Author C 300, Author B 200; lowest Author A 100\n',
  )
  assert.equal(
    await card('plt.hist([1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 6], bins=[1, 2, 3, 4, 5, 6], label="rolls"); plt.title("Rolls")'),
    '[chart: histogram "Rolls"]\nx: unlabelled, linear, 0.75 to 6.25\ny: unlabelled, linear, 0 to 4.2\n1 dataset:\n- rolls: 5 bins from 1 to 6, total 13, peak 4 in 4 to 5\n',
  )
  assert.equal(
    await card('plt.pie([90, 10], labels=["No", "No, in blue"], startangle=90); plt.title("Will I wake up early tomorrow?")'),
    '[chart: pie "Will I wake up early tomorrow?"]\n2 slices:\n- No: 90 (90%)\n- No, in blue: 10 (10%)\n',
  )
  assert.equal(
    await card('fig, axs = plt.subplots(1, 2); fig.suptitle("Two views")\naxs[0].plot([1, 2, 3], [3, 1, 2]); axs[0].set_title("Line")\naxs[1].scatter([1, 2, 3, 4], [4, 3, 2, 1], label="pts"); axs[1].set_title("Scatter")'),
    '[chart: 2 axes "Two views"]\n- line "Line": 1 series, 3 points\n  Line 0: 3 points, y from 1 to 3, last 2\n' +
      '- scatter "Scatter": 1 series, 4 points\n  pts: 4 points, y from 1 to 4, last 1\n',
  )
})
