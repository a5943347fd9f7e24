'use strict'
// Normalizing and comparing what a cell gave. Both sides are observed raw (status, error,
// streams, the result's bundle, each display's bundle); `comparable` turns one observation
// into the five fields compared, with only what legitimately differs between two runs or
// two kernels masked:
// - the session's own directory (each side runs in a fresh temporary one) -> `<cwd>`;
// - CRLF line ends -> LF (IPython runs `!cmd` in a pty, which writes CRLF; a notebook
//   shows the same lines);
// - memory addresses `0x7f...` -> `0x…`;
// - timings on the lines %time and %timeit print (value and unit) -> `<time>`;
// - a SyntaxError's file name (`(3204.py, line 1)` vs `(<cell 3>, line 1)`) -> `<cell>`;
//   tracebacks are not compared at all (frames, colours), only the error's name and value.
// Execution counts and stderr are not compared (stderr holds warnings with file paths).

const FIELDS = ['status', 'stdout', 'result', 'displays', 'images']
const IMAGE_MIMES = new Set(['image/png', 'image/jpeg'])
const SYNTAX_ERRORS = new Set(['SyntaxError', 'IndentationError', 'TabError'])
const TIMING_LINE = /per loop|CPU times|Wall time/
const DURATION = /\d+(?:\.\d+)?\s*(?:ns|[µμu]s|ms|s|min|h)\b/g

function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

function normText(text, cwd) {
  if (text == null) return text
  let s = String(text).replace(/\r\n/g, '\n')
  if (cwd) s = s.replace(new RegExp(`${escapeRegExp(cwd)}(?=/|\\b|$)`, 'g'), '<cwd>')
  s = s.replace(/0x[0-9a-fA-F]{4,}/g, '0x…')
  s = s
    .split('\n')
    .map((line) => (TIMING_LINE.test(line) ? line.replace(DURATION, '<time>') : line))
    .join('\n')
  return s
}

function status(obs, cwd) {
  if (obs.status !== 'error') return obs.status
  let evalue = normText(String(obs.evalue ?? ''), cwd).replace(/\x1b\[[0-9;]*[A-Za-z]/g, '')
  if (SYNTAX_ERRORS.has(obs.ename)) evalue = evalue.replace(/\(([^()]*), line (\d+)\)$/, '(<cell>, line $2)')
  return `error ${obs.ename}: ${evalue}`
}

/** MIME types only pykernel sends (a figure's chart as data): additions to what Jupyter
 *  shows, not a difference from it. */
const OUR_MIME = /^application\/vnd\.pykernel\./

function displayLine(b, cwd) {
  const mimes = b.mimes.filter((m) => !IMAGE_MIMES.has(m) && !OUR_MIME.test(m))
  const text = b.text == null ? '(no text/plain)' : normText(b.text, cwd)
  return `${mimes.join('+') || '(image only)'}: ${text}`
}

function images(obs) {
  const bundles = obs.result ? [...obs.displays, obs.result] : obs.displays
  const found = bundles.flatMap((b) => b.images)
  if (!found.length) return '0'
  const sizes = found.map((i) => (i.size ? `${i.size[0]}x${i.size[1]}` : `${i.mime} (size unknown)`))
  return `${found.length}: ${sizes.join(', ')}`
}

/** The five compared fields of one observation, normalized; strings or string lists. */
function comparable(obs, cwd) {
  return {
    status: status(obs, cwd),
    stdout: normText(obs.stdout, cwd),
    result: obs.result ? (obs.result.text == null ? '(no text/plain)' : normText(obs.result.text, cwd)) : null,
    displays: obs.displays.map((b) => displayLine(b, cwd)),
    images: images(obs),
  }
}

/** The fields in which two comparables differ, in FIELDS order. */
function differences(expected, actual) {
  return FIELDS.filter((f) => JSON.stringify(expected[f]) !== JSON.stringify(actual[f]))
}

module.exports = { comparable, differences, normText, FIELDS }
