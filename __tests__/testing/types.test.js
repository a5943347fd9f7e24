'use strict'
// pykernel/testing through the exports map, as a host's test suite imports it: its
// declarations type-check strictly, and the program they describe runs.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const root = path.resolve(__dirname, '..', '..')

test("'pykernel/testing' by name: a strict TypeScript test compiles against testing.d.ts and runs", (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-testing-types-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(root, path.join(dir, 'node_modules', 'pykernel'))
  fs.copyFileSync(path.join(__dirname, 'types', 'usage.ts'), path.join(dir, 'usage.ts'))
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  // The package's declarations are checked (skipLibCheck false) against the DOM's lib
  // instead of @types/node, whose checking would take most of the test's time: they
  // need nothing of Node's but AbortSignal and console, which the DOM lib declares too.
  const args = [tsc, '--strict', '--exactOptionalPropertyTypes', '--target', 'es2022', '--lib', 'es2022,dom',
    '--module', 'nodenext', '--moduleResolution', 'nodenext', '--typeRoots', path.join(dir, 'no-types'),
    '--skipDefaultLibCheck', '--skipLibCheck', 'false', '--outDir', path.join(dir, 'out'), path.join(dir, 'usage.ts')]
  try {
    execFileSync(process.execPath, args, { cwd: dir, encoding: 'utf8', stdio: 'pipe' })
  } catch (error) {
    assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`)
  }
  const out = execFileSync(process.execPath, [path.join(dir, 'out', 'usage.js')], { cwd: dir, encoding: 'utf8', timeout: 30_000 })
  assert.equal(out.trim(), 'out\nshown\nfound null true exit')
  // And from an ES module.
  fs.writeFileSync(path.join(dir, 'esm.mjs'), "import { createStandInKernel, latch, pythonError } from 'pykernel/testing'; console.log(typeof createStandInKernel, typeof latch, typeof pythonError)\n")
  assert.equal(execFileSync(process.execPath, [path.join(dir, 'esm.mjs')], { cwd: dir, encoding: 'utf8' }).trim(), 'function function function')
})
