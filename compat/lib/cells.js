'use strict'
// The cells: `compat/cells/*.py`, one session per file, in the percent format editors
// use for notebooks as scripts. A file starts with comment lines describing the session
// (`# compat: ci` puts it in the CI subset); each cell starts with `# %% <id>`; trailing
// blank lines of a cell are not part of it. Cells of a session run in order in one kernel.
const fs = require('node:fs')
const path = require('node:path')

const CELLS_DIR = path.resolve(__dirname, '..', 'cells')

function parseSession(file) {
  const name = path.basename(file, '.py')
  const lines = fs.readFileSync(file, 'utf8').split('\n')
  const session = { name, file, about: [], ci: false, cells: [] }
  let cell = null
  const close = () => {
    if (!cell) return
    while (cell.lines.length && cell.lines[cell.lines.length - 1].trim() === '') cell.lines.pop()
    session.cells.push({ id: cell.id, key: `${name}/${cell.id}`, code: cell.lines.join('\n') })
  }
  for (const line of lines) {
    const header = /^# %%\s+(\S+)\s*$/.exec(line)
    if (header) {
      close()
      if (session.cells.some((c) => c.id === header[1])) throw new Error(`${file}: cell id ${header[1]} is used twice`)
      cell = { id: header[1], lines: [] }
    } else if (cell) {
      cell.lines.push(line)
    } else if (/^# compat:.*\bci\b/.test(line)) {
      session.ci = true
    } else if (line.startsWith('# ')) {
      session.about.push(line.slice(2))
    } else if (line.trim() !== '') {
      throw new Error(`${file}: code before the first '# %% <id>' cell header: ${line}`)
    }
  }
  close()
  return session
}

/** Every session, in file-name order. */
function loadSessions(dir = CELLS_DIR) {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.py'))
    .sort()
    .map((f) => parseSession(path.join(dir, f)))
}

module.exports = { loadSessions, CELLS_DIR }
