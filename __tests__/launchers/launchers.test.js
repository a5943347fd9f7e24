'use strict'
// Kernels started through real launchers: ssh to a throwaway sshd on 127.0.0.1, bwrap with a
// private /tmp, the bwrap recipe of docs/launchers.md, and unshare. Each runs the core subset: start,
// streaming, display, an interrupt in band, timeout escalation, crash reports, shutdown
// leaving nothing on either side, and a dropped link. CI installs the tools (.ci/run);
// without CI a missing tool skips. PYKERNEL_TEST_LAUNCHERS=<name>,... runs only those
// launchers (the documented recipe's test runs this file so as an ordinary user).
const { test, describe, before, after } = require('node:test')
const net = require('node:net')
const { spawn } = require('node:child_process')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { Kernel, KvStore } = require('../..')
const launchers = require('../helpers/launchers')
const { isAlive, namespaceMembers, pidNamespace, waitFor } = require('../helpers/kernel')

const python = process.env.PYKERNEL_TEST_PYTHON || 'python3'
const LINK_TIMEOUT_MS = 1000

/** The runner's files as the kernel imported them, its pids and its PID namespace. */
const WHERE_PY = `import os, sys, json
print(json.dumps({
    "runner": sys.modules["pykernel_runner"].__file__,
    "pid": os.getpid(), "ppid": os.getppid(),
    "ns": os.readlink("/proc/self/ns/pid"),
}))`

/** The attack on the host a kernel's sandbox must hold: every check only opens, never
 *  writes (a sysctl or /sys file opened O_WRONLY and closed changes nothing), and the host
 *  name is set to the one it has. PORT is a server on the host's loopback, ROOT_ONLY a file
 *  only root may read. */
const ATTACK_PY = `import json, os, socket
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())

def opens_for_writing(path):
    try:
        os.close(os.open(path, os.O_WRONLY))
        return True
    except OSError:
        return False

def reads(path):
    try:
        with open(path, "rb") as f:
            f.read(1)
        return True
    except OSError:
        return False

def child_can(action):
    pid = os.fork()
    if pid == 0:
        try:
            action()
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0

def connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return True
    except OSError:
        return False

sysctls = [os.path.join(d, f) for d, _, files in os.walk("/proc/sys") for f in files]
mounts = [line.split() for line in open("/proc/self/mountinfo")]
print(json.dumps({
    "caps": {k: int(status[k], 16) for k in ("CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb")},
    "setuid": child_can(lambda: os.setuid(4242)),
    "sethostname": child_can(lambda: socket.sethostname(socket.gethostname())),
    "sysctls": len(sysctls),
    "writableSysctls": [p for p in sysctls if opens_for_writing(p)][:20],
    "procSysReadOnly": bool(os.statvfs("/proc/sys").f_flag & os.ST_RDONLY),
    "writable": [p for p in ("/proc/sysrq-trigger", "/dev/kmsg", "/sys/kernel/uevent_helper",
                             "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/fs/cgroup/cgroup.procs")
                 if opens_for_writing(p)],
    "writableMounts": [m[4] for m in mounts
                       if (m[4] == "/sys" or m[4].startswith(("/sys/", "/proc/sys")))
                       and "ro" not in m[5].split(",")],
    "readsRootOnly": reads(ROOT_ONLY),
    "supervisorSession": os.getsid(os.getppid()),
    "tty": opens_for_writing("/dev/tty"),
    "hostLoopback": connects(PORT),
    "interfaces": sorted(name for _, name in socket.if_nameindex()),
}))`

/** Python: processes that leave the kernel's process group and session, each with MARKER
 *  in its command line: a `setsid` child, a `start_new_session` one, a daemon (double fork,
 *  `os.setsid()`, the middle one gone), and two in sessions of their own that a kill walking
 *  the tree must not let outrun it: one that forks anew as fast as it can and lets its
 *  parent end 2 ms later (its pid keeps changing, for HOPS_FOR_S seconds, then it sleeps),
 *  and one that forks a sleeping child every millisecond (200 of them). */
const HOPS_FOR_S = 1.5
const ESCAPERS_PY = `import os, subprocess, sys
marker = MARKER
sleeper = [sys.executable, "-c", "import time; time.sleep(1000)", marker]
hopper = [sys.executable, "-c", """import os, time
end = time.monotonic() + ${HOPS_FOR_S}
while time.monotonic() < end:
    if os.fork():
        time.sleep(0.002)
        os._exit(0)
time.sleep(1000)""", marker]
spawner = [sys.executable, "-c", """import os, time
for _ in range(200):
    if os.fork() == 0:
        time.sleep(1000)
    time.sleep(0.001)
time.sleep(1000)""", marker]
quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
subprocess.Popen(["setsid"] + sleeper, **quiet)
subprocess.Popen(sleeper, start_new_session=True, **quiet)
subprocess.Popen(hopper, start_new_session=True, **quiet)
subprocess.Popen(spawner, start_new_session=True, **quiet)
middle = os.fork()
if middle == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, sleeper)
    os._exit(0)
os.waitpid(middle, 0)
print("started")`

async function where(kernel) {
  const r = await kernel.execute(WHERE_PY)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  return JSON.parse(r.stdout)
}

/** The host pid of the process that is `nsPid` in the PID namespace `ns`. */
function hostPid(ns, nsPid) {
  for (const pid of namespaceMembers(ns)) {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
    const ids = /^NSpid:\s+(.*)$/m.exec(status)[1].trim().split(/\s+/).map(Number)
    if (ids[ids.length - 1] === nsPid) return pid
  }
  return null
}

/** Whether anything of the far side is left: the kernel's own PID namespace is empty, or
 *  (ssh to this machine: the host's namespace) the kernel, its supervisor and `others`
 *  are gone. */
function farSideGone(at, others = []) {
  if (at.ns !== pidNamespace(process.pid)) return namespaceMembers(at.ns).length === 0
  return [at.pid, at.ppid, ...others].every((pid) => !isAlive(pid))
}

/** The process to freeze for a dead link: the one that carries the bytes. Through ssh
 *  that is the ssh client (without ControlMaster); through bwrap and unshare the pipe goes
 *  straight to the far side's supervisor. */
function linkProcess(kernel, at, name) {
  return name === 'ssh' ? kernel.pid : hostPid(at.ns, at.ppid)
}

const SETUPS = {
  ssh: {
    available: launchers.sshAvailable,
    async make() {
      const sshd = await launchers.startSshd()
      // A dropped link is a frozen ssh client; with ControlMaster the master carries
      // the bytes, so the client that is frozen must be a plain one.
      const plain = []
      for (let i = 0; i < sshd.launcher.length; i++) {
        if (sshd.launcher[i] === '-o' && /^Control/.test(sshd.launcher[i + 1])) i++
        else plain.push(sshd.launcher[i])
      }
      return { launcher: sshd.launcher, plain, stop: () => sshd.stop() }
    },
  },
  bwrap: {
    available: launchers.bwrapAvailable,
    privateTmp: true,
    async make() {
      const launcher = launchers.bwrapLauncher()
      return { launcher, plain: launcher, stop: async () => {} }
    },
  },
  // As docs/launchers.md prints it, for a host running as this process does (root or not).
  'readme-bwrap': {
    title: "the documented bwrap recipe",
    available: () => launchers.bwrapAvailable() && launchers.onPath(documentedRecipe()[0]),
    privateTmp: true,
    hardened: true,
    async make() {
      const launcher = documentedRecipe()
      // The root recipe runs the kernel as uid 65534, which cannot enter /root (pyenv).
      const interpreter = launchers.pythonThrough(launcher)
      assert.ok(interpreter, `no Python 3.8+ runs through ${launcher.join(' ')}`)
      return { launcher, plain: launcher, python: interpreter, stop: async () => {} }
    },
  },
  unshare: {
    available: launchers.unshareAvailable,
    async make() {
      const launcher = launchers.unshareLauncher()
      return { launcher, plain: launcher, stop: async () => {} }
    },
  },
}

/** The documented bwrap recipe for a host running as this process does. */
function documentedRecipe() {
  return launchers.documentedBwrapRecipes()[process.getuid() === 0 ? 'root' : 'user']
}

const ONLY = process.env.PYKERNEL_TEST_LAUNCHERS ? process.env.PYKERNEL_TEST_LAUNCHERS.split(',') : null

for (const [name, setup] of Object.entries(SETUPS)) {
  if (ONLY && !ONLY.includes(name)) continue
  describe(`through ${setup.title ?? name}`, () => {
    const usable = setup.available()
    if (!usable && process.env.CI) {
      test(`${name} is usable`, () => assert.fail(`${name} is not usable here, but CI is set (.ci/run installs it)`))
      return
    }
    let env = null
    const start = (options = {}) =>
      Kernel.start({ launcher: env.launcher, interpreter: env.python ?? python, linkTimeoutMs: LINK_TIMEOUT_MS, ...options })

    before(async () => {
      if (usable) env = await setup.make()
    })
    after(async () => {
      if (env) await env.stop()
    })

    test('the runner is shipped: a fresh private directory on the far side, removed at shutdown', { skip: !usable && `${name} unavailable` }, async () => {
      const kernel = await start()
      assert.equal(kernel.isolation.mode, 'launcher')
      const at = await where(kernel)
      const runnerDir = path.dirname(path.dirname(at.runner))
      assert.match(path.basename(runnerDir), /^pykernel-far-[0-9a-f]{16}$/)
      // The host's runner directory is not what the kernel imported from.
      assert.ok(!at.runner.startsWith(path.join(os.tmpdir(), `pykernel-${process.getuid()}`)))
      const r = await kernel.execute(
        `import os; print(oct(os.stat(${JSON.stringify(runnerDir)}).st_mode & 0o777), os.path.exists(${JSON.stringify(os.tmpdir() + '/pykernel-' + process.getuid())}))`,
      )
      const [mode, hostDirVisible] = r.stdout.trim().split(' ')
      assert.equal(mode, '0o700')
      if (setup.privateTmp) assert.equal(hostDirVisible, 'False', 'the host /tmp is invisible in bwrap')
      // What the far side's Python says it is, not the name it was started by.
      const exe = (await kernel.execute('import sys; print(sys.executable)')).stdout.trim()
      assert.equal(kernel.interpreter, exe)
      await kernel.shutdown()
      if (!setup.privateTmp) assert.ok(!fs.existsSync(runnerDir), `${runnerDir} was left behind`)
    })

    test('streams output in order, shows displays and results, runs bridge calls', { skip: !usable && `${name} unavailable` }, async () => {
      const calls = []
      const kernel = await start({ onCall: (call) => (calls.push(call), { echoed: call.args }) })
      const events = []
      const r = await kernel.execute(
        'import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.05)\ndisplay({"text/html": "<b>hi</b>"}, raw=True)\nprint(tool.echo(x=1))\n6 * 7',
        { onEvent: (e) => events.push(e) },
      )
      assert.equal(r.status, 'ok', JSON.stringify(r.error))
      assert.equal(r.stdout, "0\n1\n2\n{'echoed': {'x': 1}}\n")
      const streamed = events.filter((e) => e.type === 'stdout').map((e) => e.text).join('')
      assert.equal(streamed, r.stdout)
      assert.ok(events.filter((e) => e.type === 'stdout').length >= 2, 'output arrived as it was printed')
      assert.deepEqual(r.displays, [{ 'text/html': '<b>hi</b>' }])
      assert.equal(r.result['text/plain'], '42')
      assert.equal(calls.length, 1)
      assert.equal(calls[0].name, 'echo')
      await kernel.shutdown()
    })

    test('an interrupt travels in band and reaches the cell and its children', { skip: !usable && `${name} unavailable` }, async () => {
      const kernel = await start()
      const events = []
      const running = kernel.execute(
        'import subprocess\nprint("go", flush=True)\nsubprocess.run(["sleep", "30"])',
        { onEvent: (e) => events.push(e) },
      )
      assert.ok(await waitFor(() => events.some((e) => e.type === 'stdout'), { timeoutMs: 10000 }))
      const t0 = Date.now()
      kernel.interrupt()
      const r = await running
      assert.equal(r.status, 'error')
      assert.equal(r.error.ename, 'KeyboardInterrupt')
      assert.equal(r.kernelDied, false)
      assert.ok(Date.now() - t0 < 4000, `the interrupt took ${Date.now() - t0} ms`)
      const again = await kernel.execute('1 + 1')
      assert.equal(again.result['text/plain'], '2')
      await kernel.shutdown()
    })

    test('a cell that ignores the interrupt is killed with all it started, on the far side too', { skip: !usable && `${name} unavailable` }, async () => {
      const kernel = await start()
      const at = await where(kernel)
      const r = await kernel.execute(
        'import signal, subprocess, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\np = subprocess.Popen(["sleep", "300"])\nprint(p.pid, flush=True)\nwhile True: time.sleep(0.1)',
        { timeoutMs: 300 },
      )
      assert.equal(r.timedOut, true)
      assert.equal(r.kernelDied, true)
      assert.match(r.error.evalue, /did not respond to the interrupt and was killed/)
      const child = Number(r.stdout.trim())
      assert.ok(await waitFor(() => farSideGone(at, [child]), { timeoutMs: 5000 }), 'something was left on the far side')
      assert.ok(await waitFor(() => !isAlive(kernel.pid), { timeoutMs: 3000 }), 'the launcher is still running')
    })

    test('crashes are reported as the far side saw them', { skip: !usable && `${name} unavailable` }, async () => {
      let kernel = await start()
      let r = await kernel.execute('import os; os._exit(7)')
      assert.equal(r.kernelDied, true)
      assert.match(r.error.evalue, /died during the cell \(exit code 7\)/)
      assert.equal(kernel.alive, false)
      kernel = await start()
      r = await kernel.execute('import os, signal; os.kill(os.getpid(), signal.SIGSEGV)')
      assert.match(r.error.evalue, /killed by signal 11 \(SIGSEGV\)/)
    })

    test('a cell that kills its supervisor takes the kernel with it', { skip: !usable && `${name} unavailable` }, async () => {
      const kernel = await start()
      const at = await where(kernel)
      // Holding the GIL after the kill: the kernel cannot notice its stdin closing.
      const r = await kernel.execute('import ctypes, os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nctypes.PyDLL(None).usleep(6 * 1000 * 1000)')
      if (at.ppid === 1) {
        // The supervisor is its PID namespace's init (unshare): the kill does nothing.
        assert.equal(r.status, 'ok', JSON.stringify(r.error))
        await kernel.shutdown()
        return
      }
      assert.equal(r.kernelDied, true)
      assert.ok(await waitFor(() => farSideGone(at), { timeoutMs: 3000 }), 'the kernel outlived its supervisor')
      assert.ok(await waitFor(() => !isAlive(kernel.pid), { timeoutMs: 3000 }), 'the launcher is still running')
    })

    test('shutdown leaves no process on either side', { skip: !usable && `${name} unavailable` }, async () => {
      const kernel = await start()
      const at = await where(kernel)
      const r = await kernel.execute('import subprocess; print(subprocess.Popen(["sleep", "300"]).pid)')
      const child = Number(r.stdout.trim())
      const outcome = await kernel.shutdown()
      assert.equal(outcome.confirmed, true)
      assert.equal(outcome.exitCode, 0)
      assert.ok(!isAlive(kernel.pid), 'the launcher is still running')
      assert.ok(await waitFor(() => farSideGone(at, [child]), { timeoutMs: 3000 }), 'something was left on the far side')
    })

    for (const ending of ['shutdown', 'the link drops']) {
      test(`processes a cell moved to sessions of their own end with the kernel: ${ending}`, { skip: !usable && `${name} unavailable` }, async () => {
        const marker = `pk-escaper-${process.pid}-${Date.now()}`
        // A plain launcher for the dropped link: killing an ssh client that a ControlMaster
        // relays for would leave the master's channel open.
        const kernel = await Kernel.start({ launcher: ending === 'shutdown' ? env.launcher : env.plain, interpreter: env.python ?? python, linkTimeoutMs: LINK_TIMEOUT_MS })
        try {
          const at = await where(kernel)
          const started = Date.now()
          const r = await kernel.execute(ESCAPERS_PY.replace('MARKER', JSON.stringify(marker)))
          assert.equal(r.status, 'ok', JSON.stringify(r.error))
          // The kernel ends while the spawner is still forking (50 of its 200 children).
          assert.ok(await waitFor(() => launchers.hostPidsOfCommandLine(marker).length >= 50, { timeoutMs: 10000 }), 'the escapers did not start')
          if (ending === 'shutdown') {
            const outcome = await kernel.shutdown()
            assert.equal(outcome.confirmed, true)
          } else {
            // The host's end of the link goes: the launcher is killed (ssh: the client).
            process.kill(kernel.pid, 'SIGKILL')
            assert.ok(await waitFor(() => !kernel.alive, { timeoutMs: 5000 }), 'the host still takes the kernel for alive')
          }
          // The far side gets the shutdown grace (1 s) and then ends what is left.
          assert.ok(await waitFor(() => launchers.hostPidsOfCommandLine(marker).length === 0, { timeoutMs: 8000 }), `left running on the far side: ${launchers.hostPidsOfCommandLine(marker).join(', ')}`)
          assert.ok(await waitFor(() => farSideGone(at), { timeoutMs: 5000 }), 'the kernel or its supervisor was left on the far side')
          // A scan of /proc can miss the hopper while it hops (each of its processes lives
          // 2 ms); once it has stopped hopping, one that escaped sleeps where it is seen.
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + HOPS_FOR_S * 1000 + 500 - Date.now())))
          assert.deepEqual(launchers.hostPidsOfCommandLine(marker), [], 'left running on the far side once the hopper stopped hopping')
        } finally {
          for (const pid of launchers.hostPidsOfCommandLine(marker)) {
            try {
              process.kill(pid, 'SIGKILL')
            } catch {}
          }
          await kernel.shutdown()
        }
      })
    }

    test('a dropped link is detected by the heartbeat and the far side cleans up', { skip: !usable && `${name} unavailable` }, async () => {
      const kernel = await Kernel.start({ launcher: env.plain, interpreter: env.python ?? python, linkTimeoutMs: LINK_TIMEOUT_MS })
      const at = await where(kernel)
      const frozen = linkProcess(kernel, at, name)
      assert.ok(frozen, 'found the process that carries the link')
      // The cell holds the GIL: the kernel cannot notice its stdin closing, so only the
      // supervisor's kill ends it on the far side.
      const running = kernel.execute('import ctypes; ctypes.PyDLL(None).usleep(60 * 1000 * 1000)')
      await new Promise((r) => setTimeout(r, 100))
      const t0 = Date.now()
      process.kill(frozen, 'SIGSTOP')
      try {
        const r = await running
        assert.equal(r.kernelDied, true)
        assert.match(r.error.evalue, /the link to the kernel was lost/)
        assert.ok(Date.now() - t0 < LINK_TIMEOUT_MS + 4000, `noticed after ${Date.now() - t0} ms`)
        assert.ok(await waitFor(() => farSideGone(at), { timeoutMs: 5000 }), 'something was left on the far side')
      } finally {
        try {
          process.kill(frozen, 'SIGCONT')
        } catch {}
      }
    })

    test('a cell that holds the GIL is not taken for a dead link: the supervisor answers', { skip: !usable && `${name} unavailable` }, async () => {
      const kernel = await start()
      // PyDLL keeps the GIL across the call: the runner's own threads cannot run.
      const r = await kernel.execute(`import ctypes; ctypes.PyDLL(None).usleep(${(LINK_TIMEOUT_MS * 2.5 * 1000) | 0}); "alive"`)
      assert.equal(r.status, 'ok', JSON.stringify(r.error))
      assert.equal(r.result['text/plain'], "'alive'")
      await kernel.shutdown()
    })

    if (setup.hardened) {
      const host = process.getuid() === 0 ? 'a root host' : 'an ordinary host'
      test(`${host}'s kernel gets no capability, no writable sysctl, /sys or /dev/kmsg, no root, its own session, namespaces and network`, { skip: !usable && `${name} unavailable` }, async () => {
        // Something of the host's to reach: a server on its loopback, and a file only root
        // may read (where the system has one).
        const server = net.createServer((socket) => socket.destroy())
        await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
        const rootOnly = ['/etc/shadow', '/etc/gshadow'].find((p) => {
          try {
            const st = fs.statSync(p)
            return st.uid === 0 && (st.mode & 0o004) === 0
          } catch {
            return false
          }
        })
        const kernel = await start()
        try {
          const at = await where(kernel)
          const r = await kernel.execute(ATTACK_PY.replace('PORT', server.address().port).replace('ROOT_ONLY', JSON.stringify(rootOnly ?? '/nonexistent')))
          assert.equal(r.status, 'ok', JSON.stringify(r.error))
          const seen = JSON.parse(r.stdout)
          assert.ok(seen.sysctls > 100, `only ${seen.sysctls} sysctls were found to try`)
          const sharesNet = env.launcher.includes('--share-net')
          // What the host sees: the kernel's uid, and the namespaces it shares with the host.
          const pid = hostPid(at.ns, at.pid)
          assert.ok(pid, 'found the kernel on the host')
          const uid = Number(/^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1])
          const shared = ['user', 'mnt', 'pid', 'net', 'ipc', 'uts', 'cgroup'].filter(
            (ns) => fs.readlinkSync(`/proc/${pid}/ns/${ns}`) === fs.readlinkSync(`/proc/self/ns/${ns}`),
          )
          // One comparison, so a failure lists every hole at once.
          const { sysctls, supervisorSession, ...holes } = seen
          assert.deepEqual(
            { ...holes, ownSession: supervisorSession !== 0, rootOnHost: uid === 0, shared, ...(rootOnly ? {} : { readsRootOnly: false }) },
            {
              caps: { CapEff: 0, CapPrm: 0, CapBnd: 0, CapInh: 0, CapAmb: 0 },
              setuid: false,
              sethostname: false,
              writableSysctls: [],
              procSysReadOnly: true,
              writable: [],
              writableMounts: [],
              readsRootOnly: false,
              // Led inside the sandbox (getsid is 0 when the leader is outside its PID namespace).
              ownSession: true,
              tty: false,
              hostLoopback: sharesNet,
              interfaces: sharesNet ? seen.interfaces : ['lo'],
              rootOnHost: false,
              shared: sharesNet ? ['net'] : [],
            },
            `holes in the sandbox (${rootOnly ?? 'no root-only file here'} was the file only root may read)`,
          )
        } finally {
          await kernel.shutdown()
          server.close()
        }
      })
    }
  })
}

// The recipe for a host running as an ordinary user, run by one: this file again, limited to
// the documented recipe, as a user made for the test (root only; everyone else is such a user,
// and the loop above ran it).
describe("the documented bwrap recipe, its host an ordinary user", { skip: ONLY !== null && 'PYKERNEL_TEST_LAUNCHERS names launchers' }, () => {
  test('the whole launcher suite and the attack pass through it', async (t) => {
    if (process.getuid() !== 0) {
      t.skip(`this host is already an ordinary user (uid ${process.getuid()}): the loop above ran this recipe; the root recipe was NOT tested (it needs root)`)
      return
    }
    if (!launchers.bwrapAvailable()) {
      if (process.env.CI) assert.fail('bwrap is not usable here, but CI is set (.ci/run installs it)')
      t.skip('bwrap unavailable')
      return
    }
    const user = launchers.ensureTestUser()
    if (!user) {
      if (process.env.CI) assert.fail('useradd is missing, but CI is set: the recipe for an ordinary user must be tested')
      t.skip('useradd is not installed: the documented recipe for a host running as an ordinary user was NOT tested')
      return
    }
    const asUser = launchers.asUser(user)
    const recipe = launchers.documentedBwrapRecipes().user
    const interpreter = launchers.pythonThrough([...asUser, ...recipe])
    assert.ok(interpreter, `no Python 3.8+ runs as ${user.name} through ${recipe.join(' ')}`)
    // A home and a cwd of the user's own; the addon, this repository and the interpreter
    // are read where they are (the check above ran the interpreter as the user).
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'pk-user-'))
    fs.chownSync(home, user.uid, user.gid)
    try {
      const child = spawn(asUser[0], [...asUser.slice(1), process.execPath, '--test', '--test-reporter=tap', __filename], {
        cwd: home,
        env: {
          PATH: process.env.PATH,
          HOME: home,
          USER: user.name,
          LOGNAME: user.name,
          PYKERNEL_TEST_PYTHON: interpreter,
          PYKERNEL_TEST_LAUNCHERS: 'readme-bwrap',
          ...(process.env.CI ? { CI: process.env.CI } : {}),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let out = ''
      child.stdout.on('data', (d) => (out += d))
      child.stderr.on('data', (d) => (out += d))
      // Bounded: the same tests take ~10 s in this process.
      const hung = setTimeout(() => child.kill('SIGKILL'), 240_000)
      const code = await new Promise((resolve) => child.on('close', (c, signal) => resolve(c ?? signal)))
      clearTimeout(hung)
      assert.equal(code, 0, `the suite failed as ${user.name}:\n${out}`)
      const passed = [...out.matchAll(/^\s*ok \d+ - (.*)$/gm)].map((m) => m[1])
      assert.ok(passed.some((n) => /^an ordinary host's kernel gets no capability/.test(n)), `the attack did not run as ${user.name}:\n${out}`)
      assert.ok(passed.includes('shutdown leaves no process on either side'), out)
      const skipped = passed.filter((n) => /# SKIP/.test(n))
      assert.deepEqual(skipped.map((n) => n.replace(/ # SKIP.*/, '')), ["the documented bwrap recipe, its host an ordinary user", 'launcher edge cases (env as the launcher)'], out)
      assert.match(out, /^# fail 0$/m)
      const count = Number((/^# pass (\d+)$/m.exec(out) || [])[1])
      assert.ok(count >= 10, `${count} tests passed as ${user.name}, the recipe's describe has 10:\n${out}`)
    } finally {
      fs.rmSync(home, { recursive: true, force: true })
    }
  })
})

describe('launcher edge cases (env as the launcher)', { skip: ONLY !== null && 'PYKERNEL_TEST_LAUNCHERS names launchers' }, () => {
  test('bad launchers and options are refused with codes', async () => {
    await assert.rejects(Kernel.start({ launcher: [] }), { code: 'ERR_INVALID_ARG', message: /launcher/ })
    await assert.rejects(Kernel.start({ launcher: ['no-such-launcher-xyz'] }), { code: 'ERR_LAUNCHER', message: /no-such-launcher-xyz/ })
    await assert.rejects(Kernel.start({ launcher: ['env'], maxProcesses: 64 }), { code: 'ERR_INVALID_ARG', message: /maxProcesses.*launcher/ })
    await assert.rejects(Kernel.start({ launcher: ['env'], sandbox: { writable: ['/tmp'] } }), { code: 'ERR_INVALID_ARG', message: /sandbox/ })
    await assert.rejects(Kernel.start({ launcher: ['env'], linkTimeoutMs: 5 }), { code: 'ERR_INVALID_ARG', message: /linkTimeoutMs/ })
  })

  test("a start's abort and deadline end a far side that never answers, without waiting out the start-up timeout", async () => {
    const silent = ['sh', '-c', 'sleep 30', 'silent-far-side']
    const ac = new AbortController()
    setTimeout(() => ac.abort(), 200)
    let t0 = Date.now()
    await assert.rejects(Kernel.start({ launcher: silent, signal: ac.signal, startupTimeoutMs: 60000 }), { code: 'ERR_ABORTED' })
    assert.ok(Date.now() - t0 < 5000, `the abort took ${Date.now() - t0} ms`)
    t0 = Date.now()
    await assert.rejects(Kernel.start({ launcher: silent, deadlineMs: 300, startupTimeoutMs: 60000 }), { code: 'ERR_KERNEL_START_TIMEOUT' })
    assert.ok(Date.now() - t0 < 5000, `the deadline took ${Date.now() - t0} ms`)
    const { processesWith } = require('../helpers/kernel')
    assert.ok(await waitFor(() => processesWith('silent-far-side').length === 0, { timeoutMs: 3000 }), 'a launcher was left running')
  })

  test('no Python on the far side, or one too old, is said plainly', async () => {
    await assert.rejects(Kernel.start({ launcher: ['env'], interpreter: 'python-none-such' }), {
      code: 'ERR_KERNEL_START_FAILED',
      message: /python-none-such/,
    })
    const old = path.join(os.homedir(), '.pyenv/versions/3.7.16/bin/python')
    if (!fs.existsSync(old)) return
    await assert.rejects(Kernel.start({ launcher: ['env'], interpreter: old }), {
      code: 'ERR_KERNEL_START_FAILED',
      message: /far side's Python is 3\.7; pykernel needs 3\.8 or newer/,
    })
  })

  test('a runner altered in transit is refused, not run', async () => {
    // The launcher changes one word of what crosses it, as a tampering relay would; the
    // far side's cache is empty, so the runner crosses.
    const cache = fs.mkdtempSync(path.join(os.tmpdir(), 'pk-relay-cache-'))
    const relay = ['sh', '-c', 'sed -u "0,/import os/s//import oz/" | "$@"', 'relay', 'env', `XDG_CACHE_HOME=${cache}`]
    await assert.rejects(Kernel.start({ launcher: relay, interpreter: python }), {
      code: 'ERR_KERNEL_START_FAILED',
      message: /the runner arrived damaged/,
    })
    assert.deepEqual(fs.readdirSync(path.join(cache, 'pykernel')), [], 'the damaged runner was cached')
    fs.rmSync(cache, { recursive: true, force: true })
  })

  test("the host's secrets and ssh agent reach neither a launched kernel nor its supervisor's environ; only ssh gets the agent", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pk-launcher-'))
    const baseEnv = { PATH: process.env.PATH, HOME: os.homedir(), OPENAI_API_KEY: 'sk-secret', SSH_AUTH_SOCK: '/tmp/agent.sock', PYKERNEL_VISIBLE: 'seen' }
    // The launcher notes the agent socket it was given, then runs on.
    const seen = path.join(dir, 'sock')
    const kernel = await Kernel.start({
      launcher: ['sh', '-c', 'printf %s "$SSH_AUTH_SOCK" > "$0"; exec "$@"', seen],
      interpreter: python,
      baseEnv,
      env: { MANAGED: 'yes' },
    })
    const r = await kernel.execute('import os; print(sorted(k for k in os.environ if k in ("OPENAI_API_KEY", "SSH_AUTH_SOCK", "PYKERNEL_VISIBLE", "MANAGED")))')
    assert.equal(r.stdout.trim(), "['MANAGED', 'PYKERNEL_VISIBLE']")
    // The attack: read the supervisor's (the kernel's parent's) original environment.
    const parent = await kernel.execute('import os; print(open("/proc/%d/environ" % os.getppid(), "rb").read().decode(errors="replace"))')
    assert.equal(parent.status, 'ok', JSON.stringify(parent.error))
    assert.match(parent.stdout, /PYKERNEL_VISIBLE=seen/, 'the supervisor environ was read')
    assert.doesNotMatch(parent.stdout, /sk-secret|agent\.sock|SSH_AUTH_SOCK/)
    assert.equal(fs.readFileSync(seen, 'utf8'), '', 'a launcher that is not ssh got the agent socket')
    await kernel.shutdown()

    // A program named ssh does get it (it joins its words for the far shell, as ssh does).
    const bin = path.join(dir, 'bin')
    fs.mkdirSync(bin)
    const sshSeen = path.join(dir, 'ssh-sock')
    fs.writeFileSync(path.join(bin, 'ssh'), `#!/bin/sh\nprintf %s "$SSH_AUTH_SOCK" > ${sshSeen}\nexec sh -c "$*"\n`, { mode: 0o755 })
    const viaSsh = await Kernel.start({ launcher: [path.join(bin, 'ssh')], interpreter: python, baseEnv })
    const agent = await viaSsh.execute('import os; print(os.environ.get("SSH_AUTH_SOCK"))')
    assert.equal(agent.stdout.trim(), 'None')
    assert.equal(fs.readFileSync(sshSeen, 'utf8'), '/tmp/agent.sock')
    await viaSsh.shutdown()
  })

  test('a cell cannot use the host-answered kv call to leave its store, reach onCall, or forge how it ended', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pk-kv-attack-'))
    const calls = []
    const kernel = await Kernel.start({ launcher: ['env'], interpreter: python, artifactsDir: dir, sessionId: 's1', onCall: (c) => calls.push(c.name) })
    const attack = await kernel.execute(`
out = []
for args in ({"op": "set", "key": "../../escape", "value": 1}, {"op": "set", "key": "a/b", "value": 1}, {"op": "chmod", "key": "k"}):
    try:
        answer = __pykernel__.bridge_call("__pykernel.kv", args)
        # The store's own refusals come back as an answer the prelude raises.
        out.append("refused" if isinstance(answer, dict) and "refused" in answer else "accepted")
    except RuntimeError as exc:
        out.append("refused")
print(out)`)
    assert.equal(attack.stdout.trim(), "['refused', 'refused', 'refused']")
    assert.deepEqual(calls, [], 'a kv call reached onCall')
    const files = fs.readdirSync(dir, { recursive: true })
    assert.ok(!files.some((f) => f.includes('escape')), `a file escaped: ${files}`)
    assert.ok(!fs.existsSync(path.join(dir, '..', 'escape')))

    // The forgery: a kernelExit frame written to the protocol pipe before a real os._exit(7).
    const forged = await kernel.execute(`
import os, sys
channel = sys.modules["pykernel_runner.kernel"]._kernel._channel
os.write(channel.fd, b'{"type":"kernelExit","code":0,"signal":null}\\n')
os._exit(7)`)
    assert.match(forged.error.evalue, /exit code 7/)
  })

  test('kv and artifacts go through the host when the far side cannot see its files', { skip: !launchers.bwrapAvailable() && !process.env.CI && 'bwrap unavailable' }, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pk-kv-'))
    const kernel = await Kernel.start({ launcher: launchers.bwrapLauncher(), interpreter: python, artifactsDir: dir, sessionId: 's1' })
    const r = await kernel.execute(
      `import os; print(os.path.exists(${JSON.stringify(dir)})); kv.set("k", {"n": [1, 2]}); print(kv.get("k"), kv.get("nope", "dflt"), kv.list(), kv.path)`,
    )
    assert.equal(r.status, 'ok', JSON.stringify(r.error))
    assert.equal(r.stdout, "False\n{'n': [1, 2]} dflt ['k'] None\n")
    assert.deepEqual(await new KvStore(dir, 's1').get('k'), { n: [1, 2] })
    const big = await kernel.execute('kv.set("big", "x" * 300000)')
    assert.match(big.error.evalue, /limit is 262144 bytes/)
    // A truncated output's artifact is the host's file too, read back through the host.
    const cut = await kernel.evaluate([{ code: 'for i in range(100000):\n    print(f"line {i}")' }], { artifactsDir: dir })
    assert.ok(cut.truncated.artifactId)
    const back = await kernel.execute(`print(read("artifact://${cut.truncated.artifactId}:2-3"), end="")`)
    assert.equal(back.status, 'ok', JSON.stringify(back.error))
    assert.equal(back.stdout, 'line 1\nline 2\n')
    await kernel.shutdown()
    fs.rmSync(dir, { recursive: true, force: true })
  })
})
