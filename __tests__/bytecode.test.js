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

test('PYTHONDONTWRITEBYTECODE=1 keeps the runner cached and is still in force for the user', async (t) => {
  const kernel = await startKernel({ env: { PYTHONDONTWRITEBYTECODE: '1' } })
  t.after(() => kernel.shutdown())
  assert.equal(await value(kernel, 'import sys; sys.dont_write_bytecode'), 'True')
  const base = fs.readdirSync(tmp).find((name) => name.startsWith('pykernel-'))
  assert.ok(base, `no runner directory in ${tmp}`)
  const [dir] = fs.readdirSync(path.join(tmp, base))
  const cached = fs.readdirSync(path.join(tmp, base, dir, '__pycache__')).sort()
  assert.ok(cached.some((f) => f.startsWith('prelude.')), cached.join(', '))
  // Every module of the runner package, not only those a first cell happens to need.
  const pkg = path.join(tmp, base, dir, 'pykernel_runner')
  const pkgCached = fs.readdirSync(path.join(pkg, '__pycache__'))
  for (const module of fs.readdirSync(pkg).filter((f) => f.endsWith('.py'))) {
    const stem = module.slice(0, -'.py'.length)
    assert.ok(pkgCached.some((f) => f.startsWith(`${stem}.`)), `${module} not cached: ${pkgCached.join(', ')}`)
  }
  // The user's own modules are not cached.
  await value(kernel, `open(${JSON.stringify(path.join(tmp, 'usermod.py'))}, 'w').write('X = 1\\n')`)
  await value(kernel, `import sys; sys.path.insert(0, ${JSON.stringify(tmp)}); import usermod; usermod.X`)
  assert.equal(fs.existsSync(path.join(tmp, '__pycache__')), false)
})
