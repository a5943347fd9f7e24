#!/usr/bin/env node
'use strict'
// pykernel's benchmark: pykernel (the addon, from Node), Jupyter (ipykernel +
// jupyter_client, timed in Python) and the floors (bare interpreter, bare pipe, an NDJSON
// echo server), side by side in one run. See bench/README.md.
//
//   node bench/run.js [--quick|--full] [--no-jupyter] [--out NAME]
//
// --quick (default) is for CI: few iterations, 2 MB streams, 1000 frames.
// --full: the full sizes (20 MB, 200k lines, 10,000 frames).
// Writes bench/results/<NAME>.json and .md (NAME: latest for --full, latest-quick for
// --quick) and prints the markdown table. Timings are reported, never asserted.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const { setup, BENCH } = require('./lib/setup')
const { snapshotAddon } = require('./lib/addon')
const { killAll } = require('./lib/proc')
const { measureFloors } = require('./lib/floors')
const { measurePykernel } = require('./lib/pykernel')
const { measureJupyter } = require('./lib/jupyter')
const { measureLaunchers } = require('./lib/launchers')
const { measurePandas, CELL: PANDAS_CELL } = require('./lib/pandas')
const { buildRows, targets, markdown } = require('./lib/report')

// A 1x1 PNG, base64: the display-frame payload.
const TINY_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='

const MODES = {
  quick: {
    passRuns: 5,
    coldRuns: 3,
    warmup: 20,
    warmRuns: 200,
    streamBytes: 2_000_000,
    streamRuns: 1,
    frames: 1000,
    framesRuns: 1,
    interruptRuns: 3,
    fourRuns: 1,
    pandasRuns: 5,
    idleSessions: 8,
    idleMs: 1000,
    settleMs: 300,
    shortSettleMs: 300,
    jupyterTimeoutMs: 90_000,
  },
  full: {
    passRuns: 20,
    coldRuns: 10,
    warmup: 100,
    warmRuns: 1000,
    streamBytes: 20_000_000,
    streamRuns: 3,
    frames: 10_000,
    framesRuns: 3,
    interruptRuns: 20,
    fourRuns: 3,
    pandasRuns: 10,
    idleSessions: 8,
    idleMs: 1000,
    settleMs: 1000,
    shortSettleMs: 300,
    jupyterTimeoutMs: 900_000,
  },
}

function parseArgs(argv) {
  const a = { mode: 'quick', jupyter: true, out: null }
  for (let i = 0; i < argv.length; i++) {
    const x = argv[i]
    if (x === '--quick') a.mode = 'quick'
    else if (x === '--full') a.mode = 'full'
    else if (x === '--no-jupyter') a.jupyter = false
    else if (x === '--out') a.out = argv[++i]
    else if (x === '-h' || x === '--help') {
      process.stdout.write('usage: node bench/run.js [--quick|--full] [--no-jupyter] [--out NAME]\n')
      process.exit(0)
    } else {
      process.stderr.write(`unknown argument ${x}\n`)
      process.exit(2)
    }
  }
  a.out = a.out || (a.mode === 'full' ? 'latest' : 'latest-quick')
  return a
}

function log(msg) {
  process.stderr.write(`[bench] ${msg}\n`)
}

function machine(python) {
  let cpuModel = 'unknown'
  try {
    const m = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.+)$/m)
    if (m) cpuModel = m[1].trim()
  } catch {}
  let pyVersion = 'unknown'
  try {
    pyVersion = execFileSync(python, ['-c', 'import sys; print(sys.version.split()[0])'], { encoding: 'utf8' }).trim()
  } catch {}
  return {
    nproc: typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length,
    cpuModel,
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    python: pyVersion,
    loadAvgAtStart: null,
    loadAvgAtEnd: os.loadavg().map((x) => Math.round(x * 100) / 100),
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const cfg = { ...MODES[args.mode], png: TINY_PNG }
  const t0 = Date.now()
  const loadAtStart = os.loadavg().map((x) => Math.round(x * 100) / 100)
  const addon = snapshotAddon()
  if (addon.debugInfo) log(`WARNING: ${addon.path} is a debug build; build with --release for real numbers`)
  if (addon.note) log(`addon: ${addon.note}`)

  log(`mode ${args.mode}; setting up the bench venv`)
  const env = setup({ skipJupyter: !args.jupyter })
  if (!env.python) {
    log(`cannot run: ${env.error}`)
    process.exitCode = 1
    return
  }
  if (env.error) log(`Jupyter rows will be n/a: ${env.error}`)
  if (env.pandasError) log(`pandas rows will be n/a: ${env.pandasError}`)
  const python = env.python
  cfg.basePython = env.base
  log(`interpreter ${python}`)

  log('floors')
  const floor = await measureFloors(python, cfg, log)
  log('pykernel')
  let pykernel
  try {
    pykernel = await measurePykernel(python, cfg, log, addon)
  } catch (e) {
    pykernel = { __error: e.message, addon }
    log(`pykernel failed: ${e.message}`)
  }
  log('launchers (bwrap, ssh to 127.0.0.1)')
  let launchers
  const tLaunchers = Date.now()
  try {
    launchers = await measureLaunchers(python, cfg, log)
  } catch (e) {
    launchers = { __error: e.message.replace(/\s+/g, ' ') }
    log(`launchers failed: ${e.message}`)
  }
  log(`launchers took ${((Date.now() - tLaunchers) / 1000).toFixed(1)} s`)
  let pandas
  if (env.pandas) {
    log(`a new session's first pandas cell (pandas ${env.pandas.pandas}, numpy ${env.pandas.numpy})`)
    const tPandas = Date.now()
    try {
      pandas = await measurePandas(python, cfg, log)
    } catch (e) {
      pandas = { __error: e.message.replace(/\s+/g, ' ') }
      log(`pandas rows failed: ${e.message}`)
    }
    log(`pandas rows took ${((Date.now() - tPandas) / 1000).toFixed(1)} s`)
  } else {
    pandas = { __error: env.pandasError }
  }
  const runner = pykernel.runner || { __error: pykernel.__error || 'not run' }
  let jupyter = null
  let jupyterRaw = null
  if (env.jupyter) {
    log('jupyter')
    try {
      const jcfg = { ...cfg }
      delete jcfg.basePython
      if (env.pandas) jcfg.pandasCell = PANDAS_CELL
      else jcfg.pandasError = env.pandasError
      jupyterRaw = await measureJupyter(python, jcfg, log, cfg.jupyterTimeoutMs)
      jupyter = jupyterRaw.metrics
      if (jupyterRaw.idleMemoryS !== undefined) log(`jupyter: its idle memory part took ${jupyterRaw.idleMemoryS} s`)
    } catch (e) {
      jupyter = { __error: e.message.replace(/\s+/g, ' ') }
      log(`jupyter failed: ${e.message}`)
    }
  } else {
    jupyter = { __error: env.error }
  }

  // The warm floor is the echo run interleaved with pykernel's round trips (same window).
  if (pykernel.echoInterleaved) {
    floor.warmRoundTripMsFloorPhase = floor.warmRoundTripMs
    Object.assign(floor, pykernel.echoInterleaved)
  }
  if (pykernel.echoAfterIdleMs) floor.newSessionFirstCellMs = pykernel.echoAfterIdleMs
  if (pykernel.echoAfterShortIdleMs) floor.newSessionFirstCellShortIdleMs = pykernel.echoAfterShortIdleMs
  const rows = buildRows({ pykernel, jupyter, floor, runner, launchers, pandas }, cfg)
  let pythonReal = python
  try {
    pythonReal = fs.realpathSync(python)
  } catch {}
  const out = {
    date: new Date().toISOString(),
    mode: args.mode,
    elapsedS: null,
    machine: { ...machine(python), loadAvgAtStart: loadAtStart },
    interpreters: {
      python,
      pythonReal,
      base: env.base,
      pykernelReported: pykernel.interpreterReported || null,
      jupyterKernel: jupyterRaw ? `${jupyterRaw.executable} ${(jupyterRaw.kernelArgv || []).slice(1).join(' ')}`.trim() : null,
    },
    jupyterVersions: env.jupyter,
    pandasVersions: env.pandas,
    jupyterError: jupyter && jupyter.__error ? jupyter.__error : null,
    config: cfg,
    rows,
    targets: targets(rows, cfg),
    raw: { pykernel, jupyter: jupyterRaw || jupyter, floor, launchers, pandas },
  }
  out.elapsedS = Math.round((Date.now() - t0) / 100) / 10
  const md = markdown(out) + `\nRun took ${out.elapsedS} s (\`node bench/run.js --${args.mode}\`).\n`
  const dir = path.join(BENCH, 'results')
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, `${args.out}.json`), JSON.stringify(out, null, 2) + '\n')
  fs.writeFileSync(path.join(dir, `${args.out}.md`), md)
  process.stdout.write(md)
  log(`wrote bench/results/${args.out}.json and .md`)
}

process.on('exit', killAll)
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    killAll()
    process.exit(130)
  })
}

main()
  .catch((e) => {
    log(`failed: ${e.stack || e}`)
    process.exitCode = 1
  })
  .finally(() => {
    killAll()
    // Kernels and pools may hold the loop open; everything is measured and written.
    setTimeout(() => process.exit(), 200).unref()
  })
