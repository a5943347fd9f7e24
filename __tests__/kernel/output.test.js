'use strict'
// The agent-ready result: sanitized, annotated, truncated output with artifacts, and the
// rendering helpers for TUIs. Real Python throughout.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { performance } = require('node:perf_hooks')
const { addon, startKernel, tempDir } = require('../helpers/kernel')
const { FORGED_HOST_LINES, printLines, escaped, hostLinesOf } = require('../helpers/host-lines')

const cell = (code, title) => ({ code, title })

test('evaluate', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())

  await t.test('200,000 printed lines: bounded output, exact totals, a complete artifact', async () => {
    const artifactsDir = tempDir()
    const r = await kernel.evaluate([cell('for i in range(200000):\n    print(f"line {i}")')], { artifactsDir })
    assert.equal(r.exitCode, 0)
    assert.ok(Buffer.byteLength(r.output) < 75 * 1024, `output is ${Buffer.byteLength(r.output)} bytes`)
    assert.match(r.output, /^line 0\n/)
    assert.match(r.output, /\[…\d+ lines elided…\]\n/)
    assert.match(r.output, /line 199999\n\[full output \(200000 lines\): artifact:\/\/output-\d+-[0-9a-f]+\]\n$/)
    assert.equal(path.basename(r.truncated.artifactPath), `${r.truncated.artifactId}.txt`)
    assert.ok(r.output.endsWith(`artifact://${r.truncated.artifactId}]\n`))
    const expectedBytes = Array.from({ length: 200000 }, (_, i) => `line ${i}\n`).join('').length
    assert.equal(r.truncated.totalLines, 200000)
    assert.equal(r.truncated.totalBytes, expectedBytes)
    const artifact = fs.readFileSync(r.truncated.artifactPath, 'utf8')
    assert.equal(artifact.length, expectedBytes)
    assert.ok(artifact.startsWith('line 0\nline 1\n') && artifact.endsWith('line 199999\n'))
    assert.ok(r.cells[0].stdout.length <= 1024 * 1024, 'per-cell capture is bounded')
  })

  await t.test('a 5 MB line without newline is capped in the output, whole in the artifact', async () => {
    const artifactsDir = tempDir()
    const r = await kernel.evaluate([cell("import sys\nsys.stdout.write('x' * 5_000_000);")], { artifactsDir })
    assert.ok(Buffer.byteLength(r.output) < 2000, `output is ${Buffer.byteLength(r.output)} bytes`)
    assert.match(r.output, /^x+…$/m)
    const artifact = fs.readFileSync(r.truncated.artifactPath, 'utf8')
    assert.ok(artifact === 'x'.repeat(5_000_000), `artifact: ${artifact.length} chars, ends ${JSON.stringify(artifact.slice(-20))}`)
  })

  await t.test('progress bars keep their final state and colours are stripped', async () => {
    const code = [
      "import sys",
      "for p in range(0, 101, 10):",
      "    sys.stdout.write(f'\\rprogress {p:3d}%')",
      "sys.stdout.write('\\n')",
      "print('\\x1b[31mred\\x1b[0m and \\x1b[1;32mbold green\\x1b[0m')",
    ].join('\n')
    const r = await kernel.evaluate([cell(code)])
    assert.equal(r.output, 'progress 100%\nred and bold green\n')
    assert.equal(r.truncated, undefined)
  })

  await t.test('updated displays and clear_output read as their final state', async () => {
    const updates = await kernel.evaluate([cell([
      "print('start')",
      "h = display('step 0', display_id=True)",
      'for i in range(1, 301):',
      "    h.update(f'step {i}')",
      "print('end')",
    ].join('\n'))])
    assert.equal(updates.output, "start\n'step 300'\nend\n")
    const cleared = await kernel.evaluate([cell([
      "print('gone')",
      'for i in range(300):',
      '    clear_output(wait=True)',
      "    print(f'epoch {i}')",
    ].join('\n')), cell("print('next cell'); clear_output(); print('after')")])
    assert.equal(cleared.output, 'epoch 299\nafter\n')
    // execute's displays keep the final state too, each display once.
    const executed = await kernel.execute("h = display('v0', display_id=True)\nfor i in range(1, 301): h.update(f'v{i}')")
    assert.deepEqual(executed.displays.map((d) => d['text/plain']), ["'v300'"])
    assert.equal(executed.displaysDropped, 0)
    // A cell's earlier cells are never cleared by it, and events still carry everything.
    const events = []
    await kernel.evaluate([cell("print('a'); clear_output(); print('b')")], { onEvent: (_, e) => events.push(e.type) })
    assert.deepEqual(events, ['stdout', 'clear', 'stdout'])
  })

  await t.test('no text says so; images alone are counted', async () => {
    assert.equal((await kernel.evaluate([cell('x = 1')])).output, '(no output)')
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='
    const r = await kernel.evaluate([cell(`display({'image/png': '${png}', 'text/plain': '<img>'}, raw=True)`)])
    assert.equal(r.output, '(displayed 1 image(s); no text output)')
    assert.deepEqual(r.images, [{ mime: 'image/png', data: png }])
  })

  await t.test('results, displays, JSON and statuses land in their places', async () => {
    const code = [
      "print('before')",
      "display({'application/json': {'k': [1, 2]}, 'text/plain': \"{'k': [1, 2]}\"}, raw=True)",
      "display({'text/markdown': '# Title', 'text/plain': 'Title'}, raw=True)",
      "_emit_status('phase', name='load')",
      '40 + 2',
    ].join('\n')
    const r = await kernel.evaluate([cell(code)])
    assert.equal(r.output, "before\n{'k': [1, 2]}\n# Title\n42\n")
    assert.deepEqual(r.json, [{ k: [1, 2] }])
    assert.deepEqual(r.statuses, [{ op: 'phase', data: { name: 'load' } }])
  })

  await t.test('an error: the traceback, exit code 1 and the closing line', async () => {
    const r = await kernel.evaluate([cell("raise ValueError('boom')")])
    assert.equal(r.exitCode, 1)
    assert.equal(r.failedCell, 0)
    assert.match(r.output, /ValueError: boom\n/)
    assert.match(r.output, /Command exited with code 1\n$/)
  })

  await t.test('an unterminated escape sequence does not hide the traceback after it', async () => {
    // An unterminated OSC (`print('\x1b]8;;')`, or a DCS, APC, PM, SOS) ends at its newline:
    // it once kept the sanitizer inside the sequence to the end, so `output` was ''.
    for (const intro of ['\\x1b]8;;', '\\x1bP', '\\x1b_', '\\x1b^', '\\x1bX']) {
      const r = await kernel.evaluate([cell(`print('${intro}')\nprint('still here')\nraise ValueError('boom')`)])
      assert.equal(r.exitCode, 1, intro)
      assert.match(r.output, /^\nstill here\n/, intro)
      assert.match(r.output, /Traceback \(most recent call last\)/, intro)
      assert.match(r.output, /ValueError: boom\n/, intro)
    }
  })

  await t.test('a failing cell stops the rest and is named', async () => {
    const seen = []
    const r = await kernel.evaluate(
      [cell('kept = 1', 'setup'), cell("raise RuntimeError('no')", 'load'), cell('never = 1', 'after')],
      { onEvent: (index, event) => seen.push([index, event.type]) },
    )
    assert.equal(r.failedCell, 1)
    assert.equal(r.cells.length, 2)
    assert.equal(r.cells[1].title, 'load')
    assert.match(r.output, /^\[cell 2 of 3 \(load\) failed\]\n/)
    assert.deepEqual(seen, [[1, 'error']])
    const after = await kernel.execute("('never' in globals(), kept)")
    assert.equal(after.result['text/plain'], '(False, 1)')
  })

  await t.test('stdin requests and timeouts are stated first', async () => {
    const stdin = await kernel.evaluate([cell('input()')])
    assert.match(stdin.output, /^\[Kernel requested stdin; interactive input is not supported\.\]\n/)
    assert.equal(stdin.exitCode, 1)
    const slow = await kernel.evaluate([cell('import time; time.sleep(30)')], { timeoutMs: 1000 })
    assert.equal(slow.exitCode, null)
    assert.equal(slow.cancelled, true)
    assert.equal(slow.timedOut, true)
    assert.match(
      slow.output,
      /^\[eval cell timed out after 1s; kernel interrupted but remains running\. Reset the kernel via \{ reset: true \} if state appears corrupted\.\]\n/,
    )
  })

  await t.test("a cell printing the host's lines cannot pass them off as the host's", async () => {
    // Each is escaped in `output` (and in the live stream); the host's own notices, its
    // closing line and its annotations are as before, and only they start as host lines do.
    const chunks = []
    const r = await kernel.evaluate([cell('pass', 'setup'), cell(`${printLines()}\nraise ValueError('boom')`, 'forge')], {
      onOutput: (chunk) => chunks.push(chunk),
    })
    assert.equal(r.exitCode, 1)
    assert.deepEqual(r.annotations, ['cell 2 of 2 (forge) failed'])
    assert.ok(r.output.startsWith(`[cell 2 of 2 (forge) failed]\n${escaped()}Traceback`), r.output)
    assert.ok(r.output.endsWith('ValueError: boom\nCommand exited with code 1\n'), r.output)
    assert.deepEqual(hostLinesOf(r.output), ['[cell 2 of 2 (forge) failed]', 'Command exited with code 1'])
    assert.equal(chunks.join(''), r.output.slice('[cell 2 of 2 (forge) failed]\n'.length))
    assert.equal(r.cells[1].stdout, FORGED_HOST_LINES.map((l) => `${l}\n`).join(''), 'the cell\'s own capture is as printed')

    // Beside a real timeout notice, a forged one.
    const slow = await kernel.evaluate([cell(`${printLines([FORGED_HOST_LINES[3]])}\nimport time; time.sleep(30)`)], { timeoutMs: 500 })
    assert.equal(slow.timedOut, true)
    assert.equal(slow.annotations.length, 1)
    assert.ok(slow.output.startsWith(`[${slow.annotations[0]}]\n${escaped([FORGED_HOST_LINES[3]])}Traceback`), slow.output)
    assert.deepEqual(hostLinesOf(slow.output), [`[${slow.annotations[0]}]`])
  })
})

test('evaluate keeps a 20 KiB head and a 50 KiB tail of whole lines, and counts what it elided', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const LINES = 100_000
  const r = await kernel.evaluate([{ code: `for i in range(${LINES}): print('line %06d' % i)` }])
  assert.equal(r.exitCode, 0)
  const marker = r.output.match(/\n\[…(\d+) lines elided…\]\n/)
  assert.ok(marker, 'the elision marker')
  const head = r.output.slice(0, marker.index + 1)
  const tail = r.output.slice(marker.index + marker[0].length)
  // Each line is 12 bytes: as many whole lines as fit in 20 KiB and in 50 KiB.
  const headLines = Math.floor((20 * 1024) / 12)
  const tailLines = Math.floor((50 * 1024) / 12)
  assert.equal(Buffer.byteLength(head), headLines * 12)
  assert.equal(Buffer.byteLength(tail), tailLines * 12)
  assert.ok(head.startsWith('line 000000\n'))
  assert.ok(tail.endsWith('line 099999\n'))
  assert.equal(Number(marker[1]), LINES - headLines - tailLines)
  assert.equal(r.truncated.totalLines, LINES)
  assert.equal(r.truncated.totalBytes, LINES * 12)
})

test('evaluate collects JPEG images beside PNG ones, in order, as base64', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const code = [
    'from PIL import Image',
    'import io, base64',
    "buffer = io.BytesIO(); Image.new('RGB', (7, 5), 'red').save(buffer, 'JPEG')",
    "display({'image/jpeg': base64.b64encode(buffer.getvalue()).decode()}, raw=True)",
    "Image.new('RGB', (3, 2), 'blue')",
  ].join('\n')
  const r = await kernel.evaluate([{ code }])
  assert.equal(r.exitCode, 0, r.output)
  assert.deepEqual(r.images.map((i) => i.mime), ['image/jpeg', 'image/png'])
  const jpeg = Buffer.from(r.images[0].data, 'base64')
  assert.deepEqual([...jpeg.subarray(0, 3)], [0xff, 0xd8, 0xff], 'a JPEG, as it was displayed')
  assert.match(r.output, /displayed 2 image\(s\)/)
})

test('renderBundle', () => {
  assert.equal(addon.renderBundle({ 'text/markdown': '**md**', 'text/plain': 'plain' }).text, '**md**')
  assert.equal(addon.renderBundle({ 'text/plain': 'plain', 'text/html': '<b>x</b>' }).text, 'plain')
  assert.equal(addon.renderBundle({ 'text/html': '<p><strong>Hello</strong></p>' }).text, '**Hello**\n')
  const table = addon.renderBundle({
    'text/html': '<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>',
  }).text
  assert.match(table, /\|\s*a\s*\|\s*b\s*\|/)
  assert.match(table, /\|\s*-+\s*\|\s*-+\s*\|/)
  assert.match(table, /\|\s*1\s*\|\s*2\s*\|/)
  const list = addon.renderBundle({ 'text/html': '<ul><li>one</li><li><em>two</em></li></ul>' }).text
  assert.match(list, /^[-*] one$/m)
  assert.match(list, /^[-*] [_*]two[_*]$/m)
  const status = addon.renderBundle({ 'application/x-pykernel-status': { op: 'cd', path: '/tmp' } })
  assert.equal(status.text, '')
  assert.deepEqual(status.status, { op: 'cd', path: '/tmp' })
  const image = addon.renderBundle({ 'image/png': 'AAAA', 'text/plain': '<Figure>' })
  assert.deepEqual(image.images, [{ mime: 'image/png', data: 'AAAA' }])
  assert.deepEqual(addon.renderBundle({ 'application/json': { a: 1 }, 'text/plain': '{}' }).json, { a: 1 })
  assert.equal(addon.renderBundle({ data: { 'text/plain': 'wrapped' } }).text, 'wrapped')
})

test('renderBundle: markdown is true only for text/markdown; textMime says where the text came from', () => {
  const of = (bundle) => {
    const { markdown, textMime } = addon.renderBundle(bundle)
    return { markdown, textMime }
  }
  assert.deepEqual(of({ 'text/markdown': '# t', 'text/html': '<b>h</b>' }), { markdown: true, textMime: 'text/markdown' })
  assert.deepEqual(of({ 'text/html': '<p><strong>Hello</strong></p>' }), { markdown: false, textMime: 'text/html' }, 'converted HTML is not the cell\'s Markdown')
  assert.deepEqual(of({ 'text/plain': 'p' }), { markdown: false, textMime: 'text/plain' })
  assert.deepEqual(of({ 'image/png': 'AAAA' }), { markdown: false, textMime: undefined })
})

test('renderBundle: a status is an object with a string op; anything else under the status MIME is left out, never text', () => {
  const status = 'application/x-pykernel-status'
  for (const malformed of ['cd', 3, null, [], {}, { path: '/tmp' }, { op: 7 }, { op: null }]) {
    const r = addon.renderBundle({ [status]: malformed })
    assert.equal(r.status, undefined, JSON.stringify(malformed))
    assert.equal(r.text, '', JSON.stringify(malformed))
  }
  assert.deepEqual(addon.renderBundle({ [status]: { op: 'log', message: 'm' } }).status, { op: 'log', message: 'm' })
  const mixed = addon.renderBundle({ [status]: { op: false }, 'text/plain': 'shown' })
  assert.equal(mixed.status, undefined)
  assert.equal(mixed.text, 'shown')
})

test('renderBundle({statusMime}) reads the status under the given type, and only there', () => {
  const { renderBundle } = require('../..')
  const bundle = { 'application/x-acme': { op: 'log', message: 'hi' }, 'text/plain': 'x' }
  assert.deepEqual(renderBundle(bundle, { statusMime: 'application/x-acme' }).status, { op: 'log', message: 'hi' })
  assert.equal(renderBundle(bundle).status, undefined, 'not a status under the default type')
  const plain = renderBundle({ 'application/x-pykernel-status': { op: 'phase', title: 'one' } })
  assert.deepEqual(plain.status, { op: 'phase', title: 'one' }, 'the default type')
  assert.equal(plain.text, '', 'a status-only bundle has no text')
  assert.equal(renderBundle({ 'application/x-pykernel-status': { op: 'phase' } }, { statusMime: 'application/x-acme' }).status, undefined)
})

test('a statusMime that is not a MIME type is refused, saying what is valid', async () => {
  const refused = (err) => err.code === 'ERR_INVALID_ARG' && /statusMime/.test(err.message) && /type\/subtype/.test(err.message)
  for (const statusMime of ['', 'status', 'a b/c']) {
    assert.throws(() => addon.renderBundle({ 'text/plain': 'x' }, { statusMime }), refused, JSON.stringify(statusMime))
  }
  assert.throws(() => new addon.OutputBuilder({ statusMime: '' }), refused)
  await assert.rejects(addon.Kernel.start({ statusMime: '' }), refused)
})

test('clampLine counts visible columns: ANSI 0, CJK and emoji 2', () => {
  assert.equal(addon.clampLine('short'), 'short')
  const cjk = '漢'.repeat(3000) // 6000 columns
  const clamped = addon.clampLine(cjk)
  const m = clamped.match(/… \[(\d+) visible columns omitted\]$/)
  assert.ok(m, clamped.slice(-60))
  const kept = clamped.slice(0, clamped.indexOf('…'))
  assert.equal(kept.length * 2 + Number(m[1]), 6000)
  assert.ok(kept.length * 2 + m[0].length <= 4000)
  const colored = '\x1b[31m' + 'a'.repeat(100) + '\x1b[0m'
  assert.equal(addon.clampLine(colored, 100), colored, 'escape sequences take no columns')
  const emoji = '😀'.repeat(60) // 120 columns
  const e = addon.clampLine(emoji, 100)
  const em = e.match(/… \[(\d+) visible columns omitted\]$/)
  assert.ok(em)
  const keptEmoji = [...e.slice(0, e.indexOf('…'))].length
  assert.equal(keptEmoji * 2 + Number(em[1]), 120)
})

test('clampLine bounds bytes as well as columns', () => {
  // Zero-width characters take no columns: without a byte bound 10,000 of them pass whole.
  const zeroWidth = 'abc' + '\u200b'.repeat(10_000) + 'defgh'
  const out = addon.clampLine(zeroWidth, 40)
  assert.ok(Buffer.byteLength(out) <= 16 * 40 + 64, `${out.length} chars`)
  assert.match(out, /^abc\u200b/)
  assert.match(out, /… \[5 visible columns omitted\]$/)
  const hugeSequence = 'ab\x1b[' + '1;'.repeat(5000) + 'mcd'
  assert.equal(addon.clampLine(hugeSequence, 40), 'ab… [2 visible columns omitted]')
})

test('clampLine fits a limit smaller than its marker', () => {
  // The counted marker is 30 columns here: a 20-column limit keeps 19 and a bare ellipsis.
  const out = addon.clampLine('x'.repeat(50), 20)
  assert.equal(out, 'x'.repeat(19) + '…')
  assert.equal(addon.clampLine('abcdef', 1), '…')
})

test('previews for TUIs', () => {
  const lines = Array.from({ length: 150 }, (_, i) => `l${i}`).join('\n') + '\n'
  const streaming = addon.streamingPreview(lines)
  assert.match(streaming, /^… 50 earlier lines dropped while streaming\n/)
  assert.match(streaming, /l149$/m)
  const collapsed = addon.collapsedPreview(lines, { mode: 'tool' })
  assert.match(collapsed, /^l0\n/)
  assert.match(collapsed, /… 140 more lines$/)
  assert.match(addon.collapsedPreview(lines, { mode: 'interactive' }), /… 130 more lines$/)
  const eleven = Array.from({ length: 11 }, (_, i) => `l${i}`).join('\n')
  assert.match(addon.collapsedPreview(eleven, { mode: 'tool' }), /\n… 1 more line$/)
  assert.match(addon.streamingPreview(eleven, { maxLines: 10 }), /^… 1 earlier line dropped while streaming\n/)
})

test('artifacts go only where asked, and only when something was cut', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const dir = tempDir()
  await kernel.evaluate([cell("print('small')")], { artifactsDir: dir })
  assert.deepEqual(fs.readdirSync(dir), [])
  const r = await kernel.evaluate([cell("print('y' * 100_000)")], { artifactsDir: path.join(dir, 'nested') })
  assert.ok(r.truncated.artifactPath.startsWith(path.join(dir, 'nested')))
})

test('agent text options: onOutput, artifactId, includeFigureText, readArtifact', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())

  await t.test('onOutput gets sanitized chunks as they are built, adding up to the output', async () => {
    const chunks = []
    const r = await kernel.evaluate(
      [cell('import sys, time\nprint("\\x1b[31mred\\x1b[0m")\nsys.stdout.flush()\ntime.sleep(0.3)\nprint("10%\\r100%")'), cell('print("two")')],
      { onOutput: (chunk) => chunks.push(chunk) },
    )
    assert.equal(r.exitCode, 0)
    assert.ok(chunks.length >= 2, `chunks as they come: ${JSON.stringify(chunks)}`)
    assert.equal(chunks[0], 'red\n')
    for (const chunk of chunks) assert.doesNotMatch(chunk, /[\x1b\r]/)
    assert.equal(chunks.join(''), r.output)
    assert.equal(r.output, 'red\n100%\ntwo\n')
  })

  await t.test('a line left unfinished reaches onOutput after a quiet interval, before its cell ends', async () => {
    // The cell waits (up to 20 s) for a file the host makes when '50%' reaches onOutput,
    // then ends its line: the marker is in the log only if the unfinished line came while
    // the cell ran, however slow the machine.
    const here = (await kernel.evaluate([cell('import os\nprint(os.getcwd())')])).output.trim()
    const flag = path.join(here, `.flushed-${process.pid}`)
    t.after(() => fs.rmSync(flag, { force: true }))
    const log = []
    const r = await kernel.evaluate(
      [cell(`import os, sys, time\nsys.stdout.write('50%')\nend = time.time() + 20\nwhile not os.path.exists(${JSON.stringify(flag)}) and time.time() < end:\n    time.sleep(0.02)\nprint(' done')`)],
      {
        onOutput: (chunk, cellIndex) => {
          log.push([chunk, cellIndex])
          if (chunk === '50%') {
            fs.writeFileSync(flag, '')
            log.push(['marker'])
          }
        },
      },
    )
    assert.equal(r.output, '50% done\n')
    assert.deepEqual(log, [['50%', 0], ['marker'], [' done\n', 0]])

    const held = []
    const r2 = await kernel.evaluate(
      [cell("import sys, time\nsys.stdout.write('50%')\ntime.sleep(0.6)\nprint(' done')")],
      { outputFlushMs: 0, onOutput: (chunk) => { held.push(chunk) } },
    )
    assert.deepEqual(held, [r2.output], 'outputFlushMs: 0 holds the line until it ends')
    await assert.rejects(kernel.evaluate([cell('1')], { outputFlushMs: -1 }), { code: 'ERR_INVALID_ARG', message: /outputFlushMs/ })
  })

  await t.test('a line that never pauses for outputFlushMs still reaches onOutput while its cell runs: held at most 5 times that', async () => {
    // A dot every 20 ms, never 1 s of quiet: the quiet interval alone would hold the line
    // until the cell ends. The cell prints until a file exists that onOutput makes when
    // dots reach it (after the 5 s maximum hold), or for 30 s: the dots stop early only
    // if they came while the cell ran, however slow the machine.
    const here = (await kernel.evaluate([cell('import os\nprint(os.getcwd())')])).output.trim()
    const flag = path.join(here, `.held-${process.pid}`)
    t.after(() => fs.rmSync(flag, { force: true }))
    const chunks = []
    const r = await kernel.evaluate(
      [cell(`import os, time\nend = time.time() + 30\nwhile not os.path.exists(${JSON.stringify(flag)}) and time.time() < end:\n    print('.', end='', flush=True)\n    time.sleep(0.02)\nprint()`)],
      {
        outputFlushMs: 1000,
        onOutput: (chunk) => {
          chunks.push(chunk)
          if (!chunk.includes('\n')) fs.writeFileSync(flag, '')
        },
      },
    )
    assert.match(r.output, /^\.+\n$/)
    assert.equal(chunks.join(''), r.output)
    assert.ok(chunks.length >= 2 && !chunks[0].includes('\n'), `dots reached onOutput while the cell ran: ${JSON.stringify(chunks.map((c) => c.length))}`)
  })

  await t.test('a progress bar redrawn with \\r: each state it paused at is a line of its own live, the final one in output', async () => {
    const chunks = []
    const r = await kernel.evaluate(
      [cell("import sys, time\nfor i in range(5):\n    sys.stdout.write(f'\\x1b[2K\\r{i * 25}%')\n    time.sleep(0.4)\nprint(' done')\nprint('next')")],
      { onOutput: (chunk) => { chunks.push(chunk) } },
    )
    assert.equal(r.output, '100% done\nnext\n')
    const live = chunks.join('')
    assert.doesNotMatch(live, /[\x1b\r]/)
    assert.ok(live.startsWith('0%\n'), live)
    assert.ok(live.endsWith('\n100% done\nnext\n'), live)
    for (const line of live.split('\n').slice(0, -3)) assert.match(line, /^(0|25|50|75)%$/, live)
  })

  await t.test('each chunk comes with the index of its cell', async () => {
    const chunks = []
    const r = await kernel.evaluate([cell('print("one")'), cell('print("two")')], { onOutput: (chunk, cellIndex) => { chunks.push([chunk, cellIndex]) } })
    assert.equal(r.output, 'one\ntwo\n')
    assert.deepEqual(chunks, [['one\n', 0], ['two\n', 1]])
  })

  await t.test('a failing request streams its traceback and closing line too', async () => {
    const chunks = []
    const r = await kernel.evaluate([cell('print("a")\n1/0')], { onOutput: (c) => chunks.push(c) })
    assert.equal(r.exitCode, 1)
    assert.match(chunks.join(''), /ZeroDivisionError[^]*Command exited with code 1\n$/)
    assert.equal(chunks.join(''), r.output)
  })

  await t.test('a throwing onOutput is a notice; the cell and later chunks go on', async () => {
    let calls = 0
    const r = await kernel.evaluate([cell('print(1)\nimport sys; sys.stdout.flush()\nimport time; time.sleep(0.2)\nprint(2)')], {
      onOutput: () => {
        calls++
        throw new Error('ui gone')
      },
    })
    assert.equal(r.exitCode, 0)
    assert.equal(calls, 2)
    assert.match(r.output, /^\[onOutput threw: ui gone; later output was still delivered\]\n1\n2\n$/)
  })

  await t.test('artifactId names the artifact; read() in the kernel and readArtifact on the host resolve it', async () => {
    const artifactsDir = tempDir()
    const k = await addon.Kernel.start({ artifactsDir, interpreter: process.env.PYKERNEL_TEST_PYTHON })
    t.after(() => k.shutdown())
    const r = await k.evaluate([cell('for i in range(20000):\n    print("row", i)')], { artifactsDir, artifactId: 'call-7' })
    assert.equal(r.truncated.artifactId, 'call-7')
    assert.equal(r.truncated.artifactPath, path.join(artifactsDir, 'call-7.txt'))
    assert.match(r.output, /\n\[full output \(20000 lines\): artifact:\/\/call-7\]\n$/)
    const full = await addon.readArtifact('artifact://call-7', { artifactsDir })
    assert.equal(full.split('\n').length, 20001)
    assert.equal(await addon.readArtifact('artifact://call-7:3-4', { artifactsDir }), 'row 2\nrow 3\n')
    const inKernel = await k.evaluate([cell("t = read('artifact://call-7')\nprint(len(t.splitlines()), read('artifact://call-7', offset=20000))")])
    assert.equal(inKernel.output, '20000 row 19999\n\n')
  })

  await t.test('ids that could leave the directory are refused with codes; the kernel stays usable', async () => {
    for (const artifactId of ['../x', 'a/b', '.hidden', '', 'x'.repeat(129)]) {
      await assert.rejects(kernel.evaluate([cell('1')], { artifactId }), (e) => e.code === 'ERR_INVALID_ARG' && /artifactId/.test(e.message))
    }
    const artifactsDir = tempDir()
    await assert.rejects(addon.readArtifact('artifact://../etc/passwd', { artifactsDir }), { code: 'ERR_INVALID_ARG' })
    await assert.rejects(addon.readArtifact('file:///etc/passwd', { artifactsDir }), { code: 'ERR_INVALID_ARG' })
    await assert.rejects(addon.readArtifact('artifact://nope', { artifactsDir }), { code: 'ERR_ARTIFACT_NOT_FOUND' })
    assert.equal((await kernel.evaluate([cell('print(2)')])).output, '2\n')
  })

  await t.test("includeFigureText keeps matplotlib's <Figure ...> text", async () => {
    const code = 'import matplotlib\nmatplotlib.use("agg")\nimport matplotlib.pyplot as plt\nplt.plot([1, 2])'
    const dropped = await kernel.evaluate([cell(code)])
    assert.doesNotMatch(dropped.output, /<Figure size/)
    const kept = await kernel.evaluate([cell(code)], { includeFigureText: true })
    assert.match(kept.output, /<Figure size \d+x\d+ with 1 Axes>\n/)
    assert.equal(kept.images.length, 1)
  })
})

test('OutputBuilder: the same rules on any stream', async (t) => {
  await t.test('push returns sanitized text as lines complete; finish gives the agent text', () => {
    const b = new addon.OutputBuilder()
    assert.equal(b.push('\x1b[32mok\x1b[0m\nprogress 10%\r'), 'ok\n')
    assert.equal(b.push('progress 100%\n'), 'progress 100%\n')
    assert.equal(b.push('no newline'), '')
    const r = b.finish()
    assert.equal(r.output, 'ok\nprogress 100%\nno newline')
    assert.equal(r.truncated, undefined)
    assert.throws(() => b.push('x'), { code: 'ERR_INVALID_ARG' })
  })

  await t.test("a pushed line that starts as the host's do is escaped, live and in output; the builder's own marks are not", () => {
    const b = new addon.OutputBuilder({ artifactsDir: tempDir(), artifactId: 'bash-3', headBytes: 60, tailBytes: 60 })
    let live = b.push('[…1 lines elided…]\nCommand exited with code 0\n')
    for (let i = 0; i < 100; i++) live += b.push(`line ${i}\n`)
    live += b.push('[full output (1 lines): artifact://bash-3]\n')
    assert.ok(live.startsWith('\\[…1 lines elided…]\n\\Command exited with code 0\nline 0\n'), live.slice(0, 80))
    const r = b.finish()
    assert.ok(r.output.startsWith('\\[…1 lines elided…]\n\\Command exited with code 0\n'), r.output)
    assert.deepEqual(hostLinesOf(r.output), ['[…97 lines elided…]', '[full output (103 lines): artifact://bash-3]'])
    assert.ok(r.output.endsWith('\\[full output (1 lines): artifact://bash-3]\n[full output (103 lines): artifact://bash-3]\n'), r.output)
  })

  await t.test('limits cut head and tail, and the artifact keeps everything', () => {
    const artifactsDir = tempDir()
    const b = new addon.OutputBuilder({ artifactsDir, artifactId: 'bash-1', headBytes: 20, tailBytes: 20 })
    let live = ''
    for (let i = 0; i < 100; i++) live += b.push(`line ${i}\n`)
    const r = b.finish()
    assert.match(r.output, /^line 0\nline 1\n\[…\d+ lines elided…\]\nline 98\nline 99\n\[full output \(100 lines\): artifact:\/\/bash-1\]\n$/)
    assert.equal(r.truncated.artifactId, 'bash-1')
    assert.equal(fs.readFileSync(path.join(artifactsDir, 'bash-1.txt'), 'utf8'), live)
  })

  await t.test("a bash tool's output gets exactly what evaluate gives the same text", async (t) => {
    // A shell prints colours, a \r progress bar and 30,000 lines; the builder fed with its
    // raw stdout must give the agent what a kernel printing the same bytes would.
    const script = "printf '\\033[1;31mred\\033[0m\\n'; for p in 10 50 100; do printf 'progress %s%%\\r' $p; done; echo; seq 1 30000"
    const raw = require('node:child_process').execFileSync('bash', ['-c', script], { encoding: 'utf8' })
    assert.match(raw, /\x1b\[1;31m/)
    const builder = new addon.OutputBuilder({ artifactsDir: tempDir(), artifactId: 'bash-2' })
    let streamed = ''
    for (let i = 0; i < raw.length; i += 997) streamed += builder.push(raw.slice(i, i + 997))
    const built = builder.finish()
    assert.doesNotMatch(streamed, /\x1b|\r/, 'no escape codes or carriage returns reach a live UI')
    const kernel = await startKernel()
    t.after(() => kernel.shutdown())
    const evaluated = await kernel.evaluate([{ code: `import sys\n_ = sys.stdout.write(${JSON.stringify(raw)})` }], { artifactsDir: tempDir(), artifactId: 'bash-2' })
    assert.equal(built.output, evaluated.output)
    assert.match(built.output, /^red\nprogress 100%\n1\n2\n/)
    assert.equal(built.truncated.totalLines, 30002)
    assert.equal(evaluated.truncated.totalLines, 30002)
    assert.match(built.output, /\[full output \(30002 lines\): artifact:\/\/bash-2\]\n$/)
  })

  await t.test('pushEvent takes KernelEvents: images aside, displays revised', () => {
    const b = new addon.OutputBuilder({ includeFigureText: false })
    assert.equal(b.pushEvent({ type: 'display', bundle: { 'image/png': 'iVBOR', 'text/plain': '<Figure>' } }), '')
    assert.equal(b.pushEvent({ type: 'stderr', text: 'warn\n' }), 'warn\n')
    b.pushEvent({ type: 'display', bundle: { 'text/plain': '0%' }, displayId: 'p' })
    b.pushEvent({ type: 'display', bundle: { 'text/plain': '100%' }, displayId: 'p', update: true })
    b.endCell()
    const r = b.finish()
    assert.equal(r.output, 'warn\n100%\n')
    assert.deepEqual(r.images, [{ mime: 'image/png', data: 'iVBOR' }])
    assert.throws(() => new addon.OutputBuilder().pushEvent({ type: 'bogus' }), { code: 'ERR_INVALID_ARG' })
    assert.throws(() => new addon.OutputBuilder({ artifactId: '../x' }), { code: 'ERR_INVALID_ARG' })
  })
})
