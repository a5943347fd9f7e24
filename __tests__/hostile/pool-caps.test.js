'use strict'
// Hostile load on a pool: its caps bound the kernel processes it runs at every
// moment, whatever callers do at once, and a request that cannot start leaves nothing
// behind. Kernels are counted from /proc, not from the pool's own account.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { addon, python, isAlive, waitFor, hostChildren, tempDir, fakeInterpreter, sleep, KERNEL_TOKEN_PY: TOKEN } = require('./_common')

const { KernelPool } = addon
const kernel = { interpreter: python }
const cell = (code) => ({ code })
const value = (r) => r.cells.at(-1)?.result?.['text/plain']
const sessionKeys = (pool) => pool.sessions.map((s) => s.key.split(' ')[0]).sort()

/** The kernels this process runs now: its children running the runner (a sandboxed
 *  kernel's init, the Python kernel being init's child in its PID namespace; without the
 *  sandbox the kernel itself). Interpreter probes and the launcher's short-lived forks are
 *  no kernels. Other test files run in other processes: their kernels are not counted. */
function liveKernels() {
  return hostChildren((pid) => {
    const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0')
    return argv[1] === '-u' && argv[2]?.endsWith('runner.py')
  })
}

/** Counts live kernels every few milliseconds until stopped; the peak and how many
 *  samples were taken (so a test can tell the sampler really ran). */
function kernelSampler(intervalMs = 5) {
  let peak = 0
  let samples = 0
  const sample = () => {
    peak = Math.max(peak, liveKernels().length)
    samples++
  }
  sample()
  const timer = setInterval(sample, intervalMs)
  timer.unref() // a failed assertion before stop() must not keep the test process alive
  return {
    stop() {
      clearInterval(timer)
      sample()
      return { peak, samples }
    },
  }
}

test('maxSessions 2: 20 new sessions at once never run more than 2 kernels (the spare included); all complete; the evicted are told', { timeout: 60_000 }, async (t) => {
  // The default prewarm (1) is kept: the spare is one of the 2.
  const pool = new KernelPool({ kernel, maxSessions: 2 })
  t.after(() => pool.disposeAll())
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 10_000 }), 'the spare is up')
  const sampler = kernelSampler()
  const ids = Array.from({ length: 20 }, (_, i) => i)
  const started = Date.now()
  const results = await Promise.all(ids.map((i) => pool.execute({ sessionId: `s${i}`, cells: [cell(`x = ${i}; (${i}, ${TOKEN})`)] })))
  const took = Date.now() - started
  const { peak, samples } = sampler.stop()
  const tokens = new Set()
  for (const [i, r] of results.entries()) {
    assert.equal(r.exitCode, 0, r.output)
    const [, n, token] = value(r).match(/^\((\d+), '([0-9a-f]{16})'\)$/)
    assert.equal(Number(n), i)
    tokens.add(token)
  }
  assert.equal(tokens.size, 20, 'each session ran in a kernel of its own')
  assert.ok(samples >= 20, `sampled ${samples} times`)
  assert.ok(peak <= 2, `${peak} kernels ran at once (cap 2; ${took} ms)`)
  assert.equal(peak, 2, 'the sampler saw the pool at its cap')
  // Nothing to shrink back: the cap held throughout, and the two last sessions remain.
  const live = liveKernels()
  assert.ok(live.length <= 2, `${live.length} kernels after the run`)
  assert.equal(pool.sessions.length, 2)
  for (const s of pool.sessions) assert.ok(live.includes(s.pid), `session ${s.key} runs kernel ${s.pid}`)

  // An evicted session's next call is told its state is gone.
  const evicted = ids.find((i) => !pool.sessions.some((s) => s.key.startsWith(`session:s${i} @ `)))
  const again = await pool.execute({ sessionId: `s${evicted}`, cells: [cell("'x' in globals()")] })
  assert.equal(value(again), 'False')
  assert.equal(again.sessionLost, true)
  assert.match(again.output, /^\[This session's kernel was shut down to make room for another session \(the pool runs at most 2 kernels: `maxSessions`\); a new one was started and earlier state is gone\.\]\n/)
  assert.ok(liveKernels().length <= 2)
})

test('spares count against maxSessions: they fill free room only; a session they cannot serve ends one instead of exceeding the cap', { timeout: 60_000 }, async (t) => {
  const pool = new KernelPool({ kernel, maxSessions: 2 }) // prewarm 1
  t.after(() => pool.disposeAll())
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 10_000 }))
  const sampler = kernelSampler()
  await pool.execute({ sessionId: 'a', cells: [cell('kept = "a"')] }) // claims the spare
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 10_000 }), 'a new spare fills the free room')
  const [spare] = pool.spares
  const pidA = pool.sessions[0].pid
  assert.deepEqual(liveKernels().sort(), [pidA, spare].sort())
  // Another interpreter: the spare cannot serve it, and there is no free room.
  const other = await pool.execute({ sessionId: 'c', interpreter: '/usr/bin/python3', cells: [cell('import sys; sys.executable')] })
  assert.equal(value(other), "'/usr/bin/python3'")
  assert.ok(await waitFor(() => !isAlive(spare), { timeoutMs: 3000 }), 'the spare was ended for its room')
  assert.deepEqual(sessionKeys(pool), ['session:a', 'session:c'])
  assert.equal(value(await pool.execute({ sessionId: 'a', cells: [cell('kept')] })), "'a'", 'session a was not evicted')
  await sleep(500) // time for a spare to start, were there room for one
  assert.deepEqual(pool.spares, [])
  assert.equal(liveKernels().length, 2)
  assert.equal(sampler.stop().peak, 2)
})

test('a session evicted after its idle timeout: the kernel is gone, and its next call is told its state is gone', { timeout: 30_000 }, async (t) => {
  const pool = new KernelPool({ kernel, idleTimeoutMs: 300, prewarm: 0 })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'idle', cells: [cell('x = 1')] })
  const pid = pool.sessions[0].pid
  assert.ok(await waitFor(() => pool.sessions.length === 0 && !isAlive(pid), { timeoutMs: 5000 }))
  assert.deepEqual(liveKernels(), [])
  const next = await pool.execute({ sessionId: 'idle', cells: [cell("'x' in globals()")] })
  assert.equal(value(next), 'False')
  assert.match(next.output, /^\[This session was idle for 0\.3 s and its kernel was shut down; a new one was started and earlier state is gone\.\]\n/)
  // Told once.
  assert.equal(next.sessionLost, true)
  const after = await pool.execute({ sessionId: 'idle', cells: [cell('1')] })
  assert.doesNotMatch(after.output, /state is gone/)
  assert.equal(after.sessionLost, false)
})

test('per-call maxConcurrent 2: 20 calls at once never run more than 2 kernels; all complete; none remain', { timeout: 60_000 }, async (t) => {
  const pool = new KernelPool({ mode: 'per-call', kernel, maxConcurrent: 2 })
  t.after(() => pool.disposeAll())
  const sampler = kernelSampler()
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => pool.execute({ cells: [cell(`${i} * 3`)] })))
  const { peak, samples } = sampler.stop()
  assert.deepEqual(results.map(value), Array.from({ length: 20 }, (_, i) => String(i * 3)))
  assert.ok(samples >= 20, `sampled ${samples} times`)
  assert.ok(peak <= 2, `${peak} kernels ran at once (maxConcurrent 2)`)
  assert.equal(peak, 2, 'the sampler saw the pool at its cap')
  assert.ok(await waitFor(() => liveKernels().length === 0, { timeoutMs: 5000 }), `${liveKernels().length} kernels left`)

  // maxConcurrent defaults to maxSessions.
  const three = new KernelPool({ mode: 'per-call', kernel, maxSessions: 3 })
  t.after(() => three.disposeAll())
  const sampler3 = kernelSampler()
  await Promise.all(Array.from({ length: 9 }, () => three.execute({ cells: [cell('import time; time.sleep(0.2)')] })))
  const { peak: peak3 } = sampler3.stop()
  assert.equal(peak3, 3)
})

test('a session beyond the cap waits for a busy one to go idle, then evicts it', { timeout: 30_000 }, async (t) => {
  // No heartbeat: its pings would wake the waiter too, hiding a missed wake-up.
  const pool = new KernelPool({ kernel, maxSessions: 1, prewarm: 0, heartbeatIntervalMs: 0, acquireTimeoutMs: 10_000 })
  t.after(() => pool.disposeAll())
  const sampler = kernelSampler()
  const busy = pool.execute({ sessionId: 'busy', cells: [cell('import time; time.sleep(1); 1')] })
  await waitFor(() => pool.sessions.some((s) => s.pid))
  const started = Date.now()
  const waiting = await pool.execute({ sessionId: 'next', cells: [cell('2')] })
  const waited = Date.now() - started
  assert.equal(value(await busy), '1')
  assert.equal(value(waiting), '2')
  // The busy cell has at most 1 s left; then an eviction and a start.
  assert.ok(waited >= 500 && waited < 3000, `the new session ran as soon as the busy one went idle (${waited} ms)`)
  assert.deepEqual(sessionKeys(pool), ['session:next'])
  assert.equal(sampler.stop().peak, 1)
})

test('all busy past acquireTimeoutMs: ERR_POOL_FULL saying what to do; no phantom session', { timeout: 30_000 }, async (t) => {
  const pool = new KernelPool({ kernel, maxSessions: 1, prewarm: 0, acquireTimeoutMs: 400 })
  t.after(() => pool.disposeAll())
  const busy = pool.execute({ sessionId: 'busy', cells: [cell('x = 1; import time; time.sleep(2.5); x')] })
  await waitFor(() => pool.sessions.some((s) => s.pid))
  const started = Date.now()
  const err = await pool.execute({ sessionId: 'late', cells: [cell('1')] }).then(
    () => null,
    (e) => e,
  )
  const waited = Date.now() - started
  assert.equal(err?.code, 'ERR_POOL_FULL', String(err))
  assert.match(
    err.message,
    /^the KernelPool is full: it runs at most 1 kernels \(`maxSessions`\), all stayed busy, and none became free within \d+ ms\. Raise `maxSessions`, end sessions you no longer need with `disposeOwner`, or wait longer with `acquireTimeoutMs`\.$/,
  )
  assert.ok(waited >= 350 && waited < 2000, `gave up after ${waited} ms (acquireTimeoutMs 400)`)
  assert.deepEqual(sessionKeys(pool), ['session:busy'], 'the call that got no room left no session')
  assert.equal(value(await busy), '1')

  // Per-call mode says so in its own terms.
  const perCall = new KernelPool({ mode: 'per-call', kernel, maxConcurrent: 1, acquireTimeoutMs: 0 })
  t.after(() => perCall.disposeAll())
  let firstRuns = false
  const running = perCall.execute({
    cells: [cell("print('started', flush=True); import time; time.sleep(1.5)")],
    onEvent: () => {
      firstRuns = true
    },
  })
  assert.ok(await waitFor(() => firstRuns, { timeoutMs: 10_000 }), 'the first call runs')
  await assert.rejects(
    perCall.execute({ cells: [cell('1')] }),
    (e) => e.code === 'ERR_POOL_FULL' && /at most 1 kernels \(`maxConcurrent`\).*Raise `maxConcurrent`, make fewer calls at once, or wait longer/.test(e.message),
  )
  assert.equal((await running).exitCode, 0)
})

test('a call aborted while it waits for room is cancelled; nothing ran, nothing is left', { timeout: 30_000 }, async (t) => {
  const pool = new KernelPool({ kernel, maxSessions: 1, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const busy = pool.execute({ sessionId: 'busy', cells: [cell('import time; time.sleep(1.5); 1')] })
  await waitFor(() => pool.sessions.some((s) => s.pid))
  const controller = new AbortController()
  const marker = `${tempDir()}/ran`
  const waiting = pool.execute({ sessionId: 'aborted', signal: controller.signal, cells: [cell(`open(${JSON.stringify(marker)}, 'w').close()`)] })
  await sleep(200)
  const started = Date.now()
  controller.abort()
  const r = await waiting
  assert.ok(Date.now() - started < 500, `answered ${Date.now() - started} ms after the abort`)
  assert.equal(r.cancelled, true)
  assert.equal(r.exitCode, null)
  assert.match(r.output, /^\[Cancelled while waiting for room in the pool; nothing ran\.\]/)
  assert.equal(value(await busy), '1')
  assert.equal(fs.existsSync(marker), false)
  assert.deepEqual(sessionKeys(pool), ['session:busy'])
})

test('a session disposed while its call waits for room: the call gets ERR_SESSION_DISPOSED at once', { timeout: 30_000 }, async (t) => {
  const pool = new KernelPool({ kernel, maxSessions: 1, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const busy = pool.execute({ sessionId: 'busy', cells: [cell('import time; time.sleep(2); 1')] })
  await waitFor(() => pool.sessions.some((s) => s.pid))
  // Settled into a value at once, so its rejection is never unhandled meanwhile.
  const waiting = pool.execute({ sessionId: 'gone', cells: [cell('1')] }).then(
    () => null,
    (e) => e,
  )
  await sleep(200)
  const started = Date.now()
  await pool.disposeOwner('gone')
  const err = await waiting
  assert.ok(Date.now() - started < 500, `answered ${Date.now() - started} ms after the disposal`)
  assert.equal(err?.code, 'ERR_SESSION_DISPOSED')
  assert.deepEqual(sessionKeys(pool), ['session:busy'])
  assert.equal(value(await busy), '1')
})

test('a missing interpreter fails with its code and leaves the pool as it was: no session, no room taken, no live session evicted', { timeout: 30_000 }, async (t) => {
  const pool = new KernelPool({ kernel, maxSessions: 2, prewarm: 0 })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'a', cells: [cell('kept = "a"')] })
  await pool.execute({ sessionId: 'b', cells: [cell('kept = "b"')] })
  const before = pool.sessions.map(({ key, pid }) => ({ key, pid }))
  const kernelsBefore = liveKernels().sort()
  for (const interpreter of ['/no/such/python', tempDir()]) {
    await assert.rejects(
      pool.execute({ sessionId: 'bad', interpreter, cells: [cell('1')] }),
      (e) => e.code === 'ERR_PYTHON_INVALID' && e.message.includes(interpreter),
      interpreter,
    )
  }
  assert.deepEqual(pool.sessions.map(({ key, pid }) => ({ key, pid })), before)
  assert.deepEqual(liveKernels().sort(), kernelsBefore)
  for (const s of ['a', 'b']) {
    const r = await pool.execute({ sessionId: s, cells: [cell('kept')] })
    assert.equal(value(r), `'${s}'`, `session ${s} kept its state`)
    assert.doesNotMatch(r.output, /earlier state is gone/)
  }
})

test('a kernel that fails during start-up gives its room back and leaves no session', { timeout: 30_000 }, async (t) => {
  // A short wait for room: room a failed start kept would show as ERR_POOL_FULL.
  const pool = new KernelPool({ kernel, maxSessions: 2, prewarm: 0, acquireTimeoutMs: 1000 })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'a', cells: [cell('kept = "a"')] })
  const pidA = pool.sessions[0].pid
  // Passes the interpreter probe, then dies as the kernel starts.
  const broken = fakeInterpreter(tempDir(), 'echo "no runner here" >&2; exit 3')
  for (let i = 0; i < 3; i++) {
    await assert.rejects(
      pool.execute({ sessionId: 'broken', interpreter: broken, cells: [cell('1')] }),
      (e) => {
        assert.equal(e.code, 'ERR_KERNEL_START_FAILED', `attempt ${i + 1}: ${e.message}`)
        assert.match(e.message, /exit code 3.*no runner here/s)
        return true
      },
    )
    assert.deepEqual(sessionKeys(pool), ['session:a'], `after attempt ${i + 1}`)
    assert.deepEqual(liveKernels(), [pidA], `after attempt ${i + 1}`)
  }
  // The failed starts gave their room back: a second session fits beside 'a'.
  await pool.execute({ sessionId: 'b', cells: [cell('1')] })
  assert.deepEqual(sessionKeys(pool), ['session:a', 'session:b'])
  assert.ok(isAlive(pidA))
  assert.equal(value(await pool.execute({ sessionId: 'a', cells: [cell('kept')] })), "'a'")
})

test('maxConcurrent and acquireTimeoutMs are range-checked; maxConcurrent is refused in session mode', () => {
  const idle = { prewarm: 0, heartbeatIntervalMs: 0 }
  const invalid = (name, text) => (e) => e.code === 'ERR_INVALID_ARG' && e.message.includes(`\`${name}\``) && e.message.includes(text)
  for (const maxConcurrent of [0, -1, NaN, 2.5, 1025, Infinity]) {
    assert.throws(() => new KernelPool({ ...idle, mode: 'per-call', maxConcurrent }), invalid('maxConcurrent', 'from 1 to 1024'), String(maxConcurrent))
  }
  assert.throws(() => new KernelPool({ ...idle, maxConcurrent: 2 }), invalid('maxConcurrent', "applies to mode 'per-call'; in 'session' mode `maxSessions` caps the kernels"))
  for (const acquireTimeoutMs of [-1, NaN, 3_600_001]) {
    assert.throws(() => new KernelPool({ ...idle, acquireTimeoutMs }), invalid('acquireTimeoutMs', 'from 0 to 3600000'), String(acquireTimeoutMs))
  }
  return Promise.all([
    new KernelPool({ ...idle, mode: 'per-call', maxConcurrent: 1024, acquireTimeoutMs: 0 }).disposeAll(),
    new KernelPool({ ...idle, acquireTimeoutMs: 3_600_000 }).disposeAll(),
  ])
})
