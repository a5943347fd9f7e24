'use strict'
// The kernel as a notebook to the code it runs (docs/python.md#display-in-the-kernel):
// libraries that look for Jupyter find it, and IPython's display functions and objects
// show as they do in Jupyter. Expected texts were measured beside ipykernel on the same
// interpreter. The test venv has IPython; "without IPython" kernels block its import
// before anything runs.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startKernel, run, ok, value } = require('../helpers/kernel')

const displays = (events) => events.filter((e) => e.type === 'display')
const stdout = (events) => events.filter((e) => e.type === 'stdout').map((e) => e.text).join('')
const BLOCK_IPYTHON = "import sys\nsys.modules['IPython'] = None"

// A 1x1 red PNG.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC'

// What Jupyter shows as the text/plain of a frame of 12 columns and 3 rows: every column,
// wrapped at 80 characters (pandas' notebook defaults: max_columns 20, width 80).
const WIDE_FRAME =
  '   column_0  column_1  column_2  column_3  column_4  column_5  column_6  \\\n' +
  '0         0         0         0         0         0         0         0   \n' +
  '1         1         1         1         1         1         1         1   \n' +
  '2         2         2         2         2         2         2         2   \n' +
  '\n' +
  '   column_7  column_8  column_9  column_10  column_11  \n' +
  '0         0         0         0          0          0  \n' +
  '1         1         1         1          1          1  \n' +
  '2         2         2         2          2          2  '
const WIDE_CELL = 'import pandas as pd\npd.DataFrame({f"column_{i}": range(3) for i in range(12)})'

for (const ipython of [true, false]) {
  const where = ipython ? 'with IPython' : 'without IPython'

  test(`${where}: pandas sees a notebook`, async (t) => {
    const kernel = await startKernel()
    t.after(() => kernel.shutdown())
    if (!ipython) await ok(kernel, BLOCK_IPYTHON)
    const { result } = await ok(kernel, WIDE_CELL)
    assert.equal(result.result['text/plain'], WIDE_FRAME)
    assert.equal(await value(kernel, "pd.get_option('display.max_columns')"), '20')
  })

  test(`${where}: plotly's fig.show() displays the figure's bundle`, async (t) => {
    const kernel = await startKernel()
    t.after(() => kernel.shutdown())
    if (!ipython) await ok(kernel, BLOCK_IPYTHON)
    const { events } = await ok(kernel, 'import plotly.graph_objects as go\ngo.Figure(go.Bar(y=[3, 1, 2])).show()')
    const ds = displays(events)
    assert.equal(ds.length, 1, JSON.stringify(events).slice(0, 500))
    assert.deepEqual(ds[0].bundle['application/vnd.plotly.v1+json'].data[0].y, [3, 1, 2])
    assert.match(ds[0].bundle['text/plain'], /^Figure\(/)
    assert.equal(ds[0].bundle['text/html'], undefined, "ipykernel's renderer: no HTML with plotly.js")
    assert.equal(await value(kernel, 'import plotly.io as pio; pio.renderers.default'), "'plotly_mimetype'")
  })

  test(`${where}: rich writes to the notebook, and its output arrives`, async (t) => {
    const kernel = await startKernel()
    t.after(() => kernel.shutdown())
    if (!ipython) await ok(kernel, BLOCK_IPYTHON)
    const { events } = await ok(kernel, 'from rich import print as rprint\nrprint("[bold]hi[/bold] there")')
    const ds = displays(events)
    assert.equal(ds.length, 1, JSON.stringify(events))
    assert.match(ds[0].bundle['text/html'], /<span style="font-weight: bold">hi<\/span> there/)
    assert.match(ds[0].bundle['text/plain'], /hi.* there/)
  })

  test(`${where}: get_ipython() is the kernel's shell; its magics and shell commands run`, async (t) => {
    const kernel = await startKernel()
    t.after(() => kernel.shutdown())
    if (!ipython) await ok(kernel, BLOCK_IPYTHON)
    assert.equal(
      await value(kernel, "ip = get_ipython()\ntype(ip).__name__, hasattr(ip, 'kernel'), 'IPKernelApp' in ip.config"),
      "('ZMQInteractiveShell', True, True)",
    )
    assert.equal(await value(kernel, "import os\nget_ipython().run_line_magic('pwd', '') == os.getcwd()"), 'True')
    const { events } = await ok(kernel, "word = 'expanded'\nget_ipython().system('echo $word')")
    assert.equal(stdout(events), 'expanded\n')
    assert.equal(await value(kernel, "get_ipython().getoutput('echo a; echo b')"), "['a', 'b']")
    const cell = await ok(kernel, "get_ipython().run_cell_magic('bash', '', 'echo from bash')")
    assert.equal(stdout(cell.events), 'from bash\n')
    assert.equal(await value(kernel, "get_ipython().user_ns is globals()"), 'True')
  })

  test(`${where}: tqdm.auto writes its text bar`, async (t) => {
    const kernel = await startKernel()
    t.after(() => kernel.shutdown())
    if (!ipython) await ok(kernel, BLOCK_IPYTHON)
    // IPython imported first, as notebook code does: tqdm looks at it
    const code = `${ipython ? 'import IPython.display\n' : ''}from tqdm.auto import tqdm\nfor i in tqdm(range(3)): pass`
    const { events } = await ok(kernel, code)
    const stderr = events.filter((e) => e.type === 'stderr').map((e) => e.text).join('')
    assert.match(stderr, /100%\|█+\| 3\/3/)
    // Not the notebook bar, which needs ipywidgets: Jupyter warns, then writes the text bar.
    assert.doesNotMatch(stderr, /TqdmWarning/)
    assert.equal(displays(events).length, 0)
  })
}

test('with IPython: its display functions and objects show as in Jupyter', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())

  await t.test('display(HTML(...)) is a text/html display, not a printed placeholder', async () => {
    const { events } = await ok(kernel, 'from IPython.display import display, HTML\ndisplay(HTML("<b>x</b>"))')
    assert.equal(stdout(events), '')
    // The placeholder text/plain (<IPython.core.display.HTML object>) is left out, so a host
    // that prefers plain text shows the HTML.
    assert.deepEqual(displays(events).map((e) => e.bundle), [{ 'text/html': '<b>x</b>' }])
  })

  await t.test('Markdown, JSON, Latex, SVG, Javascript and Pretty give their MIME types', async () => {
    const { events } = await ok(
      kernel,
      [
        'from IPython.display import Markdown, JSON, Latex, SVG, Javascript, Pretty',
        'display(Markdown("# T"), JSON({"a": [1, 2]}), Latex(r"$x^2$"))',
        'display(SVG(\'<svg xmlns="http://www.w3.org/2000/svg"/>\'), Javascript("1"), Pretty("pretty text"))',
      ].join('\n'),
    )
    const bundles = displays(events).map((e) => e.bundle)
    assert.deepEqual(bundles[0], { 'text/markdown': '# T' })
    assert.deepEqual(bundles[1]['application/json'], { a: [1, 2] })
    assert.equal(bundles[2]['text/latex'], '$x^2$')
    assert.match(bundles[3]['image/svg+xml'], /^<svg/)
    assert.equal(bundles[4]['application/javascript'], '1')
    assert.deepEqual(bundles[5], { 'text/plain': 'pretty text' })
  })

  await t.test('Image(filename=...) and Image(data=...) give image/png; as a result too', async () => {
    const { result, events } = await ok(
      kernel,
      [
        'import base64, os, tempfile',
        'from IPython.display import Image',
        `png = base64.b64decode('${PNG}')`,
        "path = os.path.join(tempfile.mkdtemp(), 'red.png')",
        "open(path, 'wb').write(png)",
        'display(Image(filename=path), Image(data=png, width=10))',
        'Image(data=png)',
      ].join('\n'),
    )
    assert.deepEqual(
      displays(events).map((e) => e.bundle['image/png']),
      [PNG, PNG],
    )
    assert.equal(result.result['image/png'], PNG)
  })

  await t.test('clear_output(wait=True) is a clear event, not an ANSI clear', async () => {
    const { events } = await ok(kernel, "from IPython.display import clear_output\nprint('a')\nclear_output(wait=True)\nprint('b')")
    assert.deepEqual(
      events.filter((e) => e.type !== 'started').map((e) => (e.type === 'stdout' ? e.text : e)),
      ['a\n', { type: 'clear', wait: true }, 'b\n'],
    )
  })

  await t.test('display ids: the handle and update_display update the display', async () => {
    const { events } = await ok(
      kernel,
      [
        'from IPython.display import display, update_display, HTML, DisplayHandle',
        "h = display(HTML('one'), display_id=True)",
        "h.update(HTML('two'))",
        "update_display(HTML('three'), display_id=h.display_id)",
        'isinstance(h, DisplayHandle)',
      ].join('\n'),
    )
    const ds = displays(events)
    assert.equal(ds.length, 3)
    assert.match(ds[0].displayId, /^[0-9a-f]{32}$/)
    assert.deepEqual(
      ds.map((d) => [d.bundle['text/html'], d.displayId === ds[0].displayId, Boolean(d.update)]),
      [['one', true, false], ['two', true, true], ['three', true, true]],
    )
  })

  await t.test("printers registered with the shell's display_formatter make the bundle", async () => {
    const code = [
      'class Money:',
      '    def __init__(self, cents): self.cents = cents',
      'formatters = get_ipython().display_formatter.formatters',
      "formatters['text/plain'].for_type(Money, lambda m, p, cycle: p.text('$%.2f' % (m.cents / 100)))",
      "formatters['text/html'].for_type_by_name('__main__', 'Money', lambda m: '<b>%d</b>' % m.cents)",
      '[Money(150), Money(5)]',
    ].join('\n')
    assert.equal(await value(kernel, code), '[$1.50, $0.05]')
    const { result } = await ok(kernel, 'Money(7)')
    assert.deepEqual(result.result, { 'text/html': '<b>7</b>', 'text/plain': '$0.07' })
    // pandas' table schema option puts a formatter of IPython's own in place.
    const frame = await ok(kernel, "import pandas as pd\npd.set_option('display.html.table_schema', True)\npd.DataFrame({'a': [1]})")
    assert.deepEqual(frame.result.result['application/vnd.dataresource+json'].data, [{ index: 0, a: 1 }])
  })

  await t.test('IPython.get_ipython() is the same shell as the builtin', async () => {
    assert.equal(await value(kernel, 'import IPython\nIPython.get_ipython() is get_ipython()'), 'True')
  })
})

test('without IPython: importing it fails as it would anywhere', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await ok(kernel, BLOCK_IPYTHON)
  const { result } = await run(kernel, 'from IPython.display import HTML')
  assert.equal(result.status, 'error')
  assert.equal(result.error.ename, 'ModuleNotFoundError')
  // The prelude's display is still there, and shows objects with reprs of their own.
  const { events } = await ok(kernel, "class Page:\n    def _repr_html_(self): return '<i>p</i>'\ndisplay(Page())")
  assert.deepEqual(displays(events).map((e) => e.bundle), [{ 'text/html': '<i>p</i>' }])
})

test('a bare kernel imports nothing for this: get_ipython is a builtin, its module loads when called', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  // A str result: its text is made without the display module.
  const loaded = "import sys\n' '.join(m for m in ('pykernel_runner.ipython', 'pykernel_runner.pretty', 'IPython') if m in sys.modules)"
  assert.equal(await value(kernel, loaded), "''")
  assert.equal(await value(kernel, 'get_ipython.__name__'), "'get_ipython'")
  assert.equal(await value(kernel, loaded), "''")
  await ok(kernel, 'get_ipython();')
  assert.equal(await value(kernel, loaded), "'pykernel_runner.ipython'")
})
