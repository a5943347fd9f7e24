'use strict'
// The far side's cache of the runner and its bytecode (runner/pykernel_far.py `Cache`,
// src/start/far_cache.rs), through `env` (a no-op launcher, so the far side is this
// machine) and ssh to a throwaway sshd. Each launcher is wrapped so the bytes the host sent
// over it are counted: a start that ships the runner sends ~450 KB, one that does not a
// few hundred bytes. The attacks are a cell's (the same user as the cache): rewritten
// entries, and cache directories that are not private.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { Kernel } = require('../..')
const launchers = require('../helpers/launchers')

const python = process.env.PYKERNEL_TEST_PYTHON || 'python3'
const ROOT = path.resolve(__dirname, '..', '..')
/** More than any start sends besides the runner (init, a cell, the nonce). */
const NO_RUNNER_BYTES = 20_000
const RUNNER_BYTES = 300_000

/** Where each runner module's code came from ('host': the bytecode handed over). */
const ORIGINS_PY = "import sys; print(sorted(set(o for f in sys.meta_path if hasattr(f, 'origins') for o in f.origins.values())))"

/** Python: replaces the `pykernel_runner` package's code in a bytecode entry (argv[1]) with
 *  code that writes argv[2] and then runs the package's real source (argv[3]). */
const PLANT_BYTECODE_PY = `import marshal, sys
path, marker, source = sys.argv[1:4]
data = open(path, "rb").read()
header, _, body = data.partition(b"\\n")
words = header.decode().split()
planted = marshal.dumps(compile("open(%r, 'w').write('planted')\\n" % marker + open(source).read(), source, "exec"))
out, blobs, offset = [words[0]], [], 0
for i in range(1, len(words) - 2, 3):
    name, at, length = words[i], int(words[i + 1]), int(words[i + 2])
    blob = planted if name == "pykernel_runner" else body[at:at + length]
    out += [name, str(offset), str(len(blob))]
    blobs.append(blob)
    offset += len(blob)
open(path, "wb").write(" ".join(out).encode() + b"\\n" + b"".join(blobs))`

const tmp = (prefix) => fs.mkdtempSync(path.join(os.tmpdir(), prefix))
const size = (file) => (fs.existsSync(file) ? fs.statSync(file).size : 0)

/** `launcher` with what the host writes to it appended to `file` on the way. */
function counted(launcher, file) {
  return ['sh', '-c', 'tee -a "$0" | exec "$@"', file, ...launcher]
}

/** Starts a kernel, runs a cell and reads where its runner's code came from, shuts it down. */
async function startOnce(opts) {
  const kernel = await Kernel.start({ interpreter: python, ...opts })
  try {
    const r = await kernel.execute('print(6 * 7)')
    assert.equal(r.status, 'ok', JSON.stringify(r.error))
    const origins = await kernel.execute(ORIGINS_PY)
    assert.equal(origins.status, 'ok', JSON.stringify(origins.error))
    return { out: r.stdout, origins: origins.stdout.trim() }
  } finally {
    await kernel.shutdown()
  }
}

/** startOnce, and the bytes the host sent through the counted launcher: read after the
 *  shutdown, when the launcher (and its tee) has ended. */
async function started(opts, sentFile) {
  const before = size(sentFile)
  const r = await startOnce(opts)
  return { ...r, sent: size(sentFile) - before }
}

const entries = (dir) => (fs.existsSync(dir) ? fs.readdirSync(dir).sort() : [])
const entry = (dir, prefix) => path.join(dir, entries(dir).find((n) => n.startsWith(prefix)))

describe('the far side caches the runner and its bytecode (env as the launcher)', () => {
  const dir = tmp('pk-far-cache-')
  const cache = path.join(dir, 'xdg', 'pykernel')
  const sent = path.join(dir, 'sent')
  const opts = { launcher: counted(['env', `XDG_CACHE_HOME=${path.join(dir, 'xdg')}`], sent) }
  after(() => fs.rmSync(dir, { recursive: true, force: true }))

  test('the first start ships the runner, the next does not, the one after runs cached bytecode; each runs cells', async () => {
    const cold = await started(opts, sent)
    assert.equal(cold.out, '42\n')
    assert.ok(cold.sent > RUNNER_BYTES, `the cold start sent ${cold.sent} bytes`)
    assert.equal(cold.origins, "['source']")
    assert.equal(fs.lstatSync(cache).mode & 0o777, 0o700)
    assert.deepEqual(entries(cache).map((n) => n.replace(/-.*/, '')), ['runner'])
    assert.equal(fs.statSync(entry(cache, 'runner-')).mode & 0o777, 0o600)

    // Warm: the runner comes from the cache; its bytecode is compiled beside the kernel
    // (nobody vouched for any yet) and its hash told to the host.
    const warm = await started(opts, sent)
    assert.equal(warm.out, '42\n')
    assert.ok(warm.sent < NO_RUNNER_BYTES, `the warm start sent ${warm.sent} bytes`)
    assert.equal(warm.origins, "['source']")
    assert.deepEqual(entries(cache).map((n) => n.replace(/-.*/, '')), ['bytecode', 'runner'])

    const vouched = await started(opts, sent)
    assert.equal(vouched.out, '42\n')
    assert.ok(vouched.sent < NO_RUNNER_BYTES, `the third start sent ${vouched.sent} bytes`)
    assert.equal(vouched.origins, "['host']", 'the cached bytecode the host vouched for is used')
  })

  test("a vouched start runs runner.py's code from the bytecode, named by its file there, and loads neither ctypes nor hashlib", async () => {
    // The host vouched for the bytecode in the test before. runner.py's functions carry
    // the path of the kernel's own runner.py (the bytecode was compiled for a placeholder);
    // ctypes and hashlib cost a start ~4 ms of imports the far side does without.
    const kernel = await Kernel.start({ interpreter: python, ...opts })
    try {
      const r = await kernel.execute(`import gc, sys, types
origins = sorted(set(o for f in sys.meta_path if hasattr(f, 'origins') for o in f.origins.values()))
names = sorted({f.__code__.co_filename for f in gc.get_objects()
                if isinstance(f, types.FunctionType) and f.__code__.co_filename.endswith('runner.py')})
import json; print(json.dumps([origins, names, [m for m in ('ctypes', 'hashlib') if m in sys.modules]]))`)
      assert.equal(r.status, 'ok', JSON.stringify(r.error))
      const [origins, names, loaded] = JSON.parse(r.stdout)
      // One comparison, so a failure shows every part that differs.
      const named = names.map((n) => /\/pykernel-far-[0-9a-f]{16}\/runner\.py$/.test(n) || n)
      assert.deepEqual({ origins, named, loaded }, { origins: ['host'], named: [true], loaded: [] })
    } finally {
      await kernel.shutdown()
    }
  })

  test('a tampered cached runner is detected and replaced, never run', async () => {
    const file = entry(cache, 'runner-')
    const original = fs.readFileSync(file)
    const marker = path.join(dir, 'runner-planted')
    // A cell of this user plants code in the supervisor's script in the cache.
    const planted = original.toString('latin1').replace('def main():\n', `def main():\n    open(${JSON.stringify(marker)}, "w").write("x")\n`)
    assert.notEqual(planted, original.toString('latin1'))
    fs.writeFileSync(file, Buffer.from(planted, 'latin1'))
    const r = await started(opts, sent)
    assert.equal(r.out, '42\n', 'the cell still works')
    assert.ok(r.sent > RUNNER_BYTES, `the runner was not asked for again (${r.sent} bytes sent)`)
    assert.ok(!fs.existsSync(marker), 'the planted runner ran')
    assert.ok(fs.readFileSync(entry(cache, 'runner-')).equals(original), 'the entry was not replaced')
  })

  test('tampered cached bytecode is detected and replaced, never run', async () => {
    // Vouched for again: the runner was shipped last time, so this start compiles.
    await started(opts, sent)
    const warm = await started(opts, sent)
    assert.equal(warm.origins, "['host']")
    const file = entry(cache, 'bytecode-')
    const original = fs.readFileSync(file)
    const marker = path.join(dir, 'bytecode-planted')
    const plant = spawnSync(python, ['-c', PLANT_BYTECODE_PY, file, marker, path.join(ROOT, 'runner', 'pykernel_runner', '__init__.py')], { encoding: 'utf8' })
    assert.equal(plant.status, 0, plant.stderr)
    assert.ok(!fs.readFileSync(file).equals(original))
    const r = await started(opts, sent)
    assert.equal(r.out, '42\n', 'the cell still works')
    assert.ok(!fs.existsSync(marker), 'the planted bytecode ran')
    assert.equal(r.origins, "['source']", 'the kernel compiled from the checked source')
    assert.ok(r.sent < NO_RUNNER_BYTES)
    assert.ok(fs.readFileSync(file).equals(original), 'the entry was not compiled again')
    const after = await started(opts, sent)
    assert.equal(after.origins, "['host']")
    assert.ok(!fs.existsSync(marker), 'the planted bytecode ran')
  })
})

/** Python, a cell's attack on the far side's cache: it plants its own code in the cached
 *  bytecode (CACHE, MARKER), then forges the compile's report of that bytecode's sha256
 *  on the protocol pipe, guessing at the nonce, so the host would vouch for it. */
const FORGE_REPORT_PY = (cache, marker) => `import gc, glob, hashlib, json, os, subprocess, sys
entry = glob.glob(os.path.join(${JSON.stringify(cache)}, "bytecode-*"))[0]
source = sys.modules["pykernel_runner"].__file__
subprocess.run([sys.executable, "-c", ${JSON.stringify(PLANT_BYTECODE_PY)}, entry, ${JSON.stringify(marker)}, source], check=True)
sha = hashlib.sha256(open(entry, "rb").read()).hexdigest()
channel = next(o for o in gc.get_objects() if type(o).__name__ == "Channel" and hasattr(o, "fd"))
for nonce in ["0" * 32, "", "x"]:
    os.write(channel.fd, json.dumps({"type": "farBytecode", "sha256": sha, "nonce": nonce}).encode() + b"\\n")
print("forged")`

describe("a cell that plants bytecode in the cache and forges the compile's report", () => {
  const dir = tmp('pk-far-cache-forge-')
  after(() => fs.rmSync(dir, { recursive: true, force: true }))

  /** Warms a cache up to vouched bytecode, attacks it from a cell, and checks that the
   *  next start neither runs the planted code nor takes it as vouched for. */
  async function attack(home, prefix = [], interpreter = python) {
    const cache = path.join(home, 'xdg', 'pykernel')
    const marker = path.join(home, 'planted')
    const opts = { launcher: [...prefix, 'env', `XDG_CACHE_HOME=${path.join(home, 'xdg')}`], interpreter }
    await startOnce(opts)
    await startOnce(opts)
    assert.equal((await startOnce(opts)).origins, "['host']", 'the cache did not warm up')
    const kernel = await Kernel.start(opts)
    try {
      const r = await kernel.execute(FORGE_REPORT_PY(cache, marker))
      assert.equal(r.status, 'ok', JSON.stringify(r.error))
      assert.equal(r.stdout, 'forged\n')
    } finally {
      await kernel.shutdown()
    }
    const next = await startOnce(opts)
    assert.equal(next.out, '42\n')
    assert.ok(!fs.existsSync(marker), 'the planted bytecode ran')
    assert.equal(next.origins, "['source']", 'the planted bytecode was vouched for')
    assert.equal((await startOnce(opts)).origins, "['host']", 'the real compile is vouched for again')
    assert.ok(!fs.existsSync(marker), 'the planted bytecode ran')
  }

  test('as root (the host\'s user)', async () => {
    const home = path.join(dir, 'host')
    fs.mkdirSync(home)
    await attack(home)
  })

  test('as an ordinary user (useradd)', async (t) => {
    const user = launchers.ensureTestUser()
    if (!user) {
      assert.ok(!process.env.CI || process.getuid() !== 0, 'useradd is missing, but CI is set')
      t.skip(process.getuid() === 0 ? 'useradd is not installed: the ordinary user was NOT tested' : 'needs root to make a user')
      return
    }
    const asUser = launchers.asUser(user)
    const interpreter = launchers.pythonThrough(['sh', '-c', 'cd / && exec "$@"', 'sh', ...asUser], ['/usr/bin/python3', 'python3', python])
    assert.ok(interpreter, `no Python 3.8+ runs as ${user.name}`)
    fs.chmodSync(dir, 0o755)
    const home = path.join(dir, 'user')
    fs.mkdirSync(home, { mode: 0o700 })
    fs.chownSync(home, user.uid, user.gid)
    await attack(home, asUser, interpreter)
  })
})

describe('a cache directory that is not private is not used', () => {
  const dir = tmp('pk-far-cache-bad-')
  after(() => fs.rmSync(dir, { recursive: true, force: true }))
  /** A valid cache (runner and bytecode) to plant: made by two warm-up starts. */
  let good
  before(async () => {
    const xdg = path.join(dir, 'good')
    const launcher = ['env', `XDG_CACHE_HOME=${xdg}`]
    await startOnce({ launcher })
    await startOnce({ launcher })
    good = path.join(xdg, 'pykernel')
    assert.deepEqual(entries(good).map((n) => n.replace(/-.*/, '')), ['bytecode', 'runner'])
  })
  const copyGood = (to, mode = 0o700) => {
    fs.mkdirSync(to, { recursive: true })
    for (const name of entries(good)) fs.copyFileSync(path.join(good, name), path.join(to, name))
    fs.chmodSync(to, mode)
  }

  /** Two starts with XDG_CACHE_HOME=`xdg` (a prefix runs the far side as another user):
   *  both must ship the runner and leave `watched` as it was. */
  async function neverUsed(xdg, watched, prefix = [], interpreter = python) {
    const sent = path.join(dir, `sent-${path.basename(xdg)}`)
    const launcher = counted([...prefix, 'env', `XDG_CACHE_HOME=${xdg}`], sent)
    const listed = entries(watched)
    for (const round of [1, 2]) {
      const r = await started({ launcher, interpreter }, sent)
      assert.equal(r.out, '42\n')
      assert.ok(r.sent > RUNNER_BYTES, `start ${round} took the runner from ${watched} (${r.sent} bytes sent)`)
      assert.equal(r.origins, "['source']")
    }
    assert.deepEqual(entries(watched), listed, `${watched} was written`)
  }

  test('a symlink to a private directory of the user', async () => {
    const xdg = path.join(dir, 'symlink')
    const real = path.join(dir, 'symlink-target')
    copyGood(real)
    fs.mkdirSync(xdg)
    fs.symlinkSync(real, path.join(xdg, 'pykernel'))
    await neverUsed(xdg, real)
  })

  test('a group- or other-writable directory', async () => {
    for (const mode of [0o770, 0o703]) {
      const xdg = path.join(dir, `writable-${mode.toString(8)}`)
      copyGood(path.join(xdg, 'pykernel'), mode)
      await neverUsed(xdg, path.join(xdg, 'pykernel'))
    }
  })

  test("another user's directory: the far side as root and as an ordinary user", async (t) => {
    const user = launchers.ensureTestUser()
    if (!user) {
      assert.ok(!process.env.CI || process.getuid() !== 0, 'useradd is missing, but CI is set')
      t.skip(process.getuid() === 0 ? 'useradd is not installed: the ordinary user was NOT tested' : 'needs root to make a user and own files as another one')
      return
    }
    // Root's far side, the directory the user's.
    const xdg = path.join(dir, 'users')
    copyGood(path.join(xdg, 'pykernel'))
    fs.chownSync(path.join(xdg, 'pykernel'), user.uid, user.gid)
    await neverUsed(xdg, path.join(xdg, 'pykernel'))

    // The user's far side, the directory root's (readable to the user, entries and all).
    const asUser = launchers.asUser(user)
    // The system's: the test venv's may resolve through a directory the user cannot enter.
    const interpreter = launchers.pythonThrough(['sh', '-c', 'cd / && exec "$@"', 'sh', ...asUser], ['/usr/bin/python3', 'python3', python])
    assert.ok(interpreter, `no Python 3.8+ runs as ${user.name}`)
    const open = path.join(dir, 'open')
    fs.mkdirSync(open, { mode: 0o755 })
    fs.chmodSync(dir, 0o755)
    const rootOwned = path.join(open, 'root')
    copyGood(path.join(rootOwned, 'pykernel'), 0o755)
    fs.chmodSync(rootOwned, 0o755)
    for (const name of entries(path.join(rootOwned, 'pykernel'))) fs.chmodSync(path.join(rootOwned, 'pykernel', name), 0o644)
    await neverUsed(rootOwned, path.join(rootOwned, 'pykernel'), asUser, interpreter)

    // The control: the user's own private directory is used.
    const own = path.join(open, 'own')
    fs.mkdirSync(own, { mode: 0o700 })
    fs.chownSync(own, user.uid, user.gid)
    const sent = path.join(dir, 'sent-own')
    const launcher = counted([...asUser, 'env', `XDG_CACHE_HOME=${own}`], sent)
    const first = await started({ launcher, interpreter }, sent)
    assert.ok(first.sent > RUNNER_BYTES)
    const second = await started({ launcher, interpreter }, sent)
    assert.ok(second.sent < NO_RUNNER_BYTES, `the user's own cache was not used (${second.sent} bytes sent)`)
    assert.equal(fs.statSync(path.join(own, 'pykernel')).uid, user.uid)
  })
})

describe('ssh to a throwaway sshd, cold and warm', () => {
  test('the runner crosses once; then the far side starts from its cache', async (t) => {
    if (!launchers.sshAvailable()) {
      assert.ok(!process.env.CI, 'ssh is not usable here, but CI is set (.ci/run installs it)')
      t.skip('ssh + /usr/sbin/sshd unavailable')
      return
    }
    const dir = tmp('pk-far-cache-ssh-')
    const sshd = await launchers.startSshd()
    try {
      const sent = path.join(dir, 'sent')
      // The words after the host are the far shell's: `env` sets the far side's cache.
      const launcher = counted([...sshd.launcher, 'env', `XDG_CACHE_HOME=${dir}/xdg`], sent)
      const opts = { launcher, launcherShell: true }
      const cold = await started(opts, sent)
      assert.ok(cold.sent > RUNNER_BYTES, `the cold start sent ${cold.sent} bytes`)
      const warm = await started(opts, sent)
      assert.ok(warm.sent < NO_RUNNER_BYTES, `the warm start sent ${warm.sent} bytes`)
      const vouched = await started(opts, sent)
      assert.ok(vouched.sent < NO_RUNNER_BYTES)
      assert.equal(vouched.origins, "['host']")
      for (const r of [cold, warm, vouched]) assert.equal(r.out, '42\n')
    } finally {
      await sshd.stop()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
