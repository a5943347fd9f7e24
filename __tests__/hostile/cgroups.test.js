'use strict'
// A kernel with maxProcesses runs in a pids cgroup of its own (where the host may make
// one): every way a kernel ends removes its directory, and a host that could not (killed
// with SIGKILL) has its directories swept by the next host that starts such a kernel.
// Counted by name, `pykernel-<host pid>-<n>`, so kernels of other processes on this
// machine do not disturb the counts.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { addon, python, startKernel, waitFor, tempDir, fakeInterpreter, isAlive, processesWith, pidsCgroupBase, kernelCgroups, kernelCgroupOf } = require('./_common')

const LIMITED = { maxProcesses: 16 }
const FIXTURE = path.join(__dirname, 'fixtures', 'cgroup-host.js')

/** This host's kernel cgroups that were not there before the test. */
let before = new Set()
const newCgroups = () => kernelCgroups().filter((name) => !before.has(name))

/** Asserts that the test's kernels left no cgroup within `ms` (removal follows the
 *  kernel's reap on another thread); reports how long it took. */
async function assertNoneLeft(t, what, ms = 2000) {
  const from = Date.now()
  const gone = await waitFor(() => newCgroups().length === 0, { timeoutMs: ms, intervalMs: 5 })
  assert.ok(gone, `${what}: left ${newCgroups().join(', ')}`)
  t.diagnostic(`${what}: removed after ${Date.now() - from} ms`)
}

/** A kernel with a cgroup, checked to be in it. */
async function limitedKernel(options = {}) {
  const kernel = await startKernel({ ...LIMITED, ...options })
  assert.match(kernelCgroupOf(kernel.pid) ?? '', new RegExp(`^pykernel-${process.pid}-\\d+$`), 'the kernel runs in a cgroup of this host')
  return kernel
}

test.describe('pids cgroup removal', { skip: pidsCgroupBase() ? false : 'no writable pids cgroup on this machine' }, () => {
  // A cgroup a failed test left behind must not fail the tests after it.
  test.beforeEach(() => {
    before = new Set(kernelCgroups())
  })

  test('shutdown', async (t) => {
    const kernel = await limitedKernel()
    t.after(() => kernel.shutdown())
    await kernel.shutdown()
    await assertNoneLeft(t, 'shutdown')
  })

  test('the kernel exits on its own (os._exit in a cell)', async (t) => {
    const kernel = await limitedKernel()
    t.after(() => kernel.shutdown())
    const r = await kernel.execute('import os\nos._exit(3)')
    assert.equal(r.kernelDied, true)
    await assertNoneLeft(t, 'os._exit')
  })

  test('the kernel is killed from outside (SIGKILL)', async (t) => {
    const kernel = await limitedKernel()
    t.after(() => kernel.shutdown())
    process.kill(kernel.pid, 'SIGKILL')
    assert.ok(await waitFor(() => !kernel.alive))
    await assertNoneLeft(t, 'SIGKILL from outside')
  })

  // Without the sandbox's PID namespace, a process that left the kernel's group outlives
  // the kernel; its cgroup still holds it, and is emptied before it is removed.
  test('sandbox off: shutdown also ends a setsid child the kernel left behind', async (t) => {
    const marker = `pykernel-cgroup-leftover-${process.pid}-${Date.now()}`
    const kernel = await limitedKernel({ sandbox: 'off' })
    t.after(() => kernel.shutdown())
    const r = await kernel.execute(`import subprocess\nsubprocess.Popen(['sh', '-c', 'sleep 60; : ${marker}'], start_new_session=True)`)
    assert.equal(r.status, 'ok', JSON.stringify(r.error))
    assert.ok(await waitFor(() => processesWith(marker).length === 1), 'the child runs')
    await kernel.shutdown()
    await assertNoneLeft(t, 'shutdown with a setsid child')
    assert.deepEqual(processesWith(marker), [], 'the child is gone')
  })

  test('the kernel is killed for its process limit', async (t) => {
    const kernel = await limitedKernel({ maxProcesses: 4 })
    t.after(() => kernel.shutdown())
    // Bounded: 20 children, each gone after a second.
    const r = await kernel.execute('import os, time\nfor _ in range(20):\n    if os.fork() == 0:\n        time.sleep(1)\n        os._exit(0)\ntime.sleep(1)')
    assert.match(r.error?.evalue ?? '', /maxProcesses limit/)
    await assertNoneLeft(t, 'process limit')
  })

  test('processes that left the cgroup are still counted: the PID namespace holds them', async (t) => {
    const kernel = await limitedKernel({ maxProcesses: 8 })
    t.after(() => kernel.shutdown())
    // Five sleepers; then the host itself (a cell cannot: /sys is read-only in its view)
    // moves four of them out of the kernel's cgroup, as an escape from it would.
    const started = await kernel.execute('import subprocess\nsleepers = [subprocess.Popen(["sleep", "30"]) for _ in range(5)]')
    assert.equal(started.status, 'ok', JSON.stringify(started.error))
    const cgroup = path.join(pidsCgroupBase(), kernelCgroupOf(kernel.pid))
    // Popen returns when exec closed the child's error pipe, which Linux does before it
    // lays out the new program's arguments: a sleeper's cmdline can read empty a moment
    // longer, so wait until all five read as `sleep`.
    const sleepers = () => fs.readFileSync(path.join(cgroup, 'cgroup.procs'), 'utf8').trim().split('\n').map(Number)
      .filter((pid) => { try { return fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').startsWith('sleep') } catch { return false } })
    assert.ok(await waitFor(() => sleepers().length === 5), `five sleepers in the kernel's cgroup: ${sleepers().length}`)
    const moved = sleepers().slice(0, 4)
    for (const pid of moved) fs.writeFileSync(path.join(pidsCgroupBase(), 'cgroup.procs'), String(pid))
    t.after(() => moved.forEach((pid) => { try { process.kill(pid, 'SIGKILL') } catch {} }))
    // Four more: 10 in the namespace beside the kernel, 6 in the cgroup.
    const r = await kernel.execute('more = [subprocess.Popen(["sleep", "30"]) for _ in range(4)]\nimport time\ntime.sleep(2)')
    assert.match(r.error?.evalue ?? '', /more than 8 processes/, JSON.stringify(r))
  })

  test('the kernel is dropped by the garbage collector (Drop kills it), in a host child', { timeout: 30_000 }, async () => {
    const env = { ...process.env, ...(python ? { PYKERNEL_TEST_PYTHON: python } : {}) }
    const child = spawn(process.execPath, ['--expose-gc', FIXTURE, 'gc'], { stdio: ['ignore', 'pipe', 'pipe'], env })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    const code = await new Promise((resolve) => child.on('exit', resolve))
    assert.equal(code, 0, err)
    assert.match(out, /^\d+ pykernel-\d+-0\ngone \d+\n$/, `the kernel's cgroup after the kernel was collected: ${out}`)
  })

  test('a pool: disposeAll removes the cgroups of its sessions and spares', async (t) => {
    const pool = new addon.KernelPool({ kernel: { interpreter: python, ...LIMITED }, prewarm: 1 })
    t.after(() => pool.disposeAll())
    const r = await pool.execute({ sessionId: 'cg', cells: [{ code: '1 + 1' }] })
    assert.equal(r.exitCode, 0, r.output)
    assert.ok(await waitFor(() => pool.spares.length === 1), 'a spare is ready')
    assert.equal(newCgroups().length, 2, 'a session and a spare, each in its cgroup')
    await pool.disposeAll()
    await assertNoneLeft(t, 'pool disposeAll')
  })

  test('failed starts: a bad cwd, a missing interpreter, an interpreter that exits at once', async (t) => {
    const dir = tempDir()
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    await assert.rejects(startKernel({ ...LIMITED, cwd: path.join(dir, 'missing') }), (e) => e.code === 'ERR_CWD_INVALID')
    await assertNoneLeft(t, 'bad cwd', 0)
    await assert.rejects(startKernel({ ...LIMITED, interpreter: path.join(dir, 'no-python') }), (e) => e.code === 'ERR_PYTHON_INVALID')
    await assertNoneLeft(t, 'missing interpreter', 0)
    // This one gets as far as its cgroup and the spawn, then exits before it is ready.
    const dying = fakeInterpreter(dir, 'echo dying >&2; exit 1')
    await assert.rejects(startKernel({ ...LIMITED, interpreter: dying }), (e) => e.code === 'ERR_KERNEL_START_FAILED')
    await assertNoneLeft(t, 'interpreter that exits')
  })

  test('a host killed with SIGKILL leaves its cgroup; the next host to start a limited kernel removes it', { timeout: 30_000 }, async (t) => {
    const env = { ...process.env, ...(python ? { PYKERNEL_TEST_PYTHON: python } : {}) }
    // The hosts run in a cgroup of the test's own: another test file's host, starting a
    // limited kernel of its own, would sweep what the dead host left before the test looks.
    const arena = path.join(pidsCgroupBase(), `pykernel-test-arena-${process.pid}`)
    fs.mkdirSync(arena)
    // Removed once empty: a host's kernel may still be dying in a cgroup beneath it (its
    // last processes are reaped a moment after the host saw it end, longer under load).
    t.after(async () => {
      const removeTree = (dir) => {
        for (const e of fs.readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) removeTree(path.join(dir, e.name))
        for (const pid of fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
          try { process.kill(Number(pid), 'SIGKILL') } catch {}
        }
        fs.rmdirSync(dir)
      }
      const gone = await waitFor(() => {
        try {
          if (fs.existsSync(arena)) removeTree(arena)
          return true
        } catch (e) {
          if (e.code !== 'EBUSY') throw e
          return false
        }
      }, { timeoutMs: 15_000, intervalMs: 100 })
      assert.ok(gone, `the test's cgroup ${arena} could be removed`)
    })
    const hostIn = (how) =>
      spawn('sh', ['-c', `echo $$ > "${arena}/cgroup.procs" && exec "$@"`, 'sh', process.execPath, FIXTURE, how], { stdio: ['ignore', 'pipe', 'pipe'], env })
    const report = (child) =>
      new Promise((resolve, reject) => {
        let out = ''
        child.stdout.on('data', (d) => {
          out += d
          const m = out.match(/^(\d+) (\S+)\n/)
          if (m) resolve({ kernel: Number(m[1]), cgroup: m[2] })
        })
        child.on('exit', () => reject(new Error(`the host ended before reporting its kernel: ${out}`)))
      })
    const host = hostIn('wait')
    t.after(() => host.exitCode === null && host.signalCode === null && host.kill('SIGKILL'))
    const exited = new Promise((resolve) => host.on('exit', resolve))
    const reported = await report(host)
    assert.match(reported.cgroup, new RegExp(`^pykernel-${host.pid}-0$`))
    const dir = path.join(arena, reported.cgroup)
    assert.ok(fs.existsSync(dir), dir)
    host.kill('SIGKILL')
    // Reaped by Node on 'exit': until then /proc still shows the host.
    await exited
    assert.ok(await waitFor(() => !isAlive(reported.kernel), { timeoutMs: 12_000 }), 'the kernel ends with its host')
    assert.ok(fs.existsSync(dir), 'nobody was left to remove the dead host\'s cgroup')
    const next = hostIn('once')
    const ended = new Promise((resolve) => next.on('exit', resolve))
    await report(next)
    assert.equal(await ended, 0)
    assert.equal(fs.existsSync(dir), false, 'the new host swept the dead host\'s cgroup')
  })
})
