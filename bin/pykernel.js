#!/usr/bin/env node
'use strict'
// pykernel: run Python through a pykernel kernel from the command line.
// Node built-ins and the addon only. Beside it: args.js reads the command line,
// run_script.py is the cell that runs a script (`run`, `-c`, `-`).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const readline = require('node:readline')

const USAGE = `Usage:
  pykernel [options] run <file.py> [args...]   run a file as python does
  pykernel [options] -c "<code>" [args...]     run code as a script
  pykernel [options] - [args...]               run stdin as one script (also: run -)
  pykernel exec "<code>" [options]             run one cell; show the value of a
                                               final expression, as a notebook does
  pykernel [options]                           interactive REPL (one kernel); with
                                               stdin piped, runs it as one script
  pykernel repl [options]                      the REPL; piped lines run as if typed
                                               (Out[N]; an error does not stop it)
  pykernel check [--python <path>] [--cwd <dir>]
                                               show which Python a kernel would use
  pykernel mcp [--python <path>] [--launcher <command>] [--reattach <seconds>]
               [--timeout <seconds>] [--writable <dir>] [--cwd <dir>]
               [--image-budget <budget>]
                                               serve the python tool (and session
                                               tools) to an MCP client over stdio

Options (for run, -c and -, before the file or code: what follows it is the script's):
  --python <path>      Python interpreter to use (default: discovery; see check)
  --cwd <dir>          start the kernel in this directory, and look for Python from
                       it (its ./.venv); paths on the command line, a script's file
                       too, stay relative to where you are (default: where you are)
  --launcher <command> start the kernel through this command, elsewhere: words
                       ("docker exec -i box", "ssh -T gpu-1") or a JSON array;
                       --python is then the far side's (default python3)
  --reattach <seconds> with --launcher: keep the kernel across a dropped link for
                       this long while a new link is brought (docs/launchers.md)
  --timeout <seconds>  interrupt a cell (or script) that runs longer than this
                       (0: no limit; mcp: the default of a call that gives none)
  --writable <dir>     let the kernel write this directory too (repeatable); 'all':
                       wherever you may write. By default it writes only the working
                       directory (its .git read-only), its TMPDIR and its own installs
                       and caches, and sees the credential stores in your home empty
  --images-dir <dir>   where to save image/png and image/jpeg outputs
                       (default: a new pykernel-images-* folder in the temp dir)
  --image-budget <budget>
                       (mcp) how images are sized for the model: 'off', or any of
                       maxEdge=<px>,maxBytes=<n>,maxTotalBytes=<n> (default
                       maxEdge=1568,maxBytes=1048576,maxTotalBytes=3145728)
  --json               print every event as one NDJSON line on stdout, then
                       {"type":"done","result":<ExecuteResult>} per cell
  -V, --version        print the version
  -h, --help           show this help

Scripts (run, -c, -) run as one cell, as python runs them: __name__ is '__main__' in
a module of their own, __file__ the file's absolute path, sys.argv [<file>|-c|-, args...],
sys.path[0] the file's directory ('' for -c and -); tracebacks show the script's
frames; sys.exit(n) is the exit status (sys.exit("message") prints it and exits 1).
The working directory is yours, or --cwd's, while the file is found from yours:
'pykernel --cwd d run x.py' runs as 'cd d && python <yours>/x.py' would.

REPL input: after each line the kernel's Python says whether the input so far is
complete, as python's own REPL asks codeop, after the magics' rules: a complete
statement, a magic or a !command runs at once; an open bracket or string, a
trailing '\\', a block (a ':' line, a decorator) or a %%cell magic's body waits for
more lines ('...:'), and a block runs when a blank line is entered; input that
cannot compile runs at once, so Python reports the error. 'exit', 'quit' or
Ctrl-D ends the REPL; at the prompt, Ctrl-C drops the input, and twice within 1 s exits.

Ctrl-C interrupts the running cell; if it is still running 5 s later, the kernel is
killed. A second Ctrl-C exits at once.

Exit codes: 0 ok; n from a script's sys.exit(n) or os._exit(n), 128+s when a signal s
killed it; 1 the cell raised, timed out, or the kernel died (piped repl: any cell
failed); 2 usage error, missing file, the kernel could not start, or pykernel's
native addon is missing; 130 interrupted (Ctrl-C).`

const { parseArgs, UsageError } = require('./args.js')

/** A refusal of the sandbox (a status event's `data`) in words, with the flag that allows it. */
function refusalLine(data) {
  switch (data.denied) {
    case 'write':
      return `the sandbox refused writing ${data.path} (--writable <dir> allows a directory)`
    case 'read':
      return `${data.path} is hidden by the sandbox (a credential store of your home directory)`
    case 'connect':
      return `the sandbox refused a connection to ${data.host}`
    case 'more':
      return `the sandbox refused ${data.count} more`
    default:
      return `the sandbox refused: ${JSON.stringify(data)}`
  }
}

/**
 * Where a kernel of the CLI starts: in --cwd or here, or through `--launcher` (in --cwd
 * there, else the far side's own cwd).
 */
function kernelOptions(opts) {
  if (opts.launcher) {
    if (opts.writable) throw new UsageError('--writable is for kernels here; a launched kernel is confined by what runs it')
    return { interpreter: opts.python, launcher: opts.launcher, ...(opts.reattachMs ? { reattach: { graceMs: opts.reattachMs } } : {}), ...(opts.cwd ? { cwd: opts.cwd } : {}) }
  }
  return { cwd: opts.cwd ?? process.cwd(), interpreter: opts.python, ...(opts.writable ? { sandbox: { writable: opts.writable } } : {}) }
}

// ---------------------------------------------------------------------------
// Output

/** Tracks whether stdout ends at the start of a line, so results start on a fresh one. */
const out = {
  atLineStart: true,
  write(text) {
    if (!text) return
    process.stdout.write(text)
    this.atLineStart = text.endsWith('\n')
  },
  freshLine() {
    if (!this.atLineStart) this.write('\n')
  },
  line(text) {
    this.freshLine()
    this.write(text.endsWith('\n') ? text : text + '\n')
  },
}

/**
 * A library error's message as the CLI's user reads it: the addon's advice names its
 * `interpreter` option, which is --python here.
 */
function messageOf(err) {
  const message = err && err.message ? err.message : String(err)
  return message.replace(/`interpreter`/g, '--python <path>')
}

function errLine(text) {
  out.freshLine()
  process.stderr.write(text.endsWith('\n') ? text : text + '\n')
}

/** Saves base64 images of bundles to files named pykernel-image-N.<ext>. */
class ImageSaver {
  constructor(dir) {
    this.requestedDir = dir
    this.dir = undefined
    this.counter = 0
  }

  ensureDir() {
    if (this.dir) return this.dir
    if (this.requestedDir) {
      fs.mkdirSync(this.requestedDir, { recursive: true })
      this.dir = this.requestedDir
    } else {
      this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-images-'))
    }
    return this.dir
  }

  save(data, ext) {
    const dir = this.ensureDir()
    const bytes = Buffer.from(String(data), 'base64')
    for (;;) {
      this.counter += 1
      const file = path.join(dir, `pykernel-image-${this.counter}.${ext}`)
      try {
        fs.writeFileSync(file, bytes, { flag: 'wx' }) // never overwrite earlier runs' images
        return file
      } catch (err) {
        if (err.code !== 'EEXIST') throw err
      }
    }
  }
}

/** The `ename` of the error a cell gets when its kernel process ends under it. */
const KERNEL_DIED = 'KernelDied'

const IMAGE_EXTENSIONS = { 'image/png': 'png', 'image/jpeg': 'jpg' }

/**
 * A display/result bundle as lines for a person, rendered by the addon's `renderBundle`.
 * Images are saved and their paths printed; next to an image, plain text is only its
 * stand-in (`<Figure ...>`) and is left out, as `evaluate` does. The caller adds an
 * Out[N] prefix for REPL results.
 */
function bundleLines(bundle, images) {
  const rendered = loadAddon().renderBundle(bundle)
  const lines = []
  const text = rendered.text.replace(/\n+$/, '')
  if (text && (rendered.textMime !== 'text/plain' || !rendered.images.length)) lines.push(text)
  for (const image of rendered.images) {
    try {
      lines.push(`[image saved: ${images.save(image.data, IMAGE_EXTENSIONS[image.mime])}]`)
    } catch (err) {
      lines.push(`[image (${image.mime}) could not be saved: ${err.message}]`)
    }
  }
  if (!lines.length && rendered.json !== undefined) lines.push(JSON.stringify(rendered.json))
  else if (!lines.length && rendered.status === undefined && Object.keys(bundle).length) {
    lines.push(`[output: ${Object.keys(bundle).join(', ')}]`)
  }
  return lines
}

/** An error event as python prints it: its traceback, else its name and value. */
function printError(event) {
  const tb = Array.isArray(event.traceback) ? event.traceback.join('') : ''
  errLine(tb || `${event.ename}: ${event.evalue}`)
}

/**
 * Event printer for one cell. `repl` prefixes the result with Out[N]. A `script`'s
 * SystemExit is its exit status, not an error to show (run_script.py printed any message).
 */
function makePrinter({ json, images, repl, script }) {
  if (json) {
    return {
      onEvent(event) {
        process.stdout.write(JSON.stringify(event) + '\n')
      },
      done(result) {
        process.stdout.write(JSON.stringify({ type: 'done', result }) + '\n')
      },
    }
  }
  let resultBundle
  let heldError
  return {
    onEvent(event) {
      switch (event.type) {
        case 'stdout':
          out.write(event.text)
          break
        case 'stderr':
          out.freshLine()
          process.stderr.write(event.text)
          break
        case 'display':
          for (const line of bundleLines(event.bundle || {}, images)) out.line(line)
          break
        case 'result':
          // Printed after the cell's output, when the promise resolves.
          resultBundle = event.bundle
          break
        case 'error': {
          // A dead kernel is reported once, when the cell's promise resolves. Only the
          // result says whether this is that report or the cell's own exception of the
          // same name: held until then.
          if (event.ename === KERNEL_DIED) heldError = event
          else if (!(script && event.ename === 'SystemExit')) printError(event)
          break
        }
        case 'status':
          // What the sandbox refused, and how to allow it; other statuses have no
          // terminal rendering.
          if (event.op === 'sandbox' && event.data && event.data.denied) errLine(`pykernel: ${refusalLine(event.data)}`)
          break
        default:
          // clear events have no terminal rendering.
          break
      }
    },
    done(result) {
      if (heldError && !result.kernelDied) printError(heldError)
      const bundle = resultBundle || result.result
      if (bundle) {
        const lines = bundleLines(bundle, images)
        if (repl) {
          const text = lines.join('\n')
          const prefix = `Out[${result.executionCount}]: `
          out.line(text.includes('\n') ? prefix + '\n' + text : prefix + text)
        } else {
          for (const line of lines) out.line(line)
        }
      }
      out.freshLine()
    },
  }
}

/**
 * Notices about how a cell ended, on stderr. Error events were already printed, except a
 * dead kernel's: its last stderr lines (a crash's fault report), then one line saying so.
 */
function reportEnding(result, { timeoutMs }) {
  if (result.timedOut) errLine(`pykernel: the cell timed out after ${timeoutMs / 1000} s and was interrupted`)
  if (result.kernelDied) {
    const { evalue, traceback } = result.error || {}
    // The kernel's stderr tail comes as lines without their newlines.
    if (traceback && traceback.length) errLine(traceback.join('\n'))
    errLine(`pykernel: ${evalue || 'the Python kernel died during the cell'}`)
  }
}

function exitCodeOf(result, { script }) {
  if (result.timedOut) return 1
  if (result.cancelled) return 130 // Ctrl-C, even when the kernel had to be killed
  if (result.kernelDied) return script ? deathStatus(result) : 1
  // run_script.py leaves sys.exit(n) as SystemExit(status) with status from 1 to 255.
  if (script && result.error && result.error.ename === 'SystemExit') return Number(result.error.evalue) || 1
  return result.status === 'ok' ? 0 : 1
}

/** A script's process status as python's would be: `os._exit(n)` is n, death by signal
 *  s is 128 + s (as a shell reports it); anything else about the death is 1. */
function deathStatus(result) {
  const how = (result.error && result.error.evalue) || ''
  const exit = how.match(/\(exit code (\d+)\)/)
  if (exit) return Number(exit[1]) & 0xff
  const signal = how.match(/killed by signal (\d+)/)
  return signal ? 128 + Number(signal[1]) : 1
}

// ---------------------------------------------------------------------------
// Kernel lifetime and signals

/** pykernel is installed without its native addon (`ERR_NO_BINDING`): a set-up error. */
class SetupError extends Error {}

function loadAddon() {
  try {
    return require('..')
  } catch (err) {
    // The loader's message says what to install; its stack says nothing more.
    if (err && err.code === 'ERR_NO_BINDING') throw new SetupError(err.message)
    throw err
  }
}

let kernel // the live kernel, if any
let cellAbort // the running cell's AbortController, if a cell runs
let exiting = false

async function shutdownKernel(graceMs) {
  const k = kernel
  kernel = undefined
  if (!k) return
  try {
    await k.shutdown(graceMs === undefined ? undefined : { graceMs })
  } catch {
    // Nothing more we can do; the runner also exits when its parent goes away.
  }
}

function flushAndExit(code) {
  let pending = 2
  const done = () => {
    if (--pending === 0) process.exit(code)
  }
  for (const stream of [process.stdout, process.stderr]) {
    if (stream.destroyed || stream.writableEnded) done()
    else stream.write('', done)
  }
  setTimeout(() => process.exit(code), 1000).unref() // a stuck pipe must not keep us alive
}

// A reader that goes away (`pykernel exec ... | head -1`): stop quietly, like Python's
// BrokenPipeError handling, after shutting the kernel down.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err) => {
    if (err && err.code === 'EPIPE') exitNow(1)
    else throw err
  })
}

async function exitNow(code, graceMs = 200) {
  if (exiting) return
  exiting = true
  await shutdownKernel(graceMs)
  flushAndExit(code)
}

/**
 * Ctrl-C while a cell runs. The first one aborts the cell as the library's AbortSignal
 * does: SIGINT, and the kernel killed if the cell is still running 5 s later (it ignores
 * SIGINT, or is stuck in C code). A second one exits at once, as does one while leaving.
 * Returns false when no cell runs.
 */
function onInterrupt() {
  if (exiting) {
    flushAndExit(130)
    return true
  }
  if (!cellAbort) return false
  if (cellAbort.signal.aborted) {
    errLine('pykernel: interrupted again; exiting')
    exitNow(130, 0)
    return true
  }
  cellAbort.abort()
  return true
}

function installSignalHandlers(onIdleInterrupt) {
  process.on('SIGINT', () => {
    if (!onInterrupt()) onIdleInterrupt()
  })
  for (const [sig, code] of [
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ]) {
    process.on(sig, () => exitNow(code))
  }
}

async function startKernel(addon, opts) {
  try {
    return await addon.Kernel.start(kernelOptions(opts))
  } catch (err) {
    errLine(`pykernel: ${messageOf(err)}`)
    flushAndExit(2)
    return new Promise(() => {}) // never resolves; the process is exiting
  }
}

async function runCell(code, opts, printer) {
  cellAbort = new AbortController()
  try {
    const result = await kernel.execute(code, {
      timeoutMs: opts.timeoutMs,
      signal: cellAbort.signal,
      onEvent: (e) => printer.onEvent(e),
    })
    if (exiting) return result // leaving on a second Ctrl-C: no notices
    printer.done(result)
    reportEnding(result, opts)
    return result
  } finally {
    cellAbort = undefined
  }
}

// ---------------------------------------------------------------------------
// Commands

async function cmdCheck(addon, opts) {
  const resolveOpts = { cwd: opts.cwd ?? process.cwd(), interpreter: opts.python }
  let resolved
  let resolveError
  try {
    resolved = await addon.resolvePython(resolveOpts)
  } catch (err) {
    resolveError = err
  }
  const availability = await addon.checkPythonKernelAvailability(resolveOpts)
  const ok = Boolean(resolved && availability.ok)
  if (opts.json) {
    process.stdout.write(
      JSON.stringify({
        type: 'check',
        ok,
        python: resolved,
        error: resolveError ? { code: resolveError.code, message: resolveError.message } : undefined,
        availability,
      }) + '\n',
    )
    return ok ? 0 : 1
  }
  if (resolved) {
    out.line(`interpreter: ${resolved.path}`)
    out.line(`version:     ${resolved.version}`)
    out.line(`source:      ${resolved.source}`)
    const envKeys = Object.keys(resolved.env || {})
    if (envKeys.length) out.line(`env:         ${envKeys.join(', ')}`)
    if (resolved.skipped && resolved.skipped.length) {
      out.line('skipped:')
      for (const s of resolved.skipped) out.line(`  ${s.candidate} (${s.source}): ${s.reason}`)
    } else {
      out.line('skipped:     (none)')
    }
  } else {
    const code = resolveError && resolveError.code ? ` [${resolveError.code}]` : ''
    errLine(`pykernel: ${resolveError ? messageOf(resolveError) : 'no interpreter found; pass --python <path>'}${code}`)
  }
  const isolation = availability.isolation
  out.line(`sandbox:     ${isolation.mode}${isolation.enforced.length ? ` (${isolation.enforced.join(', ')})` : ''}`)
  for (const gap of isolation.missing) out.line(`  not enforced: ${gap}`)
  if (isolation.userNamespaces) {
    out.line(`user namespaces: refused: ${isolation.userNamespaces.cause}`)
    for (const step of isolation.userNamespaces.fix) out.line(`  to allow them: ${step.replace(/\n/g, '\n  ')}`)
  }
  if (availability.ok) {
    out.line(`kernel:      ok${availability.path ? ` (${availability.path})` : ''}`)
  } else if (resolved || availability.reason !== (resolveError && resolveError.message)) {
    errLine(`pykernel: a kernel cannot start: ${messageOf(availability.reason || 'unknown reason')}`)
  }
  return ok ? 0 : 1
}

/** Runs one cell: `exec`, or a script's cell (`script`: the cell of run_script.py). */
async function cmdCell(addon, code, opts, { script = false } = {}) {
  const images = new ImageSaver(opts.imagesDir)
  installSignalHandlers(() => {
    // Ctrl-C while the kernel starts: stop once it is up.
    exitNow(130)
  })
  kernel = await startKernel(addon, opts)
  if (exiting) return new Promise(() => {})
  const printer = makePrinter({ json: opts.json, images, repl: false, script })
  try {
    return exitCodeOf(await runCell(code, opts, printer), { script })
  } catch (err) {
    errLine(`pykernel: ${messageOf(err)}`)
    return 1
  }
}

const RUN_SCRIPT_PY = path.join(__dirname, 'run_script.py')

/** `run <file>`, `-c <code>`, `-`: the script as one cell that runs it as python would. */
async function cmdScript(addon, script, opts) {
  let filename = script.file
  let source // none for a file: its bytes go as they are, so a coding cookie is honoured
  let bytes
  if (script.kind === 'file') {
    const why = unreadable(script.file)
    if (why) return usageError(`cannot read ${script.file}: ${why}`)
    // Read here, not by the kernel: the script may be where the kernel's view does not
    // reach (its /tmp is private).
    filename = path.resolve(script.file)
    bytes = fs.readFileSync(script.file).toString('base64')
  } else if (script.kind === 'code') {
    filename = '<string>'
    source = script.code
  } else {
    filename = '<stdin>'
    source = await readStdin()
  }
  // JSON strings and arrays of strings are Python literals too.
  const literal = (value) => (value === undefined ? 'None' : JSON.stringify(value))
  const argv = [script.argv0, ...script.args]
  const cell =
    fs.readFileSync(RUN_SCRIPT_PY, 'utf8') +
    `\n_pykernel_run_script(${literal(filename)}, ${literal(source)}, ${literal(argv)}, ${literal(bytes)})\n`
  return cmdCell(addon, cell, opts, { script: true })
}

/** Why `file` cannot be run as a script, or undefined. */
function unreadable(file) {
  try {
    if (fs.statSync(file).isDirectory()) return 'is a directory'
    fs.accessSync(file, fs.constants.R_OK)
    return undefined
  } catch (err) {
    return err.code === 'ENOENT' ? 'no such file' : err.code === 'EACCES' ? 'permission denied' : err.message
  }
}

async function readStdin() {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  return Buffer.concat(chunks).toString('utf8')
}

// -- REPL ---------------------------------------------------------------------

const EXIT_WORDS = new Set(['exit', 'quit', 'exit()', 'quit()'])

/**
 * Collects lines into cells; `feed` returns a cell's code when one is complete, as the
 * kernel's Python says (`kernel.isComplete`: codeop after the magics' rules, as
 * `Lib/code.py` asks it). A cell that is `invalid` runs too, so Python reports the error.
 */
class CellCollector {
  constructor() {
    this.lines = []
  }
  get pending() {
    return this.lines.length > 0
  }
  async feed(line) {
    if (!this.lines.length && line.trim() === '') return undefined
    this.lines.push(line)
    if ((await completeness(this.lines.join('\n'))) === 'incomplete') return undefined
    return this.take()
  }
  take() {
    const code = this.lines.join('\n').replace(/\s+$/, '')
    this.lines = []
    return code.trim() ? code : undefined
  }
  reset() {
    this.lines = []
  }
}

/** The kernel's answer for a REPL's lines; a kernel that cannot answer (it died) gets
 *  them run, and the cell reports what happened to it. */
async function completeness(source) {
  try {
    return await kernel.isComplete(source)
  } catch {
    return 'invalid'
  }
}

async function cmdRepl(addon, opts) {
  const interactive = Boolean(process.stdin.isTTY)
  const images = new ImageSaver(opts.imagesDir)
  let rl
  installSignalHandlers(() => {
    if (!kernel) exitNow(130) // still starting
    else if (!interactive) exitNow(130)
    else if (rl) rl.emit('SIGINT')
  })
  kernel = await startKernel(addon, opts)
  if (exiting) return new Promise(() => {})

  let anyFailed = false
  const execute = async (code) => {
    const printer = makePrinter({ json: opts.json, images, repl: true })
    let result
    try {
      result = await runCell(code, opts, printer)
    } catch (err) {
      errLine(`pykernel: ${messageOf(err)}`)
      result = { kernelDied: !kernel || !kernel.alive }
    }
    if (result.status !== 'ok') anyFailed = true
    if (result.kernelDied || (kernel && !kernel.alive)) {
      await shutdownKernel()
      errLine('pykernel: starting a new kernel (all variables are lost)')
      kernel = await startKernel(addon, opts)
    }
  }

  if (!interactive) {
    // Piped stdin: the whole input, split into cells like typed lines would be.
    const input = (await readStdin()).replace(/\r\n/g, '\n')
    const lines = input.split('\n')
    if (lines.length && lines[lines.length - 1] === '') lines.pop()
    const collector = new CellCollector()
    for (const line of lines) {
      if (!collector.pending && EXIT_WORDS.has(line.trim())) break
      const code = await collector.feed(line)
      if (code !== undefined) await execute(code)
      if (exiting) return new Promise(() => {})
    }
    const rest = collector.take()
    if (rest !== undefined) await execute(rest)
    return anyFailed ? 1 : 0
  }

  // Interactive: readline, prompts, a queue so type-ahead lines wait for the running cell.
  const output = opts.json ? process.stderr : process.stdout
  rl = readline.createInterface({ input: process.stdin, output, terminal: true, historySize: 1000 })
  const collector = new CellCollector()
  const promptNext = () => {
    const n = (kernel ? kernel.executionCount : 0) + 1
    if (!opts.json) out.freshLine()
    rl.setPrompt(collector.pending ? '   ...: ' : `In [${n}]: `)
    rl.prompt()
  }
  const queue = []
  let wake
  let closed = false
  rl.on('line', (line) => {
    queue.push(line)
    if (wake) wake()
  })
  rl.on('close', () => {
    closed = true
    if (wake) wake()
  })
  let lastIdleInterrupt = 0
  rl.on('SIGINT', () => {
    if (onInterrupt()) return
    const now = Date.now()
    if (now - lastIdleInterrupt < 1000) {
      errLine('pykernel: interrupted twice; exiting')
      exitNow(130)
      return
    }
    lastIdleInterrupt = now
    // Idle at the prompt: drop the partial input, like IPython.
    collector.reset()
    queue.length = 0
    output.write('^C\nKeyboardInterrupt (Ctrl-C again within 1 s, Ctrl-D or "exit" to quit)\n')
    if (!opts.json) out.atLineStart = true
    promptNext()
  })

  promptNext()
  for (;;) {
    if (!queue.length) {
      if (closed) break
      await new Promise((resolve) => (wake = resolve))
      wake = undefined
      continue
    }
    const line = queue.shift()
    if (!collector.pending && EXIT_WORDS.has(line.trim())) break
    const code = await collector.feed(line)
    if (code !== undefined) {
      await execute(code)
      if (exiting) return new Promise(() => {})
      if (!opts.json) out.write('\n')
    }
    if (!closed) promptNext()
  }
  if (closed && !opts.json) output.write('\n')
  rl.close()
  return 0
}

// ---------------------------------------------------------------------------

/** A usage error: one line naming what is wrong, and where to look. Exit code 2. */
function usageError(message) {
  process.stderr.write(`pykernel: ${message}; see pykernel --help\n`)
  return 2
}

async function main(argv) {
  let parsed
  try {
    parsed = parseArgs(argv)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    return usageError(err.message)
  }
  const { opts, positional, script } = parsed
  if (opts.help) {
    process.stdout.write(USAGE + '\n')
    return 0
  }
  if (opts.version) {
    process.stdout.write(`pykernel ${require('../package.json').version}\n`)
    return 0
  }
  const [command, ...args] = positional
  // Each option the command has no use for is refused, never ignored.
  if (opts.imageBudget !== undefined && (script || command !== 'mcp')) {
    return usageError('--image-budget is for pykernel mcp (run, exec and the REPL save images whole, see --images-dir)')
  }
  if (opts.imagesDir !== undefined && !script && (command === 'mcp' || command === 'check')) {
    return usageError(`--images-dir is for run, exec and the REPL; ${command === 'mcp' ? 'pykernel mcp returns images to its client' : 'check shows no images'}`)
  }
  if (script) return cmdScript(loadAddon(), script, opts)

  switch (command) {
    case undefined:
      // As python: a terminal gets the REPL, piped input runs as one script.
      if (!process.stdin.isTTY) return cmdScript(loadAddon(), { kind: 'stdin', argv0: '', args: [] }, opts)
      return cmdRepl(loadAddon(), opts)
    case 'repl':
      if (args.length) return usageError(`unexpected argument '${args[0]}'`)
      return cmdRepl(loadAddon(), opts)
    case 'exec':
      if (args.length !== 1) return usageError('exec takes exactly one argument: the code to run (quote it)')
      return cmdCell(loadAddon(), args[0], opts)
    case 'run': // with its file, `run` is a script
      return usageError('run needs a file to run (or - for stdin)')
    case 'check':
      if (args.length) return usageError(`unexpected argument '${args[0]}'`)
      if (opts.launcher) return usageError('check looks for Python here; --launcher does not apply')
      if (opts.writable) return usageError('check looks for Python here; --writable does not apply')
      return cmdCheck(loadAddon(), opts)
    case 'mcp': {
      if (opts.launcher && opts.writable) return usageError('--writable is for kernels here; a launched kernel is confined by what runs it')
      if (args.length) return usageError(`unexpected argument '${args[0]}'`)
      const addon = loadAddon() // before mcp.js: a missing addon is the error to tell
      return require('./mcp.js').serveMcp(addon, opts)
    }
    case 'help':
      process.stdout.write(USAGE + '\n')
      return 0
    default:
      return usageError(`unknown command '${command}'`)
  }
}

main(process.argv.slice(2)).then(
  async (code) => {
    if (exiting) return
    exiting = true
    await shutdownKernel()
    flushAndExit(code)
  },
  async (err) => {
    if (exiting) return
    exiting = true
    if (err instanceof SetupError) {
      process.stderr.write(`pykernel: ${err.message}\n`)
      flushAndExit(2)
      return
    }
    process.stderr.write(`pykernel: ${err && err.stack ? err.stack : String(err)}\n`)
    await shutdownKernel()
    flushAndExit(1)
  },
)
