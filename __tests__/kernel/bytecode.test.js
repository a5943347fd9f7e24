'use strict'
// The runner's bytecode comes from the host: compiled once per interpreter in each host
// process, kept in a sealed memfd and handed to every kernel. Nothing on disk is read
// for it, so nothing planted on disk (by a kernel without the sandbox, in this host or
// another) ever runs, and no kernel can change what the next one gets.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { tempDir } = require('../helpers/kernel')

// A fresh runner directory, so everything in it is this test's.
const tmp = tempDir()
process.env.TMPDIR = tmp
const { startKernel, value, python, waitFor } = require('../helpers/kernel')

const ORIGINS = "import sys; sorted(set(f.origins[n] for f in sys.meta_path if hasattr(f, 'origins') for n in f.origins if n.startswith('pykernel_runner')))"

/** The runner's directory this process wrote (`<tmp>/pykernel-<uid>/<sha>`). */
function runnerDir() {
  const base = fs.readdirSync(tmp).find((name) => name.startsWith('pykernel-') && !name.startsWith('pykernel-tmp-'))
  const [dir] = fs.readdirSync(path.join(tmp, base))
  return path.join(tmp, base, dir)
}

/** A kernel started once the host holds the sealed bytecode (its compile runs in the
 *  background after the first start). */
async function kernelWithHostBytecode(options = {}) {
  let kernel = null
  const got = await waitFor(async () => {
    if (kernel) await kernel.shutdown()
    kernel = await startKernel(options)
    return (await value(kernel, ORIGINS)) === "['host']"
  }, { timeoutMs: 15_000, intervalMs: 50 })
  assert.ok(got, 'a kernel got the host\'s bytecode')
  return kernel
}

test('the first kernel compiles the runner from source; the next ones load it from the host\'s sealed copy, and nothing is cached on disk', async (t) => {
  const first = await startKernel({ env: { PYTHONDONTWRITEBYTECODE: '1' } })
  t.after(() => first.shutdown())
  assert.equal(await value(first, ORIGINS), "['source']", 'nothing was ready for the first kernel')
  const kernel = await kernelWithHostBytecode({ env: { PYTHONDONTWRITEBYTECODE: '1' } })
  t.after(() => kernel.shutdown())
  // The prelude and the lazily imported modules come from it too.
  await value(kernel, '%pwd')
  assert.equal(await value(kernel, "import sys; sorted(set(o for f in sys.meta_path if hasattr(f, 'origins') for o in f.origins.values()))"), "['host']")
  assert.equal(await value(kernel, 'import sys; sys.dont_write_bytecode'), 'True', 'the setting holds for the user')
  assert.equal(await value(kernel, "import os; 'PYKERNEL_BYTECODE' in os.environ"), 'False')
  // Neither the kernel nor its init holds the descriptor once the runner is loaded.
  const held = `
import os
def links(pid):
    found = []
    for fd in os.listdir(f'/proc/{pid}/fd'):
        try:
            found.append(os.readlink(f'/proc/{pid}/fd/{fd}'))
        except OSError:
            pass    # the listing's own descriptor, closed by now
    return found
[link for pid in ('self', '1') for link in links(pid) if 'bytecode' in link]`
  assert.equal(await value(kernel, held), '[]')
  const dir = runnerDir()
  assert.deepEqual(fs.readdirSync(dir).filter((name) => name === 'bytecode' || name === '__pycache__'), [])
  assert.equal(fs.existsSync(path.join(dir, 'pykernel_runner', '__pycache__')), false)
  // The user's own modules are not cached either.
  const cwd = tempDir()
  const user = await startKernel({ cwd, env: { PYTHONDONTWRITEBYTECODE: '1' } })
  t.after(() => user.shutdown())
  await value(user, `open(${JSON.stringify(path.join(cwd, 'usermod.py'))}, 'w').write('X = 1\\n')`)
  assert.equal(await value(user, 'import usermod; usermod.X'), '1')
  assert.equal(fs.existsSync(path.join(cwd, '__pycache__')), false)
})

test('bytecode planted on disk never runs: from a kernel without the sandbox, in this host or in another', async (t) => {
  await (await startKernel({ sandbox: 'off' })).shutdown()
  const dir = runnerDir()
  const marker = path.join(tmp, 'planted-pyc-ran')
  // The attack: a valid .pyc for every runner module in Python's own cache (matching the
  // source's size and mtime, exactly what Python would accept), and in the place a
  // bytecode cache of the runner's would be.
  const planter = await startKernel({ sandbox: 'off' })
  t.after(() => planter.shutdown())
  const r = await planter.execute(`
import glob, importlib.util, marshal, os
root = ${JSON.stringify(dir)}
payload = compile(${JSON.stringify(`open(${JSON.stringify(marker)}, 'w').write('pwned')`)}, 'x', 'exec')
n = 0
for src in glob.glob(os.path.join(root, '**', '*.py'), recursive=True):
    st = os.stat(src)
    pyc = importlib.util.cache_from_source(src)
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    open(pyc, 'wb').write(importlib._bootstrap_external._code_to_timestamp_pyc(payload, st.st_mtime, st.st_size))
    n += 1
cache = os.path.join(root, 'bytecode', 'any')
os.makedirs(cache, exist_ok=True)
for name in ('pykernel_runner', 'pykernel_runner.kernel', 'pykernel_prelude', 'pykernel_runner.magics'):
    open(os.path.join(cache, name + '.pyc'), 'wb').write(importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(payload))
open(os.path.join(cache, 'complete'), 'w').close()
n`)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.ok(Number(r.result['text/plain']) >= 5, 'every runner file got a planted .pyc')
  // This host: a kernel from source and one from the host's copy, sandboxed or not.
  for (const options of [{}, { sandbox: 'off' }]) {
    const later = await kernelWithHostBytecode(options)
    await value(later, '%pwd')
    await later.shutdown()
  }
  // Another host process, whose first kernel compiles the runner itself.
  const script = `const { Kernel } = require(${JSON.stringify(path.resolve(__dirname, '..', '..'))})
Kernel.start({ interpreter: ${JSON.stringify(python ?? null)} || undefined }).then(async (k) => {
  const r = await k.execute('%pwd')
  console.log(r.status)
  await k.shutdown()
})`
  const out = await new Promise((resolve) => execFile(process.execPath, ['-e', script], { env: { ...process.env, TMPDIR: tmp }, timeout: 30_000 }, (err, stdout, stderr) => resolve({ err, stdout, stderr })))
  assert.equal(out.err, null, out.stderr)
  assert.equal(out.stdout.trim(), 'ok')
  assert.equal(fs.existsSync(marker), false, 'no planted bytecode ran')
})

test('the host\'s copy cannot be changed from inside a kernel', async (t) => {
  const kernel = await kernelWithHostBytecode({ sandbox: 'off' })
  t.after(() => kernel.shutdown())
  // Without the sandbox a cell can reach the host's descriptors through /proc: the
  // memfd is sealed against writes, resizing and writable mappings.
  const r = await kernel.execute(`
import errno, mmap, os
out = []
for fd in os.listdir('/proc/${process.pid}/fd'):
    link = f'/proc/${process.pid}/fd/{fd}'
    try:
        target = os.readlink(link)
    except OSError:
        continue
    if 'pykernel-bytecode' not in target:
        continue
    f = os.open(link, os.O_RDWR)
    for what, act in (('write', lambda: os.pwrite(f, b'x', 0)), ('truncate', lambda: os.ftruncate(f, 0)),
                      ('map', lambda: mmap.mmap(f, 16, mmap.MAP_SHARED, mmap.PROT_WRITE))):
        try:
            act()
            out.append(what + ' done')
        except OSError as e:
            out.append(what + ' ' + errno.errorcode[e.errno])
print(out)`)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(r.stdout.trim(), "['write EPERM', 'truncate EPERM', 'map EPERM']")
})
