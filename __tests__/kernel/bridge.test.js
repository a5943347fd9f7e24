'use strict'
// The in-band bridge (Python -> host calls) and the watchdog that pauses for it.
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, python, startKernel, run } = require('../helpers/kernel')

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const call = (name, args) => `__pykernel__.bridge_call(${JSON.stringify(name)}, ${JSON.stringify(args)})`

test('a call reaches onCall with its name, args and run id, and its value comes back', async (t) => {
  const calls = []
  const kernel = await startKernel({
    onCall: async (c) => {
      calls.push(c)
      return { echoed: c.args, n: 42 }
    },
  })
  t.after(() => kernel.shutdown())
  const { result } = await run(kernel, call('echo', { path: 'artifact://21:3-4' }))
  assert.equal(result.status, 'ok')
  assert.equal(result.result['text/plain'], "{'echoed': {'path': 'artifact://21:3-4'}, 'n': 42}")
  assert.equal(calls.length, 1)
  assert.equal(calls[0].name, 'echo')
  assert.deepEqual(calls[0].args, { path: 'artifact://21:3-4' })
  assert.match(calls[0].runId, /^r\d+-[0-9a-f]{8}$/)
})

test('a rejection becomes a RuntimeError with its message; no handler says so', async (t) => {
  const kernel = await startKernel({
    onCall: async () => {
      throw new Error('the tool exploded')
    },
  })
  t.after(() => kernel.shutdown())
  const { result } = await run(kernel, call('boom', {}))
  assert.equal(result.error.ename, 'RuntimeError')
  assert.match(result.error.evalue, /the tool exploded/)
  assert.equal((await run(kernel, '1 + 1')).result.result['text/plain'], '2')

  const bare = await startKernel()
  t.after(() => bare.shutdown())
  const none = await run(bare, call('x', {}))
  assert.equal(none.result.error.ename, 'RuntimeError')
  assert.equal(none.result.error.evalue, 'no host bridge is attached to this kernel')
})

test('calls from many threads run at once and each gets its own answer', async (t) => {
  let inFlight = 0
  let peak = 0
  const kernel = await startKernel({
    onCall: async (c) => {
      inFlight++
      peak = Math.max(peak, inFlight)
      await sleep(200)
      inFlight--
      return c.args.i * 10
    },
  })
  t.after(() => kernel.shutdown())
  const code = [
    'from concurrent.futures import ThreadPoolExecutor',
    'with ThreadPoolExecutor(8) as ex:',
    `    out = list(ex.map(lambda i: __pykernel__.bridge_call('f', {'i': i}), range(8)))`,
    'out',
  ].join('\n')
  const { result } = await run(kernel, code)
  assert.equal(result.result['text/plain'], '[0, 10, 20, 30, 40, 50, 60, 70]')
  assert.equal(peak, 8, 'all eight calls were in flight at once')
})

test('100 threads calling at once: the host works on 64 at a time, and every call is answered', async (t) => {
  let inFlight = 0
  let peak = 0
  // The first calls are held until 64 are in flight (or 10 s pass, however slow the
  // machine), then a while longer, so a 65th would be seen if the host let one through.
  let full
  const filled = new Promise((resolve) => {
    full = resolve
    setTimeout(resolve, 10_000).unref()
  })
  const kernel = await startKernel({
    onCall: async (c) => {
      inFlight++
      peak = Math.max(peak, inFlight)
      if (inFlight >= 64) full()
      await filled
      await sleep(300)
      inFlight--
      return c.args.i * 10
    },
  })
  t.after(() => kernel.shutdown())
  // The calls past the 64th wait for a slot (backpressure), none fails.
  const code = [
    'from concurrent.futures import ThreadPoolExecutor',
    'with ThreadPoolExecutor(100) as ex:',
    `    out = list(ex.map(lambda i: __pykernel__.bridge_call('f', {'i': i}), range(100)))`,
    'out == [i * 10 for i in range(100)]',
  ].join('\n')
  const { result } = await run(kernel, code)
  assert.equal(result.status, 'ok', JSON.stringify(result.error))
  assert.equal(result.result['text/plain'], 'True')
  assert.equal(peak, 64, 'at most 64 calls were in flight at once, and that many were')
})

test('64 calls that onCall never answers and one more: the cell still ends at its timeout and the kernel lives', async (t) => {
  const kernel = await startKernel({ onCall: () => new Promise(() => {}) })
  t.after(() => kernel.shutdown())
  // The 65th call waits for a slot the hung calls never free; a cell being stopped waits
  // for none, so its last frames get through.
  const code = [
    'import threading',
    'threads = [threading.Thread(target=lambda: tool.hang(), daemon=True) for _ in range(65)]',
    'for th in threads: th.start()',
    'for th in threads: th.join()',
  ].join('\n')
  const { result } = await run(kernel, code, { timeoutMs: 1500 })
  assert.equal(result.timedOut, true, JSON.stringify(result))
  assert.equal(result.kernelDied, false, `the kernel was not killed: ${JSON.stringify(result.error)}`)
  assert.equal((await run(kernel, '1 + 1')).result.result['text/plain'], '2')
})

test('the watchdog pauses while a call to another model (agent, completion) is in flight', async (t) => {
  const kernel = await startKernel({ onCall: async () => (await sleep(2000), 'slow answer') })
  t.after(() => kernel.shutdown())
  for (const name of ['agent', 'completion']) {
    const { result } = await run(kernel, call(name, { prompt: 'p' }), { timeoutMs: 1000 })
    assert.equal(result.timedOut, false, name)
    assert.equal(result.result['text/plain'], "'slow answer'")
  }
  // A fresh window after the call: 0.6 s of work after a 2 s call fits in 1 s.
  const after = await run(kernel, `${call('agent', { prompt: 'p' })}\nimport time; time.sleep(0.6); 'done'`, { timeoutMs: 1000 })
  assert.equal(after.result.timedOut, false)
  // Work alone still times out, and so does a slow tool call: only another model's time is free.
  const busy = await run(kernel, 'import time; time.sleep(5)', { timeoutMs: 1000 })
  assert.equal(busy.result.timedOut, true)
  const tool = await run(kernel, call('slow', {}), { timeoutMs: 1000 })
  assert.equal(tool.result.timedOut, true, 'a tool call counts against the budget')
})

test('a thread calling tool.ping() in a loop cannot hold the cell\'s clock', async (t) => {
  const kernel = await startKernel({ onCall: async () => (await sleep(5), 'pong') })
  t.after(() => kernel.shutdown())
  const started = Date.now()
  const { result } = await run(
    kernel,
    `import threading, time\ndef ping():\n    while True:\n        ${call('ping', {})}\nthreading.Thread(target=ping, daemon=True).start()\ntime.sleep(30)`,
    { timeoutMs: 1500 },
  )
  const took = Date.now() - started
  assert.equal(result.timedOut, true)
  assert.ok(took < 8000, `the 1.5 s budget held (the cell ended after ${took} ms)`)
})

test('an abort during calls ends the cell cleanly; new calls are refused', async (t) => {
  const seen = []
  const kernel = await startKernel({
    onCall: async (c) => {
      seen.push(c.name)
      await sleep(300)
      return null
    },
  })
  t.after(() => kernel.shutdown())
  const controller = new AbortController()
  setTimeout(() => controller.abort(), 150)
  const code = `${call('first', {})}\n${call('second', {})}`
  const { result } = await run(kernel, code, { signal: controller.signal })
  assert.equal(result.cancelled, true)
  assert.deepEqual(seen, ['first'])
  assert.equal((await run(kernel, '"alive"')).result.result['text/plain'], "'alive'")
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

test('a pool passes its onCall to every kernel', async (t) => {
  const pool = new addon.KernelPool({ kernel: { interpreter: python, onCall: async (c) => `pool saw ${c.name}` } })
  t.after(() => pool.disposeAll())
  const r = await pool.execute({ sessionId: 'b', cells: [{ code: call('hello', {}) }] })
  assert.equal(r.cells[0].result['text/plain'], "'pool saw hello'")
})

/** The timeout-control status events among `events` (from `onEvent`), as `state` names
 *  with stdout text in between, so their order against the cell's output shows. */
const clockAndStdout = (events) =>
  events
    .filter((e) => e.type === 'stdout' || (e.type === 'status' && e.op === 'timeout'))
    .map((e) => (e.type === 'stdout' ? e.text : e.data.state))

test('a call to another model is framed by paused and resumed status events, not output', async (t) => {
  const kernel = await startKernel({ onCall: async (c) => (await sleep(1500), `${c.name} answered`) })
  t.after(() => kernel.shutdown())
  const { result, events } = await run(kernel, `print("before")\nagent("p")\nprint("after")`, { timeoutMs: 1000 })
  assert.equal(result.timedOut, false, 'the 1.5 s call did not use the 1 s budget')
  assert.equal(result.status, 'ok')
  assert.deepEqual(clockAndStdout(events), ['before\n', 'paused', 'resumed', 'after\n'])
  const [paused, resumed] = events.filter((e) => e.op === 'timeout').map((e) => e.data)
  assert.deepEqual(paused, { state: 'paused', call: 'agent' })
  assert.deepEqual(Object.keys(resumed).sort(), ['pausedMs', 'state'])
  assert.ok(resumed.pausedMs >= 1400 && resumed.pausedMs < 5000, `pausedMs ${resumed.pausedMs}`)
  assert.equal(result.stdout, 'before\nafter\n')
  assert.deepEqual(result.statuses.map((s) => s.data.state), ['paused', 'resumed'], 'kept with the result too')

  // completion() stops the clock too; a tool call does not, and says nothing.
  const done = await run(kernel, 'completion("q")')
  assert.deepEqual(clockAndStdout(done.events), ['paused', 'resumed'])
  assert.equal(done.events.find((e) => e.op === 'timeout').data.call, 'completion')
  const tool = await run(kernel, 'tool.search(q=1)')
  assert.equal(tool.result.status, 'ok')
  assert.deepEqual(clockAndStdout(tool.events), [])
})

test('overlapping calls pause the clock once: one paused, one resumed when the last ends', async (t) => {
  const kernel = await startKernel({ onCall: async (c) => (await sleep(c.args.ms), c.args.ms) })
  t.after(() => kernel.shutdown())
  const code = [
    'import threading',
    'out = []',
    'def ask(name, ms):',
    '    out.append(__pykernel__.bridge_call(name, {"ms": ms}))',
    'threads = [threading.Thread(target=ask, args=a) for a in (("agent", 300), ("completion", 600), ("agent", 900))]',
    'for th in threads: th.start()',
    'for th in threads: th.join()',
    'print(sorted(out))',
  ].join('\n')
  const started = Date.now()
  const { result, events } = await run(kernel, code, { timeoutMs: 1000 })
  assert.equal(result.timedOut, false)
  assert.deepEqual(clockAndStdout(events), ['paused', 'resumed', '[300, 600, 900]\n'])
  const resumed = events.filter((e) => e.op === 'timeout')[1].data
  assert.ok(resumed.pausedMs >= 850, `stood still until the last call ended (${resumed.pausedMs} ms)`)
  assert.ok(Date.now() - started < 5000)
})

test('a call still in flight when its cell ends is closed by a resumed event', async (t) => {
  const kernel = await startKernel({ onCall: async () => (await sleep(1500), 'late') })
  t.after(() => kernel.shutdown())
  const code = 'import threading, time\nthreading.Thread(target=lambda: agent("p"), daemon=True).start()\ntime.sleep(0.3)'
  const { result, events } = await run(kernel, code)
  assert.equal(result.status, 'ok')
  assert.deepEqual(clockAndStdout(events), ['paused', 'resumed'])
  // The late reply reaches the thread; the next cell sees no event of the earlier one.
  const next = await run(kernel, 'import time; time.sleep(1.5); "next"')
  assert.equal(next.result.result['text/plain'], "'next'")
  assert.deepEqual(clockAndStdout(next.events), [])
})

test('evaluate and the pool stream the clock events and keep them out of the agent text', async (t) => {
  const onCall = async () => (await sleep(300), 'answer')
  const code = 'print("before")\nagent("p")\nprint("after")'
  const kernel = await startKernel({ onCall })
  t.after(() => kernel.shutdown())
  const seen = []
  const r = await kernel.evaluate([{ code }], { onEvent: (_cell, e) => seen.push(e) })
  assert.equal(r.output, 'before\nafter\n')
  assert.deepEqual(clockAndStdout(seen), ['before\n', 'paused', 'resumed', 'after\n'])
  assert.deepEqual(r.statuses.map((s) => [s.op, s.data.state]), [['timeout', 'paused'], ['timeout', 'resumed']])

  const pool = new addon.KernelPool({ kernel: { interpreter: python, onCall } })
  t.after(() => pool.disposeAll())
  const pooled = []
  const p = await pool.execute({ sessionId: 'clock', cells: [{ code }], onEvent: (_cell, e) => pooled.push(e) })
  assert.equal(p.output, 'before\nafter\n')
  assert.deepEqual(clockAndStdout(pooled), ['before\n', 'paused', 'resumed', 'after\n'])
})
