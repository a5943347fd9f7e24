'use strict'
// Cell timeouts through the pool: interrupt, escalation to a kill, and what the agent reads.
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, python, isAlive, kernelProcess, promptBound, KERNEL_TOKEN_PY: TOKEN } = require('../helpers/kernel')

const cell = (code) => ({ code })
const value = (r) => r.cells.at(-1).result?.['text/plain']

test('a 1 s timeout interrupts a sleeping cell within 2 s and the kernel keeps its state', async (t) => {
  const pool = new addon.KernelPool({ kernel: { interpreter: python } })
  t.after(() => pool.disposeAll())
  await pool.execute({ sessionId: 'nap', cells: [cell('kept = "yes"')] })
  const bound = await promptBound(2000, () => pool.execute({ sessionId: 'nap', cells: [cell('1+1')] }))
  const started = Date.now()
  const r = await pool.execute({ sessionId: 'nap', timeoutSeconds: 1, cells: [cell('import time; time.sleep(30)')] })
  const took = Date.now() - started
  assert.ok(took >= 1000 && took < bound, `took ${took} ms (the timeout is 1 s, the bound ${bound.toFixed(0)} ms)`)
  assert.equal(r.timedOut, true)
  assert.equal(r.cancelled, true)
  assert.equal(r.exitCode, null)
  assert.equal(r.kernelKilled, false)
  assert.equal(
    r.annotations[0],
    'eval cell timed out after 1s; kernel interrupted but remains running. Reset the kernel via { reset: true } if state appears corrupted.',
  )
  assert.equal(value(await pool.execute({ sessionId: 'nap', cells: [cell('kept')] })), "'yes'")
})

test('a cell that ignores SIGINT is killed after the escalation window; the next call gets a fresh kernel', { timeout: 20000 }, async (t) => {
  const pool = new addon.KernelPool({ kernel: { interpreter: python } })
  t.after(() => pool.disposeAll())
  // A cell's os.getpid() is 2 in every sandboxed kernel: the kernel is known by its host
  // pid (the init of its PID namespace, and its Python child) and, in cells, by a token.
  const token = value(await pool.execute({ sessionId: 'stubborn', cells: [cell(`lost = 1; ${TOKEN}`)] }))
  const pid = pool.sessions.find((s) => s.key.startsWith('session:stubborn @ ')).pid
  const py = kernelProcess(pid)
  assert.ok(isAlive(pid) && isAlive(py))
  const started = Date.now()
  const r = await pool.execute({
    sessionId: 'stubborn',
    timeoutSeconds: 1,
    cells: [cell('import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.05)')],
  })
  const elapsed = Date.now() - started
  assert.ok(elapsed < 1000 + 5000 + 3000, `took ${elapsed} ms`)
  assert.ok(elapsed >= 1000 + 5000 - 200, `killed only after the 5 s escalation (${elapsed} ms)`)
  assert.equal(r.kernelKilled, true)
  assert.equal(r.kernelRestarted, false, 'a kill of ours is not retried')
  assert.match(
    r.output,
    /^\[eval cell timed out and the kernel was unresponsive to interrupt; the kernel has been killed and will be recreated on the next call\.\]/,
  )
  assert.equal(isAlive(pid), false)
  assert.equal(isAlive(py), false)
  const next = await pool.execute({ sessionId: 'stubborn', cells: [cell(`('lost' in globals(), ${TOKEN})`)] })
  assert.match(value(next), /^\(False, '[0-9a-f]{16}'\)$/)
  assert.notEqual(value(next), `(False, ${token})`)
})
