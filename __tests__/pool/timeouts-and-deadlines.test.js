'use strict'
// Timeouts and deadlines of pool requests: a cell's timeout (the request's, its own, in
// seconds or ms, clamped), the interrupt and the escalation to a kill, a request deadline
// over its cells, its turn and its kernel's start, an abort before its turn or while its
// kernel starts, and what the agent reads. Real Python.
const test = require('node:test')
const path = require('node:path')
const assert = require('node:assert/strict')
const { addon, python, isAlive, kernelProcess, promptBound, tempDir, fakeInterpreter, processesWith, KERNEL_TOKEN_PY: TOKEN } = require('../helpers/kernel')

const { KernelPool } = addon
const kernel = { interpreter: python }
const cell = (code) => ({ code })
const value = (r) => r.cells.at(-1).result?.['text/plain']
// The fake's runner start is what the test stops, not the bytecode compile step before it.
const NO_COMPILE = 'if [ "$1" = "-I" ]; then exit 1; fi\n'
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

test('a 1 s timeout interrupts a sleeping cell within 2 s and the kernel keeps its state', async (t) => {
  const pool = new addon.KernelPool({ kernel: { interpreter: python } })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'nap', cells: [cell('kept = "yes"')] })
  const bound = await promptBound(2000, () => pool.execute({ sessionId: 'nap', cells: [cell('1+1')] }))
  const started = Date.now()
  const r = await pool.execute({ sessionId: 'nap', timeoutSeconds: 1, cells: [cell('import time; time.sleep(30)')] })
  const took = Date.now() - started
  assert.ok(took >= 1000 && took < bound, `took ${took} ms (the timeout is 1 s, the bound ${bound.toFixed(0)} ms)`)
  assert.equal(r.timedOut, true)
  assert.equal(r.cancelled, true)
  assert.equal(r.exitCode, null)
  assert.equal(r.kernelKilled, false)
  assert.equal(
    r.annotations[0],
    'eval cell timed out after 1s; kernel interrupted but remains running. Reset the kernel via { reset: true } if state appears corrupted.',
  )
  assert.equal(value(await pool.execute({ sessionId: 'nap', cells: [cell('kept')] })), "'yes'")
})

test('a cell that ignores SIGINT is killed after the escalation window; the next call gets a fresh kernel', { timeout: 20000 }, async (t) => {
  const pool = new addon.KernelPool({ kernel: { interpreter: python } })
  t.after(() => pool.disposeAll())
  // A cell's os.getpid() is 2 in every sandboxed kernel: the kernel is known by its host
  // pid (the init of its PID namespace, and its Python child) and, in cells, by a token.
  const token = value(await pool.execute({ sessionId: 'stubborn', cells: [cell(`lost = 1; ${TOKEN}`)] }))
  const pid = pool.sessions.find((s) => s.key.startsWith('session:stubborn @ ')).pid
  const py = kernelProcess(pid)
  assert.ok(isAlive(pid) && isAlive(py))
  const started = Date.now()
  const r = await pool.execute({
    sessionId: 'stubborn',
    timeoutSeconds: 1,
    cells: [cell('import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.05)')],
  })
  const elapsed = Date.now() - started
  assert.ok(elapsed < 1000 + 5000 + 3000, `took ${elapsed} ms`)
  assert.ok(elapsed >= 1000 + 5000 - 200, `killed only after the 5 s escalation (${elapsed} ms)`)
  assert.equal(r.kernelKilled, true)
  assert.equal(r.kernelRestarted, false, 'a kill of ours is not retried')
  assert.match(
    r.output,
    /^\[eval cell timed out and the kernel was unresponsive to interrupt; the kernel has been killed and will be recreated on the next call\.\]/,
  )
  assert.equal(isAlive(pid), false)
  assert.equal(isAlive(py), false)
  const next = await pool.execute({ sessionId: 'stubborn', cells: [cell(`('lost' in globals(), ${TOKEN})`)] })
  assert.match(value(next), /^\(False, '[0-9a-f]{16}'\)$/)
  assert.notEqual(value(next), `(False, ${token})`)
})

test('a request deadline covers its cells: the result says it timed out, and the session lives on', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'd', cells: [{ code: 'x = 5' }] })
  const started = Date.now()
  const r = await pool.execute({
    sessionId: 'd',
    deadlineMs: 600,
    timeoutSeconds: 30,
    cells: [{ code: 'import time' }, { code: 'time.sleep(20)' }, { code: 'never = 1' }],
  })
  assert.ok(Date.now() - started < 4000, `took ${Date.now() - started} ms`)
  assert.equal(r.timedOut, true)
  assert.equal(r.exitCode, null)
  assert.match(r.output, /^\[cell 2 of 3 failed\]\n\[Command timed out after 600 ms \(the request's deadline\) during cell 2; the kernel was interrupted and later cells did not run\. It keeps its state/)
  assert.equal(r.cells.length, 2)
  assert.equal(value(await pool.execute({ sessionId: 'd', cells: [{ code: "x, 'never' in globals()" }] })), '(5, False)')
})

test('a request deadline on a cell that ignores the interrupt kills its kernel, as a timeout does', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'stuck', cells: [{ code: 'state = 1' }] })
  const r = await pool.execute({
    sessionId: 'stuck',
    deadlineMs: 300,
    cells: [{ code: 'import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(30)' }],
  })
  assert.equal(r.timedOut, true)
  assert.equal(r.kernelKilled, true)
  assert.match(r.output, /^\[Command timed out after 300 ms \(the request's deadline\) during cell 1; it did not stop on interrupt, so the kernel was killed/)
  const next = await pool.execute({ sessionId: 'stuck', cells: [{ code: "'state' in globals()" }] })
  assert.equal(value(next), 'False')
})

test('a request deadline covers waiting for its turn: nothing ran', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const busy = pool.execute({ sessionId: 'w', cells: [{ code: 'import time; time.sleep(2)' }] })
  await sleep(100)
  const started = Date.now()
  const r = await pool.execute({ sessionId: 'w', deadlineMs: 300, cells: [{ code: 'ran = 1' }] })
  assert.ok(Date.now() - started < 1500, `took ${Date.now() - started} ms`)
  assert.equal(r.timedOut, true)
  assert.equal(r.output, "[Command timed out after 300 ms (the request's deadline) before its first cell started; nothing ran.]\n")
  await busy
  assert.equal(value(await pool.execute({ sessionId: 'w', cells: [{ code: "'ran' in globals()" }] })), 'False')
})

test('a request deadline covers starting its kernel: a timed-out result, and no process left', async (t) => {
  const dir = tempDir()
  const marker = `pykernel-pool-deadline-${path.basename(dir)}`
  const exe = fakeInterpreter(dir, `${NO_COMPILE}exec sh -c 'sleep 30; : ${marker}'`)
  for (const mode of ['session', 'per-call']) {
    const pool = new KernelPool({ mode, prewarm: 0, kernel: { interpreter: exe, startupTimeoutMs: 60_000 } })
    t.after(() => pool.disposeAll())
    const started = Date.now()
    const r = await pool.execute({ sessionId: 'slow', deadlineMs: 500, cells: [{ code: '1' }] })
    assert.ok(Date.now() - started < 4000, `${mode}: took ${Date.now() - started} ms`)
    assert.equal(r.timedOut, true, mode)
    assert.equal(r.exitCode, null)
    assert.equal(r.output, "[Command timed out after 500 ms (the request's deadline) before its first cell started; nothing ran.]\n", mode)
    assert.equal(r.cancelled, true, mode)
    assert.deepEqual(processesWith(marker), [], `${mode}: the kernel being started was left running`)
  }
})

test('timeoutMs gives sub-second budgets; with timeoutSeconds it is refused', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  // The session's kernel starts before the clock does: the bound is the timeout's, and a
  // start on a loaded machine may take seconds of its own.
  await pool.execute({ sessionId: 'ms', cells: [{ code: 'import time' }] })
  const bound = await promptBound(2000, () => pool.execute({ sessionId: 'ms', cells: [{ code: '1+1' }] }))
  const started = Date.now()
  const r = await pool.execute({ sessionId: 'ms', timeoutMs: 300, cells: [{ code: 'import time; time.sleep(10)' }] })
  const took = Date.now() - started
  assert.ok(took >= 300 && took < bound, `took ${took} ms (the timeout is 300 ms, the bound ${bound.toFixed(0)} ms)`)
  assert.equal(r.timedOut, true)
  assert.match(r.output, /^\[eval cell timed out after 300ms; kernel interrupted but remains running/)
  for (const bad of [{ timeoutMs: 100, timeoutSeconds: 1 }, { timeoutMs: -1 }, { timeoutMs: NaN }]) {
    await assert.rejects(pool.execute({ sessionId: 'ms', cells: [{ code: '1' }], ...bad }), (err) => {
      assert.equal(err.code, 'ERR_INVALID_ARG', JSON.stringify(bad))
      assert.match(err.message, /timeoutMs/)
      return true
    })
  }
  const clamped = await pool.execute({ sessionId: 'ms', timeoutMs: 5_000_000, cells: [{ code: '1' }] })
  assert.deepEqual(clamped.annotations, ['Timeout clamped to 3600000ms (requested 5000000ms; allowed range 1-3600000ms).'])
  const none = await pool.execute({ sessionId: 'ms', timeoutMs: 0, cells: [{ code: 'time.sleep(1.2); 7' }] })
  assert.equal(value(none), '7', '0 is no timeout')
})

test('a cell timeout replaces the request one for that cell, clamped with a notice', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const started = Date.now()
  const r = await pool.execute({
    sessionId: 'ct',
    timeoutSeconds: 60,
    cells: [{ code: 'import time; time.sleep(1.5); 1' }, { code: 'time.sleep(30)', timeout: 0.2, title: 'slow' }],
  })
  assert.ok(Date.now() - started < 6000)
  assert.equal(r.timedOut, true)
  assert.equal(r.failedCell, 1)
  assert.deepEqual(r.annotations.slice(0, 2), [
    'cell 2: Timeout clamped to 1s (requested 0.2s; allowed range 1-3600s).',
    'eval cell timed out after 1s; kernel interrupted but remains running. Reset the kernel via { reset: true } if state appears corrupted.',
  ])
  const own = await pool.execute({ sessionId: 'ct', timeoutSeconds: 1, cells: [{ code: 'time.sleep(1.5); 2', timeout: 0 }] })
  assert.equal(value(own), '2', "a cell's timeout 0 is none, whatever the request's")
  await assert.rejects(pool.execute({ sessionId: 'ct', cells: [{ code: '1', timeout: -1 }] }), (err) => err.code === 'ERR_INVALID_ARG')
})

test('a deadline that passes while a reset cell waits for its fresh kernel keeps the cells that ran', async (t) => {
  for (const mode of ['session', 'per-call']) {
    const pool = new KernelPool({ kernel, mode, prewarm: 0 })
    t.after(() => pool.disposeAll())
    await pool.execute({ sessionId: 'late', cells: [{ code: '1' }] })
    // Cell 1 uses up the budget; the fresh kernel cell 2 asks for cannot start within it.
    const r = await pool.execute({
      sessionId: 'late',
      deadlineMs: 1000,
      cells: [{ code: 'import time\nprint("A ran")\ntime.sleep(0.99)' }, { code: 'print("B ran")', reset: true }],
    })
    assert.equal(r.timedOut, true, mode)
    assert.match(r.output, /A ran/, `${mode}: the first cell's output is kept: ${r.output}`)
    assert.doesNotMatch(r.output, /B ran/, mode)
    assert.ok(r.cells.length >= 1 && r.cells[0].stdout === 'A ran\n', `${mode}: ${JSON.stringify(r.cells.map((c) => c.stdout))}`)
  }
})

test('timeouts: default, clamp notice, 0 = none; a queued call aborted before its turn', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const clamped = await pool.execute({ sessionId: 't', timeoutSeconds: 99999, cells: [cell('1')] })
  assert.match(clamped.output, /^\[Timeout clamped to 3600s \(requested 99999s; allowed range 1-3600s\)\.\]\n/)
  const none = await pool.execute({ sessionId: 't', timeoutSeconds: 0, cells: [cell('import time; time.sleep(1.2); 5')] })
  assert.equal(value(none), '5')
  assert.doesNotMatch(none.output, /clamped/)
  const timedOut = await pool.execute({ sessionId: 't', timeoutSeconds: 1, cells: [cell('import time; time.sleep(30)')] })
  assert.equal(timedOut.timedOut, true)
  assert.match(timedOut.output, /timed out after 1s/)

  const first = pool.execute({ sessionId: 't', cells: [cell('import time; time.sleep(0.5)')] })
  const controller = new AbortController()
  const queued = pool.execute({ sessionId: 't', signal: controller.signal, cells: [cell('queued_ran = True')] })
  controller.abort()
  const q = await queued
  assert.equal(q.cancelled, true)
  assert.equal(q.output, '')
  assert.equal(q.exitCode, null)
  await first
  assert.equal(value(await pool.execute({ sessionId: 't', cells: [cell("'queued_ran' in globals()")] })), 'False')
})

test('a request aborted while its kernel starts is cancelled before its first cell: no "(no output)", and the kernel is ended', async (t) => {
  const dir = tempDir()
  // Starts after 2 s: the abort comes while the kernel is starting.
  const exe = fakeInterpreter(dir, `${NO_COMPILE}sleep 2; exec ${python} "$@"`)
  for (const mode of ['per-call', 'session']) {
    // The kernel being started is shut down before the result: a short grace keeps that
    // well inside the 2 s the start would take.
    const pool = new KernelPool({ mode, prewarm: 0, shutdownGraceMs: 200, kernel: { interpreter: exe, startupTimeoutMs: 60_000 } })
    t.after(() => pool.disposeAll())
    const controller = new AbortController()
    const started = Date.now()
    const pending = pool.execute({ sessionId: 'aborted', signal: controller.signal, cells: [{ code: 'print("ran")' }] })
    await sleep(300)
    controller.abort()
    const r = await pending
    assert.ok(Date.now() - started < 1800, `${mode}: took ${Date.now() - started} ms`)
    assert.equal(r.cancelled, true, mode)
    assert.equal(r.exitCode, null, mode)
    assert.equal(r.timedOut, false, mode)
    assert.deepEqual(r.annotations, ['Cancelled while its kernel was starting; nothing ran.'], mode)
    assert.equal(r.output, '[Cancelled while its kernel was starting; nothing ran.]\n', mode)
    assert.deepEqual(processesWith(dir), [], `${mode}: the kernel being started was left running`)
  }
})

test('a request whose deadline is spent before its kernel starts times out: nothing ran, no "(no output)"', async (t) => {
  for (const mode of ['per-call', 'session']) {
    const pool = new KernelPool({ kernel, mode, prewarm: 0 })
    t.after(() => pool.disposeAll())
    const r = await pool.execute({ sessionId: 'spent', deadlineMs: 1, cells: [{ code: 'print("ran")' }] })
    assert.equal(r.timedOut, true, mode)
    assert.equal(r.cancelled, true, mode)
    assert.equal(r.exitCode, null, mode)
    assert.equal(r.output, "[Command timed out after 1 ms (the request's deadline) before its first cell started; nothing ran.]\n", mode)
  }
})
