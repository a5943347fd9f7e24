'use strict'
// `pykernel/openai-agents`: the Python tool for the OpenAI Agents SDK (`@openai/agents`),
// as the options its `tool()` takes: `agent.tools = [tool(pythonTool({ pool }))]`. The
// schema is `pykernel/tool`'s made strict (OpenAI's structured outputs): every field
// required, optional ones nullable, and the model's nulls mean "not set" to `handle`.
// Nothing of the SDK is loaded here; the host passes the options to its own `tool()`.
const tool = require('./tool.js')

/**
 * Keywords that only constrain values. Strict mode takes a subset of JSON Schema, and which
 * of these it accepts depends on the model (`minLength` never; `minItems`,
 * `exclusiveMinimum` not on every model): the strict schema leaves them out, and `handle`
 * checks them all, telling the model what was wrong in its result.
 */
const VALUE_CONSTRAINTS = [
  'minLength', 'maxLength', 'pattern', 'format',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
  'minItems', 'maxItems', 'uniqueItems', 'minProperties', 'maxProperties',
]

/**
 * `schema` made strict: in every object, each property is listed in `required` and
 * `additionalProperties` is false; a property that was optional takes `null` too
 * (`type: [t, "null"]`); value constraints are left out. A pure function of its input.
 */
function strictSchema(schema) {
  if (Array.isArray(schema)) return schema.map(strictSchema)
  if (schema === null || typeof schema !== 'object') return schema
  const out = {}
  for (const [key, value] of Object.entries(schema)) {
    if (VALUE_CONSTRAINTS.includes(key)) continue
    out[key] = ['properties', '$defs', 'definitions'].includes(key) ? mapValues(value, strictSchema) : strictSchema(value)
  }
  if ([schema.type].flat().includes('object') && schema.properties) {
    const required = new Set(schema.required || [])
    out.properties = mapValues(out.properties, (property, key) => (required.has(key) ? property : nullable(property)))
    out.required = Object.keys(schema.properties)
    out.additionalProperties = false
  }
  return out
}

function mapValues(object, fn) {
  return Object.fromEntries(Object.entries(object).map(([key, value]) => [key, fn(value, key)]))
}

/** `property` taking `null` as well. */
function nullable(property) {
  if (property.type === undefined) return { anyOf: [property, { type: 'null' }] }
  const types = [property.type].flat()
  if (types.includes('null')) return property
  const widened = { ...property, type: [...types, 'null'] }
  if (Array.isArray(property.enum)) widened.enum = [...property.enum, null]
  return widened
}

/** The strict schema of the tool's input. */
const parameters = strictSchema(tool.schema)

/**
 * What the tool returns to the SDK for a result: the text alone, or with images the SDK's
 * structured output (a text item, then an image item each), which it sends the model as
 * `input_text` and `input_image`.
 */
function toolOutput(result) {
  if (result.images.length === 0) return result.text
  return [
    { type: 'text', text: result.text },
    ...result.images.map(({ mime, data }) => ({ type: 'image', image: { data, mediaType: mime } })),
  ]
}

/**
 * The options for the SDK's `tool()`: `name`, `description`, the strict `parameters`,
 * `strict: true` and `execute`. `options.pool` is the `KernelPool`; `options.description`
 * replaces the model-facing text (by default `describe()` with the host's timeout, saying
 * the guide is in the instructions); the rest is `handle`'s
 * context (`sessionId`, `ownerId`, `cwd`, `interpreter`, `timeoutSeconds`, `signal`,
 * `onEvent`, `onOutput`). The run's signal (the SDK's `details.signal`) cancels the call as
 * `signal` does.
 */
function pythonTool(options) {
  if (options === null || typeof options !== 'object' || !options.pool || typeof options.pool.execute !== 'function') {
    throw invalid('options.pool must be a KernelPool')
  }
  const { description, ...context } = options
  if (description !== undefined && typeof description !== 'string') throw invalid('options.description must be a string')
  return {
    name: tool.name,
    description: description ?? tool.describe({ timeoutSeconds: context.timeoutSeconds }),
    parameters,
    strict: true,
    execute: async (input, _runContext, details) => {
      const signal = anySignal(context.signal, details && details.signal)
      return toolOutput(await tool.handle(input, { ...context, signal }))
    },
  }
}

function invalid(message) {
  const error = new TypeError(`pykernel/openai-agents pythonTool(options): ${message}`)
  error.code = 'ERR_INVALID_ARG'
  return error
}

/** The signal that aborts when either does (either may be absent). */
function anySignal(a, b) {
  if (!a || !b) return a || b
  return AbortSignal.any([a, b])
}

module.exports = { pythonTool, parameters, strictSchema, toolOutput, name: tool.name }
