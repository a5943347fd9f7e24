'use strict'
// Real launchers for the `KernelOptions.launcher` tests: a throwaway OpenSSH server on
// 127.0.0.1, bubblewrap and util-linux `unshare`, plus /proc probes to check that nothing is
// left running on the far side. node:* only, so it works before anything else is built.
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { execFile, spawn, spawnSync } = require('node:child_process')
const { promisify } = require('node:util')

const execFileP = promisify(execFile)
const SSHD = '/usr/sbin/sshd' // sshd refuses to start (re-exec) unless run by absolute path
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

function isExecutable(p) {
  try {
    fs.accessSync(p, fs.constants.X_OK)
    return fs.statSync(p).isFile()
  } catch {
    return false
  }
}

/** `command -v` without a shell. */
function onPath(cmd) {
  return (process.env.PATH || '').split(path.delimiter).some((d) => d && isExecutable(path.join(d, cmd)))
}

/** Quotes one word for a POSIX shell. ssh joins the remote argv with spaces and hands the
 *  string to the login shell, so anything after the launcher is parsed again over there
 *  (bwrap and unshare exec their argv directly and must NOT get quoted words). */
function shellQuote(word) {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${String(word).replace(/'/g, `'\\''`)}'`
}

// ---------------------------------------------------------------- ssh

function sshAvailable() {
  return isExecutable(SSHD) && onPath('ssh') && onPath('ssh-keygen')
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

/** Resolves once 127.0.0.1:port accepts a connection; rejects with sshd's stderr if it exits. */
async function waitForListen(port, child, stderr, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`sshd exited (${child.exitCode ?? child.signalCode}) before listening:\n${stderr()}`)
    }
    const up = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1')
      s.once('connect', () => (s.destroy(), resolve(true)))
      s.once('error', () => resolve(false))
    })
    if (up) return
    await sleep(50)
  }
  throw new Error(`sshd did not listen on 127.0.0.1:${port} within ${timeoutMs} ms:\n${stderr()}`)
}

/**
 * Starts a throwaway sshd as the current user on 127.0.0.1 at a free port, in a fresh temp
 * dir. Returns `{ launcher, port, pid, dir, pythonPath, stop }`; `launcher` is the ssh argv
 * prefix, `pythonPath` what the far side's login shell finds as `python3` (null if none).
 */
async function startSshd() {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'pykernel-sshd-'))
  const hostKey = path.join(dir, 'host_ed25519')
  const clientKey = path.join(dir, 'client_ed25519')
  const config = path.join(dir, 'sshd_config')
  const user = os.userInfo().username
  const target = `${user}@127.0.0.1`
  let sshd
  let err = ''
  const onExit = () => sshd && sshd.kill('SIGKILL') // a crashed test run must not leave sshd behind

  const sshOpts = [
    '-o', 'BatchMode=yes',
    // Hermetic client: no ~/.ssh/config or /etc/ssh/ssh_config (a `Host *` ProxyJump or
    // RemoteCommand there would break us), and only our key (an agent with many keys hits
    // sshd's MaxAuthTries before ours is offered).
    '-F', '/dev/null',
    '-o', 'IdentitiesOnly=yes',
    '-o', 'StrictHostKeyChecking=no',
    '-o', 'UserKnownHostsFile=/dev/null',
    '-o', 'LogLevel=ERROR',
    // One TCP/auth handshake shared by every kernel a test starts; the master outlives each
    // ssh client by at most 60 s, and stop() ends it explicitly.
    '-o', 'ControlMaster=auto',
    '-o', `ControlPath=${path.join(dir, 'cm-%C')}`,
    '-o', 'ControlPersist=60',
  ]

  try {
    for (const key of [hostKey, clientKey]) await execFileP('ssh-keygen', ['-q', '-N', '', '-t', 'ed25519', '-f', key])
    await fsp.copyFile(`${clientKey}.pub`, path.join(dir, 'authorized_keys'))
    // As root sshd insists on its privilege separation dir, which a fresh container lacks
    // (Debian creates it from the systemd unit, which never runs here).
    if (process.getuid() === 0) fs.mkdirSync('/run/sshd', { recursive: true, mode: 0o755 })

    let port
    for (let attempt = 1; ; attempt++) {
      port = await freePort()
      await fsp.writeFile(
        config,
        [
          'ListenAddress 127.0.0.1',
          `Port ${port}`,
          `HostKey ${hostKey}`,
          `AuthorizedKeysFile ${path.join(dir, 'authorized_keys')}`,
          `PidFile ${path.join(dir, 'sshd.pid')}`,
          'StrictModes no', // the temp dir lives under world-writable /tmp
          'UsePAM no', // keys need no PAM, and its session modules may not work in a container
          'PasswordAuthentication no',
          'KbdInteractiveAuthentication no',
          'PermitRootLogin prohibit-password', // CI runs as root; harmless for others
          'LogLevel ERROR',
          '', // no AcceptEnv: the far side gets the login environment, not ours
        ].join('\n'),
      )
      err = ''
      sshd = spawn(SSHD, ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] })
      sshd.stderr.setEncoding('utf8')
      sshd.stderr.on('data', (d) => (err = (err + d).slice(-8192))) // always drain, keep the tail
      sshd.once('error', (e) => (err += `\nspawn: ${e.message}`))
      process.once('exit', onExit)
      try {
        await waitForListen(port, sshd, () => err)
        break
      } catch (e) {
        sshd.kill('SIGKILL')
        process.removeListener('exit', onExit)
        // freePort() closes before sshd binds, so another process may grab the port meanwhile.
        if (attempt < 3 && /Address already in use/.test(err)) continue
        throw e
      }
    }

    const launcher = ['ssh', '-T', '-i', clientKey, '-p', String(port), ...sshOpts, target]
    const viaSsh = (cmd) => execFileP(launcher[0], [...launcher.slice(1), cmd], { timeout: 10_000 })
    await viaSsh('true').catch((e) => {
      throw new Error(`ssh to the test sshd failed: ${e.stderr || e.message}\nsshd: ${err}`)
    })
    // sshd runs the command through the user's login shell with a default PATH (Debian's bash
    // does source ~/.bashrc for ssh commands, which is where pyenv's shims come from here).
    const pythonPath = await viaSsh('command -v python3').then(
      (r) => r.stdout.trim() || null,
      () => null,
    )

    const child = sshd
    let stopped = false
    async function stop() {
      if (stopped) return
      stopped = true
      // Master first: killing sshd's listener does not end established sessions.
      // Same options as the launcher: ControlPath's %C hashes host, port and user.
      await execFileP('ssh', [...launcher.slice(1, -1), '-O', 'exit', target], { timeout: 5_000 }).catch(() => {})
      if (child.exitCode === null && child.signalCode === null) {
        const gone = new Promise((r) => child.once('exit', r))
        child.kill('SIGTERM')
        const hard = setTimeout(() => child.kill('SIGKILL'), 3_000)
        await gone
        clearTimeout(hard)
      }
      process.removeListener('exit', onExit)
      // `-O exit` only asks: wait (bounded) for the mux master, whose title names our dir, then
      // kill whatever still names it (also ssh clients left running by the code under test:
      // tests that check for leaks must do so before stop()).
      for (let i = 0; i < 40 && hostPidsOfCommandLine(dir).length; i++) await sleep(50)
      for (const pid of hostPidsOfCommandLine(dir)) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {}
      }
      await fsp.rm(dir, { recursive: true, force: true })
    }
    return { launcher, port, pid: sshd.pid, dir, pythonPath, stop }
  } catch (e) {
    if (sshd) sshd.kill('SIGKILL')
    process.removeListener('exit', onExit)
    await fsp.rm(dir, { recursive: true, force: true })
    throw e
  }
}

// ---------------------------------------------------------------- bubblewrap

let bwrapOk
/** True when bwrap can actually make a sandbox here (it fails in containers without user namespaces). */
function bwrapAvailable() {
  if (bwrapOk === undefined) {
    const r = spawnSync('bwrap', ['--ro-bind', '/', '/', 'true'], { stdio: 'ignore', timeout: 5_000 })
    bwrapOk = r.status === 0
  }
  return bwrapOk
}

const underTmp = (p) => p === '/tmp' || p.startsWith('/tmp/')

/**
 * A bwrap argv prefix: read-only view of the host, own PID namespace, fresh /dev and /proc,
 * and a private empty /tmp so the host's /tmp is invisible. Nothing else is needed for the
 * test venv or pyenv's python (both under /work or /root, read-only is enough; Python does not
 * need a writable cwd or HOME). When the cwd does not exist inside (e.g. under /tmp), bwrap
 * falls back to $HOME.
 */
function bwrapLauncher({ extra = [] } = {}) {
  const binds = []
  // The tmpfs would hide a test venv made under /tmp (or a base interpreter living there):
  // bind those back, read-only. The venv's bin/python is a symlink to its base interpreter.
  const py = process.env.PYKERNEL_TEST_PYTHON
  if (py && path.isAbsolute(py)) {
    let real = py
    try {
      real = fs.realpathSync(py)
    } catch {}
    for (const prefix of new Set([path.dirname(path.dirname(py)), path.dirname(path.dirname(real))])) {
      if (underTmp(prefix)) binds.push('--ro-bind', prefix, prefix)
    }
  }
  return [
    'bwrap', '--die-with-parent', '--unshare-pid',
    '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp',
    ...binds, ...extra, '--',
  ]
}

// ---------------------------------------------------------------- the documented bwrap recipes

/**
 * The bwrap launchers docs/launchers.md prints under "Recipes", as `{ root, user }`: the recipe
 * for a host running as root and the one for a host running as an ordinary user, each the
 * argv of a `{ launcher: [...] }` whose comment says which host it is for ("as root", "an
 * ordinary user"). Read from docs/launchers.md itself, so a recipe edited there is the one tested.
 */
function documentedBwrapRecipes() {
  const doc = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'launchers.md'), 'utf8')
  const start = doc.indexOf('\n## Recipes\n')
  if (start < 0) throw new Error('docs/launchers.md has no "## Recipes" section')
  const block = /```js\n([\s\S]*?)```/.exec(doc.slice(start))
  if (!block) throw new Error('docs/launchers.md has no code block under "## Recipes"')
  const recipes = {}
  // A comment (one or more `//` lines) right above `{ launcher: [...] }`.
  for (const [, comment, list] of block[1].matchAll(/((?:^\/\/.*\n)+)\{ launcher: (\[[^\]]*\]) \}/gm)) {
    // The words are plain single-quoted strings: as JSON once the quotes are swapped.
    const argv = JSON.parse(list.replace(/'/g, '"'))
    if (!argv.includes('bwrap')) continue
    const host = /\bas root\b/.test(comment) ? 'root' : /\ban ordinary user\b/.test(comment) ? 'user' : null
    if (!host) throw new Error(`a bwrap recipe in docs/launchers.md does not say which host it is for:\n${comment}`)
    if (recipes[host]) throw new Error(`docs/launchers.md has two bwrap recipes for a host running as ${host}`)
    recipes[host] = argv
  }
  for (const host of ['root', 'user']) {
    if (!recipes[host]) throw new Error(`docs/launchers.md's Recipes have no bwrap recipe for a host running as ${host === 'root' ? 'root' : 'an ordinary user'}`)
  }
  return recipes
}

/**
 * The first of `candidates` (default: the test interpreter, then /usr/bin/python3, then
 * `python3`) that runs as a Python 3.8+ through the argv prefix `prefix`, or null. A
 * launcher that changes the user (the root recipe runs the kernel as uid 65534) cannot run
 * an interpreter under a directory only root may enter, as pyenv's under /root.
 */
function pythonThrough(prefix, candidates = [process.env.PYKERNEL_TEST_PYTHON, '/usr/bin/python3', 'python3']) {
  for (const python of new Set(candidates.filter(Boolean))) {
    const r = spawnSync(prefix[0], [...prefix.slice(1), python, '-c', 'import sys; sys.exit(sys.version_info < (3, 8))'], {
      stdio: 'ignore',
      timeout: 10_000,
    })
    if (r.status === 0) return python
  }
  return null
}

// ---------------------------------------------------------------- an ordinary user

const TEST_USER = 'pykernel-test-user'

/**
 * `{ name, uid, gid }` of the ordinary user the tests run a host as, made with `useradd`
 * when missing (root only). Null when this process is not root or `useradd` is missing.
 */
function ensureTestUser() {
  if (process.getuid() !== 0 || !onPath('useradd')) return null
  const lookup = () => spawnSync('id', ['-u', TEST_USER], { encoding: 'utf8' })
  if (lookup().status !== 0) {
    const made = spawnSync('useradd', ['--system', '--no-create-home', '--home-dir', '/nonexistent', '--shell', '/usr/sbin/nologin', TEST_USER], {
      encoding: 'utf8',
    })
    // Another test process may have made it meanwhile (exit 9: the name is taken).
    if (made.status !== 0 && lookup().status !== 0) throw new Error(`useradd ${TEST_USER} failed: ${made.stderr}`)
  }
  const uid = Number(lookup().stdout.trim())
  const gid = Number(spawnSync('id', ['-g', TEST_USER], { encoding: 'utf8' }).stdout.trim())
  return { name: TEST_USER, uid, gid }
}

/** The argv prefix that runs a command as `user` (no PAM, no login shell, its groups). */
function asUser(user) {
  return ['setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--init-groups', '--']
}

// ---------------------------------------------------------------- unshare

/**
 * A util-linux unshare argv prefix: own PID (the command is pid 1) and mount namespace with a
 * matching /proc, killed with unshare. Root can do that directly; anyone else needs a user
 * namespace first, mapping themselves to root inside (tested both here, Debian 12).
 */
function unshareLauncher() {
  const user = process.getuid() === 0 ? [] : ['--user', '--map-root-user']
  return ['unshare', ...user, '--fork', '--pid', '--mount-proc', '--kill-child', '--']
}

let unshareOk
function unshareAvailable() {
  if (unshareOk === undefined) {
    const argv = [...unshareLauncher(), 'true']
    const r = spawnSync(argv[0], argv.slice(1), { stdio: 'ignore', timeout: 5_000 })
    unshareOk = r.status === 0
  }
  return unshareOk
}

// ---------------------------------------------------------------- /proc probes

/** State letter of a host pid from /proc/<pid>/stat, or null when there is no such process. */
function procState(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    // `pid (comm) S ...`: comm may contain spaces and parens, so split after the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
  } catch {
    return null
  }
}

/** Whether `pid` (a host pid) exists and is not a zombie or dead. */
function farProcessAlive(pid) {
  const s = procState(pid)
  return s !== null && s !== 'Z' && s !== 'X'
}

/**
 * Host pids (not this process) whose command line contains `substring`, zombies excluded:
 * pids printed inside a PID namespace (bwrap --unshare-pid, unshare --pid) mean nothing out
 * here, so tests tag the far-side command with a unique marker and look for that instead.
 */
function hostPidsOfCommandLine(substring) {
  const pids = []
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    let cmdline
    try {
      cmdline = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').replace(/\0/g, ' ')
    } catch {
      continue // exited meanwhile
    }
    if (cmdline.includes(substring) && farProcessAlive(name)) pids.push(Number(name))
  }
  return pids
}

module.exports = {
  startSshd,
  sshAvailable,
  bwrapLauncher,
  bwrapAvailable,
  unshareLauncher,
  unshareAvailable,
  documentedBwrapRecipes,
  pythonThrough,
  ensureTestUser,
  asUser,
  onPath,
  farProcessAlive,
  hostPidsOfCommandLine,
  shellQuote,
}
