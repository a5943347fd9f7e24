'use strict'
// Kernels forked from a zygote: KernelOptions.preload (docs/api.md#kernel). The zygote
// imports the list once; every kernel with the same settings is forked from it with the
// modules loaded. Tests: which kernels are forked, that forked kernels share no state,
// that they end, report and clean up as spawned ones do, that %pip and edits still take
// effect, and attacks from a forked kernel on its zygote and its siblings.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const { Kernel, KernelPool } = require('../..')
const { python, tempDir, viewedDir, isAlive, waitFor } = require('../helpers/kernel')
const { pipDistribution } = require('../helpers/pip-distribution')

const PRELOAD = ['decimal', 'fractions']

async function start(t, options = {}) {
  const kernel = await Kernel.start({ interpreter: python, preload: PRELOAD, ...options })
  t.after(() => kernel.shutdown())
  return kernel
}

async function value(kernel, code) {
  const r = await kernel.execute(code)
  assert.equal(r.status, 'ok', `${code}\n-> ${JSON.stringify(r.error)}`)
  return r.result?.['text/plain']
}

async function output(kernel, code) {
  const r = await kernel.execute(code)
  assert.equal(r.status, 'ok', `${code}\n-> ${JSON.stringify(r.error)}`)
  return r.stdout
}

/** When `pid` started (clock ticks since boot): tells a process from a later one that
 *  was given its reused pid. */
function startOf(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
  } catch {
    return null
  }
}

/** Whether the process that had `pid` when `started` was read is still running. */
const stillRunning = (pid, started) => isAlive(pid) && startOf(pid) === started

/** The parent of `pid` as this host sees it. */
function parentOf(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}

const LOADED = `import sys\n[m in sys.modules for m in ${JSON.stringify(PRELOAD)}], sorted(n for n in ('decimal', 'fractions') if n in globals())`

test('kernels with preload are forked from one zygote, with the modules loaded and no names defined', async (t) => {
  const a = await start(t)
  const b = await start(t)
  assert.equal(a.startMode, 'zygote')
  assert.equal(b.startMode, 'zygote')
  const zygote = parentOf(a.pid)
  assert.equal(parentOf(b.pid), zygote, 'both forked by the same process')
  assert.notEqual(zygote, process.pid)
  assert.match(fs.readFileSync(`/proc/${zygote}/cmdline`, 'latin1'), /runner\.py/)
  assert.equal(await value(a, LOADED), '([True, True], [])')
  assert.equal(await value(b, "import decimal\nstr(decimal.Decimal('1.10') + 1)"), "'2.10'")
  assert.deepEqual(a.isolation, (await start(t, { preload: [] })).isolation, 'the same protections as a spawned kernel')
})

test('a kernel is spawned, and imports its preload itself, when it cannot be forked', async (t) => {
  const cases = [
    ['zygote: false', { zygote: false }],
    ['maxProcesses', { maxProcesses: 64 }],
  ]
  for (const [what, options] of cases) {
    const kernel = await start(t, options)
    assert.equal(kernel.startMode, 'spawn', what)
    assert.equal(parentOf(kernel.pid), process.pid, `${what}: the host's own child`)
    assert.equal(await value(kernel, LOADED), '([True, True], [])', `${what}: the modules are loaded all the same`)
  }
  const plain = await start(t, { preload: [] })
  assert.equal(plain.startMode, 'spawn')
  assert.equal(await value(plain, LOADED), '([False, False], [])', 'without preload nothing is imported (the checks above can fail)')
})

test('a preload module the zygote cannot see (in the kernel\'s cwd) is imported by the forked kernel', async (t) => {
  const cwd = tempDir('pk-zygote-cwd-')
  fs.writeFileSync(path.join(cwd, 'pk_local_mod.py'), 'VALUE = 41 + 1\n')
  const kernel = await start(t, { cwd, preload: [...PRELOAD, 'pk_local_mod'] })
  assert.equal(kernel.startMode, 'zygote')
  assert.equal(await value(kernel, "import sys\nsys.modules['pk_local_mod'].VALUE, 'pk_local_mod' in globals()"), '(42, False)')
})

test('two kernels forked from one zygote share no state: globals, module attributes and random sequences differ', async (t) => {
  // numpy.random itself: numpy 2 imports it lazily, and a fresh import seeds itself.
  const preload = ['numpy.random', 'random', 'uuid']
  const a = await start(t, { preload })
  const b = await start(t, { preload })
  assert.equal(parentOf(a.pid), parentOf(b.pid))
  await value(a, 'SECRET = 42\nimport json\njson.MARK = 1')
  assert.equal(await value(b, "import json\n'SECRET' in globals(), hasattr(json, 'MARK')"), '(False, False)')
  const draw = 'import random, os, uuid, numpy\nprint(random.random(), numpy.random.rand(), numpy.random.randint(1 << 30), os.urandom(8).hex(), uuid.uuid4())'
  const [x, y] = [(await output(a, draw)).trim().split(' '), (await output(b, draw)).trim().split(' ')]
  const names = ['random.random', 'numpy.random.rand', 'numpy.random.randint', 'os.urandom', 'uuid4']
  names.forEach((name, i) => assert.notEqual(x[i], y[i], `${name} gave both kernels the same value`))
})

test('the data stack works in a forked kernel: BLAS threads after the fork, matplotlib figures', async (t) => {
  const kernel = await start(t, { preload: ['numpy', 'matplotlib.pyplot'] })
  assert.equal(kernel.startMode, 'zygote')
  // OpenBLAS starts a thread pool when numpy is imported; the fork must leave it usable.
  assert.equal(await value(kernel, 'import numpy as np\nfloat((np.ones((400, 400)) @ np.ones((400, 400))).sum())'), '64000000.0')
  const events = []
  const r = await kernel.execute('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()', { onEvent: (e) => events.push(e) })
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  const pngs = events.filter((e) => e.type === 'display' && 'image/png' in e.bundle)
  assert.equal(pngs.length, 1, 'the figure is displayed as a PNG')
  assert.equal(Buffer.from(pngs[0].bundle['image/png'], 'base64').subarray(1, 4).toString(), 'PNG')
})

test('a zygote whose imports start a Python thread is not used: the kernel is spawned and imports the list itself', async (t) => {
  const dir = tempDir('pk-zygote-thread-')
  fs.writeFileSync(path.join(dir, 'pk_threaded.py'), 'import threading, time\nthreading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\nLOADED = True\n')
  const kernel = await start(t, { preload: ['pk_threaded'], env: { PYTHONPATH: dir } })
  assert.equal(kernel.startMode, 'spawn', 'a fork would keep only the forking thread')
  assert.equal(await value(kernel, "import sys\nsys.modules['pk_threaded'].LOADED"), 'True')
})

test('a forked kernel ends, reports and cleans up as a spawned one: exit codes, signals, interrupts, shutdown', async (t) => {
  const exited = await start(t)
  const r1 = await exited.execute('import os; os._exit(7)')
  assert.equal(r1.kernelDied, true)
  assert.match(r1.error.evalue, /exit code 7/)
  const killed = await start(t)
  const r2 = await killed.execute('import os, signal; os.kill(os.getpid(), signal.SIGKILL)')
  assert.match(r2.error.evalue, /signal 9 \(SIGKILL\)/)

  const kernel = await start(t)
  const marker = `pk-zygote-child-${process.pid}`
  const timed = await kernel.execute(`import subprocess, time\nimport sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', '${marker}'], start_new_session=True)\ntime.sleep(30)`, { timeoutMs: 500 })
  assert.equal(timed.timedOut, true)
  assert.equal(await value(kernel, '6 * 7'), '42', 'the kernel survives the interrupt')
  const children = () => fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p) && isAlive(Number(p)) && (() => {
    try {
      return fs.readFileSync(`/proc/${p}/cmdline`, 'latin1').includes(marker)
    } catch {
      return false
    }
  })())
  assert.equal(children().length, 1, 'its child runs')
  const zygote = parentOf(kernel.pid)
  const started = startOf(kernel.pid)
  const outcome = await kernel.shutdown()
  assert.equal(outcome.confirmed, true)
  assert.equal(stillRunning(kernel.pid, started), false, 'the kernel is gone')
  assert.ok(await waitFor(() => children().length === 0, { timeoutMs: 3000 }), 'its child (in another session) is gone too')
  assert.equal(isAlive(zygote), true, 'the zygote serves on')
})

test('attack: a forked kernel holds nothing of its zygote and cannot reach it or a sibling', async (t) => {
  const victim = await start(t)
  const attacker = await start(t)
  const zygote = parentOf(attacker.pid)
  const report = await output(attacker, `
import ctypes, json, os, signal, socket
found = {}
# Every descriptor: none may be the zygote's socket; try to ask for a fork on each.
links = {}
for fd in os.listdir('/proc/self/fd'):
    try:
        links[fd] = os.readlink('/proc/self/fd/' + fd)
    except OSError:
        pass
found['sockets'] = sorted(l for l in links.values() if l.startswith('socket:'))
asked = []
for fd in links:
    try:
        s = socket.socket(fileno=os.dup(int(fd)))
        socket.send_fds(s, [json.dumps({'op': 'fork', 'id': 1, 'cwd': '/', 'env': {}}).encode()], [0, 1, 2])
        asked.append(fd)
    except OSError:
        pass
found['asked'] = asked
# A pidfd of another kernel (the zygote holds one per kernel) would signal it.
pidfds = []
for fd in links:
    try:
        signal.pidfd_send_signal(int(fd), 0)
        pidfds.append(fd)
    except OSError:
        pass
found['pidfds'] = pidfds + sorted(l for l in links.values() if 'pidfd' in l)
found['pids'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)
found['caps'] = [status[k].strip() for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb')]
found['no_new_privs'] = status['NoNewPrivs'].strip()
signalled = {}
for name, pid in (('zygote', ${zygote}), ('victim', ${victim.pid})):
    try:
        os.kill(pid, signal.SIGKILL)
        signalled[name] = 'sent'
    except OSError as e:
        signalled[name] = e.strerror
found['signalled'] = signalled
libc = ctypes.CDLL(None, use_errno=True)
# Mount rights back through a user namespace of its own: Landlock forbids every mount.
pid = os.fork()
if pid == 0:
    r = libc.unshare(0x10000000 | 0x00020000)
    m = libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) if r == 0 else -2
    os._exit(0 if m == 0 else 1)
found['mount_in_own_userns'] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(found))
`)
  const found = JSON.parse(report.trim().split('\n').at(-1))
  assert.deepEqual(found.sockets, [], 'no socket is inherited from the zygote')
  assert.deepEqual(found.asked, [], 'no descriptor takes a fork request')
  assert.deepEqual(found.pidfds, [], 'no pidfd of another process is inherited')
  assert.deepEqual(found.pids, [1, 2], 'the kernel sees only its own namespace')
  assert.deepEqual(found.caps, Array(5).fill('0000000000000000'), 'no capability left')
  assert.equal(found.no_new_privs, '1')
  assert.deepEqual(found.signalled, { zygote: 'No such process', victim: 'No such process' })
  assert.equal(found.mount_in_own_userns, 1, 'no mount, even in a user namespace of its own')
  assert.equal(isAlive(zygote), true)
  assert.equal(await value(victim, '1 + 1'), '2', 'the sibling is untouched')
})

test('%pip upgrade of a preloaded package takes effect in its session\'s kernel; other sessions keep the environment\'s version and the zygote', async (t) => {
  const dist = pipDistribution(t, { name: 'pkzyg-own-dist', module: 'pkzygown', prefix: 'pk-zygote-own-pip-' })
  dist.install('1')
  const first = await start(t, { cwd: dist.dir, preload: ['pkzygown'] })
  assert.equal(first.startMode, 'zygote')
  const up = await first.execute(dist.pipLine('2', { quiet: true }), { timeoutMs: 120_000 })
  assert.equal(up.status, 'ok', JSON.stringify(up.error))
  assert.equal(await value(first, 'import pkzygown\npkzygown.__version__'), "'2'")
  // What the session installed is its own: the shared environment, and so the zygote,
  // did not change.
  const later = await start(t, { cwd: dist.dir, preload: ['pkzygown'] })
  assert.equal(later.startMode, 'zygote')
  assert.equal(parentOf(later.pid), parentOf(first.pid), 'the same zygote')
  assert.equal(await value(later, "import sys\nsys.modules['pkzygown'].__version__"), "'1'")
})

test('with installs: \'shared\', a %pip upgrade of a preloaded package reaches kernels forked later, from a new zygote', async (t) => {
  const dist = pipDistribution(t, { name: 'pkzyg-dist', module: 'pkzyg', prefix: 'pk-zygote-pip-' })
  dist.install('1')
  const first = await start(t, { cwd: dist.dir, preload: ['pkzyg'], sandbox: { installs: 'shared' } })
  assert.equal(first.startMode, 'zygote')
  assert.equal(await value(first, "import sys\nsys.modules['pkzyg'].__version__"), "'1'")
  const up = await first.execute(dist.pipLine('2', { quiet: true }), { timeoutMs: 120_000 })
  assert.equal(up.status, 'ok', JSON.stringify(up.error))
  assert.equal(await value(first, 'import pkzyg\npkzyg.__version__'), "'2'")
  // The zygote imported version 1: a kernel forked from it now would start stale.
  const later = await start(t, { cwd: dist.dir, preload: ['pkzyg'], sandbox: { installs: 'shared' } })
  assert.equal(later.startMode, 'zygote')
  assert.notEqual(parentOf(later.pid), parentOf(first.pid), 'a new zygote')
  assert.equal(await value(later, "import sys\nsys.modules['pkzyg'].__version__"), "'2'")
})

test('a preloaded module edited in place, then replaced by a rename, retires the zygote each time: kernels forked later import the new code', async (t) => {
  const dir = viewedDir('pk-zygote-edit-')
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'pkzygedit.py')
  fs.writeFileSync(file, 'VALUE = 1\n')
  // No __pycache__: Python's own check of a .pyc (the source's mtime in seconds and its
  // size) would take an edit of the same size in the same second for no change.
  const options = { preload: ['pkzygedit'], env: { PYTHONPATH: dir, PYTHONDONTWRITEBYTECODE: '1' } }
  const read = "import sys\nsys.modules['pkzygedit'].VALUE"
  const first = await start(t, options)
  assert.equal(first.startMode, 'zygote')
  assert.equal(await value(first, read), '1')
  const again = await start(t, options)
  assert.equal(parentOf(again.pid), parentOf(first.pid), 'unchanged: the same zygote')
  // The same size, the same file: only its contents (and mtime) change.
  fs.writeFileSync(file, 'VALUE = 2\n')
  const edited = await start(t, options)
  assert.equal(edited.startMode, 'zygote')
  assert.notEqual(parentOf(edited.pid), parentOf(first.pid), 'a new zygote')
  assert.equal(await value(edited, read), '2')
  // What an editor's save or an installer does: a new file renamed over the old one.
  fs.writeFileSync(file + '.new', 'VALUE = 3\n')
  fs.renameSync(file + '.new', file)
  const replaced = await start(t, options)
  assert.equal(replaced.startMode, 'zygote')
  assert.notEqual(parentOf(replaced.pid), parentOf(edited.pid), 'a new zygote again')
  assert.equal(await value(replaced, read), '3')
})

test('a zygote that dies takes its kernels with it; the next kernel gets a new zygote', async (t) => {
  const preload = ['decimal', 'statistics']
  const kernel = await start(t, { preload })
  const zygote = parentOf(kernel.pid)
  const started = startOf(kernel.pid)
  process.kill(zygote, 'SIGKILL')
  // Its kernel dies as the zygote's namespace is torn down, a moment after the kill.
  assert.ok(await waitFor(() => !stillRunning(kernel.pid, started), { timeoutMs: 5000 }), 'the kernel died with its zygote')
  assert.ok(await waitFor(() => !kernel.alive, { timeoutMs: 5000 }), 'and the host knows')
  await assert.rejects(kernel.execute('1'), { code: 'ERR_KERNEL_DEAD' })
  const next = await start(t, { preload })
  assert.equal(next.startMode, 'zygote')
  assert.notEqual(parentOf(next.pid), zygote)
  assert.equal(await value(next, "import sys\n'statistics' in sys.modules"), 'True')
})

test('a pool forks every session\'s kernel from the zygote, spares and the rest', async (t) => {
  const pool = new KernelPool({ prewarm: 1, preload: PRELOAD, kernel: { interpreter: python } })
  t.after(() => pool.disposeAll())
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 30000 }))
  const results = await Promise.all(['s1', 's2', 's3'].map((sessionId) => pool.execute({ sessionId, cells: [{ code: LOADED }] })))
  for (const r of results) assert.match(r.output, /\(\[True, True\], \[\]\)/)
  const parents = new Set(pool.sessions.map((s) => parentOf(s.pid)))
  assert.equal(parents.size, 1, 'one zygote forked them all')
  assert.ok(!parents.has(process.pid))
})

test('PYKERNEL_ZYGOTE in the host\'s or the kernel\'s variables never turns a kernel into a zygote', async (t) => {
  // Only the host makes a zygote: a runner that took this variable would wait for fork
  // requests on its stdin instead of running cells.
  const baseEnv = { ...process.env, PYKERNEL_ZYGOTE: '[]' }
  for (const options of [{ baseEnv }, { env: { PYKERNEL_ZYGOTE: '["json"]' } }]) {
    const kernel = await start(t, { preload: [], startupTimeoutMs: 10_000, ...options })
    assert.equal(kernel.startMode, 'spawn')
    assert.equal(await value(kernel, '6 * 7'), '42', 'it runs cells')
  }
  // From the host's environment the variable does not even reach the kernel.
  const filtered = await start(t, { preload: [], baseEnv })
  assert.equal(await value(filtered, "import os\n'PYKERNEL_ZYGOTE' in os.environ"), 'False')
})
