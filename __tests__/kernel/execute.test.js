'use strict'
// The foundation: one kernel, its cells, its streams, its errors. Real Python throughout.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { startKernel, run, isAlive, kernelProcess, viewedDir } = require('../helpers/kernel')

/** `[session, process group]` of `pid`, host side, from /proc/<pid>/stat. */
function sessionAndGroup(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  // Fields after the parenthesised command: state ppid pgrp session ...
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return [Number(rest[3]), Number(rest[2])]
}

test('kernel basics', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())

  await t.test('the first cell counts 1 and its value is the result', async () => {
    assert.equal(kernel.executionCount, 0)
    const { result } = await run(kernel, '1+1')
    assert.equal(result.status, 'ok')
    assert.equal(result.executionCount, 1)
    assert.deepEqual(result.result, { 'text/plain': '2' })
    assert.equal(kernel.executionCount, 1)
  })

  await t.test('state persists across cells and `_` holds the last result', async () => {
    await run(kernel, 'x = 41')
    const { result } = await run(kernel, 'x + 1')
    assert.equal(result.result['text/plain'], '42')
    const underscore = await run(kernel, '_ * 2')
    assert.equal(underscore.result.result['text/plain'], '84')
  })

  await t.test('a trailing semicolon or a None value gives no result', async () => {
    assert.equal((await run(kernel, '1+1;')).result.result, undefined)
    assert.equal((await run(kernel, 'None')).result.result, undefined)
  })

  await t.test('stdout streams in order, before the promise resolves', async () => {
    const seen = []
    // Recorded, not asserted, in the callback: the addon swallows what onEvent throws.
    const promise = kernel.execute('import time\nfor i in range(3):\n    print(i)\n    time.sleep(0.05)', {
      onEvent: (e) => seen.push(e),
    })
    const result = await promise
    const atResolve = seen.length
    await new Promise((r) => setTimeout(r, 100))
    assert.equal(seen.length, atResolve, 'no event arrived after the promise resolved')
    assert.equal(seen.map((e) => e.text).join(''), '0\n1\n2\n')
    assert.ok(seen.length >= 2, 'the output arrived in more than one chunk (it streamed)')
    assert.ok(seen.every((e) => e.type === 'stdout'))
    assert.equal(result.stdout, '0\n1\n2\n')
  })

  await t.test('output written before the result or the error comes before it; figures follow the result', async () => {
    const ok = await run(kernel, "import os, sys\nprint('a')\nos.write(1, b'b\\n')\nsys.stderr.write('c\\n')\n40 + 2")
    const types = ok.events.map((e) => e.type)
    assert.equal(types.at(-1), 'result', types.join(' '))
    assert.equal(types.filter((t) => t === 'result').length, 1)
    assert.equal(ok.events.filter((e) => e.type === 'stdout').map((e) => e.text).join(''), 'a\nb\n')
    assert.equal(ok.events.filter((e) => e.type === 'stderr').map((e) => e.text).join(''), 'c\n')
    assert.equal(ok.result.result['text/plain'], '42')
    const failed = await run(kernel, "print('before')\n1/0")
    assert.deepEqual(failed.events.map((e) => e.type), ['stdout', 'error'])
    assert.equal(failed.events[0].text, 'before\n')
    const figure = await run(kernel, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n'value'")
    const order = figure.events.map((e) => e.type).filter((t) => t === 'result' || t === 'display')
    assert.deepEqual(order, ['result', 'display'])
  })

  await t.test('a partial line printed before a display comes before it', async () => {
    const { events } = await run(kernel, "print('a', end='')\ndisplay(5)")
    assert.deepEqual(
      events.map((e) => e.type),
      ['stdout', 'display'],
    )
    assert.equal(events[0].text, 'a')
    assert.equal(events[1].bundle['text/plain'], '5')
  })

  await t.test('child processes, C-level writes and threads are captured in their streams', async () => {
    const { result } = await run(
      kernel,
      [
        'import os, subprocess, threading',
        "os.system('echo child')",
        "subprocess.run(['sh', '-c', 'echo e 1>&2'])",
        "t = threading.Thread(target=lambda: print('from thread'))",
        't.start(); t.join()',
        "os.write(1, b'raw fd\\n')",
      ].join('\n'),
    )
    assert.equal(result.status, 'ok')
    assert.match(result.stdout, /child\n/)
    assert.match(result.stdout, /from thread\n/)
    assert.match(result.stdout, /raw fd\n/)
    assert.match(result.stderr, /^e\n$/m)
  })

  await t.test('an exception reports ename, evalue and a traceback of user frames only', async () => {
    const { result, events } = await run(kernel, "def f():\n    raise ValueError('boom')\nf()")
    assert.equal(result.status, 'error')
    assert.equal(result.error.ename, 'ValueError')
    assert.equal(result.error.evalue, 'boom')
    const tb = result.error.traceback.join('')
    assert.match(tb, /<cell \d+>/)
    assert.match(tb, /raise ValueError\('boom'\)/)
    assert.doesNotMatch(tb, /runner\.py|prelude\.py/)
    assert.equal(events.at(-1).type, 'error')
  })

  await t.test('a SyntaxError shows the line and its caret', async () => {
    const { result } = await run(kernel, 'x = (1,\ny = 2 +')
    assert.equal(result.error.ename, 'SyntaxError')
    const tb = result.error.traceback.join('')
    assert.match(tb, /\^/)
    assert.doesNotMatch(tb, /runner\.py/)
  })

  await t.test('input() fails at once and says stdin was requested', async () => {
    const started = Date.now()
    const { result } = await run(kernel, "name = input('name? ')")
    assert.ok(Date.now() - started < 1000, 'input() must not block')
    assert.equal(result.status, 'error')
    assert.equal(result.stdinRequested, true)
    assert.equal(result.error.ename, 'StdinNotImplementedError')
    assert.match(result.error.evalue, /no interactive stdin/)
    const next = await run(kernel, 'import sys; sys.stdin.read()')
    assert.equal(next.result.stdinRequested, true)
    assert.equal((await run(kernel, '1')).result.stdinRequested, false)
  })

  await t.test('exit(), quit() and sys.exit() end the cell, not the kernel', async () => {
    await run(kernel, 'kept = 7')
    const exited = await run(kernel, 'exit()')
    assert.equal(exited.result.status, 'ok')
    assert.equal((await run(kernel, 'quit()')).result.status, 'ok')
    const failed = await run(kernel, 'import sys; sys.exit(3)')
    assert.equal(failed.result.status, 'error')
    assert.equal(failed.result.error.ename, 'SystemExit')
    assert.equal(failed.result.error.evalue, '3')
    assert.equal((await run(kernel, 'kept')).result.result['text/plain'], '7')
    assert.equal(kernel.alive, true)
  })

  await t.test('top-level await works and its results survive to later cells', async () => {
    await run(kernel, 'import asyncio\nasync def twice(v):\n    await asyncio.sleep(0.01)\n    return v * 2')
    const { result } = await run(kernel, 'value = await twice(21)\nvalue')
    assert.equal(result.result['text/plain'], '42')
    const again = await run(kernel, 'await twice(value)')
    assert.equal(again.result.result['text/plain'], '84')
    // The final expression runs on the loop too, in the same turn as the body.
    const task = await run(kernel, 'await asyncio.sleep(0)\nt = asyncio.create_task(twice(5))\nasyncio.get_running_loop() is not None')
    assert.equal(task.result.error, undefined, JSON.stringify(task.result.error))
    assert.equal(task.result.result['text/plain'], 'True')
    const last = await run(kernel, 'await asyncio.sleep(0)\nasyncio.create_task(twice(6))')
    assert.equal(last.result.error, undefined, JSON.stringify(last.result.error))
    assert.match(last.result.result['text/plain'], /^<Task /)
    assert.equal((await run(kernel, 'await t')).result.result['text/plain'], '10')
    // Code before the only await, in a final expression, runs on the loop too.
    const before = await run(kernel, 't2 = asyncio.create_task(twice(7))\nawait t2')
    assert.equal(before.result.error, undefined, JSON.stringify(before.result.error))
    assert.equal(before.result.result['text/plain'], '14')
    assert.equal((await run(kernel, "'_pykernel_last_value' in dir()")).result.result['text/plain'], 'False')
  })

  // One-line cells are compiled as an expression first (a faster path); these must mean
  // exactly what they mean as the last line of a longer cell.
  await t.test('a one-line cell means what it would in a longer cell', async () => {
    assert.equal((await run(kernel, 'x = 5')).result.result, undefined)
    assert.equal((await run(kernel, 'x * 2  # a comment; not a semicolon')).result.result['text/plain'], '10')
    const both = await run(kernel, 'print("out"); x + 1')
    assert.equal(both.result.stdout, 'out\n')
    assert.equal(both.result.result['text/plain'], '6')
    // A uniformly indented cell runs, as in IPython (pasted from a function body).
    assert.equal((await run(kernel, '  x')).result.result['text/plain'], '5')
    assert.equal((await run(kernel, '\n    y = x\n    if y:\n        y += 1\n    y')).result.result['text/plain'], '6')
    assert.equal((await run(kernel, 'x = 5\n  x')).result.error.ename, 'IndentationError')
    assert.equal((await run(kernel, 'x +')).result.error.ename, 'SyntaxError')
    const failed = await run(kernel, '1/0')
    assert.equal(failed.result.error.ename, 'ZeroDivisionError')
    assert.match(failed.result.error.traceback.join(''), /1\/0/)
    await run(kernel, 'import asyncio')
    assert.equal((await run(kernel, 'await asyncio.sleep(0, 7)')).result.result['text/plain'], '7')
    for (const code of ['x is 5', 'y = x is 5']) {
      const warned = await run(kernel, code)
      assert.equal(warned.result.stderr.split('SyntaxWarning').length - 1, 1, `${code}: ${warned.result.stderr}`)
    }
  })

  await t.test('silent cells do not count', async () => {
    const before = kernel.executionCount
    const { result } = await run(kernel, '5', { silent: true })
    assert.equal(result.result, undefined)
    assert.equal(kernel.executionCount, before)
  })

  await t.test('a request env that cannot be set leaves nothing of itself behind', async () => {
    const bad = await run(kernel, '1', { env: { PK_A_FIRST: 'set', 'PK_Z=BAD': 'x' } })
    assert.equal(bad.result.status, 'error')
    assert.equal((await run(kernel, 'import os; os.environ.get("PK_A_FIRST")')).result.result, undefined)
  })

  await t.test('per-request cwd persists; per-request env is for that request only', async () => {
    // Outside /tmp: of the host's /tmp a kernel sees only what it was started with.
    const elsewhere = fs.realpathSync(viewedDir())
    t.after(() => fs.rmSync(elsewhere, { recursive: true, force: true }))
    const { result } = await run(kernel, 'import os; (os.getcwd(), os.environ.get("PK_A"))', {
      cwd: elsewhere,
      env: { PK_A: 'yes' },
    })
    assert.equal(result.result['text/plain'], `('${elsewhere}', 'yes')`)
    const after = await run(kernel, 'import os; (os.getcwd(), os.environ.get("PK_A"))')
    assert.equal(after.result.result['text/plain'], `('${elsewhere}', None)`, 'the env of a request outlived it')
    await run(kernel, 'os.environ["PK_B"] = "kernel"')
    const unset = await run(kernel, 'os.environ.get("PK_B")', { env: { PK_B: null } })
    assert.equal(unset.result.result, undefined)
    assert.equal((await run(kernel, 'os.environ.get("PK_B")')).result.result['text/plain'], "'kernel'", 'unset for one request only')
    // What the cell sets itself stays, as any change a cell makes.
    await run(kernel, 'os.environ["PK_C"] = "cell"', { env: { PK_C: 'request' } })
    assert.equal((await run(kernel, 'os.environ.get("PK_C")')).result.result['text/plain'], "'cell'")
  })

  await t.test('values JSON cannot hold still give valid frames', async () => {
    const { result } = await run(kernel, "print('\\ud800 lone'); display({'a': float('nan')}); b'\\xff\\x00'")
    assert.equal(result.status, 'ok')
    assert.match(result.stdout, /lone/)
    assert.equal(result.result['text/plain'], "b'\\xff\\x00'")
  })

  await t.test('matplotlib defaults to the Agg backend', async () => {
    const { result } = await run(kernel, "import os; os.environ.get('MPLBACKEND')")
    assert.equal(result.result['text/plain'], "'Agg'")
  })

  await t.test('the kernel runs in its own session and process group', async () => {
    // In the sandbox the init of the kernel's PID namespace (kernel.pid; pid 1 inside)
    // leads the session and the group; the Python kernel (pid 2 inside) is in both.
    const { result } = await run(kernel, 'import os; (os.getpid(), os.getppid(), os.getsid(0), os.getpgrp())')
    assert.equal(result.result['text/plain'], '(2, 1, 1, 1)')
    const py = kernelProcess(kernel.pid)
    assert.ok(py, 'init has the kernel as its child')
    assert.deepEqual(sessionAndGroup(kernel.pid), [kernel.pid, kernel.pid], 'init leads its session and group')
    assert.deepEqual(sessionAndGroup(py), [kernel.pid, kernel.pid], "the kernel is in init's session and group")
    assert.notDeepEqual(sessionAndGroup(process.pid), [kernel.pid, kernel.pid])
  })

  await t.test('os._exit ends the kernel and the result says so', async () => {
    const { result } = await run(kernel, 'import os; os._exit(3)')
    assert.equal(result.kernelDied, true)
    assert.equal(result.status, 'error')
    assert.match(result.error.evalue, /exit code 3/)
    assert.equal(kernel.alive, false)
    await assert.rejects(kernel.execute('1'), (err) => err.code === 'ERR_KERNEL_DEAD' && /exit code 3/.test(err.message))
    assert.equal(isAlive(kernel.pid), false)
  })
})

test('cells queue: concurrent executes run one at a time in arrival order', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await run(kernel, 'order = []')
  const results = await Promise.all(
    Array.from({ length: 10 }, (_, i) => i).map((i) => kernel.execute(`import time; time.sleep(0.01); order.append(${i}); ${i}`)),
  )
  assert.deepEqual(
    results.map((r) => r.result['text/plain']),
    Array.from({ length: 10 }, (_, i) => String(i)),
  )
  assert.equal((await run(kernel, 'order')).result.result['text/plain'], '[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]')
})

test('kernel.evaluate takes an env for that request only', async (t) => {
  const k = await startKernel()
  t.after(() => k.shutdown())
  const r = await k.evaluate([{ code: 'import os; os.environ.get("PK_EVAL")' }], { env: { PK_EVAL: 'yes' } })
  assert.equal(r.cells[0].result['text/plain'], "'yes'")
  const after = await k.evaluate([{ code: 'os.environ.get("PK_EVAL")' }])
  assert.equal(after.cells[0].result, undefined)
})

test('storeHistory: false runs the cell without counting it', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  assert.equal((await kernel.execute('x = 40')).executionCount, 1)
  const hidden = await kernel.execute('x + 1', { storeHistory: false })
  assert.equal(hidden.status, 'ok')
  assert.equal(hidden.result['text/plain'], '41', 'the cell ran')
  assert.equal(kernel.executionCount, 1, 'and was not counted')
  const failed = await kernel.execute('1 / 0', { storeHistory: false })
  assert.match(failed.error.traceback.join('\n'), /hidden cell/, 'its frames name a hidden cell')
  assert.equal(kernel.executionCount, 1)
  const next = await kernel.execute('x + 2')
  assert.equal(next.executionCount, 2, 'the next counted cell takes the next number')
  assert.equal(next.result['text/plain'], '42')
})

test('getpass() and input() fail at once with StdinNotImplementedError; the kernel lives', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  for (const code of ["import getpass\ngetpass.getpass('password: ')", "input('name? ')"]) {
    const started = Date.now()
    const r = await kernel.execute(code, { timeoutMs: 10_000 })
    assert.equal(r.timedOut, false, `${code} waited for input`)
    assert.ok(Date.now() - started < 5000)
    assert.equal(r.error?.ename, 'StdinNotImplementedError', code)
    assert.match(r.error.evalue, /no interactive stdin; pass data in code instead/)
    assert.equal(r.stderr, '', 'no terminal is looked for (no GetPassWarning, no echo warning)')
  }
  assert.equal((await kernel.execute('6 * 7')).result['text/plain'], '42')
})

test('top-level await: every cell runs on one event loop, so tasks and loop-bound objects carry over', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await kernel.execute('import asyncio\nfirst = asyncio.get_running_loop()\nevent = asyncio.Event()\ntask = asyncio.ensure_future(event.wait())\nawait asyncio.sleep(0)')
  const r = await kernel.execute('event.set()\nawait task\nasyncio.get_running_loop() is first, task.done()')
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(r.result['text/plain'], '(True, True)')
})
