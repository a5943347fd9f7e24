// The same smoke test under Bun: start, execute with streaming, interrupt, timeout,
// shutdown. Run by scripts/test.js with Bun (it is not a node:test file).
import { createRequire } from 'node:module'
import assert from 'node:assert/strict'

const require = createRequire(import.meta.url)
const { Kernel } = require('../..')

let passed = 0
let failed = 0
async function check(name, fn) {
  try {
    await fn()
    passed++
    console.log(`ok - ${name}`)
  } catch (err) {
    failed++
    console.log(`not ok - ${name}\n${err.stack}`)
  }
}

const kernel = await Kernel.start({ interpreter: process.env.PYKERNEL_TEST_PYTHON || undefined })

await check('execute streams stdout in order and returns the result', async () => {
  const events = []
  const result = await kernel.execute("print('a')\nprint('b')\n6*7", { onEvent: (e) => events.push(e) })
  assert.equal(result.result['text/plain'], '42')
  assert.equal(events.filter((e) => e.type === 'stdout').map((e) => e.text).join(''), 'a\nb\n')
})

await check('interrupt() cancels a sleeping cell', async () => {
  const sleeping = kernel.execute('import time; time.sleep(30)')
  await new Promise((r) => setTimeout(r, 200))
  const started = Date.now()
  kernel.interrupt()
  const interrupted = await sleeping
  assert.equal(interrupted.cancelled, true)
  assert.ok(Date.now() - started < 2000)
})

await check('a timeout cancels the cell and the kernel answers after it', async () => {
  const timedOut = await kernel.execute('import time; time.sleep(30)', { timeoutMs: 200 })
  assert.equal(timedOut.timedOut, true)
  assert.equal((await kernel.execute('1+1')).result['text/plain'], '2')
})

await check('shutdown is confirmed', async () => {
  const shut = await kernel.shutdown()
  assert.equal(shut.confirmed, true)
  assert.equal(kernel.alive, false)
})

console.log(`bun ${Bun.version} smoke: ${passed} passed, ${failed} failed`)
process.exit(failed ? 1 : 0)
