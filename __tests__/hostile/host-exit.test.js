'use strict'
// Hostile hosts: however a Node or Bun host ends, its kernel (and what the kernel started)
// is gone within 3 s; within 12 s when the host was SIGKILLed.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { python, isAlive, groupMembers, waitFor } = require('./_common')

const FIXTURE = path.join(__dirname, 'fixtures', 'host-child.js')
const BUN = path.resolve(__dirname, '..', '..', 'node_modules', '.bin', 'bun')

// Bun is a devDependency: when it is missing the Bun cases fail (spawning it fails); they
// are never skipped.
const HOSTS = [
  ['Node', process.execPath],
  ['Bun', BUN],
]

/** Whether a live process on the host has `marker` in its command line (the kernel's
 *  child has a pid of the kernel's own PID namespace, meaningless here). */
function runningWith(marker) {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (fs.readFileSync(`/proc/${entry}/cmdline`, 'latin1').includes(marker) && isAlive(Number(entry))) return true
    } catch {}
  }
  return false
}

/** Starts a host child; resolves its kernel's pid and the pid of a child the kernel left. */
function startHost(runtime, how) {
  const env = { ...process.env }
  if (python) env.PYKERNEL_TEST_PYTHON = python
  const child = spawn(runtime, [FIXTURE, how], { stdio: ['ignore', 'pipe', 'pipe'], env })
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, at: Date.now() })))
  const pids = new Promise((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (d) => {
      out += d
      const m = out.match(/^(\d+) (\S+)\n/)
      if (m) resolve({ kernel: Number(m[1]), grandchild: m[2], at: Date.now() })
    })
    // Once its stdout has ended, not some time after its exit: on a loaded machine the
    // exit can be seen well before the last line written before it.
    child.stdout.on('close', () => reject(new Error(`host ended its stdout before reporting its kernel: ${stderr.slice(-500)}`)))
  })
  return { child, pids, exited, stderr: () => stderr }
}

const ENDINGS = [
  ['natural drain', 'drain', null, 3000],
  ['natural drain of an idle pool', 'pool-drain', null, 3000],
  ['process.exit()', 'exit', null, 3000],
  ['an uncaught exception', 'throw', null, 3000],
  ['SIGTERM', 'wait', 'SIGTERM', 3000],
  ['SIGKILL', 'wait', 'SIGKILL', 12000],
]

test.describe('host exits', { concurrency: 5 }, () => {
  for (const [runtimeName, runtime] of HOSTS) {
    for (const [name, how, signal, bound] of ENDINGS) {
      test(`${runtimeName} host, ${name}: the kernel and its children are gone within ${bound / 1000} s`, { timeout: 40_000 }, async (t) => {
        const host = startHost(runtime, how)
        t.after(() => host.child.exitCode === null && host.child.signalCode === null && host.child.kill('SIGKILL'))
        const { kernel, grandchild } = await host.pids
        if (signal) {
          assert.ok(isAlive(kernel), `the kernel ${kernel} runs until the host is signalled`)
          assert.ok(await waitFor(() => runningWith(grandchild), { timeoutMs: 2000 }), `the kernel's child (${grandchild}) runs until the host is signalled`)
          host.child.kill(signal)
        }
        // The host must end on its own (drain, exit, throw) or by the signal.
        const ended = await Promise.race([host.exited, new Promise((r) => setTimeout(() => r(null), 5000))])
        assert.ok(ended, `the ${runtimeName} host did not end (${name}); stderr: ${host.stderr().slice(-300)}`)
        const from = Date.now()
        const gone = await waitFor(() => !isAlive(kernel), { timeoutMs: bound })
        const kernelMs = Date.now() - from
        const groupGone = await waitFor(() => !runningWith(grandchild) && groupMembers(kernel).length === 0, { timeoutMs: Math.max(0, bound - kernelMs) })
        t.diagnostic(`host ended (${ended.code ?? ended.signal}); kernel gone after ${kernelMs} ms`)
        assert.ok(gone, `kernel ${kernel} still alive ${bound} ms after the host ended`)
        assert.ok(groupGone, `the kernel's child ${grandchild} still alive ${bound} ms after the host ended`)
      })
    }
  }
})

test.describe('a running cell and natural exit', { concurrency: 2 }, () => {
  for (const [runtimeName, runtime] of HOSTS) {
    test(`${runtimeName} host: a running cell keeps the host alive until its timeout, then the host ends on its own`, { timeout: 40_000 }, async (t) => {
      const host = startHost(runtime, 'running-cell')
      t.after(() => host.child.exitCode === null && host.child.signalCode === null && host.child.kill('SIGKILL'))
      const { kernel, at } = await host.pids
      const ended = await Promise.race([host.exited, new Promise((r) => setTimeout(() => r(null), 10_000))])
      assert.ok(ended, `the ${runtimeName} host did not end after the cell's timeout; stderr: ${host.stderr().slice(-300)}`)
      assert.equal(ended.code, 0, host.stderr())
      assert.match(host.stderr(), /cell ended: timedOut=true/, 'the host waited for the cell to end')
      assert.ok(ended.at - at >= 900, `the host ended ${ended.at - at} ms after the cell started, before its 1.5 s timeout`)
      assert.ok(await waitFor(() => !isAlive(kernel), { timeoutMs: 3000 }), `kernel ${kernel} still alive 3 s after the host ended`)
    })
  }
})
