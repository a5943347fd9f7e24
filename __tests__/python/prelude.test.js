'use strict'
// The prelude helpers and the kv store shared with JavaScript
// (docs/python.md#prelude-helpers-the-host-bridge-and-the-kv-store), against real Python:
// files, the namespace, the bridge helpers and their fan-out.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { addon, startKernel, kernelDefaults, run, ok, value, tempDir } = require('../helpers/kernel')

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

function statuses(events, op) {
  return events.filter((e) => e.type === 'status' && e.op === op).map((e) => e.data)
}

/** Runs `code`, expecting it to fail; returns the error. */
async function failure(kernel, code) {
  const { result } = await run(kernel, code)
  assert.equal(result.status, 'error', `${code} should have failed`)
  return result.error
}

/** A host handler that records every call and answers from `answers[name]`. */
function recorder(answers = {}) {
  const calls = []
  const onCall = async (call) => {
    calls.push(call)
    const answer = answers[call.name]
    if (answer === undefined) throw new Error(`unknown call ${call.name}`)
    return typeof answer === 'function' ? answer(call.args) : answer
  }
  return { calls, onCall }
}

const PRELUDE_NAMES = [
  'display', 'update_display', 'clear_output', 'env', 'log', 'phase', 'read', 'write', 'defs',
  'kv', 'tool', 'agent', 'completion', 'parallel', 'pipeline', 'budget',
]

test('kv: one store, shared by Python and JavaScript', async (t) => {
  const dir = tempDir('pykernel-kv-')
  const kernel = await startKernel({ artifactsDir: dir, sessionId: 'chat-1' })
  t.after(() => kernel.shutdown())
  const store = new addon.KvStore(dir, 'chat-1')

  await t.test('Python writes, JavaScript reads, and back', async () => {
    const { events } = await ok(kernel, 'kv.set("from-py", {"n": [1, 2], "s": "é", "t": (1, None)})')
    assert.deepEqual(await store.get('from-py'), { n: [1, 2], s: 'é', t: [1, null] })
    assert.deepEqual(statuses(events, 'kv'), [{ action: 'set', key: 'from-py' }])
    assert.ok(!JSON.stringify(events).includes('é'), 'status events carry keys, not values')

    await store.set('from-js', { ok: true, list: [1.5, 'x'] })
    assert.equal(await value(kernel, 'kv.get("from-js") == {"ok": True, "list": [1.5, "x"]}'), 'True')
    assert.equal(await value(kernel, 'kv.get("missing", 7), kv.get("missing")'), '(7, None)')
    assert.equal(await value(kernel, 'kv.list()'), "['from-js', 'from-py']")
    assert.equal(await value(kernel, 'kv.path'), `'${store.path}'`)

    const removed = await ok(kernel, 'kv.delete("from-py"), kv.delete("from-py")')
    assert.equal(removed.result.result['text/plain'], '(True, False)')
    assert.deepEqual(statuses(removed.events, 'kv'), [{ action: 'delete', key: 'from-py' }])
    assert.equal(await store.get('from-py'), undefined)
    assert.deepEqual(JSON.parse(fs.readFileSync(store.path, 'utf8')), {
      version: 1,
      values: { 'from-js': { ok: true, list: [1.5, 'x'] } },
    })
  })

  await t.test('bad keys and values are refused and the file is left as it was', async () => {
    assert.equal(await value(kernel, 'kv.set("k" * 256, 1); kv.delete("k" * 256)'), 'True')
    const before = fs.readFileSync(store.path)
    for (const key of ['""', '"a/b"', '"a\\\\b"', '"a\\0b"', '"k" * 257']) {
      const error = await failure(kernel, `kv.set(${key}, 1)`)
      assert.equal(error.ename, 'ValueError')
      assert.match(error.evalue, /^invalid kv key .*: keys (are 1 to 256 characters|may not contain)/)
    }
    assert.equal((await failure(kernel, 'kv.get(3)')).ename, 'TypeError')
    const notJson = await failure(kernel, 'kv.set("s", {1, 2})')
    assert.equal(notJson.ename, 'TypeError')
    assert.match(notJson.evalue, /not storable as JSON/)
    assert.equal((await failure(kernel, 'kv.set("nan", float("nan"))')).ename, 'ValueError')

    const big = await failure(kernel, 'kv.set("big", "x" * (300 * 1024))')
    assert.equal(big.ename, 'ValueError')
    assert.match(big.evalue, /is 307202 bytes encoded; the limit is 262144 bytes/)
    assert.deepEqual(fs.readFileSync(store.path), before)

    for (const key of ['', 'a/b', 'a\\b', 'a\0b', 'k'.repeat(257)]) {
      await assert.rejects(store.set(key, 1), { code: 'ERR_KV_KEY' })
    }
    await assert.rejects(store.set('big', 'x'.repeat(300 * 1024)), { code: 'ERR_KV_LIMIT' })
    assert.deepEqual(fs.readFileSync(store.path), before)
  })

  await t.test('the store as a whole is capped at 4 MiB', async () => {
    const { result } = await run(kernel, 'for i in range(30):\n    kv.set("chunk%d" % i, "y" * (200 * 1024))')
    assert.equal(result.error.ename, 'ValueError')
    assert.match(result.error.evalue, /the kv store would grow to \d+ bytes; the limit is 4194304 bytes/)
    assert.ok(fs.statSync(store.path).size <= 4 * 1024 * 1024)
    await ok(kernel, 'for key in kv.list():\n    kv.delete(key)')
    assert.deepEqual(await store.list(), [])
  })

  await t.test('a corrupt file or an unknown version is refused, never overwritten', async () => {
    for (const content of ['{not json', '{"version":2,"values":{}}', '[1]', '{"version":1,"values":[]}']) {
      fs.writeFileSync(store.path, content)
      for (const code of ['kv.get("a")', 'kv.set("a", 1)', 'kv.delete("a")', 'kv.list()']) {
        const error = await failure(kernel, code)
        assert.equal(error.ename, 'RuntimeError', `${content}: ${code}`)
        assert.ok(error.evalue.includes(store.path), error.evalue)
        assert.match(error.evalue, /is not a version-1 store \(.+\); it was left untouched/)
      }
      await assert.rejects(store.set('a', 1), { code: 'ERR_KV_CORRUPT' })
      assert.equal(fs.readFileSync(store.path, 'utf8'), content)
    }
    fs.unlinkSync(store.path)
    assert.equal(await value(kernel, 'kv.list()'), '[]')
  })

  await t.test('a kernel without artifactsDir and sessionId has no store', async () => {
    const bare = await startKernel()
    t.after(() => bare.shutdown())
    const error = await failure(bare, 'kv.get("a")')
    assert.equal(error.ename, 'RuntimeError')
    assert.match(error.evalue, /the kv store needs artifactsDir and sessionId on the kernel/)
    assert.equal(await value(bare, 'kv.path is None'), 'True')
  })
})

test('kv: a kernel and another process writing different keys 200 times each lose nothing', async (t) => {
  const dir = tempDir('pykernel-kv-race-')
  // The signal file is in the kernel's cwd: the artifacts directory is hidden from it.
  const cwd = tempDir('pykernel-kv-race-cwd-')
  const kernel = await startKernel({ artifactsDir: dir, sessionId: 'race', cwd })
  t.after(() => kernel.shutdown())
  const store = new addon.KvStore(dir, 'race')
  const started = path.join(cwd, 'js-started')
  // The other process starts writing, then says so; the kernel waits for that, so the
  // two loops overlap.
  const script = `
    const fs = require('node:fs')
    const { KvStore } = require(process.argv[1])
    const store = new KvStore(process.argv[2], 'race')
    ;(async () => {
      for (let i = 0; i < 200; i++) {
        await store.set('js-' + i, i)
        if (i === 5) fs.writeFileSync(process.argv[3], '')
      }
    })()`
  const child = spawn(process.execPath, ['-e', script, path.join(__dirname, '..', '..'), dir, started], { stdio: 'inherit' })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  const cell = run(
    kernel,
    [
      'import os, time',
      `while not os.path.exists(${JSON.stringify(started)}):`,
      '    time.sleep(0.005)',
      'for i in range(200):',
      '    kv.set("py-%d" % i, i)',
    ].join('\n'),
  )
  const [{ result }, code] = await Promise.all([cell, exited])
  assert.equal(result.status, 'ok', JSON.stringify(result.error))
  assert.equal(code, 0)
  const keys = await store.list()
  assert.equal(keys.length, 400)
  for (let i = 0; i < 200; i++) {
    assert.equal(await store.get(`js-${i}`), i)
    assert.equal(await store.get(`py-${i}`), i)
  }
})

test('defs() and %who list user names only', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  assert.equal(await value(kernel, 'defs()'), '(no user definitions)')
  await ok(
    kernel,
    [
      'import pandas as pd',
      'df = pd.DataFrame({"a": [1, 2, 3], "b": [4, 5, 6]})',
      'xs = [1, 2, 3, 4, 5]',
      'n = 3',
      's = "hello"',
      'def f(a, b): pass',
      'async def g(x, *rest, key=1, **options): pass',
      'class Point: pass',
      '_private = 1',
    ].join('\n'),
  )
  const shown = await value(kernel, 'defs()')
  assert.deepEqual(shown.split('\n'), [
    'Point: class',
    'df: DataFrame (3x2)',
    'f: function(a, b)',
    'g: async function(x, *rest, key, **options)',
    'n: int',
    'pd: module pandas',
    's: str[5]',
    'xs: list[5]',
  ])
  assert.equal(await value(kernel, 'list(defs())[2], len(defs())'), "('f: function(a, b)', 8)")

  const who = await ok(kernel, '%who')
  assert.deepEqual(who.result.stdout.trim().split('\t'), ['Point', 'df', 'f', 'g', 'n', 'pd', 's', 'xs'])
  const listed = await value(kernel, '%who_ls')
  for (const name of PRELUDE_NAMES) {
    assert.ok(!who.result.stdout.includes(name + '\t') && !listed.includes(`'${name}'`), `%who listed ${name}`)
    assert.ok(!shown.includes(`${name}:`), `defs() listed ${name}`)
  }
  // The helpers are all there, though.
  assert.equal(await value(kernel, `all(callable(globals()[n]) or n in ("kv", "tool", "budget") for n in ${JSON.stringify(PRELUDE_NAMES)})`), 'True')

  await ok(kernel, 'big = {"k%d" % i: i for i in range(10)}\nfor i in range(250):\n    globals()["v%03d" % i] = i')
  const many = await ok(kernel, 'd = defs()\nlen(d), d.more, d[-1]')
  // Point big df f g i n pd s, v000..v249, xs: 260 names, the 200th is v190
  assert.equal(many.result.result['text/plain'], "(200, 60, 'v190: int')")
  const shownMany = await value(kernel, 'defs()')
  assert.match(shownMany, /\nd: list\[200\]\n/)
  assert.match(shownMany, /\n\.\.\. and 61 more$/)
})

test('read and write', async (t) => {
  const dir = fs.realpathSync(tempDir('pykernel-files-'))
  const { calls, onCall } = recorder({ read: (args) => ({ text: `host text of ${args.path}` }) })
  const kernel = await startKernel({ cwd: dir, onCall })
  t.after(() => kernel.shutdown())

  await t.test('write creates parent directories and returns what it wrote', async () => {
    const target = path.join(dir, 'a', 'b', 'notes.txt')
    const { result, events } = await ok(kernel, `write(${JSON.stringify(target)}, "one\\ntwo\\nthree\\nfour\\nfive")`)
    assert.equal(result.result['text/plain'], '23')
    assert.equal(fs.readFileSync(target, 'utf8'), 'one\ntwo\nthree\nfour\nfive')
    assert.deepEqual(statuses(events, 'write'), [{ path: target, chars: 23, bytes: 23 }])
    assert.equal(await value(kernel, 'write("rel/dir/x.bin", b"\\x00\\x01")'), '2')
    assert.deepEqual(fs.readFileSync(path.join(dir, 'rel', 'dir', 'x.bin')), Buffer.from([0, 1]))
    assert.equal((await failure(kernel, 'write("artifact://3", "x")')).ename, 'ValueError')
  })

  await t.test('read takes offset (1-based) and limit positionally', async () => {
    const file = JSON.stringify(path.join(dir, 'a', 'b', 'notes.txt'))
    assert.equal(await value(kernel, `read(${file})`), "'one\\ntwo\\nthree\\nfour\\nfive'")
    assert.equal(await value(kernel, `read(${file}, 2, 2)`), "'two\\nthree\\n'")
    assert.equal(await value(kernel, `read(${file}, 4)`), "'four\\nfive'")
    assert.equal(await value(kernel, `read(${file}, offset=5, limit=10)`), "'five'")
    assert.equal(await value(kernel, `read(${file}, 1, 0)`), "''")
    assert.equal(await value(kernel, `read(${file}, 9)`), "''")
    assert.equal(await value(kernel, 'read("a/b/notes.txt", 1, 1)'), "'one\\n'")
    assert.equal(await value(kernel, `read("file://" + ${file}, 3, 1)`), "'three\\n'")
    const { events } = await ok(kernel, `read(${file}, 2, 2)`)
    assert.deepEqual(statuses(events, 'read'), [{ path: path.join(dir, 'a', 'b', 'notes.txt'), chars: 10 }])
    assert.equal((await failure(kernel, 'read("missing.txt")')).ename, 'FileNotFoundError')
    assert.equal(calls.length, 0, 'local reads never reach the host')
  })

  await t.test('scheme:// reads are delegated to the host bridge', async () => {
    assert.equal(await value(kernel, 'read("artifact://21:3-4")'), "'host text of artifact://21:3-4'")
    assert.equal(await value(kernel, 'read("mcp://server/resource:10-14")'), "'host text of mcp://server/resource:10-14'")
    assert.equal(await value(kernel, 'read("mcp://server/resource", 10, 5)'), "'host text of mcp://server/resource:10-14'")
    assert.equal(await value(kernel, 'read("agent://7", 3)'), "'host text of agent://7:3-'")
    assert.deepEqual(
      calls.map((c) => ({ name: c.name, args: c.args })),
      [
        { name: 'read', args: { path: 'artifact://21:3-4' } },
        { name: 'read', args: { path: 'mcp://server/resource:10-14' } },
        { name: 'read', args: { path: 'mcp://server/resource:10-14' } },
        { name: 'read', args: { path: 'agent://7:3-' } },
      ],
    )
  })
})

test('agent() passes isolated, apply and merge to the host and returns the isolation fields', async (t) => {
  const { calls, onCall } = recorder({
    agent: (args) => ({
      text: 'patched',
      details: { id: 'a9', agent: args.agent, isolated: args.isolated ?? false, branch: 'agent/a9', patch: 'diff --git a/x b/x', text: 'not this' },
    }),
  })
  const kernel = await startKernel({ onCall })
  t.after(() => kernel.shutdown())
  const last = () => calls.at(-1).args

  await ok(kernel, 'agent("p", isolated=True, apply=False, merge=True)')
  assert.deepEqual(last(), { prompt: 'p', agent: 'deep', isolated: true, apply: false, merge: true })
  await ok(kernel, 'agent("p", isolated=None, apply=None, merge=None)')
  assert.deepEqual(last(), { prompt: 'p', agent: 'deep' }, 'None leaves the choice to the host')

  // The node keeps its own fields and gains the rest of the host's details.
  assert.equal(
    await value(kernel, 'node = agent("p", isolated=True, handle=True); sorted(node.items())'),
    "[('agent', 'deep'),\n ('branch', 'agent/a9'),\n ('handle', 'agent://a9'),\n ('id', 'a9'),\n ('isolated', True),\n ('output', 'patched'),\n ('patch', 'diff --git a/x b/x'),\n ('text', 'patched')]",
  )
  assert.equal(await value(kernel, 'agent("p", isolated=True)'), "'patched'", 'without handle, the text alone')

  const before = calls.length
  for (const [arg, bad, type] of [['isolated', '"yes"', 'str'], ['apply', '1', 'int'], ['merge', '[]', 'list']]) {
    const error = await failure(kernel, `agent("p", ${arg}=${bad})`)
    assert.equal(error.ename, 'TypeError')
    assert.equal(error.evalue, `agent(): ${arg} must be True, False or None, not ${type}`)
  }
  assert.equal(calls.length, before, 'a bad argument reaches no host')
  assert.equal(await value(kernel, '1 + 1'), '2', 'the kernel is still usable')
})

test('defaultAgent: the agent agent() asks for when the cell names none', async (t) => {
  const { calls, onCall } = recorder({ agent: (args) => `ran ${args.agent}` })
  const kernel = await startKernel({ onCall, defaultAgent: 'task' })
  t.after(() => kernel.shutdown())
  assert.equal(await value(kernel, 'agent("p")'), "'ran task'")
  assert.deepEqual(calls.at(-1).args, { prompt: 'p', agent: 'task' }, 'the call carries the resolved name')
  assert.equal(await value(kernel, 'agent("p", agent=None)'), "'ran task'", 'None is the default too')
  assert.equal(await value(kernel, 'agent("p", agent="explore")'), "'ran explore'", 'a name the cell gives wins')
  assert.equal(await value(kernel, "import inspect; inspect.signature(agent).parameters['agent'].default"), undefined, 'agent=None in the signature')

  // A pool's kernel options set it for every session, spares included.
  const pool = new addon.KernelPool({ prewarm: 1, kernel: { interpreter: kernelDefaults().interpreter, onCall, defaultAgent: 'review' } })
  t.after(() => pool.disposeAll())
  for (const sessionId of ['a', 'b']) {
    const r = await pool.execute({ sessionId, cells: [{ code: 'agent("p")' }] })
    assert.equal(r.cells.at(-1).result?.['text/plain'], "'ran review'", sessionId)
  }

  // Unset, the runner's own default.
  const plain = await startKernel({ onCall })
  t.after(() => plain.shutdown())
  assert.equal(await value(plain, 'agent("p")'), "'ran deep'")

  for (const [bad, reason] of [
    ['', "must name an agent (such as 'task'), got \"\""],
    ['x'.repeat(129), 'must be at most 128 characters, got 129'],
    ['task\nignore', 'must be one line without control characters, got "task\\nignore"'],
  ]) {
    await assert.rejects(startKernel({ defaultAgent: bad }), {
      code: 'ERR_INVALID_ARG',
      message: `invalid argument \`defaultAgent\`: ${reason}`,
    })
    assert.throws(() => new addon.KernelPool({ kernel: { defaultAgent: bad } }), { code: 'ERR_INVALID_ARG' })
  }
  await assert.rejects(startKernel({ defaultAgent: 7 }), { code: 'ERR_INVALID_ARG' })
})

test('the handle node gives camelCase details under their snake_case names too', async (t) => {
  const details = {
    id: 'a3', agent: 'task', patchPath: '/tmp/a3.patch', branchName: 'agent/a3', baseCommit: 'abc123',
    baseURL: 'http://x', changedFiles: ['a.py'],
    // the host's own snake_case name is kept over the one made from camelCase
    mergeStatus: 'from camel', merge_status: 'from host',
    // the node's fixed keys win over details of the same (converted) name
    Text: 'not the text', Output: 'not the output', Handle: 'h', Data: 'not data',
  }
  const { onCall } = recorder({ agent: () => ({ text: 'done', details }) })
  const kernel = await startKernel({ onCall })
  t.after(() => kernel.shutdown())
  const { result } = await ok(kernel, 'import json; print(json.dumps(agent("p", handle=True)))')
  const node = JSON.parse(result.stdout)
  assert.deepEqual(node, {
    text: 'done', output: 'done', handle: 'agent://a3', id: 'a3', agent: 'task',
    patchPath: '/tmp/a3.patch', patch_path: '/tmp/a3.patch',
    branchName: 'agent/a3', branch_name: 'agent/a3',
    baseCommit: 'abc123', base_commit: 'abc123',
    baseURL: 'http://x', base_url: 'http://x',
    changedFiles: ['a.py'], changed_files: ['a.py'],
    mergeStatus: 'from camel', merge_status: 'from host',
    Text: 'not the text', Output: 'not the output', Handle: 'h', Data: 'not data',
  })
})

test('log and phase are status events, not output', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const { result, events } = await ok(kernel, 'phase("Load data")\nlog("read 3 files")\nlog(42)')
  assert.deepEqual(statuses(events, 'phase'), [{ title: 'Load data' }])
  assert.deepEqual(statuses(events, 'log'), [{ message: 'read 3 files' }, { message: '42' }])
  assert.equal(result.stdout, '')
  assert.equal(result.result, undefined)
})

test('statusMime: status displays travel under the kernel\'s own MIME type', async (t) => {
  const statusMime = 'application/x-acme-status'
  const kernel = await startKernel({ statusMime })
  t.after(() => kernel.shutdown())
  const events = []
  const r = await kernel.execute(
    "log('under the custom type')\ndisplay({'application/x-pykernel-status': {'op': 'log', 'message': 'default type'}}, raw=True)",
    { onEvent: (e) => events.push(e) },
  )
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  const statuses = events.filter((e) => e.type === 'status' && e.op === 'log')
  assert.deepEqual(statuses.map((e) => e.data.message), ['under the custom type'], 'log() is a status event')
  const displays = events.filter((e) => e.type === 'display')
  assert.equal(displays.length, 1, 'the default status type is an ordinary display under a custom statusMime')
  assert.ok('application/x-pykernel-status' in displays[0].bundle)
})

test('tool, agent, completion and budget go through the bridge', async (t) => {
  const { calls, onCall } = recorder({
    x: (args) => ({ got: args }),
    boom: () => {
      throw new Error('the tool exploded')
    },
    agent: (args) => {
      if (args.prompt === 'json') return { text: '{"ok": true, "n": 2}', details: { id: 'a7', agent: 'task' } }
      if (args.prompt === 'fenced') return '```json\n[1, 2]\n```'
      if (args.prompt === 'anonymous') return { text: 'no id' }
      if (args.prompt === 'bad json') return { text: 'not json at all' }
      if (args.prompt === 'slow') return sleep(1500).then(() => 'slow answer')
      return { text: `did: ${args.prompt}`, details: { id: 'a1', agent: args.agent } }
    },
    completion: (args) => (args.schema ? { text: '{"answer": 42}' } : `completed: ${args.prompt}`),
    budget: { total: 1000, spent: 250, hard: true },
  })
  const kernel = await startKernel({ onCall })
  t.after(() => kernel.shutdown())
  const last = () => ({ name: calls.at(-1).name, args: calls.at(-1).args })

  await t.test('tool.<name>(**args) calls the host tool with the keyword arguments', async () => {
    assert.equal(await value(kernel, 'tool.x(a=1)'), "{'got': {'a': 1}}")
    assert.deepEqual(last(), { name: 'x', args: { a: 1 } })
    await ok(kernel, 'tool["x"]({"b": [2]}, c=None)')
    assert.deepEqual(last(), { name: 'x', args: { b: [2], c: null } })
    assert.equal(await value(kernel, 'tool.x'), '<tool.x>')
    assert.equal(await value(kernel, 'hasattr(tool, "_repr_html_")'), 'False')
    const error = await failure(kernel, 'tool.boom()')
    assert.equal(error.ename, 'RuntimeError')
    assert.match(error.evalue, /the tool exploded/)
  })

  await t.test('agent() returns text, parsed JSON with a schema, or a node with handle=True', async () => {
    assert.equal(await value(kernel, 'agent("summarize")'), "'did: summarize'")
    assert.deepEqual(last(), { name: 'agent', args: { prompt: 'summarize', agent: 'deep' } })
    await ok(kernel, 'agent("p", agent="explore", model="slow", label="scan")')
    assert.deepEqual(last().args, { prompt: 'p', agent: 'explore', model: 'slow', label: 'scan' })

    assert.equal(await value(kernel, 'agent("json", schema={"type": "object"})'), "{'ok': True, 'n': 2}")
    assert.deepEqual(last().args, { prompt: 'json', agent: 'deep', schema: { type: 'object' } })
    assert.equal(await value(kernel, 'agent("fenced", schema={"type": "array"})'), '[1, 2]')
    const bad = await failure(kernel, 'agent("bad json", schema={})')
    assert.equal(bad.ename, 'ValueError')
    assert.match(bad.evalue, /agent\(\): the reply is not the JSON the schema asks for/)

    assert.equal(
      await value(kernel, 'agent("summarize", handle=True)'),
      // pretty-printed as in IPython: too wide for one line, one key per line
      "{'text': 'did: summarize',\n 'output': 'did: summarize',\n 'handle': 'agent://a1',\n 'id': 'a1',\n 'agent': 'deep'}",
    )
    assert.deepEqual(last().args, { prompt: 'summarize', agent: 'deep', handle: true })
    assert.equal(
      await value(kernel, 'agent("json", schema={}, handle=True)'),
      "{'text': '{\"ok\": true, \"n\": 2}',\n 'output': '{\"ok\": true, \"n\": 2}',\n 'handle': 'agent://a7',\n 'id': 'a7',\n 'agent': 'task',\n 'data': {'ok': True, 'n': 2}}",
    )
    assert.equal(
      await value(kernel, 'agent("anonymous", handle=True)'),
      "{'text': 'no id', 'output': 'no id', 'handle': None, 'id': None, 'agent': None}",
    )
  })

  await t.test('the cell timeout is paused while agent() runs', async () => {
    const { result } = await run(kernel, 'agent("slow")', { timeoutMs: 1000 })
    assert.equal(result.timedOut, false)
    assert.equal(result.result['text/plain'], "'slow answer'")
  })

  await t.test('completion() returns text, or parsed JSON with a schema', async () => {
    assert.equal(await value(kernel, 'completion("hi")'), "'completed: hi'")
    assert.deepEqual(last(), { name: 'completion', args: { prompt: 'hi', model: 'default' } })
    assert.equal(await value(kernel, 'completion("q", model="smol", system="be brief", schema={"type": "object"})'), "{'answer': 42}")
    assert.deepEqual(last().args, { prompt: 'q', model: 'smol', system: 'be brief', schema: { type: 'object' } })
  })

  await t.test('budget reads the host budget', async () => {
    assert.equal(await value(kernel, 'budget.total, budget.spent(), budget.remaining(), budget.hard'), '(1000, 250, 750, True)')
    assert.equal(await value(kernel, 'budget'), '<budget: total=1000 spent=250 hard=True>')
    assert.deepEqual(last(), { name: 'budget', args: {} })
  })
})

test('parallel and pipeline', async (t) => {
  let inFlight = 0
  let peak = 0
  let limit
  const { calls, onCall } = recorder({
    concurrency: () => (limit === undefined ? Promise.reject(new Error('no limit here')) : { limit }),
    f: async (args) => {
      inFlight++
      peak = Math.max(peak, inFlight)
      await sleep(args.ms ?? 200)
      inFlight--
      return args.i * 10
    },
    boom: () => {
      throw new Error('the tool exploded')
    },
  })
  const kernel = await startKernel({ onCall })
  t.after(() => kernel.shutdown())
  const reset = (l) => {
    limit = l
    peak = 0
    calls.length = 0
  }

  await t.test('bridge calls run 8 at once (the default limit) and return in input order', async () => {
    reset(undefined)
    const started = Date.now()
    const out = await value(kernel, 'parallel([lambda i=i: tool.f(i=i, ms=200 + 20 * (11 - i)) for i in range(12)])')
    assert.equal(out, '[0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110]')
    assert.equal(peak, 8, 'at most 8 at a time when the host names no limit')
    assert.ok(Date.now() - started < 2500, 'the calls overlapped')
    assert.equal(calls[0].name, 'concurrency')
    assert.equal(new Set(calls.map((c) => c.runId)).size, 1, 'every call carries the cell run id')
  })

  await t.test("the host's concurrency limit bounds the fan-out", async () => {
    reset(3)
    const out = await value(kernel, 'parallel([lambda i=i: tool.f(i=i, ms=100) for i in range(8)])')
    assert.equal(out, '[0, 10, 20, 30, 40, 50, 60, 70]')
    assert.equal(peak, 3)
    reset(0) // no limit
    await value(kernel, 'parallel([lambda i=i: tool.f(i=i, ms=100) for i in range(12)])')
    assert.equal(peak, 12)
    assert.equal(await value(kernel, 'parallel([]), parallel(iter([lambda: "one"]))'), "([], ['one'])")
    assert.equal((await failure(kernel, 'parallel([1])')).ename, 'TypeError')
  })

  await t.test('the first failure is raised once the others have settled', async () => {
    reset(undefined)
    const error = await failure(
      kernel,
      'done = []\nparallel([lambda: done.append(tool.f(i=1, ms=300)), lambda: 1 / 0, lambda: tool.boom(), lambda: done.append(2)])',
    )
    assert.equal(error.ename, 'ZeroDivisionError')
    assert.equal(await value(kernel, 'sorted(done)'), '[2, 10]')
    const thrown = await failure(kernel, 'parallel([lambda: 1, lambda: tool.boom()])')
    assert.equal(thrown.ename, 'RuntimeError')
    assert.match(thrown.evalue, /the tool exploded/)
  })

  await t.test('pipeline: each stage maps every item before the next stage starts', async () => {
    reset(undefined)
    const out = await value(kernel, 'pipeline([1, 2, 3], lambda x: tool.f(i=x, ms=50 * (4 - x)), lambda y: tool.f(i=y + 1, ms=10), str)')
    assert.equal(out, "['110', '210', '310']")
    const work = calls.filter((c) => c.name === 'f').map((c) => c.args.i)
    assert.deepEqual(work.slice(0, 3).sort(), [1, 2, 3])
    assert.deepEqual(work.slice(3).sort(), [11, 21, 31])
    assert.equal(await value(kernel, 'pipeline(["a", "b"])'), "['a', 'b']")
  })
})

test('an interrupted fan-out settles and what was set before it survives', async (t) => {
  const seen = []
  const kernel = await startKernel({
    onCall: async (call) => {
      if (call.name === 'concurrency') return { limit: 2 }
      seen.push(call.args.i)
      await sleep(2000)
      return call.args.i
    },
  })
  t.after(() => kernel.shutdown())
  await ok(kernel, 'earlier = "kept"')

  await t.test('an abort while calls are in flight', async () => {
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 300)
    const started = Date.now()
    const { result } = await run(
      kernel,
      'before = "kept too"\nresults = parallel([lambda i=i: tool.slow(i=i) for i in range(6)])\nafter = "not reached"',
      { signal: controller.signal },
    )
    assert.equal(result.cancelled, true)
    assert.ok(Date.now() - started < 1500, `the cell ended promptly (${Date.now() - started} ms)`)
    await sleep(200)
    assert.deepEqual(seen.sort(), [0, 1], 'nothing new started after the interrupt')
    assert.equal(await value(kernel, 'earlier, before, "after" in globals(), "results" in globals()'), "('kept', 'kept too', False, False)")
  })

  await t.test('a timeout while the threads compute', async () => {
    const started = Date.now()
    const { result } = await run(kernel, 'import time\nparallel([lambda: time.sleep(3) for _ in range(3)])', { timeoutMs: 500 })
    assert.equal(result.cancelled, true)
    assert.equal(result.timedOut, true)
    assert.ok(Date.now() - started < 2000)
    assert.equal(await value(kernel, 'earlier'), "'kept'")
  })

  await t.test('the next fan-out works', async () => {
    seen.length = 0
    const { result } = await run(kernel, 'parallel([lambda: 1, lambda: 2, lambda: tool.slow(i=3)])')
    assert.equal(result.result['text/plain'], '[1, 2, 3]')
    assert.deepEqual(seen, [3])
  })
})
