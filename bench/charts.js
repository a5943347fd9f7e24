'use strict'
// Charts as data (docs/charts.md): what the chart JSON of a matplotlib figure costs.
//
//   node bench/charts.js [--rounds 15] [--before <an earlier build's package dir>]
//
// Rows: the extraction of one figure's chart (charts.figure_chart, timed inside the kernel
// with time.perf_counter) beside the PNG render of the same figure (the figure's
// print_figure, as display.py renders it), for a line and a scatter of 1,000 and 10,000
// points; each round renders, then extracts, so both see the same machine; medians of the
// rounds. With --before, the warm round trip of a cell without figures (`execute('1')`) of
// that build and of this one, interleaved as bench/ab_roundtrip.js does: the chart modules
// are imported with the first figure, so a cell without one should not move.
const path = require('node:path')
const { performance } = require('node:perf_hooks')
const { summarize } = require('./lib/stats')

const args = process.argv.slice(2)
const option = (name, fallback) => {
  const at = args.indexOf(name)
  return at >= 0 ? args[at + 1] : fallback
}
const ROUNDS = Number(option('--rounds', 15))
const before = option('--before', null)
const interpreter = process.env.PYKERNEL_BENCH_PYTHON || process.env.PYKERNEL_TEST_PYTHON
const addon = require(process.env.PYKERNEL_BENCH_ADDON ? path.resolve(process.env.PYKERNEL_BENCH_ADDON) : '..')

const MEASURE = `
import io, json, statistics, sys, time
import numpy as np
import matplotlib
import matplotlib.pyplot as plt
plt.plot([1, 2]); plt.show()            # the first figure imports the chart modules
charts = sys.modules['pykernel_runner.charts']

def measure(kind, n, rounds):
    x = np.arange(n, dtype=float)
    fig = plt.figure()
    getattr(plt, kind)(x, np.sin(x / 100.0))
    png, chart = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        fig.canvas.print_figure(io.BytesIO(), format='png', bbox_inches='tight', dpi=fig.dpi)
        png.append(time.perf_counter() - t)
        t = time.perf_counter()
        made = charts.figure_chart(fig)
        chart.append(time.perf_counter() - t)
    assert made['elements'][0]['count'] == n
    plt.close(fig)
    return {'chart': statistics.median(chart) * 1e3, 'png': statistics.median(png) * 1e3,
            'bytes': len(json.dumps(made))}

json.dumps({'%s %d' % (kind, n): measure(kind, n, ROUNDS)
            for kind in ('plot', 'scatter') for n in (1000, 10000)})
`

async function extraction() {
  const kernel = await addon.Kernel.start({ interpreter })
  try {
    const result = await kernel.execute(`ROUNDS = ${ROUNDS}\n${MEASURE}`, { timeoutMs: 600000 })
    if (result.status !== 'ok') throw new Error(JSON.stringify(result.error))
    const text = result.result['text/plain']
    const versions = await kernel.execute('import matplotlib, numpy, sys\nf"matplotlib {matplotlib.__version__}, numpy {numpy.__version__}, Python {sys.version.split()[0]}"')
    return { rows: JSON.parse(text.slice(1, -1)), versions: versions.result['text/plain'].slice(1, -1) }
  } finally {
    await kernel.shutdown()
  }
}

async function roundTrip(beforeDir) {
  const builds = [require(path.resolve(beforeDir)), addon]
  const kernels = []
  for (const build of builds) kernels.push(await build.Kernel.start({ interpreter }))
  try {
    for (const kernel of kernels) for (let i = 0; i < 200; i++) await kernel.execute('1')
    const times = [[], []]
    for (let round = 0; round < 20; round++) {
      for (const which of round % 2 ? [1, 0] : [0, 1]) {
        const started = performance.now()
        for (let i = 0; i < 100; i++) await kernels[which].execute('1')
        times[which].push(((performance.now() - started) / 100) * 1000)
      }
    }
    return times.map((t) => summarize(t).median)
  } finally {
    await Promise.all(kernels.map((kernel) => kernel.shutdown()))
  }
}

async function main() {
  const { rows, versions } = await extraction()
  const fmt = (ms) => `${ms.toFixed(2)} ms`
  console.log(`Charts as data, medians of ${ROUNDS} interleaved rounds (${versions})\n`)
  console.log('| figure | chart extraction | PNG render | extraction / PNG | chart JSON |')
  console.log('|---|---|---|---|---|')
  for (const [name, row] of Object.entries(rows)) {
    const [kind, n] = name.split(' ')
    const label = `${kind === 'plot' ? 'line' : 'scatter'}, ${Number(n).toLocaleString('en')} points`
    console.log(`| ${label} | ${fmt(row.chart)} | ${fmt(row.png)} | ${(row.chart / row.png).toFixed(3)} | ${(row.bytes / 1024).toFixed(1)} KiB |`)
  }
  if (before) {
    const [was, now] = await roundTrip(before)
    console.log(`\n| cell without figures | before | after | after / before |`)
    console.log('|---|---|---|---|')
    console.log(`| \`execute('1')\`, warm (medians of 20 interleaved rounds of 100) | ${was.toFixed(1)} us | ${now.toFixed(1)} us | ${(now / was).toFixed(3)} |`)
  }
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
