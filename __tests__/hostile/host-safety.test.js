'use strict'
// Hostile cells against the host's own thread: nothing a cell holds can freeze
// the host.
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { addon, startKernel, tempDir } = require('./_common')

const ROOT = path.resolve(__dirname, '..', '..')

test('a cell holding the kv lock cannot freeze the host: KvStore waits a bounded time, then ERR_KV_BUSY', async (t) => {
  const dir = tempDir()
  const store = new addon.KvStore(dir, 'held')
  store.set('a', 1)
  const grab = `import fcntl\nheld = open(${JSON.stringify(store.path + '.lock')}, 'a')\nfcntl.flock(held, fcntl.LOCK_EX)`
  // A sandboxed cell cannot reach the lock: the artifacts directory is not in its view.
  const sandboxed = await startKernel({ artifactsDir: dir, sessionId: 'held' })
  t.after(() => sandboxed.shutdown())
  const refused = await sandboxed.execute(grab)
  assert.equal(refused.status, 'error')
  assert.equal(refused.error.ename, 'FileNotFoundError', JSON.stringify(refused.error))
  // Without the sandbox it can, as any process of the user can: the host still never waits
  // for it without bound.
  const kernel = await startKernel({ artifactsDir: dir, sessionId: 'held', sandbox: 'off' })
  t.after(() => kernel.shutdown())
  const held = await kernel.execute(grab)
  assert.equal(held.status, 'ok', JSON.stringify(held.error))
  // Another host process reads the store: were the wait unbounded, its JavaScript thread
  // would freeze, and the 15 s kill below would say so.
  const script = `const { KvStore } = require(${JSON.stringify(ROOT)}); const t = Date.now();
try { KvStore && new KvStore(${JSON.stringify(dir)}, 'held').get('a'); console.log(JSON.stringify({ ok: true })) }
catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message, waited: Date.now() - t })) }`
  const out = await new Promise((resolve) => {
    execFile(process.execPath, ['-e', script], { timeout: 15_000 }, (err, stdout) => resolve({ err, stdout }))
  })
  assert.equal(out.err, null, `the host process finished on its own (${out.err && out.err.signal})`)
  const r = JSON.parse(out.stdout)
  assert.equal(r.code, 'ERR_KV_BUSY', JSON.stringify(r))
  assert.match(r.message, /stayed locked for \d+ ms/)
  assert.ok(r.waited >= 1900 && r.waited < 5000, `the host's thread waited ${r.waited} ms, bounded`)
  await kernel.execute('held.close()')
  assert.equal(store.get('a'), 1, 'once the lock is let go the store works again')
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
