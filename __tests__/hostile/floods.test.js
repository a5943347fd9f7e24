'use strict'
// Hostile input: output floods. Real Python; the host must stay bounded and responsive,
// the agent's copy must be cut, and nothing written may break the kernel.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { startKernel, tempDir, waitFor, whileRunning, assertResponsive, probeFloor, assertKernelWorks, rssSampler, MB } = require('./_common')

const HOST_RSS_BOUND = 100 * MB // growth over the start allowed while a flood runs (docs/reliability.md)

let probe // a second, healthy kernel: "another session answers meanwhile"
test.before(async () => {
  probe = await startKernel()
  await probeFloor(probe) // the quiet round trip the responsiveness bound scales with
})
test.after(() => probe?.shutdown())

/** The stdout/stderr text of a flood cell's events, without building it if huge. */
function countingOnEvent() {
  const counts = { stdout: 0, stderr: 0, events: 0 }
  return {
    counts,
    onEvent: (_cell, event) => {
      counts.events++
      if (event.type === 'stdout' || event.type === 'stderr') counts[event.type] += Buffer.byteLength(event.text)
    },
  }
}

test('1 GB printed: host memory bounded, output truncated, artifact complete, host responsive', { timeout: 180_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const artifacts = tempDir('pykernel-hostile-art-')
  t.after(() => fs.rmSync(artifacts, { recursive: true, force: true }))
  const LINE = 100 // bytes, newline included
  const LINES = Math.floor((1024 * MB) / LINE) // 10,737,418 lines: 1 GiB less 24 bytes
  const TOTAL = LINES * LINE
  const code = [
    'import sys',
    `line = 'x' * ${LINE - 1} + '\\n'`,
    'chunk = line * 1000',
    'w = sys.stdout.write',
    `for _ in range(${Math.floor(LINES / 1000)}): w(chunk)`,
    `w(line * ${LINES % 1000})`,
    "print('THE END')",
  ].join('\n')
  const { counts, onEvent } = countingOnEvent()
  const rss = rssSampler()
  const started = Date.now()
  // Bounded: a result that never comes is reported, not waited for until the test timeout.
  const deadline = (ms) => new Promise((r) => setTimeout(() => r({ summary: `no result after ${ms} ms (${counts.stdout} bytes streamed)` }), ms).unref())
  const evaluate = () => Promise.race([deadline(100_000), kernel.evaluate([{ code }], { artifactsDir: artifacts, onEvent })]).then(
      (r) => (r.exitCode === 0 || r.summary ? r : Object.assign(r, { summary: `exitCode ${r.exitCode}: ${r.output.slice(0, 300)} ${JSON.stringify(r.cells.map((c) => c.error))}` })),
      (rejected) => ({ rejected, summary: `rejected: ${rejected.code} ${rejected.message}` }),
    )
  const { value: r, overlapped } = await whileRunning(probe, evaluate, {
    ready: () => waitFor(() => counts.stdout > 50 * MB, { timeoutMs: 60_000 }),
    requireOverlap: false, // checked last: an early end is reported by the checks before
  })
  const mem = rss.stop()
  const elapsed = Date.now() - started
  t.diagnostic(`1 GB flood: ${elapsed} ms, host RSS ${(mem.start / MB).toFixed(0)} -> max ${(mem.max / MB).toFixed(0)} MB (+${(mem.growth / MB).toFixed(0)} MB), ${(counts.stdout / MB).toFixed(0)} MB streamed`)
  assert.ok(mem.growth < HOST_RSS_BOUND, `host RSS grew by ${(mem.growth / MB).toFixed(0)} MB (bound ${HOST_RSS_BOUND / MB} MB)`)
  assert.equal(r.rejected, undefined, `evaluate rejected after ${elapsed} ms: ${r.rejected?.code} ${r.rejected?.message}`)
  assert.equal(r.exitCode, 0, r.summary)
  const expectedBytes = TOTAL + 'THE END\n'.length
  assert.equal(counts.stdout, expectedBytes, `every byte was streamed to onEvent (in ${counts.events} events; output ${JSON.stringify(r.output.slice(0, 100))})`)
  // The agent's copy: head + tail with the elision marker, a few tens of KiB.
  assert.ok(Buffer.byteLength(r.output) < 100 * 1024, `output is ${Buffer.byteLength(r.output)} bytes`)
  assert.match(r.output, /\[…\d+ lines elided…\]/)
  // The cut output ends with the line saying where the rest is.
  assert.match(r.output, /THE END\n\[full output \(\d+ lines\): artifact:\/\/([\w.-]+)\]\n$/)
  assert.equal(r.output.match(/artifact:\/\/([\w.-]+)\]\n$/)[1], r.truncated?.artifactId)
  assert.ok(r.truncated, 'truncation is reported')
  assert.equal(r.truncated.totalBytes, expectedBytes)
  assert.equal(r.truncated.totalLines, LINES + 1)
  // The artifact holds every byte (docs/reliability.md), ending as the output did.
  const artifact = r.truncated.artifactPath
  assert.ok(artifact, 'the full output was saved')
  const size = fs.statSync(artifact).size
  assert.equal(size, expectedBytes, 'the artifact holds every byte')
  const fd = fs.openSync(artifact, 'r')
  const ends = Buffer.alloc(8 + LINE)
  fs.readSync(fd, ends, 0, ends.length, size - ends.length)
  const begins = Buffer.alloc(LINE)
  fs.readSync(fd, begins, 0, LINE, 0)
  fs.closeSync(fd)
  assert.equal(ends.toString(), 'x'.repeat(LINE - 1) + '\nTHE END\n')
  assert.equal(begins.toString(), 'x'.repeat(LINE - 1) + '\n')
  assert.equal(r.cells[0].stdout.length <= 1024 * 1024 + 16, true, 'per-cell stdout capped at 1 MiB')
  assert.ok(overlapped, 'the probe ran while the flood was still running')
  await assertKernelWorks(kernel)
})

test('a 50 MB line without a newline: capped line in the output, full line in the artifact', { timeout: 60_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const artifacts = tempDir('pykernel-hostile-art-')
  t.after(() => fs.rmSync(artifacts, { recursive: true, force: true }))
  const SIZE = 50 * 1000 * 1000
  const rss = rssSampler()
  const { value: r } = await whileRunning(probe, () =>
    kernel.evaluate([{ code: `import sys, time\nsys.stdout.write('y' * ${SIZE})\nsys.stdout.flush()\ntime.sleep(0.5)` }], { artifactsDir: artifacts }),
  )
  const mem = rss.stop()
  t.diagnostic(`50 MB line: host RSS +${(mem.growth / MB).toFixed(0)} MB`)
  assert.equal(r.exitCode, 0)
  assert.ok(mem.growth < HOST_RSS_BOUND, `host RSS grew by ${(mem.growth / MB).toFixed(0)} MB`)
  assert.ok(Buffer.byteLength(r.output) <= 1024, `output is ${Buffer.byteLength(r.output)} bytes`)
  assert.match(r.output, /^y+…\n\[full output \(1 line\): artifact:\/\/[\w.-]+\]\n$/)
  assert.equal(r.truncated?.totalBytes, SIZE)
  assert.equal(r.truncated?.totalLines, 1)
  assert.ok(r.truncated.artifactPath, 'the full line is kept in an artifact')
  assert.equal(fs.statSync(r.truncated.artifactPath).size, SIZE)
  await assertKernelWorks(kernel)
})

test('1,000,000 one-byte writes arrive complete and in bounded time', { timeout: 60_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const started = Date.now()
  const { value: r } = await whileRunning(
    probe,
    () => kernel.execute("import sys\nw = sys.stdout.write\nfor _ in range(1_000_000): w('x')\nw('!')"),
    { ready: () => new Promise((r) => setTimeout(r, 100)) },
  )
  const elapsed = Date.now() - started
  t.diagnostic(`1e6 tiny writes: ${elapsed} ms`)
  assert.equal(r.status, 'ok')
  assert.equal(r.stdout.length, 1_000_001)
  assert.equal(r.stdout, 'x'.repeat(1_000_000) + '!')
  assert.ok(elapsed < 20_000, `took ${elapsed} ms`)
  await assertKernelWorks(kernel)
})

test('binary bytes and invalid UTF-8 on fd 1 and fd 2 become replacement characters, sanitized for the agent', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const code = [
    'import os, sys',
    'os.write(1, bytes(range(256)) + b"\\n")',
    'os.write(2, b"\\xff\\xfe\\xc3(\\x80 abc \\xed\\xa0\\x80 \\xf4\\x90\\x80\\x80\\n")',
    'os.write(1, b"\\xe2\\x82")  # a character cut in half, completed by nothing',
    'os.write(1, b"\\n")',
    'sys.stdout.buffer.write(b"\\x80\\x81 buffer\\n")',
    "print('after')",
  ].join('\n')
  const r = await kernel.execute(code)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  const printable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('')
  assert.ok(r.stdout.includes(printable), 'printable ASCII kept')
  assert.ok(r.stdout.includes('\uFFFD'), 'invalid bytes replaced by U+FFFD')
  assert.ok(r.stdout.endsWith('after\n'))
  assert.ok(r.stdout.includes(' buffer\n'))
  assert.ok(r.stderr.includes(' abc '))
  assert.ok(r.stderr.includes('\uFFFD'))
  assert.equal(Buffer.from(r.stdout, 'utf8').toString('utf8'), r.stdout, 'valid UTF-16/UTF-8 round trip')
  // The agent's copy: no control characters other than \t and \n.
  const e = await kernel.evaluate([{ code }])
  assert.equal(e.exitCode, 0)
  assert.doesNotMatch(e.output, /[\x00-\x08\x0b-\x1f\x7f]/, 'control characters removed')
  assert.match(e.output, /after/)
  await assertKernelWorks(kernel)
})

test('lone surrogates in print, stderr, an error message and a repr do not lose frames', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const printed = await kernel.execute("print('before \\ud800 mid \\udfff after')\n'done'")
  assert.equal(printed.status, 'ok')
  assert.match(printed.stdout, /^before .+ mid .+ after\n$/u)
  assert.equal(printed.result?.['text/plain'], "'done'")
  const stderr = await kernel.execute("import sys\nsys.stderr.write('err \\udc80\\n')\nprint('ok')")
  assert.match(stderr.stderr, /^err .+\n$/u)
  assert.equal(stderr.stdout, 'ok\n')
  const raised = await kernel.execute("raise ValueError('bad \\ud800 value')")
  assert.equal(raised.status, 'error')
  assert.equal(raised.error.ename, 'ValueError')
  assert.match(raised.error.evalue, /^bad .+ value$/u)
  const repr = await kernel.execute("class S:\n    def __repr__(self): return 'S<\\ud800>'\nS()")
  assert.equal(repr.status, 'ok')
  assert.match(repr.result?.['text/plain'] ?? '', /^S<.+>$/u)
  for (const r of [printed, stderr, raised, repr]) {
    for (const text of [r.stdout, r.stderr, r.error?.evalue ?? '', r.result?.['text/plain'] ?? '']) {
      assert.doesNotMatch(text, /[\ud800-\udfff]/, 'no lone surrogate reaches JavaScript')
    }
  }
  const e = await kernel.evaluate([{ code: "print('x\\ud800y')" }])
  assert.equal(e.exitCode, 0)
  assert.match(e.output, /^x.y\n?$/u)
  await assertKernelWorks(kernel)
})

test('NUL bytes from print, fd 1 and stderr are kept raw in the result and removed for the agent', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const r = await kernel.execute("import os, sys\nprint('a\\x00b')\nsys.stdout.flush()\nos.write(1, b'c\\x00d\\n')\nsys.stderr.write('e\\x00f\\n')\nos.write(1, b'tail\\x00')")
  assert.equal(r.status, 'ok')
  assert.equal(r.stdout, 'a\0b\nc\0d\ntail\0')
  assert.equal(r.stderr, 'e\0f\n')
  const e = await kernel.evaluate([{ code: "print('a\\x00b')\nimport os; os.write(1, b'\\x00\\x00c\\x00\\n')" }])
  assert.equal(e.exitCode, 0)
  assert.ok(!e.output.includes('\0'), 'NUL removed from the agent text')
  assert.match(e.output, /ab\n/)
  assert.match(e.output, /c\n/)
  await assertKernelWorks(kernel)
})

test('print followed at once by os.write(1) keeps the order the cell wrote in', async (t) => {
  // Not a flood: found while writing the NUL case. docs/api.md: "print, os.system, subprocesses,
  // C code writing to fd 1/2 ... are all captured, in order".
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const r = await kernel.execute("import os\nprint('1 print')\nos.write(1, b'2 fd\\n')\nprint('3 print')")
  assert.equal(r.stdout, '1 print\n2 fd\n3 print\n')
  await assertResponsive(probe, 'after the ordering case')
})

/** Python defining `image`: a valid PNG of random pixels (incompressible), `side` pixels
 *  square, as base64; stdlib only. */
const pngCode = (side) => [
  'import base64, os, struct, zlib',
  'def _chunk(kind, data):',
  "    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff)",
  `side = ${side}`,
  'pixels = os.urandom(side * side * 3)',
  "rows = b''.join(b'\\x00' + pixels[y * side * 3:(y + 1) * side * 3] for y in range(side))",
  "png = (b'\\x89PNG\\r\\n\\x1a\\n' + _chunk(b'IHDR', struct.pack('>IIBBBBB', side, side, 8, 2, 0, 0, 0))",
  "       + _chunk(b'IDAT', zlib.compress(rows, 1)) + _chunk(b'IEND', b''))",
  'image = base64.b64encode(png).decode()',
].join('\n')

test('3000 displayed PNGs in one cell: the result keeps the first 100 with a notice, onEvent gets all, host memory bounded', { timeout: 120_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const COUNT = 3000
  const code = [
    pngCode(200), // about 160 KB as base64: 480 MB for all of them
    `for i in range(${COUNT}):`,
    "    display({'image/png': image, 'text/plain': '<image %d>' % i}, raw=True)",
    "print('shown', len(image))",
  ].join('\n')
  let displays = 0
  const rss = rssSampler()
  const r = await kernel.evaluate([{ code }], {
    onEvent: (_cell, event) => {
      if (event.type === 'display') displays++
    },
  })
  const mem = rss.stop()
  const imageBytes = Number(r.output.match(/shown (\d+)/)?.[1])
  t.diagnostic(`${COUNT} displays of ${imageBytes} base64 bytes: host RSS ${(mem.start / MB).toFixed(0)} -> max ${(mem.max / MB).toFixed(0)} MB (+${(mem.growth / MB).toFixed(0)} MB)`)
  assert.ok(mem.growth < HOST_RSS_BOUND, `host RSS grew by ${(mem.growth / MB).toFixed(0)} MB (bound ${HOST_RSS_BOUND / MB} MB)`)
  assert.equal(r.exitCode, 0, r.output.slice(0, 500))
  assert.equal(displays, COUNT, 'every display was streamed to onEvent')
  assert.equal(r.images.length, 100)
  assert.equal(r.cells[0].displays.length, 100)
  assert.equal(r.cells[0].displays[99]['text/plain'], '<image 99>', 'the first ones are kept')
  assert.equal(r.cells[0].displaysDropped, COUNT - 100)
  assert.match(r.output, /^\[the cell displayed 3000 outputs; this result keeps the first 100 \(at most 100 or 64 MiB a cell\), and the other 2900 \([\d.]+ MiB\) were streamed to onEvent only; their images, JSON and charts are left out of `images`, `json` and `charts` likewise\]\n/)
  assert.match(r.output, /shown \d+/)
  await assertKernelWorks(kernel)
})

test('execute keeps the first 100 displays of a cell and ends them with a notice', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  let displays = 0
  const r = await kernel.execute(`${pngCode(4)}\nfor i in range(130): display({'image/png': image, 'text/plain': str(i)}, raw=True)`, {
    onEvent: (event) => {
      if (event.type === 'display') displays++
    },
  })
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(displays, 130)
  assert.equal(r.displaysDropped, 30)
  assert.equal(r.displays.length, 101)
  assert.equal(r.displays[99]['text/plain'], '99')
  assert.match(r.displays[100]['text/plain'], /^\[pykernel: the cell displayed 130 outputs; this result keeps the first 100 .* and the other 30 \([\d.]+ MiB\) were streamed to onEvent only\]$/)
  const next = await kernel.execute("display({'text/plain': 'one'}, raw=True)")
  assert.equal(next.displaysDropped, 0, 'the budget is per cell')
  assert.deepEqual(next.displays, [{ 'text/plain': 'one' }])
})
