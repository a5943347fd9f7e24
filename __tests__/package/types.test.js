'use strict'
// The TypeScript surface matches the runtime: a strict program against index.d.ts compiles,
// the error codes the addon can produce are exactly the ErrorCode union, and what the
// types forbid also fails at run time.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { addon } = require('../helpers/kernel')

const root = path.resolve(__dirname, '..', '..')

test('a strict-mode host program type-checks against index.d.ts', () => {
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  const args = [tsc, '--noEmit', '--strict', '--exactOptionalPropertyTypes', '--target', 'es2022',
    '--module', 'commonjs', '--moduleResolution', 'node', '--types', 'node', '--skipLibCheck', 'false',
    path.join(__dirname, 'types', 'usage.ts')]
  try {
    execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8', stdio: 'pipe' })
  } catch (error) {
    assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`)
  }
})

test('the framework adapters\' declarations type-check strictly and stand alone, needing neither framework', (t) => {
  // A host's program through the exports map; the adapters' declarations import only the
  // package's own types (checked after), so a host without `ai` or `@openai/agents` (or
  // with another version of either) compiles them the same.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-adapter-types-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(root, path.join(dir, 'node_modules', 'pykernel'))
  fs.copyFileSync(path.join(__dirname, 'types', 'adapters.ts'), path.join(dir, 'adapters.ts'))
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  const args = [tsc, '--noEmit', '--strict', '--exactOptionalPropertyTypes', '--target', 'es2022', '--module', 'nodenext',
    '--moduleResolution', 'nodenext', '--types', 'node', '--typeRoots', path.join(root, 'node_modules', '@types'),
    '--skipLibCheck', 'false', path.join(dir, 'adapters.ts')]
  try {
    execFileSync(process.execPath, args, { cwd: dir, encoding: 'utf8', stdio: 'pipe' })
  } catch (error) {
    assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`)
  }
  for (const file of ['ai-sdk.d.ts', 'openai-agents.d.ts']) {
    const imports = [...fs.readFileSync(path.join(root, file), 'utf8').matchAll(/from '([^']+)'/g)].map((m) => m[1])
    assert.deepEqual(imports.filter((name) => !name.startsWith('./')), [], `${file} imports only the package's own types`)
  }
})

test("the adapters' objects are what the frameworks' own types take (ai's Tool, @openai/agents' tool())", () => {
  // Against the devDependencies' declarations (their own files unchecked: skipLibCheck);
  // `pykernel/...` resolves to this package by its own name.
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  const args = [tsc, '--noEmit', '--strict', '--exactOptionalPropertyTypes', '--target', 'es2022', '--module', 'nodenext',
    '--moduleResolution', 'nodenext', '--types', 'node', '--skipLibCheck', 'true', path.join(__dirname, 'types', 'adapters-frameworks.ts')]
  try {
    execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8', stdio: 'pipe' })
  } catch (error) {
    assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`)
  }
})

/** The `ERR_*` codes named in the addon's sources (Rust and the JavaScript entry). */
function codesInSources() {
  const codes = new Set()
  const visit = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const file = path.join(dir, entry.name)
      if (entry.isDirectory()) visit(file)
      else if (entry.name.endsWith('.rs')) for (const m of fs.readFileSync(file, 'utf8').matchAll(/"(ERR_[A-Z_]+)"/g)) codes.add(m[1])
    }
  }
  visit(path.join(root, 'src'))
  for (const m of fs.readFileSync(path.join(root, 'main.js'), 'utf8').matchAll(/'(ERR_[A-Z_]+)'/g)) codes.add(m[1])
  return [...codes].sort()
}

test('ErrorCode lists exactly the codes the addon produces', () => {
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const union = dts.match(/export type ErrorCode =([^]*?)\n\n/)[1]
  const declared = [...union.matchAll(/'(ERR_[A-Z_]+)'/g)].map((m) => m[1]).sort()
  assert.deepEqual(declared, codesInSources())
})

test('what the types forbid fails at run time with a code, and async entry points reject', async () => {
  assert.throws(() => new addon.Kernel(), { code: 'ERR_INVALID_ARG', message: /Kernel\.start/ })
  const kernel = await addon.Kernel.start()
  try {
    let pending
    assert.doesNotThrow(() => { pending = kernel.execute(42) }, 'execute(42) returns a rejected promise')
    await assert.rejects(pending, { code: 'ERR_INVALID_ARG', message: 'invalid argument `code`: expected a string, got a number' })
    await assert.rejects(kernel.evaluate('print(1)'), { code: 'ERR_INVALID_ARG' })
    assert.ok(kernel instanceof addon.Kernel)
    assert.equal((await kernel.execute('6*7')).result['text/plain'], '42')
  } finally {
    await kernel.shutdown()
  }
  await assert.rejects(addon.Kernel.start({ cwd: 42 }), { code: 'ERR_INVALID_ARG', message: /^invalid argument `cwd`: expected a string/ })
  assert.throws(() => new addon.KernelPool({ maxSessions: true }), { code: 'ERR_INVALID_ARG', message: /^invalid argument `maxSessions`: expected a number or a string/ })
  assert.throws(() => new addon.KernelPool({ maxSessions: 'x' }), { code: 'ERR_INVALID_ARG', message: /^invalid argument `maxSessions`: must be an integer from 1 to 1024 or 'unlimited', got 'x'/ })
  assert.throws(() => addon.clampLine(5), { code: 'ERR_INVALID_ARG' })
  assert.deepEqual(addon.filterEnv({ PATH: '/bin', HOME: undefined }), { PATH: '/bin' })
})
