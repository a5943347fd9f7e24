'use strict'
// Self-test of __tests__/helpers/launchers.js: the real launchers the `launcher` option tests
// rely on work on this machine. With CI set a missing tool fails (.ci/run installs them).
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFile, spawn } = require('node:child_process')
const { promisify } = require('node:util')
const L = require('../helpers/launchers')

const execFileP = promisify(execFile)
const python = process.env.PYKERNEL_TEST_PYTHON || 'python3'
const run = (argv, opts = {}) => execFileP(argv[0], argv.slice(1), { timeout: 10_000, ...opts })
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** false => skipped; throws instead when CI is set, so a missing tool cannot go unnoticed. */
function needs(t, available, what) {
  if (available) return true
  assert.ok(!process.env.CI, `${what} is not usable here, but CI is set (.ci/run should install it)`)
  t.skip(`${what} is not usable here`)
  return false
}

test('ssh launcher: throwaway sshd on 127.0.0.1 runs python; stop() leaves nothing', async (t) => {
  if (!needs(t, L.sshAvailable(), 'ssh + /usr/sbin/sshd')) return
  const sshd = await L.startSshd()
  try {
    assert.ok(sshd.pythonPath, 'the login shell over ssh finds python3')
    // ssh re-parses the remote words through the far login shell: quote them...
    const { stdout } = await run([...sshd.launcher, ...[python, '-c', 'print(1+1)'].map(L.shellQuote)])
    assert.equal(stdout.trim(), '2')
    // ...unquoted, `print(1+1)` is a shell syntax error over there (unlike bwrap / unshare).
    await assert.rejects(run([...sshd.launcher, python, '-c', 'print(1+1)']), /syntax error/)
    assert.ok(L.farProcessAlive(sshd.pid))
    assert.ok(L.hostPidsOfCommandLine(sshd.dir).length >= 2, 'sshd listener + ControlMaster')
  } finally {
    await sshd.stop()
  }
  assert.equal(L.farProcessAlive(sshd.pid), false, 'sshd is gone')
  assert.deepEqual(L.hostPidsOfCommandLine(sshd.dir), [], 'no sshd or ssh mux master is left')
})

test('bwrap launcher: private empty /tmp, own PID namespace, torn down with bwrap', async (t) => {
  if (!needs(t, L.bwrapAvailable(), 'bwrap')) return
  const argv = L.bwrapLauncher()
  const { stdout } = await run([...argv, python, '-c', 'import json, os; print(json.dumps([sorted(os.listdir("/tmp")), os.getpid()]))'])
  // Empty, apart from a test venv under /tmp that bwrapLauncher() binds back in.
  const bound = argv.flatMap((a, i) => (a === '--ro-bind' && argv[i + 2].startsWith('/tmp/') ? [argv[i + 2].split('/')[2]] : []))
  assert.deepEqual(JSON.parse(stdout), [[...new Set(bound)].sort(), 2]) // bwrap's init is pid 1 inside
  // Namespace pids mean nothing here: find the far side by a marker in its command line.
  const marker = `launchers-harness-${process.pid}-${Date.now()}`
  const child = spawn(L.bwrapLauncher()[0], [...L.bwrapLauncher().slice(1), python, '-c', `print("up", flush=True); import time; time.sleep(60)  # ${marker}`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await new Promise((resolve, reject) => {
    child.stdout.once('data', resolve)
    child.once('exit', (c) => reject(new Error(`bwrap exited ${c}`)))
  })
  assert.ok(L.hostPidsOfCommandLine(marker).length >= 2, 'bwrap + the sandboxed python')
  child.kill('SIGKILL') // killing the outer bwrap must take the namespace down with it
  for (let i = 0; i < 40 && L.hostPidsOfCommandLine(marker).length; i++) await sleep(50)
  assert.deepEqual(L.hostPidsOfCommandLine(marker), [])
})

test('unshare launcher: runs python as pid 1 of a new PID namespace', async (t) => {
  if (!needs(t, L.unshareAvailable(), 'unshare')) return
  const { stdout } = await run([...L.unshareLauncher(), python, '-c', 'import os; print(1+1, os.getpid())'])
  assert.equal(stdout.trim(), '2 1')
})

test('farProcessAlive / hostPidsOfCommandLine', () => {
  assert.equal(L.farProcessAlive(process.pid), true)
  assert.equal(L.farProcessAlive(2 ** 22 + 1), false) // above pid_max
  assert.deepEqual(L.hostPidsOfCommandLine(`no-such-marker-${Date.now()}`), [])
})
