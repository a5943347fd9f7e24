#!/usr/bin/env node
'use strict'
// What sizing an image for the model costs (docs/charts.md#images-sized-for-the-model),
// beside what making that image costs, interleaved round by round:
//
//   render   a 2000x1500 matplotlib figure (figsize (20, 15) at 100 dpi, five lines of
//            500 points, a legend) saved as PNG inside the kernel (`savefig`, timed in
//            Python), the figure the pool's images carry
//   fit      `fitImages` on that PNG with the default budget: decoded, scaled to
//            1568x1176 (Lanczos3), encoded as PNG again (timed from Node, off the
//            JavaScript thread as `pykernel/tool` calls it)
//   handle   `pykernel/tool`'s `handle` of the cell that shows the figure, sized against
//            `images: false` (the whole call, both ways)
//
//   node bench/image_fit.js [--python PY] [--rounds N] [--out NAME]
//
// Writes bench/results/<NAME>.{json,md} (default image-fit) and prints the table. Needs
// matplotlib in PY. Timings are reported, never asserted.
const fs = require('node:fs')
const path = require('node:path')
const { summarize, msSince, now, sleep } = require('./lib/stats')

const ROOT = path.resolve(__dirname, '..')

function parseArgs(argv) {
  const a = { python: process.env.PYKERNEL_BENCH_PYTHON || 'python3', rounds: 15, out: 'image-fit' }
  for (let i = 0; i < argv.length; i++) {
    const x = argv[i]
    if (x === '--python') a.python = argv[++i]
    else if (x === '--rounds') a.rounds = Number(argv[++i])
    else if (x === '--out') a.out = argv[++i]
    else throw new Error(`unknown argument ${x}`)
  }
  return a
}

const FIGURE = `import matplotlib.pyplot as plt, numpy as np
fig, ax = plt.subplots(figsize=(20, 15), dpi=100)
x = np.linspace(0, 10, 500)
for k in range(5):
    ax.plot(x, np.sin(x + k), label=f"k={k}")
ax.legend()
ax.set_title("sines")`

// The PNG at the figure's full 2000x1500 (no bbox_inches="tight", which trims the
// margins), displayed as it is, and the time savefig took.
const RENDER = `import io, time
class _Png:
    def __init__(self, data): self.data = data
    def _repr_png_(self): return self.data
_buffer = io.BytesIO()
_t = time.perf_counter()
fig.savefig(_buffer, format="png", dpi=100)
print((time.perf_counter() - _t) * 1000)
display(_Png(_buffer.getvalue()))`

const SHOW = `${FIGURE}\nplt.show()`

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const addon = require(path.join(ROOT, 'main.js'))
  const tool = require(path.join(ROOT, 'tool.js'))
  const pool = new addon.KernelPool({ kernel: { interpreter: args.python }, prewarm: 0 })
  const samples = { renderMs: [], fitMs: [], handleSizedMs: [], handleOffMs: [] }
  let png
  let fitted
  try {
    const setup = await pool.execute({ sessionId: 'bench', cells: [{ code: FIGURE }] })
    if (setup.exitCode !== 0) throw new Error(setup.output)
    for (let round = 0; round <= args.rounds; round++) {
      const rendered = await pool.execute({ sessionId: 'bench', cells: [{ code: RENDER }] })
      if (rendered.exitCode !== 0) throw new Error(rendered.output)
      const ms = rendered.output.trim().split('\n')[0]
      const data = rendered.images[0].data
      png = data
      await sleep(50)
      let t0 = now()
      ;[fitted] = await addon.fitImages([{ mime: 'image/png', data }])
      const fitMs = msSince(t0)
      await sleep(50)
      t0 = now()
      await tool.handle({ cells: [{ code: SHOW }], session: 'show' }, { pool })
      const sizedMs = msSince(t0)
      t0 = now()
      await tool.handle({ cells: [{ code: SHOW }], session: 'show' }, { pool, images: false })
      const offMs = msSince(t0)
      if (round === 0) continue // page cache, imports
      samples.renderMs.push(Number(ms))
      samples.fitMs.push(fitMs)
      samples.handleSizedMs.push(sizedMs)
      samples.handleOffMs.push(offMs)
    }
  } finally {
    await pool.disposeAll()
  }
  const stats = Object.fromEntries(Object.entries(samples).map(([key, values]) => [key, summarize(values)]))
  const originalBytes = Buffer.from(png, 'base64').length
  const result = {
    python: args.python,
    rounds: args.rounds,
    image: { from: '2000x1500', to: `${fitted.width}x${fitted.height}`, originalBytes, fittedBytes: fitted.bytes, status: fitted.status },
    stats,
  }
  const ms = (s) => `${s.median.toFixed(1)} ms (p90 ${s.p90.toFixed(1)})`
  const md = [
    `# Images sized for the model: \`bench/image_fit.js\``,
    '',
    `${args.rounds} rounds, interleaved; medians. A ${result.image.from} matplotlib PNG (${(originalBytes / 1024).toFixed(0)} KB) -> ${result.image.to} (${(fitted.bytes / 1024).toFixed(0)} KB, ${fitted.status}).`,
    '',
    '| what | time | against | ratio |',
    '|---|---|---|---|',
    `| \`fitImages\` of the PNG (decode, Lanczos3 to 1568 px, PNG encode) | ${ms(stats.fitMs)} | rendering it in the kernel (\`savefig\`, ${ms(stats.renderMs)}) | ${(stats.fitMs.median / stats.renderMs.median).toFixed(2)}x |`,
    `| \`handle\` of the cell that shows the figure, sized | ${ms(stats.handleSizedMs)} | the same with \`images: false\` (${ms(stats.handleOffMs)}) | ${(stats.handleSizedMs.median / stats.handleOffMs.median).toFixed(2)}x |`,
    '',
  ].join('\n')
  const dir = path.join(__dirname, 'results')
  fs.writeFileSync(path.join(dir, `${args.out}.json`), JSON.stringify(result, null, 2) + '\n')
  fs.writeFileSync(path.join(dir, `${args.out}.md`), md)
  process.stdout.write(md)
}

main().catch((error) => {
  process.stderr.write(`${error.stack}\n`)
  process.exit(1)
})
