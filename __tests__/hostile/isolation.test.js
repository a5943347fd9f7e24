'use strict'
// Hostile cells against the sandbox (docs/security.md). Each test is the attack: a
// cell tries to reach the host, another session or a later kernel, and the test proves it
// failed. The kernel runs as the init of its own user + PID + mount namespaces, under
// Landlock.
const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { addon, python, startKernel, kernelDefaults, zygote, tempDir, viewedDir, isAlive, waitFor } = require('./_common')

const FIXTURE = path.join(__dirname, 'fixtures', 'attack-host.js')
const BUN = path.resolve(__dirname, '..', '..', 'node_modules', '.bin', 'bun')
const HOSTS = [
  ['Node', process.execPath],
  ['Bun', BUN],
]

/** Runs the attack cell in a separate host process (so an attack that works kills that
 *  host, not the test runner) and resolves what it reported and how it ended. */
function attackHost(runtime, attack, extraEnv = {}) {
  const env = { ...process.env, ATTACK: attack, ...extraEnv }
  if (python) env.PYKERNEL_TEST_PYTHON = python
  return new Promise((resolve) => {
    // Its own process group: a killpg that got through would end the fixture alone.
    const child = spawn(runtime, [FIXTURE], { stdio: ['ignore', 'pipe', 'pipe'], env, detached: true })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      let report = null
      try {
        report = JSON.parse(stdout.trim().split('\n').at(-1))
      } catch {}
      resolve({ code, signal, report, stderr })
    })
  })
}

/** Every process on the host whose command line holds `marker`. */
function processesWith(marker) {
  const found = []
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'latin1')
      if (cmdline.includes(marker) && isAlive(Number(entry))) found.push(Number(entry))
    } catch {}
  }
  return found
}

const SIGNAL_ATTACK = `
import os, signal, ctypes
tried = []
for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGKILL):
    for how, target in (('kill', HOST_PID), ('killpg', HOST_PID)):
        try:
            (os.kill if how == 'kill' else os.killpg)(target, sig)
            tried.append(f'{how} {sig.name}: sent')
        except OSError as e:
            tried.append(f'{how} {sig.name}: {e.strerror}')
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH = 16
r = libc.ptrace(PTRACE_ATTACH, HOST_PID, None, None)
tried.append(f'ptrace: {r} errno {ctypes.get_errno()}')
try:
    # Signal 0 checks permission and sends nothing: were this sandbox ever broken, a real
    # kill(-1) would take down every process the test machine's user owns.
    os.kill(-1, 0)
    tried.append('kill -1: sent')
except OSError as e:
    tried.append(f'kill -1: {e.strerror}')
print('\\n'.join(tried))
`

const ENVIRON_ATTACK = `
import os
found = []
for pid in os.listdir('/proc'):
    if not pid.isdigit():
        continue
    try:
        data = open(f'/proc/{pid}/environ', 'rb').read()
    except OSError:
        continue
    if b'sk-attack-host-secret-4242' in data:
        found.append(pid)
for path in ('/proc/HOST_PID/environ', '/proc/HOST_PID/mem', '/proc/HOST_PID/cmdline'):
    try:
        open(path, 'rb').read(64)
        found.append(path)
    except OSError as e:
        print(path, e.strerror)
print('visible pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))
print('FOUND', found)
`

// Node binds an abstract name padded with NULs to the full sun_path (108 bytes), Bun
// binds it exact: the cell tries both.
const SOCKET_ATTACK = `
import socket
for name in (b'\\0SOCKET_NAME', (b'\\0SOCKET_NAME').ljust(108, b'\\0')):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(name)
        print('CONNECTED')
    except OSError as e:
        print('refused:', e.strerror)
`

for (const [runtimeName, runtime] of HOSTS) {
  test(`${runtimeName} host: a cell cannot signal or ptrace its host (no SIGUSR1 inspector, SIGTERM/SIGKILL miss it)`, { timeout: 40_000 }, async () => {
    const { code, signal, report, stderr } = await attackHost(runtime, SIGNAL_ATTACK)
    assert.ok(report, `the host reported back (it ended with ${code ?? signal}; stderr: ${stderr.slice(-400)})`)
    assert.equal(report.startMode, zygote ? 'zygote' : 'spawn', 'the kernel started the way this run tests')
    assert.equal(code, 0, `the host lived through the attack and ended normally (${signal})`)
    assert.equal(report.inspector, false, 'no inspector listens on 127.0.0.1:9229')
    assert.doesNotMatch(stderr, /Debugger listening/)
    assert.doesNotMatch(report.stdout, /: sent/, `no signal reached anything: ${report.stdout}`)
    assert.match(report.stdout, /ptrace: -1 errno (1|3)\b/, 'ptrace of the host fails (EPERM or ESRCH)')
    assert.match(report.stdout, /kill -1: No such process/, 'nothing outside the kernel\'s own namespace can be signalled')
  })

  test(`${runtimeName} host: a cell cannot read the host's /proc entries (environ, mem) even as root`, { timeout: 40_000 }, async () => {
    const { report, stderr } = await attackHost(runtime, ENVIRON_ATTACK)
    assert.ok(report, `the host reported back: ${stderr.slice(-400)}`)
    assert.match(report.stdout, /FOUND \[\]/, report.stdout)
    // 1 is the namespace's init, 2 the kernel.
  assert.match(report.stdout, /visible pids \[1, 2\]/, 'the kernel sees only its own namespace under /proc')
    assert.doesNotMatch(report.stdout, /sk-attack-host-secret/)
  })

  test(`${runtimeName} host: a cell cannot connect to the host's abstract unix sockets`, { timeout: 40_000 }, async () => {
    const { report, stderr } = await attackHost(runtime, SOCKET_ATTACK)
    assert.ok(report, `the host reported back: ${stderr.slice(-400)}`)
    assert.doesNotMatch(report.stdout, /CONNECTED/, report.stdout)
    assert.equal(report.socketReached, false, 'the host saw no connection')
  })
}

test('a cell cannot write frames into another session\'s kernel through /proc/<pid>/fd', async (t) => {
  const victim = await startKernel()
  const attacker = await startKernel()
  t.after(() => Promise.all([victim.shutdown(), attacker.shutdown()]))
  await victim.execute('secret_state = 1')
  const frame = JSON.stringify({ type: 'execute', id: 'forged', code: 'secret_state = 666', silent: false, storeHistory: true })
  const r = await attacker.execute(`
import os, json
hits = []
for fd in range(0, 64):
    for path in (f'/proc/${victim.pid}/fd/{fd}', f'/proc/${victim.pid}/task/${victim.pid}/fd/{fd}'):
        try:
            f = open(path, 'w')
            f.write(${JSON.stringify(frame)} + '\\n'); f.flush()
            hits.append(path)
        except OSError:
            pass
print('HITS', hits)
`)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.match(r.stdout, /HITS \[\]/, r.stdout)
  const state = await victim.execute('secret_state')
  assert.equal(state.result['text/plain'], '1', 'the victim\'s namespace is unchanged')
})

test('a pool\'s prewarmed spare cannot be reached by another session\'s cell', async (t) => {
  const pool = new addon.KernelPool({ kernel: kernelDefaults(), prewarm: 1 })
  t.after(() => pool.disposeAll())
  const first = await pool.execute({ sessionId: 'attacker', cells: [{ code: '1' }] })
  assert.equal(first.exitCode, 0)
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 5000 }), 'a spare is ready')
  const [spare] = pool.spares
  const r = await pool.execute({
    sessionId: 'attacker',
    cells: [{ code: `import os\nprint(os.path.exists('/proc/${spare}'), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))` }],
  })
  assert.match(r.output, /^False \[1, 2\]/, r.output)
})

test('planted runner bytecode never runs: the runner directory is read-only inside every kernel', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const marker = path.join(tempDir(), 'planted-ran')
  // The attack: find the runner files from inside (its own module's path) and overwrite
  // every one of them, bytecode included, with code that leaves a marker.
  const r = await kernel.execute(`
import os, sys, glob
payload = ${JSON.stringify(`open(${JSON.stringify(marker)}, 'w').write('pwned')
`)}
root = sys.modules['pykernel_runner'].__file__
while not os.path.basename(root).startswith('pykernel-'):   # up to $TMPDIR/pykernel-<uid>
    root = os.path.dirname(root)
written, refused = [], []
for path in glob.glob(os.path.join(root, '**', '*'), recursive=True) + [os.path.join(root, 'new-file')]:
    if os.path.isdir(path):
        continue
    try:
        with open(path, 'w') as f:
            f.write(payload)
        written.append(path)
    except OSError as e:
        refused.append(e.strerror)
print('ROOT', root)
print('WRITTEN', written)
print('REFUSED', sorted(set(refused)), len(refused))
`)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.match(r.stdout, /WRITTEN \[\]/, r.stdout)
  assert.match(r.stdout, /Read-only file system/, r.stdout)
  assert.match(r.stdout, /REFUSED .* ([5-9]|\d\d+)\n/, 'the runner files, bytecode included, were all tried')
  const later = await startKernel()
  t.after(() => later.shutdown())
  assert.equal((await later.execute('1+1')).result['text/plain'], '2')
  assert.equal(fs.existsSync(marker), false, 'no planted code ran in a later kernel')
})

const ESCAPES = {
  'start_new_session=True': "import subprocess; subprocess.Popen(['python3', '-c', 'import time; time.sleep(300)', 'MARK'], start_new_session=True)",
  'process_group=0': "import subprocess; subprocess.Popen(['sh', '-c', 'sleep 300; : MARK'], preexec_fn=lambda: __import__('os').setpgid(0, 0))",
  'double fork + setsid': "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execvp('sh', ['sh', '-c', 'sleep 300; : MARK'])\n    os._exit(0)\ntime.sleep(0.2)",
  '!setsid cmd &': "!setsid sh -c 'sleep 300; : MARK' >/dev/null 2>&1 &",
  'nohup, ignoring SIGTERM': "!nohup sh -c 'trap \"\" TERM HUP; sleep 300; : MARK' >/dev/null 2>&1 &",
}

for (const [name, code] of Object.entries(ESCAPES)) {
  test(`a process started with ${name} does not survive shutdown()`, async () => {
    const marker = `pykernel-escape-${crypto.randomBytes(6).toString('hex')}`
    const kernel = await startKernel()
    const r = await kernel.execute(code.replaceAll('MARK', marker))
    assert.equal(r.status, 'ok', JSON.stringify(r.error) + r.stdout)
    assert.ok(await waitFor(() => processesWith(marker).length > 0, { timeoutMs: 3000 }), 'the escapee started')
    const down = await kernel.shutdown({ graceMs: 500 })
    assert.equal(down.confirmed, true)
    assert.ok(await waitFor(() => processesWith(marker).length === 0, { timeoutMs: 3000 }), `left running: ${processesWith(marker)}`)
  })
}

test('disposeOwner() leaves no process of the session behind, whatever it did to its session', async (t) => {
  const marker = `pykernel-escape-${crypto.randomBytes(6).toString('hex')}`
  const pool = new addon.KernelPool({ kernel: kernelDefaults(), prewarm: 0 })
  t.after(() => pool.disposeAll())
  const r = await pool.execute({ sessionId: 'leaver', cells: [{ code: ESCAPES['double fork + setsid'].replaceAll('MARK', marker) }] })
  assert.equal(r.exitCode, 0, r.output)
  assert.ok(await waitFor(() => processesWith(marker).length > 0, { timeoutMs: 3000 }), 'the escapee started')
  await pool.disposeOwner('leaver')
  assert.ok(await waitFor(() => processesWith(marker).length === 0, { timeoutMs: 3000 }), `left running: ${processesWith(marker)}`)
})

test('kernel.isolation and checkPythonKernelAvailability say what is enforced; sandbox: "off" turns it off', async (t) => {
  // In a directory without .git (its read-only .git is the kernel's own business).
  const kernel = await startKernel({ cwd: tempDir() })
  t.after(() => kernel.shutdown())
  const { isolation } = kernel
  assert.equal(kernel.startMode, zygote ? 'zygote' : 'spawn', 'the kernel started the way this run tests')
  assert.equal(isolation.mode, 'namespaces+landlock', JSON.stringify(isolation))
  for (const p of ['pid-namespace', 'own-proc', 'runner-read-only', 'capabilities-dropped', 'signal-scope', 'filesystem-view', 'own-dev', 'private-tmp', 'seccomp', 'own-keyring', 'writes-confined', 'credentials-hidden', 'session-installs']) assert.ok(isolation.enforced.includes(p), p)
  assert.deepEqual(isolation.missing, [])
  const check = await addon.checkPythonKernelAvailability({ interpreter: python })
  assert.deepEqual(check.isolation, isolation)

  const open = await startKernel({ sandbox: 'off' })
  t.after(() => open.shutdown())
  assert.equal(open.isolation.mode, 'off')
  assert.equal(open.startMode, zygote ? 'zygote' : 'spawn')
  const r = await open.execute(`import os; os.path.exists('/proc/${process.pid}')`)
  assert.equal(r.result['text/plain'], 'True', 'without the sandbox the host is visible (the option works)')
  // Nothing of the process is changed either: its capabilities and keyring are the host's.
  const hostCaps = fs.readFileSync('/proc/self/status', 'utf8').match(/^CapEff:\s*(\w+)/m)[1]
  const caps = await open.execute("import re; print(re.search(r'CapEff:\\s*(\\w+)', open('/proc/self/status').read())[1], open('/proc/self/status').read().split('Seccomp:')[1].split()[0])")
  assert.equal(caps.stdout.trim(), `${hostCaps} 0`)
  await assert.rejects(startKernel({ sandbox: 'on' }), { code: 'ERR_INVALID_ARG', message: /sandbox.*'off'/ })
})

test('sandbox.network = false: no connection to the host\'s servers; loopback inside still works', async (t) => {
  const server = net.createServer((c) => c.end('hello'))
  await new Promise((r) => server.listen(0, '127.0.0.1', r))
  t.after(() => server.close())
  const kernel = await startKernel({ sandbox: { network: false } })
  t.after(() => kernel.shutdown())
  assert.ok(kernel.isolation.enforced.includes('network-namespace'))
  const r = await kernel.execute(`
import socket, threading
try:
    socket.create_connection(('127.0.0.1', ${server.address().port}), timeout=2)
    print('host reached')
except OSError as e:
    print('host refused:', e.strerror or e)
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()
threading.Thread(target=lambda: srv.accept()[0].sendall(b'inside'), daemon=True).start()
c = socket.create_connection(srv.getsockname(), timeout=2)
print('loopback:', c.recv(16).decode())
`)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.match(r.stdout, /host refused/, r.stdout)
  assert.match(r.stdout, /loopback: inside/, r.stdout)
})

test('sandbox.writable: writes land only in cwd, the private TMPDIR and the listed directories', async (t) => {
  const cwd = tempDir()
  const extra = tempDir()
  // Outside /tmp, so the kernel sees it (of the host's /tmp it sees only what it was
  // given) and the write is refused for what it is.
  const outside = viewedDir()
  t.after(() => fs.rmSync(outside, { recursive: true, force: true }))
  const kernel = await startKernel({ cwd, sandbox: { writable: [extra] } })
  t.after(() => kernel.shutdown())
  const r = await kernel.execute(`
import os, tempfile
results = {}
for name, path in (('cwd', 'in-cwd.txt'), ('extra', ${JSON.stringify(path.join(extra, 'x.txt'))}), ('outside', ${JSON.stringify(path.join(outside, 'x.txt'))}), ('home', os.path.expanduser('~/.pykernel-writable-test'))):
    try:
        open(path, 'w').write('x'); results[name] = 'written'
    except OSError as e:
        results[name] = e.strerror
with tempfile.NamedTemporaryFile(dir=None) as f:
    results['tmp'] = 'written ' + str(f.name.startswith(os.environ['TMPDIR']))
# The kernel's own /dev/shm and ptys stay usable (POSIX semaphores, pexpect).
try:
    open('/dev/shm/pykernel-writable-test', 'w').write('x'); os.unlink('/dev/shm/pykernel-writable-test'); results['shm'] = 'written'
except OSError as e:
    results['shm'] = e.strerror
try:
    import pty
    master, slave = pty.openpty(); os.write(slave, b'ping'); results['pty'] = os.read(master, 4).decode()
except OSError as e:
    results['pty'] = e.strerror
print(results)
`)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.match(r.stdout, /'cwd': 'written'/, r.stdout)
  assert.match(r.stdout, /'extra': 'written'/, r.stdout)
  // Read-only in the kernel's view (Landlock, the second layer, would say EACCES).
  assert.match(r.stdout, /'outside': 'Read-only file system'/, r.stdout)
  assert.match(r.stdout, /'home': 'Read-only file system'/, r.stdout)
  assert.match(r.stdout, /'tmp': 'written True'/, r.stdout)
  assert.match(r.stdout, /'shm': 'written'/, r.stdout)
  assert.match(r.stdout, /'pty': 'ping'/, r.stdout)
  assert.equal(fs.existsSync(path.join(outside, 'x.txt')), false)
  await assert.rejects(startKernel({ sandbox: { writable: [path.join(outside, 'absent')] } }), { code: 'ERR_SANDBOX', message: /absent/ })
})

test('two sessions with the network off and nothing writable share no channel: each kernel\'s /dev/shm and /tmp are its own', async (t) => {
  const options = { sandbox: { network: false, writable: [] } }
  const [a, b] = await Promise.all([startKernel(options), startKernel(options)])
  t.after(() => Promise.all([a.shutdown(), b.shutdown()]))
  const made = await a.execute("import os\nos.mkfifo('/dev/shm/channel')\nopen('/dev/shm/drop', 'w').write('from a')\nopen('/tmp/drop', 'w').write('from a')")
  assert.equal(made.status, 'ok', JSON.stringify(made.error))
  const seen = await b.execute("import os; print(sorted(os.listdir('/dev/shm')), sorted(os.listdir('/tmp')))")
  assert.equal(seen.status, 'ok', JSON.stringify(seen.error))
  assert.doesNotMatch(seen.stdout, /channel|drop/, seen.stdout)
})

test('a request\'s cwd outside the kernel\'s view is refused, saying why; one inside it works', async (t) => {
  const cwd = tempDir()
  const elsewhere = tempDir()
  const kernel = await startKernel({ cwd })
  t.after(() => kernel.shutdown())
  await assert.rejects(kernel.execute('1', { cwd: elsewhere }), (err) => {
    assert.equal(err.code, 'ERR_INVALID_ARG')
    assert.match(err.message, new RegExp(`${elsewhere} is outside this kernel's filesystem view .*Start a kernel with that cwd`))
    return true
  })
  // The same directory through a symlink from outside /tmp: judged where it leads.
  const link = path.join(viewedDir(), 'into-tmp')
  t.after(() => fs.rmSync(path.dirname(link), { recursive: true, force: true }))
  fs.symlinkSync(elsewhere, link)
  await assert.rejects(kernel.execute('1', { cwd: link }), { code: 'ERR_INVALID_ARG', message: /is outside this kernel's filesystem view/ })
  fs.mkdirSync(path.join(cwd, 'inner'))
  const inner = await kernel.execute('import os; os.getcwd()', { cwd: path.join(cwd, 'inner') })
  assert.equal(inner.result['text/plain'], `'${fs.realpathSync(path.join(cwd, 'inner'))}'`)
})

test('without user namespaces (Landlock only) a kernel says once what it lacks, and Landlock still stops signals and the host socket', { timeout: 40_000 }, async () => {
  const attack = SIGNAL_ATTACK + SOCKET_ATTACK.replace('import socket', 'import socket as socket')
  const { code, signal, report, stderr } = await attackHost(process.execPath, attack, { PYKERNEL_SANDBOX_NAMESPACES: '0' })
  assert.ok(report, `the host reported back (${code ?? signal}): ${stderr.slice(-400)}`)
  assert.equal(code, 0, 'the host lived through the attack')
  assert.equal(report.isolation.mode, 'landlock')
  assert.ok(report.isolation.enforced.includes('signal-scope'))
  assert.ok(report.isolation.missing.some((m) => /no PID namespace/.test(m)), JSON.stringify(report.isolation.missing))
  const notices = report.statuses.filter((s) => s.op === 'sandbox')
  assert.equal(notices.length, 1, 'the first cell is told, as a status event')
  assert.deepEqual(notices[0].data.missing, report.isolation.missing)
  assert.equal(report.nextStatuses.filter((s) => s.op === 'sandbox').length, 0, 'once per kernel')
  // kill(-1, 0) may find a process of the kernel's own domain here: only the host matters.
  assert.doesNotMatch(report.stdout, /kill(pg)? SIG\w+: sent|CONNECTED/, report.stdout)
  assert.match(report.stdout, /ptrace: -1 errno 1\b/, 'Landlock refuses ptrace of the host')
  assert.equal(report.inspector, false)
  assert.equal(report.socketReached, false)
})

test('a pool that confines writes never hands a session a spare made for another cwd', async (t) => {
  const poolCwd = tempDir()
  const sessionCwd = tempDir()
  const pool = new addon.KernelPool({ kernel: { ...kernelDefaults(), cwd: poolCwd, sandbox: { writable: [] } }, prewarm: 1 })
  t.after(() => pool.disposeAll())
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 10_000 }), 'a spare is ready')
  const r = await pool.execute({ sessionId: 'elsewhere', cwd: sessionCwd, cells: [{ code: "open('here.txt', 'w').write('ok')" }] })
  assert.equal(r.exitCode, 0, r.output)
  assert.equal(fs.readFileSync(path.join(sessionCwd, 'here.txt'), 'utf8'), 'ok', 'the session may write in its own cwd')
})

test('a repository\'s own .venv/bin/python, run by discovery, is probed inside the sandbox', async () => {
  const cwd = tempDir()
  // In its cwd: the probe, confined, may write nowhere else.
  const report = path.join(cwd, 'probe-saw')
  fs.mkdirSync(path.join(cwd, '.venv', 'bin'), { recursive: true })
  fs.writeFileSync(path.join(cwd, '.venv', 'pyvenv.cfg'), 'home = /usr/bin\n')
  // The "interpreter" a cloned repository ships: it looks around, then passes the probe.
  fs.writeFileSync(path.join(cwd, '.venv', 'bin', 'python'), `#!/bin/sh
{ ls /proc | grep -c '^[0-9]'; cat /proc/${process.pid}/environ >/dev/null 2>&1 && echo host-environ-readable; kill -0 ${process.pid} 2>/dev/null && echo host-signalable; } > ${report}
echo "$0"; echo 3.11.7
`, { mode: 0o755 })
  const resolved = await addon.resolvePython({ cwd, baseEnv: { PATH: process.env.PATH, HOME: cwd } })
  assert.equal(resolved.source, 'venv')
  const saw = fs.readFileSync(report, 'utf8')
  assert.doesNotMatch(saw, /host-environ-readable|host-signalable/, saw)
  assert.ok(Number(saw.split('\n')[0]) <= 3, `the probe saw only its own namespace: ${saw}`)
})

test('the default sandbox keeps the normal workflow: moves across directories, caches, writing in cwd and TMPDIR', async (t) => {
  const cwd = tempDir()
  const kernel = await startKernel({ cwd })
  t.after(() => kernel.shutdown())
  const r = await kernel.execute(`
import os, tempfile, shutil
os.makedirs('a/b', exist_ok=True)
open('a/b/f.txt', 'w').write('x')
os.rename('a/b/f.txt', 'f.txt')                  # into another directory (pip's wheel builds do it)
tmp = tempfile.mkdtemp()
os.makedirs(os.path.join(tmp, 'sub'))
open(os.path.join(tmp, 'sub', 'g'), 'w').write('y')
os.replace(os.path.join(tmp, 'sub', 'g'), os.path.join(tmp, 'g'))
os.link(os.path.join(tmp, 'g'), os.path.join(tmp, 'sub', 'h'))
# The caches tools write go to the session's own (the home directory's are read-only).
for var in ('MPLCONFIGDIR', 'PIP_CACHE_DIR'):
    cache = os.path.join(os.environ[var], 'pykernel-sandbox-test')
    os.makedirs(cache, exist_ok=True); open(os.path.join(cache, 'c'), 'w').write('z'); shutil.rmtree(cache)
print(sorted(os.listdir('.')), sorted(os.listdir(tmp)))
import matplotlib.pyplot as plt
plt.plot([1, 2])
`)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.match(r.stdout, /\['a', 'f.txt'\] \['g', 'sub'\]/, r.stdout)
  assert.equal(r.stderr, '', 'matplotlib finds its config and cache writable: no warning')
})

test('a repository\'s python that floods its output while probed cannot bloat the host', async () => {
  const cwd = tempDir()
  fs.mkdirSync(path.join(cwd, '.venv', 'bin'), { recursive: true })
  fs.writeFileSync(path.join(cwd, '.venv', 'pyvenv.cfg'), 'home = /usr/bin\n')
  fs.writeFileSync(path.join(cwd, '.venv', 'bin', 'python'), '#!/bin/sh\nexec yes flood-flood-flood-flood-flood-flood\n', { mode: 0o755 })
  const rssBefore = process.memoryUsage().rss
  const started = Date.now()
  const resolved = await addon.resolvePython({ cwd, baseEnv: { PATH: process.env.PATH, HOME: cwd } }).catch((e) => e)
  const took = Date.now() - started
  const grew = (process.memoryUsage().rss - rssBefore) / 2 ** 20
  // Skipped as not Python; the python on PATH is chosen instead.
  const skipped = resolved.skipped?.find((s) => s.candidate.includes('.venv'))
  assert.ok(skipped, JSON.stringify(resolved))
  assert.match(skipped.reason, /not Python/)
  assert.ok(took < 5000, `the probe ended after ${took} ms`)
  assert.ok(grew < 64, `the host grew ${grew.toFixed(0)} MiB`)
})
