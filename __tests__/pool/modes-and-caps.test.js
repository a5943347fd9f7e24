'use strict'
// A request's own `mode` against its pool's, and caps and idle timeouts that are none
// ('unlimited', 'never'). Real Python.
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, python, namespaceMembers, waitFor, tempDir } = require('../helpers/kernel')
const { KERNEL_TOKEN_PY: TOKEN, PID_NAMESPACE_PY: NS } = require('../helpers/kernel')

const { KernelPool } = addon
const kernel = { interpreter: python }
const cell = (code) => ({ code })
const value = (r) => r.cells.at(-1).result?.['text/plain']
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
// A kernel is known in a cell by TOKEN (random per kernel process) and NS (its PID
// namespace, whose members the host can list while it lives).
const identity = `(${TOKEN}, ${NS})`
const parse = (text) => text.match(/^\('([0-9a-f]{16})', '(pid:\[\d+\])'\)$/).slice(1)

test("mode: 'per-call' in a session pool: a fresh kernel each time, ended after; the session's kernel and state untouched", async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const [sessionToken, sessionNs] = parse(value(await pool.execute({ sessionId: 'a', cells: [cell(`x = 1; ${identity}`)] })))
  const sessionPid = pool.sessions[0].pid
  const seen = new Set([sessionToken])
  for (let i = 0; i < 2; i++) {
    const r = await pool.execute({ sessionId: 'a', mode: 'per-call', cells: [cell(`y = 2; ('x' in globals(), ${identity})`)] })
    const [inside, token, ns] = value(r).slice(1, -1).split(', ')
    assert.equal(inside, 'False', "the session's state is not the per-call kernel's")
    assert.ok(!seen.has(token.slice(1, -1)), 'a kernel of its own each time')
    seen.add(token.slice(1, -1))
    assert.notEqual(ns.slice(1, -1), sessionNs)
    assert.ok(await waitFor(() => namespaceMembers(ns.slice(1, -1)).length === 0, { timeoutMs: 3000 }), 'its process is gone')
  }
  assert.equal(pool.sessions.length, 1)
  assert.equal(pool.sessions[0].pid, sessionPid)
  const after = await pool.execute({ sessionId: 'a', cells: [cell(`(x, 'y' in globals(), ${TOKEN})`)] })
  assert.equal(value(after), `(1, False, '${sessionToken}')`, 'the session kept its kernel and state')
})

test("mode: 'session' in a per-call pool: a session that keeps its state; the pool's own calls stay fresh", async (t) => {
  const pool = new KernelPool({ kernel, mode: 'per-call' })
  t.after(() => pool.disposeAll())
  const [token] = parse(value(await pool.execute({ sessionId: 's', mode: 'session', cells: [cell(`kept = 7; ${identity}`)] })))
  const again = await pool.execute({ sessionId: 's', mode: 'session', cells: [cell(`(kept, ${TOKEN})`)] })
  assert.equal(value(again), `(7, '${token}')`)
  assert.equal(pool.sessions.length, 1)
  const fresh = await pool.execute({ sessionId: 's', cells: [cell(`('kept' in globals(), ${TOKEN})`)] })
  assert.match(value(fresh), /^\(False, '[0-9a-f]{16}'\)$/)
  assert.notEqual(value(fresh), `(False, '${token}')`)
  await assert.rejects(pool.execute({ sessionId: 's', mode: 'cluster', cells: [cell('1')] }), (err) => {
    assert.equal(err.code, 'ERR_INVALID_ARG')
    assert.match(err.message, /mode.*'session' or 'per-call'.*'cluster'/)
    return true
  })
})

test("a per-call request's kernel counts against the pool's cap", async (t) => {
  const pool = new KernelPool({ kernel, maxSessions: 1, prewarm: 0, acquireTimeoutMs: 0 })
  t.after(() => pool.disposeAll())
  const busy = pool.execute({ sessionId: 'busy', cells: [cell('import time; time.sleep(2)')] })
  await waitFor(() => pool.sessions.some((s) => s.busy && s.pid))
  await assert.rejects(pool.execute({ mode: 'per-call', cells: [cell('1')] }), (err) => {
    assert.equal(err.code, 'ERR_POOL_FULL')
    assert.match(err.message, /maxSessions/)
    return true
  })
  await busy
})

test("maxSessions: 'unlimited' runs more than 4 sessions at once and evicts none", async (t) => {
  const dir = tempDir()
  const pool = new KernelPool({ kernel: { ...kernel, cwd: dir }, maxSessions: 'unlimited', prewarm: 0, acquireTimeoutMs: 0 })
  t.after(() => pool.disposeAll())
  const ids = ['a', 'b', 'c', 'd', 'e', 'f']
  // Each marks itself in the shared cwd and waits until all six have: with any cap under
  // six they could not all run at once, and would wait (or fail: no wait allowed).
  const code = (id) =>
    `import os, time\nos.makedirs('marks', exist_ok=True)\nopen('marks/${id}', 'w').close()\nfor _ in range(600):\n    if len(os.listdir('marks')) == 6: break\n    time.sleep(0.05)\nstate = len(os.listdir('marks'))\nstate`
  const results = await Promise.all(ids.map((id) => pool.execute({ sessionId: id, cells: [cell(code(id))] })))
  assert.deepEqual(results.map(value), ids.map(() => '6'))
  assert.equal(pool.sessions.filter((s) => s.pid).length, 6)
  const again = await Promise.all(ids.map((id) => pool.execute({ sessionId: id, cells: [cell('state')] })))
  assert.deepEqual(again.map((r) => [value(r), r.sessionLost]), ids.map(() => ['6', false]), 'nobody was evicted')
})

test("idleTimeoutMs: 'never' keeps an idle session that a short timeout evicts", async (t) => {
  const never = new KernelPool({ kernel, idleTimeoutMs: 'never', prewarm: 0 })
  const short = new KernelPool({ kernel, idleTimeoutMs: 200, prewarm: 0 })
  t.after(() => Promise.all([never.disposeAll(), short.disposeAll()]))
  for (const pool of [never, short]) await pool.execute({ sessionId: 'idle', cells: [cell('kept = 1')] })
  await sleep(1200)
  const evicted = await short.execute({ sessionId: 'idle', cells: [cell("'kept' in globals()")] })
  assert.equal(value(evicted), 'False', 'the control pool evicted it')
  assert.equal(evicted.sessionLost, true)
  const kept = await never.execute({ sessionId: 'idle', cells: [cell("'kept' in globals()")] })
  assert.equal(value(kept), 'True')
  assert.equal(kept.sessionLost, false)
})

test("'unlimited' and 'never' are the only words; other strings are ERR_INVALID_ARG naming the option", () => {
  const bad = [
    [{ maxSessions: 'infinite' }, /`maxSessions`: must be an integer from 1 to 1024 or 'unlimited', got 'infinite'/],
    [{ maxSessions: 0 }, /`maxSessions`: must be an integer from 1 to 1024 or 'unlimited', got 0/],
    [{ mode: 'per-call', maxConcurrent: 'all' }, /`maxConcurrent`: must be an integer from 1 to 1024 or 'unlimited', got 'all'/],
    [{ idleTimeoutMs: 'forever' }, /`idleTimeoutMs`: must be a number of milliseconds from 0 to 604800000 or 'never', got 'forever'/],
    [{ idleTimeoutMs: 'unlimited' }, /`idleTimeoutMs`: .* or 'never', got 'unlimited'/],
  ]
  for (const [options, message] of bad) {
    assert.throws(() => new KernelPool({ kernel, ...options }), (err) => {
      assert.equal(err.code, 'ERR_INVALID_ARG', JSON.stringify(options))
      assert.match(err.message, message)
      return true
    })
  }
  const pool = new KernelPool({ kernel, mode: 'per-call', maxConcurrent: 'unlimited', idleTimeoutMs: 'never', prewarm: 0 })
  return pool.disposeAll()
})

test('disposeAll stops a per-call request running in a session pool and ends its kernel', async () => {
  const pool = new KernelPool({ kernel, prewarm: 0, shutdownGraceMs: 200 })
  await pool.execute({ sessionId: 'a', cells: [cell('x = 1')] })
  const chunks = []
  const running = pool.execute({
    sessionId: 'a',
    mode: 'per-call',
    onOutput: (chunk) => chunks.push(chunk),
    cells: [cell(`print(${NS}, flush=True)\nimport time; time.sleep(60)`)],
  })
  assert.ok(await waitFor(() => /pid:\[\d+\]/.test(chunks.join('')), { timeoutMs: 20_000 }), 'the cell runs')
  const ns = chunks.join('').match(/pid:\[\d+\]/)[0]
  const started = Date.now()
  await pool.disposeAll({ budgetMs: 3000 })
  const r = await running
  assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`)
  assert.equal(r.cancelled, true)
  assert.equal(r.exitCode, null)
  assert.ok(await waitFor(() => namespaceMembers(ns).length === 0, { timeoutMs: 3000 }), 'its kernel is gone')
  await assert.rejects(pool.execute({ mode: 'per-call', cells: [cell('1')] }), (err) => err.code === 'ERR_POOL_DISPOSED')
})
