'use strict'
// Warm `execute` round trips of two builds of the package, interleaved so both see the
// same machine: `node bench/ab_roundtrip.js <before>/main.js <after>/main.js`. Each of 20
// rounds runs 100 `execute('1')`, 100 `execute('1', { onEvent, timeoutMs })`, 100
// `evaluate([{ code: '1' }])` and 100 `evaluate([{ code: 'print(1)' }], { onOutput })` (the
// live text, its quiet-interval flush armed) on each build's kernel, in alternating order; the medians of
// the rounds and their ratio are printed. For a change to the call path (arguments,
// options, the loader) or to the agent text of a plain cell.
const { performance } = require('node:perf_hooks')

const [before, after] = [require(process.argv[2]), require(process.argv[3])]
const interpreter = process.env.PYKERNEL_TEST_PYTHON || process.env.PYKERNEL_BENCH_PYTHON
const ROUNDS = 20
const PER_ROUND = 100

async function main() {
  const kernels = [await before.Kernel.start({ interpreter }), await after.Kernel.start({ interpreter })]
  for (const kernel of kernels) for (let i = 0; i < 200; i++) await kernel.execute('1')
  const bare = [[], []]
  const withOptions = [[], []]
  const evaluated = [[], []]
  const live = [[], []]
  for (let round = 0; round < ROUNDS; round++) {
    for (const which of round % 2 ? [1, 0] : [0, 1]) {
      const kernel = kernels[which]
      let started = performance.now()
      for (let i = 0; i < PER_ROUND; i++) await kernel.execute('1')
      bare[which].push((performance.now() - started) / PER_ROUND)
      started = performance.now()
      for (let i = 0; i < PER_ROUND; i++) await kernel.execute('1', { onEvent: () => {}, timeoutMs: 5000 })
      withOptions[which].push((performance.now() - started) / PER_ROUND)
      started = performance.now()
      for (let i = 0; i < PER_ROUND; i++) await kernel.evaluate([{ code: '1' }])
      evaluated[which].push((performance.now() - started) / PER_ROUND)
      started = performance.now()
      for (let i = 0; i < PER_ROUND; i++) await kernel.evaluate([{ code: 'print(1)' }], { onOutput: () => {} })
      live[which].push((performance.now() - started) / PER_ROUND)
    }
  }
  const median = (a) => a.slice().sort((x, y) => x - y)[a.length >> 1]
  for (const [name, times] of [["execute('1')", bare], ["execute('1', { onEvent, timeoutMs })", withOptions], ["evaluate([{ code: '1' }])", evaluated], ["evaluate([{ code: 'print(1)' }], { onOutput })", live]]) {
    const [b, a] = times.map(median)
    console.log(`${name}: before ${(b * 1000).toFixed(1)} us, after ${(a * 1000).toFixed(1)} us (medians of ${ROUNDS} rounds); after/before ${(a / b).toFixed(3)}`)
  }
  await Promise.all(kernels.map((kernel) => kernel.shutdown()))
}

main()
