'use strict'
// `pykernel/tool`: the eval tool as data. Its schema is valid JSON Schema that takes what
// a model sends and refuses what it must not, `handle`'s own check agrees with it, and
// `handle` runs calls through a real pool: text, errors, images, sessions, timeouts.
// (Per-cell `timeout`/`reset` and `onOutput` are in tool-pool.test.js.)
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const Ajv = require('ajv')
const { addon, python, tempDir } = require('../helpers/kernel')
const tool = require('../../tool.js')

const { KernelPool } = addon
const kernel = { interpreter: python }

const VALID = [
  { cells: [{ code: 'print(1)' }] },
  { cells: [{ code: 'import os', title: 'setup' }, { code: 'os.getcwd()', timeout: 5, reset: true }], session: 'data', timeout: 120, reset: false },
  { cells: [{ code: '' }], timeout: 0.5 },
  // 0 is the library's "no timeout", for the call and for a cell.
  { cells: [{ code: 'x', timeout: 0 }], timeout: 0 },
]
const INVALID = [
  [undefined, /must be an object/],
  [{}, /"cells" must be a non-empty array/],
  [{ cells: [] }, /"cells" must be a non-empty array/],
  [{ cells: 'print(1)' }, /"cells" must be a non-empty array/],
  [{ cells: [{ title: 'x' }] }, /cells\[0\]\.code must be a string/],
  [{ cells: [{ code: 1 }] }, /cells\[0\]\.code must be a string/],
  [{ cells: [{ code: 'x', language: 'py' }] }, /cells\[0\] has an unknown field "language"/],
  [{ cells: [{ code: 'x', timeout: -0.5 }] }, /cells\[0\]\.timeout must be a number of seconds, 0 or more/],
  [{ cells: [{ code: 'x', reset: 'yes' }] }, /cells\[0\]\.reset must be true or false/],
  [{ cells: [{ code: 'x' }], timeout: -1 }, /"timeout" must be a number of seconds, 0 or more \(0 for no limit\)/],
  [{ cells: [{ code: 'x' }], timeout: '30' }, /"timeout" must be a number of seconds/],
  [{ cells: [{ code: 'x' }], session: '' }, /"session" must be a non-empty string/],
  [{ cells: [{ code: 'x' }], code: 'x' }, /unknown field "code"/],
]

test('the schema is valid JSON Schema: it accepts typical calls and refuses malformed ones', () => {
  const validate = new Ajv({ strict: true }).compile(tool.schema)
  for (const input of VALID) assert.ok(validate(input), `${JSON.stringify(input)}: ${JSON.stringify(validate.errors)}`)
  for (const [input] of INVALID) assert.equal(validate(input), false, `${JSON.stringify(input)} is refused`)
  assert.equal(tool.name, 'python')
})

test("the schema's declared type is a JSON Schema type as it is: JSONSchema7, the AI SDK's jsonSchema(), an MCP tool's inputSchema", () => {
  // tsc --strict over types/schema.ts, against the devDependencies' declarations; the
  // declared fields are the schema's own.
  const root = path.resolve(__dirname, '..', '..')
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  const args = [tsc, '--noEmit', '--strict', '--exactOptionalPropertyTypes', '--target', 'es2022', '--module', 'nodenext',
    '--moduleResolution', 'nodenext', '--types', 'node', '--skipLibCheck', 'true', path.join(__dirname, 'types', 'schema.ts')]
  try {
    execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8', stdio: 'pipe' })
  } catch (error) {
    assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`)
  }
  assert.deepEqual(Object.keys(tool.schema.properties), ['cells', 'session', 'timeout', 'reset'])
  assert.deepEqual(Object.keys(tool.schema.properties.cells.items.properties), ['code', 'title', 'timeout', 'reset'])
})

test('the guide tells the model what the seeds prompt covers', () => {
  for (const topic of [/session/i, /1\.\.3600/, /timeout/, /artifact:\/\//, /read\(/, /display\(/, /kv\./, /env\(/, /agent\(/, /completion\(/, /tool\.<name>/, /!cmd/, /%pip/, /%%bash/, /image/i, /input\(\)/, /768 bytes/, /Sandbox/, /refused write/]) {
    assert.match(tool.guide, topic)
  }
})

test('the description is short (about 250 tokens) and says what matters on every call, in the host\'s words', () => {
  assert.ok(tool.description.length <= 1000, `${tool.description.length} characters`)
  for (const topic of [/session/, /persistent/, /"timeout" seconds \(default 30\)/, /full text/, /read\(/, /images/i, /^Sandbox: .*working directory/m, /^Guide: /m]) {
    assert.match(tool.description, topic)
  }
  assert.equal(tool.describe(), tool.description)
  const hosted = tool.describe({ timeoutSeconds: 120, sandbox: 'none here.', guide: 'read pykernel://guide.' })
  assert.match(hosted, /\(default 120\)/)
  assert.match(hosted, /"timeout": 0 is no limit/)
  const unlimited = tool.describe({ timeoutSeconds: 0 })
  assert.match(unlimited, /a cell runs without a time limit unless the call gives "timeout" seconds/)
  assert.doesNotMatch(unlimited, /default 0/)
  assert.match(tool.guide, /0 is no limit/)
  assert.match(hosted, /^Sandbox: none here\.$/m)
  assert.match(hosted, /^Guide: read pykernel:\/\/guide\.$/m)
})

test('handle refuses what the schema refuses, with the reason and ERR_INVALID_ARG, and runs nothing', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  for (const [input, reason] of INVALID) {
    const r = await tool.handle(input, { pool })
    assert.equal(r.isError, true)
    assert.equal(r.details.code, 'ERR_INVALID_ARG')
    assert.match(r.text, /^Invalid python tool input: /)
    assert.match(r.text, reason)
  }
  assert.deepEqual(pool.sessions, [], 'no kernel was started')
  const ok = await tool.handle({ cells: [{ code: '6 * 7' }] }, { pool })
  assert.equal(ok.text, '42\n', 'the pool is still usable')
})

test('null in an optional field means absent, as a strict-mode model sends it; a required field stays required', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const unset = { session: null, timeout: null, reset: null }
  const cell = (code) => ({ code, title: null, timeout: null, reset: null })
  const first = await tool.handle({ cells: [cell('x = 41')], ...unset }, { pool })
  assert.equal(first.isError, false, first.text)
  assert.equal(first.details.session, tool.DEFAULT_SESSION)
  const second = await tool.handle({ cells: [cell('x + 1')], ...unset }, { pool })
  assert.equal(second.text, '42\n', 'the default session, not reset')
  const slow = await tool.handle({ cells: [cell('import time\ntime.sleep(5)')], ...unset }, { pool, timeoutSeconds: 1 })
  assert.equal(slow.details.timedOut, true, "a null timeout leaves the host's default")
  for (const [input, reason] of [
    [{ cells: null }, /"cells" must be a non-empty array/],
    [{ cells: [null] }, /cells\[0\] must be an object/],
    [{ cells: [{ code: null }] }, /cells\[0\]\.code must be a string/],
    [{ cells: [cell('1')], language: null }, /unknown field "language"/],
    [{ cells: [{ ...cell('1'), language: null }] }, /cells\[0\] has an unknown field "language"/],
  ]) {
    const r = await tool.handle(input, { pool })
    assert.equal(r.details.code, 'ERR_INVALID_ARG', JSON.stringify(input))
    assert.match(r.text, reason)
  }
})

test('handle rejects a context without a pool (the host\'s mistake) with ERR_INVALID_ARG', async () => {
  await assert.rejects(tool.handle({ cells: [{ code: '1' }] }, {}), { code: 'ERR_INVALID_ARG', message: /ctx\.pool must be a KernelPool/ })
  await assert.rejects(tool.handle({ cells: [{ code: '1' }] }, undefined), { code: 'ERR_INVALID_ARG' })
  const pool = new KernelPool({ kernel, prewarm: 0 })
  await assert.rejects(tool.handle({ cells: [{ code: '1' }] }, { pool, sessionId: '' }), { code: 'ERR_INVALID_ARG', message: /ctx\.sessionId/ })
  await pool.disposeAll()
})

test('handle runs cells in order and returns sanitized text and details; state persists per session', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const r = await tool.handle({ cells: [{ code: 'x = 20', title: 'setup' }, { code: 'print("\\x1b[31mred\\x1b[0m")\nx + 1' }] }, { pool })
  assert.equal(r.text, 'red\n21\n')
  assert.equal(r.isError, false)
  assert.deepEqual(r.images, [])
  assert.equal(r.details.exitCode, 0)
  assert.equal(r.details.session, 'default')
  assert.equal(r.details.sessionId, 'default')
  assert.equal(r.details.result.cells.length, 2)
  assert.equal((await tool.handle({ cells: [{ code: 'x * 2' }] }, { pool })).text, '40\n', 'the default session kept x')
  const other = await tool.handle({ cells: [{ code: 'x' }], session: 'other' }, { pool })
  assert.equal(other.isError, true)
  assert.match(other.text, /NameError: name 'x' is not defined/, 'another session is another process')
  const reset = await tool.handle({ cells: [{ code: "'x' in globals()" }], reset: true }, { pool })
  assert.equal(reset.text, 'False\n', 'reset: true gives the session a fresh process')
})

test('a failing cell stops the rest: isError, the traceback, the failed cell named', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const r = await tool.handle({ cells: [{ code: 'print("one")' }, { code: '1 / 0', title: 'divide' }, { code: 'print("three")' }] }, { pool })
  assert.equal(r.isError, true)
  assert.equal(r.details.exitCode, 1)
  assert.equal(r.details.failedCell, 1)
  assert.match(r.text, /cell 2 of 3 \(divide\) failed/)
  assert.match(r.text, /ZeroDivisionError/)
  assert.doesNotMatch(r.text, /three/)
})

test('a matplotlib figure comes back as a PNG image', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const r = await tool.handle({ cells: [{ code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()' }] }, { pool })
  assert.equal(r.isError, false, r.text)
  assert.equal(r.images.length, 1)
  assert.equal(r.images[0].mime, 'image/png')
  assert.equal(Buffer.from(r.images[0].data, 'base64').subarray(1, 4).toString(), 'PNG')
})

test("the call's timeout (seconds) interrupts a cell; the session stays alive with its state", async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  await tool.handle({ cells: [{ code: 'kept = 7' }] }, { pool })
  const r = await tool.handle({ cells: [{ code: 'import time\ntime.sleep(30)' }], timeout: 1 }, { pool })
  assert.equal(r.isError, true)
  assert.equal(r.details.timedOut, true)
  assert.match(r.text, /timed out after 1s/)
  assert.equal((await tool.handle({ cells: [{ code: 'kept' }] }, { pool })).text, '7\n')
})

test("ctx.timeoutSeconds is the default, and the model's timeout overrides it", async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const slow = { cells: [{ code: 'import time\ntime.sleep(1.5)\nprint("done")' }] }
  const byDefault = await tool.handle(slow, { pool, timeoutSeconds: 1 })
  assert.equal(byDefault.details.timedOut, true)
  const overridden = await tool.handle({ ...slow, timeout: 10 }, { pool, timeoutSeconds: 1 })
  assert.equal(overridden.text, 'done\n')
})

test('an aborted ctx.signal cancels the call and interrupts the cell', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const started = Date.now()
  const r = await tool.handle({ cells: [{ code: 'import time\ntime.sleep(30)' }] }, { pool, signal: AbortSignal.timeout(500) })
  assert.ok(Date.now() - started < 10_000, 'stopped by the signal, not by the 30 s timeout')
  assert.equal(r.details.cancelled, true)
  assert.equal(r.details.timedOut, false)
  assert.equal(r.details.exitCode, null)
  assert.equal(r.isError, true)
  assert.equal((await tool.handle({ cells: [{ code: '1 + 1' }] }, { pool })).text, '2\n')
})

test('ctx.sessionId scopes the model\'s sessions to a conversation that owns them all', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const a = { pool, sessionId: 'chat-a' }
  const b = { pool, sessionId: 'chat-b' }
  await tool.handle({ cells: [{ code: 'v = "a"' }] }, a)
  await tool.handle({ cells: [{ code: 'v = "a2"' }], session: 'scratch' }, a)
  const inB = await tool.handle({ cells: [{ code: 'v' }] }, b)
  assert.match(inB.text, /NameError/, "another conversation's default session is another process")
  assert.equal((await tool.handle({ cells: [{ code: 'v' }], session: 'default' }, a)).text, "'a'\n", 'session "default" is ctx.sessionId')
  const keys = pool.sessions.map((s) => s.key.split(' @ ')[0]).sort()
  assert.deepEqual(keys, ['session:chat-a', 'session:chat-a/scratch', 'session:chat-b'])
  assert.deepEqual(pool.sessions.filter((s) => s.owners.includes('chat-a')).length, 2)
  await pool.disposeOwner('chat-a')
  assert.deepEqual(pool.sessions.map((s) => s.owners), [['chat-b']], "disposing the conversation ends all of its sessions")
})

test('a `/` in a conversation id or a session name never makes two conversations share a process', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const team = { pool, sessionId: 'team' }
  const teamWork = { pool, sessionId: 'team/work' }
  await tool.handle({ cells: [{ code: 'secret = "team work session"' }], session: 'work' }, team)
  const other = await tool.handle({ cells: [{ code: 'secret' }] }, teamWork)
  assert.match(other.text, /NameError/, "conversation 'team/work' does not see conversation 'team''s session 'work'")
  await tool.handle({ cells: [{ code: 'mine = 1' }] }, teamWork)
  const probe = await tool.handle({ cells: [{ code: 'mine' }], session: 'work/..' }, team)
  assert.match(probe.text, /NameError/)
  await pool.disposeOwner('team')
  assert.deepEqual(pool.sessions.map((s) => s.owners), [['team/work']], "disposing 'team' ends its sessions only")
})

test('a refused call resolves with isError and the pool\'s code', async () => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  await pool.disposeAll()
  const r = await tool.handle({ cells: [{ code: '1' }] }, { pool })
  assert.equal(r.isError, true)
  assert.equal(r.details.code, 'ERR_POOL_DISPOSED')
  assert.match(r.text, /^The Python session could not run this call: /)
})

test('truncated output says where the full output is', async (t) => {
  const dir = tempDir()
  const artifactsDir = path.join(dir, 'artifacts')
  const pool = new KernelPool({ kernel, prewarm: 0, artifactsDir })
  t.after(async () => {
    await pool.disposeAll()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  const r = await tool.handle({ cells: [{ code: 'for i in range(20000): print(i)' }] }, { pool })
  const full = r.details.truncated?.artifactPath
  assert.ok(full, 'the pool kept the full output')
  assert.ok(r.text.includes(full) || /artifact:\/\//.test(r.text), `the text names where it is:\n${r.text.slice(-300)}`)
  assert.match(fs.readFileSync(full, 'utf8'), /\n19999\n$/)
})
