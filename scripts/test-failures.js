'use strict'
// A node:test reporter for `npm test` (scripts/test.js): it writes nothing while the
// suites run and, at the end, one entry per failed test: its file, the path of test names
// down to it, the first lines of its error and where it was thrown. A file that crashed or
// timed out as a whole is an entry too, with its exit status and the tests it cut short.
// scripts/test.js prints this after the spec reporter's output, so the failures close the
// run instead of sitting far above a summary that only counts them.
const path = require('node:path')

const root = path.resolve(__dirname, '..')

/** `file` relative to the repository, as a reader types it. */
function relative(file) {
  if (!file) return '(no file)'
  const rel = path.relative(root, file)
  return rel.startsWith('..') ? file : rel
}

/** The error a test failed with, past node:test's wrapper (ERR_TEST_FAILURE). */
function causeOf(error) {
  return error && typeof error.cause === 'object' && error.cause !== null ? error.cause : error
}

/** The first lines of the error's message that say something: an assertion's own
 *  message, then the values it compared (`199 !== 200`) when they follow. */
function firstLines(error, count = 3) {
  const message = typeof error === 'string' ? error : String(error?.message ?? error ?? '')
  const lines = message.split('\n').map((line) => line.trim()).filter((line) => line !== '')
  if (lines.length === 0) return ['(no message)']
  return lines.slice(0, count).map((line) => (line.length > 200 ? `${line.slice(0, 200)}…` : line))
}

/** `file:line:column` of the innermost stack frame inside `file`, if the stack has one. */
function whereIn(error, file) {
  if (!file || typeof error?.stack !== 'string') return null
  for (const line of error.stack.split('\n')) {
    const at = line.match(/\(?((?:file:\/\/)?\/[^():]+):(\d+):(\d+)\)?\s*$/)
    if (at && at[1].replace(/^file:\/\//, '') === file) return `${relative(file)}:${at[2]}:${at[3]}`
  }
  return null
}

/** The first line of a crashed file's stderr that names an error (its uncaught throw). */
function errorLineOf(lines) {
  return lines.find((line) => /^(\w+)?(Error|Exception)\b|^\s*\w*Error \[/.test(line)) ?? null
}

module.exports = async function* failures(source) {
  const names = new Map() // file -> the names of the tests started at each nesting level
  const stderr = new Map() // file -> the last lines of its stderr (a crash says why there)
  const running = new Map() // file -> the tests begun and not completed (what a timeout or crash cut short)
  const failed = []
  for await (const { type, data } of source) {
    if (type === 'test:stderr') {
      const lines = stderr.get(data.file) ?? []
      lines.push(...String(data.message).split('\n').filter((l) => l.trim() !== ''))
      stderr.set(data.file, lines.slice(-200))
    } else if (type === 'test:dequeue' && data.name !== data.file) {
      running.set(data.file, [...(running.get(data.file) ?? []), `${data.nesting} ${data.name}`])
    } else if (type === 'test:complete') {
      const begun = running.get(data.file) ?? []
      const at = begun.lastIndexOf(`${data.nesting} ${data.name}`)
      if (at >= 0) begun.splice(at, 1)
    } else if (type === 'test:start') {
      const stack = names.get(data.file) ?? []
      stack.length = data.nesting
      stack[data.nesting] = data.name
      names.set(data.file, stack)
    } else if (type === 'test:fail') {
      const error = data.details?.error
      // A test whose subtests failed, or a file whose tests failed, adds nothing to them.
      if (error?.failureType === 'subtestsFailed') continue
      const wholeFile = data.name === data.file
      const stack = (names.get(data.file) ?? []).slice(0, data.nesting)
      const cause = causeOf(error)
      let message = firstLines(cause)
      if (wholeFile) {
        const how = error?.signal ? `killed by ${error.signal}` : error?.exitCode != null ? `exited with code ${error.exitCode}` : null
        const said = errorLineOf(stderr.get(data.file) ?? [])
        message = [[how ?? message[0], said].filter(Boolean).join(': ')]
        const cut = (running.get(data.file) ?? []).map((entry) => entry.slice(entry.indexOf(' ') + 1))
        if (cut.length) message.push(`still running: ${cut.join(' > ')}`)
      }
      failed.push({
        file: relative(data.file),
        path: wholeFile ? '(the file as a whole)' : [...stack, data.name].join(' > '),
        where: wholeFile ? null : whereIn(cause, data.file) ?? (data.line ? `${relative(data.file)}:${data.line}:${data.column}` : null),
        kind: error?.failureType,
        message,
      })
    }
  }
  if (failed.length) yield `Failed tests (${failed.length}):\n`
  // Files run two at a time, so their failures interleave: one heading per file.
  failed.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0))
  let file = null
  for (const f of failed) {
    if (f.file !== file) yield `${(file = f.file)}\n`
    yield `  ✖ ${f.path}${f.kind && f.kind !== 'testCodeFailure' ? ` (${f.kind})` : ''}\n`
    for (const line of f.message) yield `      ${line}\n`
    if (f.where) yield `      at ${f.where}\n`
  }
}
