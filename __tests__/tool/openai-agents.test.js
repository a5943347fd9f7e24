'use strict'
// `pykernel/openai-agents` run by the OpenAI Agents SDK itself: `run(agent, ...)` with a
// scripted `Model` (the SDK's interface) that calls the tool as a strict-mode model does
// (every field present, null for those it leaves unset), and a real kernel behind it.
const test = require('node:test')
const assert = require('node:assert/strict')
const Ajv = require('ajv')
const { Agent, Usage, run, setTracingDisabled, tool: agentsTool } = require('@openai/agents')
const { addon, python } = require('../helpers/kernel')
const tool = require('../../tool.js')
const agents = require('../../openai-agents.js')

const { KernelPool } = addon
const kernel = { interpreter: python }
const FIGURE = 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()'
// Traces would go to OpenAI's servers; a test sends nothing off the machine.
setTracingDisabled(true)

/** A `Model` that first calls the python tool with `args`, then answers with the text of
 *  the tool's output it was sent; it records every request. */
class ScriptedModel {
  constructor(args) {
    this.args = args
    this.requests = []
  }

  async getResponse(request) {
    this.requests.push(request)
    if (this.requests.length === 1) {
      const call = { type: 'function_call', callId: 'call-1', name: 'python', arguments: JSON.stringify(this.args), status: 'completed' }
      return { usage: new Usage(), output: [call] }
    }
    const output = functionOutput(request)
    const text = typeof output === 'string' ? output : [output].flat().map((part) => part.text ?? '').join('')
    return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `the tool said: ${text}` }] }] }
  }

  async *getStreamedResponse() {
    throw new Error('this test runs without streaming')
  }
}

/** The output of the function call result in a model request's input. */
function functionOutput(request) {
  const results = request.input.filter((item) => item.type === 'function_call_result')
  assert.equal(results.length, 1, JSON.stringify(request.input))
  assert.equal(results[0].callId, 'call-1')
  const { output } = results[0]
  return output.type === 'text' ? output.text : output
}

/** The strict-mode input for `cells`: every field present, null where unset. */
function strictInput(...codes) {
  return { cells: codes.map((code) => ({ code, title: null, timeout: null, reset: null })), session: null, timeout: null, reset: null }
}

/** The ways `schema` breaks OpenAI's strict mode, as paths. */
function strictViolations(schema, at = '$') {
  const problems = []
  if (schema === null || typeof schema !== 'object') return problems
  for (const keyword of ['minLength', 'maxLength', 'minItems', 'maxItems', 'exclusiveMinimum', 'minimum', 'pattern', 'format', 'oneOf', 'allOf', 'not']) {
    if (keyword in schema) problems.push(`${at}: ${keyword}`)
  }
  if ([schema.type].flat().includes('object')) {
    if (schema.additionalProperties !== false) problems.push(`${at}: additionalProperties is not false`)
    const keys = Object.keys(schema.properties || {})
    if (JSON.stringify([...(schema.required || [])].sort()) !== JSON.stringify([...keys].sort())) problems.push(`${at}: required is not every property`)
  }
  for (const [key, value] of Object.entries(schema.properties || {})) problems.push(...strictViolations(value, `${at}.${key}`))
  if (schema.items) problems.push(...strictViolations(schema.items, `${at}[]`))
  for (const [i, branch] of (schema.anyOf || []).entries()) problems.push(...strictViolations(branch, `${at}.anyOf[${i}]`))
  return problems
}

test('the strict schema is strict-valid, takes what a strict model sends, and the SDK sends it unchanged', () => {
  assert.deepEqual(strictViolations(agents.parameters), [])
  assert.deepEqual(strictViolations(tool.schema).length > 0, true, 'the plain schema is not strict')
  const validate = new Ajv({ strict: true }).compile(agents.parameters)
  assert.ok(validate(strictInput('1', '2')), JSON.stringify(validate.errors))
  assert.ok(validate({ cells: [{ code: '1', title: 't', timeout: 5, reset: true }], session: 's', timeout: 9, reset: false }))
  assert.equal(validate({ cells: [{ code: '1' }], session: null, timeout: null, reset: null }), false, 'every field is required')
  assert.equal(validate({ ...strictInput('1'), code: null }), false, 'no other field')
  assert.equal(validate({ ...strictInput('1'), session: 3 }), false)
  const built = agentsTool(agents.pythonTool({ pool: { execute() {} } }))
  assert.equal(built.name, 'python')
  assert.equal(built.strict, true)
  assert.deepEqual(built.parameters, agents.parameters, 'the SDK needs no strict conversion of its own')
  assert.deepEqual(agents.strictSchema(agents.parameters), agents.parameters, 'making it strict again changes nothing')
})

test('strictSchema on other shapes: enums and nested objects take null, a typeless optional becomes anyOf with null', () => {
  const schema = {
    type: 'object',
    properties: {
      mode: { type: 'string', enum: ['fast', 'full'] },
      either: { anyOf: [{ type: 'string' }, { type: 'number' }] },
      nested: { type: 'object', properties: { label: { type: 'string', minLength: 1 } } },
      needed: { type: 'integer', minimum: 0 },
      maybe: { type: ['object', 'null'], properties: { x: { type: 'string' } } },
    },
    required: ['needed'],
  }
  const strict = agents.strictSchema(schema)
  assert.deepEqual(strict, {
    type: 'object',
    properties: {
      mode: { type: ['string', 'null'], enum: ['fast', 'full', null] },
      either: { anyOf: [{ anyOf: [{ type: 'string' }, { type: 'number' }] }, { type: 'null' }] },
      nested: { type: ['object', 'null'], properties: { label: { type: ['string', 'null'] } }, required: ['label'], additionalProperties: false },
      needed: { type: 'integer' },
      maybe: { type: ['object', 'null'], properties: { x: { type: ['string', 'null'] } }, required: ['x'], additionalProperties: false },
    },
    required: ['mode', 'either', 'nested', 'needed', 'maybe'],
    additionalProperties: false,
  })
  assert.deepEqual(strictViolations(strict), [])
  assert.deepEqual(agents.strictSchema(strict), strict, 'strict already: unchanged')
  assert.equal(schema.properties.nested.properties.label.minLength, 1, 'the input is left as it was')
  const built = agentsTool({ name: 'probe', description: 'd', parameters: strict, strict: true, execute: () => '' })
  assert.deepEqual(built.parameters, strict, 'the SDK takes it as it is')
})

test('run(agent) calls the tool with strict-mode nulls; the output reaches the next request and the final text holds 42', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const model = new ScriptedModel(strictInput('x = 6', 'print(x * 7)'))
  const agent = new Agent({ name: 'analyst', instructions: 'Use python.', model, tools: [agentsTool(agents.pythonTool({ pool, sessionId: 'chat-1' }))] })
  const result = await run(agent, 'What is 6 * 7?')
  assert.equal(model.requests.length, 2)
  assert.deepEqual(model.requests[0].tools.map((offered) => offered.name), ['python'])
  assert.deepEqual(model.requests[0].tools[0].parameters, agents.parameters)
  assert.equal(model.requests[0].tools[0].description, tool.describe({ guide: model.requests[0].tools[0].description.match(/^Guide: (.*)$/m)[1] }))
  assert.match(model.requests[0].tools[0].description, /^Guide: .* in your instructions when the host included it\.$/m)
  assert.equal(model.requests[0].tools[0].strict, true)
  assert.equal(functionOutput(model.requests[1]), '42\n')
  assert.equal(result.finalOutput, 'the tool said: 42\n')
  assert.deepEqual(pool.sessions.map((s) => s.key.split(' @ ')[0]), ['session:chat-1'], "the host's context reached handle")
})

test('a figure reaches the model as an image after the text', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const model = new ScriptedModel(strictInput('print("plotting")', FIGURE))
  const agent = new Agent({ name: 'analyst', model, tools: [agentsTool(agents.pythonTool({ pool }))] })
  await run(agent, 'Plot it.')
  const [text, image, ...rest] = functionOutput(model.requests[1])
  assert.equal(text.type, 'input_text')
  assert.match(text.text, /^plotting\n\[chart: line\]\n(.+\n)*- Line 0: 3 points, y from 1 to 3, last 3\n$/, 'the text, then the figure\'s card')
  assert.equal(image.type, 'input_image')
  const [, base64] = image.image.match(/^data:image\/png;base64,(.+)$/)
  assert.equal(Buffer.from(base64, 'base64').subarray(1, 4).toString(), 'PNG')
  assert.deepEqual(rest, [])
})

test("the run's signal cancels the call; a bad pool is the host's error", async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const { execute } = agents.pythonTool({ pool })
  assert.equal(await execute(strictInput('1'), undefined, {}), '1\n', 'the session is up before the timed call')
  const started = Date.now()
  const text = await execute(strictInput('import time\ntime.sleep(30)'), undefined, { signal: AbortSignal.timeout(300) })
  assert.ok(Date.now() - started < 10_000, text)
  assert.match(text, /KeyboardInterrupt/, 'interrupted, well before its 30 s')
  assert.throws(() => agents.pythonTool({ pool: null }), { code: 'ERR_INVALID_ARG', message: /options\.pool must be a KernelPool/ })
  assert.match(agents.pythonTool({ pool, timeoutSeconds: 5 }).description, /\(default 5\)/, "the host's timeout")
  assert.equal(agents.pythonTool({ pool, description: 'Run Python.' }).description, 'Run Python.')
  assert.throws(() => agents.pythonTool({ pool, description: ['x'] }), { code: 'ERR_INVALID_ARG', message: /description must be a string/ })
})
