'use strict'
// compat/expected.json: Jupyter's outputs for every cell as `npm run compat -- --record`
// recorded them (normalized, the five compared fields), the versions they were recorded
// with, and for each cell whether pykernel matched them in the latest full run
// (`matches`, and `differs`: the fields that did not). The CI test reads it.
const fs = require('node:fs')
const path = require('node:path')

const EXPECTED = path.resolve(__dirname, '..', 'expected.json')

function readExpected(file = EXPECTED) {
  if (!fs.existsSync(file)) return { recorded: null, versions: null, cells: {} }
  const data = JSON.parse(fs.readFileSync(file, 'utf8'))
  return { recorded: data.recorded ?? null, versions: data.versions ?? null, cells: data.cells ?? {} }
}

/** Writes the record in the cells' order, without entries for cells that are gone. */
function writeExpected(expected, sessions, file = EXPECTED) {
  const cells = {}
  for (const s of sessions) {
    for (const c of s.cells) {
      const e = expected.cells[c.key]
      if (e) cells[c.key] = { matches: e.matches ?? false, ...(e.differs ? { differs: e.differs } : {}), jupyter: e.jupyter }
    }
  }
  const out = {
    about: 'Jupyter (ipykernel) outputs of compat/cells, normalized; written by `npm run compat` (see compat/run.js)',
    recorded: expected.recorded,
    versions: expected.versions,
    cells,
  }
  fs.writeFileSync(file, `${JSON.stringify(out, null, 1)}\n`)
}

module.exports = { readExpected, writeExpected, EXPECTED }
