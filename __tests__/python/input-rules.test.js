'use strict'
// IPython's input rules, as in Jupyter: __future__ imports anywhere a cell's top level
// allows them, _ipython_display_ for a result, pasted prompts, automagic (`cd /tmp`),
// `obj?`/`obj??`, and the cell magics that display their body. Against real Python.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { startKernel, run, ok, value, tempDir } = require('../helpers/kernel')

test('input rules', async (t) => {
  const dir = fs.realpathSync(tempDir('pykernel-input-rules-'))
  const kernel = await startKernel({ cwd: dir })
  t.after(() => kernel.shutdown())

  await t.test('a __future__ import after other statements runs, and its feature lasts', async () => {
    const { result } = await ok(kernel, 'import sys\nfrom __future__ import annotations\ndef f(x: Undefined) -> Nope: pass\nf.__annotations__')
    assert.equal(result.result['text/plain'], "{'x': 'Undefined', 'return': 'Nope'}")
    // a later cell keeps the feature, as codeop.Compile keeps its flags
    assert.equal(await value(kernel, 'def g(y: Missing): pass\ng.__annotations__'), "{'y': 'Missing'}")
    assert.equal(await value(kernel, 'type(annotations).__name__'), "'_Feature'")
    // a cell that ends with one has no result (its last statement is no expression)
    assert.equal((await ok(kernel, 'y = 5\ny\nfrom __future__ import annotations')).result.result, undefined)
    // an unknown feature is still the SyntaxError it is in IPython
    const braces = await run(kernel, 'x = 1\nfrom __future__ import braces')
    assert.equal(braces.result.error.ename, 'SyntaxError')
    assert.match(braces.result.error.evalue, /^not a chance \(<cell \d+>, line 2\)$/)
  })

  await t.test('a result with _ipython_display_ displays itself instead of its repr', async () => {
    const code = [
      'class Shown:',
      '    def _ipython_display_(self):',
      "        display({'text/plain': 'shown by itself'}, raw=True)",
      '    def __repr__(self):',
      "        return 'the repr'",
      's = Shown()',
      's',
    ].join('\n')
    const { result } = await ok(kernel, code)
    assert.equal(result.result, undefined)
    assert.deepEqual(result.displays, [{ 'text/plain': 'shown by itself' }])
    assert.equal(await value(kernel, '_ is s'), 'True')
  })

  await t.test('pasted >>> and In [N]: prompts are stripped', async () => {
    const classic = await ok(kernel, '>>> total = 0\n>>> for i in range(3):\n...     total += i\n...\n>>> total')
    assert.equal(classic.result.result['text/plain'], '3')
    const ipython = await ok(kernel, 'In [1]: def double(x):\n   ...:     return 2 * x\n   ...:\n\nIn [2]: double(21)')
    assert.equal(ipython.result.result['text/plain'], '42')
    // a docstring's examples are not prompts
    const doc = 'def h():\n    """Doc.\n\n    >>> h()\n    1\n    """\n    return 1\nh.__doc__.count(">>>")'
    assert.equal(await value(kernel, doc), '1')
  })

  await t.test('automagic: a magic or alias named without % on a one-line cell', async () => {
    fs.mkdirSync(path.join(dir, 'sub'), { recursive: true })
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'first line\n')
    assert.equal(await value(kernel, 'pwd'), `'${dir}'`)
    const cd = await ok(kernel, 'cd sub')
    assert.equal(cd.result.stdout, `${path.join(dir, 'sub')}\n`)
    await ok(kernel, 'cd ..')
    assert.equal((await ok(kernel, 'cat notes.txt')).result.stdout, 'first line\n')
    await ok(kernel, 'mkdir made')
    assert.ok(fs.statSync(path.join(dir, 'made')).isDirectory())
    // options make ls the shell's, as IPython's alias runs it
    assert.match((await ok(kernel, 'ls -d made')).result.stdout, /^made\/\n$/)
    // an assignment, a variable that shadows the name, and a longer cell are Python
    assert.equal(await value(kernel, 'ls = 3\nls'), '3')
    assert.equal(await value(kernel, 'ls'), '3')
    await ok(kernel, 'del ls')
    const twoLines = await run(kernel, 'x = 1\npwd')
    assert.equal(twoLines.result.error.ename, 'NameError')
  })

  await t.test('obj? and obj?? print the pager text; ?obj too; an unknown name says so', async () => {
    await ok(kernel, 'def area(w, h=1):\n    """Width times height."""\n    return w * h')
    const short = await ok(kernel, 'area?')
    assert.match(short.result.stdout, /^Signature: area\(w, h=1\)\nDocstring: Width times height\.\nFile: {6}<cell \d+>\nType: {6}function\n$/)
    const long = await ok(kernel, 'area??')
    assert.match(long.result.stdout, /^Signature: area\(w, h=1\)\nSource:   \ndef area\(w, h=1\):\n {4}"""Width times height\."""\n {4}return w \* h\nFile: {6}<cell \d+>\nType: {6}function\n$/)
    assert.equal((await ok(kernel, '?area')).result.stdout, short.result.stdout)
    const list = await ok(kernel, 'items = [1, 2]\nitems?')
    assert.match(list.result.stdout, /^Type: {8}list\nString form: \[1, 2\]\nLength: {6}2\nDocstring: {2}\n/)
    assert.equal((await ok(kernel, 'nosuch?')).result.stdout, 'Object `nosuch` not found.\n')
    // a `?` in a comment or a string is no help request
    assert.equal(await value(kernel, 'q = "why?"  # really?\nq'), "'why?'")
  })

  await t.test('%%html, %%markdown, %%latex, %%javascript, %%svg display their body', async () => {
    const shown = async (code) => (await ok(kernel, code)).result.displays
    assert.deepEqual(await shown('%%html\n<b>bold</b>'), [{ 'text/html': '<b>bold</b>' }])
    assert.deepEqual(await shown('%%markdown\n# Title'), [{ 'text/markdown': '# Title' }])
    assert.deepEqual(await shown('%%latex\n$x^2$'), [{ 'text/latex': '$x^2$', 'text/plain': '<IPython.core.display.Latex object>' }])
    const js = { 'application/javascript': 'console.log(1)', 'text/plain': '<IPython.core.display.Javascript object>' }
    assert.deepEqual(await shown('%%javascript\nconsole.log(1)'), [js])
    assert.deepEqual(await shown('%%js\nconsole.log(1)'), [js])
    assert.deepEqual(await shown('%%svg\n<svg></svg>'), [{ 'image/svg+xml': '<svg></svg>', 'text/plain': '<IPython.core.display.SVG object>' }])
  })
})
