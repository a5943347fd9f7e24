'use strict'
// Bridge call round trips of two builds of the package, interleaved so both see the same
// machine: `node bench/ab_bridge_calls.js <before>/main.js <after>/main.js [--rounds N]`.
// Each round runs, on each build's kernel in alternating order, a cell making 200 calls one
// after another (`tool.echo(i=i)` to an `onCall` that answers at once) and a cell whose 32
// threads make 20 calls each; the medians of the rounds' per-call times, their ratio and
// the median of each round's own ratio are printed. For a change to the call path (the frames, the reply writer, the call limits).
const { performance } = require('node:perf_hooks')

const [before, after] = [require(process.argv[2]), require(process.argv[3])]
const roundsArg = process.argv.indexOf('--rounds')
const ROUNDS = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 15
const interpreter = process.env.PYKERNEL_TEST_PYTHON || process.env.PYKERNEL_BENCH_PYTHON
const SEQUENTIAL = 200
const THREADS = 32
const PER_THREAD = 20

const sequentialCell = `for i in range(${SEQUENTIAL}):\n    assert tool.echo(i=i) == {"i": i}`
const threadedCell = [
  'import threading',
  'def work(k):',
  `    for i in range(${PER_THREAD}):`,
  '        assert tool.echo(k=k, i=i) == {"k": k, "i": i}',
  `threads = [threading.Thread(target=work, args=(k,)) for k in range(${THREADS})]`,
  'for t in threads: t.start()',
  'for t in threads: t.join()',
].join('\n')

/** Per-call microseconds of one run of `code` on `kernel`. */
async function perCall(kernel, code, calls) {
  const started = performance.now()
  const r = await kernel.execute(code)
  if (r.status !== 'ok') throw new Error(`the bench cell failed: ${JSON.stringify(r.error)}`)
  return ((performance.now() - started) * 1000) / calls
}

async function main() {
  const onCall = async ({ args }) => args
  const kernels = [await before.Kernel.start({ interpreter, onCall }), await after.Kernel.start({ interpreter, onCall })]
  for (const kernel of kernels) {
    await perCall(kernel, sequentialCell, SEQUENTIAL)
    await perCall(kernel, threadedCell, THREADS * PER_THREAD)
  }
  const sequential = [[], []]
  const threaded = [[], []]
  for (let round = 0; round < ROUNDS; round++) {
    for (const which of round % 2 ? [1, 0] : [0, 1]) {
      sequential[which].push(await perCall(kernels[which], sequentialCell, SEQUENTIAL))
      threaded[which].push(await perCall(kernels[which], threadedCell, THREADS * PER_THREAD))
    }
  }
  const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1]
  for (const [name, times] of [[`${SEQUENTIAL} calls one after another`, sequential], [`${THREADS} threads x ${PER_THREAD} calls`, threaded]]) {
    const [b, a] = times.map(median)
    // Each round's own ratio as well: both builds ran back to back in it, so a machine
    // whose speed drifts between rounds (shared cores) moves both alike.
    const ratio = median(times[1].map((t, round) => t / times[0][round]))
    console.log(`${name}: before ${b.toFixed(1)} us/call, after ${a.toFixed(1)} us/call (medians of ${ROUNDS} rounds); after/before ${(a / b).toFixed(3)}, median of the rounds' ratios ${ratio.toFixed(3)}`)
  }
  await Promise.all(kernels.map((kernel) => kernel.shutdown()))
}

main()
