#!/usr/bin/env node
'use strict'
// `npm run compat`: the differential test against Jupyter. Runs every session of
// compat/cells/ through pykernel (`kernel.execute` per cell) and through ipykernel
// (compat/jupyter_driver.py over jupyter_client), both on the compat venv's interpreter,
// compares each cell's status, stdout, result text/plain, displays and images after
// normalizing what legitimately differs (lib/compare.js), writes
// compat/results/latest.md and prints "N of M cells identical".
//
// It also keeps compat/expected.json: Jupyter's outputs as recorded, and for each cell
// whether pykernel matched them in this run (the CI test, __tests__/python/compat.test.js,
// asserts that the matching cells still match, with no Jupyter needed).
//
//   npm run compat                      both sides; update the marks in expected.json
//   npm run compat -- --record          ... and re-record Jupyter's outputs
//   npm run compat -- --pykernel-only   pykernel against the recorded outputs (no ipykernel;
//                                       writes nothing)
//   npm run compat -- --session pandas  only sessions whose name contains "pandas"
//   npm run compat -- --no-write        write nothing (report to stdout only)
//   npm run compat -- --python PATH     pykernel's interpreter for --pykernel-only
//   npm run compat -- --accept          let a cell that matched Jupyter be marked as differing
//                                       (without it such a regression fails the run and the
//                                       record keeps holding the cell in CI)
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { loadSessions } = require('./lib/cells')
const { comparable, differences, FIELDS } = require('./lib/compare')
const { runSessions } = require('./lib/pykernel_side')
const { ensureVenv, versions, VENV_PY } = require('./lib/venv')
const { writeReport } = require('./lib/report')
const { readExpected, writeExpected, EXPECTED } = require('./lib/expected')

const HERE = __dirname
const DRIVER = path.join(HERE, 'jupyter_driver.py')
const REPORT = path.join(HERE, 'results', 'latest.md')

function parseArgs(argv) {
  const args = { record: false, pykernelOnly: false, write: true, sessions: [], python: null }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--record') args.record = true
    else if (a === '--accept') args.accept = true
    else if (a === '--pykernel-only' || a === '--ci') args.pykernelOnly = true
    else if (a === '--no-write') args.write = false
    else if (a === '--session') args.sessions.push(argv[++i])
    else if (a === '--python') args.python = argv[++i]
    else throw new Error(`unknown argument ${a} (see the top of compat/run.js)`)
  }
  if (args.record && args.pykernelOnly) throw new Error('--record needs the Jupyter side: drop --pykernel-only')
  return args
}

function log(msg) {
  process.stderr.write(`[compat] ${msg}\n`)
}

/** A fresh directory per side and session, so each kernel starts in an empty cwd. */
function sessionDirs(root, side, sessions) {
  return sessions.map((s) => {
    const cwd = path.join(root, side, s.name)
    fs.mkdirSync(cwd, { recursive: true })
    return { name: s.name, cwd, cells: s.cells.map((c) => ({ id: c.id, code: c.code })) }
  })
}

/** Runs the Jupyter driver; resolves with its per-cell lines. */
function runJupyter(python, sessions, onCell) {
  return new Promise((resolve, reject) => {
    const child = spawn(python, [DRIVER], { stdio: ['pipe', 'pipe', 'inherit'] })
    let buf = ''
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk) => {
      buf += chunk
      let nl
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl)
        buf = buf.slice(nl + 1)
        if (line.trim()) onCell(JSON.parse(line))
      }
    })
    child.on('error', reject)
    child.on('close', (code, signal) => {
      if (code === 0) resolve()
      else reject(new Error(`the Jupyter driver exited with ${signal || code}`))
    })
    const stop = () => child.kill('SIGTERM')
    process.once('SIGINT', stop)
    child.stdin.end(JSON.stringify({ sessions }))
  })
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const sessions = loadSessions().filter((s) => !args.sessions.length || args.sessions.some((n) => s.name.includes(n)))
  if (!sessions.length) throw new Error(`no session matches ${args.sessions.join(', ')}`)
  const cells = sessions.flatMap((s) => s.cells)
  const expected = readExpected()

  const python = args.pykernelOnly ? args.python || (fs.existsSync(VENV_PY) ? VENV_PY : 'python3') : ensureVenv()
  const tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-compat-')))
  const jupyter = new Map() // key -> comparable
  const pykernel = new Map()
  const raw = { jupyter: new Map(), pykernel: new Map() }
  const sessionErrors = []
  const collect = (side, dirs, into) => (obs) => {
    const dir = dirs.find((d) => d.name === obs.session)
    if (obs.sessionError) {
      sessionErrors.push(`${side} ${obs.session}: ${obs.sessionError}${obs.kernelLog ? `\n${obs.kernelLog}` : ''}`)
      return
    }
    const key = `${obs.session}/${obs.id}`
    raw[side].set(key, obs)
    into.set(key, comparable(obs, dir.cwd))
  }
  const t0 = Date.now()
  try {
    if (!args.pykernelOnly) {
      const dirs = sessionDirs(tmp, 'jupyter', sessions)
      log(`Jupyter: ${sessions.length} sessions, ${cells.length} cells (ipykernel on ${python})`)
      await runJupyter(python, dirs, collect('jupyter', dirs, jupyter))
    }
    const dirs = sessionDirs(tmp, 'pykernel', sessions)
    log(`pykernel: ${sessions.length} sessions, ${cells.length} cells (on ${python})`)
    await runSessions(dirs, { python, onCell: collect('pykernel', dirs, pykernel) })
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
  for (const e of sessionErrors) log(`session failed: ${e}`)

  // Jupyter's side of each cell: this run's (live), else the record (--pykernel-only).
  const rows = []
  const drift = []
  for (const s of sessions) {
    for (const c of s.cells) {
      const recorded = expected.cells[c.key]?.jupyter
      const live = jupyter.get(c.key)
      if (live && recorded && differences(recorded, live).length) drift.push({ key: c.key, fields: differences(recorded, live) })
      const j = live || recorded || null
      const p = pykernel.get(c.key) || null
      const diff = j && p ? differences(j, p) : null
      rows.push({ session: s.name, cell: c, jupyter: j, pykernel: p, differs: diff, raw: { jupyter: raw.jupyter.get(c.key), pykernel: raw.pykernel.get(c.key) } })
    }
  }
  for (const d of drift) {
    log(`Jupyter gave ${d.key} a different ${d.fields.join(', ')} than recorded${args.record ? ' (re-recorded)' : ' (run with --record to re-record)'}`)
  }

  const compared = rows.filter((r) => r.differs)
  const identical = compared.filter((r) => r.differs.length === 0)
  const summary = {
    identical: identical.length,
    compared: compared.length,
    total: rows.length,
    byField: Object.fromEntries(FIELDS.map((f) => [f, compared.filter((r) => r.differs.includes(f)).length])),
  }
  const info = {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    seconds: Math.round((Date.now() - t0) / 1000),
    versions: versions(python),
    python,
    mode: args.pykernelOnly ? 'pykernel against the recorded Jupyter outputs' : 'pykernel and ipykernel, live',
    recorded: args.record ? null : expected.recorded,
    drift,
    sessionErrors,
    partial: args.sessions.length > 0,
  }

  const regressed = []
  if (args.write) {
    if (!args.pykernelOnly) {
      for (const r of rows) {
        const entry = expected.cells[r.cell.key] || {}
        if (r.raw.jupyter && (args.record || !entry.jupyter)) entry.jupyter = jupyter.get(r.cell.key)
        if (entry.jupyter && r.pykernel) {
          const d = differences(entry.jupyter, r.pykernel)
          if (entry.matches && d.length && !args.accept) {
            // A regression: the record keeps the cell held (CI fails on it) until it is
            // fixed, or accepted with --accept.
            regressed.push(`${r.cell.key} (${d.join(', ')})`)
            expected.cells[r.cell.key] = entry
            continue
          }
          entry.matches = d.length === 0
          if (d.length) entry.differs = d
          else delete entry.differs
        }
        expected.cells[r.cell.key] = entry
      }
      if (args.record || !expected.recorded) {
        expected.recorded = info.date
        expected.versions = info.versions
      }
      writeExpected(expected, loadSessions())
      log(`wrote ${path.relative(process.cwd(), EXPECTED)}`)
      if (regressed.length) {
        log(`cells that matched Jupyter and no longer do (kept as matching; --accept to mark them): ${regressed.join('; ')}`)
        process.exitCode = 1
      }
    }
    if (!info.partial && !args.pykernelOnly) {
      writeReport(REPORT, { rows, summary, info, sessions })
      log(`wrote ${path.relative(process.cwd(), REPORT)}`)
    }
  }
  for (const r of compared.filter((x) => x.differs.length)) console.log(`differs: ${r.cell.key} (${r.differs.join(', ')})`)
  const fields = FIELDS.filter((f) => summary.byField[f]).map((f) => `${f} ${summary.byField[f]}`)
  console.log(`${summary.identical} of ${summary.compared} cells identical${fields.length ? ` (differ in: ${fields.join(', ')})` : ''}`)
  if (summary.compared < summary.total) console.log(`${summary.total - summary.compared} cells could not be compared (see the session errors above)`)
  return sessionErrors.length ? 1 : 0
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`compat: ${e.stack || e.message}`)
    process.exit(2)
  },
)
