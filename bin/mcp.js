'use strict'
// `pykernel mcp`: the eval tool of `pykernel/tool` served to an MCP client (an editor, a
// desktop agent) over stdio, with two session tools beside it. Stdout is the protocol's:
// nothing else may be written there (diagnostics go to stderr).
//
// One server process serves one client, so a session is the model's session name itself
// (its owner too: `reset_session` ends it with `disposeOwner`). Streamed output becomes
// progress notifications when the client asked for them (a `progressToken`); a cancelled
// request aborts its call, which interrupts the cell and leaves the session alive.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
// The low-level Server, not McpServer: McpServer takes input schemas as zod objects,
// while the tool's schema is plain JSON Schema data (`pykernel/tool`), listed as it is.
const { Server } = require('@modelcontextprotocol/sdk/server/index.js')
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js')
const { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } = require('@modelcontextprotocol/sdk/types.js')
const tool = require('../tool.js')

/** Bounds the shutdown of every kernel when the client goes away. */
const DISPOSE_BUDGET_MS = 3000

const RESET_TOOL = {
  name: 'reset_session',
  description:
    'End a Python session of the python tool: its variables, imports and working directory are discarded, ' +
    'and its next call starts a fresh Python process. Use it when the session is in a bad state.',
  inputSchema: {
    type: 'object',
    properties: { session: { type: 'string', minLength: 1, description: `The session to end. Default "${tool.DEFAULT_SESSION}".` } },
    additionalProperties: false,
  },
}

const LIST_TOOL = {
  name: 'list_sessions',
  description: 'List the live Python sessions of the python tool: name, whether a call is running, cells run, idle time.',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
}

/** A tool result of text only. */
function textResult(text, isError = false, structuredContent) {
  return { content: [{ type: 'text', text }], isError, ...(structuredContent ? { structuredContent } : {}) }
}

/** The most image data (base64 characters) one result carries: the SDK's stdio transport
 *  refuses a message over 10 MiB, and a client that got one stays disconnected. */
const MAX_IMAGE_CHARS = 6 * 1024 * 1024

/** The MCP result of a `python` call: the host's notices as a text item of their own
 *  (one `[...]` line each; none when there are none), then what the cells printed, then
 *  each image as image content, as many as fit in [`MAX_IMAGE_CHARS`]; a note stands
 *  for each one left out. A refused call is its reason alone. */
function evalResultOf(result) {
  const content = []
  if (result.details.code) {
    content.push({ type: 'text', text: result.text })
  } else {
    if (result.notices.length) {
      content.push({ type: 'text', text: result.notices.map((notice) => `[${notice.replace(/[\r\n]/g, ' ')}]\n`).join('') })
    }
    content.push({ type: 'text', text: result.output })
  }
  let room = MAX_IMAGE_CHARS
  result.images.forEach(({ mime, data }, index) => {
    if (data.length <= room) {
      room -= data.length
      content.push({ type: 'image', data, mimeType: mime })
    } else {
      const mb = ((data.length * 3) / 4 / (1024 * 1024)).toFixed(1)
      content.push({
        type: 'text',
        text: `[image ${index + 1} (${mime}, ${mb} MB) left out: it would make the result too large to send; save it to a file and inspect it in smaller pieces, or display a smaller version]`,
      })
    }
  })
  return { content, isError: result.isError }
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

/**
 * The server for `pool`. `defaults` are the tool's context for every call: `cwd`,
 * `interpreter`, `timeoutSeconds` (when the model gives none).
 */
function createServer(pool, defaults = {}) {
  const { version } = require('../package.json')
  const server = new Server({ name: 'pykernel', version }, { capabilities: { tools: {} }, instructions: `Run Python with the ${tool.name} tool; state persists per session.` })

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: tool.name, description: tool.description, inputSchema: tool.schema }, RESET_TOOL, LIST_TOOL],
  }))

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const args = request.params.arguments ?? {}
    switch (request.params.name) {
      case tool.name: {
        const result = await tool.handle(args, { ...defaults, pool, signal: extra.signal, onOutput: progressReporter(extra) })
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
  return server
}

/**
 * `pykernel mcp`: serves until the client closes stdin or a SIGINT/SIGTERM/SIGHUP comes,
 * then ends every kernel and resolves the exit code. `opts` are the CLI's (`python`,
 * `timeoutMs`).
 */
async function serveMcp(addon, opts) {
  // Full output of a truncated call, and kv stores, go here; gone with the server, as the
  // sessions are.
  const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-mcp-'))
  // Through `--launcher` the kernels run elsewhere, in the far side's own directory.
  const kernel = opts.launcher
    ? { interpreter: opts.python, launcher: opts.launcher }
    : { cwd: process.cwd(), interpreter: opts.python, ...(opts.writable ? { sandbox: { writable: opts.writable } } : {}) }
  const pool = new addon.KernelPool({ kernel, artifactsDir })
  const server = createServer(pool, {
    timeoutSeconds: opts.timeoutMs === undefined ? undefined : opts.timeoutMs / 1000,
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
  await server.connect(new StdioServerTransport())
  return finished
}

module.exports = { serveMcp, createServer }
