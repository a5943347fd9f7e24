'use strict'
// Shutdown, and kernels never outliving their host.
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { startKernel, run, groupMembers, strayMembers, kernelProcess, isAlive, waitFor, python, promptBound } = require('../helpers/kernel')

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
