'use strict'
// `pykernel/tool` on the pool's per-request features: per-cell `timeout`/`reset`,
// `onOutput`, `artifactId` pass through the tool. (MCP progress notifications, which carry
// the live output, are in mcp/mcp.test.js.)
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
