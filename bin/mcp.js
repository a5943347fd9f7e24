'use strict'
// `pykernel mcp`: the eval tool of `pykernel/tool` served to an MCP client (an editor, a
// desktop agent) over stdio, with two session tools beside it. Stdout is the protocol's:
// nothing else may be written there (diagnostics go to stderr).
//
// One server process serves one client, so a session is the model's session name itself
// (its owner too: `reset_session` ends it with `disposeOwner`). Streamed output becomes
// progress notifications when the client asked for them (a `progressToken`); a cancelled
// request aborts its call, which interrupts the cell and leaves the session alive. The
// tool's long guide is a resource and a prompt; its description, sent with every request,
// is the short one.
//
// The SDK is an optional peer dependency: this file loads it only when the server runs.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const tool = require('../tool.js')

const SDK = '@modelcontextprotocol/sdk'

/**
 * The MCP SDK, loaded when `pykernel mcp` runs and never before: it is an optional peer
 * dependency, so a user of the library alone does not install it. Undefined when it is
 * not installed (or is a version without these modules).
 */
function loadSdk() {
  try {
    require.resolve(`${SDK}/server/index.js`)
  } catch {
    return undefined
  }
  // The low-level Server, not McpServer: McpServer takes input schemas as zod objects,
  // while the tool's schema is plain JSON Schema data (`pykernel/tool`), listed as it is.
  return {
    ...require(`${SDK}/server/index.js`),
    ...require(`${SDK}/server/stdio.js`),
    ...require(`${SDK}/types.js`),
  }
}

/** Bounds the shutdown of every kernel when the client goes away. */
const DISPOSE_BUDGET_MS = 3000

const RESET_TOOL = {
  name: 'reset_session',
  title: 'Reset a Python session',
  description:
    'End a Python session of the python tool: its variables, imports and working directory are discarded, ' +
    'and its next call starts a fresh Python process. Use it when the session is in a bad state.',
  inputSchema: {
    type: 'object',
    properties: { session: { type: 'string', minLength: 1, description: `The session to end. Default "${tool.DEFAULT_SESSION}".` } },
    additionalProperties: false,
  },
  // It discards a session's state; ending an ended session changes nothing more.
  annotations: { title: 'Reset a Python session', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
}

const LIST_TOOL = {
  name: 'list_sessions',
  title: 'List Python sessions',
  description: 'List the live Python sessions of the python tool: name, whether a call is running, cells run, idle time.',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  annotations: { title: 'List Python sessions', readOnlyHint: true, openWorldHint: false },
}

/** The tool's long guide, as a resource and as a prompt: too long for the description a
 *  client sends with every request, there when the model (or the user) wants it. */
const GUIDE_URI = 'pykernel://guide'
const GUIDE_PROMPT = 'python_guide'
const GUIDE_TITLE = 'Guide to the python tool'
const GUIDE_SUMMARY = 'How to use the python tool: sessions, time, output, the ready-made names in every session (read, write, display, kv, env), IPython habits, the sandbox, limits.'

/**
 * What code run by this server may write and reach, in one sentence, for the python
 * tool's description; `kernel` is the pool's kernel options.
 */
function sandboxSentence(kernel) {
  if (kernel.launcher) {
    // Not its words: a launcher may carry a token (`kubectl --token=...`), and the
    // description goes to the client and the model.
    return `code runs elsewhere, through the server's launcher, confined by what that gives it (not by pykernel's sandbox), in ${kernel.cwd ? `${kernel.cwd} on the far side` : "the far side's working directory"}.`
  }
  const writable = kernel.sandbox && kernel.sandbox.writable
  const writes =
    writable === 'all'
      ? "code writes wherever the server's user may"
      : `code writes only its working directory (${kernel.cwd ?? process.cwd()}), TMPDIR${writable ? ` and ${writable.join(', ')}` : ''}`
  return `${writes}; credential files in the home directory read empty; ${networkOf(kernel) ? "the network is the host's" : 'there is no network'}.`
}

/** Whether the kernels reach the network: the host's unless their sandbox takes it away
 *  (`pykernel mcp` itself has no option that does). */
function networkOf(kernel) {
  return !(kernel.sandbox && kernel.sandbox.network === false)
}

/** The python tool as this server lists it: the short description in its own terms (its
 *  timeout, its sandbox, where the guide is), a title, and what it may do. */
function pythonTool(kernel, timeoutSeconds) {
  const description = tool.describe({
    timeoutSeconds,
    sandbox: sandboxSentence(kernel),
    guide: `the resource ${GUIDE_URI} (or the prompt "${GUIDE_PROMPT}") has the full guide: helpers (read, write, display, kv), magics, limits.`,
  })
  return {
    name: tool.name,
    title: 'Run Python',
    description,
    inputSchema: tool.schema,
    // Code may change or delete files it can write, and reach whatever the network does.
    annotations: { title: 'Run Python', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: networkOf(kernel) },
  }
}

/** A tool result of text only. */
function textResult(text, isError = false, structuredContent) {
  return { content: [{ type: 'text', text }], isError, ...(structuredContent ? { structuredContent } : {}) }
}

/** The most image bytes one result carries, whatever the budget: the SDK's stdio
 *  transport refuses a message over 10 MiB (base64 adds a third), and a client that got
 *  one stays disconnected. */
const MAX_RESULT_IMAGE_BYTES = 4.5 * 1024 * 1024

/**
 * The `ctx.images` of every call: the images sized for the model by `pykernel/tool`
 * (docs/charts.md#images-sized-for-the-model), its originals kept in the pool's
 * artifactsDir, the result's total never past [`MAX_RESULT_IMAGE_BYTES`]. `budget` is
 * `--image-budget`'s: `false` sends images unchanged as far as that cap allows (an edge
 * no model takes, 16384 px, is still reduced), an object overrides the defaults.
 */
function imageBudgetOf(budget) {
  if (budget === false) return { maxEdge: 16384, maxBytes: 64 * 1024 * 1024, maxTotalBytes: MAX_RESULT_IMAGE_BYTES }
  const images = { ...budget }
  // The default total (3 MiB) is under the cap; a larger one given is held to it.
  if (images.maxTotalBytes !== undefined) images.maxTotalBytes = Math.min(images.maxTotalBytes, MAX_RESULT_IMAGE_BYTES)
  return images
}

/** The MCP result of a `python` call: the host's notices as a text item of their own
 *  (one `[...]` line each, among them one per image reduced or left out; none when there
 *  are none), then what the cells printed, then each image sized for the model as image
 *  content. A refused call is its reason alone. The figures' charts, when there are any,
 *  are `structuredContent: { charts }` (the tool declares no output schema, so a call
 *  without charts has none). Their JSON is not repeated as text, as the spec suggests for
 *  older clients: the text already has each chart's card, and a chart of a few thousand
 *  points would crowd the model's context the card spares. */
function evalResultOf(result) {
  const content = []
  const { charts, notes } = chartsWithin(result.charts ?? [])
  if (result.details.code) {
    content.push({ type: 'text', text: result.text })
  } else {
    const notices = [...result.notices, ...notes]
    if (notices.length) {
      content.push({ type: 'text', text: notices.map((notice) => `[${notice.replace(/[\r\n]/g, ' ')}]\n`).join('') })
    }
    content.push({ type: 'text', text: result.output })
  }
  for (const { mime, data } of result.images) content.push({ type: 'image', data, mimeType: mime })
  return { content, isError: result.isError, ...(charts.length ? { structuredContent: { charts } } : {}) }
}

/** The most chart JSON (characters) one result carries. A chart keeps at most 500 points a
 *  series, but a figure of many axes and series still reaches megabytes, and the images
 *  and the text share the SDK's 10 MiB message (past it the client is disconnected). */
const MAX_CHART_CHARS = 512 * 1024

/** The charts that fit in [`MAX_CHART_CHARS`], in order, and a note for each left out
 *  (its card is in the text all the same). */
function chartsWithin(charts) {
  let room = MAX_CHART_CHARS
  const kept = []
  const notes = []
  charts.forEach((chart, index) => {
    const size = JSON.stringify(chart).length
    if (size <= room) {
      room -= size
      kept.push(chart)
    } else {
      notes.push(`chart ${index + 1} left out of the structured content: its JSON (${Math.ceil(size / 1024)} KB) would take the result past ${MAX_CHART_CHARS / 1024} KB; its card is in the text`)
    }
  })
  return { charts: kept, notes }
}

/**
 * The `onOutput` of a call whose client asked for progress: each chunk of sanitized
 * output is one `notifications/progress` with the chunk as its message. Its promise is
 * returned so the pool can wait for a slow client rather than buffer without bound; a
 * failed send (the client left) is dropped, the call goes on.
 */
function progressReporter(extra) {
  const progressToken = extra._meta && extra._meta.progressToken
  if (progressToken === undefined) return undefined
  let progress = 0
  return (chunk) => {
    progress += 1
    const message = typeof chunk === 'string' ? chunk : String((chunk && chunk.text) || '')
    return extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, message } }).catch(() => {})
  }
}

function listSessions(pool) {
  const now = Date.now()
  const sessions = pool.sessions.map((s) => ({
    // The owner is the session's name: this server never gives another (see the top).
    session: s.owners[0] ?? s.key,
    busy: s.busy,
    executionCount: s.executionCount,
    idleSeconds: s.busy ? 0 : Math.max(0, Math.round((now - s.lastUsed) / 1000)),
    pid: s.pid,
  }))
  const lines = sessions.map((s) => `${s.session}: ${s.busy ? 'running a call' : `idle ${s.idleSeconds}s`}, ${s.executionCount} cells run, pid ${s.pid ?? 'none'}`)
  return textResult(lines.length ? lines.join('\n') : 'No live sessions.', false, { sessions })
}

/** The tool-error result for an argument `schema` (an input schema of this server's) does
 *  not have, or undefined: a misspelt `session` must not reset the default session. */
function unknownArgument(toolName, schema, args) {
  const known = Object.keys(schema.properties)
  const extra = Object.keys(args).find((key) => !known.includes(key))
  if (extra === undefined) return undefined
  const keys = known.length ? `its arguments are ${known.map((k) => `"${k}"`).join(', ')}` : 'it takes no arguments'
  return textResult(`Invalid ${toolName} input: unknown argument "${extra}"; ${keys}.`, true)
}

async function resetSession(pool, args) {
  const refused = unknownArgument(RESET_TOOL.name, RESET_TOOL.inputSchema, args)
  if (refused) return refused
  const session = args.session ?? tool.DEFAULT_SESSION
  if (typeof session !== 'string' || session === '') return textResult('Invalid reset_session input: "session" must be a non-empty string.', true)
  const live = pool.sessions.some((s) => s.owners.includes(session))
  await pool.disposeOwner(session)
  return textResult(
    live
      ? `Session "${session}" was ended; its next call starts a fresh Python process.`
      : `Session "${session}" had no live process; its next call starts a fresh one.`,
  )
}

/** The line `pykernel mcp` prints, and the error `createServer` throws, without the SDK. */
const MISSING_SDK = `pykernel mcp needs the MCP SDK: npm install ${SDK} (through npx: npx -p pykernel -p ${SDK} pykernel mcp)`

/**
 * The server for `pool`, whose kernels `kernel` (the pool's kernel options) describes.
 * `timeoutSeconds` is the default of a call that gives none (undefined: the pool's, 30;
 * 0: no limit).
 * Throws `ERR_MCP_SDK_MISSING` when the SDK is not installed.
 */
function createServer(pool, { kernel = {}, timeoutSeconds, imageBudget } = {}) {
  const images = imageBudgetOf(imageBudget)
  const sdk = loadSdk()
  if (!sdk) throw Object.assign(new Error(MISSING_SDK), { code: 'ERR_MCP_SDK_MISSING' })
  const { Server, CallToolRequestSchema, ErrorCode, GetPromptRequestSchema, ListPromptsRequestSchema, ListResourcesRequestSchema, ListToolsRequestSchema, McpError, ReadResourceRequestSchema } = sdk
  const { version } = require('../package.json')
  const server = new Server(
    { name: 'pykernel', version },
    {
      capabilities: { tools: {}, resources: {}, prompts: {} },
      instructions: `Run Python with the ${tool.name} tool; state persists per session. Its full guide is the resource ${GUIDE_URI}.`,
    },
  )
  // The description states the timeout a call gets: the pool clamps it to 1..3600 s, and
  // 0 (`--timeout 0`) is no limit.
  const described = timeoutSeconds === 0 ? 0 : Math.min(3600, Math.max(1, timeoutSeconds ?? 30))
  const tools = [pythonTool(kernel, described), RESET_TOOL, LIST_TOOL]

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }))

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const args = request.params.arguments ?? {}
    switch (request.params.name) {
      case tool.name: {
        const result = await tool.handle(args, { timeoutSeconds, pool, images, signal: extra.signal, onOutput: progressReporter(extra) })
        return evalResultOf(result)
      }
      case RESET_TOOL.name:
        return resetSession(pool, args)
      case LIST_TOOL.name:
        return unknownArgument(LIST_TOOL.name, LIST_TOOL.inputSchema, args) ?? listSessions(pool)
      default:
        // A call to a tool that was never listed is a protocol error, not a tool failure.
        throw new McpError(ErrorCode.InvalidParams, `Unknown tool "${request.params.name}": this server has ${tool.name}, ${RESET_TOOL.name} and ${LIST_TOOL.name}.`)
    }
  })

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: [{ uri: GUIDE_URI, name: GUIDE_PROMPT, title: GUIDE_TITLE, description: GUIDE_SUMMARY, mimeType: 'text/plain' }],
  }))
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    if (request.params.uri !== GUIDE_URI) {
      // -32002: the spec's "resource not found".
      throw new McpError(-32002, `Unknown resource "${request.params.uri}": this server has ${GUIDE_URI}.`)
    }
    return { contents: [{ uri: GUIDE_URI, mimeType: 'text/plain', text: tool.guide }] }
  })

  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: [{ name: GUIDE_PROMPT, title: GUIDE_TITLE, description: GUIDE_SUMMARY }],
  }))
  server.setRequestHandler(GetPromptRequestSchema, async (request) => {
    if (request.params.name !== GUIDE_PROMPT) {
      throw new McpError(ErrorCode.InvalidParams, `Unknown prompt "${request.params.name}": this server has ${GUIDE_PROMPT}.`)
    }
    return { description: GUIDE_SUMMARY, messages: [{ role: 'user', content: { type: 'text', text: tool.guide } }] }
  })
  return server
}

/**
 * `pykernel mcp`: serves until the client closes stdin or a SIGINT/SIGTERM/SIGHUP comes,
 * then ends every kernel and resolves the exit code. `opts` are the CLI's (`cwd`,
 * `python`, `launcher`, `writable`, `timeoutMs`). Without the SDK installed it says what
 * to install, on one line of stderr, and resolves 2.
 */
async function serveMcp(addon, opts) {
  const sdk = loadSdk()
  if (!sdk) {
    process.stderr.write(`${MISSING_SDK}\n`)
    return 2
  }
  // Full output of a truncated call, and kv stores, go here; gone with the server, as the
  // sessions are.
  const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-mcp-'))
  // The kernels run, and their Python is found (a project's `.venv`), in `--cwd`: a
  // desktop client starts its servers in `/`. Through `--launcher` they run elsewhere,
  // in `--cwd` on the far side when given (the CLI checked it is absolute), else in the
  // far side's own directory.
  const kernel = opts.launcher
    ? { interpreter: opts.python, launcher: opts.launcher, ...(opts.reattachMs ? { reattach: { graceMs: opts.reattachMs } } : {}), ...(opts.cwd ? { cwd: opts.cwd } : {}) }
    : { cwd: opts.cwd ?? process.cwd(), interpreter: opts.python, ...(opts.writable ? { sandbox: { writable: opts.writable } } : {}) }
  // A budget the addon refuses is the command line's mistake, told before serving.
  const refusal = await addon.fitImages([], imageBudgetOf(opts.imageBudget)).then(() => undefined, (error) => error)
  if (refusal) {
    fs.rmSync(artifactsDir, { recursive: true, force: true })
    process.stderr.write(`pykernel: --image-budget: ${refusal.message}\n`)
    return 2
  }
  // The originals of images sized for the model are kept here too (`pool.artifactsDir`).
  const pool = new addon.KernelPool({ kernel, artifactsDir })
  const server = createServer(pool, {
    kernel,
    timeoutSeconds: opts.timeoutMs === undefined ? undefined : opts.timeoutMs / 1000,
    imageBudget: opts.imageBudget,
  })
  let finish
  const finished = new Promise((resolve) => (finish = resolve))
  let closing
  const close = (code) => {
    closing ??= (async () => {
      await server.close().catch(() => {})
      await pool.disposeAll({ budgetMs: DISPOSE_BUDGET_MS }).catch(() => {})
      fs.rmSync(artifactsDir, { recursive: true, force: true })
      finish(code)
    })()
  }
  process.stdin.on('end', () => close(0))
  process.stdin.on('close', () => close(0))
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143], ['SIGHUP', 129]]) process.on(signal, () => close(code))
  await server.connect(new sdk.StdioServerTransport())
  return finished
}

module.exports = { serveMcp, createServer }
