#!/usr/bin/env node
'use strict'
// `node scripts/install-check.js`: install the tarballs `npm run pack` wrote to `dist/` the
// way a user would, on a PATH with no Rust, and use the package from there:
//
// - `npm install dist/pykernel-<v>.tgz dist/pykernel-<platform>-<v>.tgz` into an empty
//   project (no build may run: `cargo`/`rustc` are not on PATH, and the main package has
//   no install scripts);
// - that install holds the two packages and nothing else (the library has no
//   dependency; the MCP SDK is an optional peer);
// - `npx pykernel mcp` without the SDK says, on one line, what to install and exits 2;
//   then, with the SDK installed beside it, an MCP session over stdio (initialize, the
//   tool list, a python call that prints 42) and a clean exit when stdin closes; and
//   the same through `npx -p pykernel -p @modelcontextprotocol/sdk pykernel mcp`, as an
//   MCP client's configuration starts it;
// - `npx pykernel exec "print(6*7)"` prints 42, `npx pykernel --version` the version,
//   `npx pykernel run script.py args` runs the script with its arguments;
// - the README's install example (the first ```js block of its "Install" section) runs
//   as written, as an ES module with top-level await, and prints 42;
// - `require('pykernel')` from CommonJS, and the example again under Bun;
// - the TypeScript types resolve for a consumer (`tsc --strict` on an import).
//
// Exits non-zero, naming the step, if any of it fails. CI runs it after `npm test`.
const { execFileSync, spawn, spawnSync } = require('node:child_process')
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

/** The packages an install put in `project`'s node_modules, nested ones too, by name. */
function installedPackages(project) {
  const names = []
  const walk = (dir) => {
    if (!fs.existsSync(dir)) return
    for (const entry of fs.readdirSync(dir)) {
      if (entry.startsWith('.')) continue
      if (entry.startsWith('@')) {
        for (const scoped of fs.readdirSync(path.join(dir, entry))) visit(path.join(dir, entry, scoped), `${entry}/${scoped}`)
      } else {
        visit(path.join(dir, entry), entry)
      }
    }
  }
  const visit = (dir, name) => {
    names.push(name)
    walk(path.join(dir, 'node_modules'))
  }
  walk(path.join(project, 'node_modules'))
  return names.sort()
}

/**
 * Drives `command args` as an MCP client does, over stdio in NDJSON JSON-RPC: initialize,
 * initialized, tools/list, a python call of `print(6*7)`; then closes its stdin. Resolves
 * `{ tools, text, code }`: the tools' names, the call's text, the exit code.
 */
function mcpSession(command, args, options) {
  return new Promise((resolve, reject) => {
    const server = spawn(command, args, { ...options, stdio: ['pipe', 'pipe', 'pipe'] })
    const timer = setTimeout(() => {
      server.kill('SIGKILL')
      reject(new Error(`no answer within 60 s; stderr: ${stderr}`))
    }, 60_000)
    let stderr = ''
    let buffered = ''
    const answers = new Map()
    const waiting = new Map()
    server.stderr.on('data', (data) => (stderr += data))
    server.stdout.on('data', (data) => {
      buffered += data
      let newline
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const message = JSON.parse(buffered.slice(0, newline))
        buffered = buffered.slice(newline + 1)
        if (message.id === undefined) continue
        answers.set(message.id, message)
        waiting.get(message.id)?.(message)
      }
    })
    const send = (message) => server.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`)
    const answer = (id) => (answers.has(id) ? Promise.resolve(answers.get(id)) : new Promise((r) => waiting.set(id, r)))
    const exited = new Promise((r) => server.on('exit', (code) => r(code)))
    server.on('error', reject)
    ;(async () => {
      send({ id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'install-check', version: '0' } } })
      const init = await answer(1)
      if (!init.result) throw new Error(`initialize failed: ${JSON.stringify(init)}`)
      send({ method: 'notifications/initialized' })
      send({ id: 2, method: 'tools/list' })
      const tools = (await answer(2)).result.tools.map((t) => t.name)
      send({ id: 3, method: 'tools/call', params: { name: 'python', arguments: { cells: [{ code: 'print(6*7)' }] } } })
      const call = await answer(3)
      const text = call.result ? call.result.content.filter((c) => c.type === 'text').map((c) => c.text).join('') : JSON.stringify(call)
      server.stdin.end()
      const code = await exited
      clearTimeout(timer)
      resolve({ tools, text, code, stderr })
    })().catch((error) => {
      clearTimeout(timer)
      server.kill('SIGKILL')
      reject(new Error(`${error.message}; stderr: ${stderr}`))
    })
  })
}

function expect(name, out, want) {
  if (!out.includes(want)) throw new Error(`${name}: expected output with ${JSON.stringify(want)}, got ${JSON.stringify(out)}`)
}

async function main() {
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

    step = 'library install: packages'
    const installed = installedPackages(project)
    const wanted = ['pykernel', `pykernel-${hostPlatform()}`]
    if (installed.join() !== wanted.join()) {
      const listed = installed.length > 12 ? `${installed.slice(0, 12).join(', ')}, ...` : installed.join(', ')
      throw new Error(`the library install holds ${installed.length} packages (${listed}); it must hold only ${wanted.join(' and ')}`)
    }
    console.log(`ok   library install: ${installed.length} packages (${installed.join(', ')})`)

    step = 'npx pykernel mcp without the SDK'
    const sdk = '@modelcontextprotocol/sdk'
    const missing = spawnSync('npx', ['pykernel', 'mcp'], { ...options, input: '', encoding: 'utf8', timeout: 120_000 })
    const line = `pykernel mcp needs the MCP SDK: npm install ${sdk} (through npx: npx -p pykernel -p ${sdk} pykernel mcp)\n`
    if (missing.status !== 2 || missing.stderr !== line || missing.stdout !== '') {
      throw new Error(`expected exit 2 and ${JSON.stringify(line)} on stderr alone, got ${missing.status}, stderr ${JSON.stringify(missing.stderr)}, stdout ${JSON.stringify(missing.stdout)}`)
    }
    console.log(`ok   ${step}: exit 2, ${line.trim()}`)


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

    // Last, so every step above ran against the library alone.
    run('npm install the MCP SDK', 'npm', ['install', '--no-audit', '--no-fund', `${sdk}@${pkg.peerDependencies[sdk]}`], options)
    step = 'npx pykernel mcp (an MCP session over stdio)'
    const session = await mcpSession('npx', ['pykernel', 'mcp'], options)
    if (session.tools.join() !== 'python,reset_session,list_sessions') throw new Error(`tools: ${session.tools.join(', ')}`)
    if (session.text !== '42\n') throw new Error(`the python call printed ${JSON.stringify(session.text)}, not 42`)
    if (session.code !== 0) throw new Error(`exited ${session.code} when stdin closed; stderr: ${session.stderr}`)
    console.log(`ok   ${step}: tools ${session.tools.join(', ')}; print(6*7) gave 42; exit 0 when stdin closed`)

    // As an MCP client's configuration runs it: npx fetching both packages, from an
    // empty directory (a fresh npx cache, so nothing installed before is reused).
    step = 'npx -p pykernel -p the SDK pykernel mcp --cwd <dir>'
    const elsewhere = path.join(project, '..', `${path.basename(project)}-npx`)
    fs.mkdirSync(elsewhere)
    try {
      const npxArgs = ['-y', '-p', main, '-p', platform, '-p', `${sdk}@${pkg.peerDependencies[sdk]}`, 'pykernel', 'mcp', '--cwd', elsewhere]
      const npx = await mcpSession('npx', npxArgs, { cwd: elsewhere, env: { ...env, npm_config_cache: path.join(elsewhere, '.npm') } })
      if (npx.text !== '42\n' || npx.code !== 0) throw new Error(`printed ${JSON.stringify(npx.text)}, exited ${npx.code}; stderr: ${npx.stderr}`)
      console.log(`ok   ${step}: print(6*7) gave 42; exit 0 when stdin closed`)
    } finally {
      fs.rmSync(elsewhere, { recursive: true, force: true })
    }
  } catch (error) {
    console.error(`FAIL ${step}: ${String(error.stderr || error.message).trim()}`)
    process.exitCode = 1
  } finally {
    fs.rmSync(project, { recursive: true, force: true })
  }
}

main()
