'use strict'
// Host processes for the attack suites, started as a real host could be found: as root or
// as an ordinary user the test makes, on a machine with or without user namespaces, with a
// secret in its session keyring and a terminal a person types into
// (`host-launcher.py`), running `hostile/fixtures/edge-host.js`.
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')

const ROOT = path.resolve(__dirname, '..', '..')
const LAUNCHER = path.join(__dirname, 'host-launcher.py')
const FIXTURE = path.join(ROOT, '__tests__', 'hostile', 'fixtures', 'edge-host.js')

const isRoot = process.getuid() === 0

/** The ordinary user the suites run hosts as: `{name, uid, gid}`, made with `useradd`
 *  when missing (root only); null otherwise. */
const testUser = () => require('./launchers').ensureTestUser()

/** A Python every user can run: the system's (the test venv may sit in root's home). */
function systemPython() {
  for (const candidate of ['/usr/bin/python3', '/usr/local/bin/python3']) {
    try {
      fs.accessSync(candidate, fs.constants.X_OK)
      return candidate
    } catch {}
  }
  return process.env.PYKERNEL_TEST_PYTHON || 'python3'
}

/** A directory every user can enter, made for one test, owned by `user` (or us), in
 *  `base` (the host's temporary directory by default). */
function sharedDir(user, prefix = 'pykernel-host-', base = os.tmpdir()) {
  const dir = fs.mkdtempSync(path.join(base, prefix))
  fs.chmodSync(dir, 0o755)
  if (user) fs.chownSync(dir, user.uid, user.gid)
  return dir
}

let addonCopy = null
/** The package's entry and addon, copied where any user may load them (the clone may be
 *  in root's home, which other users cannot enter). */
function sharedAddon() {
  if (addonCopy) return addonCopy
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-addon-'))
  fs.chmodSync(dir, 0o755)
  for (const name of fs.readdirSync(ROOT)) {
    if (['main.js', 'index.js'].includes(name) || name.endsWith('.node')) {
      fs.copyFileSync(path.join(ROOT, name), path.join(dir, name))
      fs.chmodSync(path.join(dir, name), 0o644)
    }
  }
  addonCopy = path.join(dir, 'main.js')
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  return addonCopy
}

/**
 * Runs the edge host once with `runs` ([{name, options, code, exit?}]) and resolves
 * `{ report, launcher, code, signal, stderr }`: the host's JSON report, and what the
 * launcher saw of the terminal and the keyring (`{pty, keys}`).
 *
 * host: { user?: {name,uid,gid}, noUserns?: boolean, key?: 'NAME=VALUE', pty?: boolean };
 * `runtime`: the JavaScript runtime that runs the fixture (Node's, or Bun's); `fixture`:
 * another host program reading the same plan file (`plan` adds to what it holds).
 */
function runEdgeHost(host, runs, { timeoutMs = 120_000, env = {}, runtime = process.execPath, fixture = FIXTURE, plan = {} } = {}) {
  const dir = sharedDir(host.user, 'pykernel-edge-')
  const planFile = path.join(dir, 'plan.json')
  fs.writeFileSync(planFile, JSON.stringify({ addon: sharedAddon(), runs, ...plan }))
  fs.chmodSync(planFile, 0o644)
  const reportFile = path.join(dir, 'launcher.json')
  const args = [LAUNCHER]
  if (host.user) args.push('--user', host.user.name)
  if (host.noUserns) args.push('--no-userns')
  if (host.key) args.push('--key', host.key)
  if (host.pty) args.push('--pty')
  args.push('--report', reportFile, '--', runtime, fixture, planFile)
  const childEnv = { ...process.env, ...env }
  for (const key of Object.keys(childEnv)) if (key.startsWith('PYKERNEL_TEST_')) delete childEnv[key]
  // The user's own runner directory and temporary files, as its own host would have.
  if (host.user) delete childEnv.TMPDIR
  return new Promise((resolve) => {
    const child = spawn(systemPython(), args, { cwd: dir, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      let report = null
      let launcher = null
      try {
        report = JSON.parse(stdout.trim().split('\n').at(-1))
      } catch {}
      try {
        launcher = JSON.parse(fs.readFileSync(reportFile, 'utf8'))
      } catch {}
      resolve({ report, launcher, code, signal, stderr, dir })
    })
  })
}

/**
 * The hosts every attack runs on: as root and as the ordinary user (`testUser()`), each on
 * a machine that gives user namespaces and on one that refuses them; `extra` adds more
 * (a Bun host). `{ name, host, needsUser?, runtime? }` each. On CI, where the tests run
 * as root with useradd, a missing user is an error, not a skip.
 */
function attackModes(extra = []) {
  const user = isRoot ? testUser() : null
  if (process.env.CI && !user) throw new Error('the attack suite needs root and useradd on CI, to run hosts as an ordinary user')
  return [
    { name: 'root host', host: {} },
    ...extra,
    { name: 'ordinary user', host: { user }, needsUser: true },
    { name: 'root host, no user namespaces', host: { noUserns: true } },
    { name: 'ordinary user, no user namespaces', host: { user, noUserns: true }, needsUser: true },
  ]
}

/** A run of an edge host's report by name, asserting that its kernel started. */
function startedRun(result, name) {
  const entry = result.report.runs[name]
  assert.ok(entry, `run ${name} is in the report`)
  assert.equal(entry.startError, undefined, `${name}: the kernel started`)
  return entry
}

module.exports = { isRoot, testUser, systemPython, sharedDir, sharedAddon, runEdgeHost, attackModes, startedRun }
