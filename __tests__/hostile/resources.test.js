'use strict'
// Hostile input: resource exhaustion. Memory limits, an out-of-memory kill (simulated:
// this machine is shared, so nothing here really exhausts it), a guarded fork bomb.
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, python, startKernel, groupMembers, strayMembers, kernelProcess, isAlive, waitFor, sleep, whileRunning, assertResponsive, assertFreshKernelWorks, assertKernelWorks } = require('./_common')

let probe
test.before(async () => {
  probe = await startKernel()
})
test.after(() => probe?.shutdown())

const GiB = 1024 * 1024 * 1024

test('a memory hog under memoryLimitBytes (1 GiB) gets MemoryError in the cell; the kernel lives', { timeout: 30_000 }, async (t) => {
  const kernel = await startKernel({ memoryLimitBytes: GiB })
  t.after(() => kernel.shutdown())
  const hog = "hog = []\nwhile True:\n    hog.append(bytearray(32 * 1024 * 1024))"
  const { value: r } = await whileRunning(probe, () => kernel.execute(hog, { timeoutMs: 20_000 }), { ready: () => sleep(50), requireOverlap: false })
  assert.equal(r.kernelDied, false, JSON.stringify(r.error))
  assert.equal(r.status, 'error')
  assert.equal(r.error.ename, 'MemoryError')
  const held = await kernel.execute('n = len(hog) * 32\ndel hog\nn')
  const mb = Number(held.result?.['text/plain'])
  assert.ok(mb > 256 && mb < 1024, `the hog got ${mb} MiB before the limit`)
  const big = await kernel.execute('x = bytearray(2 * 1024**3)')
  assert.equal(big.error?.ename, 'MemoryError')
  await assertKernelWorks(kernel)
})

test('no memory limit: a SIGKILL from outside during a cell (the OOM killer) is stated as possibly out of memory', async () => {
  const kernel = await startKernel()
  const running = kernel.execute("import time\nprint('working', flush=True)\ntime.sleep(30)")
  await sleep(300)
  process.kill(kernel.pid, 'SIGKILL')
  const r = await running
  assert.equal(r.kernelDied, true)
  assert.equal(r.error?.ename, 'KernelDied')
  assert.match(r.error.evalue, /killed by signal 9 \(SIGKILL\); possibly out of memory/)
  assert.equal(r.stdout, 'working\n')
  await assert.rejects(kernel.execute('1'), (err) => err.code === 'ERR_KERNEL_DEAD')
  await assertResponsive(probe)
  await assertFreshKernelWorks()
})

test('no memory limit, in a pool: two outside SIGKILLs fail the request as possibly out of memory; the next call gets a fresh kernel', { timeout: 30_000 }, async (t) => {
  const pool = new addon.KernelPool({ kernel: { interpreter: python } })
  t.after(() => pool.disposeAll())
  const pidOf = () => pool.sessions.find((s) => s.key.startsWith('session:oom'))?.pid
  await pool.execute({ sessionId: 'oom', cells: [{ code: 'state = 1' }] })
  const running = pool.execute({ sessionId: 'oom', cells: [{ code: 'import time\ntime.sleep(30)' }] })
  const killed = []
  for (let i = 0; i < 2; i++) {
    // Wait for the cell to run in a kernel we have not killed yet, then kill it.
    assert.ok(await waitFor(() => pidOf() && !killed.includes(pidOf()) && isAlive(pidOf()), { timeoutMs: 5000 }))
    await sleep(300)
    killed.push(pidOf())
    process.kill(killed.at(-1), 'SIGKILL')
  }
  const r = await running
  assert.equal(r.exitCode, 1)
  assert.equal(r.kernelDied, true)
  assert.match(r.output, /killed by signal 9 \(SIGKILL\); possibly out of memory/)
  const next = await pool.execute({ sessionId: 'oom', cells: [{ code: "'state' in globals()" }] })
  assert.equal(next.exitCode, 0, next.output)
  assert.equal(next.cells.at(-1).result?.['text/plain'], 'False')
  await assertResponsive(probe)
})

// Written against KernelOptions.maxProcesses: where the option is missing or ignored, the
// guarded bomb below reaches its 500-process cap and this test fails. "Not flooded" is
// checked as: the kernel's group never holds more than the limit (plus a little slack).
test('a fork bomb under maxProcesses: 64 ends with a clear error and never floods the machine', { timeout: 60_000 }, async (t) => {
  const LIMIT = 64
  const kernel = await startKernel({ maxProcesses: LIMIT })
  t.after(() => kernel.shutdown())
  // Guarded so it can never run unbounded if the option is ignored: the parent stops at
  // 500 forks, and every child exits 2 s after the bomb started (children do not fork).
  const bomb = [
    'import os, time',
    'start = time.time()',
    'made = 0',
    'try:',
    '    while made < 500:',
    '        pid = os.fork()',
    '        if pid == 0:',
    '            try:',
    '                time.sleep(max(0.0, 2.0 - (time.time() - start)))',
    '            finally:',
    '                os._exit(0)',
    '        made += 1',
    'except OSError as exc:',
    "    print('fork refused after', made, 'children:', exc)",
    '    raise',
    'finally:',
    '    while True:',
    '        try:',
    '            os.waitpid(-1, 0)',
    '        except ChildProcessError:',
    '            break',
    "print('made', made, 'children unhindered')",
  ].join('\n')
  // The group is led by the init of the kernel's PID namespace (kernel.pid), which the
  // host adds beside the user's processes: the user's processes are the other members.
  const py = kernelProcess(kernel.pid)
  assert.deepEqual(groupMembers(kernel.pid).sort(), [kernel.pid, py].sort())
  let maxMembers = 0
  const sampler = setInterval(() => {
    maxMembers = Math.max(maxMembers, groupMembers(kernel.pid).filter((pid) => pid !== kernel.pid).length)
  }, 25)
  let r
  try {
    ;({ value: r } = await whileRunning(probe, () => kernel.execute(bomb, { timeoutMs: 30_000 }), { ready: () => sleep(200), requireOverlap: false }))
  } finally {
    clearInterval(sampler)
  }
  t.diagnostic(`fork bomb: at most ${maxMembers} processes in the kernel's group; ${r.stdout.trim()} ${r.error?.ename ?? ''}: ${r.error?.evalue ?? ''}`)
  assert.ok(maxMembers <= LIMIT + 4, `the kernel's group reached ${maxMembers} processes (limit ${LIMIT})`)
  const clearError = r.status === 'error' && /BlockingIOError|Resource temporarily unavailable|process/i.test(`${r.error?.ename}: ${r.error?.evalue}`)
  const killedWithNotice = r.kernelDied && /process|fork/i.test(r.error?.evalue ?? '')
  assert.ok(clearError || killedWithNotice, `the cell ended with ${r.status}, ${JSON.stringify(r.error)}; stdout ${JSON.stringify(r.stdout)}`)
  assert.ok(await waitFor(() => strayMembers(kernel.pid, py).length === 0, { timeoutMs: 5000 }), 'the bomb\'s children are gone')
  if (r.kernelDied) await assertFreshKernelWorks({ maxProcesses: LIMIT })
  else await assertKernelWorks(kernel)
})
