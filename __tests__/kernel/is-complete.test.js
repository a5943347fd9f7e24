'use strict'
// kernel.isComplete: whether a REPL's lines are a cell to run, as codeop tells Python's
// own REPL, after the kernel's input rules (magics, !cmd, obj?). Real Python throughout.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { startKernel, run, value } = require('../helpers/kernel')

test('isComplete', async (t) => {
  const kernel = await startKernel({ cwd: fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-is-complete-')) })
  t.after(() => kernel.shutdown())

  await t.test('complete, incomplete or invalid, as codeop answers code.py', async () => {
    const cases = [
      ['x = 1', 'complete'],
      // Brackets and strings left open, a trailing backslash.
      ['total = (1 +', 'incomplete'],
      ['s = """one\n\ntwo', 'incomplete'],
      ['s = """one\n\ntwo"""', 'complete'],
      ['y = 1 + \\', 'incomplete'],
      // Nested f-strings with other quotes (every version).
      [`f"{f'{x!r}'}"`, 'complete'],
      [`f"{'('}"`, 'complete'],
      // A block, a decorator: complete once a blank line follows.
      ['if x:', 'incomplete'],
      ['if x:\n    print(x)', 'incomplete'],
      ['if x:\n    print(x)\n', 'complete'],
      ['if x: pass', 'incomplete'],
      ['@decorator', 'incomplete'],
      ['@decorator\ndef f():\n    return 1\n', 'complete'],
      ['async with lock:', 'incomplete'],
      ['await asyncio.sleep(0)', 'complete'],
      // Cannot compile however it goes on.
      ['1 +* 2', 'invalid'],
      ['x = 1 +', 'invalid'],
      // A block still waits for its body after a blank line, as in code.py.
      ['if x:\n', 'incomplete'],
      // Input rules: magics and shell lines are calls, complete on their line; a cell
      // magic's body goes on until a blank line; a pasted block's indent is dropped.
      ['%time x = 1', 'complete'],
      ['!echo hi', 'complete'],
      ['files = !ls', 'complete'],
      ['len?', 'complete'],
      ['%%bash', 'incomplete'],
      ['%%bash\necho one\necho two', 'incomplete'],
      ['%%bash\necho one\necho two\n', 'complete'],
      ['    for i in range(3):', 'incomplete'],
      // An invalid escape warns when the cell runs, not here (no late stderr).
      ["p = '\\d'", 'complete'],
    ]
    const answers = []
    for (const [code] of cases) answers.push(await kernel.isComplete(code))
    assert.deepEqual(
      answers.map((answer, i) => [cases[i][0], answer]),
      cases,
    )
  })

  await t.test('nothing runs and the namespace is untouched', async () => {
    assert.equal(await kernel.isComplete('never_defined = 1'), 'complete')
    assert.equal(await kernel.isComplete('%%bash\ntouch made-by-is-complete\n'), 'complete')
    const before = kernel.executionCount
    const { result, events } = await run(kernel, "import os\nprint('never_defined' in dir(), os.path.exists('made-by-is-complete'))")
    assert.equal(result.status, 'ok')
    // Nothing it compiled was told as late output either.
    assert.deepEqual(events, [{ type: 'stdout', text: 'False False\n' }])
    assert.equal(kernel.executionCount, before + 1)
  })

  await t.test('asked while a cell runs, it is answered after the cell, in call order', async () => {
    const order = []
    const cell = kernel.execute('import time\ntime.sleep(0.5)').then(() => order.push('cell'))
    const answer = kernel.isComplete('if x:').then((status) => order.push(status))
    await Promise.all([cell, answer])
    assert.deepEqual(order, ['cell', 'incomplete'])
    assert.equal(await value(kernel, '1 + 1'), '2')
  })

  await t.test('a code that is not a string is refused', async () => {
    await assert.rejects(kernel.isComplete(42), (err) => err.code === 'ERR_INVALID_ARG')
  })
})

test('isComplete on a kernel that has died rejects with ERR_KERNEL_DEAD', async () => {
  const kernel = await startKernel()
  try {
    await run(kernel, 'import os\nos._exit(3)')
    await assert.rejects(kernel.isComplete('x = 1'), (err) => err.code === 'ERR_KERNEL_DEAD')
  } finally {
    await kernel.shutdown()
  }
})
