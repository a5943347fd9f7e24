#!/usr/bin/env node
'use strict'
// What per-cell pipes cost: this addon against an earlier one (`--before`), interleaved
// round by round, medians. Rows: the warm round trip (`1+1`), the same with a child of the
// kernel alive (every cell then gets fresh pipes), a 20 MB print of one line, and 200,000
// printed lines.
//
//   node bench/late_output.js --before path/to/pykernel.linux-x64-gnu.node [--rounds 7]
const path = require('node:path')
const { performance } = require('node:perf_hooks')

const ROOT = path.join(__dirname, '..')

function parse(argv) {
  const a = { before: null, rounds: 7, warm: 200, python: process.env.PYKERNEL_BENCH_PYTHON || path.join(ROOT, '.venv-test', 'bin', 'python') }
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--before') a.before = argv[++i]
    else if (argv[i] === '--rounds') a.rounds = Number(argv[++i])
    else if (argv[i] === '--warm') a.warm = Number(argv[++i])
  }
  if (!a.before) throw new Error('--before <addon.node> is required')
  return a
}

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]

async function roundTrips(kernel, n) {
  const times = []
  for (let i = 0; i < n; i++) {
    const t = performance.now()
    await kernel.execute('1+1')
    times.push(performance.now() - t)
  }
  return median(times) * 1000 // µs
}

async function timed(kernel, code) {
  const t = performance.now()
  const r = await kernel.execute(code)
  if (r.status !== 'ok') throw new Error(JSON.stringify(r.error))
  return performance.now() - t // ms
}

async function round(Kernel, python, warm) {
  const kernel = await Kernel.start({ interpreter: python })
  try {
    await roundTrips(kernel, 20)
    const row = {}
    row.warm = await roundTrips(kernel, warm)
    row.line20mb = await timed(kernel, "print('x' * 20_000_000)")
    row.lines200k = await timed(kernel, 'for i in range(200_000): print(i)')
    await kernel.execute("import subprocess\nchild = subprocess.Popen(['sleep', '1000'])")
    row.warmWithChild = await roundTrips(kernel, warm)
    await kernel.execute('child.kill(); child.wait()')
    return row
  } finally {
    await kernel.shutdown()
  }
}

async function main() {
  const args = parse(process.argv.slice(2))
  const sides = [
    { name: 'before', Kernel: require(path.resolve(args.before)).Kernel },
    { name: 'now', Kernel: require(path.join(ROOT, 'index.js')).Kernel },
  ]
  const rows = { before: [], now: [] }
  for (let r = 0; r < args.rounds; r++) {
    const order = r % 2 ? [...sides].reverse() : sides
    for (const side of order) rows[side.name].push(await round(side.Kernel, args.python, args.warm))
    process.stderr.write(`round ${r + 1}/${args.rounds}\n`)
  }
  const keys = [['warm', 'warm round trip (µs)'], ['warmWithChild', 'warm round trip, a child alive (µs)'], ['line20mb', '20 MB, one line (ms)'], ['lines200k', '200,000 lines (ms)']]
  console.log('| measure | before | now | now / before |\n|---|---|---|---|')
  for (const [key, label] of keys) {
    const b = median(rows.before.map((x) => x[key]))
    const n = median(rows.now.map((x) => x[key]))
    console.log(`| ${label} | ${b.toFixed(1)} | ${n.toFixed(1)} | ${(n / b).toFixed(2)} |`)
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
