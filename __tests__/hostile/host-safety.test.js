'use strict'
// Hostile cells against the host's own thread: nothing a cell holds can freeze
// the host.
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, startKernel, tempDir } = require('./_common')

test('a cell holding the kv lock cannot freeze the host: KvStore waits off the event loop, a bounded time, then ERR_KV_BUSY', async (t) => {
  const dir = tempDir()
  const store = new addon.KvStore(dir, 'held')
  await store.set('a', 1)
  const grab = `import fcntl\nheld = open(${JSON.stringify(store.path + '.lock')}, 'a')\nfcntl.flock(held, fcntl.LOCK_EX)`
  // A sandboxed cell cannot reach the lock: the artifacts directory is not in its view.
  const sandboxed = await startKernel({ artifactsDir: dir, sessionId: 'held' })
  t.after(() => sandboxed.shutdown())
  const refused = await sandboxed.execute(grab)
  assert.equal(refused.status, 'error')
  assert.equal(refused.error.ename, 'FileNotFoundError', JSON.stringify(refused.error))
  // Without the sandbox it can, as any process of the user can: the host still never waits
  // for it without bound, and never on its event loop.
  const kernel = await startKernel({ artifactsDir: dir, sessionId: 'held', sandbox: 'off' })
  t.after(() => kernel.shutdown())
  const held = await kernel.execute(grab)
  assert.equal(held.status, 'ok', JSON.stringify(held.error))
  const asked = Date.now()
  // A 100 ms timer set while the store waits for the lock: a wait on the event loop would
  // fire it about 2 s late.
  const timer = new Promise((resolve) => setTimeout(() => resolve(Date.now() - asked), 100))
  const busy = store.get('a').then(
    () => ({ ok: true }),
    (e) => ({ code: e.code, message: e.message, waited: Date.now() - asked }),
  )
  const [firedAfter, r] = await Promise.all([timer, busy])
  assert.ok(firedAfter < 600, `the timer fired after ${firedAfter} ms while the store waited`)
  assert.equal(r.code, 'ERR_KV_BUSY', JSON.stringify(r))
  assert.match(r.message, /stayed locked for \d+ ms/)
  assert.ok(r.waited >= 1900 && r.waited < 5000, `the store waited ${r.waited} ms, bounded`)
  await kernel.execute('held.close()')
  assert.equal(await store.get('a'), 1, 'once the lock is let go the store works again')
})

test('errors say what happened: a NUL in env names the variable, a host shutdown and a closed protocol pipe are told apart from a crash', async (t) => {
  await assert.rejects(startKernel({ env: { 'BAD\u0000NAME': 'x' } }), { code: 'ERR_INVALID_ARG', message: /`env`.*BAD\\0NAME/ })
  await assert.rejects(startKernel({ env: { OK: 'nul\u0000inside' } }), { code: 'ERR_INVALID_ARG', message: /`env`.*'OK'/ })

  const kernel = await startKernel()
  const running = kernel.execute('import time; time.sleep(30)')
  await new Promise((r) => setTimeout(r, 300))
  await kernel.shutdown({ graceMs: 200 })
  const r = await running
  assert.equal(r.kernelDied, true)
  assert.match(r.error.evalue, /shut down by the host while the cell ran/)
  assert.doesNotMatch(r.error.evalue, /out of memory/)

  const closer = await startKernel()
  t.after(() => closer.shutdown())
  // The cell closes every descriptor that could be the protocol's output and then waits.
  const c = await closer.execute('import os, time\nfor fd in range(3, 64):\n    try:\n        os.close(fd)\n    except OSError:\n        pass\ntime.sleep(30)', { timeoutMs: 20_000 })
  assert.equal(c.kernelDied, true)
  assert.match(c.error.evalue, /closed its protocol pipe/)
  assert.doesNotMatch(c.error.evalue, /out of memory/)
})

test('output past the capture cap is cut visibly, never a rejected result', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  let streamed = 0
  const r = await kernel.execute("import sys\nsys.stdout.write('y' * 3_000_000)\nsys.stderr.write('e' * 10)", {
    maxCapturedBytes: 1_000_000,
    onEvent: (e) => {
      if (e.type === 'stdout') streamed += e.text.length
    },
  })
  assert.equal(r.status, 'ok')
  assert.equal(streamed, 3_000_000, 'every byte was streamed')
  assert.ok(r.stdout.startsWith('y'.repeat(1_000_000)))
  assert.match(r.stdout, /\[pykernel: 2000000 more bytes of stdout were streamed to onEvent but not kept in this result\]\n$/)
  assert.equal(r.stderr, 'e'.repeat(10))
  await assert.rejects(kernel.execute('1', { maxCapturedBytes: -1 }), { code: 'ERR_INVALID_ARG', message: /maxCapturedBytes/ })
})

test('a kernel that stops reading its stdin (SIGSTOP) with a write of ours stuck: shutdown still ends it', { timeout: 30_000 }, async (t) => {
  const kernel = await startKernel()
  // The cell returns at once; 0.3 s later its thread stops the whole kernel process.
  await kernel.execute('import os, signal, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), os.kill(os.getpid(), signal.SIGSTOP))).start()')
  await new Promise((r) => setTimeout(r, 800))
  // A 1 MB cell: its write fills the pipe and waits, holding the kernel's stdin.
  const stuck = kernel.execute(`x = "${'a'.repeat(1 << 20)}"`).catch((e) => e)
  await new Promise((r) => setTimeout(r, 300))
  const started = Date.now()
  const outcome = await kernel.shutdown({ graceMs: 500 })
  assert.equal(outcome.confirmed, true)
  assert.ok(Date.now() - started < 5000, `shutdown took ${Date.now() - started} ms`)
  const result = await stuck
  assert.equal(result.kernelDied ?? true, true)
})
