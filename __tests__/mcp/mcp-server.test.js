'use strict'
// `pykernel mcp` as a client meets it, through the SDK's Client: each tool's title and
// annotations, the short description in the server's own terms, the long guide as a
// resource and a prompt; and the server's options honoured: `--cwd` (where the kernels
// run and their Python is found), `--writable`, `--timeout`. Without the SDK installed,
// `pykernel mcp` says what to install and exits 2.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync, spawnSync } = require('node:child_process')
const { Client } = require('@modelcontextprotocol/sdk/client/index.js')
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js')
const { python, tempDir, viewedDir } = require('../helpers/kernel')
const tool = require('../../tool.js')

const root = path.join(__dirname, '..', '..')
const cli = path.join(root, 'bin', 'pykernel.js')

/** A connected client of a fresh `pykernel mcp` started with `args` (and `--python` of
 *  the tests unless `discover`), closed (and the server gone) after `t`. */
async function connect(t, args = [], { cwd, env, discover = false } = {}) {
  const argv = [cli, 'mcp', ...(python && !discover ? ['--python', python] : []), ...args]
  const transport = new StdioClientTransport({ command: process.execPath, args: argv, cwd, env, stderr: 'pipe' })
  const client = new Client({ name: 'pykernel-test', version: '0' })
  await client.connect(transport)
  t.after(() => client.close())
  return client
}

const run = (client, args) => client.callTool({ name: 'python', arguments: args })
const textOf = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('')

test('each tool has a title and annotations that say what it may do', async (t) => {
  const client = await connect(t)
  const { tools } = await client.listTools()
  const byName = Object.fromEntries(tools.map((x) => [x.name, x]))
  assert.equal(byName.python.title, 'Run Python')
  // It runs code: it may change or delete files, and the kernels have the host's network.
  assert.deepEqual(byName.python.annotations, { title: 'Run Python', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true })
  assert.equal(byName.reset_session.title, 'Reset a Python session')
  assert.deepEqual(byName.reset_session.annotations, { title: 'Reset a Python session', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false })
  assert.equal(byName.list_sessions.title, 'List Python sessions')
  assert.deepEqual(byName.list_sessions.annotations, { title: 'List Python sessions', readOnlyHint: true, openWorldHint: false })
})

test("the python tool's description is short, in the server's terms, and names the guide", async (t) => {
  const project = tempDir('pykernel-mcp-project-')
  t.after(() => fs.rmSync(project, { recursive: true, force: true }))
  const client = await connect(t, ['--cwd', project])
  const [python_] = (await client.listTools()).tools
  const { description } = python_
  // About 250 tokens at 4 characters a token: the client sends it with every request.
  assert.ok(description.length <= 1000, `${description.length} characters`)
  assert.equal(description, tool.describe({ sandbox: description.match(/^Sandbox: (.*)$/m)[1], guide: description.match(/^Guide: (.*)$/m)[1] }))
  assert.match(description, /"timeout" seconds \(default 30\)/)
  assert.match(description, new RegExp(`^Sandbox: code writes only its working directory \\(${project}\\), TMPDIR; .*the network is the host's\\.$`, 'm'))
  assert.match(description, /^Guide: the resource pykernel:\/\/guide \(or the prompt "python_guide"\)/m)
})

test('the long guide is the resource pykernel://guide and the prompt python_guide', async (t) => {
  const client = await connect(t)
  const { resources } = await client.listResources()
  assert.deepEqual(resources.map((r) => [r.uri, r.mimeType]), [['pykernel://guide', 'text/plain']])
  const { contents } = await client.readResource({ uri: 'pykernel://guide' })
  assert.deepEqual(contents, [{ uri: 'pykernel://guide', mimeType: 'text/plain', text: tool.guide }])
  await assert.rejects(client.readResource({ uri: 'pykernel://nothing' }), (error) => {
    assert.equal(error.code, -32002)
    assert.match(error.message, /Unknown resource "pykernel:\/\/nothing": this server has pykernel:\/\/guide/)
    return true
  })

  const { prompts } = await client.listPrompts()
  assert.deepEqual(prompts.map((p) => [p.name, p.title]), [['python_guide', 'Guide to the python tool']])
  const prompt = await client.getPrompt({ name: 'python_guide' })
  assert.deepEqual(prompt.messages, [{ role: 'user', content: { type: 'text', text: tool.guide } }])
  await assert.rejects(client.getPrompt({ name: 'other' }), /Unknown prompt "other"/)
})

/** A project with its own `.venv` (a venv of the tests' Python, without pip: cheap). */
function projectWithVenv() {
  const project = fs.realpathSync(tempDir('pykernel-mcp-project-'))
  const base = execFileSync(python || 'python3', ['-c', 'import sys; print(sys._base_executable)'], { encoding: 'utf8' }).trim()
  execFileSync(base, ['-m', 'venv', '--without-pip', path.join(project, '.venv')])
  return project
}

test("--cwd: a server started in / runs its kernels in the project, with the project's .venv", async (t) => {
  const project = projectWithVenv()
  t.after(() => fs.rmSync(project, { recursive: true, force: true }))
  // As a desktop client starts it: in /, with no VIRTUAL_ENV or CONDA_PREFIX to find.
  const client = await connect(t, ['--cwd', project], { cwd: '/', env: { PATH: process.env.PATH, HOME: process.env.HOME }, discover: true })
  const r = await run(client, { cells: [{ code: 'import os, sys\nprint(sys.prefix)\nprint(os.getcwd())' }] })
  assert.equal(r.isError, false, textOf(r))
  assert.equal(textOf(r), `${path.join(project, '.venv')}\n${project}\n`)
  // A relative path is the project's.
  const wrote = await run(client, { cells: [{ code: 'write("out.txt", "here")' }] })
  assert.equal(wrote.isError, false, textOf(wrote))
  assert.equal(fs.readFileSync(path.join(project, 'out.txt'), 'utf8'), 'here')
})

test('--cwd that is no directory is a usage error; with --launcher it must be absolute (the far side\'s)', () => {
  const missing = spawnSync(process.execPath, [cli, 'mcp', '--cwd', '/no/such/dir'], { encoding: 'utf8', input: '' })
  assert.equal(missing.status, 2)
  assert.match(missing.stderr, /--cwd \/no\/such\/dir: no such directory/)
  const launched = spawnSync(process.execPath, [cli, 'mcp', '--cwd', 'relative/dir', '--launcher', 'env'], { encoding: 'utf8', input: '' })
  assert.equal(launched.status, 2)
  assert.match(launched.stderr, /--cwd with --launcher is the far side's directory: give it as an absolute path/)
  assert.equal(launched.stdout, '', 'nothing on the protocol stream')
})

test('--writable: the kernels write that directory too, and the description says so', async (t) => {
  const project = tempDir('pykernel-mcp-project-')
  const outside = viewedDir('pykernel-mcp-outside-')
  t.after(() => {
    fs.rmSync(project, { recursive: true, force: true })
    fs.rmSync(outside, { recursive: true, force: true })
  })
  const code = `open(${JSON.stringify(path.join(outside, 'x.txt'))}, "w").write("ok")`

  const confined = await connect(t, ['--cwd', project])
  assert.equal((await run(confined, { cells: [{ code }] })).isError, true, 'refused without --writable')
  assert.equal(fs.existsSync(path.join(outside, 'x.txt')), false)

  const allowed = await connect(t, ['--cwd', project, '--writable', outside])
  const r = await run(allowed, { cells: [{ code }] })
  assert.equal(r.isError, false, textOf(r))
  assert.equal(fs.readFileSync(path.join(outside, 'x.txt'), 'utf8'), 'ok')
  const [{ description }] = (await allowed.listTools()).tools
  assert.match(description, new RegExp(`^Sandbox: code writes only its working directory \\(${project}\\), TMPDIR and ${outside};`, 'm'))
})

test('--timeout: the default of a call that gives none, in the description too; a call may give its own', async (t) => {
  const client = await connect(t, ['--timeout', '1'])
  const [{ description }] = (await client.listTools()).tools
  assert.match(description, /"timeout" seconds \(default 1\)/)
  const started = Date.now()
  const r = await run(client, { cells: [{ code: 'import time\ntime.sleep(20)' }] })
  assert.equal(r.isError, true)
  assert.match(textOf(r), /timed out after 1s/)
  assert.ok(Date.now() - started < 10_000, `interrupted after ${Date.now() - started} ms`)
  const own = await run(client, { cells: [{ code: 'time.sleep(1.5)\nprint("slept")' }], timeout: 5 })
  assert.equal(textOf(own), 'slept\n', 'the session kept its import, and the call its own timeout')
})

test('--timeout 0: calls that give none run without a limit, and the description says so', async (t) => {
  const client = await connect(t, ['--timeout', '0'])
  const [{ description }] = (await client.listTools()).tools
  assert.match(description, /^- Time: a cell runs without a time limit unless the call gives "timeout" seconds/m)
  const r = await run(client, { cells: [{ code: 'import time\ntime.sleep(1.2)\nprint("slept")' }] })
  assert.equal(textOf(r), 'slept\n')
  assert.equal(r.isError, false)
})

test('without the SDK installed, pykernel mcp says what to install on one line and exits 2', (t) => {
  // The package's files where no node_modules is above them, as after `npm install
  // pykernel` alone.
  const dir = tempDir('pykernel-nosdk-')
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const { files } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
  for (const file of ['package.json', ...files]) fs.cpSync(path.join(root, file), path.join(dir, file), { recursive: true })
  const addon = fs.readdirSync(root).find((f) => f.endsWith('.node'))
  fs.symlinkSync(path.join(root, addon), path.join(dir, addon))
  const r = spawnSync(process.execPath, [path.join(dir, 'bin', 'pykernel.js'), 'mcp'], { encoding: 'utf8', input: '' })
  assert.equal(r.stderr, 'pykernel mcp needs the MCP SDK: npm install @modelcontextprotocol/sdk (through npx: npx -p pykernel -p @modelcontextprotocol/sdk pykernel mcp)\n')
  assert.equal(r.stdout, '')
  assert.equal(r.status, 2)
})
