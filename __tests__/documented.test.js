'use strict'
// Behaviour the README documents that had no test of its own (issue 20). Each test is the
// documented promise, checked against a real kernel; each was seen to fail with the code
// it guards broken.
const test = require('node:test')
const assert = require('node:assert/strict')

const { startKernel } = require('./helpers/kernel')

test('storeHistory: false runs the cell without counting it', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  assert.equal((await kernel.execute('x = 40')).executionCount, 1)
  const hidden = await kernel.execute('x + 1', { storeHistory: false })
  assert.equal(hidden.status, 'ok')
  assert.equal(hidden.result['text/plain'], '41', 'the cell ran')
  assert.equal(kernel.executionCount, 1, 'and was not counted')
  const failed = await kernel.execute('1 / 0', { storeHistory: false })
  assert.match(failed.error.traceback.join('\n'), /hidden cell/, 'its frames name a hidden cell')
  assert.equal(kernel.executionCount, 1)
  const next = await kernel.execute('x + 2')
  assert.equal(next.executionCount, 2, 'the next counted cell takes the next number')
  assert.equal(next.result['text/plain'], '42')
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

test('getpass() and input() fail at once with StdinNotImplementedError; the kernel lives', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  for (const code of ["import getpass\ngetpass.getpass('password: ')", "input('name? ')"]) {
    const started = Date.now()
    const r = await kernel.execute(code, { timeoutMs: 10_000 })
    assert.equal(r.timedOut, false, `${code} waited for input`)
    assert.ok(Date.now() - started < 5000)
    assert.equal(r.error?.ename, 'StdinNotImplementedError', code)
    assert.match(r.error.evalue, /no interactive stdin; pass data in code instead/)
    assert.equal(r.stderr, '', 'no terminal is looked for (no GetPassWarning, no echo warning)')
  }
  assert.equal((await kernel.execute('6 * 7')).result['text/plain'], '42')
})

test('%env lists the environment with secret-looking values hidden; setting one does not echo it', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const listed = await kernel.execute("import os\nos.environ['PK_DOC_API_TOKEN'] = 's3cret-value'\nos.environ['PK_DOC_PLAIN'] = 'plain-value'\n%env")
  assert.equal(listed.status, 'ok', JSON.stringify(listed.error))
  const text = listed.result['text/plain']
  assert.match(text, /'PK_DOC_PLAIN': 'plain-value'/)
  assert.match(text, /'PK_DOC_API_TOKEN': '<hidden>'/)
  assert.doesNotMatch(text, /s3cret-value/)
  const set = await kernel.execute('%env PK_DOC_PASSWORD=hunter2')
  assert.equal(set.stdout, 'env: PK_DOC_PASSWORD=<hidden>\n')
  assert.equal((await kernel.execute("import os\nos.environ['PK_DOC_PASSWORD']")).result['text/plain'], "'hunter2'", 'the value is set all the same')
  assert.equal((await kernel.execute('%env PK_DOC_SHOWN=visible')).stdout, 'env: PK_DOC_SHOWN=visible\n')
})

test('%cd - returns to the previous directory; with none it says so', async (t) => {
  const kernel = await startKernel({ cwd: '/' })
  t.after(() => kernel.shutdown())
  const none = await kernel.execute('%cd -')
  assert.equal(none.status, 'error')
  assert.match(none.error.evalue, /no previous directory/)
  const tmp = require('node:fs').realpathSync(require('node:os').tmpdir())
  await kernel.execute(`%cd ${tmp}`)
  await kernel.execute('%cd /usr')
  await kernel.execute('%cd -')
  assert.equal((await kernel.execute('import os\nos.getcwd()')).result['text/plain'], `'${tmp}'`)
  await kernel.execute('%cd -')
  assert.equal((await kernel.execute('os.getcwd()')).result['text/plain'], "'/usr'", 'and back again')
})

test('envPrefix: the brand prefix the filter keeps (and whose secrets it drops) is the kernel\'s own', async (t) => {
  const baseEnv = { ...process.env, ACME_MODE: 'kept', ACME_TOKEN: 'dropped', PYKERNEL_MODE: 'not ours', ACME_DB_PASSWORD: 'dropped' }
  const kernel = await startKernel({ envPrefix: 'ACME_', baseEnv })
  t.after(() => kernel.shutdown())
  const seen = await kernel.execute("import os\nsorted((k, v) for k, v in os.environ.items() if k.startswith(('ACME_', 'PYKERNEL_MODE')))")
  assert.equal(seen.result['text/plain'], "[('ACME_MODE', 'kept')]")
})

test('top-level await: every cell runs on one event loop, so tasks and loop-bound objects carry over', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await kernel.execute('import asyncio\nfirst = asyncio.get_running_loop()\nevent = asyncio.Event()\ntask = asyncio.ensure_future(event.wait())\nawait asyncio.sleep(0)')
  const r = await kernel.execute('event.set()\nawait task\nasyncio.get_running_loop() is first, task.done()')
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(r.result['text/plain'], '(True, True)')
})

test('PYKERNEL_TRACE=1 logs the lifecycle to stderr; unset, nothing', async () => {
  const { spawnSync } = require('node:child_process')
  const script = `const { Kernel } = require(${JSON.stringify(require('node:path').resolve(__dirname, '..'))})
Kernel.start({ interpreter: process.env.PYKERNEL_TEST_PYTHON || undefined }).then(async (k) => { await k.execute('1'); await k.shutdown() })`
  const run = (trace) => spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, PYKERNEL_TRACE: trace }, timeout: 60_000 })
  const traced = run('1')
  assert.equal(traced.status, 0, traced.stderr)
  assert.match(traced.stderr, /kernel started pid=\d+/)
  assert.match(traced.stderr, /execute pid=\d+/)
  const quiet = run('0')
  assert.equal(quiet.status, 0, quiet.stderr)
  assert.equal(quiet.stderr, '')
})

test('renderBundle({statusMime}) reads the status under the given type, and only there', () => {
  const { renderBundle } = require('..')
  const bundle = { 'application/x-acme': { op: 'log', message: 'hi' }, 'text/plain': 'x' }
  assert.deepEqual(renderBundle(bundle, { statusMime: 'application/x-acme' }).status, { op: 'log', message: 'hi' })
  assert.equal(renderBundle(bundle).status, undefined, 'not a status under the default type')
  const plain = renderBundle({ 'application/x-pykernel-status': { op: 'phase', title: 'one' } })
  assert.deepEqual(plain.status, { op: 'phase', title: 'one' }, 'the default type')
  assert.equal(plain.text, '', 'a status-only bundle has no text')
  assert.equal(renderBundle({ 'application/x-pykernel-status': { op: 'phase' } }, { statusMime: 'application/x-acme' }).status, undefined)
})

test('a bridge call pending when its cell is interrupted fails with "bridge call ... aborted"', async (t) => {
  const kernel = await startKernel({
    onCall: (call) => (call.name === 'slow' ? new Promise((r) => setTimeout(() => r('late'), 3000)) : null),
  })
  t.after(() => kernel.shutdown())
  const code = [
    'import threading, time',
    'seen = []',
    'def worker():',
    '    try:',
    '        seen.append(tool.slow())',
    '    except RuntimeError as e:',
    '        seen.append(str(e))',
    'thread = threading.Thread(target=worker)',
    'thread.start()',
    'time.sleep(30)',
  ].join('\n')
  const r = await kernel.execute(code, { timeoutMs: 500 })
  assert.equal(r.timedOut, true)
  const after = await kernel.execute('thread.join(5)\nseen')
  assert.equal(after.result['text/plain'], '["bridge call \'slow\' aborted: eval cell was interrupted"]')
})

test('evaluate keeps a 20 KiB head and a 50 KiB tail of whole lines, and counts what it elided', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const LINES = 100_000
  const r = await kernel.evaluate([{ code: `for i in range(${LINES}): print('line %06d' % i)` }])
  assert.equal(r.exitCode, 0)
  const marker = r.output.match(/\n\[…(\d+) lines elided…\]\n/)
  assert.ok(marker, 'the elision marker')
  const head = r.output.slice(0, marker.index + 1)
  const tail = r.output.slice(marker.index + marker[0].length)
  // Each line is 12 bytes: as many whole lines as fit in 20 KiB and in 50 KiB.
  const headLines = Math.floor((20 * 1024) / 12)
  const tailLines = Math.floor((50 * 1024) / 12)
  assert.equal(Buffer.byteLength(head), headLines * 12)
  assert.equal(Buffer.byteLength(tail), tailLines * 12)
  assert.ok(head.startsWith('line 000000\n'))
  assert.ok(tail.endsWith('line 099999\n'))
  assert.equal(Number(marker[1]), LINES - headLines - tailLines)
  assert.equal(r.truncated.totalLines, LINES)
  assert.equal(r.truncated.totalBytes, LINES * 12)
})

test('evaluate collects JPEG images beside PNG ones, in order, as base64', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const code = [
    'from PIL import Image',
    'import io, base64',
    "buffer = io.BytesIO(); Image.new('RGB', (7, 5), 'red').save(buffer, 'JPEG')",
    "display({'image/jpeg': base64.b64encode(buffer.getvalue()).decode()}, raw=True)",
    "Image.new('RGB', (3, 2), 'blue')",
  ].join('\n')
  const r = await kernel.evaluate([{ code }])
  assert.equal(r.exitCode, 0, r.output)
  assert.deepEqual(r.images.map((i) => i.mime), ['image/jpeg', 'image/png'])
  const jpeg = Buffer.from(r.images[0].data, 'base64')
  assert.deepEqual([...jpeg.subarray(0, 3)], [0xff, 0xd8, 0xff], 'a JPEG, as it was displayed')
  assert.match(r.output, /displayed 2 image\(s\)/)
})

test('ERR_RUNNER_DIR: no directory for the runner files (TMPDIR unusable) fails the start, naming the directory', () => {
  const { spawnSync } = require('node:child_process')
  const script = `require(${JSON.stringify(require('node:path').resolve(__dirname, '..'))}).Kernel.start({ interpreter: process.env.PYKERNEL_TEST_PYTHON || undefined })
  .then((k) => { console.log('started'); return k.shutdown() }, (e) => console.log(JSON.stringify({ code: e.code, message: e.message })))`
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, TMPDIR: '/proc/pykernel-no-such-dir' }, timeout: 60_000 })
  assert.equal(r.status, 0, r.stderr)
  const { code, message } = JSON.parse(r.stdout.trim())
  assert.equal(code, 'ERR_RUNNER_DIR')
  assert.match(message, /\/proc\/pykernel-no-such-dir\/pykernel-\d+/)
  assert.match(message, /no private directory could be made/)
})

test('shutdownGraceMs: how long each step of a pool\'s shutdown waits before the next signal', async () => {
  const { KernelPool } = require('..')
  const { kernelDefaults } = require('./helpers/kernel')
  // A kernel that lingers on exit (an atexit handler that sleeps) and ignores SIGTERM:
  // only SIGKILL ends it, after two graces.
  const stubborn = "import atexit, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\natexit.register(time.sleep, 60)"
  const disposeTime = async (shutdownGraceMs) => {
    const pool = new KernelPool({ kernel: kernelDefaults(), prewarm: 0, shutdownGraceMs })
    const r = await pool.execute({ sessionId: 's', cells: [{ code: stubborn }] })
    assert.equal(r.exitCode, 0, r.output)
    const started = Date.now()
    await pool.disposeOwner('s')
    const ms = Date.now() - started
    await pool.disposeAll()
    return ms
  }
  const quick = await disposeTime(100)
  const slow = await disposeTime(1500)
  assert.ok(slow >= 3000, `two 1.5 s graces before the SIGKILL, yet it took ${slow} ms`)
  assert.ok(quick < slow / 2, `with 100 ms graces it took ${quick} ms (${slow} ms with 1.5 s)`)
})

test('session keys: sessionId, else sessionFile, else the cwd', async (t) => {
  const { KernelPool } = require('..')
  const { kernelDefaults, tempDir } = require('./helpers/kernel')
  const pool = new KernelPool({ kernel: kernelDefaults(), prewarm: 0 })
  t.after(() => pool.disposeAll())
  const run = async (request, code) => {
    const r = await pool.execute({ ...request, cells: [{ code }] })
    assert.equal(r.exitCode, 0, r.output)
    return r.output.trim()
  }
  await run({ sessionFile: '/chats/a.json' }, "mark = 'a'")
  assert.equal(await run({ sessionFile: '/chats/a.json' }, 'mark'), "'a'", 'the same file, the same session')
  assert.equal(await run({ sessionFile: '/chats/b.json' }, "'mark' in globals()"), 'False', 'another file, another session')
  await run({ sessionId: 'one', sessionFile: '/chats/x.json' }, "mark = 'id'")
  assert.equal(await run({ sessionId: 'one', sessionFile: '/chats/y.json' }, 'mark'), "'id'", 'sessionId wins over sessionFile')
  const cwd = tempDir('pk-session-cwd-')
  await run({ cwd }, "mark = 'cwd'")
  assert.equal(await run({ cwd }, 'mark'), "'cwd'", 'neither: keyed by the cwd')
  const keys = pool.sessions.map((s) => s.key.split(' ')[0]).sort()
  assert.deepEqual(keys, [`cwd:${cwd}`, 'file:/chats/a.json', 'file:/chats/b.json', 'session:one'].sort())
})

/** The zygotes this process started: its children whose environment names one. */
function zygotesOfThisHost() {
  const fs = require('node:fs')
  const { hostChildren } = require('./helpers/kernel')
  return hostChildren((pid) => fs.readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').some((v) => v.startsWith('PYKERNEL_ZYGOTE=')))
}

test('a shutdown that is not confirmed keeps its room and is retried until it is', { timeout: 60_000 }, async (t) => {
  const { execFileSync } = require('node:child_process')
  const { KernelPool } = require('..')
  const { kernelDefaults } = require('./helpers/kernel')
  // A forked kernel's exit is known from its zygote's report. With the zygote stopped, the
  // kernel dies on SIGKILL but nobody says so: its shutdown stays unconfirmed, and the pool
  // must neither lose track of it nor hand its room to another kernel before it is gone.
  const pool = new KernelPool({ kernel: { ...kernelDefaults(), preload: ['json'] }, prewarm: 0, maxSessions: 1, shutdownGraceMs: 100, acquireTimeoutMs: 30_000 })
  t.after(() => pool.disposeAll())
  const first = await pool.execute({ sessionId: 'a', cells: [{ code: 'import os; os.getpid()' }] })
  assert.equal(first.exitCode, 0, first.output)
  const zygotes = zygotesOfThisHost()
  assert.ok(zygotes.length >= 1, 'the session\'s kernel was forked by a zygote of this host')
  for (const pid of zygotes) process.kill(pid, 'SIGSTOP')
  let resumed = false
  t.after(() => resumed || zygotes.forEach((pid) => process.kill(pid, 'SIGCONT')))
  await pool.disposeOwner('a', { budgetMs: 600 })
  // The next session runs another interpreter (the venv's base), so its kernel comes from
  // a zygote of its own, not from the stopped one: only room can hold it back.
  const base = execFileSync(kernelDefaults().interpreter || 'python3', ['-c', 'import sys; print(sys._base_executable)'], { encoding: 'utf8' }).trim()
  let ran = false
  const next = pool.execute({ sessionId: 'b', interpreter: base, cells: [{ code: '6*7' }] }).finally(() => (ran = true))
  await new Promise((r) => setTimeout(r, 1500))
  assert.equal(ran, false, 'the unconfirmed kernel still holds the only room: the next session waits')
  assert.deepEqual(pool.sessions.map((s) => s.key.split(' ')[0]), ['session:b'], 'the disposed session is gone, the next one waits')
  for (const pid of zygotes) process.kill(pid, 'SIGCONT')
  resumed = true
  const r = await next
  assert.equal(r.exitCode, 0, r.output)
  assert.equal(r.output.trim(), '42', 'retried, confirmed, and its room given to the next session')
})

test('ERR_IO: an artifact or a kv store that cannot be read is an I/O error naming the file, not a hang', async () => {
  const fs = require('node:fs')
  const path = require('node:path')
  const { execFileSync } = require('node:child_process')
  const { readArtifact, KvStore } = require('..')
  const { tempDir } = require('./helpers/kernel')
  const artifactsDir = tempDir('pk-err-io-')
  // A FIFO planted where an artifact would be: opening it for reading would wait for a
  // writer forever; a directory cannot be read as text.
  execFileSync('mkfifo', [path.join(artifactsDir, 'planted.txt')])
  fs.mkdirSync(path.join(artifactsDir, 'folder.txt'))
  for (const id of ['planted', 'folder']) {
    await assert.rejects(readArtifact(`artifact://${id}`, { artifactsDir }), (e) => {
      assert.equal(e.code, 'ERR_IO')
      assert.match(e.message, new RegExp(`reading ${path.join(artifactsDir, id)}\\.txt: .*not a regular file`))
      return true
    })
  }
  const store = new KvStore(artifactsDir, 'session-1')
  store.set('k', 1)
  fs.rmSync(store.path)
  fs.mkdirSync(store.path)
  assert.throws(() => store.get('k'), (e) => {
    assert.equal(e.code, 'ERR_IO')
    assert.ok(e.message.includes(store.path), e.message)
    return true
  })
})
