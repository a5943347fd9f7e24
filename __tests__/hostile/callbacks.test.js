'use strict'
// Hostile callbacks: whatever a host's `onCall` or `onEvent` does (throw, return a plain
// value, `undefined`, something JSON cannot hold; a non-function `onEvent`), the cell gets
// a clear answer and the host keeps running. The cell chooses the call's name, so an
// `onCall` that throws on unknown names is an attack surface. Each case runs a real
// Node or Bun host in a child process (fixtures/callback-host.js) that must exit 0
// after reporting what the cell got.
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { python } = require('./_common')

const FIXTURE = path.join(__dirname, 'fixtures', 'callback-host.js')
const BUN = path.resolve(__dirname, '..', '..', 'node_modules', '.bin', 'bun')

// Bun is a devDependency: when it is missing the Bun cases fail (spawning it fails); they
// are never skipped.
const HOSTS = [
  ['Node', process.execPath],
  ['Bun', BUN],
]

/** Runs the fixture host with `how`; resolves its exit and the report it printed. */
function runHost(runtime, how) {
  const env = { ...process.env }
  if (python) env.PYKERNEL_TEST_PYTHON = python
  const child = spawn(runtime, [FIXTURE, how], { stdio: ['ignore', 'pipe', 'pipe'], env })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => (stdout += d))
  child.stderr.on('data', (d) => (stderr += d))
  const killer = setTimeout(() => child.kill('SIGKILL'), 30_000)
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      clearTimeout(killer)
      const line = stdout.trim().split('\n').at(-1)
      let report = null
      try {
        report = JSON.parse(line)
      } catch {}
      resolve({ code, signal, report, stderr })
    })
  })
}

/** Runs the host and asserts it survived (exit 0, a report); returns the report. */
async function survive(runtime, runtimeName, how) {
  const host = await runHost(runtime, how)
  assert.equal(host.signal, null, `the ${runtimeName} host was killed by ${host.signal}; stderr: ${host.stderr.slice(-800)}`)
  assert.equal(host.code, 0, `the ${runtimeName} host exited ${host.code} (${how}); stderr: ${host.stderr.slice(-800)}`)
  assert.ok(host.report, `the ${runtimeName} host reported what the cell got; stderr: ${host.stderr.slice(-800)}`)
  return host.report
}

// [case, what `onCall` does, what the cell prints of `tool.anything()`]
const ON_CALL = [
  ['sync-throw', 'throws synchronously', 'raised RuntimeError no tool anything\n'],
  ['sync-throw-string', 'throws a string', 'raised RuntimeError a thrown string\n'],
  ['async-reject', 'rejects', 'raised RuntimeError rejected on purpose\n'],
  ['sync-number', 'returns 5', 'value int 5\n'],
  ['sync-string', 'returns a string', "value str 'plain text'\n"],
  ['sync-object', 'returns an object (one key undefined)', "value dict {'items': [1, 2], 'ok': True}\n"],
  ['sync-null', 'returns null', 'value NoneType None\n'],
  ['sync-undefined', 'returns undefined', 'value NoneType None\n'],
  ['async-undefined', 'resolves undefined', 'value NoneType None\n'],
  ['thenable', 'returns a thenable', "value str 'from a thenable'\n"],
  ['sync-function', 'returns a function', /^raised RuntimeError onCall's reply to 'anything' cannot become JSON: a function\n$/],
  ['async-bigint', 'resolves a BigInt', /^raised RuntimeError onCall's reply to 'anything' cannot become JSON: .*BigInt.*\n$/],
  ['sync-cycle', 'returns a cyclic object', /^raised RuntimeError onCall's reply to 'anything' cannot become JSON: (Converting circular structure to JSON|JSON.stringify cannot serialize cyclic structures\.)\n$/],
]

test.describe('onCall', { concurrency: 4 }, () => {
  for (const [runtimeName, runtime] of HOSTS) {
    for (const [how, what, expected] of ON_CALL) {
      test(`${runtimeName} host: tool.anything() against an onCall that ${what}`, { timeout: 40_000 }, async () => {
        const report = await survive(runtime, runtimeName, how)
        assert.equal(report.status, 'ok', `the probe cell catches what it got: ${JSON.stringify(report)}`)
        if (typeof expected === 'string') assert.equal(report.stdout, expected)
        else assert.match(report.stdout, expected)
        assert.equal(report.next, '2', 'the kernel runs the next cell')
      })
    }
    test(`${runtimeName} host: an onCall that is an object, a number or a string is refused at the start`, { timeout: 40_000 }, async () => {
      const report = await survive(runtime, runtimeName, 'oncall-not-a-function')
      for (const [kind, got] of [['object', 'an object'], ['number', 'a number'], ['string', 'a string']]) {
        for (const made of [`kernel-${kind}`, `pool-${kind}`]) {
          assert.equal(report[made].code, 'ERR_INVALID_ARG', `${made}: ${JSON.stringify(report[made])}`)
          const at = made.startsWith('pool') ? 'kernel.onCall' : 'onCall'
          assert.equal(report[made].message, `invalid argument \`${at}\`: expected a function, got ${got}`, made)
        }
      }
    })
    test(`${runtimeName} host: a pool whose onCall throws synchronously`, { timeout: 40_000 }, async () => {
      const report = await survive(runtime, runtimeName, 'pool-sync-throw')
      assert.equal(report.exitCode, 0)
      assert.match(report.output, /raised RuntimeError no tool anything/)
    })
  }
})

test.describe('onEvent', { concurrency: 4 }, () => {
  for (const [runtimeName, runtime] of HOSTS) {
    test(`${runtimeName} host: onEvent null means no callback`, { timeout: 40_000 }, async () => {
      const report = await survive(runtime, runtimeName, 'onevent-null')
      assert.deepEqual(report, { execute: { resolved: 'ok' }, evaluate: { resolved: 0 }, pool: { resolved: 0 } })
    })
    for (const [how, what] of [['onevent-number', '42'], ['onevent-object', 'an object']]) {
      test(`${runtimeName} host: onEvent ${what} is rejected with ERR_INVALID_ARG by every entry point`, { timeout: 40_000 }, async () => {
        const report = await survive(runtime, runtimeName, how)
        for (const entry of ['execute', 'evaluate', 'pool']) {
          assert.equal(report[entry].code, 'ERR_INVALID_ARG', `${entry}: ${JSON.stringify(report[entry])}`)
          assert.match(report[entry].message, /^invalid argument `onEvent`: expected a function, got /, entry)
        }
      })
    }
    test(`${runtimeName} host: an onEvent that throws is reported once; the cell completes and later events arrive`, { timeout: 40_000 }, async () => {
      const report = await survive(runtime, runtimeName, 'onevent-throws')
      const { execute, evaluate, pool } = report
      assert.equal(execute.status, 'ok')
      assert.equal(execute.stdout, '0\n1\n2\n')
      assert.equal(execute.onEventError, 'listener bug')
      const notice = 'onEvent threw: listener bug; later events were still delivered'
      for (const [name, r] of [['execute', execute], ['evaluate', evaluate], ['pool', pool]]) {
        assert.equal(r.seen.at(-1), 'result', `${name}: the events after the throw were delivered (${r.seen})`)
        assert.ok(r.seen.filter((t) => t === 'stdout').length >= 1, `${name}: stdout events delivered (${r.seen})`)
      }
      for (const [name, r] of [['evaluate', evaluate], ['pool', pool]]) {
        assert.equal(r.exitCode, 0, name)
        assert.deepEqual(r.annotations.filter((a) => a.startsWith('onEvent')), [notice], `${name}: reported once`)
        assert.ok(r.output.startsWith(`[${notice}]\n`), `${name}: the notice heads the output: ${JSON.stringify(r.output)}`)
        assert.match(r.output, /0\n1\n2\n/, `${name}: the cell's output is intact`)
      }
    })
    test(`${runtimeName} host: an async onEvent is awaited in order, its rejection reported, settled before the result`, { timeout: 40_000 }, async () => {
      const report = await survive(runtime, runtimeName, 'onevent-async')
      const lines = Array.from({ length: 40 }, (_, i) => `${i}\n`).join('')
      for (const [name, r] of Object.entries(report)) {
        assert.equal(r.overlaps, 0, `${name}: one event at a time`)
        assert.equal(r.stdout, lines, `${name}: every line, in order`)
        assert.equal(r.settledAtResolve, r.called, `${name}: every Promise settled before the result`)
      }
      assert.equal(report.execute.onEventError, 'async listener bug')
      const notice = 'onEvent threw: async listener bug; later events were still delivered'
      for (const name of ['evaluate', 'pool']) {
        assert.deepEqual(report[name].annotations.filter((a) => a.startsWith('onEvent')), [notice], name)
      }
    })
  }
})
