'use strict'
// PoolOptions.preload: spares import modules ahead, so the session that claims one finds
// them in sys.modules; nothing leaks into its namespace or its output, the imports run in
// the spare's sandbox, a module that fails is skipped, and %pip still replaces them.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { KernelPool } = require('../..')
const { waitFor } = require('../helpers/kernel')
const { pipDistribution } = require('../helpers/pip-distribution')

const python = process.env.PYKERNEL_TEST_PYTHON || undefined

function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix))
}

/** A pool whose one spare has finished preloading. */
async function poolWithSpare(t, options) {
  const pool = new KernelPool({ prewarm: 1, ...options, kernel: { interpreter: python, ...options.kernel } })
  t.after(() => pool.disposeAll())
  assert.ok(await waitFor(() => pool.spares.length === 1, { timeoutMs: 60000 }), 'no spare became ready')
  return { pool, spare: pool.spares[0] }
}

async function cell(pool, code, extra = {}) {
  const r = await pool.execute({ sessionId: 's', cells: [{ code }], ...extra })
  assert.equal(r.exitCode, 0, r.output)
  return r
}

const LOADED_PY = (names) => `import sys\nprint(${JSON.stringify(names)}, [m in sys.modules for m in ${JSON.stringify(names)}])`

test('a claimed spare has the preloaded modules in sys.modules, and no names from them', async (t) => {
  const modules = ['decimal', 'fractions', 'xml.dom.minidom']
  const { pool, spare } = await poolWithSpare(t, { preload: modules })
  const r = await cell(pool, `${LOADED_PY(modules)}\nprint(sorted(n for n in ('decimal', 'fractions', 'xml', 'minidom') if n in globals()))`)
  assert.equal(pool.sessions[0].pid, spare, 'the session claimed the spare')
  assert.match(r.output, /^\['decimal', 'fractions', 'xml\.dom\.minidom'\] \[True, True, True\]\n\[\]\n/m)
  const used = await cell(pool, "import decimal, fractions\nprint(decimal.Decimal('1.10') + 1, fractions.Fraction(1, 3) * 3)")
  assert.match(used.output, /2\.10 1\n/)

  // Without preload the runner imports none of them: the test above cannot pass by chance.
  const plain = await poolWithSpare(t, {})
  const none = await cell(plain.pool, LOADED_PY(modules))
  assert.match(none.output, /\[False, False, False\]/)
})

test('the data stack preloads; a module that fails is skipped; what imports print is not the session\'s', async (t) => {
  const cwd = tempDir('pk-preload-')
  fs.writeFileSync(path.join(cwd, 'noisy.py'), 'print("NOISY AT IMPORT")\nimport sys\nprint("TO STDERR", file=sys.stderr)\n')
  const modules = ['pandas', 'matplotlib.pyplot', 'no_such_module_pk', 'noisy']
  const { pool } = await poolWithSpare(t, { preload: modules, kernel: { cwd } })
  const r = await cell(pool, `${LOADED_PY(modules)}\nimport pandas as pd\npd.DataFrame({'a': [1, 2]}).a.sum()`)
  assert.match(r.output, /\[True, True, False, True\]/)
  assert.match(r.output, /\n(np\.int64\()?3\)?\n?$/)
  assert.doesNotMatch(r.output, /NOISY|TO STDERR/)
  const later = await cell(pool, 'print("next")')
  assert.doesNotMatch(later.output, /NOISY|TO STDERR/)
})

test('preloaded code runs in the spare\'s sandbox: it cannot read the host', async (t) => {
  const cwd = tempDir('pk-preload-probe-')
  // The attack: code imported ahead tries to read the host's environment.
  fs.writeFileSync(
    path.join(cwd, 'probe.py'),
    `try:\n    RESULT = open("/proc/${process.pid}/environ", "rb").read()[:20]\nexcept OSError as exc:\n    RESULT = "blocked: " + type(exc).__name__\n`,
  )
  const { pool } = await poolWithSpare(t, { preload: ['probe'], kernel: { cwd } })
  const r = await cell(pool, "import sys\nprint('probe' in sys.modules, sys.modules['probe'].RESULT)")
  assert.match(r.output, /^True blocked: \w+Error\n/)
})

test('%pip upgrade of a preloaded package takes effect', async (t) => {
  const dist = pipDistribution(t, { name: 'pkpre-dist', module: 'pkpre', prefix: 'pk-preload-pip-' })
  dist.install('1')
  const { pool } = await poolWithSpare(t, { preload: ['pkpre'], kernel: { cwd: dist.dir } })
  const before = await cell(pool, "import sys\nsys.modules['pkpre'].__version__")
  assert.match(before.output, /'1'/)
  const upgrade = await cell(pool, dist.pipLine('2', { quiet: true }), { timeoutSeconds: 120 })
  assert.match(upgrade.output, /pkpre/)
  const after = await cell(pool, 'import pkpre\npkpre.__version__')
  assert.match(after.output, /'2'/)
})

test('preload names are checked', () => {
  for (const bad of [['a b'], ['1abc'], ['os..path'], [''], Array.from({ length: 65 }, (_, i) => `m${i}`)]) {
    assert.throws(() => new KernelPool({ preload: bad }), { code: 'ERR_INVALID_ARG', message: /preload/ })
  }
})
