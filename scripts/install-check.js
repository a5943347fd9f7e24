#!/usr/bin/env node
'use strict'
// `node scripts/install-check.js`: install the tarballs `npm run pack` wrote to `dist/` the
// way a user would, on a PATH with no Rust, and use the package from there:
//
// - `npm install dist/pykernel-<v>.tgz dist/pykernel-<platform>-<v>.tgz` into an empty
//   project (no build may run: `cargo`/`rustc` are not on PATH, and the main package has
//   no install scripts);
// - `npx pykernel exec "print(6*7)"` prints 42, `npx pykernel --version` the version,
//   `npx pykernel run script.py args` runs the script with its arguments;
// - the README's install example (the first ```js block of its "Install" section) runs
//   as written, as an ES module with top-level await, and prints 42;
// - `require('pykernel')` from CommonJS, and the example again under Bun;
// - the TypeScript types resolve for a consumer (`tsc --strict` on an import).
//
// Exits non-zero, naming the step, if any of it fails. CI runs it after `npm test`.
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
const dist = path.join(root, 'dist')
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))

function hostPlatform() {
  if (process.platform !== 'linux') return `${process.platform}-${process.arch}`
  const glibc = process.report?.getReport?.()?.header?.glibcVersionRuntime
  return `linux-${process.arch}-${glibc ? 'gnu' : 'musl'}`
}

/** PATH without any directory that holds cargo or rustc. */
function pathWithoutRust() {
  return process.env.PATH.split(path.delimiter)
    .filter((dir) => !['cargo', 'rustc'].some((tool) => fs.existsSync(path.join(dir, tool))))
    .join(path.delimiter)
}

/** The README's install example: the first ```js block under `## Install`. */
function readmeExample() {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8')
  const section = readme.split(/^## /m).find((s) => s.startsWith('Install'))
  const block = section && section.match(/```js\n([\s\S]*?)```/)
  if (!block) throw new Error('README.md has no ```js block under "## Install"')
  return block[1]
}

let step = ''
function run(name, cmd, args, options) {
  step = name
  const out = execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000, ...options })
  console.log(`ok   ${name}${out.trim() ? `: ${out.trim().split('\n').slice(-1)[0]}` : ''}`)
  return out
}

function expect(name, out, want) {
  if (!out.includes(want)) throw new Error(`${name}: expected output with ${JSON.stringify(want)}, got ${JSON.stringify(out)}`)
}

function main() {
  const main = path.join(dist, `pykernel-${pkg.version}.tgz`)
  const platform = path.join(dist, `pykernel-${hostPlatform()}-${pkg.version}.tgz`)
  for (const file of [main, platform]) {
    if (!fs.existsSync(file)) throw new Error(`${path.relative(root, file)} is missing: run \`npm run pack\` first`)
  }
  const project = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-install-'))
  const env = { ...process.env, PATH: pathWithoutRust() }
  delete env.PYKERNEL_TEST_PYTHON
  const options = { cwd: project, env }
  try {
    fs.writeFileSync(path.join(project, 'package.json'), '{"name": "consumer", "version": "1.0.0", "private": true}\n')
    run('no Rust on PATH', 'sh', ['-c', 'if command -v cargo || command -v rustc; then exit 1; else echo none; fi'], options)
    run('npm install', 'npm', ['install', '--no-audit', '--no-fund', main, platform], options)
    if (fs.existsSync(path.join(project, 'node_modules', 'pykernel', 'target'))) throw new Error('the install built the addon')

    expect('npx pykernel exec', run('npx pykernel exec', 'npx', ['pykernel', 'exec', 'print(6*7)'], options), '42\n')
    expect('npx pykernel --version', run('npx pykernel --version', 'npx', ['pykernel', '--version'], options), `pykernel ${pkg.version}`)

    fs.writeFileSync(path.join(project, 'script.py'), 'import sys\nprint(sys.argv[1:], __name__)\n')
    expect('npx pykernel run', run('npx pykernel run', 'npx', ['pykernel', 'run', 'script.py', 'a', '--b'], options), "['a', '--b'] __main__")

    fs.writeFileSync(path.join(project, 'example.mjs'), readmeExample())
    expect('README example (ESM)', run('README example (ESM)', process.execPath, ['example.mjs'], options), '42')

    fs.writeFileSync(
      path.join(project, 'example.cjs'),
      "const { Kernel } = require('pykernel')\n" +
        "Kernel.start().then(async (k) => { const r = await k.execute('6*7'); console.log(r.result['text/plain']); await k.shutdown() })\n",
    )
    expect('require (CJS)', run('require (CJS)', process.execPath, ['example.cjs'], options), '42')

    const bun = path.join(root, 'node_modules', '.bin', 'bun')
    expect('README example (Bun)', run('README example (Bun)', bun, ['example.mjs'], options), '42')

    fs.writeFileSync(
      path.join(project, 'types.ts'),
      "import { Kernel, type ExecuteResult } from 'pykernel'\n" +
        'export async function f(): Promise<ExecuteResult> {\n' +
        '  const kernel = await Kernel.start({ startupTimeoutMs: 10_000 })\n' +
        "  return kernel.execute('1')\n" +
        '}\n',
    )
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
    run('types (tsc --strict)', process.execPath, [tsc, '--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--types', 'node', '--typeRoots', path.join(root, 'node_modules', '@types'), 'types.ts'], options)
  } catch (error) {
    console.error(`FAIL ${step}: ${String(error.stderr || error.message).trim()}`)
    process.exitCode = 1
  } finally {
    fs.rmSync(project, { recursive: true, force: true })
  }
}

main()
