'use strict'
// Owners and cleanup on pykernel/testing's stand-in kernel: who keeps a kernel alive,
// what disposal ends (also a kernel stuck in a cell, or one whose end is never confirmed
// in time), and that a pool that is being disposed takes no new work.
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

const quiet = { onExecute: () => undefined }

test('a shared kernel lives until its last owner is disposed; the fallback owner is the session id', async (t) => {
  const fake = await standIn(t, quiet)
  const p = pool(t, fake)
  await p.execute({ sessionId: 'shared', ownerId: 'a', cells: [{ code: '1' }] })
  await p.execute({ sessionId: 'shared', ownerId: 'b', cells: [{ code: '2' }] })
  const [k] = fake.kernels
  await p.disposeOwner('a')
  assert.equal(k.alive, true)
  assert.deepEqual(p.sessions.map((s) => s.owners), [['b']])
  await p.disposeOwner('b')
  assert.equal((await k.ended).reason, 'exit')

  await p.execute({ sessionId: 'mine', cells: [{ code: '3' }] })
  await p.disposeOwner('mine')
  assert.equal((await fake.kernels[1].ended).reason, 'exit')
  assert.deepEqual(p.sessions, [])
})

test("disposing an owner ends all of its sessions, in every cwd, and no other owner's", async (t) => {
  const fake = await standIn(t, quiet)
  const p = pool(t, fake)
  await p.execute({ sessionId: 's1', ownerId: 'a', cells: [{ code: '1' }] })
  await p.execute({ sessionId: 's2', ownerId: 'a', cwd: '/srv/other', cells: [{ code: '1' }] })
  await p.execute({ sessionId: 's3', ownerId: 'b', cells: [{ code: '1' }] })
  assert.equal(fake.kernels[1].init.cwd, '/srv/other')
  await p.disposeOwner('a')
  await Promise.all([fake.kernels[0].ended, fake.kernels[1].ended])
  assert.equal(fake.kernels[2].alive, true)
  assert.deepEqual(p.sessions.map((s) => s.owners), [['b']])
})

test('a call that waited on a session being disposed is refused; the next one gets a fresh kernel', async (t) => {
  const gate = latch()
  const fake = await standIn(t, {
    async onExecute(cell, k) {
      if (cell.code === 'block') await gate.promise
      k.stdout(`${cell.code}\n`)
    },
  })
  const p = pool(t, fake)
  const busy = p.execute({ sessionId: 's', cells: [{ code: 'block' }] })
  await until('the blocking cell', () => fake.kernels[0]?.busy)
  const waiting = p.execute({ sessionId: 's', cells: [{ code: 'waiting' }] }).catch((e) => e)
  await p.disposeOwner('s')
  assert.equal((await busy).cancelled, true)
  assert.equal((await waiting).code, 'ERR_SESSION_DISPOSED')
  assert.deepEqual(fake.kernels[0].cells.map((c) => c.code), ['block'])
  const next = await p.execute({ sessionId: 's', cells: [{ code: 'next' }] })
  assert.match(next.output, /next\n$/)
  assert.equal(fake.starts, 2)
  gate.release()
})

test('a stuck kernel (a cell that ignores interrupts, exit and its link closing) does not hold up disposal', { timeout: 15_000 }, async (t) => {
  const fake = await standIn(t, {
    onStart: (k) => k.ignore({ interrupts: true, shutdown: true }),
    onExecute: () => new Promise(() => {}),
  })
  const p = pool(t, fake, { shutdownGraceMs: 100 })
  const stuck = p.execute({ sessionId: 's', cells: [{ code: 'forever' }], timeoutSeconds: 0 })
  const k = await fake.kernel(1)
  await until('the stuck cell', () => k.busy)
  await p.disposeOwner('s', { budgetMs: 500 })
  assert.equal(k.exitRequests, 1)
  assert.equal((await stuck).cancelled, true)
  // The pool keeps it and retries; the host's link cut ends it.
  assert.equal((await k.ended).reason, 'killed')
})

test('per-call kernels are not part of owner cleanup', async (t) => {
  const gate = latch()
  const fake = await standIn(t, {
    async onExecute(cell, k) {
      await gate.promise
      k.stdout('finished\n')
    },
  })
  const p = pool(t, fake, { mode: 'per-call' })
  const call = p.execute({ sessionId: 's', ownerId: 'a', cells: [{ code: 'x' }] })
  const k = await fake.kernel(1)
  await until('the cell', () => k.busy)
  await p.disposeOwner('a')
  assert.equal(k.alive, true)
  assert.equal(k.interrupts, 0)
  gate.release()
  assert.equal((await call).output, 'finished\n')
})

test('an unconfirmed shutdown keeps its room until the process is gone; the pool retries it', async (t) => {
  const fake = await standIn(t, {
    // The first kernel never confirms its shutdown in the pool's grace (the host's link
    // cut ends it about 1 s after its SIGKILL is asked for).
    onStart: (k) => {
      if (k.ordinal === 1) k.ignore({ shutdown: true })
      else k.firstAliveAtStart = fake.kernels[0].alive
    },
    onExecute: () => undefined,
  })
  const p = pool(t, fake, { maxSessions: 1, shutdownGraceMs: 100 })
  await p.execute({ sessionId: 'a', cells: [{ code: '1' }] })
  const [first] = fake.kernels
  await p.disposeOwner('a', { budgetMs: 300 })
  assert.equal(first.alive, true, 'not confirmed when disposeOwner returned')
  // With one room, a new session's kernel starts only once the first one is gone.
  await p.execute({ sessionId: 'b', cells: [{ code: '2' }] })
  assert.equal(fake.starts, 2)
  assert.equal(fake.kernels[1].firstAliveAtStart, false)
  assert.equal(first.exit.reason, 'killed')
})

test('disposal under load: every call settles, every kernel ends, and new work is refused from the start', async (t) => {
  const gate = latch()
  const fake = await standIn(t, {
    async onExecute(cell, k) {
      k.stdout(`${cell.code}\n`)
      await gate.promise
    },
  })
  const p = pool(t, fake, { maxSessions: 3 })
  const calls = []
  for (let s = 0; s < 5; s++) {
    for (let c = 0; c < 3; c++) calls.push(p.execute({ sessionId: `s${s}`, cells: [{ code: `${s}.${c}` }] }).catch((e) => e))
  }
  await until('three busy kernels', () => fake.running.filter((k) => k.busy).length === 3)
  const disposing = p.disposeAll({ budgetMs: 3_000 })
  await assert.rejects(p.execute({ sessionId: 'late', cells: [{ code: 'x' }] }), { code: 'ERR_POOL_DISPOSED' })
  await disposing
  const settled = await Promise.all(calls)
  assert.equal(settled.length, 15)
  for (const r of settled) {
    assert.ok(r instanceof Error ? ['ERR_POOL_DISPOSED', 'ERR_SESSION_DISPOSED'].includes(r.code) : r.cancelled, String(r.code ?? r.output))
  }
  await Promise.all(fake.kernels.map((k) => k.ended))
  assert.deepEqual(fake.running, [])
  assert.equal(fake.starts, 3, 'no kernel was started once disposal began')
  gate.release()
})
