'use strict'
// The pool's lifecycle on pykernel/testing's stand-in kernel: reuse, reset, restarts after
// a death, per-call kernels and their deadlines, aborts, and calls that never reach a
// kernel. The kernels start in about 0.1 s and do exactly what each test scripts, so
// every outcome here is forced, not raced for.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { KernelPool } = require('../..')
const { createStandInKernel, latch } = require('../../testing')

async function standIn(t, script) {
  const fake = await createStandInKernel(script)
  t.after(() => fake.close())
  return fake
}

function pool(t, fake, options = {}) {
  const p = new KernelPool({ prewarm: 0, ...options, kernel: { launcher: fake.launcher, ...options.kernel } })
  t.after(() => p.disposeAll({ budgetMs: 2_000 }))
  return p
}

async function until(what, check, ms = 5_000) {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) assert.fail(`gave up waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

/** A script whose cell `block` waits for `gate`, whose other cells print their code. */
function script(gate) {
  return {
    async onExecute(cell, k) {
      if (cell.code === 'block') await gate.promise
      else k.stdout(`${cell.code}\n`)
    },
  }
}

test('session kernels are reused; per-call kernels start and shut down once per call', async (t) => {
  const sessions = await standIn(t, script())
  const s = pool(t, sessions)
  for (const code of ['a', 'b', 'c']) assert.equal((await s.execute({ sessionId: 'x', cells: [{ code }] })).output, `${code}\n`)
  assert.equal(sessions.starts, 1)
  assert.equal(sessions.kernels[0].cells.length, 3)

  const perCall = await standIn(t, script())
  const p = pool(t, perCall, { mode: 'per-call' })
  for (const code of ['a', 'b']) assert.equal((await p.execute({ sessionId: 'x', cells: [{ code }] })).output, `${code}\n`)
  assert.equal(perCall.starts, 2)
  await Promise.all(perCall.kernels.map((k) => k.ended))
  assert.deepEqual(perCall.kernels.map((k) => [k.cells.length, k.exitRequests, k.exit.reason]), [[1, 1, 'exit'], [1, 1, 'exit']])
})

test('reset gives a fresh kernel and shuts the old one down; concurrent resets share one', async (t) => {
  const fake = await standIn(t, script())
  const p = pool(t, fake)
  await p.execute({ sessionId: 'x', cells: [{ code: 'a' }] })
  const r = await p.execute({ sessionId: 'x', reset: true, cells: [{ code: 'b' }] })
  assert.equal(r.output, 'b\n')
  assert.equal(r.kernelRestarted, false, 'a reset asked for is no restart')
  assert.equal(fake.starts, 2)
  assert.equal((await fake.kernels[0].ended).reason, 'exit')

  // Three resets asked for at once, while the session is busy: one fresh kernel.
  const gate = latch()
  fake.onExecute = script(gate).onExecute
  const busy = p.execute({ sessionId: 'x', cells: [{ code: 'block' }] })
  await until('the blocking cell', () => fake.kernels[1].busy)
  const resets = ['c', 'd', 'e'].map((code) => p.execute({ sessionId: 'x', reset: true, cells: [{ code }] }))
  gate.release()
  await busy
  assert.deepEqual((await Promise.all(resets)).map((r) => r.output), ['c\n', 'd\n', 'e\n'])
  assert.equal(fake.starts, 3)
  assert.deepEqual(fake.kernels[2].cells.map((c) => c.code), ['c', 'd', 'e'])
})

test('a kernel that died is replaced: at the next call, and after it died under a cell', async (t) => {
  const fake = await standIn(t, script())
  const p = pool(t, fake)
  await p.execute({ sessionId: 'x', cells: [{ code: 'a' }] })
  // Resolves once the host has reaped it: the pool has seen it end.
  await fake.kernels[0].die({ code: 3 })
  const next = await p.execute({ sessionId: 'x', cells: [{ code: 'b' }] })
  assert.match(next.output, /had ended since the last call \(exit code 3\)/)
  assert.match(next.output, /b\n$/)
  assert.equal(next.kernelRestarted, true)
  assert.equal(next.sessionLost, true)
  assert.equal(fake.starts, 2)

  fake.onExecute = async (cell, k) => {
    k.stdout('partial\n')
    await k.die({ signal: 'SIGKILL' })
  }
  const died = await p.execute({ sessionId: 'x', cells: [{ code: 'c' }] })
  assert.equal(died.kernelDied, true)
  assert.match(died.output, /partial/)
  assert.match(died.output, /was not run again/)
  fake.onExecute = script().onExecute
  const after = await p.execute({ sessionId: 'x', cells: [{ code: 'd' }] })
  assert.equal(after.kernelRestarted, true)
  assert.equal(after.sessionLost, true)
  assert.match(after.output, /d\n$/)
  assert.equal(fake.starts, 3)
})

test('a kernel that is going when a call reaches it: the call runs in a fresh one, and says nothing of the dead attempt', async (t) => {
  const fake = await standIn(t, script())
  const p = pool(t, fake)
  await p.execute({ sessionId: 'x', cells: [{ code: 'a' }] })
  const [first] = fake.kernels
  // Its stdin closed, so the request's first write fails; it dies a moment later.
  await first.closeInput()
  setTimeout(() => first.die({ code: 3 }), 300)
  const r = await p.execute({ sessionId: 'x', cells: [{ code: 'b' }] })
  assert.equal(r.kernelRestarted, true)
  assert.equal(r.exitCode, 0)
  assert.deepEqual(first.cells.map((c) => c.code), ['a'])
  assert.match(r.output, /ended before this call's first cell reached it/)
  assert.doesNotMatch(r.output, /KernelDied|died during the cell/, 'no cell ran in the dead kernel')
  assert.match(r.output, /b\n$/)
})

test('a kernel the heartbeat finds wedged is replaced, although its shutdown is not confirmed', async (t) => {
  const fake = await standIn(t, script())
  const p = pool(t, fake, { heartbeatIntervalMs: 100, heartbeatTimeoutMs: 100, shutdownGraceMs: 100 })
  await p.execute({ sessionId: 'x', cells: [{ code: 'a' }] })
  const [first] = fake.kernels
  first.ignore({ pings: true, shutdown: true })
  await until('the heartbeat to end the wedged kernel', () => first.exitRequests === 1)
  const r = await p.execute({ sessionId: 'x', cells: [{ code: 'b' }] })
  assert.match(r.output, /b\n$/)
  assert.equal(r.kernelRestarted, true)
  assert.equal(r.sessionLost, true)
  assert.equal(fake.starts, 2)
  // Its shutdown was not confirmed in the 3 x 100 ms (it was alive then); the host's link
  // cut ended it all the same.
  assert.equal((await first.ended).reason, 'killed')
})

test('a queued call aborted before it reaches the kernel returns cancelled with empty output', async (t) => {
  const gate = latch()
  const fake = await standIn(t, script(gate))
  const p = pool(t, fake)
  const busy = p.execute({ sessionId: 'x', cells: [{ code: 'block' }] })
  const k = await fake.kernel(1)
  await until('the blocking cell', () => k.busy)
  const abort = new AbortController()
  const queued = p.execute({ sessionId: 'x', cells: [{ code: 'queued' }], signal: abort.signal })
  abort.abort()
  const r = await queued
  assert.equal(r.cancelled, true)
  assert.equal(r.output, '')
  gate.release()
  assert.equal((await busy).exitCode, 0)
  assert.deepEqual(k.cells.map((c) => c.code), ['block'], 'the aborted call never reached the kernel')
})

test('per-call: a start-up longer than the deadline times out and its kernel is ended', async (t) => {
  const fake = await standIn(t, { onStart: () => new Promise(() => {}) })
  const p = pool(t, fake, { mode: 'per-call' })
  const r = await p.execute({ sessionId: 'x', cells: [{ code: 'a' }], deadlineMs: 300 })
  assert.equal(r.timedOut, true)
  assert.equal(r.exitCode, null)
  assert.match(r.output, /Command timed out after 300 ms \(the request's deadline\) before its first cell started/)
  const [k] = fake.kernels
  // Shut down as any half-started kernel is: asked to exit (the stand-in obeys), else killed.
  assert.ok(['exit', 'SIGKILL', 'killed'].includes((await k.ended).reason))
  assert.equal(k.exitRequests <= 1, true, 'shut down once')
  assert.equal(k.cells.length, 0)
})

test('per-call: a budget spent waiting for room times out before any kernel starts', async (t) => {
  const gate = latch()
  const fake = await standIn(t, script(gate))
  const p = pool(t, fake, { mode: 'per-call', maxConcurrent: 1 })
  const busy = p.execute({ sessionId: 'x', cells: [{ code: 'block' }] })
  await until('the blocking cell', () => fake.kernels[0]?.busy)
  const r = await p.execute({ sessionId: 'y', cells: [{ code: 'a' }], deadlineMs: 200 })
  assert.equal(r.timedOut, true)
  assert.equal(r.exitCode, null)
  assert.equal(fake.starts, 1, 'no kernel was started for it')
  gate.release()
  await busy
})

test('per-call: a call aborted while its kernel starts is cancelled and says nothing ran', async (t) => {
  // A start of 1 s, as a slow Python's: long enough to abort in, short of the start-up timeout.
  const fake = await standIn(t, { onStart: () => new Promise((resolve) => setTimeout(resolve, 1_000)) })
  const p = pool(t, fake, { mode: 'per-call' })
  const abort = new AbortController()
  const call = p.execute({ sessionId: 'x', cells: [{ code: 'a' }], signal: abort.signal })
  const k = await fake.kernel(1)
  abort.abort()
  const r = await call
  assert.equal(r.cancelled, true)
  // Nothing ran: not the "(no output)" of a cell that ran and printed nothing.
  assert.doesNotMatch(r.output, /\(no output\)/)
  await k.ended
  assert.equal(k.cells.length, 0)
})

test('per-call: a timed-out kernel is shut down exactly once', async (t) => {
  const fake = await standIn(t, { onExecute: (cell) => new Promise((resolve) => cell.signal.addEventListener('abort', resolve)) })
  const p = pool(t, fake, { mode: 'per-call' })
  const r = await p.execute({ sessionId: 'x', cells: [{ code: 'a' }], timeoutMs: 200 })
  assert.equal(r.timedOut, true)
  const [k] = fake.kernels
  assert.equal((await k.ended).reason, 'exit')
  assert.equal(k.interrupts, 1)
  assert.equal(k.exitRequests, 1)
  assert.equal(fake.starts, 1)
})
