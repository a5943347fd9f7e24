'use strict'
// get_ipython()'s shell as libraries read it (runner/pykernel_runner/ipython.py): each
// test does what a library's notebook integration does and checks that the kernel then
// shows what ipykernel shows. Expected texts were measured beside ipykernel 7.4 on the
// same interpreter (compat/cells/11-ipython-shell.py holds the same cells).
const test = require('node:test')
const assert = require('node:assert/strict')
const { startKernel, run, ok, value } = require('../helpers/kernel')

const displays = (events) => events.filter((e) => e.type === 'display')
const stdout = (events) => events.filter((e) => e.type === 'stdout').map((e) => e.text).join('')
const BLOCK_IPYTHON = "import sys\nsys.modules['IPython'] = None"

test("sympy.init_printing(): its printers registered with the shell make every result's bundle", async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await ok(kernel, 'import sympy as sp\nsp.init_printing()\nx, y = sp.symbols("x y")')

  await t.test('an expression: pretty text, LaTeX, and a PNG rendered by matplotlib', async () => {
    const { result } = await ok(kernel, '(x + 1)**2')
    assert.equal(result.result['text/plain'], '       2\n(x + 1) ')
    assert.equal(result.result['text/latex'], '$\\displaystyle \\left(x + 1\\right)^{2}$')
    assert.match(result.result['image/png'], /^iVBORw0KGgo/)
  })

  await t.test('builtins go through its printers too: an int and a float get LaTeX', async () => {
    const { result } = await ok(kernel, '42')
    assert.equal(result.result['text/plain'], '42')
    assert.equal(result.result['text/latex'], '$\\displaystyle 42$')
    const float = await ok(kernel, '1 / 3')
    assert.equal(float.result.result['text/plain'], '0.3333333333333333')
    assert.equal(float.result.result['text/latex'], '$\\displaystyle 0.333333333333333$')
    assert.equal(await value(kernel, 'sp.solve(x**2 - 4, x)'), '[-2, 2]')
    // A container holding a str is not sympy's: IPython's pretty printer draws it.
    assert.equal(await value(kernel, '{x: 1, "name": "value"}'), "{x: 1, 'name': 'value'}")
  })

  await t.test('display() of an expression and a matrix', async () => {
    const { events } = await ok(kernel, 'display(sp.Matrix([[1, 2], [3, x]]))')
    const [bundle] = displays(events).map((e) => e.bundle)
    assert.equal(bundle['text/plain'], '⎡1  2⎤\n⎢    ⎥\n⎣3  x⎦')
    assert.equal(bundle['text/latex'], '$\\displaystyle \\left[\\begin{matrix}1 & 2\\\\3 & x\\end{matrix}\\right]$')
  })
})

test('without IPython: sympy.init_printing() still works, its printers drawing plain text', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await ok(kernel, BLOCK_IPYTHON)
  await ok(kernel, 'import sympy as sp\nsp.init_printing()\nx = sp.Symbol("x")')
  const { result } = await ok(kernel, 'x**2 + 1')
  assert.equal(result.result['text/plain'], ' 2    \nx  + 1')
})

test("the shell's attributes libraries read", async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  // No comm_manager on the kernel (ipykernel has one): no frontend would answer a comm.
  assert.equal(
    await value(kernel, "ip = get_ipython()\nip.colors, ip.has_trait('kernel'), ip.has_trait('nothing'), hasattr(ip.kernel, 'comm_manager')"),
    "('neutral', True, False, False)",
  )
  // execution_count is the running cell's, as in IPython.
  const { result } = await ok(kernel, 'get_ipython().execution_count')
  assert.equal(result.result['text/plain'], String(result.executionCount))
})

test("the shell's formatters are callable, as IPython's are (plotly and others call them)", async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const formatters = "formatters = get_ipython().display_formatter.formatters\n"
  assert.equal(
    await value(kernel, `${formatters}class Page:\n    def _repr_html_(self): return '<i>p</i>'\nformatters['text/html'](Page())`),
    "'<i>p</i>'",
  )
  assert.equal(await value(kernel, "formatters['text/plain']({'b': 1})"), '"{\'b\': 1}"')
})

test('events: pre_run_cell and post_run_cell fire around each cell, failures reported', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await ok(kernel, [
    'seen = []',
    'def before(info): seen.append(("pre", info.raw_cell))',
    'def after(result): seen.append(("post", result.success, result.result))',
    'ip = get_ipython()',
    'ip.events.register("pre_run_cell", before)',
    'ip.events.register("post_run_cell", after)',
  ].join('\n'))
  await ok(kernel, '6 * 7')
  await run(kernel, '1 / 0')
  const { events: listed } = await ok(
    kernel,
    'ip.events.unregister("pre_run_cell", before)\nip.events.unregister("post_run_cell", after)\nprint(seen[:5])\nlen(seen)',
  )
  assert.equal(
    stdout(listed),
    "[('post', True, None), ('pre', '6 * 7'), ('post', True, 42), ('pre', '1 / 0'), ('post', False, None)]\n",
  )
  // The last cell fired pre_run_cell, then unregistered both: six calls in all.
  assert.equal(await value(kernel, 'len(seen)'), '6')
  // An unknown event is refused as IPython refuses it; a failing callback is reported
  // and the cell still succeeds.
  const unknown = await run(kernel, 'ip.events.register("no_such_event", print)')
  assert.equal(unknown.result.error.ename, 'KeyError')
  await ok(kernel, 'def broken(): raise RuntimeError("boom")\nip.events.register("post_execute", broken)')
  const { events } = await ok(kernel, '1')
  assert.match(stdout(events), /^Error in callback <function broken at 0x[0-9a-f]+> \(for post_execute\), with arguments args \(\),kwargs \{\}:\n$/)
  assert.match(events.filter((e) => e.type === 'stderr').map((e) => e.text).join(''), /RuntimeError: boom/)
})

test('rich.pretty.install() puts its formatter in place of text/plain; results use it', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await ok(kernel, 'import rich.pretty\nrich.pretty.install()')
  const { result } = await ok(kernel, '{"a": [1, 2]}')
  // rich's own colours, as ipykernel shows them (the agent text drops the escapes)
  assert.equal(
    result.result['text/plain'],
    "\x1b[1m{\x1b[0m\x1b[32m'a'\x1b[0m: \x1b[1m[\x1b[0m\x1b[1;36m1\x1b[0m, \x1b[1;36m2\x1b[0m\x1b[1m]\x1b[0m\x1b[1m}\x1b[0m",
  )
})

test('tqdm.auto and tqdm.notebook without a frontend', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  // tqdm.auto looks for ipykernel's module, which pykernel does not fake: the text bar.
  const auto = await ok(kernel, 'import IPython.display\nfrom tqdm.auto import tqdm\nfor i in tqdm(range(2)): pass')
  assert.match(auto.events.filter((e) => e.type === 'stderr').map((e) => e.text).join(''), /2\/2/)
  // tqdm.notebook without ipywidgets fails as in ipykernel (the test venv has none).
  const notebook = await run(kernel, 'from tqdm.notebook import tqdm as nb\nnb(range(2))')
  assert.equal(notebook.result.error.ename, 'ImportError')
})

test("matplotlib_inline chosen as the backend configures itself with the shell, as in ipykernel", async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  // Its InlineBackend takes the shell as a traitlets parent and as its `shell`; it then
  // registers its PNG formatter and its post_execute flush with the shell.
  const { events } = await ok(kernel, [
    'import matplotlib',
    "matplotlib.use('module://matplotlib_inline.backend_inline')",
    'import matplotlib.pyplot as plt',
    'plt.plot([1, 2])',
    'None',
  ].join('\n'))
  assert.deepEqual(
    displays(events).map((e) => [e.bundle['text/plain'], Boolean(e.bundle['image/png'])]),
    [['<Figure size 640x480 with 1 Axes>', true]],
  )
  // A figure as the result, then flushed again after the cell: twice, as ipykernel shows it.
  const { result, events: second } = await ok(kernel, 'fig, ax = plt.subplots()\nax.plot([3, 1])\nfig')
  assert.match(result.result['image/png'], /^iVBORw0KGgo/)
  assert.equal(displays(second).filter((e) => e.bundle['image/png']).length, 1)
  assert.equal(await value(kernel, 'plt.get_backend()'), "'module://matplotlib_inline.backend_inline'")
})
