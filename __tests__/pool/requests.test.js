'use strict'
// Per-request settings and lifecycle: env, artifactsDir, per-cell resets, bridge callers,
// reopening a disposed pool. (A request's timeouts and deadlines are in
// timeouts-and-deadlines.test.js.) Real Python.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { addon, python, startKernel, tempDir } = require('../helpers/kernel')
const { KERNEL_TOKEN_PY: TOKEN } = require('../helpers/kernel')

const { KernelPool } = addon
const kernel = { interpreter: python }
const value = (r) => r.cells.at(-1).result?.['text/plain']
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

test('a pool request env is for its cells only: no hidden cell, no execution count', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const r = await pool.execute({
    sessionId: 'env',
    env: { PK_REQ: 'for-this-request' },
    cells: [{ code: 'import os; a = os.environ.get("PK_REQ")' }, { code: '(a, os.environ.get("PK_REQ"))' }],
  })
  assert.equal(value(r), "('for-this-request', 'for-this-request')")
  assert.deepEqual(r.cells.map((c) => c.executionCount), [1, 2], 'the env took no cell of its own')
  const after = await pool.execute({ sessionId: 'env', cells: [{ code: 'os.environ.get("PK_REQ")' }] })
  assert.equal(value(after), undefined, 'the env outlived its request')
  assert.equal(after.cells[0].executionCount, 3)
  await assert.rejects(pool.execute({ sessionId: 'env', env: { PK_REQ: 42 }, cells: [{ code: '1' }] }), (err) => {
    assert.equal(err.code, 'ERR_INVALID_ARG')
    assert.match(err.message, /env/)
    return true
  })
  assert.equal(value(await pool.execute({ sessionId: 'env', cells: [{ code: '2 + 2' }] })), '4')
})

test('a request artifactsDir takes the full output in place of the pool one, with its safety checks', async (t) => {
  const poolDir = tempDir()
  const pool = new KernelPool({ kernel, artifactsDir: poolDir })
  t.after(() => pool.disposeAll())
  const mine = path.join(tempDir(), 'mine')
  const big = { code: 'for i in range(20000): print("line", i)' }
  const r = await pool.execute({ sessionId: 'art', artifactsDir: mine, cells: [big] })
  assert.ok(r.truncated?.artifactPath, JSON.stringify(r.truncated))
  assert.equal(path.dirname(r.truncated.artifactPath), mine)
  assert.match(fs.readFileSync(r.truncated.artifactPath, 'utf8'), /line 19999\n/)
  const open = tempDir()
  fs.chmodSync(open, 0o777)
  await assert.rejects(pool.execute({ sessionId: 'art', artifactsDir: open, cells: [{ code: '1' }] }), (err) => {
    assert.equal(err.code, 'ERR_ARTIFACTS_DIR')
    assert.match(err.message, /writable/)
    return true
  })
  const pooled = await pool.execute({ sessionId: 'art', cells: [big] })
  assert.equal(path.dirname(pooled.truncated.artifactPath), poolDir, 'the pool dir is used without one')
})

test('every bridge call names its session and owner, so one onCall tells concurrent sessions apart', async (t) => {
  const calls = []
  const pool = new KernelPool({
    kernel: {
      ...kernel,
      onCall: async (call) => {
        calls.push(call)
        await sleep(100)
        return `${call.sessionId}/${call.owner}`
      },
    },
  })
  t.after(() => pool.disposeAll())
  const cells = [{ code: 'import threading\nreplies = []\nts = [threading.Thread(target=lambda: replies.append(tool.x())) for _ in range(2)]\n[t.start() for t in ts]; [t.join() for t in ts]\nsorted(replies)' }]
  const [a, b] = await Promise.all([
    pool.execute({ sessionId: 'a', cells }),
    pool.execute({ sessionId: 'b', ownerId: 'user-7', cells }),
  ])
  assert.equal(value(a), "['a/a', 'a/a']")
  assert.equal(value(b), "['b/user-7', 'b/user-7']")
  assert.equal(calls.length, 4)
  for (const call of calls) {
    assert.equal(call.name, 'x')
    assert.match(call.runId, /^r\d+-/)
  }
  assert.deepEqual(calls.map((c) => `${c.sessionId}/${c.owner}`).sort(), ['a/a', 'a/a', 'b/user-7', 'b/user-7'])

  const seen = []
  const bare = await startKernel({ sessionId: 'solo', onCall: (call) => seen.push(call) })
  t.after(() => bare.shutdown())
  await bare.execute('tool.y()')
  assert.equal(seen[0].sessionId, 'solo')
  assert.equal('owner' in seen[0], false, 'a bare kernel has no owner')
})

test('two requests of one sessionId running at once on two kernels (another cwd) are told apart by their requestId', async (t) => {
  const calls = []
  // Each call is answered once all four are in: the two requests' cells run at once.
  let allIn
  const four = new Promise((resolve) => (allIn = resolve))
  let answeredBeforeAllIn = 0
  const pool = new KernelPool({
    kernel: {
      ...kernel,
      onCall: async (call) => {
        calls.push(call)
        if (calls.length === 4) allIn()
        await Promise.race([four, sleep(30000).then(() => answeredBeforeAllIn++)])
        return call.requestId ?? null
      },
    },
  })
  t.after(() => pool.disposeAll())
  const [one, two] = [tempDir(), tempDir()]
  const code = 'import threading\nout = []\nt = threading.Thread(target=lambda: out.append(tool.whoami()))\nt.start()\nout.append(tool.whoami())\nt.join()\nout'
  const [a, b] = await Promise.all([
    pool.execute({ sessionId: 'same', cwd: one, requestId: 'req-a', cells: [{ code }] }),
    pool.execute({ sessionId: 'same', cwd: two, requestId: 'req-b', cells: [{ code }] }),
  ])
  assert.equal(value(a), "['req-a', 'req-a']", a.output)
  assert.equal(value(b), "['req-b', 'req-b']", b.output)
  assert.equal(pool.sessions.length, 2, 'two kernels')
  assert.equal(answeredBeforeAllIn, 0, 'both requests called at once')
  assert.deepEqual(calls.map((c) => c.sessionId), Array(4).fill('same'))
  assert.deepEqual(calls.map((c) => c.requestId).sort(), ['req-a', 'req-a', 'req-b', 'req-b'])
  const runIds = (id) => new Set(calls.filter((c) => c.requestId === id).map((c) => c.runId))
  assert.equal(runIds('req-a').size, 1)
  assert.notDeepEqual(runIds('req-a'), runIds('req-b'))

  const none = await pool.execute({ sessionId: 'same', cwd: one, cells: [{ code: 'repr(tool.whoami())' }] })
  assert.equal(value(none), "'None'")
  assert.equal('requestId' in calls.at(-1), false, 'absent when the request gave none')
  for (const mode of ['per-call']) {
    const perCall = new KernelPool({ kernel: { ...kernel, onCall: (call) => call.requestId }, mode })
    t.after(() => perCall.disposeAll())
    assert.equal(value(await perCall.execute({ sessionId: 's', requestId: 'pc-1', cells: [{ code: 'tool.whoami()' }] })), "'pc-1'", mode)
  }
  await assert.rejects(pool.execute({ sessionId: 'same', requestId: '', cells: [{ code: '1' }] }), (err) => err.code === 'ERR_INVALID_ARG' && /`requestId`: must be 1 to 256 characters, got 0/.test(err.message))
})

test('a cell with reset runs in a fresh kernel; a Kernel refuses it', async (t) => {
  for (const mode of ['session', 'per-call']) {
    const pool = new KernelPool({ kernel, mode })
    t.after(() => pool.disposeAll())
    const r = await pool.execute({
      sessionId: 'r',
      cells: [
        { code: `x = 1; t1 = ${TOKEN}` },
        { code: `y = 2; t2 = ${TOKEN}; ('x' in globals(), 't1' in globals())`, reset: true },
        { code: 'y' },
      ],
    })
    assert.equal(r.exitCode, 0, `${mode}: ${r.output}`)
    assert.equal(r.cells[1].result['text/plain'], '(False, False)', `${mode}: the reset cell saw the old state`)
    assert.equal(r.cells[1].executionCount, 1)
    assert.equal(value(r), '2')
  }
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'first', cells: [{ code: 'kept = 1' }] })
  const first = await pool.execute({ sessionId: 'first', cells: [{ code: "'kept' in globals()", reset: true }] })
  assert.equal(value(first), 'False', "a first cell's reset is the request's")

  const k = await startKernel()
  t.after(() => k.shutdown())
  await assert.rejects(k.evaluate([{ code: '1', reset: true }]), (err) => err.code === 'ERR_INVALID_ARG' && /reset/.test(err.message))
  assert.equal((await k.evaluate([{ code: '1 + 1' }])).output, '2\n')
})

test('disposeAll refuses work until reopen(), which gives fresh kernels', async () => {
  const pool = new KernelPool({ kernel })
  await pool.execute({ sessionId: 'o', cells: [{ code: 'state = 1' }] })
  await pool.disposeAll()
  await assert.rejects(pool.execute({ sessionId: 'o', cells: [{ code: '1' }] }), (err) => err.code === 'ERR_POOL_DISPOSED')
  await assert.rejects(pool.execute({ sessionId: 'o', cells: [{ code: '1' }] }), (err) => err.code === 'ERR_POOL_DISPOSED')
  pool.reopen()
  const r = await pool.execute({ sessionId: 'o', cells: [{ code: "'state' in globals()" }] })
  assert.equal(value(r), 'False')
  assert.equal(pool.sessions.length, 1)
  pool.reopen() // not disposed: nothing changes
  assert.equal(value(await pool.execute({ sessionId: 'o', cells: [{ code: '3' }] })), '3')
  // Before disposeAll() has finished, reopen() is refused: the disposal would end it.
  const disposing = pool.disposeAll()
  assert.throws(() => pool.reopen(), (err) => err.code === 'ERR_POOL_DISPOSED' && /await it, then call reopen/.test(err.message))
  await disposing
  assert.deepEqual(pool.sessions, [])
  pool.reopen()
  assert.equal(value(await pool.execute({ sessionId: 'o', cells: [{ code: '4' }] })), '4')
  await pool.disposeAll()
})

test("a cell printing the host's notices cannot pass them off as the pool's: annotations hold the host's, output escapes the cell's", async (t) => {
  const { FORGED_HOST_LINES, printLines, escaped, hostLinesOf } = require('../helpers/host-lines')
  const { kernelProcess } = require('../helpers/kernel')
  const pool = new KernelPool({ kernel, heartbeatIntervalMs: 100, heartbeatTimeoutMs: 300 })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'forge', cells: [{ code: 'x = 1' }] })
  // A real idle death, so the pool's own notice heads the next call's output.
  const pid = pool.sessions.find((s) => s.key.startsWith('session:forge @ '))?.pid
  process.kill(kernelProcess(pid), 'SIGKILL')
  await sleep(600)
  const r = await pool.execute({ sessionId: 'forge', timeoutSeconds: 99999, cells: [{ code: printLines() }] })
  assert.equal(r.exitCode, 0)
  assert.equal(r.annotations.length, 2, r.annotations.join('\n'))
  assert.match(r.annotations.join('\n'), /clamped/)
  assert.match(r.annotations.join('\n'), /^The Python kernel ended while idle/m)
  const head = r.annotations.map((a) => `[${a}]\n`).join('')
  assert.equal(r.output, head + escaped())
  assert.deepEqual(hostLinesOf(r.output), r.annotations.map((a) => `[${a}]`))
  assert.equal(r.cells[0].stdout, FORGED_HOST_LINES.map((l) => `${l}\n`).join(''))
})
