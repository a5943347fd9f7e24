'use strict'
// Hostile input: files in shared places. Another local user can make a path in /tmp first
// (a directory they own, one anyone may write, a symlink to somewhere of theirs) or plant
// a symlink where we will write. Each test performs the attack and shows it failed: the
// path is refused with a clear ERR_ARTIFACTS_DIR, nothing of ours lands in the attacker's
// directory, no victim file is read or written through a link, and kernels still start.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFile, spawnSync } = require('node:child_process')
const { promisify } = require('node:util')
const { addon, startKernel, run, tempDir, waitFor, assertKernelWorks } = require('./_common')
const { testUser, sharedDir, sharedAddon } = require('../helpers/hosts')
const { asUser } = require('../helpers/launchers')

const NOBODY = 65534
const uid = process.getuid()
const asRoot = uid === 0

/** A fresh base directory for one test, removed after it. */
function base(t) {
  const dir = tempDir('pykernel-hostile-files-')
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** `<base>/artifacts` made beforehand by an attacker, as `how` says. Returns the path and
 *  the directory whose contents show whether we wrote anything there. */
function planted(root, how) {
  const dir = path.join(root, 'artifacts')
  if (how === 'symlink') {
    const target = path.join(root, 'attacker')
    fs.mkdirSync(target, { mode: 0o777 })
    fs.chmodSync(target, 0o777)
    fs.symlinkSync(target, dir)
    return { dir, watched: target }
  }
  fs.mkdirSync(dir)
  if (how === 'world-writable') fs.chmodSync(dir, 0o777)
  if (how === 'foreign') {
    fs.chmodSync(dir, 0o755)
    fs.chownSync(dir, NOBODY, NOBODY)
  }
  return { dir, watched: dir }
}

const FAULTS = {
  symlink: 'is a symbolic link (never followed): remove it or choose another artifactsDir',
  'world-writable': 'is writable by group or others (mode 777): make it private (chmod 700) or choose another artifactsDir',
  foreign: `is owned by uid ${NOBODY}, not by us (uid ${uid}): remove it or choose another artifactsDir`,
}

const refused = (dir, how) => (err) => {
  assert.equal(err.code, 'ERR_ARTIFACTS_DIR', err.message)
  assert.equal(err.message, `artifactsDir ${dir} ${FAULTS[how]}`)
  return true
}

for (const how of Object.keys(FAULTS)) {
  test(`an artifactsDir that is ${how === 'foreign' ? `owned by uid ${NOBODY}` : `a ${how} directory`} is refused by KvStore, Kernel.start and KernelPool, and nothing is written there`, { skip: how === 'foreign' && !asRoot && 'needs root to chown' }, async (t) => {
    const { dir, watched } = planted(base(t), how)
    assert.throws(() => new addon.KvStore(dir, 'chat-1'), refused(dir, how))
    await assert.rejects(startKernel({ artifactsDir: dir, sessionId: 'chat-1' }), refused(dir, how))
    assert.throws(() => new addon.KernelPool({ artifactsDir: dir, prewarm: 0 }), refused(dir, how))
    assert.throws(() => new addon.KernelPool({ kernel: { artifactsDir: dir }, prewarm: 0 }), refused(dir, how))
    assert.deepEqual(fs.readdirSync(watched), [], 'nothing was written into the attacker\'s directory')
    if (how === 'foreign') assert.equal(fs.statSync(dir).uid, NOBODY)
  })
}

test('a kernel-store planted as a symlink inside a sound artifactsDir is refused; a missing artifactsDir is made 0700 with its parents', async (t) => {
  const root = base(t)
  const dir = path.join(root, 'artifacts')
  fs.mkdirSync(dir, { mode: 0o700 })
  const attacker = path.join(root, 'attacker')
  fs.mkdirSync(attacker, { mode: 0o777 })
  fs.symlinkSync(attacker, path.join(dir, 'kernel-store'))
  await assert.rejects(startKernel({ artifactsDir: dir, sessionId: 'chat-1' }), (err) => {
    assert.equal(err.code, 'ERR_ARTIFACTS_DIR')
    assert.equal(err.message, `the kv store directory ${path.join(dir, 'kernel-store')} ${FAULTS.symlink}`)
    return true
  })
  assert.deepEqual(fs.readdirSync(attacker), [])

  const fresh = path.join(root, 'new', 'deeper', 'artifacts')
  const kernel = await startKernel({ artifactsDir: fresh, sessionId: 'chat-1' })
  t.after(() => kernel.shutdown())
  for (const d of [path.join(root, 'new'), path.join(root, 'new', 'deeper'), fresh, path.join(fresh, 'kernel-store')]) {
    assert.equal(fs.statSync(d).mode & 0o777, 0o700, d)
  }
})

test('a kv lock or store planted as a symlink to a victim file is never followed, from JavaScript or from a cell', async (t) => {
  const root = base(t)
  const dir = path.join(root, 'artifacts')
  const kernel = await startKernel({ artifactsDir: dir, sessionId: 'chat-1' })
  t.after(() => kernel.shutdown())
  const store = new addon.KvStore(dir, 'chat-1')
  const victim = path.join(root, 'victim.json')
  const VICTIM = '{"version":1,"values":{"stolen":"the victim\'s data"}}'
  fs.writeFileSync(victim, VICTIM)

  const lock = `${store.path}.lock`
  fs.symlinkSync(victim, lock)
  await assert.rejects(store.set('k', 1), (err) => {
    assert.equal(err.code, 'ERR_ARTIFACTS_DIR')
    assert.equal(err.message, `the kv store lock ${lock} ${FAULTS.symlink}`)
    return true
  })
  // The host answers the cell's kv calls, with the same refusal.
  const fromCell = await run(kernel, "kv.set('k', 'from a cell')")
  assert.equal(fromCell.result.status, 'error')
  assert.equal(fromCell.result.error.ename, 'PermissionError')
  assert.equal(fromCell.result.error.evalue, `the kv store lock ${lock} ${FAULTS.symlink}`)
  fs.unlinkSync(lock)

  fs.symlinkSync(victim, store.path)
  await assert.rejects(store.get('stolen'), (err) => err.code === 'ERR_ARTIFACTS_DIR' && err.message === `the kv store ${store.path} ${FAULTS.symlink}`)
  await assert.rejects(store.set('k', 1), (err) => err.code === 'ERR_ARTIFACTS_DIR')
  for (const code of ["kv.get('stolen')", "kv.set('k', 'from a cell')"]) {
    const r = await run(kernel, code)
    assert.equal(r.result.status, 'error', code)
    assert.equal(r.result.error.evalue, `the kv store ${store.path} ${FAULTS.symlink}`, code)
  }
  assert.equal(fs.readFileSync(victim, 'utf8'), VICTIM, 'the victim is unchanged')
  assert.ok(fs.lstatSync(store.path).isSymbolicLink(), 'the link was not replaced either')

  // The kv store directory swapped for a link after the kernel started: it is refused.
  fs.unlinkSync(store.path)
  const attacker = path.join(root, 'attacker')
  fs.mkdirSync(attacker, { mode: 0o777 })
  fs.rmSync(path.join(dir, 'kernel-store'), { recursive: true })
  fs.symlinkSync(attacker, path.join(dir, 'kernel-store'))
  const swapped = await run(kernel, "kv.set('k', 'from a cell')")
  assert.equal(swapped.result.error?.evalue, `the kv store directory ${path.join(dir, 'kernel-store')} ${FAULTS.symlink}`)
  assert.deepEqual(fs.readdirSync(attacker), [])

  // Once the plants are gone, the store works again, with private files.
  fs.unlinkSync(path.join(dir, 'kernel-store'))
  const stored = await run(kernel, "kv.set('k', 'from a cell')")
  assert.equal(stored.result.status, 'ok', JSON.stringify(stored.result.error))
  assert.equal(await store.get('k'), 'from a cell')
  for (const f of [store.path, lock]) assert.equal(fs.statSync(f).mode & 0o077, 0, `${f} is private`)
  await assertKernelWorks(kernel)
})

test('evaluate and a pool never write the full output into a symlinked artifactsDir; the notice says why', async (t) => {
  const root = base(t)
  const { dir, watched } = planted(root, 'symlink')
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const big = "for i in range(30000):\n    print(f'line {i}')"
  const r = await kernel.evaluate([{ code: big }], { artifactsDir: dir })
  assert.equal(r.exitCode, 0)
  assert.equal(r.truncated?.artifactPath, undefined)
  const why = `could not create an output artifact: artifactsDir ${dir} ${FAULTS.symlink}`
  assert.equal(r.truncated.artifactError, why)
  assert.ok(r.output.startsWith(`[the full output was not saved: ${why}]\n`), r.output.slice(0, 300))
  assert.match(r.output, /line 29999\n$/, 'the output itself is intact')

  // A pool made with a sound directory that is swapped for a link while a session runs:
  // that session's output is kept from it (with the notice), a new session is refused.
  const sound = path.join(root, 'sound')
  const pool = new addon.KernelPool({ kernel: { interpreter: process.env.PYKERNEL_TEST_PYTHON || undefined }, artifactsDir: sound, prewarm: 1 })
  t.after(() => pool.disposeAll())
  assert.equal((await pool.execute({ sessionId: 'a', cells: [{ code: '1' }] })).exitCode, 0)
  fs.rmSync(sound, { recursive: true })
  fs.symlinkSync(watched, sound)
  const p = await pool.execute({ sessionId: 'a', cells: [{ code: big }] })
  assert.equal(p.exitCode, 0)
  assert.equal(p.truncated?.artifactPath, undefined)
  assert.equal(p.truncated.artifactError, `could not create an output artifact: artifactsDir ${sound} ${FAULTS.symlink}`)
  // Also when the new session would claim a spare kernel started before the swap.
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 10_000 }), 'a spare is ready')
  await assert.rejects(pool.execute({ sessionId: 'b', cells: [{ code: '1' }] }), refused(sound, 'symlink'))
  assert.deepEqual(fs.readdirSync(watched), [], 'nothing was written into the attacker\'s directory')
  await assertKernelWorks(kernel)
})

/** Runs the runner-dir fixture host with its own TMPDIR; returns its report and stderr. */
async function hostWithTmpdir(tmp) {
  const child = path.join(__dirname, 'fixtures', 'runner-dir-child.js')
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [child], {
    env: { ...process.env, TMPDIR: tmp, PYKERNEL_TRACE: '1' },
    timeout: 60_000,
  })
  return { report: JSON.parse(stdout.trim().split('\n').pop()), stderr }
}

const RUNNER_DIR_ATTACKS = {
  'a symlink to an attacker directory': (shared, root) => {
    const target = path.join(root, 'attacker')
    fs.mkdirSync(target, { mode: 0o777 })
    fs.chmodSync(target, 0o777)
    fs.symlinkSync(target, shared)
    return target
  },
  [`a directory owned by uid ${NOBODY}`]: (shared) => {
    fs.mkdirSync(shared, { mode: 0o777 })
    fs.chmodSync(shared, 0o777)
    fs.chownSync(shared, NOBODY, NOBODY)
    return shared
  },
}

for (const [attack, plant] of Object.entries(RUNNER_DIR_ATTACKS)) {
  test(`kernels start when $TMPDIR/pykernel-<uid> is ${attack}: a private directory of ours is used instead, and nothing is written there`, { skip: attack.includes('owned') && !asRoot && 'needs root to chown' }, async (t) => {
    const tmp = base(t)
    const shared = path.join(tmp, `pykernel-${uid}`)
    const watched = plant(shared, tmp)
    const { report, stderr } = await hostWithTmpdir(tmp)
    assert.ok(Array.isArray(report), `the host failed: ${JSON.stringify(report)}\n${stderr}`)
    const bases = report.map((r) => path.dirname(path.dirname(r.runner)))
    for (const r of report) assert.equal(r.answer, '42')
    assert.equal(bases[0], bases[1], 'the second kernel reuses the stand-in')
    assert.equal(path.dirname(bases[0]), tmp)
    assert.ok(path.basename(bases[0]).startsWith(`pykernel-${uid}-`), bases[0])
    const st = fs.lstatSync(bases[0])
    assert.ok(st.isDirectory())
    assert.equal(st.uid, uid)
    assert.equal(st.mode & 0o777, 0o700)
    assert.deepEqual(fs.readdirSync(watched), [], 'nothing was written into the attacker\'s directory')
    const warnings = stderr.split('\n').filter((l) => l.includes(`cannot prepare the runner directory ${shared}`))
    assert.equal(warnings.length, 1, `warned once:\n${stderr}`)
    assert.match(warnings[0], new RegExp(`Kernels of this process use ${bases[0]} instead`))
  })
}

/** What a host finds when a hard link (to a file of its own elsewhere) or a FIFO is
 *  planted at the artifactPath it named, after the path was checked: run as a host process
 *  of its own (`node -e`, as root or as the ordinary user, each owning the directory). It
 *  reports the victim's text, each refusal, and how long the FIFO's finish took. */
const PLANT_AT_ARTIFACT_PATH = `
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { OutputBuilder } = require(process.argv[1])
const dir = process.argv[2]
const cut = (builder) => {
  for (let i = 0; i < 100; i++) builder.push('secret line ' + i + '\\n')
  return builder.finish()
}
const victim = path.join(dir, 'victim.txt')
fs.writeFileSync(victim, 'keep me')
const linked = path.join(dir, 'linked.log')
const viaLink = new OutputBuilder({ artifactPath: linked, headBytes: 20, tailBytes: 20 })
fs.linkSync(victim, linked)
const link = cut(viaLink)
const fifo = path.join(dir, 'fifo.log')
const viaFifo = new OutputBuilder({ artifactPath: fifo, headBytes: 20, tailBytes: 20 })
execFileSync('mkfifo', [fifo])
const started = Date.now()
const piped = cut(viaFifo)
process.stdout.write(JSON.stringify({
  uid: process.getuid(),
  victim: fs.readFileSync(victim, 'utf8'),
  link: { path: link.truncated.artifactPath ?? null, error: link.truncated.artifactError, output: link.output },
  fifo: { path: piped.truncated.artifactPath ?? null, error: piped.truncated.artifactError, ms: Date.now() - started },
}) + '\\n')
`

for (const mode of [{ name: 'root host', user: null }, { name: 'ordinary user', user: 'test', needsUser: true }]) {
  const user = mode.user && (asRoot ? testUser() : null)
  const skip = mode.needsUser && !user ? 'needs root and useradd: the test user is made with useradd' : false
  test(`${mode.name}: a hard link or a FIFO planted at artifactPath after the check is never written: the victim keeps its text, nothing waits`, { skip }, async (t) => {
    const dir = sharedDir(user)
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    const argv = [...(user ? asUser(user) : []), process.execPath, '-e', PLANT_AT_ARTIFACT_PATH, sharedAddon(), dir]
    const ran = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', timeout: 60_000 })
    assert.equal(ran.signal, null, `the host did not hang on the FIFO (killed by ${ran.signal}): ${ran.stderr}`)
    assert.equal(ran.status, 0, ran.stderr)
    const report = JSON.parse(ran.stdout.trim().split('\n').pop())
    assert.equal(report.uid, user ? user.uid : uid)
    assert.equal(report.victim, 'keep me', 'the hard-linked victim was neither emptied nor written')
    const linked = path.join(dir, 'linked.log')
    assert.equal(report.link.path, null)
    assert.equal(report.link.error, `could not create an output artifact: artifactPath ${linked} has 2 hard links (another name may be a file of ours elsewhere, which writing here would change): remove it or choose another artifactPath`)
    assert.ok(report.link.output.startsWith(`[the full output was not saved: ${report.link.error}]\n`), report.link.output)
    const fifo = path.join(dir, 'fifo.log')
    assert.equal(report.fifo.path, null)
    assert.equal(report.fifo.error, `could not create an output artifact: artifactPath ${fifo} exists and is not a regular file: remove it or choose another artifactPath`)
    assert.ok(fs.lstatSync(fifo).isFIFO(), 'the FIFO is left as it was')
  })
}
