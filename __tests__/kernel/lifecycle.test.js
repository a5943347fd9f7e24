'use strict'
// A kernel's life: its start (aborted, past its deadline), its death from outside, its
// shutdown and the atexit handlers it runs, and kernels never outliving their host.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { addon, startKernel, run, groupMembers, strayMembers, kernelProcess, isAlive, waitFor, python, promptBound, tempDir, fakeInterpreter, processesWith } = require('../helpers/kernel')

// The fake's runner start is what the test stops, not the bytecode compile step before it.
const NO_COMPILE = 'if [ "$1" = "-I" ]; then exit 1; fi\n'

test('Kernel.start: an already aborted signal starts nothing; one aborted during the start kills it', async () => {
  await assert.rejects(startKernel({ signal: AbortSignal.abort() }), (err) => err.code === 'ERR_ABORTED')
  const dir = tempDir()
  const marker = `pykernel-abort-${path.basename(dir)}`
  const exe = fakeInterpreter(dir, `${NO_COMPILE}echo started > ${dir}/started; exec sh -c 'sleep 30; : ${marker}'`)
  const controller = new AbortController()
  const starting = addon.Kernel.start({ interpreter: exe, startupTimeoutMs: 60_000, signal: controller.signal, sandbox: { writable: [dir] } })
  assert.ok(await waitFor(() => fs.existsSync(path.join(dir, 'started'))), 'the runner started')
  const abortedAt = Date.now()
  controller.abort()
  await assert.rejects(starting, (err) => {
    assert.equal(err.code, 'ERR_ABORTED')
    assert.match(err.message, /aborted by its AbortSignal/)
    return true
  })
  assert.ok(Date.now() - abortedAt < 3000)
  assert.deepEqual(processesWith(marker), [], 'the aborted start left its process')
})

test('Kernel.start: deadlineMs bounds the whole start, and nothing is left behind', async () => {
  const dir = tempDir()
  const marker = `pykernel-deadline-${path.basename(dir)}`
  const exe = fakeInterpreter(dir, `${NO_COMPILE}exec sh -c 'sleep 30; : ${marker}'`)
  const started = Date.now()
  await assert.rejects(addon.Kernel.start({ interpreter: exe, startupTimeoutMs: 60_000, deadlineMs: 400 }), (err) => {
    assert.equal(err.code, 'ERR_KERNEL_START_TIMEOUT')
    assert.match(err.message, /deadline of 400 ms/)
    return true
  })
  assert.ok(Date.now() - started < 3000)
  assert.deepEqual(processesWith(marker), [])
  await assert.rejects(startKernel({ deadlineMs: -1 }), (err) => err.code === 'ERR_INVALID_ARG' && /deadlineMs/.test(err.message))
  const k = await startKernel({ deadlineMs: 30_000, signal: new AbortController().signal })
  assert.equal((await k.execute('1 + 1')).result['text/plain'], '2')
  await k.shutdown()
})

test('a kernel that is killed from outside is reported with its signal', async () => {
  const kernel = await startKernel()
  const { result } = await run(kernel, 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)')
  assert.equal(result.kernelDied, true)
  assert.match(result.error.evalue, /SIGKILL/)
  assert.match(result.error.evalue, /possibly out of memory/)
  const shut = await kernel.shutdown()
  assert.equal(shut.confirmed, true)
  assert.equal(shut.signal, 'SIGKILL')
})

test('shutdown is confirmed and leaves nothing of the group behind', async () => {
  const kernel = await startKernel()
  const pid = kernel.pid
  const py = kernelProcess(pid)
  await run(kernel, "import subprocess; p = subprocess.Popen(['sleep', '30'])")
  assert.ok(strayMembers(pid, py).length >= 1, 'the sleep child is in the group beside init and the kernel')
  const bound = await promptBound(2000, () => kernel.execute('1+1'))
  const started = Date.now()
  const result = await kernel.shutdown()
  const took = Date.now() - started
  assert.ok(took < bound, `shutdown took ${took} ms (bound ${bound.toFixed(0)} ms): the runner did not answer the exit request at once`)
  assert.equal(result.confirmed, true)
  assert.equal(result.exitCode, 0)
  assert.equal(kernel.alive, false)
  assert.ok(await waitFor(() => groupMembers(pid).length === 0, { timeoutMs: 2000 }))
  assert.deepEqual(await kernel.shutdown(), result, 'shutdown is idempotent')
})

test('a kernel that answers neither exit nor SIGTERM is SIGKILLed and still confirmed', async () => {
  const kernel = await startKernel()
  // A stopped process reads no exit frame and leaves SIGTERM pending; only SIGKILL ends it.
  const busy = kernel.execute('import os, signal; os.kill(os.getpid(), signal.SIGSTOP)')
  await new Promise((r) => setTimeout(r, 100))
  const started = Date.now()
  const result = await kernel.shutdown({ graceMs: 200 })
  assert.ok(Date.now() - started >= 400, 'waited through the exit and SIGTERM steps')
  assert.equal(result.confirmed, true)
  assert.equal(result.signal, 'SIGKILL')
  assert.equal((await busy).kernelDied, true)
})

test('shutdown runs the atexit handlers cells registered, as Jupyter does; a failing one does not stop it', async () => {
  const dir = tempDir()
  // In its cwd: the host's /tmp around it is not in the kernel's view.
  const kernel = await startKernel({ cwd: dir })
  const marker = path.join(dir, 'atexit-ran')
  await run(kernel, [
    'import atexit',
    'def boom():',
    '    raise RuntimeError("handler failed")',
    `atexit.register(lambda: open(${JSON.stringify(marker)}, "w").write("flushed"))`,
    'atexit.register(boom)',
  ].join('\n'))
  const outcome = await kernel.shutdown()
  assert.equal(outcome.confirmed, true)
  assert.equal(outcome.exitCode, 0)
  assert.equal(fs.readFileSync(marker, 'utf8'), 'flushed')
})

test('an atexit handler that never returns does not keep the kernel alive past its bound', { timeout: 30_000 }, async () => {
  const kernel = await startKernel()
  const pid = kernel.pid
  await run(kernel, 'import atexit, time\natexit.register(lambda: time.sleep(1e9))')
  const started = Date.now()
  // A long grace: the kernel must end on its own, not by the host's SIGTERM.
  const outcome = await kernel.shutdown({ graceMs: 20_000 })
  assert.equal(outcome.confirmed, true)
  assert.equal(outcome.exitCode, 0)
  assert.ok(Date.now() - started < 9000, `shutdown took ${Date.now() - started} ms`)
  assert.equal(isAlive(pid), false)
})

/** Starts a Node child that starts a kernel, reports its pid, then ends as `how` says. */
function hostChild(how) {
  const script = `
    const { Kernel } = require(${JSON.stringify(path.resolve(__dirname, '..', '..'))});
    Kernel.start({ interpreter: ${JSON.stringify(python || null)} || undefined }).then(async (k) => {
      await k.execute('x = 1');
      process.stdout.write(String(k.pid) + '\\n');
      ${how}
    });
  `
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  const pid = new Promise((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (d) => {
      out += d
      if (out.includes('\n')) resolve(Number(out.trim()))
    })
    child.on('exit', () => (out.includes('\n') ? null : reject(new Error('host child exited without a pid'))))
  })
  return { child, pid }
}

test('process.exit() of the host leaves no kernel behind', async () => {
  const { pid } = hostChild('process.exit(0)')
  const kernelPid = await pid
  assert.ok(await waitFor(() => !isAlive(kernelPid), { timeoutMs: 3000 }), 'kernel gone within 3 s')
})

test('a host that just finishes leaves no kernel behind', async () => {
  const { pid } = hostChild('/* nothing keeps the loop alive */')
  const kernelPid = await pid
  assert.ok(await waitFor(() => !isAlive(kernelPid), { timeoutMs: 3000 }), 'kernel gone within 3 s')
})

test('a SIGKILLed host leaves no kernel behind', async () => {
  const { child, pid } = hostChild('setInterval(() => {}, 1000)')
  const kernelPid = await pid
  child.kill('SIGKILL')
  assert.ok(await waitFor(() => !isAlive(kernelPid), { timeoutMs: 12000 }), 'kernel gone within 12 s')
  assert.equal(groupMembers(kernelPid).length, 0)
})
