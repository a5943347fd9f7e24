'use strict'
// Hostile input: process abuse. A cell that kills, crashes, forks or mangles its own
// process must end with a clear outcome; the host stays responsive; the kernel (or a fresh
// one) works afterwards; nothing is left running.
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, python, startKernel, groupMembers, strayMembers, kernelProcess, processesWith, isAlive, waitFor, sleep, whileRunning, assertResponsive, probeFloor, assertFreshKernelWorks, assertKernelWorks } = require('./_common')

let probe
test.before(async () => {
  probe = await startKernel()
  await probeFloor(probe) // the quiet round trip the responsiveness bound scales with
})
test.after(() => probe?.shutdown())

/** The kernel died under the cell: stated in the result, later calls refused, a fresh
 *  kernel works. */
async function assertDiedClearly(kernel, result, evalue) {
  assert.equal(result.kernelDied, true)
  assert.equal(result.status, 'error')
  assert.equal(result.error?.ename, 'KernelDied')
  assert.match(result.error.evalue, evalue)
  assert.ok(await waitFor(() => !kernel.alive, { timeoutMs: 2000 }))
  await assert.rejects(kernel.execute('1'), (err) => err.code === 'ERR_KERNEL_DEAD')
  assert.ok(await waitFor(() => groupMembers(kernel.pid).length === 0, { timeoutMs: 3000 }), 'nothing of the dead kernel is left')
  await assertResponsive(probe, 'after the kernel died')
  await assertFreshKernelWorks()
}

test('os._exit(3): death stated with the exit code, output before it delivered', async () => {
  const kernel = await startKernel()
  const r = await kernel.execute("import os\nprint('bye')\nos._exit(3)")
  assert.equal(r.stdout, 'bye\n')
  await assertDiedClearly(kernel, r, /died during the cell \(exit code 3\)/)
})

test('os.kill(os.getpid(), SIGKILL): death stated with the signal', async () => {
  const kernel = await startKernel()
  const r = await kernel.execute('import os, signal\nos.kill(os.getpid(), signal.SIGKILL)')
  await assertDiedClearly(kernel, r, /killed by signal 9 \(SIGKILL\)/)
})

test('segfault via ctypes.string_at(0): death stated as SIGSEGV with the fault trace; the pool replaces the kernel', async (t) => {
  const kernel = await startKernel()
  const r = await kernel.execute('import ctypes\nctypes.string_at(0)')
  assert.match(r.error.traceback.join('\n'), /Segmentation fault/)
  await assertDiedClearly(kernel, r, /killed by signal 11 \(SIGSEGV\)/)

  const pool = new addon.KernelPool({ kernel: { interpreter: python } })
  t.after(() => pool.disposeAll())
  const crashed = await pool.execute({ sessionId: 'segv', cells: [{ code: 'import ctypes\nctypes.string_at(0)' }] })
  assert.equal(crashed.exitCode, 1)
  assert.equal(crashed.kernelDied, true)
  assert.match(crashed.output, /SIGSEGV/)
  const next = await pool.execute({ sessionId: 'segv', cells: [{ code: '6*7' }] })
  assert.equal(next.exitCode, 0)
  assert.equal(next.cells.at(-1).result?.['text/plain'], '42')
})

test('sys.stdout.close(): printing still works in this cell and the next', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const r = await kernel.execute("import sys\nsys.stdout.close()\nsys.stderr.close()\nprint('after close')\nprint('err after close', file=sys.stderr)")
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(r.stdout, 'after close\n')
  assert.equal(r.stderr, 'err after close\n')
  await assertKernelWorks(kernel)
  await assertResponsive(probe)
})

test('os.close(1): the cell goes on, and later cells capture print and child output again', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const r = await kernel.execute("import os\nos.close(1)\nprint('print after close')")
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(r.stdout, 'print after close\n')
  assert.equal(kernel.alive, true)
  // A descriptor opened now must not become the new fd 1 that output lands in.
  await kernel.execute("f = open('/dev/null', 'rb')")
  const next = await kernel.execute("import os, subprocess\nprint('p2', flush=True)\nos.system('echo shell2')\nsubprocess.run(['echo', 'sub2'])\nos.write(1, b'fd2\\n')\nNone")
  assert.equal(next.status, 'ok', JSON.stringify(next.error))
  assert.equal(next.stdout, 'p2\nshell2\nsub2\nfd2\n', `stdout ${JSON.stringify(next.stdout)}, stderr ${JSON.stringify(next.stderr)}`)
  assert.equal(next.stderr, '')
  await assertKernelWorks(kernel)
  await assertResponsive(probe)
})

test('os.close(0): input() still refuses at once, children still get an empty stdin', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const r = await kernel.execute("import os\nos.close(0)\nprint('closed 0')")
  assert.equal(r.status, 'ok')
  assert.equal(r.stdout, 'closed 0\n')
  const input = await kernel.execute('input()')
  assert.equal(input.error?.ename, 'StdinNotImplementedError')
  assert.equal(input.stdinRequested, true)
  // Files opened after the close take fd 0 (Python opens them non-inheritable).
  await kernel.execute("f = open('/etc/hostname')\nf.fileno()")
  const child = await kernel.execute("import subprocess\nr = subprocess.run(['cat'], capture_output=True, timeout=5)\n(r.returncode, r.stdout, r.stderr)", { timeoutMs: 10_000 })
  assert.equal(child.status, 'ok', JSON.stringify(child.error))
  assert.equal(child.result?.['text/plain'], "(0, b'', b'')", 'a child reads an empty /dev/null stdin')
  await assertKernelWorks(kernel)
})

test('sys.stdout = 42: the cell fails with a clear error, the next cell prints normally', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const r = await kernel.execute("import sys\nsys.stdout = 42\nprint('junk')")
  assert.equal(r.status, 'error')
  assert.equal(r.error.ename, 'AttributeError')
  assert.match(r.error.evalue, /'int' object has no attribute 'write'/)
  const junkErr = await kernel.execute("import sys\nsys.stderr = None\nraise ValueError('reported anyway')")
  assert.equal(junkErr.error?.ename, 'ValueError')
  await assertKernelWorks(kernel)
  const err = await kernel.execute("import sys\nprint('to stderr', file=sys.stderr)")
  assert.equal(err.stderr, 'to stderr\n')
})

test.describe('cells that do not stop on interrupt', { concurrency: 2 }, () => {
  for (const [name, code] of [
    ['signal(SIGINT, SIG_IGN) then a loop', 'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.01)'],
    ['a tight C loop holding the GIL (sum(range(10**12)))', 'sum(range(10**12))'],
  ]) {
    test(`${name}: the timeout kills the kernel within the escalation window`, { timeout: 30_000 }, async () => {
      const kernel = await startKernel()
      const started = Date.now()
      const { value: r } = await whileRunning(probe, () => kernel.execute(code, { timeoutMs: 300 }), { ready: () => sleep(400) })
      const elapsed = Date.now() - started
      assert.ok(elapsed < 300 + 5000 + 2500, `the cell ended after ${elapsed} ms`)
      assert.equal(r.timedOut, true)
      assert.equal(r.cancelled, true)
      // Neither cell can take the interrupt (SIGINT ignored; a C loop that never checks for
      // signals), so the escalation must have killed the kernel.
      assert.equal(r.kernelDied, true, `not killed: ${JSON.stringify(r.error)}`)
      assert.match(r.error.evalue, /did not respond to the interrupt/)
      assert.equal(kernel.alive, false)
      assert.ok(await waitFor(() => groupMembers(kernel.pid).length === 0, { timeoutMs: 3000 }))
      await assertFreshKernelWorks()
    })
  }
})

test('fork() without exec: the parent gets its result, the child ends, the kernel carries on', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  // The group: init of the kernel's PID namespace (kernel.pid) and the Python kernel.
  const py = kernelProcess(kernel.pid)
  assert.deepEqual(groupMembers(kernel.pid).sort(), [kernel.pid, py].sort())
  const code = [
    'import os',
    'pid = os.fork()',
    'if pid == 0:',
    "    print('child says hi')",
    'else:',
    '    os.waitpid(pid, 0)',
    "    print('parent waited')",
    "'child' if pid == 0 else 'parent'",
  ].join('\n')
  const r = await kernel.execute(code)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(r.result?.['text/plain'], "'parent'")
  assert.equal(r.stdout, 'child says hi\nparent waited\n')
  // An unwaited child that falls off the end of the cell must not become a second kernel.
  const both = await kernel.execute("import os\nchild = os.fork()\n'result'")
  assert.equal(both.result?.['text/plain'], "'result'")
  assert.equal(both.executionCount, r.executionCount + 1)
  assert.ok(await waitFor(() => strayMembers(kernel.pid, py).length === 0, { timeoutMs: 3000 }), 'the forked children ended')
  assert.deepEqual(groupMembers(kernel.pid).sort(), [kernel.pid, py].sort(), 'the kernel itself carries on')
  const next = await kernel.execute('1+1')
  assert.equal(next.executionCount, both.executionCount + 1)
  await assertKernelWorks(kernel)
  await assertResponsive(probe)
})

// A child's Popen(...).pid is a pid of the kernel's PID namespace, meaningless on the host:
// the children carry a marker as their argv[0] and are found by it in /proc/*/cmdline.
// Popen returns once the child's exec has closed its descriptors, a moment before the new
// program's arguments are in place: until then its cmdline reads empty, and a scan misses
// it (the last child, under load). So the cell counts as started only the children whose
// cmdline shows the marker, waiting for them, and its value is that count.
let spawnCount = 0
function spawn200() {
  const marker = `pykernel-hostile-sleep-${process.pid}-${++spawnCount}`
  const code = `import subprocess, time
marker = ${JSON.stringify(marker)}
procs = [subprocess.Popen([marker, '300'], executable='sleep') for _ in range(200)]
def started(p):
    with open(f'/proc/{p.pid}/cmdline', 'rb') as f:
        return f.read().split(b'\\0')[0] == marker.encode()
end = time.monotonic() + 10
while not all(map(started, procs)) and time.monotonic() < end:
    time.sleep(0.005)
sum(map(started, procs))`
  return { marker, code }
}

test('200 children left running: Kernel.shutdown() leaves none', { timeout: 30_000 }, async () => {
  const kernel = await startKernel()
  const spawn = spawn200()
  const { value: r } = await whileRunning(probe, () => kernel.execute(spawn.code), { ready: () => sleep(100), requireOverlap: false })
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(r.result['text/plain'], '200')
  const pids = processesWith(spawn.marker)
  assert.equal(pids.length, 200)
  assert.ok(pids.every(isAlive))
  const started = Date.now()
  const s = await kernel.shutdown()
  assert.equal(s.confirmed, true)
  assert.ok(await waitFor(() => pids.every((p) => !isAlive(p)), { timeoutMs: 3000 }), `${pids.filter(isAlive).length} children still alive`)
  assert.ok(Date.now() - started < 5000)
  assert.equal(groupMembers(kernel.pid).length, 0)
  await assertFreshKernelWorks()
})

test('200 children left running: pool.disposeOwner() leaves none', { timeout: 30_000 }, async (t) => {
  const pool = new addon.KernelPool({ kernel: { interpreter: python } })
  t.after(() => pool.disposeAll())
  const spawn = spawn200()
  const r = await pool.execute({ sessionId: 'children', cells: [{ code: spawn.code }] })
  assert.equal(r.exitCode, 0, r.output)
  assert.equal(r.cells.at(-1).result['text/plain'], '200')
  const pids = processesWith(spawn.marker)
  const kernelPid = pool.sessions[0].pid
  assert.equal(pids.length, 200)
  assert.ok(pids.every(isAlive))
  await pool.disposeOwner('children', { budgetMs: 3000 })
  assert.ok(await waitFor(() => pids.every((p) => !isAlive(p)), { timeoutMs: 3000 }), `${pids.filter(isAlive).length} children still alive`)
  assert.equal(groupMembers(kernelPid).length, 0)
  const again = await pool.execute({ sessionId: 'children', cells: [{ code: '6*7' }] })
  assert.equal(again.cells.at(-1).result?.['text/plain'], '42')
})

test('a daemon thread printing after its cell ended: delivered marked late, never as a later cell\'s own output', { timeout: 20_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const code = [
    'import sys, threading, time',
    'def spam():',
    '    for i in range(60):',
    '        time.sleep(0.025)',
    "        print('LEAK', i)",
    "        sys.stderr.write('LEAKERR %d\\n' % i)",
    'threading.Thread(target=spam, daemon=True).start()',
    "'started'",
  ].join('\n')
  const first = await kernel.execute(code)
  assert.equal(first.result?.['text/plain'], "'started'")
  const later = []
  const events = []
  const deadline = Date.now() + 1800 // the thread prints for ~1.5 s
  while (Date.now() < deadline) {
    const r = await kernel.execute("import time\ntime.sleep(0.1)\nprint('mine')", { onEvent: (e) => events.push(e) })
    later.push(r)
  }
  assert.ok(later.length >= 5)
  for (const r of later) {
    assert.equal(r.stdout, 'mine\n', `a later cell got ${JSON.stringify(r.stdout.slice(0, 200))}`)
    assert.equal(r.stderr, '')
  }
  // Nothing is lost: every line arrives, as late output, and only as late output.
  const leaked = events.filter((e) => /LEAK/.test(e.text ?? ''))
  assert.ok(leaked.every((e) => e.late === true), `unmarked: ${JSON.stringify(leaked.find((e) => !e.late))}`)
  const lines = leaked.map((e) => e.text).join('').split('\n').filter(Boolean)
  assert.ok(lines.filter((l) => l.startsWith('LEAK ')).length >= 40, `only ${lines.length} late lines arrived`)
  assert.ok(lines.some((l) => l.startsWith('LEAKERR ')), 'late stderr arrives too')
  // The agent text marks it.
  const agent = await kernel.evaluate([{ code: "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.2), print('AFTER'))).start()\nprint('own')" }])
  assert.equal(agent.output, 'own\n')
  const next = await kernel.evaluate([{ code: "import time; time.sleep(0.4); print('next')" }])
  assert.equal(next.output, '[late output from an earlier cell]\nAFTER\n[end of late output]\nnext\n')
  await assertKernelWorks(kernel)
  await assertResponsive(probe)
})

test('a non-daemon threading.Thread still running at shutdown: shutdown confirmed, nothing left', async () => {
  const kernel = await startKernel()
  const r = await kernel.execute("import threading, time\nt = threading.Thread(target=time.sleep, args=(300,))\nt.start()\nt.is_alive()")
  assert.equal(r.result?.['text/plain'], 'True')
  const started = Date.now()
  const s = await kernel.shutdown()
  const elapsed = Date.now() - started
  assert.equal(s.confirmed, true)
  assert.ok(elapsed < 3500, `shutdown took ${elapsed} ms`)
  assert.equal(isAlive(kernel.pid), false)
  assert.equal(groupMembers(kernel.pid).length, 0)
  await assertResponsive(probe)
})

test('a background child writing between cells: its output arrives with the next cell, marked late', { timeout: 20_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await kernel.execute("import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 0.3; echo CHILD-LATE'])")
  await new Promise((r) => setTimeout(r, 800)) // the child writes while no cell runs
  const events = []
  const r = await kernel.execute("print('own')", { onEvent: (e) => events.push(e) })
  assert.equal(r.stdout, 'own\n')
  assert.deepEqual(events.filter((e) => e.late).map((e) => e.text), ['CHILD-LATE\n'])
})

test('stream text cut at a slice boundary just before a lone high surrogate is sent whole and the kernel lives', { timeout: 30_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  // One flush of two writes: the first fills a slice exactly (256 Ki characters), the
  // second ends in a high surrogate.
  const r = await kernel.execute("import sys\nsys.stdout.write('a' * (1 << 18)); sys.stdout.write('x' * (3 << 20) + '\\ud800')\nsys.stdout.flush()\n6*7")
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(r.result['text/plain'], '42')
  assert.equal(r.stdout.length, (1 << 18) + (3 << 20) + 1)
  assert.equal((await kernel.execute('1+1')).result['text/plain'], '2')
})
