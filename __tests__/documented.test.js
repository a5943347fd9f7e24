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
