'use strict'
// `pykernel/ai-sdk` run by the Vercel AI SDK itself: `generateText` with the SDK's own mock
// model (`ai/test`), scripted to call the tool, and a real kernel behind it. What reaches the
// model's next call (the text and the image) is read from the mock's recorded calls.
const test = require('node:test')
const assert = require('node:assert/strict')
const { generateText, stepCountIs } = require('ai')
const { MockLanguageModelV3 } = require('ai/test')
const { addon, python } = require('../helpers/kernel')
const tool = require('../../tool.js')
const aiSdk = require('../../ai-sdk.js')

const { KernelPool } = addon
const kernel = { interpreter: python }
const FIGURE = 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()'

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
}

/** The mock's answer that calls the python tool with `input`. */
function toolCall(input) {
  return {
    content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'python', input: JSON.stringify(input) }],
    finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
    usage,
    warnings: [],
  }
}

const done = { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }

/** The output of the tool result the model was sent in `call`'s prompt. */
function toolResultSent(call) {
  const parts = call.prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content).filter((p) => p.type === 'tool-result')
  assert.equal(parts.length, 1, JSON.stringify(call.prompt))
  assert.equal(parts[0].toolName, 'python')
  return parts[0].output
}

test('generateText runs the tool: the model is offered our schema, and reads the text and the figure of the call', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const model = new MockLanguageModelV3({ doGenerate: [toolCall({ cells: [{ code: 'print(6*7)' }, { code: FIGURE, title: 'plot' }] }), done] })
  const result = await generateText({
    model,
    tools: { python: aiSdk.pythonTool({ pool, sessionId: 'chat-1', timeoutSeconds: 90 }) },
    prompt: 'compute and plot',
    stopWhen: stepCountIs(2),
  })
  assert.equal(result.text, 'done')
  assert.equal(model.doGenerateCalls.length, 2)
  const [offered] = model.doGenerateCalls[0].tools
  assert.equal(offered.name, 'python')
  assert.equal(offered.description, tool.describe({ timeoutSeconds: 90, guide: offered.description.match(/^Guide: (.*)$/m)[1] }))
  assert.match(offered.description, /\(default 90\)/, "the host's timeout")
  assert.match(offered.description, /^Guide: .* in your instructions when the host included it\.$/m, 'the guide is where the host can put it')
  assert.deepEqual(offered.inputSchema, tool.schema)

  const output = toolResultSent(model.doGenerateCalls[1])
  assert.equal(output.type, 'content')
  const [text, image, ...rest] = output.value
  assert.equal(text.type, 'text')
  assert.match(text.text, /^42\n/)
  assert.equal(image.type, 'image-data')
  assert.equal(image.mediaType, 'image/png')
  assert.equal(Buffer.from(image.data, 'base64').subarray(1, 4).toString(), 'PNG')
  assert.deepEqual(rest, [])
  const [step] = result.steps[0].toolResults
  assert.equal(step.output.details.sessionId, 'chat-1', "the host's context reached handle")
})

test('input the schema refuses reaches handle, whose reason the model reads as the result', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const model = new MockLanguageModelV3({ doGenerate: [toolCall({ cells: [], session: null }), done] })
  await generateText({ model, tools: { python: aiSdk.pythonTool({ pool }) }, prompt: 'x', stopWhen: stepCountIs(2) })
  const output = toolResultSent(model.doGenerateCalls[1])
  assert.deepEqual(output.value, [{ type: 'text', text: 'Invalid python tool input: "cells" must be a non-empty array of {code, title?, timeout?, reset?}.' }])
  assert.deepEqual(pool.sessions, [], 'nothing ran')
})

test("the SDK's abortSignal cancels the call; v5's toModelOutput(output) gets images as media", async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const python = aiSdk.pythonTool({ pool })
  const started = Date.now()
  const r = await python.execute({ cells: [{ code: 'import time\ntime.sleep(30)' }] }, { toolCallId: 'c', messages: [], abortSignal: AbortSignal.timeout(300) })
  assert.ok(Date.now() - started < 10_000)
  assert.equal(r.details.cancelled, true)
  const figure = await python.execute({ cells: [{ code: FIGURE }] }, { toolCallId: 'c', messages: [] })
  const v5 = python.toModelOutput(figure)
  assert.deepEqual(v5.value.map((part) => part.type), ['text', 'media'])
  assert.equal(v5.value[1].mediaType, 'image/png')
  assert.throws(() => aiSdk.pythonTool({}), { code: 'ERR_INVALID_ARG', message: /options\.pool must be a KernelPool/ })
})

test("imagePart: 'file' gives v7's own form; an unknown form is the host's error", async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const python = aiSdk.pythonTool({ pool, imagePart: 'file' })
  const output = await python.execute({ cells: [{ code: FIGURE }] })
  const [, image] = python.toModelOutput({ toolCallId: 'c', input: {}, output }).value
  assert.deepEqual(Object.keys(image).sort(), ['data', 'mediaType', 'type'])
  assert.equal(image.type, 'file')
  assert.equal(image.mediaType, 'image/png')
  assert.deepEqual(Object.keys(image.data), ['type', 'data'])
  assert.equal(image.data.type, 'data')
  assert.equal(image.data.data, output.images[0].data)
  assert.throws(() => aiSdk.pythonTool({ pool, imagePart: 'png' }), { code: 'ERR_INVALID_ARG', message: /imagePart must be one of 'image-data', 'file', 'media'/ })
  assert.equal(aiSdk.pythonTool({ pool, description: 'Run Python.' }).description, 'Run Python.', 'the host\'s own description')
  assert.throws(() => aiSdk.pythonTool({ pool, description: 42 }), { code: 'ERR_INVALID_ARG', message: /description must be a string/ })
})

test('stream: true holds only the end of a flood in a preliminary result, however much the cell prints', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const python = aiSdk.pythonTool({ pool, stream: true })
  // 4 MB in 1 KB lines, flushed as it goes: each preliminary result copies the text so far.
  const code = 'import sys\nfor i in range(4000):\n    sys.stdout.write(("%06d " % i) + "x" * 1017 + "\\n")\n    sys.stdout.flush()'
  const yielded = []
  for await (const output of python.execute({ cells: [{ code }] }, { toolCallId: 'c', messages: [] })) yielded.push(output)
  yielded.pop()
  assert.ok(yielded.length >= 1, 'output came before the call ended')
  const longest = Math.max(...yielded.map((partial) => partial.text.length))
  assert.ok(longest <= 64 * 1024 + 100, `a preliminary result held ${longest} characters`)
  const last = yielded[yielded.length - 1].text
  assert.match(last, /^\[\d+ characters of earlier output not shown\]\n/)
})

test('stream: true yields the output so far, then the result, which is what the model reads', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const seen = []
  const python = aiSdk.pythonTool({ pool, stream: true, onOutput: (chunk) => { seen.push(chunk) } })
  const code = 'import time\nprint("first", flush=True)\ntime.sleep(1)\nprint("second")'
  const yielded = []
  for await (const output of python.execute({ cells: [{ code }] }, { toolCallId: 'c', messages: [] })) yielded.push(output)
  const last = yielded.pop()
  assert.equal(last.text, 'first\nsecond\n')
  assert.equal(last.details.exitCode, 0, 'the last is the call\'s result')
  assert.ok(yielded.length >= 1, 'output came before the call ended')
  assert.equal(yielded[0].text, 'first\n', 'the first preliminary result holds only what was printed by then')
  for (const partial of yielded) assert.deepEqual(partial.details, {})
  assert.equal(seen.join(''), 'first\nsecond\n', "the host's onOutput still sees every chunk")

  const model = new MockLanguageModelV3({ doGenerate: [toolCall({ cells: [{ code: 'print(6*7)' }] }), done] })
  await generateText({ model, tools: { python }, prompt: 'x', stopWhen: stepCountIs(2) })
  assert.deepEqual(toolResultSent(model.doGenerateCalls[1]).value, [{ type: 'text', text: '42\n' }])
})
