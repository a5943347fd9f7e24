'use strict'
// examples/agent-tool.ts as a user builds it: compiled by tsc in strict mode against the
// package as installed (`pykernel` and `pykernel/tool` through the exports map), then run.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync, spawnSync } = require('node:child_process')
const { python } = require('../helpers/kernel')

const root = path.resolve(__dirname, '..', '..')

test('examples/agent-tool.ts type-checks strictly, runs, and its tool loop reads sanitized results', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-example-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(root, path.join(dir, 'node_modules', 'pykernel'))
  fs.copyFileSync(path.join(root, 'examples', 'agent-tool.ts'), path.join(dir, 'agent-tool.ts'))
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  const args = [tsc, '--strict', '--exactOptionalPropertyTypes', '--target', 'es2022', '--module', 'nodenext',
    '--moduleResolution', 'nodenext', '--types', 'node', '--typeRoots', path.join(root, 'node_modules', '@types'),
    '--skipLibCheck', 'false', '--outDir', path.join(dir, 'out'), path.join(dir, 'agent-tool.ts')]
  try {
    execFileSync(process.execPath, args, { cwd: dir, encoding: 'utf8', stdio: 'pipe' })
  } catch (error) {
    assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`)
  }
  const run = spawnSync(process.execPath, [path.join(dir, 'out', 'agent-tool.js')], {
    cwd: dir, encoding: 'utf8', timeout: 60_000, env: { ...process.env, ...(python ? { PYKERNEL_PYTHON: python } : {}) },
  })
  assert.equal(run.status, 0, run.stderr)
  const lines = run.stdout.trim().split('\n')
  assert.equal(lines[0], 'ok: (no output)')
  assert.equal(lines[1], 'ok: mean 3.875')
  assert.equal(lines[2], '[1, 1, 2, 3, 4, 5, 6, 9]')
  assert.match(run.stdout, /^error: Traceback/m)
  assert.match(run.stdout, /IndexError: list index out of range/)
})
