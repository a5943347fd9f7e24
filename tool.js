'use strict'
// `pykernel/tool`: the eval tool as data, for an agent that registers tools by name,
// JSON Schema and description (a TypeScript agent loop, the MCP server in bin/mcp.js).
// `handle` maps one tool call onto `KernelPool.execute` and returns what a model reads.
// It adds no execution logic of its own: timeouts, clamping, truncation and notices
// are the pool's, so a tool call and a direct `pool.execute` behave alike.

/** The tool's name as a model calls it. */
const name = 'python'

/** The default session of a call that names none. */
const DEFAULT_SESSION = 'default'

/** JSON Schema (draft 2020-12 subset every tool API accepts) of one call's input. */
const schema = {
  type: 'object',
  properties: {
    cells: {
      type: 'array',
      minItems: 1,
      description: 'Python cells, run in order in one session; the first one that fails stops the rest.',
      items: {
        type: 'object',
        properties: {
          code: { type: 'string', description: 'Python source; the value of a final expression is shown, as in a notebook.' },
          title: { type: 'string', description: 'A short name for the cell, used when it fails ("cell 2 of 3 (load data) failed").' },
          timeout: { type: 'number', minimum: 0, description: "Seconds this cell may run, clamped to 1..3600; 0 for no limit. Overrides the call's timeout." },
          reset: { type: 'boolean', description: 'Start a fresh Python process right before this cell.' },
        },
        required: ['code'],
        additionalProperties: false,
      },
    },
    session: {
      type: 'string',
      minLength: 1,
      description: `Which persistent Python process to use; state carries over between calls with the same session. Default "${DEFAULT_SESSION}".`,
    },
    timeout: { type: 'number', minimum: 0, description: 'Seconds each cell may run, clamped to 1..3600; 0 for no limit. Default set by the host (30 unless configured).' },
    reset: { type: 'boolean', description: 'Start the session from a fresh Python process before the first cell.' },
  },
  required: ['cells'],
  additionalProperties: false,
}

/** The tool's long guide: sessions, time, output, the ready-made names, magics, sandbox,
 *  limits. Too long to send with every tool listing; a host offers it where a model can
 *  read it on demand (`pykernel mcp` as a resource and a prompt) or in its system prompt. */
const guide = `Run Python in a persistent process and read what it printed, returned and displayed.

Sessions and state
- A call runs its cells in order in one Python process, the "session" (default "${DEFAULT_SESSION}"). Variables, imports, functions and the working directory stay for the next call to the same session; different sessions are separate processes and share nothing.
- Build up work in steps: load once, then explore in later calls. Give cells short titles; the first failing cell stops the rest and the result names it, earlier cells' effects remain.
- A session can be restarted behind your back (idle for long, the host needed room, a crash); the result then says its earlier state is gone, so redo the setup. "reset": true starts the session fresh on purpose; a cell's own "reset" does it right before that cell.

Time
- "timeout" is seconds per cell (the host sets the default, 30 unless configured), clamped to 1..3600, and 0 is no limit; a cell's own "timeout" overrides it. A cell that runs past it is interrupted and the result says so; the session stays alive with its state, unless the cell ignores the interrupt: then its process is replaced, its state is lost, and the result says that too. Waiting for agent() or completion() does not count against it.

What comes back
- stdout and stderr as written, the value of each cell's last expression, and tracebacks, as plain text: colour codes are removed and a progress bar keeps only its final line.
- Lines that start with "[" and a word are the host's notes (timeouts, restarts, a failed cell, refusals, where the full output is), and so is a final "Command exited with code 1"; a line your code prints that starts like one is shown with a "\\" in front.
- Long output is shortened: lines past 768 bytes are cut, and beyond about 70 KiB you see the start and the end with a marker saying how many lines were left out. When the full text was kept, the result says where (an artifact:// address or a file path); read that with read() in a cell, a range of lines at a time.
- Pictures come back as images: matplotlib figures (shown after the cell, or at plt.show()), PIL images, and display() of anything with a PNG or JPEG form. A large one is scaled down for you (the host's budget, 1568 px on the long side by default) and a line says so and where the full-size file is, which a cell can open. DataFrames and other rich objects show as text tables.
- A plot (matplotlib, plotly, altair) also comes back as a short "[chart: ...]" summary where it was shown: its type, title, axes with their ranges, and each series in a line, so you can reason about it without the image.

Ready-made names in every session
- display(obj), update_display(obj, display_id=...), clear_output(): rich output as in Jupyter.
- read(path, offset=1, limit=None): a file's lines (1-based), also artifact:// addresses; write(path, content) creates folders as needed.
- env(key=None, value=None): read or set environment variables. defs(): what you have defined so far, with shapes.
- kv.get(key, default=None), kv.set(key, value), kv.delete(key), kv.list(): a small JSON store for this session that survives a reset.
- log(msg) and phase(title): progress notes, shown to the user where the host displays them (they are not part of your result).
- tool.<name>(**args) calls a tool of the host; agent(prompt, ...) hands a task to another agent and completion(prompt, ...) asks a model; parallel(thunks) and pipeline(items, *stages) run such calls concurrently. These work only where the host provides them.

IPython habits that work
- !cmd runs a shell command with its output streamed (x = !cmd keeps the lines); %%bash runs the cell as a script.
- %pip install <pkg> installs into this Python, usable at once. Also %cd, %pwd, %ls, %env, %time, %timeit, %who, %whos, %reset, %run file.py, %load, %%capture, %%writefile.

Sandbox
- By default code writes only its working directory, its TMPDIR and, through %pip, its session's own installs; credential files under the home directory appear empty; the network is what the host allows. A refused write, read or connection is named at the top of the result, with what the host could allow.

Limits
- Nothing is interactive: input() and getpass() fail at once, and shell commands get no stdin.
- Output is kept for the model, not a terminal: prefer printing summaries (df.head(), len(x)) to dumping everything.`

/**
 * The tool's description as a host words it: what matters on every call, in a few lines
 * (a host pays for it in every request). `host` says what only the host knows:
 * `timeoutSeconds` (its default), `sandbox` (what code may reach, one sentence) and
 * `guide` (where the model finds the long text, one sentence).
 */
function describe(host = {}) {
  const {
    timeoutSeconds = 30,
    sandbox = 'code writes only its working directory and TMPDIR; credential files in the home directory read empty; the network is the host\'s.',
    // A host without a place to serve the guide gives it with the instructions, or not.
    guide: guideLine = 'the full guide (helpers such as read, write, display and kv; magics; limits) is in your instructions when the host included it.',
  } = host
  // The host's default of 0 is no limit, as the pool's `timeoutSeconds: 0`.
  const time = timeoutSeconds === 0
    ? 'Time: a cell runs without a time limit unless the call gives "timeout" seconds; then it is interrupted when they are up, and the session keeps its state.'
    : `Time: each cell may run "timeout" seconds (default ${timeoutSeconds}), then it is interrupted and the session keeps its state; "timeout": 0 is no limit.`
  return `Run Python cells in a persistent process and read what they printed, returned and displayed.
- Sessions: variables, imports and the working directory stay for the next call with the same "session" (default "${DEFAULT_SESSION}"); "reset": true starts it fresh.
- ${time}
- Output: long output is shortened and the result says where the full text is (read it with read(path, offset, limit) in a cell). Lines starting "[" are the host's notes. Images (matplotlib, PIL, display()) come back as images.
- Shell and installs: !cmd, %%bash, %pip install.
Sandbox: ${sandbox}
Guide: ${guideLine}`
}

/** The description with the pool's defaults. */
const description = describe()

/** An `Error` with a stable `code`, as the addon's errors carry. */
function coded(message, code = 'ERR_INVALID_ARG') {
  const error = new TypeError(message)
  error.code = code
  return error
}

function isPlainObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** The optional fields (of a call, of a cell): those the schema does not require. */
const OPTIONAL_FIELDS = optionalFields(schema)
const OPTIONAL_CELL_FIELDS = optionalFields(schema.properties.cells.items)

function optionalFields(objectSchema) {
  return Object.keys(objectSchema.properties).filter((key) => !objectSchema.required.includes(key))
}

/**
 * The request with its optional fields that are `null` left out: null means absent. A
 * strict-mode tool schema (OpenAI's structured outputs, the OpenAI Agents SDK) lists every
 * field as required, so the model sends null for each one it leaves unset. Required fields
 * keep their null, which the check then refuses.
 */
function withoutNulls(request) {
  if (!isPlainObject(request)) return request
  const cells = Array.isArray(request.cells)
    ? request.cells.map((cell) => (isPlainObject(cell) ? dropNulls(cell, OPTIONAL_CELL_FIELDS) : cell))
    : request.cells
  return { ...dropNulls(request, OPTIONAL_FIELDS), ...('cells' in request ? { cells } : {}) }
}

function dropNulls(object, keys) {
  return Object.fromEntries(Object.entries(object).filter(([key, value]) => !(value === null && keys.includes(key))))
}

/** The first way `value` breaks `schema`, or undefined. Checks exactly this schema's rules
 *  (no general validator: the package has no dependency for it, and a model needs the
 *  reason in one line). */
function invalidRequest(request) {
  if (!isPlainObject(request)) return 'the input must be an object with "cells"'
  for (const key of Object.keys(request)) if (!(key in schema.properties)) return `unknown field "${key}"`
  if (!Array.isArray(request.cells) || request.cells.length === 0) return '"cells" must be a non-empty array of {code, title?, timeout?, reset?}'
  for (const [i, cell] of request.cells.entries()) {
    if (!isPlainObject(cell)) return `cells[${i}] must be an object with "code"`
    for (const key of Object.keys(cell)) if (!(key in schema.properties.cells.items.properties)) return `cells[${i}] has an unknown field "${key}"`
    if (typeof cell.code !== 'string') return `cells[${i}].code must be a string`
    if (cell.title !== undefined && typeof cell.title !== 'string') return `cells[${i}].title must be a string`
    if (cell.timeout !== undefined && !isSeconds(cell.timeout)) return `cells[${i}].timeout must be a number of seconds, 0 or more (0 for no limit)`
    if (cell.reset !== undefined && typeof cell.reset !== 'boolean') return `cells[${i}].reset must be true or false`
  }
  if (request.session !== undefined && (typeof request.session !== 'string' || request.session === '')) return '"session" must be a non-empty string'
  if (request.timeout !== undefined && !isSeconds(request.timeout)) return '"timeout" must be a number of seconds, 0 or more (0 for no limit)'
  if (request.reset !== undefined && typeof request.reset !== 'boolean') return '"reset" must be true or false'
  return undefined
}

/** A timeout in seconds: 0 is none, as the pool's `timeoutSeconds: 0`. */
function isSeconds(value) {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0
}

/**
 * The pool's session id and owner for a call. A host that serves several conversations
 * gives each its `ctx.sessionId`; the model's `session` names processes within it
 * (`<ctx.sessionId>/<session>`, each part percent-encoded; the default session is the
 * encoded `ctx.sessionId` itself), and they are owned by the conversation, so
 * `pool.disposeOwner(ctx.sessionId)` (or `ctx.ownerId`) ends all of them.
 */
function sessionOf(request, ctx) {
  const session = request.session ?? DEFAULT_SESSION
  if (ctx.sessionId === undefined) return { sessionId: session, ownerId: ctx.ownerId }
  // Each part percent-encoded, so no `/` of a conversation id or a session name can make
  // two (conversation, session) pairs meet in one process.
  const conversation = encodeURIComponent(ctx.sessionId)
  const sessionId = session === DEFAULT_SESSION ? conversation : `${conversation}/${encodeURIComponent(session)}`
  return { sessionId, ownerId: ctx.ownerId ?? ctx.sessionId }
}

/** The `EvalRequest` for one call: the model's fields in the pool's names, the host's
 *  context (session, cwd, interpreter, signal, streaming) beside them. */
function evalRequestOf(request, ctx, lowered) {
  const bound = (what, seconds) => boundedTimeout(what, seconds, ctx.maxTimeoutSeconds, lowered)
  const evalRequest = {
    ...sessionOf(request, ctx),
    cells: request.cells.map(({ code, title, timeout, reset }, i) =>
      dropUndefined({ code, title, timeout: bound(`cell ${i + 1}'s timeout`, timeout), reset })),
    timeoutSeconds: request.timeout === undefined ? ctx.timeoutSeconds : bound('timeout', request.timeout),
    reset: request.reset,
    cwd: ctx.cwd,
    interpreter: ctx.interpreter,
    requestId: ctx.requestId,
    uriRoots: ctx.uriRoots,
    signal: ctx.signal,
    onEvent: ctx.onEvent,
    onOutput: ctx.onOutput,
  }
  return dropUndefined(evalRequest)
}

/** A model's timeout under the host's `maxTimeoutSeconds`: one above it, or 0 (no
 *  limit), becomes it, and `lowered` gets the notice. */
function boundedTimeout(what, seconds, max, lowered) {
  if (seconds === undefined || max === undefined) return seconds
  if (seconds !== 0 && seconds <= max) return seconds
  const asked = seconds === 0 ? '0, no limit' : `${seconds}s`
  lowered.push(`${what} lowered to ${max}s, the host's limit (asked: ${asked})`)
  return max
}

function dropUndefined(object) {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined))
}

/** The pool's notices as they head its `output`: one `[...]` line each. */
function noticeLines(notices) {
  return notices.map((notice) => `[${notice.replace(/[\r\n]/g, ' ')}]\n`).join('')
}

/**
 * What a model reads, in parts: the host's `notices` (the pool's annotations, and where
 * the full output went when the pool's text does not say so) and the `output` after
 * them, and the two joined as `text`. Whether the tool adds the artifact's path is
 * decided by the result (a cut output whose artifact has no id, so the pool wrote no
 * `artifact://` line of its own), never by what the cell printed.
 */
function partsOf(result) {
  const notices = [...result.annotations]
  const head = noticeLines(result.annotations)
  // The pool puts its notices first; should it not, the whole output stays the output.
  const output = result.output.startsWith(head) ? result.output.slice(head.length) : result.output
  let text = result.output
  const path = result.truncated && result.truncated.artifactPath
  if (path && !result.truncated.artifactId) {
    const notice = `the full output is in ${path}`
    notices.push(notice)
    text = `${text.replace(/\n?$/, '\n')}${noticeLines([notice])}`
  }
  return { text, notices, output }
}

/** `ctx.images`' keys: the budget of `fitImages`, and where the originals go. */
const IMAGE_OPTION_KEYS = ['maxEdge', 'maxBytes', 'maxTotalBytes', 'keepOriginalsIn']

/** The addon's `fitImages`, loaded on first use (describing the tool needs no addon). */
function fitImages(images, options) {
  return require('./main.js').fitImages(images, options)
}

/**
 * The `fitImages` options of a call, or `false` for the originals unchanged: `ctx.images`
 * (`false`, or a budget overriding the defaults) with the pool's `artifactsDir` as the
 * place for originals. Checked before the call runs (by the addon, given no images), so
 * a host's mistake never costs a cell its result.
 */
async function imageOptionsOf(ctx) {
  const images = ctx.images
  if (images === false) return false
  if (images !== undefined && !isPlainObject(images)) {
    throw coded('pykernel/tool handle(request, ctx): ctx.images must be false or an object { maxEdge?, maxBytes?, maxTotalBytes?, keepOriginalsIn? }')
  }
  const options = dropUndefined({ ...images })
  for (const key of Object.keys(options)) {
    if (!IMAGE_OPTION_KEYS.includes(key)) {
      throw coded(`pykernel/tool handle(request, ctx): ctx.images has no key "${key}"; its keys are ${IMAGE_OPTION_KEYS.join(', ')}`)
    }
  }
  if (Object.keys(options).length > 0) {
    try {
      await fitImages([], options)
    } catch (error) {
      throw coded(`pykernel/tool handle(request, ctx): ctx.images: ${error.message}`)
    }
  }
  const dir = ctx.pool.artifactsDir
  if (options.keepOriginalsIn === undefined && typeof dir === 'string') options.keepOriginalsIn = dir
  return options
}

/** A byte count as a person reads it: `412 KB`, `2.1 MB`. */
function sizeOf(bytes) {
  return bytes < 1024 * 1024 ? `${Math.max(1, Math.round(bytes / 1024))} KB` : `${(bytes / (1024 * 1024)).toFixed(1)} MB`
}

function dimensionsOf({ width, height }) {
  return width && height ? `${width}x${height}` : 'unknown size'
}

/** The notice of an image not sent as it was, or undefined for one sent unchanged. */
function imageNotice(image, index) {
  if (image.status === 'unchanged') return undefined
  const { original } = image
  const kept = original.path
    ? `; the original is ${original.path}`
    : original.keepError
      ? `; the original could not be kept (${original.keepError})`
      : ''
  if (image.status === 'reduced') {
    const format = image.mime === original.mime ? '' : ` ${image.mime === 'image/jpeg' ? 'JPEG' : 'PNG'}`
    return `image ${index + 1} reduced from ${dimensionsOf(original)} (${sizeOf(original.bytes)}) to ${dimensionsOf(image)}${format} (${sizeOf(image.bytes)}) for the model${kept}`
  }
  return `image ${index + 1} (${dimensionsOf(original)}, ${sizeOf(original.bytes)}) left out: ${image.reason}${kept}`
}

/**
 * The images a model gets and the notices that say what changed: each sized to the
 * budget (`imageOptions`; `false` sends them as the pool gave them).
 */
async function imagesFor(result, imageOptions) {
  const images = result.images.map(({ mime, data }) => ({ mime, data }))
  if (imageOptions === false || images.length === 0) return { images, notices: [] }
  let fitted
  try {
    fitted = await fitImages(images, imageOptions)
  } catch (error) {
    // The options were checked before the call; should sizing fail anyway, the call's
    // text still comes back, and no image a model's API might refuse.
    return { images: [], notices: [`the images were left out: they could not be sized (${error.message})`] }
  }
  return {
    images: fitted.filter((image) => image.status !== 'omitted').map(({ mime, data }) => ({ mime, data })),
    notices: fitted.map(imageNotice).filter((notice) => notice !== undefined),
  }
}

/** The parts with `notices` added at the end of the text, as the artifact's line is. */
function withNotices(parts, notices) {
  if (notices.length === 0) return parts
  return {
    ...parts,
    text: `${parts.text.replace(/\n?$/, '\n')}${noticeLines(notices)}`,
    notices: [...parts.notices, ...notices],
  }
}

/**
 * Runs one tool call (an optional field set to `null` counts as absent, as a strict-mode
 * model sends it). `ctx.pool` is the `KernelPool`; the rest is optional:
 * `sessionId`/`ownerId` (the conversation), `cwd`, `interpreter`, `timeoutSeconds` (the
 * default when the model gives none), `maxTimeoutSeconds` (the most the model may ask
 * for, 0 included), `requestId` and `uriRoots` (the pool's, for this call), `signal`,
 * `onEvent`, `onOutput` (the pool's), and
 * `images`: the budget images are sized to for the model (`fitImages`' options, the
 * originals kept in the pool's `artifactsDir`), or `false` to send them unchanged.
 *
 * Resolves `{ text, notices, output, images, charts, isError, details }`: `text` is what a model
 * reads, the host's `notices` (`[...]` lines at its head, and at its end the path of the
 * full output when the pool's text names none, and a line for each image reduced or left
 * out) and the `output` after them; `images` are the ones sized for the model (the
 * pool's own stay in `details.result.images`); in `output`
 * a line the cell printed that starts as a host line does (`[` and a letter, `Command
 * exited with code`) is shown with a `\` in front, so only the host's lines start that way;
 * `charts` are the figures' charts as data (docs/charts.md), whose cards `output` shows. A bad request (the model's mistake) and
 * a call the pool refused (`ERR_POOL_FULL`, `ERR_PYTHON_INVALID`, ...) resolve with
 * `isError` and the reason in `text` and `details.code`, so the model can correct
 * itself; a bad `ctx` (the host's mistake) rejects with `ERR_INVALID_ARG`.
 */
async function handle(request, ctx) {
  if (!isPlainObject(ctx) || !ctx.pool || typeof ctx.pool.execute !== 'function') {
    throw coded('pykernel/tool handle(request, ctx): ctx.pool must be a KernelPool')
  }
  if (ctx.sessionId !== undefined && (typeof ctx.sessionId !== 'string' || ctx.sessionId === '')) {
    throw coded('pykernel/tool handle(request, ctx): ctx.sessionId must be a non-empty string')
  }
  const max = ctx.maxTimeoutSeconds
  if (max !== undefined && !(Number.isInteger(max) && max >= 1 && max <= 3600)) {
    throw coded(`pykernel/tool handle(request, ctx): ctx.maxTimeoutSeconds must be an integer from 1 to 3600, got ${String(max)}`)
  }
  const imageOptions = await imageOptionsOf(ctx)
  request = withoutNulls(request)
  const problem = invalidRequest(request)
  if (problem) return refused(`Invalid ${name} tool input: ${problem}.`, 'ERR_INVALID_ARG')
  const lowered = []
  const evalRequest = evalRequestOf(request, ctx, lowered)
  let result
  try {
    result = await ctx.pool.execute(evalRequest)
  } catch (error) {
    return refused(`The Python session could not run this call: ${error.message}`, error.code || 'ERR_INTERNAL')
  }
  const { images, notices } = await imagesFor(result, imageOptions)
  return {
    ...withNotices(partsOf(result), [...lowered, ...notices]),
    images,
    charts: result.charts ?? [],
    isError: result.exitCode !== 0,
    details: {
      session: request.session ?? DEFAULT_SESSION,
      sessionId: evalRequest.sessionId,
      exitCode: result.exitCode,
      cancelled: result.cancelled,
      timedOut: result.timedOut,
      sessionLost: result.sessionLost,
      kernelRestarted: result.kernelRestarted,
      failedCell: result.failedCell,
      truncated: result.truncated,
      result,
    },
  }
}

function refused(text, code) {
  return { text, notices: [], output: '', images: [], charts: [], isError: true, details: { code } }
}

module.exports = { name, description, describe, guide, schema, handle, DEFAULT_SESSION }
