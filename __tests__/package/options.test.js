'use strict'
// Numeric options at the napi boundary (docs/api.md#option-ranges): negative, NaN,
// fractional and absurd values are an ERR_INVALID_ARG naming the option and its range;
// constructors throw, async methods reject. Fast: one short-lived kernel and pools that
// start none.
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, startKernel } = require('../helpers/kernel')

const { KernelPool } = addon

/** The error for `name`, with the range it states. */
function invalid(name, range) {
  return (err) => {
    assert.equal(err.code, 'ERR_INVALID_ARG', err.message)
    assert.ok(err.message.includes(`\`${name}\``), err.message)
    assert.ok(err.message.includes(range), `${err.message} (expected ${range})`)
    return true
  }
}

// No kernels: the pool checks its options before it starts any.
const idle = { prewarm: 0, heartbeatIntervalMs: 0 }

test('KernelPool options: a constructor throws at once', () => {
  const started = Date.now()
  // Unchecked, -1 wraps to 4,294,967,295 spares and the constructor never returns.
  assert.throws(() => new KernelPool({ prewarm: -1 }), invalid('prewarm', 'from 0 to 64'))
  assert.ok(Date.now() - started < 1000, `took ${Date.now() - started} ms`)
  for (const prewarm of [NaN, 1.5, 65, 4_294_967_295, Infinity]) {
    assert.throws(() => new KernelPool({ prewarm }), invalid('prewarm', 'from 0 to 64'), String(prewarm))
  }
  for (const maxSessions of [0, -1, NaN, 2.5, 1025]) {
    assert.throws(() => new KernelPool({ ...idle, maxSessions }), invalid('maxSessions', 'from 1 to 1024'))
  }
  const millis = [
    ['idleTimeoutMs', 'from 0 to 604800000', [-1, NaN, 604_800_001]],
    ['heartbeatIntervalMs', 'from 0 to 3600000', [-1, NaN, 3_600_001]],
    ['heartbeatTimeoutMs', 'from 1 to 3600000', [0, -1, NaN, 3_600_001]],
    ['shutdownGraceMs', 'from 0 to 3600000', [-1, NaN, Infinity]],
  ]
  for (const [name, range, values] of millis) {
    for (const value of values) {
      assert.throws(() => new KernelPool({ ...idle, [name]: value }), invalid(name, range), `${name}: ${value}`)
    }
  }
  // The kernel defaults are checked by the constructor too.
  assert.throws(
    () => new KernelPool({ ...idle, kernel: { maxProcesses: 3 } }),
    invalid('maxProcesses', 'from 4 to 4194304'),
  )
  // In range, fractional milliseconds included: accepted.
  const pool = new KernelPool({
    ...idle,
    maxSessions: 2,
    idleTimeoutMs: 1500.5,
    heartbeatTimeoutMs: 100,
    shutdownGraceMs: 0,
  })
  return pool.disposeAll()
})

test('Kernel.start options: a rejection, never a runner traceback', async () => {
  // Unchecked, 0, 2, 3 and NaN fail the start inside the runner, with its traceback.
  for (const maxProcesses of [0, 2, 3, NaN, -1, 4.5, 5_000_000]) {
    await assert.rejects(startKernel({ maxProcesses }), invalid('maxProcesses', 'from 4 to 4194304'), String(maxProcesses))
  }
  for (const memoryLimitBytes of [0, -1, NaN, 1024, 1.5e9 + 0.5, 2 ** 60]) {
    await assert.rejects(
      startKernel({ memoryLimitBytes }),
      invalid('memoryLimitBytes', 'from 33554432 to 9007199254740991'),
      String(memoryLimitBytes),
    )
  }
  for (const startupTimeoutMs of [0, -1, NaN, 3_600_001]) {
    await assert.rejects(
      startKernel({ startupTimeoutMs }),
      invalid('startupTimeoutMs', 'from 1 to 3600000'),
      String(startupTimeoutMs),
    )
  }
})

test('a kernel: execute, evaluate and shutdown reject absurd numbers', async () => {
  const kernel = await startKernel({ maxProcesses: 64 })
  let shut = false
  try {
    for (const timeoutMs of [-1, NaN, 604_800_001]) {
      await assert.rejects(kernel.execute('1', { timeoutMs }), invalid('timeoutMs', 'from 0 to 604800000'))
      await assert.rejects(
        kernel.evaluate([{ code: '1' }], { timeoutMs }),
        invalid('timeoutMs', 'from 0 to 604800000'),
      )
    }
    // Unchecked, -1 wraps to ~49 days per shutdown step. The kernel is untouched by it.
    const started = Date.now()
    for (const graceMs of [-1, NaN, 3_600_001]) {
      await assert.rejects(kernel.shutdown({ graceMs }), invalid('graceMs', 'from 0 to 3600000'))
    }
    assert.ok(Date.now() - started < 1000)
    assert.equal(kernel.alive, true)
    const r = await kernel.execute('6 * 7', { timeoutMs: 5000 })
    assert.equal(r.result['text/plain'], '42')
    const down = await kernel.shutdown({ graceMs: 500 })
    shut = true
    assert.equal(down.confirmed, true)
  } finally {
    if (!shut) await kernel.shutdown()
  }
})

test('KernelPool methods: disposal budgets and timeoutSeconds reject', async () => {
  const pool = new KernelPool(idle)
  try {
    for (const budgetMs of [-1, NaN, 3_600_001]) {
      await assert.rejects(pool.disposeOwner('nobody', { budgetMs }), invalid('budgetMs', 'from 0 to 3600000'))
      await assert.rejects(pool.disposeAll({ budgetMs }), invalid('budgetMs', 'from 0 to 3600000'))
    }
    await assert.rejects(
      pool.execute({ cells: [{ code: '1' }], sessionId: 's', timeoutSeconds: -1 }),
      invalid('timeoutSeconds', 'positive number of seconds'),
    )
    await assert.rejects(
      pool.execute({ cells: [{ code: '1' }], sessionId: 's', timeoutSeconds: NaN }),
      invalid('timeoutSeconds', 'seconds'),
    )
  } finally {
    await pool.disposeAll({ budgetMs: 1000 })
  }
})

test('clampLine and streamingPreview: their counts are checked', () => {
  for (const maxColumns of [0, -1, NaN, 1.5, 1_000_001]) {
    assert.throws(() => addon.clampLine('abc', maxColumns), invalid('maxColumns', 'from 1 to 1000000'))
  }
  for (const maxLines of [-1, NaN, 2.5, 1_000_001]) {
    assert.throws(() => addon.streamingPreview('a\nb', { maxLines }), invalid('maxLines', 'from 0 to 1000000'))
  }
  assert.equal(addon.clampLine('abc', 1_000_000), 'abc')
  assert.equal(addon.streamingPreview('a\nb', { maxLines: 5 }), 'a\nb')
})
