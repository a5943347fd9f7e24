'use strict'
// A new session's first cell `import pandas as pd; pd.DataFrame({'a': [1, 2]})`, end to
// end (pool.execute -> result), with the bench venv's python, in three pool set-ups:
//
// - `preload`: `KernelPool({ prewarm: 1, preload: ['numpy', 'pandas'] })`, the spare ready
//   (its imports done: `pool.spares.length === 1`) before each call;
// - `plain`: `KernelPool({ prewarm: 1 })`, a ready spare that imports nothing ahead;
// - `cold`: `KernelPool({ prewarm: 0 })`, the kernel starts for the session.
//
// Each sample is a fresh session id (so it claims a fresh spare) and its session is
// disposed after. Rounds interleave the variants and the floor: a whole `python -c` that
// imports pandas and makes the frame, which also prints the import's own time (the bare
// import in a running interpreter). Before each timed call the pools' spares are ready
// (a refill imports pandas, which would load the machine) and the machine idles for
// `cfg.shortSettleMs`. Round 0 is discarded (page cache, bytecode).
const path = require('node:path')
const { spawnTracked, withTimeout } = require('./proc')
const { msSince, now, sleep } = require('./stats')

const ROOT = path.resolve(__dirname, '..', '..')
const CELL = "import pandas as pd; pd.DataFrame({'a': [1, 2]})"
const PRELOAD = ['numpy', 'pandas']
// The floor: the same statement in `python -c`, timing the import and the frame inside.
const FLOOR_CODE = `import time; _t = time.perf_counter(); ${CELL}; print((time.perf_counter() - _t) * 1000)`

function check(cond, what) {
  if (!cond) throw new Error(what)
}

/** Resolves once the pool has `n` ready spares (none of `not`), or throws after `ms`. */
async function spares(pool, n, not = [], ms = 120_000) {
  const t0 = Date.now()
  for (;;) {
    const s = pool.spares
    if (s.length >= n && !s.some((p) => not.includes(p))) return s
    if (Date.now() - t0 > ms) throw new Error(`no ready spare within ${ms} ms (spares ${JSON.stringify(s)})`)
    await sleep(10)
  }
}

/** Spawn -> exit of the floor process; returns [whole ms, the import's ms inside]. */
async function floorSample(python) {
  const t0 = now()
  const child = spawnTracked(python, ['-c', FLOOR_CODE], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.setEncoding('utf8')
  child.stderr.setEncoding('utf8')
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (err += d))
  const status = await withTimeout(
    new Promise((resolve, reject) => {
      child.on('error', reject)
      child.on('close', (code) => resolve(code))
    }),
    60_000,
    'python -c import pandas',
  )
  const ms = msSince(t0)
  check(status === 0, `python -c import pandas exited ${status}: ${err.trim().split('\n').pop()}`)
  const inside = Number(out.trim())
  check(Number.isFinite(inside), `python -c import pandas printed ${JSON.stringify(out)}`)
  return [ms, inside]
}

async function measurePandas(python, cfg, log) {
  const { KernelPool } = require(ROOT)
  const r = { cell: CELL, preload: PRELOAD }
  const kernel = { interpreter: python, cwd: ROOT }
  const common = { kernel, maxSessions: 4, heartbeatIntervalMs: 0 }
  const pools = {
    preload: new KernelPool({ ...common, prewarm: 1, preload: PRELOAD }),
    plain: new KernelPool({ ...common, prewarm: 1 }),
    cold: new KernelPool({ ...common, prewarm: 0 }),
  }
  const keys = { preload: 'pandasPreloadMs', plain: 'pandasPlainMs', cold: 'pandasColdMs' }
  const samples = { preload: [], plain: [], cold: [] }
  const failed = {}
  const proc = []
  const inside = []
  // Both pools with spares have them ready (the preload one's imports done).
  const settled = async () => {
    await spares(pools.preload, 1)
    await spares(pools.plain, 1)
    await sleep(cfg.shortSettleMs)
  }
  try {
    for (let i = 0; i <= cfg.pandasRuns; i++) {
      for (const v of ['preload', 'plain', 'cold']) {
        if (failed[v]) continue
        try {
          await settled()
          const pool = pools[v]
          const before = pool.spares
          const sessionId = `pandas-${v}-${i}`
          const t0 = now()
          const res = await pool.execute({ sessionId, cells: [{ code: CELL }], timeoutSeconds: 120 })
          const ms = msSince(t0)
          check(res.exitCode === 0 && /a\s*\n0\s+1\s*\n1\s+2/.test(res.output), `${v}: the cell gave ${JSON.stringify(res.output.slice(0, 300))}`)
          const pid = (pool.sessions.find((s) => s.key === sessionId) || pool.sessions[0] || {}).pid
          // A sample counts only if the session got what the variant says: the ready
          // spare, or (cold) a kernel of its own.
          if (v === 'cold') check(before.length === 0, `cold: the pool had spares ${JSON.stringify(before)}`)
          else check(pid !== undefined && before.includes(pid), `${v}: the session's kernel ${pid} was not the ready spare ${JSON.stringify(before)}`)
          if (i > 0) samples[v].push(ms)
          await pool.disposeOwner(sessionId)
        } catch (e) {
          failed[v] = e.message
          log(`pandas ${v} failed: ${e.message}`)
        }
      }
      if (!failed.floor) {
        try {
          await settled()
          const [ms, imp] = await floorSample(python)
          if (i > 0) {
            proc.push(ms)
            inside.push(imp)
          }
        } catch (e) {
          failed.floor = e.message
          log(`pandas floor failed: ${e.message}`)
        }
      }
    }
  } finally {
    await Promise.all(Object.values(pools).map((p) => p.disposeAll({ budgetMs: 3000 }).catch(() => {})))
  }
  for (const v of Object.keys(keys)) r[keys[v]] = failed[v] ? { error: failed[v] } : samples[v]
  r.pandasProcessMs = failed.floor ? { error: failed.floor } : proc
  r.pandasImportMs = failed.floor ? { error: failed.floor } : inside
  return r
}

module.exports = { measurePandas, CELL, PRELOAD }
