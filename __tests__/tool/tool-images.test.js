'use strict'
// Images sized for the model (docs/charts.md#images-sized-for-the-model): a large
// matplotlib figure comes back through `pykernel/tool` within the budget, the text says
// so in a notice line, the original is kept whole in the pool's artifactsDir, and
// `ctx.images: false` sends the pool's image unchanged.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { addon, python, tempDir } = require('../helpers/kernel')
const tool = require('../../tool.js')

const { KernelPool } = addon
const kernel = { interpreter: python }

// 24x18 inches at 100 dpi: about 2100x1600 once bbox_inches="tight" trims the margins.
const BIG_FIGURE = `import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(24, 18), dpi=100)
ax.plot(range(100), [x * x for x in range(100)], linewidth=1)
ax.set_title('squares')
plt.show()`

/** Width and height from a PNG's IHDR. */
function pngSize(bytes) {
  assert.equal(bytes.subarray(1, 4).toString(), 'PNG')
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) }
}

test('a large figure is reduced to the budget, the text says so, and the original is kept whole', async (t) => {
  const artifactsDir = tempDir()
  const pool = new KernelPool({ kernel, prewarm: 0, artifactsDir })
  t.after(async () => {
    await pool.disposeAll()
    fs.rmSync(artifactsDir, { recursive: true, force: true })
  })
  const r = await tool.handle({ cells: [{ code: BIG_FIGURE }] }, { pool })
  assert.equal(r.isError, false, r.text)
  const full = Buffer.from(r.details.result.images[0].data, 'base64')
  const original = pngSize(full)
  assert.ok(original.width > 1568, `the figure is ${original.width} px wide`)

  assert.equal(r.images.length, 1)
  assert.equal(r.images[0].mime, 'image/png')
  const sent = Buffer.from(r.images[0].data, 'base64')
  const fitted = pngSize(sent)
  assert.equal(Math.max(fitted.width, fitted.height), 1568)
  assert.ok(Math.abs(fitted.height - (original.height * 1568) / original.width) <= 1, 'the aspect ratio is kept')
  assert.ok(sent.length <= 1 << 20, `${sent.length} bytes`)

  const notice = r.notices.at(-1)
  const line = `[${notice}]\n`
  assert.ok(r.text.endsWith(line), r.text)
  const match = notice.match(/^image 1 reduced from (\d+)x(\d+) \(\d+ KB\) to (\d+)x(\d+) \(\d+ KB\) for the model; the original is (\S+)$/)
  assert.ok(match, notice)
  assert.deepEqual(match.slice(1, 5).map(Number), [original.width, original.height, fitted.width, fitted.height])
  const kept = match[5]
  assert.equal(path.dirname(kept), artifactsDir)
  assert.match(path.basename(kept), /^image-\d+-[0-9a-f]{16}\.png$/)
  assert.deepEqual(fs.readFileSync(kept), full)
  assert.deepEqual(pngSize(fs.readFileSync(kept)), original)
  assert.equal(fs.statSync(kept).mode & 0o777, 0o600)
})

test('ctx.images: false sends the pool\'s image unchanged; a budget of its own is used', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const off = await tool.handle({ cells: [{ code: BIG_FIGURE }] }, { pool, images: false })
  assert.equal(off.images[0].data, off.details.result.images[0].data)
  assert.ok(!off.text.includes('reduced'), off.text)

  const small = await tool.handle({ cells: [{ code: 'plt.figure(figsize=(8, 6)); plt.plot([1, 2]); plt.show()' }] }, { pool, images: { maxEdge: 300 } })
  const fitted = pngSize(Buffer.from(small.images[0].data, 'base64'))
  assert.equal(Math.max(fitted.width, fitted.height), 300)
  // No artifactsDir: nothing kept, and the notice says no path.
  assert.match(small.notices.at(-1), /^image 1 reduced from \d+x\d+ \(\d+ KB\) to \d+x\d+ \(\d+ KB\) for the model$/)
})

test('an image past the result\'s total is left out, with a notice', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const r = await tool.handle({ cells: [{ code: BIG_FIGURE }] }, { pool, images: { maxTotalBytes: 1024 } })
  assert.deepEqual(r.images, [])
  assert.equal(r.details.result.images.length, 1)
  assert.match(r.notices.at(-1), /^image 1 \(\d+x\d+, \d+ KB\) left out: the result's images would pass 1024 bytes$/)
  assert.ok(r.text.endsWith(`[${r.notices.at(-1)}]\n`))
})

test('a bad ctx.images rejects with ERR_INVALID_ARG before the call runs', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  for (const [images, message] of [
    [true, /ctx\.images must be false or an object/],
    ['small', /ctx\.images must be false or an object/],
    [{ maxEdges: 100 }, /ctx\.images has no key "maxEdges"/],
    [{ maxEdge: 3 }, /ctx\.images: .*maxEdge.*must be an integer from 16 to 16384, got 3/],
    [{ maxBytes: '1 MB' }, /ctx\.images: .*maxBytes/],
  ]) {
    await assert.rejects(tool.handle({ cells: [{ code: 'ran = True' }] }, { pool, images }), (error) => {
      assert.equal(error.code, 'ERR_INVALID_ARG')
      assert.match(error.message, message)
      return true
    })
  }
  assert.deepEqual(pool.sessions, [], 'no call ran')
})

test("the attack: twenty images that each claim 36 million pixels in a few KB; the host decodes two of them", async (t) => {
  // One colour compresses to nothing, so a cell can show many huge images cheaply; sizing
  // them all held the host's CPU for seconds each. Past 100 million pixels decoded for
  // one result, the rest are left out undecoded.
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const code = [
    'import io, base64',
    'from PIL import Image',
    'buffer = io.BytesIO(); Image.new("RGB", (6000, 6000), (200, 30, 30)).save(buffer, "PNG")',
    'png = base64.b64encode(buffer.getvalue()).decode()',
    'for _ in range(20): display({"image/png": png}, raw=True)',
  ].join('\n')
  const r = await tool.handle({ cells: [{ code }] }, { pool })
  assert.equal(r.isError, false, r.text)
  assert.equal(r.details.result.images.length, 20)
  assert.equal(r.images.length, 2, 'two of 36 MP fit in 100 million pixels decoded')
  const skipped = r.notices.filter((n) => /^image \d+ \(6000x6000, \d+ KB\) left out: sizing it would take the result past the 100000000 pixels decoded for one result$/.test(n))
  assert.equal(skipped.length, 18, r.notices.join('\n'))
})
