'use strict'
// compat/results/latest.md: the headline, what was compared, then one table per session
// with each cell's verdict and, for a cell that differs, both values of each differing
// field, cut around the first difference.
const fs = require('node:fs')
const path = require('node:path')
const { FIELDS } = require('./compare')

const WIDTH = 70

function show(value) {
  if (value == null) return '(none)'
  return Array.isArray(value) ? (value.length ? value.join(' ; ') : '(none)') : String(value)
}

/** Both values as short one-line snippets around where they first differ. */
function snippets(a, b) {
  const [x, y] = [show(a), show(b)]
  let i = 0
  while (i < x.length && i < y.length && x[i] === y[i]) i++
  const from = Math.max(0, i - 20)
  const cut = (s) => {
    const body = s.slice(from, from + WIDTH)
    return `${from > 0 ? '…' : ''}${body}${from + WIDTH < s.length ? '…' : ''}`
  }
  return [cut(x), cut(y)]
}

function code(s) {
  const text = s.replace(/\n/g, '⏎').replace(/\r/g, '␍').replace(/\t/g, '⇥').replace(/\|/g, '\\|').replace(/`/g, 'ˋ') || '(empty)'
  return `\`${text}\``
}

function details(row) {
  if (!row.jupyter) return 'no Jupyter output'
  if (!row.pykernel) return 'no pykernel output'
  return row.differs
    .map((f) => {
      const [j, p] = snippets(row.jupyter[f], row.pykernel[f])
      return `**${f}** Jupyter ${code(j)}<br>pykernel ${code(p)}`
    })
    .join('<br>')
}

function writeReport(file, { rows, summary, info, sessions }) {
  const v = info.versions
  const lines = [
    '# pykernel against Jupyter, cell by cell',
    '',
    `**${summary.identical} of ${summary.compared} cells identical**` +
      (summary.compared < summary.total ? ` (${summary.total - summary.compared} could not be compared)` : ''),
    '',
    `- date: ${info.date}; ${info.mode}; ${info.seconds} s; \`npm run compat\``,
    `- Python ${v.python} (\`${path.relative(path.resolve(__dirname, '..', '..'), info.python) || info.python}\`), ipykernel ${v.ipykernel},` +
      ` jupyter_client ${v.jupyter_client}, IPython ${v.ipython}, pandas ${v.pandas}, numpy ${v.numpy}, matplotlib ${v.matplotlib},` +
      ` plotly ${v.plotly}, Pillow ${v.pillow}, nbformat ${v.nbformat}`,
    `- Jupyter outputs recorded ${info.recorded || `${info.date} (this run)`} (compat/expected.json)`,
    '- compared per cell: `status` (ok, or the error\'s name and value; never the traceback), `stdout`, `result`' +
      ' (the result\'s text/plain), `displays` (each display\'s MIME types and text/plain), `images` (PNG and JPEG' +
      ' bundles among displays and the result, with their pixel sizes)',
    '- masked on both sides: the session\'s temporary directory (`<cwd>`), memory addresses (`0x…`), timings' +
      ' on %time/%timeit lines (`<time>`), a SyntaxError\'s cell file name (`<cell>`), CRLF line ends (IPython' +
      ' runs `!cmd` in a pty) as LF',
    '- shown below: a newline as ⏎, a carriage return as ␍, a tab as ⇥',
    '',
    '| field | cells that differ in it |',
    '|---|---|',
    ...FIELDS.map((f) => `| ${f} | ${summary.byField[f]} |`),
  ]
  if (info.drift.length) {
    lines.push('', 'Jupyter itself gave these cells a different output than recorded (so they are not stable):')
    for (const d of info.drift) lines.push(`- ${d.key}: ${d.fields.join(', ')}`)
  }
  if (info.sessionErrors.length) {
    lines.push('', 'Sessions that failed:')
    for (const e of info.sessionErrors) lines.push(`- ${e.split('\n')[0]}`)
  }
  for (const s of sessions) {
    const mine = rows.filter((r) => r.session === s.name)
    const same = mine.filter((r) => r.differs && !r.differs.length).length
    lines.push('', `## ${s.name} (${same} of ${mine.length} identical)`, '', s.about.join(' '), '', '| cell | verdict | what differs |', '|---|---|---|')
    for (const r of mine) {
      const verdict = !r.differs ? 'not compared' : r.differs.length ? `differs: ${r.differs.join(', ')}` : 'identical'
      lines.push(`| ${r.cell.id} | ${verdict} | ${r.differs && !r.differs.length ? '' : details(r)} |`)
    }
  }
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, `${lines.join('\n')}\n`)
}

module.exports = { writeReport }
