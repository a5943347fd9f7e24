'use strict'
// The package as npm gives it to users: what the main tarball holds and declares, named
// exports from ESM, and the error when no addon fits the machine. (Installing the
// tarballs on a PATH without Rust is `scripts/install-check.js`, run by CI.)
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync, spawnSync } = require('node:child_process')

const root = path.resolve(__dirname, '..', '..')
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))

test('every export of the binding is a named export of the package, from CommonJS and ESM', () => {
  const names = Object.keys(require('../../index.js')).filter((n) => !n.startsWith('__'))
  const cjs = require('../..')
  for (const name of names) assert.equal(typeof cjs[name], 'function', `require('pykernel').${name}`)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-esm-'))
  try {
    const file = path.join(dir, 'names.mjs')
    const url = new URL(`file://${path.join(root, 'main.js')}`).href
    fs.writeFileSync(file, `import { ${names.join(', ')} } from '${url}'\nconsole.log([${names.join(', ')}].map((x) => typeof x).join(' '))\n`)
    const out = execFileSync(process.execPath, [file], { encoding: 'utf8' })
    assert.equal(out.trim(), names.map(() => 'function').join(' '))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test("the exports map: 'pykernel', 'pykernel/tool', the adapters and 'pykernel/package.json' by name, from CommonJS and ESM", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-exports-'))
  try {
    fs.mkdirSync(path.join(dir, 'node_modules'))
    fs.symlinkSync(root, path.join(dir, 'node_modules', 'pykernel'))
    fs.writeFileSync(path.join(dir, 'cjs.js'), "const { Kernel } = require('pykernel'); const tool = require('pykernel/tool'); const { version } = require('pykernel/package.json'); console.log(typeof Kernel, tool.name, typeof tool.handle, version)\n")
    fs.writeFileSync(path.join(dir, 'esm.mjs'), "import { Kernel } from 'pykernel'; import { name, handle, schema } from 'pykernel/tool'; console.log(typeof Kernel, name, typeof handle, schema.type)\n")
    const run = (file) => execFileSync(process.execPath, [path.join(dir, file)], { cwd: dir, encoding: 'utf8' }).trim()
    assert.equal(run('cjs.js'), `function python function ${pkg.version}`)
    assert.equal(run('esm.mjs'), 'function python function object')
    // The adapters by name; and, copied beside tool.js alone where no node_modules is in
    // reach, they still load: they need neither framework.
    fs.writeFileSync(path.join(dir, 'adapters.mjs'), "import { pythonTool as forAiSdk, inputSchema } from 'pykernel/ai-sdk'; import { pythonTool as forAgents, parameters } from 'pykernel/openai-agents'; console.log(typeof forAiSdk, typeof inputSchema.jsonSchema, typeof forAgents, parameters.additionalProperties)\n")
    fs.writeFileSync(path.join(dir, 'adapters.js'), "const a = require('pykernel/ai-sdk'); const o = require('pykernel/openai-agents'); console.log(a.name, o.name)\n")
    assert.equal(run('adapters.mjs'), 'function object function false')
    assert.equal(run('adapters.js'), 'python python')
    const alone = path.join(dir, 'alone')
    fs.mkdirSync(alone)
    for (const file of ['tool.js', 'ai-sdk.js', 'openai-agents.js']) fs.copyFileSync(path.join(root, file), path.join(alone, file))
    const probe = "const a = require('./ai-sdk.js'); const o = require('./openai-agents.js'); console.log(typeof a.pythonTool, typeof o.pythonTool)"
    assert.equal(execFileSync(process.execPath, ['-e', probe], { cwd: alone, encoding: 'utf8' }).trim(), 'function function')
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('the library needs no dependency: the MCP SDK is an optional peer, loaded by `pykernel mcp` alone', () => {
  assert.equal(pkg.dependencies, undefined, 'a user who wants Kernel installs pykernel and its platform package only')
  assert.equal(pkg.peerDependencies['@modelcontextprotocol/sdk'], pkg.devDependencies['@modelcontextprotocol/sdk'])
  assert.deepEqual(pkg.peerDependenciesMeta, { '@modelcontextprotocol/sdk': { optional: true } })
  // Everything the package exports, and the CLI's module, load without touching it.
  const probe = `require('./main.js'); require('./tool.js'); require('./ai-sdk.js'); require('./openai-agents.js'); require('./bin/mcp.js')
console.log(Object.keys(require.cache).filter((f) => f.includes('@modelcontextprotocol')).length)`
  assert.equal(execFileSync(process.execPath, ['-e', probe], { cwd: root, encoding: 'utf8' }).trim(), '0')
})

test('without an addon for the machine, loading says which package is missing and what to do', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-nobinding-'))
  try {
    fs.copyFileSync(path.join(root, 'main.js'), path.join(dir, 'main.js'))
    fs.copyFileSync(path.join(root, 'index.js'), path.join(dir, 'index.js'))
    const probe = `try { require(${JSON.stringify(path.join(dir, 'main.js'))}) } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message, cause: String(e.cause) })) }`
    const { stdout } = spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8' })
    const error = JSON.parse(stdout)
    assert.equal(error.code, 'ERR_NO_BINDING')
    assert.match(error.message, /no native addon for this machine \(linux-x64-gnu\)/)
    assert.match(error.message, /`pykernel-linux-x64-gnu` is not installed/)
    assert.match(error.message, /npm install pykernel/)
    assert.match(error.message, /npm run build/)
    assert.match(error.cause, /Cannot find native binding/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('npm run pack: the main package ships what users need, no addon, no scripts, and names every platform package', () => {
  const dist = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-dist-'))
  try {
    execFileSync(process.execPath, [path.join(root, 'scripts', 'pack.js')], { env: { ...process.env, PYKERNEL_DIST: dist }, encoding: 'utf8' })
    const tarball = path.join(dist, `pykernel-${pkg.version}.tgz`)
    const files = execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' }).trim().split('\n').map((f) => f.replace(/^package\//, ''))
    for (const want of ['main.js', 'index.js', 'index.d.ts', 'types.d.ts', 'tool.js', 'tool.d.ts', 'ai-sdk.js', 'ai-sdk.d.ts', 'openai-agents.js', 'openai-agents.d.ts', 'bin/pykernel.js', 'bin/mcp.js', 'runner/runner.py', 'runner/pykernel_runner/kernel.py', 'README.md', 'LICENSE', 'CHANGELOG.md', 'package.json']) {
      assert.ok(files.includes(want), `${want} is in the tarball (it holds: ${files.join(', ')})`)
    }
    assert.deepEqual(files.filter((f) => f.endsWith('.node') || f.includes('__pycache__') || f.startsWith('src/')), [])
    const published = JSON.parse(execFileSync('tar', ['xzf', tarball, '-O', 'package/package.json'], { encoding: 'utf8' }))
    assert.equal(published.scripts, undefined, 'no install-time scripts: nothing compiles on install')
    assert.equal(published.devDependencies, undefined)
    assert.equal(published.dependencies, undefined)
    assert.deepEqual(published.peerDependenciesMeta, { '@modelcontextprotocol/sdk': { optional: true } })
    const platforms = ['linux-x64-gnu', 'linux-arm64-gnu', 'linux-x64-musl', 'linux-arm64-musl', 'darwin-arm64', 'darwin-x64']
    assert.deepEqual(
      published.optionalDependencies,
      Object.fromEntries(platforms.map((p) => [`pykernel-${p}`, pkg.version]).sort(([a], [b]) => a.localeCompare(b))),
    )
    for (const platform of platforms) {
      const sub = JSON.parse(fs.readFileSync(path.join(root, 'npm', platform, 'package.json'), 'utf8'))
      const [os_, cpu, libc] = platform.split('-')
      assert.equal(sub.name, `pykernel-${platform}`)
      assert.equal(sub.version, pkg.version)
      assert.deepEqual([sub.os, sub.cpu, sub.libc], [[os_], [cpu], libc ? [libc === 'gnu' ? 'glibc' : 'musl'] : undefined])
      assert.equal(sub.main, `pykernel.${platform}.node`)
    }
  } finally {
    fs.rmSync(dist, { recursive: true, force: true })
  }
})

test('the repository itself never builds on install', () => {
  for (const hook of ['prepare', 'install', 'preinstall', 'postinstall']) assert.equal(pkg.scripts[hook], undefined, hook)
})
