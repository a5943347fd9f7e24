'use strict'
// Async `onEvent` handlers: a handler that returns a Promise gets its events one at a
// time and in order, slows the cell to its pace (bounded buffering, nothing dropped), has
// its rejection reported like a throw, and is settled before the result resolves. The
// three entry points (`execute`, `evaluate`, `pool.execute`) share one delivery path.
// Real Python throughout.
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, python, startKernel } = require('../helpers/kernel')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const MB = 1024 * 1024

/** An async handler that awaits a random 0-3 ms per event, recording what it saw and
 *  whether two calls ever overlapped. */
function randomlySlowHandler() {
  const seen = { stdout: '', cells: [], overlaps: 0, settled: 0 }
  let active = 0
  const handle = async (cellIndex, event) => {
    active++
    if (active > 1) seen.overlaps++
    await sleep(Math.random() * 3)
    if (event.type === 'stdout') {
      seen.stdout += event.text
      // Text that queued up behind a slow handler arrives folded into fewer events.
      for (const line of event.text.split('\n').slice(0, -1)) seen.cells.push(cellIndex)
    }
    active--
    seen.settled++
  }
  return { seen, handle }
}

const LINES = 200
const COUNTING = `for i in range(${LINES}):\n    print(i, flush=True)\n`
const expectedLines = (from, to) => Array.from({ length: to - from }, (_, i) => `${from + i}\n`).join('')

test('async onEvent', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const pool = new addon.KernelPool({ kernel: { interpreter: python }, prewarm: 0 })
  t.after(() => pool.disposeAll())

  await t.test('execute: events arrive one at a time, in order, each awaited', async () => {
    const { seen, handle } = randomlySlowHandler()
    const r = await kernel.execute(COUNTING, { onEvent: (event) => handle(0, event) })
    assert.equal(r.status, 'ok')
    assert.equal(seen.overlaps, 0, 'no event was delivered while the previous one was awaited')
    assert.equal(seen.stdout, expectedLines(0, LINES))
    assert.equal(r.onEventError, undefined)
  })

  await t.test('evaluate and pool.execute: (cellIndex, event) in order across cells', async () => {
    const cells = [{ code: COUNTING }, { code: `for i in range(${LINES}, ${2 * LINES}):\n    print(i, flush=True)\n` }]
    for (const [name, run] of [
      ['evaluate', (onEvent) => kernel.evaluate(cells, { onEvent })],
      ['pool', (onEvent) => pool.execute({ sessionId: 'order', cells, onEvent })],
    ]) {
      const { seen, handle } = randomlySlowHandler()
      const r = await run(handle)
      assert.equal(r.exitCode, 0, `${name}: ${r.output.slice(0, 200)}`)
      assert.equal(seen.overlaps, 0, `${name}: one event at a time`)
      assert.equal(seen.stdout, expectedLines(0, 2 * LINES), `${name}: every line, in order`)
      assert.deepEqual(seen.cells, [...Array(LINES).fill(0), ...Array(LINES).fill(1)], `${name}: cell indices in order`)
      assert.deepEqual(r.annotations.filter((a) => a.startsWith('onEvent')), [], name)
    }
  })

  await t.test('the result resolves only after the last handler Promise settled', async () => {
    for (const [name, run] of [
      ['execute', (onEvent) => kernel.execute(COUNTING, { onEvent: (e) => onEvent(0, e) })],
      ['evaluate', (onEvent) => kernel.evaluate([{ code: COUNTING }], { onEvent })],
      ['pool', (onEvent) => pool.execute({ sessionId: 'settle', cells: [{ code: COUNTING }], onEvent })],
    ]) {
      let called = 0
      let settled = 0
      await run(async () => {
        called++
        await sleep(5)
        settled++
      })
      const settledAtResolve = settled
      assert.ok(called > 1, `${name}: ${called} events`)
      assert.equal(settledAtResolve, called, `${name}: every handler had settled when the result resolved`)
    }
  })

  await t.test('a rejecting async handler is reported once; the cell completes and later events arrive', async () => {
    const rejectingOnThird = () => {
      const seen = { stdout: '' }
      let calls = 0
      const handle = async (cellIndex, event) => {
        await sleep(1)
        if (event.type === 'stdout') seen.stdout += event.text
        if (++calls === 3) throw new Error('async listener bug')
      }
      return { seen, handle }
    }
    const notice = 'onEvent threw: async listener bug; later events were still delivered'

    const ex = rejectingOnThird()
    const executed = await kernel.execute(COUNTING, { onEvent: (e) => ex.handle(0, e) })
    assert.equal(executed.status, 'ok')
    assert.equal(executed.onEventError, 'async listener bug')
    assert.equal(ex.seen.stdout, expectedLines(0, LINES), 'execute: later events were delivered')

    for (const [name, run] of [
      ['evaluate', (onEvent) => kernel.evaluate([{ code: COUNTING }], { onEvent })],
      ['pool', (onEvent) => pool.execute({ sessionId: 'reject', cells: [{ code: COUNTING }], onEvent })],
    ]) {
      const { seen, handle } = rejectingOnThird()
      const r = await run(handle)
      assert.equal(r.exitCode, 0, name)
      assert.deepEqual(r.annotations.filter((a) => a.startsWith('onEvent')), [notice], `${name}: reported once`)
      assert.ok(r.output.startsWith(`[${notice}]\n`), `${name}: ${JSON.stringify(r.output.slice(0, 200))}`)
      assert.equal(seen.stdout, expectedLines(0, LINES), `${name}: later events were delivered`)
    }
  })

  await t.test('thenables: a plain thenable is awaited; one whose then() throws counts as a rejection', async () => {
    let order = ''
    const r = await kernel.execute('print("a", flush=True)\nprint("b", flush=True)', {
      onEvent: (event) => ({
        then(resolve) {
          setTimeout(() => {
            order += event.text
            resolve()
          }, 20)
        },
      }),
    })
    assert.equal(order, 'a\nb\n')
    assert.equal(r.onEventError, undefined)
    const thrown = await kernel.execute('print("x", flush=True)', {
      onEvent: () => ({
        then() {
          throw new Error('then() blew up')
        },
      }),
    })
    assert.equal(thrown.status, 'ok')
    assert.equal(thrown.onEventError, 'then() blew up')
  })

  await t.test('a slow async handler slows the cell to its pace, with bounded host memory', async () => {
    // The first event's handler holds until the gate opens: the cell must stall on its
    // output meanwhile (a few hundred 64 KiB lines buffered at most, between the pipes,
    // the kernel's backlog and the in-flight events), not finish into the host's memory.
    // Written to fd 1, as a child process would: the runner holds text printed by
    // Python itself in its own memory, so only this path stalls the writer.
    const GATE_MS = 2500
    const EVENTS = 1500 // 94 MiB of output
    const code = [
      'import os, time',
      "line = b'x' * 65535 + b'\\n'",
      `for i in range(${EVENTS}):\n    os.write(1, line)`,
      'print(f"done {time.time() * 1000:.0f}", flush=True)',
    ].join('\n')
    let openGate
    const gate = new Promise((resolve) => (openGate = resolve))
    let gateOpenedAt = Infinity
    let bytes = 0
    let doneAt = null
    let first = true
    const startRss = process.memoryUsage().rss
    let maxRss = startRss
    const sampler = setInterval(() => (maxRss = Math.max(maxRss, process.memoryUsage().rss)), 20)
    const opener = setTimeout(() => {
      maxRss = Math.max(maxRss, process.memoryUsage().rss)
      clearInterval(sampler)
      gateOpenedAt = Date.now()
      openGate()
    }, GATE_MS)
    t.after(() => {
      clearInterval(sampler)
      clearTimeout(opener)
    })
    const r = await kernel.execute(code, {
      onEvent: async (event) => {
        if (first) {
          first = false
          await gate
        }
        if (event.type !== 'stdout') return
        bytes += event.text.length
        const done = /done (\d+)/.exec(event.text)
        if (done) doneAt = Number(done[1])
      },
    })
    assert.equal(r.status, 'ok')
    assert.equal(bytes, EVENTS * 65536 + `done ${doneAt}\n`.length, 'every byte reached onEvent')
    const grewMb = (maxRss - startRss) / MB
    t.diagnostic(`host RSS grew ${grewMb.toFixed(1)} MB while the handler held`)
    assert.ok(grewMb < 48, `host RSS grew ${grewMb.toFixed(1)} MB while the handler held (bound 48 MB)`)
    assert.ok(doneAt >= gateOpenedAt - 50, `the cell finished ${gateOpenedAt - doneAt} ms before the handler let events through`)
  })
})

test('a slow async handler never holds off the timeout, the deadline or the abort', { timeout: 120_000 }, async (t) => {
  // A cell that prints for ever, paced by a handler that takes 20 ms per event: a frame is
  // always waiting, and each stop must still land (then the backlog, bounded, drains).
  const pool = new addon.KernelPool({ kernel: { interpreter: python }, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const code = 'i = 0\nwhile True:\n    print(i, flush=True)\n    i += 1\n'
  const slow = async () => sleep(20)
  await pool.execute({ sessionId: 'pace', cells: [{ code: '1' }] })
  const cases = [
    ['timeoutMs', () => ({ timeoutMs: 1000, onEvent: slow })],
    ['deadlineMs', () => ({ deadlineMs: 1000, timeoutSeconds: 0, onEvent: slow })],
    ['signal', () => ({ signal: AbortSignal.timeout(1000), timeoutSeconds: 0, onEvent: slow })],
    ['onOutput with deadlineMs', () => ({ deadlineMs: 1000, timeoutSeconds: 0, onOutput: slow })],
  ]
  for (const [name, options] of cases) {
    const started = Date.now()
    const r = await pool.execute({ sessionId: 'pace', cells: [{ code }], ...options() })
    const elapsed = Date.now() - started
    t.diagnostic(`${name}: result after ${elapsed} ms`)
    assert.ok(r.cancelled || r.timedOut, `${name}: stopped (got ${JSON.stringify({ cancelled: r.cancelled, timedOut: r.timedOut })})`)
    // The stop lands at 1 s; the cell's interrupt (or its kill 5 s later) and the backlog
    // it left, folded into few events, follow.
    assert.ok(elapsed >= 900 && elapsed < 15_000, `${name}: stopped after ${elapsed} ms`)
  }
  const after = await pool.execute({ sessionId: 'pace', cells: [{ code: '6*7' }] })
  assert.equal(after.output.trim(), '42')
})
