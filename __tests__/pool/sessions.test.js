'use strict'
// Sessions: keys, turns, eviction, heartbeat, crash and retry, owners. Real Python.
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { addon, python, isAlive, groupMembers, kernelProcess, pidNamespace, namespaceMembers, waitFor, tempDir, viewedDir } = require('../helpers/kernel')
const { KERNEL_TOKEN_PY: TOKEN, PID_NAMESPACE_PY: NS } = require('../helpers/kernel')

const { KernelPool } = addon
const kernel = { interpreter: python }
const cell = (code, title) => ({ code, title })
const value = (r) => r.cells.at(-1).result?.['text/plain']
// A kernel is the init of its own PID namespace: a cell's os.getpid() is 2 in every one.
// Host side a kernel is known by its host pid (pool.sessions, pool.spares); in a cell by
// TOKEN (random per kernel process) or NS (its PID namespace, which the host can read
// from /proc/<pid>/ns/pid while the kernel lives).
const sessionPid = (pool, id) => pool.sessions.find((s) => s.key.startsWith(`session:${id} @ `))?.pid
const quoted = (text) => `'${text}'`
const escape = (text) => text.replace(/[[\]()]/g, '\\$&')

test('two calls on one session share a kernel and its state', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const a = await pool.execute({ sessionId: 's', cells: [cell(`x = 41; (${TOKEN}, ${NS})`)] })
  const b = await pool.execute({ sessionId: 's', cells: [cell(`(x + 1, ${TOKEN})`)] })
  const [, token, ns] = value(a).match(/^\('([0-9a-f]{16})', '(pid:\[\d+\])'\)$/)
  assert.equal(value(b), `(42, '${token}')`)
  const [info] = pool.sessions
  assert.match(info.key, /^session:s @ /)
  assert.equal(pidNamespace(info.pid), ns, 'info.pid is the init of the namespace the cells ran in')
  assert.deepEqual(namespaceMembers(ns).sort(), [info.pid, kernelProcess(info.pid)].sort())
  assert.deepEqual(info.owners, ['s'])
  assert.equal(info.busy, false)
  assert.equal(info.executionCount, 2)
  assert.ok(Date.now() - info.lastUsed < 10_000)
})

test('per-call mode: a fresh kernel each time, shut down after', async (t) => {
  const pool = new KernelPool({ mode: 'per-call', kernel })
  t.after(() => pool.disposeAll())
  const a = await pool.execute({ cells: [cell(`x = 1; (${TOKEN}, ${NS})`)] })
  const b = await pool.execute({ cells: [cell(`('x' in globals(), ${TOKEN})`)] })
  const [, tokenA, nsA] = value(a).match(/^\('([0-9a-f]{16})', '(pid:\[\d+\])'\)$/)
  const [inB, tokenB] = value(b).slice(1, -1).split(', ')
  assert.equal(inB, 'False')
  assert.match(tokenB, /^'[0-9a-f]{16}'$/)
  assert.notEqual(tokenB, quoted(tokenA))
  // Nothing of a's kernel is left: no process in its PID namespace.
  assert.ok(await waitFor(() => namespaceMembers(nsA).length === 0, { timeoutMs: 3000 }))
  assert.deepEqual(pool.sessions, [])
})

test('sessions run at once; calls on one session keep their order', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const sessions = ['a', 'b', 'c', 'd']
  await Promise.all(sessions.map((s) => pool.execute({ sessionId: s, cells: [cell('seen = []')] })))
  // Two sessions each sleep 0.5 s at once: together about as long as one alone (the floor,
  // measured here: a loaded machine slows both), far from the two one after the other.
  const sleepCell = [cell('import time; time.sleep(0.5)')]
  let started = Date.now()
  await pool.execute({ sessionId: 'a', cells: sleepCell })
  const one = Date.now() - started
  started = Date.now()
  await Promise.all(['a', 'b'].map((s) => pool.execute({ sessionId: s, cells: sleepCell })))
  const both = Date.now() - started
  assert.ok(both < one + 400, `two sessions took ${both} ms, one alone ${one} ms: they did not run at once`)
  const calls = Array.from({ length: 100 }, (_, i) => {
    const s = sessions[i % 4]
    return pool
      .execute({ sessionId: s, cells: [cell(`seen.append(${i}); (${JSON.stringify(s)}, ${i}, len(seen))`)] })
      .then((r) => ({ s, i, r }))
  })
  for (const { s, i, r } of await Promise.all(calls)) {
    assert.equal(value(r), `('${s}', ${i}, ${Math.floor(i / 4) + 1})`)
  }
  for (const [n, s] of sessions.entries()) {
    // str(): the list on one line (its result would be pretty-printed one item per line)
    const r = await pool.execute({ sessionId: s, cells: [cell('str(seen)')] })
    const expected = Array.from({ length: 25 }, (_, k) => 4 * k + n)
    assert.equal(value(r), `'[${expected.join(', ')}]'`)
  }
})

test('a fifth session evicts the least recently used idle one, never a busy one', async (t) => {
  const pool = new KernelPool({ kernel, maxSessions: 4 })
  t.after(() => pool.disposeAll())
  const pids = {}
  for (const s of ['s1', 's2', 's3', 's4']) {
    await pool.execute({ sessionId: s, cells: [cell('1')] })
    pids[s] = sessionPid(pool, s)
  }
  assert.ok(Object.values(pids).every(isAlive))
  const s2Kernel = kernelProcess(pids.s2)
  // s1 is the oldest but busy; s2 is the least recently used idle one.
  const busy = pool.execute({ sessionId: 's1', cells: [cell('import time; time.sleep(1.5); 1')] })
  assert.ok(await waitFor(() => pool.sessions.find((s) => s.key.startsWith('session:s1')).busy), 's1 is busy before s5 comes')
  await pool.execute({ sessionId: 's5', cells: [cell('1')] })
  const keys = pool.sessions.map((s) => s.key.split(' ')[0]).sort()
  assert.deepEqual(keys, ['session:s1', 'session:s3', 'session:s4', 'session:s5'])
  assert.ok(await waitFor(() => !isAlive(pids.s2) && !isAlive(s2Kernel), { timeoutMs: 4000 }), 'the evicted kernel is gone')
  assert.equal(value(await busy), '1')
  assert.ok(isAlive(pids.s1))
  assert.equal(sessionPid(pool, 's1'), pids.s1)
})

test('idle sessions are evicted after the idle timeout', async (t) => {
  const pool = new KernelPool({ kernel, idleTimeoutMs: 300 })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'idle', cells: [cell('1')] })
  const pid = sessionPid(pool, 'idle')
  const py = kernelProcess(pid)
  assert.ok(isAlive(pid) && isAlive(py))
  assert.ok(await waitFor(() => pool.sessions.length === 0, { timeoutMs: 3000 }))
  assert.ok(await waitFor(() => !isAlive(pid) && !isAlive(py), { timeoutMs: 3000 }))
})

test('the heartbeat replaces a kernel that died or hangs while idle, and the next call is told', async (t) => {
  const pool = new KernelPool({ kernel, heartbeatIntervalMs: 100, heartbeatTimeoutMs: 300 })
  t.after(() => pool.disposeAll())
  const before = value(await pool.execute({ sessionId: 'hb', cells: [cell(`x = 1; ${TOKEN}`)] }))
  const pid = sessionPid(pool, 'hb')
  // The Python kernel itself dies (its init then ends with it).
  process.kill(kernelProcess(pid), 'SIGKILL')
  // Several heartbeats. A dead kernel is replaced at the next call either way; what the
  // heartbeat adds is knowing it died while idle, which only this notice can tell.
  await new Promise((r) => setTimeout(r, 600))
  const after = await pool.execute({ sessionId: 'hb', cells: [cell(`('x' in globals(), ${TOKEN})`)] })
  assert.match(after.output, /^\[The Python kernel ended while idle \(killed by signal 9 \(SIGKILL\)\); a new one was started and earlier state is gone\.\]/)
  assert.match(value(after), /^\(False, '[0-9a-f]{16}'\)$/)
  assert.notEqual(value(after), `(False, ${before})`)
  assert.equal(isAlive(pid), false)

  // A stopped kernel answers no ping: wedged.
  const pid2 = sessionPid(pool, 'hb')
  assert.notEqual(pid2, pid)
  const py2 = kernelProcess(pid2)
  process.kill(py2, 'SIGSTOP')
  assert.ok(await waitFor(() => !isAlive(pid2) && !isAlive(py2), { timeoutMs: 5000 }), 'the wedged kernel was killed')
  const third = await pool.execute({ sessionId: 'hb', cells: [cell('1')] })
  assert.match(third.output, /stopped answering while idle and was replaced/)
})

test('a kernel the heartbeat finds dead before its exit is known is told as ended, not as wedged', async (t) => {
  const pool = new KernelPool({ kernel, heartbeatIntervalMs: 100, heartbeatTimeoutMs: 2000 })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'hb', cells: [cell('x = 1')] })
  const pid = sessionPid(pool, 'hb')
  // The kernel dies while its init, which reports the death, is stopped: the heartbeat's
  // ping fails with no exit known yet. The init resumes well within the ping's 2 s wait.
  process.kill(pid, 'SIGSTOP')
  process.kill(kernelProcess(pid), 'SIGKILL')
  await new Promise((r) => setTimeout(r, 500))
  process.kill(pid, 'SIGCONT')
  assert.ok(await waitFor(() => !isAlive(pid), { timeoutMs: 5000 }))
  await new Promise((r) => setTimeout(r, 300)) // the heartbeat's verdict
  const after = await pool.execute({ sessionId: 'hb', cells: [cell("'x' in globals()")] })
  assert.match(after.output, /^\[The Python kernel ended while idle \(killed by signal 9 \(SIGKILL\)\); a new one was started and earlier state is gone\.\]\nFalse\n$/)
})

test('a cell that had started is never run again when its kernel dies; the next call gets a fresh kernel', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  // The side effect happens before the death: running the cell again would do it twice.
  // In the session's cwd: the host's /tmp around it is not in the kernel's view.
  const dir = tempDir()
  const charges = path.join(dir, 'charges')
  const code = [
    'import os, signal',
    `open(${JSON.stringify(charges)}, 'a').write('charged\\n')`,
    'os.kill(os.getpid(), signal.SIGKILL)',
  ].join('\n')
  await pool.execute({ sessionId: 'crash', cwd: dir, cells: [cell('before = 1')] })
  const r = await pool.execute({ sessionId: 'crash', cwd: dir, cells: [cell(code)] })
  assert.equal(require('node:fs').readFileSync(charges, 'utf8'), 'charged\n', 'the cell ran once')
  assert.equal(r.kernelRestarted, false)
  assert.equal(r.exitCode, 1)
  assert.equal(r.kernelDied, true)
  assert.equal(r.cells.length, 1)
  assert.match(r.output, /died during the cell \(killed by signal 9 \(SIGKILL\); possibly out of memory\)/)
  assert.match(r.output, /Cell 1 had started, so it was not run again: it may have had effects before the kernel died\./)
  const next = await pool.execute({ sessionId: 'crash', cwd: dir, cells: [cell("'before' in globals()")] })
  assert.equal(next.exitCode, 0)
  assert.equal(value(next), 'False', 'a fresh kernel')
  assert.equal(next.sessionLost, true, 'the next call is told its state is gone')
  assert.equal(next.kernelRestarted, true)
  assert.match(next.output, /The Python kernel died during the last call \(killed by signal 9 \(SIGKILL\)\); a new one was started and earlier state is gone\./)
})

test("a cell's own KernelDied is an error like any other: shown where it comes, not held back as the host's report of a death is", async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  // A figure the failed cell left open is shown after its error: where the error comes
  // among the events and in the text shows whether it was held back.
  const failing = (name, defined) => ['import matplotlib', 'matplotlib.use("agg")', 'import matplotlib.pyplot as plt', 'plt.plot([1, 2])', defined ? `class ${name}(Exception): pass` : '', `raise ${name}("mine")`].join('\n')
  const runOf = async (name, defined) => {
    const events = []
    const live = []
    const r = await pool.execute({ sessionId: 'own', cells: [cell(failing(name, defined))], onEvent: (_, e) => events.push(e), onOutput: (chunk) => live.push(chunk) })
    return { r, events, live: live.join('') }
  }
  const theirs = await runOf('ValueError', false)
  const mine = await runOf('KernelDied', true)
  assert.equal(mine.r.kernelDied, false)
  assert.equal(mine.r.exitCode, 1)
  assert.equal(mine.r.cells[0].error.ename, 'KernelDied')
  assert.equal(mine.r.cells[0].error.evalue, 'mine')
  assert.deepEqual(mine.events.map((e) => e.type), theirs.events.map((e) => e.type), "its events come in the order a ValueError's do")
  assert.equal(mine.events.find((e) => e.type === 'error').ename, 'KernelDied')
  const asTheirs = (text) => text.replaceAll('ValueError', 'KernelDied').replace(/<cell \d+>", line \d+/g, '<cell>')
  const plain = (text) => text.replace(/<cell \d+>", line \d+/g, '<cell>')
  assert.match(mine.r.output, /^Traceback \(most recent call last\):\n[^]*\nKernelDied: mine\n\[chart: line\]\n/, mine.r.output)
  assert.equal(plain(mine.r.output), asTheirs(theirs.r.output), "its text is a ValueError's, renamed")
  assert.equal(plain(mine.live), asTheirs(theirs.live), 'and so is its live text')
  const next = await pool.execute({ sessionId: 'own', cells: [cell('6*7')] })
  assert.equal(value(next), '42')
  assert.equal(next.kernelRestarted, false, 'the kernel lived on')
})

test('a kernel killed just before a call: a fresh kernel runs the call, or the call says its cell may have run', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const seen = { fresh: 0, stated: 0 }
  for (let i = 0; i < 6; i++) {
    await pool.execute({ sessionId: 'victim', cells: [cell('state = 1')] })
    // The Python kernel is killed, then called at once: the host may not have seen the
    // death yet. Either the request never reached it (a broken pipe: it runs in a fresh
    // kernel) or it may have (it is not run again, and the result says so).
    process.kill(kernelProcess(sessionPid(pool, 'victim')), 'SIGKILL')
    const r = await pool.execute({ sessionId: 'victim', cells: [cell("'state' in globals()"), cell('6*7')] })
    if (r.exitCode === 0) {
      seen.fresh++
      assert.equal(r.cells[0].result?.['text/plain'], 'False', r.output)
      assert.equal(value(r), '42')
      assert.match(r.output, /earlier state is gone/)
      assert.equal(r.sessionLost, true)
    } else {
      seen.stated++
      assert.equal(r.kernelDied, true, r.output)
      assert.match(r.output, /Cell 1 had started, so it was not run again/)
    }
    const next = await pool.execute({ sessionId: 'victim', cells: [cell('6*7')] })
    assert.equal(value(next), '42')
  }
  t.diagnostic(`fresh kernel: ${seen.fresh}, stated: ${seen.stated}`)
})

test('a kernel that died between calls (reaped by the host): the next call runs in a fresh kernel and says the state is gone', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'gone', cells: [cell('state = 1')] })
  const pid = sessionPid(pool, 'gone')
  process.kill(kernelProcess(pid), 'SIGKILL')
  // The namespace's init ends with its kernel, and the host reaps it: then the host knows.
  assert.ok(await waitFor(() => !require('node:fs').existsSync(`/proc/${pid}`), { timeoutMs: 5000 }), 'the host reaped the dead kernel')
  const r = await pool.execute({ sessionId: 'gone', cells: [cell("'state' in globals()"), cell('6*7')] })
  assert.equal(r.exitCode, 0, r.output)
  assert.equal(r.kernelDied, false)
  assert.equal(r.sessionLost, true)
  assert.equal(r.kernelRestarted, true, 'a dead kernel replaced is a restart')
  assert.equal(r.cells[0].result?.['text/plain'], 'False', r.output)
  assert.equal(value(r), '42')
  assert.match(r.output, /earlier state is gone/)
  assert.notEqual(sessionPid(pool, 'gone'), pid)
})

test('a cell that always kills its kernel fails with the signal stated; the next call works', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const r = await pool.execute({ sessionId: 'doom', cells: [cell('import os, signal; os.kill(os.getpid(), signal.SIGKILL)')] })
  assert.equal(r.kernelRestarted, false)
  assert.equal(r.exitCode, 1)
  assert.equal(r.kernelDied, true)
  assert.match(
    r.output,
    /\[the Python kernel died during the cell \(killed by signal 9 \(SIGKILL\); possibly out of memory\); the kernel's state was lost and it will be recreated on the next call\.\]/,
  )
  const exited = await pool.execute({ sessionId: 'doom', cells: [cell('import os; os._exit(7)')] })
  assert.match(exited.output, /died during the cell \(exit code 7\)/)
  const next = await pool.execute({ sessionId: 'doom', cells: [cell('2 + 2')] })
  assert.equal(value(next), '4')
})

test('owners: idempotent disposal, shared kernels live until the last owner goes', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'shared', ownerId: 'agent-1', cells: [cell('1')] })
  const pid = sessionPid(pool, 'shared')
  await pool.execute({ sessionId: 'shared', ownerId: 'agent-2', cells: [cell('1')] })
  assert.equal(sessionPid(pool, 'shared'), pid, 'one kernel for both owners')
  assert.deepEqual(pool.sessions[0].owners, ['agent-1', 'agent-2'])
  await pool.disposeOwner('agent-1')
  await pool.disposeOwner('agent-1')
  assert.ok(isAlive(pid))
  assert.deepEqual(pool.sessions[0].owners, ['agent-2'])
  await pool.disposeOwner('agent-2')
  assert.ok(await waitFor(() => !isAlive(pid), { timeoutMs: 3000 }))
  assert.deepEqual(pool.sessions, [])
  await pool.disposeOwner('agent-2')
  await pool.disposeOwner('nobody')
  // The fallback owner is the session id.
  await pool.execute({ sessionId: 'mine', cells: [cell('1')] })
  const own = sessionPid(pool, 'mine')
  assert.ok(isAlive(own))
  await pool.disposeOwner('mine')
  assert.ok(await waitFor(() => !isAlive(own), { timeoutMs: 3000 }))
})

test('disposing while a cell spins returns within the budget and leaves no process', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'spin', cells: [cell('1')] })
  const pid = sessionPid(pool, 'spin')
  assert.equal(groupMembers(pid).length, 2, 'init and the kernel')
  const spinning = pool.execute({ sessionId: 'spin', cells: [cell('import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass')] })
  await new Promise((r) => setTimeout(r, 200))
  const started = Date.now()
  await pool.disposeOwner('spin', { budgetMs: 1500 })
  assert.ok(Date.now() - started < 1500 + 300, `took ${Date.now() - started} ms`)
  assert.ok(await waitFor(() => groupMembers(pid).length === 0, { timeoutMs: 1000 }))
  const r = await spinning
  assert.equal(r.kernelDied || r.cancelled, true)
})

test('shutdownGraceMs: how long each step of a pool\'s shutdown waits before the next signal', async () => {
  const { KernelPool } = require('../..')
  const { kernelDefaults } = require('../helpers/kernel')
  // A kernel that lingers on exit (an atexit handler that sleeps) and ignores SIGTERM:
  // only SIGKILL ends it, after two graces.
  const stubborn = "import atexit, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\natexit.register(time.sleep, 60)"
  const disposeTime = async (shutdownGraceMs) => {
    const pool = new KernelPool({ kernel: kernelDefaults(), prewarm: 0, shutdownGraceMs })
    const r = await pool.execute({ sessionId: 's', cells: [{ code: stubborn }] })
    assert.equal(r.exitCode, 0, r.output)
    const started = Date.now()
    await pool.disposeOwner('s')
    const ms = Date.now() - started
    await pool.disposeAll()
    return ms
  }
  const quick = await disposeTime(100)
  const slow = await disposeTime(1500)
  assert.ok(slow >= 3000, `two 1.5 s graces before the SIGKILL, yet it took ${slow} ms`)
  assert.ok(quick < slow / 2, `with 100 ms graces it took ${quick} ms (${slow} ms with 1.5 s)`)
})

/** The zygotes this process started: its children whose environment names one. */
function zygotesOfThisHost() {
  const fs = require('node:fs')
  const { hostChildren } = require('../helpers/kernel')
  return hostChildren((pid) => fs.readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').some((v) => v.startsWith('PYKERNEL_ZYGOTE=')))
}

test('a shutdown that is not confirmed keeps its room and is retried until it is', { timeout: 60_000 }, async (t) => {
  const { execFileSync } = require('node:child_process')
  const { KernelPool } = require('../..')
  const { kernelDefaults } = require('../helpers/kernel')
  // A forked kernel's exit is known from its zygote's report. With the zygote stopped, the
  // kernel dies on SIGKILL but nobody says so: its shutdown stays unconfirmed, and the pool
  // must neither lose track of it nor hand its room to another kernel before it is gone.
  const pool = new KernelPool({ kernel: { ...kernelDefaults(), preload: ['json'] }, prewarm: 0, maxSessions: 1, shutdownGraceMs: 100, acquireTimeoutMs: 30_000 })
  t.after(() => pool.disposeAll())
  const first = await pool.execute({ sessionId: 'a', cells: [{ code: 'import os; os.getpid()' }] })
  assert.equal(first.exitCode, 0, first.output)
  const zygotes = zygotesOfThisHost()
  assert.ok(zygotes.length >= 1, 'the session\'s kernel was forked by a zygote of this host')
  for (const pid of zygotes) process.kill(pid, 'SIGSTOP')
  let resumed = false
  t.after(() => resumed || zygotes.forEach((pid) => process.kill(pid, 'SIGCONT')))
  await pool.disposeOwner('a', { budgetMs: 600 })
  // The next session runs another interpreter (the venv's base), so its kernel comes from
  // a zygote of its own, not from the stopped one: only room can hold it back.
  const base = execFileSync(kernelDefaults().interpreter || 'python3', ['-c', 'import sys; print(sys._base_executable)'], { encoding: 'utf8' }).trim()
  let ran = false
  const next = pool.execute({ sessionId: 'b', interpreter: base, cells: [{ code: '6*7' }] }).finally(() => (ran = true))
  await new Promise((r) => setTimeout(r, 1500))
  assert.equal(ran, false, 'the unconfirmed kernel still holds the only room: the next session waits')
  assert.deepEqual(pool.sessions.map((s) => s.key.split(' ')[0]), ['session:b'], 'the disposed session is gone, the next one waits')
  for (const pid of zygotes) process.kill(pid, 'SIGCONT')
  resumed = true
  const r = await next
  assert.equal(r.exitCode, 0, r.output)
  assert.equal(r.output.trim(), '42', 'retried, confirmed, and its room given to the next session')
})

test('multi-cell requests stop at the first failure and keep earlier state', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const r = await pool.execute({
    sessionId: 'cells',
    cells: [cell('kept = 1', 'setup'), cell('1/0', 'divide'), cell('never = 1', 'after')],
  })
  assert.equal(r.failedCell, 1)
  assert.equal(r.cells.length, 2)
  assert.match(r.output, /^\[cell 2 of 3 \(divide\) failed\]\n/)
  assert.match(r.output, /ZeroDivisionError/)
  const after = await pool.execute({ sessionId: 'cells', cells: [cell("(kept, 'never' in globals())")] })
  assert.equal(value(after), '(1, False)')
})

test('reset gives a fresh kernel; concurrent resets coalesce', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const first = value(await pool.execute({ sessionId: 'r', cells: [cell(`x = 1; ${TOKEN}`)] }))
  const pid = sessionPid(pool, 'r')
  const [a, b] = await Promise.all([
    pool.execute({ sessionId: 'r', reset: true, cells: [cell(`y = 2; ('x' in globals(), ${TOKEN})`)] }),
    pool.execute({ sessionId: 'r', reset: true, cells: [cell(`('y' in globals(), ${TOKEN})`)] }),
  ])
  const [, tokenA] = value(a).slice(1, -1).split(', ')
  assert.match(tokenA, /^'[0-9a-f]{16}'$/)
  assert.equal(value(a), `(False, ${tokenA})`)
  assert.notEqual(tokenA, first)
  assert.equal(value(b), `(True, ${tokenA})`, 'the second reset shared the first one')
  assert.notEqual(sessionPid(pool, 'r'), pid)
  assert.ok(await waitFor(() => !isAlive(pid), { timeoutMs: 3000 }), 'the reset kernel is gone')
})

test('a cwd reached through a symlink keys the same session as its target; a file is no cwd', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const dir = tempDir()
  const target = path.join(dir, 'work')
  const fs = require('node:fs')
  fs.mkdirSync(target)
  fs.symlinkSync(target, path.join(dir, 'link'))
  fs.symlinkSync(path.join(dir, 'link'), path.join(dir, 'link-to-link'))
  fs.writeFileSync(path.join(dir, 'file.txt'), 'x')
  await pool.execute({ cwd: target, cells: [cell(`shared = ${TOKEN}`)] })
  for (const cwd of [path.join(dir, 'link'), path.join(dir, 'link-to-link'), path.join(dir, 'link', '..', 'work')]) {
    const r = await pool.execute({ cwd, cells: [cell(`shared == ${TOKEN}`)] })
    assert.equal(value(r), 'True', cwd)
  }
  await assert.rejects(
    pool.execute({ cwd: path.join(dir, 'file.txt'), cells: [cell('1')] }),
    (e) => e.code === 'ERR_CWD_INVALID' && /is not a directory/.test(e.message),
  )
})

test('session keys: sessionId, else sessionFile, else the cwd', async (t) => {
  const { KernelPool } = require('../..')
  const { kernelDefaults, tempDir } = require('../helpers/kernel')
  const pool = new KernelPool({ kernel: kernelDefaults(), prewarm: 0 })
  t.after(() => pool.disposeAll())
  const run = async (request, code) => {
    const r = await pool.execute({ ...request, cells: [{ code }] })
    assert.equal(r.exitCode, 0, r.output)
    return r.output.trim()
  }
  await run({ sessionFile: '/chats/a.json' }, "mark = 'a'")
  assert.equal(await run({ sessionFile: '/chats/a.json' }, 'mark'), "'a'", 'the same file, the same session')
  assert.equal(await run({ sessionFile: '/chats/b.json' }, "'mark' in globals()"), 'False', 'another file, another session')
  await run({ sessionId: 'one', sessionFile: '/chats/x.json' }, "mark = 'id'")
  assert.equal(await run({ sessionId: 'one', sessionFile: '/chats/y.json' }, 'mark'), "'id'", 'sessionId wins over sessionFile')
  const cwd = tempDir('pk-session-cwd-')
  await run({ cwd }, "mark = 'cwd'")
  assert.equal(await run({ cwd }, 'mark'), "'cwd'", 'neither: keyed by the cwd')
  const keys = pool.sessions.map((s) => s.key.split(' ')[0]).sort()
  assert.deepEqual(keys, [`cwd:${cwd}`, 'file:/chats/a.json', 'file:/chats/b.json', 'session:one'].sort())
})

test('bad requests get coded errors; disposeAll refuses new work', async () => {
  const pool = new KernelPool({ kernel })
  await assert.rejects(pool.execute({}), (e) => e.code === 'ERR_INVALID_ARG' && /cells/.test(e.message))
  await assert.rejects(pool.execute({ cells: [cell('1')], cwd: '/no/such/dir' }), (e) => e.code === 'ERR_CWD_INVALID')
  assert.throws(() => new KernelPool({ mode: 'cluster' }), (e) => e.code === 'ERR_INVALID_ARG')
  await pool.execute({ cells: [cell('1')] })
  await pool.disposeAll()
  await assert.rejects(pool.execute({ cells: [cell('1')] }), (e) => e.code === 'ERR_POOL_DISPOSED')
})

test('a call waiting on a session being disposed gets a clear error; the next gets a fresh kernel', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  const token = value(await pool.execute({ sessionId: 'gone', cells: [cell(TOKEN)] }))
  const pid = sessionPid(pool, 'gone')
  const running = pool.execute({ sessionId: 'gone', cells: [cell('import time; time.sleep(30)')] })
  // Settled into a value at once, so its rejection is never unhandled meanwhile.
  const waiting = pool.execute({ sessionId: 'gone', cells: [cell('1')] }).then(
    () => null,
    (e) => e,
  )
  await new Promise((r) => setTimeout(r, 200))
  await pool.disposeOwner('gone')
  const err = await waiting
  assert.equal(err?.code, 'ERR_SESSION_DISPOSED')
  assert.match(err.message, /call again/)
  const r = await running
  assert.equal(r.exitCode === 0, false)
  assert.ok(await waitFor(() => !isAlive(pid), { timeoutMs: 3000 }), 'the disposed kernel is gone')
  const fresh = await pool.execute({ sessionId: 'gone', cells: [cell(TOKEN)] })
  assert.match(value(fresh), /^'[0-9a-f]{16}'$/)
  assert.notEqual(value(fresh), token)
})

test('prewarm: a spare killed while no call runs is replaced without waiting for a call', async (t) => {
  const pool = new KernelPool({ kernel })
  t.after(() => pool.disposeAll())
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 10_000 }))
  const [spare] = pool.spares
  // As the OOM killer would: the Python process, with SIGKILL.
  process.kill(kernelProcess(spare), 'SIGKILL')
  assert.ok(
    await waitFor(() => pool.spares.length === 1 && pool.spares[0] !== spare, { timeoutMs: 10_000 }),
    `spares: ${JSON.stringify(pool.spares)}`,
  )
  assert.equal(isAlive(spare), false, 'the dead spare was ended')
  const r = await pool.execute({ sessionId: 'after', cells: [cell('1 + 1')] })
  assert.equal(value(r), '2')
})

test('prewarm: the spare is initialized ahead with the pool settings; a session with its own kv store re-initializes it', async (t) => {
  const artifactsDir = tempDir()
  const pool = new KernelPool({ kernel, artifactsDir })
  t.after(() => pool.disposeAll())
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 5000 }))
  const [spare] = pool.spares
  // Ready before any session claims it: the prelude already ran in a fresh namespace.
  const r = await pool.execute({
    sessionId: 'chat-a',
    cells: [cell(`(${NS}, 'kv' in dir(), [n for n in globals() if not n.startswith('_')][:3])`)],
  })
  assert.match(value(r), new RegExp(`^\\(${escape(quoted(pidNamespace(spare)))}, True, `), 'the cell ran in the spare')
  assert.equal(sessionPid(pool, 'chat-a'), spare)
  // The session's own kv store reached the spare's runner (a second init).
  const store = new addon.KvStore(artifactsDir, 'chat-a')
  await pool.execute({ sessionId: 'chat-a', cells: [cell('kv.set("seen", 42)')] })
  assert.equal(await store.get('seen'), 42)
  assert.equal(value(await pool.execute({ sessionId: 'chat-a', cells: [cell('kv.path')] })), `'${store.path}'`)
  assert.equal(r.cells[0].executionCount, 1)

  // Same settings as the pool's (no kv store): the spare is used as it was readied.
  const plain = new KernelPool({ kernel })
  t.after(() => plain.disposeAll())
  assert.ok(await waitFor(() => plain.spares.length === 1, { timeoutMs: 5000 }))
  const [ready] = plain.spares
  const first = await plain.execute({
    sessionId: 'chat-b',
    cells: [cell(`import os; (os.readlink('/proc/self/ns/pid'), callable(display), callable(kv.get), sorted(n for n in set(globals()) - __pykernel__.hidden_names if not n.startswith('_')))`)],
  })
  assert.equal(value(first), `(${quoted(pidNamespace(ready))}, True, True, ['os'])`)
  assert.equal(sessionPid(plain, 'chat-b'), ready)
  assert.equal(first.cells[0].executionCount, 1)
})

test('prewarm: a spare with the pool settings is initialized before the claim, and the claim sends no init', async () => {
  // The protocol trace (stderr of a host process) shows when each init is written.
  const script = `
    const { KernelPool } = require(${JSON.stringify(path.resolve(__dirname, '..', '..'))})
    const pool = new KernelPool({ kernel: { interpreter: ${JSON.stringify(python || null)} || undefined } })
    const wait = async () => { while (pool.spares.length === 0) await new Promise((r) => setTimeout(r, 20)) }
    wait().then(async () => {
      await new Promise((r) => setTimeout(r, 200))
      process.stderr.write('--- claim ---\\n')
      const r = await pool.execute({ sessionId: 's', cells: [{ code: '6*7' }] })
      process.stderr.write('--- answer ' + r.output.trim() + ' ---\\n')
      await pool.disposeAll()
    })`
  const out = require('node:child_process').spawnSync(process.execPath, ['-e', script], {
    env: { ...process.env, PYKERNEL_PYTHON_IPC_TRACE: '1' },
    encoding: 'utf8',
    timeout: 30000,
  })
  const [before, after = ''] = out.stderr.split('--- claim ---')
  assert.match(after, /--- answer 42 ---/, out.stderr.slice(-2000))
  const pid = after.match(/\[pykernel (\d+)\] -> \{"type":"execute"/)?.[1]
  assert.ok(pid, 'the cell was written to a kernel')
  assert.match(before, new RegExp(`\\[pykernel ${pid}\\] -> \\{"type":"init"`), 'the spare was initialized while waiting')
  // (A new spare is started and initialized after the call; that is another pid.)
  assert.doesNotMatch(after, new RegExp(`\\[pykernel ${pid}\\] -> \\{"type":"init"`), 'the claim initialized it again')
})

test('prewarm: a new session starts on the spare kernel, configured for it, and a new spare follows', async (t) => {
  const cwd = viewedDir()
  t.after(() => require('node:fs').rmSync(cwd, { recursive: true, force: true }))
  const pool = new KernelPool({ kernel: { ...kernel, cwd } })
  t.after(() => pool.disposeAll())
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 5000 }))
  const [spare] = pool.spares
  // A spare writes only the pool's cwd: a session elsewhere gets a kernel of its own.
  const hidden = await pool.execute({ sessionId: 'elsewhere', cwd: tempDir(), cells: [cell('1')] })
  assert.equal(hidden.exitCode, 0, hidden.output)
  assert.notEqual(sessionPid(pool, 'elsewhere'), spare)
  assert.deepEqual(pool.spares, [spare], 'the spare waits for a session it fits')
  const r = await pool.execute({ sessionId: 'warm', cwd, cells: [cell(`import os; (${NS}, os.getcwd())`)] })
  assert.equal(value(r), `(${quoted(pidNamespace(spare))}, '${require('node:fs').realpathSync(cwd)}')`)
  assert.equal(sessionPid(pool, 'warm'), spare)
  assert.equal(r.cells[0].executionCount, 1)
  assert.ok(await waitFor(() => pool.spares.length === 1 && pool.spares[0] !== spare, { timeoutMs: 5000 }))
  const none = new KernelPool({ kernel, prewarm: 0 })
  await new Promise((r) => setTimeout(r, 300))
  assert.deepEqual(none.spares, [])
  await none.disposeAll()
  const spares = pool.spares
  await pool.disposeAll()
  assert.ok(await waitFor(() => spares.every((pid) => !isAlive(pid)), { timeoutMs: 3000 }), 'disposeAll ends the spares')
})

test('two venvs made from one Python are two kernels, each in its own venv', async (t) => {
  const dir = tempDir()
  const base = require('../helpers/kernel').realPython()
  const venvs = ['a', 'b'].map((name) => {
    const venv = path.join(dir, name)
    require('node:child_process').execFileSync(base, ['-m', 'venv', '--without-pip', venv])
    return venv
  })
  const pool = new KernelPool({ prewarm: 0, kernel })
  t.after(() => pool.disposeAll())
  const prefixes = []
  for (const venv of venvs) {
    const r = await pool.execute({ sessionId: 'same', interpreter: path.join(venv, 'bin', 'python'), cells: [cell('import sys; sys.prefix')] })
    assert.equal(r.exitCode, 0, r.output)
    prefixes.push(value(r))
  }
  assert.deepEqual(prefixes, venvs.map((v) => `'${require('node:fs').realpathSync(v)}'`))
  assert.equal(pool.sessions.length, 2)
})

test('a pool request streams sanitized output to onOutput and names its artifact', async () => {
  const fs = require('node:fs')
  const artifactsDir = tempDir()
  const pool = new addon.KernelPool({ prewarm: 0, artifactsDir, kernel: { interpreter: python } })
  try {
    const chunks = []
    const r = await pool.execute({
      sessionId: 'live',
      artifactId: 'pool-1',
      cells: [{ code: 'print("\\x1b[1mhi\\x1b[0m")\nfor i in range(20000): print(i)' }],
      onOutput: (c) => chunks.push(c),
    })
    assert.equal(r.truncated.artifactId, 'pool-1')
    assert.match(r.output, /\[full output \(20001 lines\): artifact:\/\/pool-1\]\n$/)
    assert.equal(chunks[0].slice(0, 3), 'hi\n')
    assert.equal(chunks.join(''), fs.readFileSync(path.join(artifactsDir, 'pool-1.txt'), 'utf8'))
    await assert.rejects(pool.execute({ sessionId: 'live', artifactId: '../x', cells: [{ code: '1' }] }), { code: 'ERR_INVALID_ARG' })
  } finally {
    await pool.disposeAll()
  }
})

test('a session that claimed the prewarmed spare reads its own cut output back through read()', async (t) => {
  const artifactsDir = tempDir()
  const pool = new KernelPool({ kernel, artifactsDir, prewarm: 1 })
  t.after(() => pool.disposeAll())
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 5000 }))
  const [spare] = pool.spares
  const cut = await pool.execute({ sessionId: 'spare-reader', cells: [cell('for i in range(30000): print("line", i)')] })
  assert.equal(sessionPid(pool, 'spare-reader'), spare, 'the session runs in the spare')
  const id = cut.truncated?.artifactId
  assert.ok(id, cut.output.slice(-200))
  const back = await pool.execute({ sessionId: 'spare-reader', cells: [cell(`print(read('artifact://${id}:29999-'), end='')`)] })
  assert.equal(back.exitCode, 0, back.output)
  assert.match(back.output, /line 29998\nline 29999\n$/)
})
