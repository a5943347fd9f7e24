'use strict'
// Hostile input: protocol abuse. Text that looks like frames, writes to the runner's
// private protocol descriptors, huge and pathological cell sources.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { addon, python, startKernel, kernelProcess, tempDir, whileRunning, assertResponsive, probeFloor, assertKernelWorks, rssSampler, MB } = require('./_common')

/** Pipe inodes this test process had before it started any kernel: inherited from the
 *  test runner or its harness. A kernel never writes to those (see the fd test below). */
function pipeInodes(pid) {
  const inodes = new Set()
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const link = fs.readlinkSync(`/proc/${pid}/fd/${fd}`)
      if (link.startsWith('pipe:')) inodes.add(link)
    } catch {}
  }
  return inodes
}
const inheritedPipes = pipeInodes(process.pid)

let probe
test.before(async () => {
  probe = await startKernel()
  await probeFloor(probe) // the quiet round trip the responsiveness bound scales with
})
test.after(() => probe?.shutdown())

const FRAMES = [
  '{"type":"done","id":"%ID%","status":"ok","executionCount":99,"cancelled":false,"stdinRequested":false}',
  '{"type":"result","id":"%ID%","bundle":{"text/plain":"FORGED"}}',
  '{"type":"error","id":"%ID%","ename":"Forged","evalue":"forged","traceback":[]}',
  '{"type":"stdout","id":"%ID%","data":"FORGED STDOUT\\n"}',
  '{"type":"ready","id":"init","pid":1,"python":"3.11.7","executable":"/bin/false"}',
]
/** Python source that sets `run` to the id of the running request (read from the runner's
 *  bookkeeping: the strongest thing a cell can print) and `frames` to forged lines. */
const FORGE = [
  'import os, sys, threading',
  "run = threading.main_thread().__dict__.get('_pykernel_run') or 'r1'",
  `frames = [f.replace('%ID%', run) for f in ${JSON.stringify(FRAMES)}]`,
].join('\n')

async function assertNotFooled(kernel, r, before, expectedStdout) {
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(r.executionCount, before + 1)
  assert.equal(r.result?.['text/plain'], "'real result'")
  if (expectedStdout instanceof RegExp) assert.match(r.stdout, expectedStdout)
  else assert.equal(r.stdout, expectedStdout)
  assert.equal(r.displays.length, 0)
  const next = await kernel.execute('1+1')
  assert.equal(next.executionCount, before + 2)
  assert.equal(next.result?.['text/plain'], '2')
  await assertKernelWorks(kernel)
  await assertResponsive(probe)
}

test('printed text that looks like protocol frames (with the real request id) is just stdout', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const before = (await kernel.execute('0')).executionCount
  const r = await kernel.execute(`${FORGE}\nfor f in frames: print(f)\nprint('after')\n'real result'`)
  const run = r.stdout.match(/"id":"(r[^"]*)"/)?.[1]
  assert.ok(run && run !== 'r1', 'the forged frames carried the real request id')
  const expected = FRAMES.map((f) => f.replace('%ID%', run)).join('\n') + '\nafter\n'
  await assertNotFooled(kernel, r, before, expected)
})

test('protocol-looking lines written by C code to fd 1 (os.write) are just stdout', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const before = (await kernel.execute('0')).executionCount
  const r = await kernel.execute(`${FORGE}\nfor f in frames: os.write(1, f.encode() + b'\\n')\nos.write(1, b'{"type":"done"')\nos.write(1, b'\\nafter\\n')\n'real result'`)
  const run = r.stdout.match(/"id":"(r[^"]*)"/)?.[1]
  const expected = FRAMES.map((f) => f.replace('%ID%', run)).join('\n') + '\n{"type":"done"\nafter\n'
  await assertNotFooled(kernel, r, before, expected)
})

/** The kernel's pipe descriptors other than 0/1/2, as a cell could find them in
 *  /proc/self/fd, leaving out any pipe inherited from the test runner's own harness. */
function guessableProtocolFds(pid) {
  const fds = []
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`).map(Number)) {
    if (fd <= 2) continue
    let link
    try {
      link = fs.readlinkSync(`/proc/${pid}/fd/${fd}`)
    } catch {
      continue
    }
    if (link.startsWith('pipe:') && !inheritedPipes.has(link)) fds.push(fd)
  }
  return fds
}

test('forged done frames with guessed ids and garbage without a newline, written to every private pipe fd, fool nobody', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const before = (await kernel.execute('0')).executionCount
  // kernel.pid is the init of the kernel's PID namespace; the runner that reads the
  // protocol is its child, the Python kernel.
  const fds = guessableProtocolFds(kernelProcess(kernel.pid))
  assert.ok(fds.length >= 2, `the runner keeps private pipe fds: ${fds}`)
  const guessed = Array.from({ length: 40 }, (_, i) => `r${i}`).concat(['init', 'p1', 'e1'])
  const code = [
    'import os, time',
    `fds = ${JSON.stringify(fds)}`,
    `ids = ${JSON.stringify(guessed)}`,
    `done = '${FRAMES[0]}'`,
    'hit = []',
    'for fd in fds:',
    '    try:',
    "        os.write(fd, b'garbage without newline {\"type\":\"done\",\"id\":\"r')",
    "        os.write(fd, b'\\n' + ''.join(done.replace('%ID%', i) + '\\n' for i in ids).encode())",
    "        os.write(fd, b'{\"type\":\"stdout\",\"id\":\"r1\",\"data\":\"more garbage, no newline')",
    '        hit.append(fd)',
    '    except OSError:',
    '        pass',
    "print('wrote to', len(hit), 'fds')",
    'time.sleep(0.2)',
    "print('after')",
    "'real result'",
  ].join('\n')
  const r = await kernel.execute(code)
  t.diagnostic(`candidate fds ${fds.join(',')}`)
  await assertNotFooled(kernel, r, before, /^wrote to [1-9]\d* fds\nafter\n$/)
})

/** Python that sets `channel` to the runner's protocol channel (its `fd` is the pipe the
 *  host reads frames from): a cell can always find it, here through the garbage collector. */
const FIND_CHANNEL = [
  'import gc, os, threading',
  "channel = next(o for o in gc.get_objects() if type(o).__name__ == 'Channel' and hasattr(o, 'fd'))",
].join('\n')

test('frames forged for a made-up id and for the previous, finished request are dropped and counted', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const first = await kernel.execute("previous = __import__('threading').main_thread().__dict__['_pykernel_run']\n'first'")
  assert.equal(first.result?.['text/plain'], "'first'")
  const before = kernel.droppedFrames
  assert.equal(typeof before, 'number')
  const ids = ['previous', "'r999-0badc0de'", "'init'"]
  const lines = [
    ...ids.flatMap((id) => FRAMES.slice(0, 4).map((f) => `(${JSON.stringify(f)}).replace('%ID%', ${id})`)),
    ...ids.map((id) => `'{"type":"display","id":"%ID%","bundle":{"text/plain":"FORGED DISPLAY"}}'.replace('%ID%', ${id})`),
    `'{"type":"stdout","data":"FORGED, NO ID"}'`,
    `'not a frame at all'`,
  ]
  const code = [
    FIND_CHANNEL,
    `lines = [${lines.join(', ')}]`,
    "for line in lines: os.write(channel.fd, line.encode() + b'\\n')",
    "print('after')",
    "'real result'",
  ].join('\n')
  const r = await kernel.execute(code)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(r.stdout, 'after\n')
  assert.equal(r.result?.['text/plain'], "'real result'")
  assert.deepEqual(r.displays, [])
  assert.equal(r.executionCount, first.executionCount + 1)
  assert.equal(kernel.droppedFrames - before, lines.length, 'every forged line was dropped and counted')
  const next = await kernel.execute("previous != __import__('threading').main_thread().__dict__['_pykernel_run']")
  assert.equal(next.result?.['text/plain'], 'True')
  assert.equal(next.executionCount, first.executionCount + 2)
  assert.equal(kernel.droppedFrames - before, lines.length, 'nothing more was dropped')
  await assertKernelWorks(kernel)
})

/** Python writing `mb` MiB without a newline to the protocol pipe. */
const floodCode = (mb) => [
  FIND_CHANNEL,
  "chunk = memoryview(b'x' * (1 << 20))",
  `for _ in range(${mb}):`,
  '    left = chunk',
  '    while left: left = left[os.write(channel.fd, left):]',
  "print('the host read it all')",
].join('\n')
const FLOOD_MB = 300
/** What the host may grow by while it reads the flood: the 64 MiB frame limit and room
 *  for the rest of the process (measured: about +70 MB; without the limit, +600 MB). */
const FLOOD_RSS_BOUND = 160 * MB
const FRAME_LIMIT_MESSAGE = 'the kernel sent a protocol frame over 64 MiB (not allowed); it was killed'

test('300 MB without a newline on the protocol pipe: the kernel is killed at the frame limit, host memory stays bounded', { timeout: 60_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await kernel.execute('0')
  const rss = rssSampler(20)
  const r = await kernel.execute(floodCode(FLOOD_MB))
  const mem = rss.stop()
  t.diagnostic(`${FLOOD_MB} MB flood: host RSS ${(mem.start / MB).toFixed(0)} -> max ${(mem.max / MB).toFixed(0)} MB (+${(mem.growth / MB).toFixed(0)} MB)`)
  assert.ok(mem.growth < FLOOD_RSS_BOUND, `host RSS grew by ${(mem.growth / MB).toFixed(0)} MB for ${FLOOD_MB} MB written (bound ${FLOOD_RSS_BOUND / MB} MB)`)
  assert.equal(r.kernelDied, true, `the kernel was not killed: ${r.status} ${r.stdout} ${JSON.stringify(r.error)}`)
  assert.equal(r.error?.ename, 'KernelDied')
  assert.equal(r.error.evalue, FRAME_LIMIT_MESSAGE)
  assert.equal(kernel.alive, false)
  await assert.rejects(kernel.execute('1'), { code: 'ERR_KERNEL_DEAD' })
  await assertResponsive(probe)
})

test('the same flood through a pool: the result says why, the cell is not retried, the next call gets a new kernel', { timeout: 60_000 }, async (t) => {
  const pool = new addon.KernelPool({ kernel: { interpreter: python }, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const call = (code) => pool.execute({ sessionId: 'flood', cells: [{ code }] })
  const first = await call('x = 1\nx')
  assert.equal(first.exitCode, 0, first.output)
  const r = await call(floodCode(FLOOD_MB))
  assert.equal(r.exitCode, 1)
  assert.equal(r.kernelDied, true)
  assert.equal(r.kernelKilled, true)
  assert.equal(r.kernelRestarted, false, 'a cell that floods would only flood again')
  assert.ok(r.annotations.some((a) => a.startsWith(FRAME_LIMIT_MESSAGE)), JSON.stringify(r.annotations))
  const next = await call('6 * 7')
  assert.equal(next.exitCode, 0, next.output)
  assert.match(next.output, /42/)
  const gone = await call("'x' in dir()")
  assert.match(gone.output, /False/, 'the new kernel starts with fresh state')
})

test('legitimate output never reaches the frame limit: long prints are split, a 20 MB image is kept, an oversized value is replaced by a notice', { timeout: 120_000 }, async (t) => {
  const calls = []
  const kernel = await startKernel({ onCall: (call) => calls.push(call.name) })
  t.after(() => kernel.shutdown())
  const BIG = 70 << 20 // past the 64 MiB limit as one frame
  let printed = 0
  const onEvent = (event) => {
    if (event.type === 'stdout') printed += event.text.length
  }
  const print = await kernel.execute(`import sys\nsys.stdout.write('p' * ${BIG})\nsys.stdout.flush()`, { onEvent })
  assert.equal(print.status, 'ok', JSON.stringify(print.error))
  assert.equal(printed, BIG, 'every character of one long write arrives')
  assert.ok(print.stdout.length === BIG, `stdout kept ${print.stdout.length} of ${BIG} characters`)

  // A 20 MB PNG (random bytes after a PNG signature) as base64: 27 MB in one frame.
  const image = await kernel.execute("import base64, os\ndisplay({'image/png': base64.b64encode(b'\\x89PNG\\r\\n\\x1a\\n' + os.urandom(20_000_000)).decode()}, raw=True)")
  assert.equal(image.status, 'ok', JSON.stringify(image.error))
  assert.equal(image.displays.length, 1)
  assert.equal(image.displays[0]['image/png'].length, Math.ceil(20_000_008 / 3) * 4)

  const value = await kernel.execute(`'v' * ${BIG}`)
  assert.equal(value.status, 'ok', JSON.stringify(value.error))
  const stated = (text) => String(text).slice(0, 200) // never a 70 MB assertion message
  assert.match(stated(value.result?.['text/plain']), /^\[pykernel: this result was 70\.0 MiB as a protocol frame, over the 64 MiB limit; it was not sent\]$/)
  const shown = await kernel.execute(`display({'text/plain': 'd' * ${BIG}}, raw=True)`)
  assert.match(stated(shown.displays[0]?.['text/plain']), /^\[pykernel: this display was 70\.0 MiB/)

  const error = await kernel.execute(`raise ValueError('e' * ${BIG})`)
  assert.equal(error.error?.ename, 'ValueError')
  assert.equal(error.kernelDied, false)
  // The frame held the message twice (in the traceback too); its start is kept.
  assert.equal(error.error.evalue.slice(0, 65536), 'e'.repeat(65536))
  assert.match(error.error.evalue.slice(65536), /^\n\[pykernel: this error was 140\.0 MiB as a protocol frame, over the 64 MiB limit; it was not sent\]$/)
  const traceback = error.error.traceback.join('')
  assert.ok(traceback.length < 10_000, `the traceback is cut to ${traceback.length} characters`)
  assert.ok(traceback.includes('ValueError: eeee'), 'the end of the traceback is kept')

  const call = await kernel.execute(`try:\n    tool.big(data='c' * ${BIG})\nexcept ValueError as e:\n    print(e)`)
  assert.equal(call.status, 'ok', JSON.stringify(call.error))
  assert.match(stated(call.stdout), /^bridge call 'big': its arguments are 70\.0 MiB as JSON, over the 64 MiB a protocol frame may hold; pass large data in a file instead\n$/)
  assert.deepEqual(calls, [], 'the call never reached the host')
  await assertKernelWorks(kernel)
})

test('the kernel inherits no descriptor of its host beyond its own pipes', { timeout: 20_000 }, async (t) => {
  // A host holding an inheritable (non-CLOEXEC) descriptor: here fd 100 opened by bash
  // before it execs Node (Node marks low fds close-on-exec at start-up, not high ones); in
  // real hosts a harness pipe or a log file. A cell could write into it (or read it). The
  // kernel must not get it.
  const dir = tempDir('pykernel-hostile-fd-')
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const target = path.join(dir, 'host-only.log')
  const script = `
    const { Kernel } = require(${JSON.stringify(path.resolve(__dirname, '..', '..'))});
    Kernel.start({ interpreter: ${JSON.stringify(python || null)} || undefined }).then(async (k) => {
      await k.execute('1');
      process.stdout.write(k.pid + '\\n');
      setInterval(() => {}, 1000);
    });`
  const child = spawn('bash', ['-c', 'exec 100>>"$0"; exec "$1" -e "$2"', target, process.execPath, script], { stdio: ['ignore', 'pipe', 'inherit'] })
  try {
    const kernelPid = await new Promise((resolve, reject) => {
      let out = ''
      child.stdout.on('data', (d) => {
        out += d
        if (out.includes('\n')) resolve(Number(out.trim()))
      })
      child.on('exit', () => reject(new Error('host child exited early')))
    })
    assert.equal(fs.readlinkSync(`/proc/${child.pid}/fd/100`), target, 'the host holds fd 100')
    // kernelPid is the init of the kernel's PID namespace; the Python kernel is its child.
    const py = kernelProcess(kernelPid)
    assert.ok(py, 'init has the kernel as its child')
    for (const pid of [kernelPid, py]) {
      const links = fs.readdirSync(`/proc/${pid}/fd`).map((fd) => {
        try {
          return [fd, fs.readlinkSync(`/proc/${pid}/fd/${fd}`)]
        } catch {
          return [fd, '?']
        }
      })
      const leaked = links.filter(([, link]) => link === target)
      assert.deepEqual(leaked, [], `process ${pid} of the kernel holds the host's fd 100 (${target}) as fd ${leaked.map(([fd]) => fd)}`)
    }
  } finally {
    child.kill('SIGKILL')
  }
})

test('a 100 MB cell source runs, and the host stays responsive meanwhile', { timeout: 60_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const SIZE = 100 * 1000 * 1000
  const code = 'x = "' + 'a'.repeat(SIZE) + '"\nlen(x)'
  const rss = rssSampler()
  const started = Date.now()
  const { value: r, overlapped } = await whileRunning(probe, () => kernel.execute(code), { ready: () => new Promise((r) => setTimeout(r, 300)), requireOverlap: false })
  const mem = rss.stop()
  t.diagnostic(`100 MB source: ${Date.now() - started} ms, probe overlapped: ${overlapped}, host RSS +${(mem.growth / MB).toFixed(0)} MB`)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(r.result?.['text/plain'], String(SIZE))
  const freed = await kernel.execute('del x\n1')
  assert.equal(freed.status, 'ok')
  await assertKernelWorks(kernel)
})

/** The longest stall of this process's event loop while `fn` runs. */
async function longestStall(fn) {
  let last = performance.now()
  let longest = 0
  const ticker = setInterval(() => {
    const now = performance.now()
    longest = Math.max(longest, now - last)
    last = now
  }, 2)
  try {
    await fn()
  } finally {
    clearInterval(ticker)
  }
  return longest
}

test('a 100 MB cell source stalls the event loop no longer than copying it out of JavaScript', { timeout: 90_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const code = '#' + 'a'.repeat(100 << 20) + '\n6*7'
  // The floor: a call must copy the string out of the JavaScript heap on the JavaScript
  // thread, as Buffer.from does. Encoding the request (a second pass) belongs elsewhere.
  // Each try times that copy (the better of two) right before the call, so both see the
  // same load; a major GC of the 100 MB strings, or the scheduler, can land in any one try,
  // while a stall the call itself causes is in every one: the best try of five is judged.
  const copyTime = () => {
    const times = []
    for (let i = 0; i < 2; i++) {
      const started = performance.now()
      Buffer.from(code, 'utf8')
      times.push(performance.now() - started)
    }
    return Math.min(...times)
  }
  const excess = (stall, copy) => stall - (1.5 * copy + 50)
  const best = []
  for (const [name, run] of [['execute', () => kernel.execute(code)], ['evaluate', () => kernel.evaluate([{ code }])]]) {
    const tries = []
    for (let i = 0; i < 5; i++) {
      const copy = copyTime()
      let result
      const stall = await longestStall(async () => { result = await run() })
      assert.equal(result.status ?? (result.exitCode === 0 ? 'ok' : result.output), 'ok')
      tries.push({ stall, copy })
    }
    const bestTry = tries.reduce((a, b) => (excess(b.stall, b.copy) < excess(a.stall, a.copy) ? b : a))
    best.push({ name, ...bestTry })
  }
  t.diagnostic(best.map((b) => `${b.name}: stalled ${b.stall.toFixed(0)} ms, Buffer.from ${b.copy.toFixed(0)} ms`).join('; '))
  for (const { name, stall, copy } of best) {
    assert.ok(excess(stall, copy) < 0, `${name}: the event loop stalled ${stall.toFixed(0)} ms at best, copying the source takes ${copy.toFixed(0)} ms (bound 1.5 x + 50 ms)`)
  }
})

test('a cell of only magics runs them all', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const r = await kernel.execute('%pwd\n%cd /\n%env HOSTILE_MAGIC=1\n%env HOSTILE_MAGIC\n%who\n%time 1+1')
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.match(r.stdout, /^\/\n/)
  assert.match(r.stdout, /env: HOSTILE_MAGIC=1\n/)
  assert.match(r.stdout, /Wall time/)
  assert.deepEqual(r.statuses.map((s) => s.op), ['cd', 'time'])
  assert.equal(r.result?.['text/plain'], '2')
  const bare = await Promise.all(['%%bash', '!', '%cd', '%%capture'].map((c) => kernel.execute(c)))
  for (const b of bare) assert.equal(b.status, 'ok', JSON.stringify(b.error))
  for (const c of ['%', '%%', '%%%']) {
    const b = await kernel.execute(c)
    assert.equal(b.error?.ename, 'SyntaxError', `${c}: ${JSON.stringify(b.error)}`)
  }
  const unknown = await kernel.execute('%nosuchmagic\n%%alsonot')
  assert.equal(unknown.error?.ename, 'NameError')
  assert.match(unknown.error.evalue, /UsageError: Line magic function '%nosuchmagic' not found/)
  await assertKernelWorks(kernel)
  await assertResponsive(probe)
})

for (const [name, source, ename] of [
  ["'(' * 100000", '('.repeat(100_000), /^SyntaxError$/],
  ["'[' * 5000 + ']' * 5000", '['.repeat(5000) + ']'.repeat(5000), /^SyntaxError$/],
  ['1000 nested if blocks', Array.from({ length: 1000 }, (_, i) => '    '.repeat(i) + 'if 1:\n').join('') + '    '.repeat(1000) + 'pass\n', /^IndentationError$/],
  ["'-' * 100000 + '1'", 'x = ' + '-'.repeat(100_000) + '1', /^(SyntaxError|RecursionError|MemoryError)$/],
  ["'1+' * 100000 + '1'", 'x = ' + '1+'.repeat(100_000) + '1', /^(SyntaxError|RecursionError|MemoryError)$/],
  ["'f' + '()' * 100000", 'f' + '()'.repeat(100_000), /^(SyntaxError|RecursionError|MemoryError)$/],
]) {
  test(`deeply nested code that breaks the parser (${name}): a clear error, the kernel lives`, async (t) => {
    const kernel = await startKernel()
    t.after(() => kernel.shutdown())
    const r = await kernel.execute(source, { timeoutMs: 20_000 })
    assert.equal(r.status, 'error')
    assert.equal(r.kernelDied, false)
    assert.match(r.error.ename, ename, `${r.error.ename}: ${r.error.evalue}`)
    await assertKernelWorks(kernel)
    await assertResponsive(probe)
  })
}
