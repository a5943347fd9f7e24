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

/**
 * What the model reads of a result: its text, then each image. From v6 on the SDK calls
 * `toModelOutput({ toolCallId, input, output })` and takes images as `image-data`; v5 calls
 * `toModelOutput(output)` and takes them as `media`. A `ToolResult` never has a `toolCallId`,
 * so the argument itself says which.
 */
function toModelOutput(argument) {
  const options = argument !== null && typeof argument === 'object' && 'toolCallId' in argument && 'output' in argument
  const result = options ? argument.output : argument
  const imageType = options ? 'image-data' : 'media'
  return {
    type: 'content',
    value: [
      { type: 'text', text: result.text },
      ...result.images.map(({ mime, data }) => ({ type: imageType, data, mediaType: mime })),
    ],
  }
}

/**
 * The tool for the SDK's `tools`: `description`, `inputSchema`, `execute` and
 * `toModelOutput`. `options.pool` is the `KernelPool`; the rest is `handle`'s context
 * (`sessionId`, `ownerId`, `cwd`, `interpreter`, `timeoutSeconds`, `signal`, `onEvent`,
 * `onOutput`). The SDK's `abortSignal` cancels the call as `signal` does.
 */
function pythonTool(options) {
  if (options === null || typeof options !== 'object' || !options.pool || typeof options.pool.execute !== 'function') {
    const error = new TypeError('pykernel/ai-sdk pythonTool(options): options.pool must be a KernelPool')
    error.code = 'ERR_INVALID_ARG'
    throw error
  }
  const context = { ...options }
  return {
    description: tool.description,
    inputSchema,
    execute: (input, { abortSignal } = {}) => tool.handle(input, { ...context, signal: anySignal(context.signal, abortSignal) }),
    toModelOutput,
  }
}

/** The signal that aborts when either does (either may be absent). */
function anySignal(a, b) {
  if (!a || !b) return a || b
  return AbortSignal.any([a, b])
}

module.exports = { pythonTool, inputSchema, toModelOutput, name: tool.name }
