'use strict'
// pykernel's command line read: where a script begins, then pykernel's own options
// (`util.parseArgs`), each refusal a one-line `UsageError` (exit code 2).

const fs = require('node:fs')
const path = require('node:path')
const util = require('node:util')

/** A usage error: `bin/pykernel.js` prints its message in one line and exits 2. */
class UsageError extends Error {}

/** pykernel's own options, as `util.parseArgs` reads them. */
const OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'V' },
  json: { type: 'boolean' },
  python: { type: 'string' },
  launcher: { type: 'string' },
  reattach: { type: 'string' },
  timeout: { type: 'string' },
  'images-dir': { type: 'string' },
  'image-budget': { type: 'string' },
  writable: { type: 'string', multiple: true },
  cwd: { type: 'string' },
}

/**
 * The script a command line names: `run <file>`, `run -` or `-` (stdin). Arguments after
 * it are the script's, like python's; `-c <code>` is found by `splitAtScript`.
 */
function scriptNamedBy(positional) {
  const [command, file] = positional
  if (command === '-' && positional.length === 1) return { kind: 'stdin', argv0: '-' }
  if (command === 'run' && positional.length === 2) {
    return file === '-' ? { kind: 'stdin', argv0: '-' } : { kind: 'file', file, argv0: file }
  }
  return undefined
}

/**
 * `{ own, script? }`: the arguments that are pykernel's, and the script they name with
 * its arguments. pykernel's options may come anywhere before a script (`run <file>`,
 * `-c <code>`, `-`); everything after it is the script's `sys.argv[1:]`, however much it
 * looks like an option, so the boundary is found before any option is read.
 */
function splitAtScript(argv) {
  const positional = []
  let optionsEnded = false
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (!optionsEnded && arg === '--') {
      optionsEnded = true
    } else if (!optionsEnded && arg === '-c') {
      if (positional.length) throw new UsageError(`-c cannot follow '${positional[0]}'`)
      if (i + 1 >= argv.length) throw new UsageError('-c needs a value')
      return { own: argv.slice(0, i), script: { kind: 'code', code: argv[i + 1], argv0: '-c', args: argv.slice(i + 2) } }
    } else if (optionsEnded || arg === '-' || !arg.startsWith('-')) {
      positional.push(arg)
      const script = scriptNamedBy(positional)
      if (script) return { own: argv.slice(0, i + 1), script: { ...script, args: argv.slice(i + 1) } }
    } else if (arg.startsWith('--') && !arg.includes('=') && OPTIONS[arg.slice(2)]?.type === 'string') {
      i++ // `--python <path>`: the next word is the option's value
    }
  }
  return { own: argv }
}

/**
 * `{ opts, positional, script? }` from the command line (see `splitAtScript`). Every
 * path an option names is taken relative to the shell's working directory.
 */
function parseArgs(argv) {
  const { own, script } = splitAtScript(argv)
  let parsed
  try {
    parsed = util.parseArgs({ args: own, options: OPTIONS, strict: true, allowPositionals: true })
  } catch (err) {
    throw usageOf(err)
  }
  const { values, positionals } = parsed
  const opts = {
    json: Boolean(values.json),
    help: Boolean(values.help),
    version: Boolean(values.version),
    python: undefined,
    launcher: undefined,
    reattachMs: undefined,
    timeoutMs: undefined,
    imagesDir: undefined,
    imageBudget: undefined,
    cwd: undefined,
  }
  if (values.python !== undefined) {
    if (!values.python) throw new UsageError('--python needs a path')
    opts.python = values.python
  }
  if (values.launcher !== undefined) opts.launcher = launcherWords(values.launcher)
  if (values.reattach !== undefined) {
    const seconds = Number(values.reattach)
    if (!values.reattach.trim() || !Number.isFinite(seconds) || seconds <= 0) {
      throw new UsageError(`--reattach must be a number of seconds, got '${values.reattach}'`)
    }
    if (!opts.launcher) throw new UsageError('--reattach keeps a launched kernel across a dropped link: give --launcher too')
    opts.reattachMs = Math.round(seconds * 1000)
  }
  if (values['images-dir'] !== undefined) {
    if (!values['images-dir']) throw new UsageError('--images-dir needs a directory')
    opts.imagesDir = path.resolve(values['images-dir'])
  }
  if (values['image-budget'] !== undefined) opts.imageBudget = imageBudget(values['image-budget'])
  if (values.writable) {
    if (values.writable.some((dir) => !dir)) throw new UsageError("--writable needs a directory, or 'all'")
    opts.writable = values.writable.includes('all') ? 'all' : values.writable.map((dir) => path.resolve(dir))
  }
  if (values.timeout !== undefined) {
    const seconds = Number(values.timeout)
    if (!values.timeout.trim() || !Number.isFinite(seconds) || seconds < 0) {
      throw new UsageError(`--timeout must be a number of seconds (0: no limit), got '${values.timeout}'`)
    }
    // 0 is no limit, as the library's `timeoutMs: 0`; any other value is at least 1 ms.
    opts.timeoutMs = seconds === 0 ? 0 : Math.max(1, Math.round(seconds * 1000))
  }
  if (values.cwd !== undefined) opts.cwd = kernelCwd(values.cwd, opts.launcher)
  return { opts, positional: positionals, script }
}

/** `fitImages`' keys, as `--image-budget` names them. */
const IMAGE_BUDGET_KEYS = ['maxEdge', 'maxBytes', 'maxTotalBytes']

/** `--image-budget`: `off` (images unchanged, within the message's cap) or
 *  `maxEdge=<px>,maxBytes=<n>,maxTotalBytes=<n>` (any of them; the addon checks ranges). */
function imageBudget(spec) {
  if (spec === 'off') return false
  const budget = {}
  for (const part of spec.split(',')) {
    const [key, value, extra] = part.split('=')
    const number = Number(value)
    if (!IMAGE_BUDGET_KEYS.includes(key) || extra !== undefined || !value || !Number.isInteger(number)) {
      throw new UsageError(`--image-budget takes 'off' or ${IMAGE_BUDGET_KEYS.map((k) => `${k}=<n>`).join(',')} (any of them), got '${spec}'`)
    }
    budget[key] = number
  }
  return budget
}

/** `util.parseArgs`' error as the CLI's one-line usage error. */
function usageOf(err) {
  const option = /'(-[^' ]*)/.exec(err.message)?.[1]
  // Its messages name the option; should one not, its own first line is the error.
  if (!option) return new UsageError(err.message.split('\n')[0])
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return new UsageError(`unknown option '${option}'`)
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      if (/does not take an argument/.test(err.message)) return new UsageError(`${option} takes no value`)
      if (/ambiguous/.test(err.message)) {
        return new UsageError(`${option} needs a value (one that starts with '-' is written ${option}=<value>)`)
      }
      return new UsageError(`${option} needs a value`)
    default:
      return new UsageError(err.message.split('\n')[0])
  }
}

/**
 * `--cwd`'s directory, absolute. Here it must exist; through `--launcher` it is the far
 * side's, which only the far side can check, so it must be absolute as given.
 */
function kernelCwd(value, launcher) {
  if (!value) throw new UsageError('--cwd needs a directory')
  if (launcher) {
    if (!path.isAbsolute(value)) throw new UsageError(`--cwd with --launcher is the far side's directory: give it as an absolute path, not '${value}'`)
    return value
  }
  const dir = path.resolve(value)
  let stat
  try {
    stat = fs.statSync(dir)
  } catch {
    throw new UsageError(`--cwd ${value}: no such directory`)
  }
  if (!stat.isDirectory()) throw new UsageError(`--cwd ${value}: not a directory`)
  return dir
}

/**
 * `--launcher`'s value as an argv prefix: a JSON array of words (`'["ssh","-T","h"]'`), or
 * words separated by spaces (`'docker exec -i box'`).
 */
function launcherWords(value) {
  let words
  if (value.trim().startsWith('[')) {
    try {
      words = JSON.parse(value)
    } catch (err) {
      throw new UsageError(`--launcher is not a JSON array of words: ${err.message}`)
    }
    if (!Array.isArray(words) || !words.every((w) => typeof w === 'string')) {
      throw new UsageError('--launcher as JSON must be an array of strings')
    }
  } else {
    words = value.split(/\s+/).filter(Boolean)
  }
  if (!words.length || !words[0]) throw new UsageError('--launcher needs a command, e.g. --launcher "docker exec -i box"')
  return words
}

module.exports = { parseArgs, UsageError }
