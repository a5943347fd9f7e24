'use strict'
// Rich display (docs/python.md#display-in-the-kernel) with the real libraries of the test venv:
// matplotlib, pandas, pillow and plotly. A missing library fails its test; nothing here is
// skipped.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startKernel, run } = require('../helpers/kernel')

const displays = (events) => events.filter((e) => e.type === 'display')
const withMime = (events, mime) => displays(events).filter((e) => mime in e.bundle)

/** Width and height from the IHDR chunk of a base64 PNG (and that it is one). */
function pngSize(base64) {
  const bytes = Buffer.from(base64, 'base64')
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature')
  assert.equal(bytes.subarray(12, 16).toString('ascii'), 'IHDR')
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) }
}

async function ok(kernel, code) {
  const out = await run(kernel, code)
  assert.equal(out.result.status, 'ok', JSON.stringify(out.result.error))
  return out
}

test('rich display', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())

  await t.test('display of a plain value does not import matplotlib or the display module', async () => {
    const { events } = await ok(kernel, 'display(1)\nimport sys')
    assert.deepEqual(displays(events)[0].bundle, { 'text/plain': '1' })
    const { result } = await ok(kernel, "'matplotlib' in sys.modules, 'pykernel_runner.display' in sys.modules")
    assert.equal(result.result['text/plain'], '(False, False)')
  })

  await t.test('a dict goes through the display module, still without matplotlib', async () => {
    const { events } = await ok(kernel, "display({'a': 1})")
    assert.deepEqual(displays(events)[0].bundle, { 'text/plain': "{'a': 1}" })
    const { result } = await ok(kernel, "'matplotlib' in sys.modules, 'pykernel_runner.display' in sys.modules")
    assert.equal(result.result['text/plain'], '(False, True)')
  })

  await t.test('a PIL image is exactly one PNG of the right size', async () => {
    const { events } = await ok(kernel, "from PIL import Image\ndisplay(Image.new('RGB', (37, 21), 'red'))")
    assert.equal(displays(events).length, 1)
    const pngs = withMime(events, 'image/png')
    assert.equal(pngs.length, 1)
    assert.deepEqual(pngSize(pngs[0].bundle['image/png']), { width: 37, height: 21 })
    assert.equal(pngs[0].bundle['image/jpeg'], undefined, 'one raster image per bundle')
    assert.match(pngs[0].bundle['text/plain'], /PIL\.Image\.Image image mode=RGB size=37x21/)
  })

  await t.test('a PIL image as the result of a cell carries the PNG', async () => {
    const { result } = await ok(kernel, "Image.new('RGBA', (5, 9))")
    assert.deepEqual(pngSize(result.result['image/png']), { width: 5, height: 9 })
  })

  await t.test('a pandas DataFrame gives text/html and text/plain', async () => {
    const { events } = await ok(kernel, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\ndisplay(df)")
    const [d] = displays(events)
    assert.match(d.bundle['text/html'], /<table[\s\S]*<th>a<\/th>[\s\S]*<td>x<\/td>/)
    assert.match(d.bundle['text/plain'], /a\s+b\n0\s+1\s+x\n1\s+2\s+y/)
    assert.equal(d.bundle['text/latex'], undefined, 'a _repr_latex_ returning None is skipped')
    const { result } = await ok(kernel, 'df')
    assert.ok(result.result['text/html'])
  })

  await t.test('a plotly figure gives its bundle', async () => {
    const { events } = await ok(
      kernel,
      'import plotly.graph_objects as go\ndisplay(go.Figure(go.Scatter(x=[1, 2, 3], y=[4, 1, 2])))',
    )
    const ds = displays(events)
    assert.equal(ds.length, 1)
    const b = ds[0].bundle
    // The default renderer is ipykernel's plotly_mimetype (docs/python.md): the figure as JSON.
    const plotlyJson = b['application/vnd.plotly.v1+json']
    assert.ok(plotlyJson, `plotly bundle: ${Object.keys(b)}`)
    assert.deepEqual(plotlyJson.data[0].y, [4, 1, 2])
    assert.equal(plotlyJson.data[0].type, 'scatter')
    assert.match(b['text/plain'], /^Figure\(/)
  })

  await t.test('plt.plot with no show gives exactly one PNG after the cell', async () => {
    const { events } = await ok(kernel, 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nprint("drawn")')
    const pngs = withMime(events, 'image/png')
    assert.equal(pngs.length, 1)
    assert.match(pngs[0].bundle['text/plain'], /^<Figure size \d+x\d+ with 1 Axes>$/)
    const { width, height } = pngSize(pngs[0].bundle['image/png'])
    assert.ok(width > 100 && height > 100)
    assert.equal(events.at(-1).type, 'display', 'the figure comes after what the cell printed')
    const { result } = await ok(kernel, 'plt.get_fignums()')
    assert.equal(result.result['text/plain'], '[]', 'the figure was closed')
  })

  await t.test('a figure is rendered at its own dpi, whatever savefig.dpi says (as in Jupyter)', async () => {
    const size = async (setup) => {
      const { events } = await ok(kernel, `import matplotlib.pyplot as plt\n${setup}\nfig = plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2])`)
      return pngSize(withMime(events, 'image/png')[0].bundle['image/png'])
    }
    const plain = await size('plt.rcParams["savefig.dpi"] = "figure"')
    const dpi200 = await size('plt.rcParams["savefig.dpi"] = 200')
    await ok(kernel, 'plt.rcParams["savefig.dpi"] = "figure"')
    assert.ok(plain.width <= 200 && plain.height <= 150, `a 4x3 inch figure at 50 dpi: ${JSON.stringify(plain)}`)
    assert.deepEqual(dpi200, plain, 'savefig.dpi 200 changed the PNG')
  })

  await t.test('display(fig) then the end of the cell still gives one PNG', async () => {
    const { events } = await ok(kernel, 'fig, ax = plt.subplots()\nax.plot([1, 2])\ndisplay(fig)\nprint("after")')
    assert.equal(withMime(events, 'image/png').length, 1)
    assert.deepEqual(
      events.map((e) => e.type),
      ['display', 'stdout'],
    )
  })

  await t.test('a figure as the cell result is not sent again', async () => {
    const { result, events } = await ok(kernel, 'fig, ax = plt.subplots()\nax.plot([1, 2])\nfig')
    assert.ok(result.result['image/png'])
    assert.equal(withMime(events, 'image/png').length, 0)
  })

  await t.test('plt.show() displays once, where it is called', async () => {
    const { events } = await ok(kernel, 'plt.plot([1, 2])\nplt.show()\nprint("after show")')
    assert.equal(withMime(events, 'image/png').length, 1)
    assert.deepEqual(
      events.map((e) => e.type),
      ['display', 'stdout'],
    )
    assert.equal(events.filter((e) => e.type === 'stderr').length, 0, 'no non-interactive warning')
  })

  await t.test('two figures give two PNGs; an empty figure gives none', async () => {
    const { events } = await ok(kernel, 'plt.figure(); plt.plot([1])\nplt.figure(); plt.plot([2])\nplt.figure()')
    assert.equal(withMime(events, 'image/png').length, 2)
  })

  await t.test('a figure left by a failing cell is still shown', async () => {
    const { result, events } = await run(kernel, 'plt.plot([1, 2])\n1/0')
    assert.equal(result.status, 'error')
    assert.equal(withMime(events, 'image/png').length, 1)
  })

  await t.test('from matplotlib.pyplot import show gets the inline show', async () => {
    const { events } = await ok(kernel, 'from matplotlib.pyplot import show\nplt.plot([3])\nshow()')
    assert.equal(withMime(events, 'image/png').length, 1)
  })

  await t.test('a pyplot imported again (evicted from sys.modules) gets the inline show after a cell', async () => {
    await ok(kernel, "import sys\ndel sys.modules['matplotlib.pyplot']\nimport matplotlib.pyplot as plt")
    const { events } = await ok(kernel, 'plt.plot([1, 2])\nplt.show()\nprint("after")')
    assert.deepEqual(
      events.map((e) => e.type),
      ['display', 'stdout'],
    )
  })

  await t.test('display ids: an update event with the id and update: true', async () => {
    const { events } = await ok(kernel, "display('x', display_id='p')\nupdate_display('y', display_id='p')")
    const ds = displays(events)
    assert.equal(ds.length, 2)
    assert.equal(ds[0].displayId, 'p')
    assert.equal(ds[0].update, undefined)
    assert.deepEqual(ds[1], { type: 'display', bundle: { 'text/plain': "'y'" }, displayId: 'p', update: true })
  })

  await t.test('display_id=True makes up an id; the handle updates it', async () => {
    const { events } = await ok(kernel, "h = display(1, display_id=True)\nh.update(2)")
    const ds = displays(events)
    assert.equal(ds.length, 2)
    assert.match(ds[0].displayId, /^[0-9a-f]{32}$/)
    assert.equal(ds[1].displayId, ds[0].displayId)
    assert.equal(ds[1].update, true)
  })

  await t.test('clear_output gives a clear event', async () => {
    const { events } = await ok(kernel, 'print("a")\nclear_output()\nclear_output(wait=True)')
    assert.deepEqual(
      events.filter((e) => e.type === 'clear'),
      [
        { type: 'clear', wait: false },
        { type: 'clear', wait: true },
      ],
    )
  })

  await t.test('raw bundles, include and exclude', async () => {
    const { events } = await ok(
      kernel,
      [
        "display({'text/markdown': '**b**', 'image/png': b'\\x89PNG\\r\\n\\x1a\\n'}, raw=True)",
        "display(df, include=['text/html'])",
        "display(df, exclude=['text/html'])",
      ].join('\n'),
    )
    const ds = displays(events)
    assert.equal(ds.length, 3)
    assert.deepEqual(ds[0].bundle, { 'text/markdown': '**b**', 'image/png': 'iVBORw0KGgo=' })
    assert.deepEqual(Object.keys(ds[1].bundle), ['text/html'])
    assert.deepEqual(Object.keys(ds[2].bundle), ['text/plain'])
  })

  await t.test('values JSON cannot hold and broken reprs never lose a frame', async () => {
    const code = `
class BadHtml:
    def _repr_html_(self):
        raise RuntimeError('no html')
    def __repr__(self):
        return 'BadHtml()'

class StrPng:
    def _repr_png_(self):
        return 'not an image'

class BadRepr:
    def __repr__(self):
        raise ValueError('nope')

class WrongTypes:
    def _repr_html_(self):
        return 42
    def _repr_json_(self):
        return {'n': float('nan'), 'inf': float('inf'), 'b': b'\\xff', 's': {1}, 'o': object()}
    def _repr_markdown_(self):
        return None

display({'a': float('nan')})
display(BadHtml())
display(StrPng())
display(BadRepr())
display(WrongTypes())
display(float('inf'), b'\\xff\\x00', {1, 2})
BadRepr()
`
    const { result, events } = await ok(kernel, code)
    const ds = displays(events)
    assert.equal(ds.length, 8, 'every display frame arrived')
    assert.deepEqual(ds[0].bundle, { 'text/plain': "{'a': nan}" })
    assert.deepEqual(ds[1].bundle, { 'text/plain': 'BadHtml()' })
    assert.deepEqual(Object.keys(ds[2].bundle), ['text/plain'])
    assert.deepEqual(ds[3].bundle, { 'text/plain': '<repr failed: ValueError: nope>' })
    const json = ds[4].bundle['application/json']
    assert.equal(json.n, null)
    assert.equal(json.inf, null)
    assert.equal(typeof json.b, 'string')
    assert.deepEqual(json.s, [1])
    assert.match(json.o, /object/)
    assert.equal(ds[4].bundle['text/html'], undefined)
    assert.equal(ds[4].bundle['text/markdown'], undefined)
    assert.equal(ds[5].bundle['text/plain'], 'inf')
    assert.equal(ds[6].bundle['text/plain'], "b'\\xff\\x00'")
    assert.equal(ds[7].bundle['text/plain'], '{1, 2}')
    assert.deepEqual(result.result, { 'text/plain': '<repr failed: ValueError: nope>' })
  })

  await t.test('markdown, JSON, SVG and LaTeX reprs', async () => {
    const code = `
class Rich:
    def _repr_markdown_(self):
        return '# Title'
    def _repr_json_(self):
        return {'k': [1, 2]}
    def _repr_svg_(self):
        return '<svg xmlns="http://www.w3.org/2000/svg"/>'
    def _repr_latex_(self):
        return r'$x^2$'
    def __repr__(self):
        return 'Rich()'

display(Rich())
`
    const { events } = await ok(kernel, code)
    assert.deepEqual(displays(events)[0].bundle, {
      'text/markdown': '# Title',
      'image/svg+xml': '<svg xmlns="http://www.w3.org/2000/svg"/>',
      'application/json': { k: [1, 2] },
      'text/latex': '$x^2$',
      'text/plain': 'Rich()',
    })
  })

  await t.test('_repr_mimebundle_: a dict, a (data, metadata) tuple, no include argument', async () => {
    const code = `
class WithBundle:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {'text/html': '<b>b</b>', 'application/vnd.custom+json': {'x': float('nan')}}
    def _repr_html_(self):
        return 'not used: the bundle gave text/html'

class WithTuple:
    def _repr_mimebundle_(self):
        return ({'text/plain': 'own plain', 'image/png': b'\\x89PNG\\r\\n\\x1a\\n'}, {'image/png': {'width': 1}})

class Raising:
    def _repr_mimebundle_(self, **kwargs):
        raise RuntimeError('x')
    def _repr_html_(self):
        return '<i>fallback</i>'
    def __repr__(self):
        return 'Raising()'

display(WithBundle(), WithTuple(), Raising())
`
    const { events } = await ok(kernel, code)
    const ds = displays(events)
    assert.equal(ds.length, 3)
    assert.equal(ds[0].bundle['text/html'], '<b>b</b>')
    assert.deepEqual(ds[0].bundle['application/vnd.custom+json'], { x: null })
    // Its repr only names it (`<__main__.WithBundle object at ...>`): beside HTML it is left out.
    assert.equal(ds[0].bundle['text/plain'], undefined)
    assert.deepEqual(ds[1].bundle, { 'text/plain': 'own plain', 'image/png': 'iVBORw0KGgo=' })
    assert.deepEqual(ds[2].bundle, { 'text/html': '<i>fallback</i>', 'text/plain': 'Raising()' })
  })

  await t.test('an object with _ipython_display_ displays itself, as in IPython', async () => {
    const code = [
      'class Widget:',
      '    def _ipython_display_(self):',
      "        display({'text/plain': 'drawn by itself'}, raw=True)",
      'class Broken(Widget):',
      '    def _ipython_display_(self):',
      "        raise RuntimeError('no')",
      '    def __repr__(self):',
      "        return 'Broken()'",
      'display(Widget(), Broken())',
    ].join('\n')
    const { events } = await ok(kernel, code)
    // A failing _ipython_display_ leaves the object to be displayed as any other.
    assert.deepEqual(displays(events).map((e) => e.bundle), [{ 'text/plain': 'drawn by itself' }, { 'text/plain': 'Broken()' }])
  })

  await t.test('_emit_status sends a status event', async () => {
    const { result, events } = await ok(kernel, "_emit_status('x', a=1)")
    assert.deepEqual(
      events.filter((e) => e.type === 'status'),
      [{ type: 'status', op: 'x', data: { a: 1 } }],
    )
    assert.equal(result.statuses.length, 1)
    assert.equal(displays(events).length, 0)
  })
})

test('a fresh kernel stays lean, and show works when pyplot comes first', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const { result } = await ok(kernel, "import sys\nsorted(m for m in ('matplotlib', 'pykernel_runner.display', 'binascii') if m in sys.modules)")
  assert.ok(!/matplotlib|pykernel_runner.display/.test(result.result['text/plain']))
  const { events } = await ok(kernel, "import matplotlib.pyplot as plt\nplt.plot([1])\nplt.show()")
  assert.equal(withMime(events, 'image/png').length, 1, 'show works when pyplot is the first rich thing')
})
