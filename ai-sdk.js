'use strict'
// `pykernel/ai-sdk`: the Python tool for the Vercel AI SDK (`ai`, v5 and later), ready for
// `generateText({ tools: { python: pythonTool({ pool }) } })`. It is `pykernel/tool` in the
// shape the SDK's `tool()` returns, and needs no `ai` at run time: the input schema is built
// here in the form the SDK's `jsonSchema()` gives (below), so nothing of the SDK is loaded,
// whichever copy or version of it the host has.
const tool = require('./tool.js')

/**
 * The input schema as the SDK's `jsonSchema(schema)` returns it: an object marked with the
 * SDK's global symbol (`Symbol.for`, so any copy of the SDK recognises it) and no `validate`,
 * so the SDK passes the model's input through and `handle` checks it, telling the model what
 * was wrong in its own result. v5 also looks for the validator mark.
 */
const inputSchema = Object.freeze({
  [Symbol.for('vercel.ai.schema')]: true,
  [Symbol.for('vercel.ai.validator')]: true,
  _type: undefined,
  jsonSchema: tool.schema,
  validate: undefined,
})

/** The forms of an image in the SDK's tool result content, by the majors that take them. */
const IMAGE_PARTS = {
  // v6 and v7 (v7 converts it to `file`, with a deprecation notice once per process)
  'image-data': ({ mime, data }) => ({ type: 'image-data', data, mediaType: mime }),
  // v7's own form
  file: ({ mime, data }) => ({ type: 'file', data: { type: 'data', data }, mediaType: mime }),
  // v5's (v6 converts it)
  media: ({ mime, data }) => ({ type: 'media', data, mediaType: mime }),
}

/**
 * What the model reads of a result: its text, then each image. From v6 on the SDK calls
 * `toModelOutput({ toolCallId, input, output })`, v5 calls `toModelOutput(output)` and takes
 * images only as `media`; a `ToolResult` never has a `toolCallId`, so the argument itself
 * says which. `imagePart` overrides the form (`'file'`, v7's own, keeps v7 from noting
 * that `image-data` is deprecated).
 */
function toModelOutput(argument, imagePart) {
  const options = argument !== null && typeof argument === 'object' && 'toolCallId' in argument && 'output' in argument
  const result = options ? argument.output : argument
  const image = IMAGE_PARTS[imagePart || (options ? 'image-data' : 'media')]
  return { type: 'content', value: [{ type: 'text', text: result.text }, ...result.images.map(image)] }
}

/**
 * The tool for the SDK's `tools`: `description`, `inputSchema`, `execute` and
 * `toModelOutput`. `options.pool` is the `KernelPool`; `options.description` replaces
 * the model-facing text (by default `describe()` with the host's timeout, saying the guide
 * is in the instructions); `options.imagePart` the form of
 * images (above); `options.stream: true` makes `execute` yield the output so far as
 * preliminary results (the SDK streams them to a UI; the model reads only the last, the
 * call's result); the rest is `handle`'s context (`sessionId`, `ownerId`, `cwd`,
 * `interpreter`, `timeoutSeconds`, `signal`, `onEvent`, `onOutput`). The SDK's
 * `abortSignal` cancels the call as `signal` does.
 */
function pythonTool(options) {
  if (options === null || typeof options !== 'object' || !options.pool || typeof options.pool.execute !== 'function') {
    throw invalid('options.pool must be a KernelPool')
  }
  const { imagePart, stream, description, ...context } = options
  if (imagePart !== undefined && !Object.hasOwn(IMAGE_PARTS, imagePart)) {
    throw invalid(`options.imagePart must be one of ${Object.keys(IMAGE_PARTS).map((k) => `'${k}'`).join(', ')}`)
  }
  if (description !== undefined && typeof description !== 'string') throw invalid('options.description must be a string')
  const run = (input, { abortSignal } = {}, onOutput = context.onOutput) =>
    tool.handle(input, { ...context, signal: anySignal(context.signal, abortSignal), onOutput })
  return {
    description: description ?? tool.describe({ timeoutSeconds: context.timeoutSeconds }),
    inputSchema,
    execute: stream ? (input, executeOptions) => streamed(run, input, executeOptions, context.onOutput) : run,
    toModelOutput: (argument) => toModelOutput(argument, imagePart),
  }
}

/** The most of a call's output a preliminary result holds: its end. A cell may print
 *  without end, and each preliminary result is a whole copy of the text so far. */
const PRELIMINARY_MAX_CHARS = 64 * 1024

/** `text` cut to its last `PRELIMINARY_MAX_CHARS` characters, after a line saying how
 *  many came before; `dropped` counts those an earlier cut left out. */
function lastPart(text, dropped) {
  if (text.length <= PRELIMINARY_MAX_CHARS) return { text, dropped }
  const cut = text.length - PRELIMINARY_MAX_CHARS
  return { text: text.slice(cut), dropped: dropped + cut }
}

/**
 * Runs the call, yielding a preliminary result (`details` empty) each time output arrives,
 * the output so far (its last 64 KiB), then the call's result. The host's own `onOutput`
 * still sees every chunk.
 */
async function* streamed(run, input, executeOptions, hostOnOutput) {
  let pending = ''
  let wake
  let done = false
  const onOutput = (chunk, cellIndex) => {
    pending += chunk
    if (wake) wake()
    if (hostOnOutput) return hostOnOutput(chunk, cellIndex)
  }
  const call = run(input, executeOptions, onOutput).finally(() => {
    done = true
    if (wake) wake()
  })
  // Awaited below; marked handled for a consumer that stops iterating before the end.
  call.catch(() => {})
  let text = ''
  let dropped = 0
  while (!done || pending) {
    if (pending) {
      ;({ text, dropped } = lastPart(text + pending, dropped))
      pending = ''
      const shown = dropped ? `[${dropped} characters of earlier output not shown]\n${text}` : text
      yield { text: shown, notices: [], output: shown, images: [], charts: [], isError: false, details: {} }
      continue
    }
    await new Promise((resolve) => {
      wake = resolve
    })
    wake = undefined
  }
  yield await call
}

function invalid(message) {
  const error = new TypeError(`pykernel/ai-sdk pythonTool(options): ${message}`)
  error.code = 'ERR_INVALID_ARG'
  return error
}

/** The signal that aborts when either does (either may be absent). */
function anySignal(a, b) {
  if (!a || !b) return a || b
  return AbortSignal.any([a, b])
}

module.exports = { pythonTool, inputSchema, toModelOutput, name: tool.name }
