'use strict'
// The runner's own bytecode is cached even where the environment turns bytecode off:
// without the cache every kernel start compiles the runner and the prelude again.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { tempDir } = require('./helpers/kernel')

// A fresh runner directory, so its cache can only come from this test's kernel.
const tmp = tempDir()
process.env.TMPDIR = tmp
const { startKernel, value } = require('./helpers/kernel')

test('PYTHONDONTWRITEBYTECODE=1: the runner still loads from its bytecode cache, and the setting holds for the user', async (t) => {
  const kernel = await startKernel({ env: { PYTHONDONTWRITEBYTECODE: '1' } })
  t.after(() => kernel.shutdown())
  assert.equal(await value(kernel, 'import sys; sys.dont_write_bytecode'), 'True')
  const base = fs.readdirSync(tmp).find((name) => name.startsWith('pykernel-'))
  assert.ok(base, `no runner directory in ${tmp}`)
  const [dir] = fs.readdirSync(path.join(tmp, base))
  // One cache per interpreter, built by the compile step, holding every module of the
  // runner (not only those a first cell happens to need) and the prelude.
  const [key] = fs.readdirSync(path.join(tmp, base, dir, 'bytecode'))
  const cache = path.join(tmp, base, dir, 'bytecode', key)
  const cached = fs.readdirSync(cache)
  assert.ok(cached.includes('complete'), cached.join(', '))
  const pkg = path.join(tmp, base, dir, 'pykernel_runner')
  const modules = ['pykernel_prelude', 'pykernel_display', 'pykernel_magics', 'pykernel_pretty', 'pykernel_ipython', 'pykernel_runner']
  for (const file of fs.readdirSync(pkg).filter((f) => f.endsWith('.py') && f !== '__init__.py')) modules.push(`pykernel_runner.${file.slice(0, -3)}`)
  for (const module of modules) assert.ok(cached.includes(`${module}.pyc`), `${module} not cached: ${cached.join(', ')}`)
  // The runner's modules came from there: Python's own cache was never written or read.
  assert.equal(fs.existsSync(path.join(tmp, base, dir, '__pycache__')), false)
  assert.equal(fs.existsSync(path.join(pkg, '__pycache__')), false)
  assert.equal(await value(kernel, "import pykernel_runner.kernel as k; type(k.__loader__).__qualname__"), "'_runner_bytecode.<locals>.Loader'")
  // The user's own modules are not cached.
  await value(kernel, `open(${JSON.stringify(path.join(tmp, 'usermod.py'))}, 'w').write('X = 1\\n')`)
  await value(kernel, `import sys; sys.path.insert(0, ${JSON.stringify(tmp)}); import usermod; usermod.X`)
  assert.equal(fs.existsSync(path.join(tmp, '__pycache__')), false)
})

test('bytecode planted in __pycache__ beside the runner is never run, even with the sandbox off', async (t) => {
  const first = await startKernel({ sandbox: 'off' })
  await first.shutdown()
  const base = fs.readdirSync(tmp).find((name) => name.startsWith('pykernel-'))
  const [dir] = fs.readdirSync(path.join(tmp, base)).filter((d) => d !== 'bytecode')
  const marker = path.join(tmp, 'planted-pyc-ran')
  // A valid .pyc for every runner module, with matching source size and mtime, that
  // leaves a marker: exactly what Python's own cache would accept.
  const planted = await startKernel({ sandbox: 'off' })
  t.after(() => planted.shutdown())
  const r = await planted.execute(`
import glob, importlib.util, marshal, os, py_compile
root = ${JSON.stringify(path.join(tmp, base, dir))}
payload = compile(${JSON.stringify(`open(${JSON.stringify(marker)}, 'w').write('pwned')`)}, 'x', 'exec')
n = 0
for src in glob.glob(os.path.join(root, '**', '*.py'), recursive=True):
    st = os.stat(src)
    pyc = importlib.util.cache_from_source(src)
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    data = importlib._bootstrap_external._code_to_timestamp_pyc(payload, st.st_mtime, st.st_size)
    open(pyc, 'wb').write(data); n += 1
n`)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.ok(Number(r.result['text/plain']) >= 5, 'every runner file got a planted .pyc')
  const later = await startKernel({ sandbox: 'off' })
  t.after(() => later.shutdown())
  assert.equal(await value(later, '1+1'), '2')
  assert.equal(fs.existsSync(marker), false, 'no planted bytecode ran')
})

test('with the sandbox off, bytecode a cell rewrites in the cache is verified away before the next start', async (t) => {
  const first = await startKernel({ sandbox: 'off' })
  await value(first, '1+1')
  const base = fs.readdirSync(tmp).find((name) => name.startsWith('pykernel-'))
  const [dir] = fs.readdirSync(path.join(tmp, base)).filter((d) => d !== 'bytecode')
  const [key] = fs.readdirSync(path.join(tmp, base, dir, 'bytecode'))
  const cache = path.join(tmp, base, dir, 'bytecode', key)
  const marker = path.join(tmp, 'planted-cache-ran')
  // Without the sandbox a kernel can write the cache: the attack replaces every module's
  // bytecode with code that leaves a marker, in the format the runner reads.
  const r = await first.execute(`
import glob, marshal, importlib.util
payload = compile(${JSON.stringify(`open(${JSON.stringify(marker)}, 'w').write('pwned')`)}, 'x', 'exec')
n = 0
for pyc in glob.glob(${JSON.stringify(path.join(cache, '*.pyc'))}):
    open(pyc, 'wb').write(importlib.util.MAGIC_NUMBER + bytes(12) + marshal.dumps(payload)); n += 1
n`)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.ok(Number(r.result['text/plain']) >= 5, 'the cache was rewritten')
  await first.shutdown()
  const later = await startKernel({ sandbox: 'off' })
  t.after(() => later.shutdown())
  assert.equal(await value(later, '1+1'), '2')
  assert.equal(fs.existsSync(marker), false, 'the rewritten bytecode never ran')
})
