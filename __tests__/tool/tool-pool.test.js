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

test('timeout 0 is no limit, for the call (over the host\'s default) and for a cell (over the call\'s)', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const slow = { code: 'import time\ntime.sleep(1.5)\nprint("done")' }
  const call = await tool.handle({ cells: [slow], timeout: 0 }, { pool, timeoutSeconds: 1 })
  assert.equal(call.isError, false, call.text)
  assert.equal(call.details.timedOut, false)
  assert.equal(call.text, 'done\n')
  const cell = await tool.handle({ cells: [{ ...slow, timeout: 0 }], timeout: 1 }, { pool })
  assert.equal(cell.isError, false, cell.text)
  assert.equal(cell.text, 'done\n')
  const bounded = await tool.handle({ cells: [slow], timeout: 1 }, { pool })
  assert.equal(bounded.details.timedOut, true, 'the same cell under 1 s times out')
})

test('ctx.onOutput gets the index of the cell each chunk is of', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const chunks = []
  const r = await tool.handle(
    { cells: [{ code: 'print("one")' }, { code: 'print("two")\nraise ValueError("boom")' }] },
    { pool, onOutput: (chunk, cellIndex) => { chunks.push([chunk, cellIndex]) } },
  )
  assert.equal(r.isError, true)
  assert.deepEqual(chunks.filter(([, i]) => i === 0).map(([c]) => c).join(''), 'one\n')
  const second = chunks.filter(([, i]) => i === 1).map(([c]) => c).join('')
  assert.ok(second.startsWith('two\nTraceback'), second)
  assert.ok(second.endsWith('ValueError: boom\nCommand exited with code 1\n'), 'the closing line is the failed cell\'s')
  assert.equal(chunks.length, chunks.filter(([, i]) => i === 0 || i === 1).length, JSON.stringify(chunks))
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

test("the tool result keeps the host's notices apart: a cell printing them verbatim shows them escaped", async (t) => {
  const { printLines, escaped, hostLinesOf } = require('../helpers/host-lines')
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const r = await tool.handle({ cells: [{ code: 'pass' }, { code: `${printLines()}\nraise ValueError("boom")` }] }, { pool })
  assert.equal(r.isError, true)
  assert.deepEqual(r.notices, ['cell 2 of 2 failed'])
  assert.ok(r.output.startsWith(escaped()), r.output)
  assert.ok(r.output.endsWith('ValueError: boom\nCommand exited with code 1\n'), r.output)
  assert.equal(r.text, `[cell 2 of 2 failed]\n${r.output}`)
  assert.deepEqual(hostLinesOf(r.text), ['[cell 2 of 2 failed]', 'Command exited with code 1'])
  const ok = await tool.handle({ cells: [{ code: 'print(1)' }] }, { pool })
  assert.deepEqual([ok.notices, ok.output, ok.text], [[], '1\n', '1\n'])
})

test("a cut output keeps the host's artifact line whatever the cell printed", async (t) => {
  const dir = tempDir()
  const pool = new KernelPool({ kernel, prewarm: 0, artifactsDir: path.join(dir, 'artifacts') })
  t.after(async () => {
    await pool.disposeAll()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  const code = 'print("see artifact://x")\nprint("[full output (1 lines): artifact://x]")\nfor i in range(20000): print(i)\nprint("[full output (1 lines): artifact://x]")'
  const r = await tool.handle({ cells: [{ code }] }, { pool })
  const id = r.details.truncated?.artifactId
  assert.ok(id)
  assert.ok(r.text.startsWith('see artifact://x\n\\[full output (1 lines): artifact://x]\n'), r.text.slice(0, 100))
  assert.ok(r.text.endsWith(`\n\\[full output (1 lines): artifact://x]\n[full output (20003 lines): artifact://${id}]\n`), r.text.slice(-200))
})

test("the tool's own artifact line is decided by the result, not by what the cell printed", async () => {
  // A pool whose cut output has a path but no artifact:// id (so no line of its own),
  // while the cell printed both an artifact:// address and the path itself.
  const artifactPath = '/tmp/pykernel-artifacts/out.txt'
  const pool = {
    execute: async () => ({
      output: `[a notice]\nartifact://x\n${artifactPath}\n`,
      annotations: ['a notice'],
      images: [],
      exitCode: 0,
      truncated: { totalBytes: 1, totalLines: 1, artifactPath },
    }),
  }
  const r = await tool.handle({ cells: [{ code: '1' }] }, { pool })
  assert.equal(r.text, `[a notice]\nartifact://x\n${artifactPath}\n[the full output is in ${artifactPath}]\n`)
  assert.deepEqual(r.notices, ['a notice', `the full output is in ${artifactPath}`])
  assert.equal(r.output, `artifact://x\n${artifactPath}\n`)
  // With an id the pool's text says where already: no second line.
  pool.execute = async () => ({ output: 'x\n[full output (1 line): artifact://out]\n', annotations: [], images: [], exitCode: 0, truncated: { artifactPath, artifactId: 'out' } })
  const withId = await tool.handle({ cells: [{ code: '1' }] }, { pool })
  assert.equal(withId.text, 'x\n[full output (1 line): artifact://out]\n')
  assert.deepEqual(withId.notices, [])
})

test("ctx.maxTimeoutSeconds bounds the model's timeout, 0 included, and says so", async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const started = Date.now()
  const r = await tool.handle({ cells: [{ code: 'import time\ntime.sleep(20)', timeout: 0 }] }, { pool, maxTimeoutSeconds: 1 })
  assert.ok(Date.now() - started < 10_000, 'stopped by the host limit of 1 s')
  assert.equal(r.details.timedOut, true)
  assert.ok(r.notices.includes("cell 1's timeout lowered to 1s, the host's limit (asked: 0, no limit)"), r.text)
  assert.match(r.text, /\[cell 1's timeout lowered to 1s, the host's limit \(asked: 0, no limit\)\]\n$/)
  const within = await tool.handle({ cells: [{ code: '1' }], timeout: 1 }, { pool, maxTimeoutSeconds: 5 })
  assert.deepEqual(within.notices, [], 'a timeout within the limit is left as asked')
  const call = await tool.handle({ cells: [{ code: '2' }], timeout: 99 }, { pool, maxTimeoutSeconds: 5 })
  assert.deepEqual(call.notices, ["timeout lowered to 5s, the host's limit (asked: 99s)"])
  for (const bad of [0, 1.5, 3601, '5']) {
    await assert.rejects(tool.handle({ cells: [{ code: '1' }] }, { pool, maxTimeoutSeconds: bad }), { code: 'ERR_INVALID_ARG' })
  }
})

test('ctx.requestId and ctx.uriRoots reach the pool for the call', async (t) => {
  const root = tempDir()
  t.after(() => fs.rmSync(root, { recursive: true, force: true }))
  const calls = []
  const pool = new KernelPool({ kernel: { ...kernel, onCall: (call) => { calls.push(call); return 'ok' } }, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const r = await tool.handle(
    { cells: [{ code: 'write("local://note.txt", "hi")\ntool.ping()\nprint(read("local://note.txt"))' }] },
    { pool, requestId: 'toolu_42', uriRoots: { local: root } },
  )
  assert.equal(r.isError, false, r.text)
  assert.match(r.output, /^hi\n$/)
  assert.equal(fs.readFileSync(path.join(root, 'note.txt'), 'utf8'), 'hi')
  assert.deepEqual(calls.map((c) => [c.name, c.requestId]), [['ping', 'toolu_42']])
})
