'use strict'
// Stopping a cell: interrupt(), timeoutMs and an AbortSignal, wherever the cell is when
// they land, and the escalation to a kill when the cell ignores them. Real Python.
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, python, startKernel, run, groupMembers, strayMembers, kernelProcess, waitFor, promptBound } = require('../helpers/kernel')

const cell = (code) => ({ code })
const value = (r) => r.cells.at(-1).result?.['text/plain']

test('a timeout interrupts the cell and the kernel stays usable', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await run(kernel, 'kept = "state"')
  const bound = await promptBound(1000, () => kernel.execute('1+1'))
  const started = Date.now()
  const { result } = await run(kernel, 'import time; time.sleep(30)', { timeoutMs: 300 })
  const elapsed = Date.now() - started
  assert.ok(elapsed >= 300 && elapsed < bound, `cancelled after ${elapsed} ms (the timeout is 300 ms, the bound ${bound.toFixed(0)} ms)`)
  assert.equal(result.cancelled, true)
  assert.equal(result.timedOut, true)
  assert.equal(result.kernelDied, false)
  assert.equal(result.error.ename, 'KeyboardInterrupt')
  assert.equal((await run(kernel, 'kept')).result.result['text/plain'], "'state'")
})

test('an AbortSignal cancels the cell; an already aborted one cancels at once', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const controller = new AbortController()
  setTimeout(() => controller.abort(), 200)
  const { result } = await run(kernel, 'import time; time.sleep(30)', { signal: controller.signal })
  assert.equal(result.cancelled, true)
  assert.equal(result.timedOut, false)
  const again = await run(kernel, 'import time; time.sleep(30)', { signal: controller.signal })
  assert.equal(again.result.cancelled, true)
  const reused = new AbortController()
  for (let i = 0; i < 3; i++) {
    const r = await run(kernel, `${i}`, { signal: reused.signal })
    assert.equal(r.result.cancelled, false)
  }
  assert.equal((await run(kernel, '2*3')).result.result['text/plain'], '6')
})

test('a timeout that lands before the cell is running still stops it, without a kill', { timeout: 20000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  // A thread that holds the GIL for 300 ms at a time (for 2 s): the runner's main thread, once it
  // has read the next request, waits that long before it can start the cell, so the
  // timeout's SIGINT arrives while no cell is running and is ignored. Only the
  // `interrupt` frame, written before it, can stop the cell then.
  await run(kernel, [
    'import sys, threading, time',
    'sys.setswitchinterval(0.3)',
    'def hog():',
    '    end = time.monotonic() + 2',
    '    while time.monotonic() < end: pass',
    'threading.Thread(target=hog, daemon=True).start()',
  ].join('\n'))
  const started = Date.now()
  const { result } = await run(kernel, 'while True: pass', { timeoutMs: 20 })
  const elapsed = Date.now() - started
  assert.equal(result.cancelled, true)
  assert.equal(result.timedOut, true)
  assert.equal(result.kernelDied, false, `killed after ${elapsed} ms: the interrupt was lost`)
  assert.equal(result.error.ename, 'KeyboardInterrupt')
  assert.ok(elapsed < 4500, `cancelled after ${elapsed} ms (a lost interrupt is escalated to a kill after 5 s)`)
  assert.equal((await run(kernel, 'import sys; sys.setswitchinterval(0.005); 6*7')).result.result['text/plain'], '42')
})

test('interrupt() right after execute() stops the cell, though it has not started yet', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  for (let i = 0; i < 5; i++) {
    const started = Date.now()
    // The SIGINT lands while the runner is still reading the request (it ignores it
    // there); the `interrupt` frame written before it stops the cell as it starts.
    const pending = kernel.execute('while True: pass', { timeoutMs: 8000 })
    kernel.interrupt()
    const result = await pending
    assert.equal(result.cancelled, true)
    assert.equal(result.timedOut, false, `round ${i}: the interrupt was lost, the 8 s timeout stopped the cell`)
    assert.equal(result.error.ename, 'KeyboardInterrupt')
    assert.ok(Date.now() - started < 4000, `round ${i}: ${Date.now() - started} ms`)
  }
  assert.equal((await run(kernel, '6*7')).result.result['text/plain'], '42')
})

test('an interrupt that lands after the request was read but before the cell began stops it', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  // A thread that holds the GIL for 0.6 s, from 1 s after this cell, with a 0.3 s switch
  // interval. The next request, sent during that time, is read at once (a read releases
  // the GIL) but waits up to 0.3 s for the GIL before its cell can begin. The interrupt
  // frame and the SIGINT land in that gap: the SIGINT is ignored (no cell runs yet), and
  // the frame, still unread in the pipe, must be read as the cell begins.
  const setup = await run(
    kernel,
    'import sys, threading, time\n' +
      'def _hog():\n    end = time.monotonic() + 0.6\n    while time.monotonic() < end:\n        pass\n' +
      'sys.setswitchinterval(0.3)\nthreading.Timer(1.0, _hog).start()',
  )
  assert.equal(setup.result.status, 'ok')
  await new Promise((r) => setTimeout(r, 1100))
  const started = Date.now()
  const pending = kernel.execute('while True: pass', { timeoutMs: 8000 })
  await new Promise((r) => setTimeout(r, 100))
  kernel.interrupt()
  const result = await pending
  assert.equal(result.timedOut, false, 'the interrupt was lost; the 8 s timeout stopped the cell')
  assert.equal(result.cancelled, true)
  assert.equal(result.error.ename, 'KeyboardInterrupt')
  assert.ok(Date.now() - started < 4000, `${Date.now() - started} ms`)
  assert.equal((await run(kernel, 'sys.setswitchinterval(0.005); 6*7')).result.result['text/plain'], '42')
})

test('interrupt() reaches shell children of the cell', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  // The group is led by the init of the kernel's PID namespace (kernel.pid) and holds the
  // Python kernel; the cell's children are the members beyond those two.
  const py = kernelProcess(kernel.pid)
  assert.deepEqual(groupMembers(kernel.pid).sort(), [kernel.pid, py].sort())
  const promise = run(kernel, "import subprocess\nsubprocess.run(['sh', '-c', 'sleep 30'])")
  const childStarted = await waitFor(() => strayMembers(kernel.pid, py).length >= 2, { timeoutMs: 3000 })
  assert.ok(childStarted, 'sh and sleep started in the kernel group')
  const started = Date.now()
  kernel.interrupt()
  const { result } = await promise
  const took = Date.now() - started
  // The bound's round trips run after the cell: the kernel is busy until then.
  const bound = await promptBound(1000, () => kernel.execute('1+1'))
  assert.ok(took < bound, `the interrupt took ${took} ms (bound ${bound.toFixed(0)} ms)`)
  assert.equal(result.cancelled, true)
  assert.ok(await waitFor(() => strayMembers(kernel.pid, py).length === 0, { timeoutMs: 2000 }), 'the children are gone')
  assert.deepEqual(groupMembers(kernel.pid).sort(), [kernel.pid, py].sort(), 'init and the kernel live on')
  assert.equal((await run(kernel, '1')).result.status, 'ok')
})

test('SIGINT between cells is ignored', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  kernel.interrupt()
  await new Promise((r) => setTimeout(r, 100))
  assert.equal(kernel.alive, true)
  assert.equal((await run(kernel, '3')).result.result['text/plain'], '3')
})

test('a cell that ignores SIGINT is killed after the escalation window', { timeout: 20000 }, async () => {
  const kernel = await startKernel()
  const started = Date.now()
  const { result } = await run(
    kernel,
    'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.01)',
    { timeoutMs: 300 },
  )
  const elapsed = Date.now() - started
  assert.ok(elapsed < 300 + 5000 + 3000, `took ${elapsed} ms`)
  assert.equal(result.timedOut, true)
  assert.equal(result.kernelDied, true)
  assert.match(result.error.evalue, /did not respond to the interrupt/)
  assert.equal(kernel.alive, false)
})

test('timeoutMs: 0 means no timeout for execute and evaluate, as timeoutSeconds: 0 does for the pool', async (t) => {
  const kernel = await addon.Kernel.start({ interpreter: python })
  t.after(() => kernel.shutdown())
  const nap = 'import time; time.sleep(0.3); 6*7'
  const executed = await kernel.execute(nap, { timeoutMs: 0 })
  assert.equal(executed.timedOut, false)
  assert.equal(executed.result?.['text/plain'], '42')
  const evaluated = await kernel.evaluate([cell(nap)], { timeoutMs: 0 })
  assert.equal(evaluated.timedOut, false)
  assert.equal(evaluated.exitCode, 0)
  const pool = new addon.KernelPool({ prewarm: 0, kernel: { interpreter: python } })
  t.after(() => pool.disposeAll())
  const pooled = await pool.execute({ timeoutSeconds: 0, cells: [cell(nap)] })
  assert.equal(pooled.timedOut, false)
  assert.equal(value(pooled), '42')
})
