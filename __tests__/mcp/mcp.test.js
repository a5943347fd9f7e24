'use strict'
// `pykernel mcp`, driven as an MCP client drives it: the SDK's Client spawning
// `node bin/pykernel.js mcp` over stdio. Tools listed, a plot returned as image content
// (and a figure's chart as structured content),
// a cancelled call interrupted with its session alive, sessions isolated, reset and list,
// the host's notices as an item of their own;
// and, read on the wire, live output as progress notifications before the result.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Client } = require('@modelcontextprotocol/sdk/client/index.js')
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js')
const { python } = require('../helpers/kernel')
const tool = require('../../tool.js')

const cli = path.join(__dirname, '..', '..', 'bin', 'pykernel.js')

/** A connected client of a fresh `pykernel mcp`, closed (and the server gone) after `t`. */
async function connect(t, extra = []) {
  const args = [cli, 'mcp', ...(python ? ['--python', python] : []), ...extra]
  const transport = new StdioClientTransport({ command: process.execPath, args, stderr: 'pipe' })
  const client = new Client({ name: 'pykernel-test', version: '0' })
  await client.connect(transport)
  t.after(() => client.close())
  return client
}

const run = (client, args, options) => client.callTool({ name: 'python', arguments: args }, undefined, options)
const textOf = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('')

test('lists the python tool with our schema, and the session tools', async (t) => {
  const client = await connect(t)
  const { tools } = await client.listTools()
  assert.deepEqual(tools.map((x) => x.name), ['python', 'reset_session', 'list_sessions'])
  assert.deepEqual(tools[0].inputSchema, tool.schema)
  // The short description, in this server's terms (mcp-server.test.js).
  assert.match(tools[0].description, /^Run Python cells in a persistent process/)
})

test('a cell with a matplotlib plot returns its text, the card and the plot as image content, its chart as structured content', async (t) => {
  const client = await connect(t)
  const r = await run(client, { cells: [{ code: 'import matplotlib.pyplot as plt\nplt.plot([3, 1, 2])\nprint("\\x1b[32mplotted\\x1b[0m")' }] })
  assert.equal(r.isError, false, textOf(r))
  assert.equal(r.content[0].type, 'text')
  assert.equal(
    r.content[0].text,
    'plotted\n[chart: line]\nx: unlabelled, linear, -0.1 to 2.1\ny: unlabelled, linear, 0.9 to 3.1\n1 series, 3 points:\n- Line 0: 3 points, y from 1 to 3, last 2\n',
  )
  assert.deepEqual(r.structuredContent.charts.map((c) => [c.type, c.source, c.elements[0].points]), [['line', 'matplotlib', [[0, 3], [1, 1], [2, 2]]]])
  const images = r.content.filter((c) => c.type === 'image')
  assert.equal(images.length, 1)
  assert.equal(images[0].mimeType, 'image/png')
  assert.equal(Buffer.from(images[0].data, 'base64').subarray(1, 4).toString(), 'PNG')
})

test("a figure's chart is structured content, its card in the text; a call without charts has none", async (t) => {
  const client = await connect(t)
  const chart = { type: 'pie', title: 'Will I win?', elements: [{ label: 'No', angle: 324, radius: 1, value: 90, fraction: 0.9 }] }
  const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
  const code = `display({'image/png': '${png}', 'text/plain': '<Figure>', 'application/vnd.pykernel.chart+json': ${JSON.stringify(chart)}}, raw=True)`
  const r = await run(client, { cells: [{ code }] })
  assert.equal(r.isError, false, textOf(r))
  assert.deepEqual(r.structuredContent, { charts: [chart] })
  assert.deepEqual(r.content.map((c) => c.type), ['text', 'image'])
  assert.equal(r.content[0].text, '[chart: pie "Will I win?"]\n1 slice:\n- No: 90 (90%)\n', 'the card, not the JSON')
  assert.equal((await run(client, { cells: [{ code: '6*7' }] })).structuredContent, undefined)
})

test('charts past 512 KB of JSON are left out of the structured content with a note; their cards stay', async (t) => {
  const client = await connect(t)
  const big = "{'type': 'line', 'title': 'Big', 'elements': [{'label': 's', 'points': [[i, i] for i in range(500)], 'note': 'x' * 600_000}]}"
  const small = "{'type': 'pie', 'title': 'Small', 'elements': [{'label': 'a', 'value': 1, 'fraction': 1, 'angle': 360, 'radius': 1}]}"
  const show = (chart) => `display({'text/plain': '<Figure>', 'application/vnd.pykernel.chart+json': ${chart}}, raw=True)`
  const r = await run(client, { cells: [{ code: `${show(big)}\n${show(small)}` }] })
  assert.equal(r.isError, false, textOf(r))
  assert.deepEqual(r.structuredContent.charts.map((c) => c.title), ['Small'])
  assert.match(r.content[0].text, /^\[chart 1 left out of the structured content: its JSON \(\d+ KB\) would take the result past 512 KB; its card is in the text\]\n$/)
  assert.match(textOf(r), /\[chart: line "Big"\][^]*\[chart: pie "Small"\]/)
})

test('a failing cell is an error result with the traceback; bad input is an error result naming the field', async (t) => {
  const client = await connect(t)
  const failed = await run(client, { cells: [{ code: 'raise ValueError("nope")' }] })
  assert.equal(failed.isError, true)
  assert.match(textOf(failed), /ValueError: nope/)
  const bad = await run(client, { cells: [{ code: 1 }] })
  assert.equal(bad.isError, true)
  assert.match(textOf(bad), /cells\[0\]\.code must be a string/)
})

test("the host's notices are a text item of their own; a cell printing them verbatim shows them escaped", async (t) => {
  const { printLines, escaped, hostLinesOf } = require('../helpers/host-lines')
  const client = await connect(t)
  const r = await run(client, { cells: [{ code: 'pass' }, { code: `${printLines()}\nraise ValueError("boom")` }] })
  assert.equal(r.isError, true)
  assert.deepEqual(r.content.map((c) => c.type), ['text', 'text'])
  assert.equal(r.content[0].text, '[cell 2 of 2 failed]\n', 'the notices, apart')
  const output = r.content[1].text
  assert.ok(output.startsWith(escaped()), output)
  assert.ok(output.endsWith('ValueError: boom\nCommand exited with code 1\n'), output)
  assert.deepEqual(hostLinesOf(output), ['Command exited with code 1'])
  // Without notices, the output is the one text item.
  assert.deepEqual((await run(client, { cells: [{ code: '6*7' }] })).content, [{ type: 'text', text: '42\n' }])
})

test('cancelling a long cell interrupts it; the same session answers next, with its state', async (t) => {
  const client = await connect(t)
  await run(client, { cells: [{ code: 'before = "kept"' }] })
  const abort = new AbortController()
  const started = Date.now()
  const pending = run(client, { cells: [{ code: 'import time\nfor _ in range(600): time.sleep(0.1)' }] }, { signal: abort.signal })
  setTimeout(() => abort.abort(), 1000)
  await assert.rejects(pending, /abort/i)
  const after = await run(client, { cells: [{ code: 'before' }] })
  assert.equal(textOf(after), "'kept'\n")
  assert.ok(Date.now() - started < 20_000, 'the cell was interrupted, not left to run its 60 s')
  const { structuredContent } = await client.callTool({ name: 'list_sessions', arguments: {} })
  assert.equal(structuredContent.sessions.length, 1, 'no second kernel was started')
})

test('two sessions are isolated; reset_session ends one; list_sessions shows them', async (t) => {
  const client = await connect(t)
  await run(client, { cells: [{ code: 'secret = 1' }], session: 'one' })
  const two = await run(client, { cells: [{ code: 'secret' }], session: 'two' })
  assert.equal(two.isError, true)
  assert.match(textOf(two), /NameError: name 'secret' is not defined/)
  assert.equal(textOf(await run(client, { cells: [{ code: 'secret' }], session: 'one' })), '1\n')

  const listed = await client.callTool({ name: 'list_sessions', arguments: {} })
  assert.deepEqual(listed.structuredContent.sessions.map((s) => s.session).sort(), ['one', 'two'])
  assert.match(textOf(listed), /^one: idle \d+s, 2 cells run, pid \d+$/m)

  // A misspelt argument is refused, and resets nothing (it would have ended the default
  // session).
  const typo = await client.callTool({ name: 'reset_session', arguments: { sesion: 'one' } })
  assert.equal(typo.isError, true)
  assert.equal(textOf(typo), 'Invalid reset_session input: unknown argument "sesion"; its arguments are "session".')
  const listTypo = await client.callTool({ name: 'list_sessions', arguments: { all: true } })
  assert.equal(listTypo.isError, true)
  assert.match(textOf(listTypo), /unknown argument "all"; it takes no arguments/)
  assert.equal(textOf(await run(client, { cells: [{ code: 'secret' }], session: 'one' })), '1\n', 'nothing was reset')
  const reset = await client.callTool({ name: 'reset_session', arguments: { session: 'one' } })
  assert.match(textOf(reset), /Session "one" was ended/)
  const afterReset = await run(client, { cells: [{ code: "'secret' in globals()" }], session: 'one' })
  assert.equal(textOf(afterReset), 'False\n')
  const again = await client.callTool({ name: 'reset_session', arguments: { session: 'never' } })
  assert.match(textOf(again), /had no live process/)
})

test('an unknown tool is a protocol error (-32602) naming the tools there are', async (t) => {
  const client = await connect(t)
  await assert.rejects(client.callTool({ name: 'bash', arguments: {} }), (error) => {
    assert.equal(error.code, -32602)
    assert.match(error.message, /Unknown tool "bash".*python, reset_session and list_sessions/)
    return true
  })
  // The server is still there.
  assert.equal(textOf(await run(client, { cells: [{ code: '6*7' }] })), '42\n')
})

test('a 2000x1500 figure fits the default budget with its card and chart JSON; the original is kept whole in the artifacts dir', async (t) => {
  const client = await connect(t)
  const code = [
    'import numpy as np, matplotlib.pyplot as plt',
    'x = np.linspace(0, 20, 10_000)',
    'fig = plt.figure(figsize=(20, 15), dpi=100)',
    'plt.plot(x, np.sin(x) * x, label="damped")',
    'plt.title("Growth"); plt.xlabel("Time (s)"); plt.ylabel("Amplitude (mV)"); plt.legend()',
    'fig.tight_layout()  # the axes fill the figure, so the PNG is about 2000x1500 after the tight crop',
    'plt.show()',
  ].join('\n')
  const r = await run(client, { cells: [{ code }] })
  assert.equal(r.isError, false, textOf(r))
  const [image] = r.content.filter((c) => c.type === 'image')
  const sent = Buffer.from(image.data, 'base64')
  const [width, height] = [sent.readUInt32BE(16), sent.readUInt32BE(20)]
  assert.equal(image.mimeType, 'image/png')
  assert.equal(Math.max(width, height), 1568)
  assert.ok(sent.length <= 1 << 20, `${sent.length} bytes`)
  // The note is among the host's notices, the first text item.
  const match = r.content[0].text.match(/^\[image 1 reduced from (\d+)x(\d+) \(\d+ KB\) to \d+x\d+ \(\d+ KB\) for the model; the original is (\S+)\]$/m)
  assert.ok(match, r.content[0].text)
  const original = fs.readFileSync(match[3])
  assert.equal(path.basename(path.dirname(match[3])).startsWith('pykernel-mcp-'), true, match[3])
  assert.deepEqual([original.readUInt32BE(16), original.readUInt32BE(20)], [Number(match[1]), Number(match[2])])
  assert.ok(Number(match[1]) > 1900 && Number(match[2]) > 1400, `the original is the full figure: ${match[1]}x${match[2]}`)
  // The card in the text, the chart as structured content, its series cut to 500 points.
  const text = textOf(r)
  const card = text.slice(text.indexOf('[chart: line "Growth"]'))
  assert.match(card, /^\[chart: line "Growth"\]\nx: Time \(s\), linear, .+\ny: Amplitude \(mV\), linear, .+\n1 series, 10000 points:\n- damped: 10000 points, downsampled to 500, y from -17\.31 to 18\.26, last 18\.26\n/)
  assert.ok(card.length <= 600 + 200, card)
  const [chart] = r.structuredContent.charts
  assert.deepEqual([chart.type, chart.elements[0].count, chart.elements[0].points.length <= 500], ['line', 10000, true])
  // The default budget fits the common clients: Claude Code's MCP result cap is 25,000
  // tokens; an image costs about width*height/750 tokens, text about a token per 4 chars.
  const json = JSON.stringify(r.structuredContent)
  const tokens = Math.ceil((width * height) / 750) + Math.ceil((text.length + json.length) / 4)
  assert.ok(tokens <= 25_000, `about ${tokens} tokens (${json.length} chars of chart JSON)`)
})

test('images past what one MCP message holds are left out with a note, and the client stays connected', async (t) => {
  // Unsized (`--image-budget off`), two ~4.6 MB PNGs of noise: the first fits, the second
  // would pass the 10 MiB message limit.
  const client = await connect(t, ['--image-budget', 'off'])
  const code = 'import os, base64\nfrom PIL import Image\nfor _ in range(2):\n    display(Image.frombytes("RGB", (1240, 1240), os.urandom(1240 * 1240 * 3)))'
  const r = await run(client, { cells: [{ code }] })
  const images = r.content.filter((c) => c.type === 'image')
  assert.equal(images.length, 1, JSON.stringify(r.content.map((c) => c.type)))
  assert.match(textOf(r), /\[image 2 \(1240x1240, \d+\.\d MB\) left out: the result's images would pass 4718592 bytes; the original is \S+pykernel-mcp-\S+\.png\]/)
  assert.equal(textOf(await run(client, { cells: [{ code: '6*7' }] })), '42\n')
})

test('a bad --image-budget is a usage error before serving', () => {
  const { spawnSync } = require('node:child_process')
  for (const [budget, message] of [['huge', /--image-budget takes 'off' or maxEdge=<n>/], ['maxEdge=3', /--image-budget: .*maxEdge.*from 16 to 16384, got 3/]]) {
    const r = spawnSync(process.execPath, [cli, 'mcp', '--image-budget', budget], { input: '', encoding: 'utf8' })
    assert.equal(r.status, 2, r.stderr)
    assert.match(r.stderr, message)
  }
})

test('--launcher runs the sessions through it (here `env`): the runner is the far side\'s copy; its words stay out of the description', async (t) => {
  // A launcher's words may carry a token: the description goes to the client and the model.
  const client = await connect(t, ['--launcher', 'env PYKERNEL_LAUNCH_TOKEN=s3cret-in-argv'])
  const { tools } = await client.listTools()
  const described = tools.find((tool) => tool.name === 'python').description
  assert.match(described, /through the server's launcher/)
  assert.doesNotMatch(described, /s3cret|PYKERNEL_LAUNCH_TOKEN/)
  const r = await run(client, { cells: [{ code: "import sys\nprint(sys.modules['pykernel_runner'].__file__)" }], session: 'far' })
  assert.equal(r.isError, false, textOf(r))
  assert.match(textOf(r), /\/pykernel-far-[0-9a-f]{16}\/pykernel_runner\/__init__\.py/)
})

test('pykernel mcp streams output as progress notifications when the client asks, all before the result', async (t) => {
  // Judged on the wire, not through the SDK's Client: that client drops a progress
  // notification it reads in the same chunk as the response (its notification handlers run
  // a microtask later, after the response has removed the progress handler), which a
  // loaded machine makes likely. What the server promises is the order it writes.
  const { spawn } = require('node:child_process')
  const args = [path.join(__dirname, '..', '..', 'bin', 'pykernel.js'), 'mcp', ...(python ? ['--python', python] : [])]
  const server = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'] })
  t.after(() => server.kill())
  const messages = []
  const waiters = []
  let buffered = ''
  server.stdout.on('data', (data) => {
    buffered += data
    let newline
    while ((newline = buffered.indexOf('\n')) >= 0) {
      messages.push(JSON.parse(buffered.slice(0, newline)))
      buffered = buffered.slice(newline + 1)
      for (const waiter of waiters.splice(0)) waiter()
    }
  })
  const send = (message) => server.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...message })}\n`)
  const responseTo = async (id) => {
    for (;;) {
      const found = messages.find((m) => m.id === id && !m.method)
      if (found) return found
      await new Promise((resolve) => waiters.push(resolve))
    }
  }
  send({ id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pykernel-test', version: '0' } } })
  await responseTo(1)
  send({ method: 'notifications/initialized' })
  const code = 'import time\nprint("\\x1b[1mone\\x1b[0m")\ntime.sleep(0.5)\nprint("two")'
  send({ id: 2, method: 'tools/call', params: { name: 'python', arguments: { cells: [{ code }] }, _meta: { progressToken: 'p-2' } } })
  const response = await responseTo(2)
  assert.equal(response.result.content[0].text, 'one\ntwo\n')
  const callMessages = messages.slice(messages.findIndex((m) => m.id === 1) + 1)
  const progress = callMessages.filter((m) => m.method === 'notifications/progress')
  assert.ok(progress.every((m) => m.params.progressToken === 'p-2'))
  assert.equal(progress.map((m) => m.params.message).join(''), 'one\ntwo\n', 'the live output, sanitized, in order')
  assert.ok(progress.length >= 2, 'the first line came while the cell still ran')
  assert.deepEqual(progress.map((m) => m.params.progress), progress.map((_, i) => i + 1))
  assert.equal(callMessages.at(-1), response, 'every notification came before the result')
})
