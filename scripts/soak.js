#!/usr/bin/env node
'use strict'
// `npm run soak [-- --rounds N]`: can an interrupt be lost under load?
//
// With a CPU hog on every core, each round runs the three ways a cell is interrupted,
// on one kernel (a fresh one when a round killed it):
//
// - timeout:  `time.sleep(30)` with `timeoutMs: 300`: the SIGINT lands in the sleep;
// - early:    a thread holds the GIL for 300 ms at a time (switch interval 0.3 s), so the
//             runner reads the next request but cannot start its cell before the timeout
//             (20 ms) fires: the SIGINT finds no cell and is ignored, and only the
//             `interrupt` frame, written first, can stop the cell as it starts;
// - at once:  `interrupt()` right after `execute()`, before the runner has the request.
//
// A lost interrupt shows as a cell ended some other way: killed by the 5 s escalation
// (`kernelDied`), or stopped by its 8 s timeout instead of `interrupt()`. Each is
// printed with its round; the exit status is 1 if there was any.
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')

const { Kernel } = require(path.resolve(__dirname, '..'))

const args = process.argv.slice(2)
const rounds = Number(args[args.indexOf('--rounds') + 1]) || (args.includes('--rounds') ? NaN : 100)
if (!Number.isInteger(rounds) || rounds < 1) {
  process.stderr.write('usage: node scripts/soak.js [--rounds N]\n')
  process.exit(2)
}
const interpreter = process.env.PYKERNEL_TEST_PYTHON || path.resolve(__dirname, '..', '.venv-test', 'bin', 'python')

const HOG_GIL = [
  'import sys, threading, time',
  'sys.setswitchinterval(0.3)',
  'def hog():',
  '    end = time.monotonic() + 2',
  '    while time.monotonic() < end: pass',
  'threading.Thread(target=hog, daemon=True).start()',
].join('\n')

const CASES = {
  async timeout(kernel) {
    const started = Date.now()
    const r = await kernel.execute('import time; time.sleep(30)', { timeoutMs: 300 })
    return check(r, { timedOut: true }, Date.now() - started)
  },
  async early(kernel) {
    const setup = await kernel.execute(HOG_GIL)
    if (setup.status !== 'ok') return `setup failed: ${JSON.stringify(setup.error)}`
    const started = Date.now()
    const r = await kernel.execute('while True: pass', { timeoutMs: 20 })
    const lost = check(r, { timedOut: true }, Date.now() - started)
    await kernel.execute('import sys; sys.setswitchinterval(0.005)')
    return lost
  },
  async atOnce(kernel) {
    const started = Date.now()
    const pending = kernel.execute('while True: pass', { timeoutMs: 8000 })
    kernel.interrupt()
    return check(await pending, { timedOut: false }, Date.now() - started)
  },
}

/** Why the result is not a cell stopped by its interrupt, or null. */
function check(r, { timedOut }, ms) {
  if (r.kernelDied) return `the kernel was killed after ${ms} ms: the interrupt was lost`
  if (!r.cancelled || r.timedOut !== timedOut) return `ended cancelled=${r.cancelled} timedOut=${r.timedOut} after ${ms} ms`
  if (r.error?.ename !== 'KeyboardInterrupt') return `ended with ${r.error?.ename ?? 'no error'} after ${ms} ms`
  return null
}

function startHogs() {
  return os.cpus().map(() => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }))
}

async function main() {
  const hogs = startHogs()
  const stop = () => hogs.forEach((h) => h.kill('SIGKILL'))
  process.on('exit', stop)
  const lost = []
  const counts = Object.fromEntries(Object.keys(CASES).map((k) => [k, 0]))
  let kernel = await Kernel.start({ interpreter })
  const t0 = Date.now()
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const [name, run] of Object.entries(CASES)) {
        const why = await run(kernel)
        counts[name]++
        if (why) {
          lost.push({ round, name, why })
          process.stdout.write(`round ${round}, ${name}: ${why}\n`)
        }
        if (!kernel.alive) kernel = await Kernel.start({ interpreter })
      }
      if (round % 10 === 0) process.stdout.write(`${round}/${rounds} rounds, ${((Date.now() - t0) / 1000).toFixed(0)} s, ${lost.length} lost\n`)
    }
  } finally {
    await kernel.shutdown()
    stop()
  }
  const total = Object.values(counts).reduce((a, b) => a + b, 0)
  process.stdout.write(`${total} interrupts (${Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ')}) with ${hogs.length} CPU hogs: ${lost.length} lost\n`)
  process.exit(lost.length ? 1 : 0)
}

main().catch((e) => {
  process.stderr.write(`${e.stack}\n`)
  process.exit(1)
})
