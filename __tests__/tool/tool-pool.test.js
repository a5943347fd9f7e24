'use strict'
// `pykernel/tool` and `pykernel mcp` on the pool's per-request features: per-cell
// `timeout`/`reset`, `onOutput`, `artifactId` pass through the tool, and MCP progress
// notifications carry the live output.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { addon, python, tempDir } = require('../helpers/kernel')
const tool = require('../../tool.js')

const { KernelPool } = addon
const kernel = { interpreter: python }

test("a cell's own timeout overrides the call's", async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const started = Date.now()
  const r = await tool.handle({ cells: [{ code: 'import time' }, { code: 'time.sleep(10)', timeout: 1 }], timeout: 30 }, { pool })
  assert.ok(Date.now() - started < 6000, 'stopped by the cell timeout of 1 s')
  assert.equal(r.details.timedOut, true)
  assert.match(r.text, /timed out after 1s/)
})

test("a cell's own reset gives a fresh process right before it", async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const r = await tool.handle({ cells: [{ code: 'x = 1\nprint("set")' }, { code: "'x' in globals()", reset: true }] }, { pool })
  assert.equal(r.isError, false, r.text)
  assert.match(r.text, /False\n$/)
})

test('ctx.onOutput receives sanitized output while the call runs', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const chunks = []
  let firstAt
  const r = await tool.handle(
    { cells: [{ code: 'import time\nprint("\\x1b[31mred\\x1b[0m")\ntime.sleep(1)\nprint("a\\rb")' }] },
    { pool, onOutput: (chunk) => { firstAt ??= Date.now(); chunks.push(chunk) } },
  )
  const doneAt = Date.now()
  const streamed = chunks.map((c) => (typeof c === 'string' ? c : c.text)).join('')
  assert.equal(streamed, r.text)
  assert.doesNotMatch(streamed, /\x1b|\r/)
  assert.ok(firstAt <= doneAt - 800, 'the first chunk came before the cell ended')
})

test('truncated output ends with its artifact:// address', async (t) => {
  const dir = tempDir()
  const pool = new KernelPool({ kernel, prewarm: 0, artifactsDir: path.join(dir, 'artifacts') })
  t.after(async () => {
    await pool.disposeAll()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  const r = await tool.handle({ cells: [{ code: 'for i in range(20000): print(i)' }] }, { pool })
  const id = r.details.truncated?.artifactId
  assert.ok(id, 'the truncated result names its artifact')
  assert.match(r.text, new RegExp(`artifact://${id}`))
})

test('pykernel mcp streams output as progress notifications when the client asks, all before the result', async (t) => {
  // Judged on the wire, not through the SDK's Client: that client drops a progress
  // notification it reads in the same chunk as the response (its notification handlers run
  // a microtask later, after the response has removed the progress handler), which a
  // loaded machine makes likely. What the server promises is the order it writes.
  const { spawn } = require('node:child_process')
  const args = [path.join(__dirname, '..', '..', 'bin', 'pykernel.js'), 'mcp', ...(python ? ['--python', python] : [])]
  const server = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'] })
  t.after(() => server.kill())
  const messages = []
  const waiters = []
  let buffered = ''
  server.stdout.on('data', (data) => {
    buffered += data
    let newline
    while ((newline = buffered.indexOf('\n')) >= 0) {
      messages.push(JSON.parse(buffered.slice(0, newline)))
      buffered = buffered.slice(newline + 1)
      for (const waiter of waiters.splice(0)) waiter()
    }
  })
  const send = (message) => server.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`)
  const responseTo = async (id) => {
    for (;;) {
      const found = messages.find((m) => m.id === id && !m.method)
      if (found) return found
      await new Promise((resolve) => waiters.push(resolve))
    }
  }
  send({ id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pykernel-test', version: '0' } } })
  await responseTo(1)
  send({ method: 'notifications/initialized' })
  const code = 'import time\nprint("\\x1b[1mone\\x1b[0m")\ntime.sleep(0.5)\nprint("two")'
  send({ id: 2, method: 'tools/call', params: { name: 'python', arguments: { cells: [{ code }] }, _meta: { progressToken: 'p-2' } } })
  const response = await responseTo(2)
  assert.equal(response.result.content[0].text, 'one\ntwo\n')
  const callMessages = messages.slice(messages.findIndex((m) => m.id === 1) + 1)
  const progress = callMessages.filter((m) => m.method === 'notifications/progress')
  assert.ok(progress.every((m) => m.params.progressToken === 'p-2'))
  assert.equal(progress.map((m) => m.params.message).join(''), 'one\ntwo\n', 'the live output, sanitized, in order')
  assert.ok(progress.length >= 2, 'the first line came while the cell still ran')
  assert.deepEqual(progress.map((m) => m.params.progress), progress.map((_, i) => i + 1))
  assert.equal(callMessages.at(-1), response, 'every notification came before the result')
})
