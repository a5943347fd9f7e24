'use strict'
// pykernel/testing's stand-in kernel itself: what a script makes it send reaches the host
// as a kernel's output, a failed start fails as Python's would, it never outlives its
// host or its test, and a kernel's shutdown is confirmed (or not) by the host's own code.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const { Kernel, KernelPool } = require('../..')
const { createStandInKernel, latch, pythonError } = require('../../testing')

/** A fake closed when the test ends, whatever happened. */
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

/** Whether `pid` is a live process (not a zombie). */
function running(pid) {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    return !/^\d+ \(.*\) Z/.test(require('node:fs').readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

async function until(what, check, ms = 5_000) {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) assert.fail(`gave up waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

test('a script\'s output, displays, value and exception reach the pool as a kernel\'s', async (t) => {
  const fake = await standIn(t, {
    async onExecute(cell, k) {
      if (cell.code === 'fail') throw pythonError('ValueError', 'boom')
      k.stdout('one\n')
      k.stderr('warn\n')
      k.display({ 'text/markdown': '**bold**' })
      const answer = await k.call('lookup', { q: cell.code })
      return `answer ${answer}`
    },
  })
  const calls = []
  const p = pool(t, fake, { kernel: { onCall: (call) => (calls.push([call.name, call.args]), 7) } })
  const r = await p.execute({ sessionId: 's', cells: [{ code: 'x' }] })
  assert.equal(r.exitCode, 0)
  assert.equal(r.cells[0].stdout, 'one\n')
  assert.equal(r.cells[0].stderr, 'warn\n')
  assert.deepEqual(r.cells[0].displays, [{ 'text/markdown': '**bold**' }])
  assert.deepEqual(r.cells[0].result, { 'text/plain': 'answer 7' })
  assert.deepEqual(calls, [['lookup', { q: 'x' }]])
  const failed = await p.execute({ sessionId: 's', cells: [{ code: 'fail' }] })
  assert.equal(failed.exitCode, 1)
  assert.equal(failed.cells[0].error.ename, 'ValueError')
  assert.match(failed.output, /ValueError: boom/)
  assert.equal(fake.starts, 1)
  assert.deepEqual(fake.kernels[0].cells.map((c) => c.code), ['x', 'fail'])
})

test('onStart that throws fails the start as a Python that fails: ERR_KERNEL_START_FAILED with its message', async (t) => {
  const fake = await standIn(t, {
    onStart() {
      throw new Error('no GPU on this box')
    },
  })
  const p = pool(t, fake)
  await assert.rejects(p.execute({ sessionId: 's', cells: [{ code: 'x' }] }), (e) => {
    assert.equal(e.code, 'ERR_KERNEL_START_FAILED')
    assert.match(e.message, /no GPU on this box/)
    return true
  })
  assert.equal(fake.starts, 1)
  const [k] = fake.kernels
  await k.ended
  assert.equal(k.exit.reason, 'start failed')
})

test('a stand-in ends when its stdin closes, and when its test\'s controller goes', async (t) => {
  const fake = await standIn(t, {})
  const child = spawn(fake.launcher[0], fake.launcher.slice(1), { stdio: ['pipe', 'pipe', 'inherit'] })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  const k = await fake.kernel(1)
  child.stdin.end('0\n')
  assert.deepEqual(await exited, { code: null, signal: 'SIGKILL' })
  assert.equal((await k.ended).reason, 'stdin closed')

  // One told to ignore its stdin's end still goes with the controller.
  const other = await createStandInKernel({ onStart: (k) => k.ignore({ shutdown: true }) })
  const second = spawn(other.launcher[0], other.launcher.slice(1), { stdio: ['pipe', 'ignore', 'inherit'] })
  const gone = new Promise((resolve) => second.on('exit', (code, signal) => resolve({ code, signal })))
  await (await other.kernel(1)).started
  second.stdin.end('0\n')
  await new Promise((r) => setTimeout(r, 200))
  assert.equal(running(second.pid), true, 'it lingers as told')
  await other.close()
  assert.deepEqual(await gone, { code: null, signal: 'SIGKILL' })
})

test('a clean exit is confirmed without a signal', async (t) => {
  const fake = await standIn(t, {})
  const kernel = await Kernel.start({ launcher: fake.launcher })
  assert.equal(await kernel.execute('1').then((r) => r.status), 'ok')
  assert.deepEqual(await kernel.shutdown({ graceMs: 2_000 }), { confirmed: true, exitCode: 0 })
  const [k] = fake.kernels
  assert.equal((await k.ended).reason, 'exit')
  assert.deepEqual(k.signals, [])
  assert.equal(k.exitRequests, 1)
  assert.equal(running(k.pid), false)
})

// A launched kernel's shutdown: `exit`, then its link (stdin) closed; the host's SIGTERM
// and SIGKILL cannot travel in band over a closed link, so its last step is to cut the
// link: the launcher's process is killed 1 s after the SIGKILL is asked for.
test('a kernel that ignores exit ends when its link closes, and that is confirmed', async (t) => {
  const fake = await standIn(t, { onStart: (k) => k.ignore({ exit: true }) })
  const kernel = await Kernel.start({ launcher: fake.launcher })
  assert.deepEqual(await kernel.shutdown({ graceMs: 1_000 }), { confirmed: true, signal: 'SIGKILL' })
  const [k] = fake.kernels
  assert.equal((await k.ended).reason, 'stdin closed')
  assert.equal(k.exitRequests, 1)
})

test('a hung kernel is killed by the host and confirmed, within its shutdown steps', async (t) => {
  const fake = await standIn(t, { onStart: (k) => k.ignore({ shutdown: true }) })
  const kernel = await Kernel.start({ launcher: fake.launcher })
  // exit at 0, SIGTERM asked at 1.5 s, SIGKILL at 3 s, the link cut at 4 s, given up at 4.5 s.
  assert.deepEqual(await kernel.shutdown({ graceMs: 1_500 }), { confirmed: true, signal: 'SIGKILL' })
  const [k] = fake.kernels
  assert.equal((await k.ended).reason, 'killed')
  assert.equal(running(k.pid), false)
})

test('a shutdown is unconfirmed only while the kernel has not exited; the host then cuts the link', async (t) => {
  const fake = await standIn(t, { onStart: (k) => k.ignore({ shutdown: true }) })
  const kernel = await Kernel.start({ launcher: fake.launcher })
  const [k] = fake.kernels
  // Each step's grace is shorter than the host's wait before it cuts a launched kernel's
  // link: the process is still there when shutdown returns.
  const outcome = await kernel.shutdown({ graceMs: 100 })
  assert.equal(outcome.confirmed, false)
  assert.equal(k.alive, true)
  assert.equal(k.exitRequests, 1)
  // ...and nothing a script does keeps it: the link cut kills the stand-in's process.
  assert.equal((await k.ended).reason, 'killed')
  await until('the process to be gone', () => !running(k.pid))
  assert.deepEqual(await kernel.shutdown({ graceMs: 100 }), { confirmed: true, signal: 'SIGKILL' })
})

test('a cell that blocks until released, and one that is interrupted', async (t) => {
  const gate = latch()
  const fake = await standIn(t, {
    async onExecute(cell, k) {
      if (cell.code === 'wait') {
        await gate.promise
        return 'released'
      }
      k.stdout('working\n')
      await new Promise((resolve) => cell.signal.addEventListener('abort', resolve))
      k.stdout('never shown\n')
    },
  })
  const kernel = await Kernel.start({ launcher: fake.launcher })
  t.after(() => kernel.shutdown())
  const waiting = kernel.execute('wait')
  const k = await fake.kernel(1)
  await until('the cell to run', () => k.busy)
  gate.release()
  assert.deepEqual((await waiting).result, { 'text/plain': 'released' })
  const stopped = await kernel.execute('loop', { timeoutMs: 200 })
  assert.equal(stopped.cancelled, true)
  assert.equal(stopped.error.ename, 'KeyboardInterrupt')
  assert.equal(stopped.stdout, 'working\n')
  assert.equal(k.interrupts, 1)
  assert.equal(k.alive, true)
})

test('a kernel that dies during a cell: exit code or signal, as Python\'s would read', async (t) => {
  const fake = await standIn(t, {
    async onExecute(cell, k) {
      k.stdout('before\n')
      await k.die(cell.code === 'segv' ? { signal: 'SIGSEGV', stderr: 'Fatal Python error: Segmentation fault' } : { code: 7 })
    },
  })
  for (const [code, died] of [['exit', /exit code 7/], ['segv', /SIGSEGV/]]) {
    const kernel = await Kernel.start({ launcher: fake.launcher })
    const r = await kernel.execute(code)
    assert.equal(r.status, 'error')
    assert.equal(r.error.ename, 'KernelDied')
    assert.match(r.error.evalue, died)
    assert.equal(r.stdout, 'before\n')
    if (code === 'segv') assert.match(r.error.traceback.join('\n'), /Segmentation fault/)
  }
})

test('a kernel whose link goes silent (its heartbeats unanswered) is ended by the link watch', async (t) => {
  const fake = await standIn(t, { onExecute: () => new Promise(() => {}) })
  // Its stdin's end ignored too: the link cut closes it just before it kills the process.
  fake.onStart = (k) => k.ignore({ heartbeats: true, stdinEnd: true })
  const silent = await Kernel.start({ launcher: fake.launcher, linkTimeoutMs: 300 })
  const lost = await silent.execute('x')
  assert.equal(lost.error.ename, 'KernelDied')
  assert.match(lost.error.evalue, /the link to the kernel was lost/)
  assert.equal((await fake.kernels[0].ended).reason, 'killed')
})

test('waits that cannot be met fail the test, never hold it: kernel(n), untilBusy(), an unreadable message', async (t) => {
  const fake = await standIn(t)
  // No kernel ever starts: kernel(n) rejects after its timeout, and on close() too.
  const never = fake.kernel(1, { timeoutMs: 100 })
  await assert.rejects(never, { code: 'ERR_STAND_IN_WAIT', message: /kernel 1 did not start within 100 ms \(0 started\)/ })
  assert.throws(() => fake.kernel(0), TypeError)

  const kernel = await Kernel.start({ launcher: fake.launcher })
  const first = await fake.kernel(1)
  // A kernel with no cell: untilBusy() rejects after its timeout, and as soon as the
  // kernel ends.
  await assert.rejects(first.untilBusy({ timeoutMs: 100 }), { code: 'ERR_STAND_IN_WAIT', message: /no cell ran on kernel 1 within 100 ms/ })
  const started = Date.now()
  const waiting = assert.rejects(first.untilBusy({ timeoutMs: 60_000 }), { code: 'ERR_STAND_IN_WAIT', message: /kernel 1 ended before a cell ran/ })
  await kernel.shutdown()
  await waiting
  assert.ok(Date.now() - started < 30_000)
  await assert.rejects(first.untilBusy(), { message: /kernel 1 ended; no cell will run on it/ })

  // A line on the controller's socket that is not JSON: recorded, that connection cut,
  // the controller still serves the next kernel.
  const net = require('node:net')
  const socketPath = fake.launcher[2]
  await new Promise((resolve, reject) => {
    const s = net.connect(socketPath, () => s.write('{not json\n'))
    s.on('close', resolve)
    s.on('error', reject)
  })
  assert.equal(fake.errors.length, 1)
  assert.match(fake.errors[0].message, /unreadable message from a stand-in/)
  const again = await Kernel.start({ launcher: fake.launcher })
  t.after(() => again.shutdown())
  assert.equal((await again.execute('1')).status, 'ok')
  assert.equal(fake.starts, 2)

  const closing = assert.rejects(fake.kernel(3, { timeoutMs: 60_000 }), { message: /the controller was closed/ })
  await fake.close()
  await closing
})
