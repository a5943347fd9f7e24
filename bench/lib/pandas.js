'use strict'
// A new session's first cell `import pandas as pd; pd.DataFrame({'a': [1, 2]})`, end to
// end (pool.execute -> result), with the bench venv's python, in three pool set-ups:
//
// - `preload`: `KernelPool({ prewarm: 1, preload: ['numpy', 'pandas'] })`, the spare ready
//   (forked from the zygote, which imported them: `pool.spares.length === 1`) before each
//   call;
// - `zygote`: `KernelPool({ prewarm: 0, preload })`: no spare, the session's kernel is
//   forked from the zygote when the call comes;
// - `spawned`: as `preload` with `kernel.zygote: false`: the spare is spawned and imports
//   the list itself once ready (the part-one build, before the zygote);
// - `plain`: `KernelPool({ prewarm: 1 })`, a ready spare that imports nothing ahead;
// - `cold`: `KernelPool({ prewarm: 0 })`, the kernel starts for the session.
//
// Each sample is a fresh session id (so it claims a fresh spare) and its session is
// disposed after. Rounds interleave the variants and the floor: a whole `python -c` that
// imports pandas and makes the frame, which also prints the import's own time (the bare
// import in a running interpreter). Before each timed call the pools' spares are ready
// (a refill imports pandas, which would load the machine) and the machine idles for
// `cfg.shortSettleMs`. Round 0 is discarded (page cache, bytecode).
//
// Then the memory of idle sessions (the target's "8 idle sessions with and without the
// zygote"): see `idleMemory`.
const fs = require('node:fs')
const path = require('node:path')
const { spawnTracked, withTimeout, statusKiB, LineReader } = require('./proc')
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
    zygote: new KernelPool({ ...common, prewarm: 0, preload: PRELOAD }),
    spawned: new KernelPool({ ...common, kernel: { ...kernel, zygote: false }, prewarm: 1, preload: PRELOAD }),
    plain: new KernelPool({ ...common, prewarm: 1 }),
    cold: new KernelPool({ ...common, prewarm: 0 }),
  }
  const keys = { preload: 'pandasPreloadMs', zygote: 'pandasZygoteMs', spawned: 'pandasSpawnedPreloadMs', plain: 'pandasPlainMs', cold: 'pandasColdMs' }
  const samples = Object.fromEntries(Object.keys(keys).map((k) => [k, []]))
  const spareVariants = ['preload', 'spawned', 'plain']
  const failed = {}
  const proc = []
  const inside = []
  // Both pools with spares have them ready (the preload one's imports done).
  const settled = async () => {
    for (const v of spareVariants) await spares(pools[v], 1)
    await sleep(cfg.shortSettleMs)
  }
  try {
    for (let i = 0; i <= cfg.pandasRuns; i++) {
      for (const v of Object.keys(keys)) {
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
          if (!spareVariants.includes(v)) check(before.length === 0, `${v}: the pool had spares ${JSON.stringify(before)}`)
          else check(pid !== undefined && before.includes(pid), `${v}: the session's kernel ${pid} was not the ready spare ${JSON.stringify(before)}`)
          // ... and was made the way the variant says: forked by the zygote or spawned.
          const forked = parentOf(pid) !== process.pid
          check(forked === (v === 'preload' || v === 'zygote'), `${v}: the session's kernel was ${forked ? 'forked' : 'spawned'}`)
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
  // The timing pools are gone (disposeAll above): the memory rows see only their own.
  const t0 = Date.now()
  for (const zygote of [false, true]) {
    try {
      Object.assign(r, await idleMemory(python, cfg, log, { zygote }))
    } catch (e) {
      for (const k of IDLE_KEYS) {
        if (zygote && !k.startsWith('idle')) continue     // the bare floor is measured once, without
        r[zygote ? zygoteKey(k) : k] = { error: e.message.replace(/\s+/g, ' ') }
      }
      log(`pandas idle memory (zygote ${zygote}) failed: ${e.message}`)
    }
  }
  // The zygote's total against what one session takes without it (its own sessions'
  // RSS counts the pages they share with the zygote, which makes their ratio look better).
  if (typeof r.idleZygoteTotalPssKiB === 'number' && Array.isArray(r.idleSessionRssKiB)) {
    r.idleZygoteTotalPssVsSpawnedRatio = r.idleZygoteTotalPssKiB / median(r.idleSessionRssKiB)
  }
  log(`pandas idle memory took ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  return r
}

// Idle memory after the cell ------------------------------------------------------------

/** The key of a zygote run's figure: idleTotalPssKiB -> idleZygoteTotalPssKiB. */
const zygoteKey = (k) => k.replace(/^idle/, 'idleZygote')

const IDLE_KEYS = ['idleSessionRssKiB', 'idleKernelRssKiB', 'idleSessionPssKiB', 'idleKernelPssKiB', 'idleTotalRssKiB', 'idleTotalPssKiB', 'idleTotalRssRatio', 'idleTotalPssRatio', 'bareIdleRssKiB', 'bareIdlePssKiB']

/** Pss of a process in KiB (smaps_rollup: each shared page split between the processes
 *  that map it, so a sum over processes is their real total), or null. */
function pssKiB(pid) {
  try {
    const m = fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').match(/^Pss:\s+(\d+)/m)
    return m ? Number(m[1]) : null
  } catch {
    return null
  }
}

function parentOf(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}

function childPids(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}

/** RSS and PSS of a session's processes: `pid` is the init of the sandbox's PID
 *  namespace, the Python kernel its (only) child; without a sandbox `pid` is the kernel. */
function sessionMemory(pid) {
  const kids = childPids(pid)
  check(kids.length <= 1, `kernel ${pid} has ${kids.length} children ${JSON.stringify(kids)}, expected the Python kernel alone`)
  const kernel = kids.length ? kids[0] : pid
  const init = kids.length ? pid : null
  const read = (p, f) => {
    const v = f(p)
    check(v !== null, `cannot read the memory of process ${p}`)
    return v
  }
  const out = { pid, kernel, kernelRss: read(kernel, statusKiB), kernelPss: read(kernel, pssKiB), initRss: 0, initPss: 0 }
  if (init !== null) {
    out.initRss = read(init, statusKiB)
    out.initPss = read(init, pssKiB)
  }
  return out
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0)
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const n = s.length
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2
}

/** The floor: one bare interpreter that ran the same cell, idle `ms`, alone on the machine
 *  (no kernel of the bench is running): its RSS and PSS. */
async function bareIdle(python, ms) {
  const code = `import sys; ${CELL}; sys.stdout.write('R\\n'); sys.stdout.flush(); sys.stdin.readline()`
  const child = spawnTracked(python, ['-c', code])
  try {
    const reader = new LineReader(child.stdout)
    check((await withTimeout(reader.next(), 60_000, 'python -c import pandas (idle)')) === 'R', 'the idle floor did not start')
    await sleep(ms)
    const rss = statusKiB(child.pid)
    const pss = pssKiB(child.pid)
    check(rss !== null && pss !== null, 'cannot read the idle floor')
    return { rss, pss }
  } finally {
    child.stdin.end()
    child.kill('SIGKILL')
  }
}

/**
 * `cfg.idleSessions` sessions (8) of one pool, `KernelPool({ prewarm: 1, preload:
 * ['numpy', 'pandas'], maxSessions: idleSessions + 1, kernel: { zygote } })`, each has run
 * CELL; each claimed a ready spare (checked, as above). Without the zygote each kernel was
 * spawned and imported pandas itself; with it each was forked from the zygote, and the
 * zygote's own PSS (it stays, holding the pages the sessions share) is added to the total
 * (keys `idleZygote...`, and `idleZygoteProcessPssKiB` for the zygote alone).
 * After the last, the pool's refill spare is ready (its import done) and the machine idles
 * `cfg.idleMs`; then RSS (VmRSS) and PSS (smaps_rollup) of every session's kernel and of
 * its sandbox init. A session counts both (its kernel + its init); the kernel alone is
 * kept too. The refill spare is not a session and is not counted (its PSS is in the JSON;
 * it shares pandas' file pages with the sessions, as the sessions share them with each
 * other). Ratios: total RSS / one session's RSS (RSS counts a shared page in full in every
 * process, so this sum is n x one session whatever is shared), and total PSS / one
 * session's RSS (the real total against what one session alone takes: the zygote's
 * target, at most 2x). "One session" is the median over the n.
 */
async function idleMemory(python, cfg, log, { zygote }) {
  const { KernelPool } = require(ROOT)
  const n = cfg.idleSessions
  const out = {}
  if (!zygote) {
    const bare = await bareIdle(python, cfg.idleMs)
    out.bareIdleRssKiB = bare.rss
    out.bareIdlePssKiB = bare.pss
  }
  const pool = new KernelPool({ kernel: { interpreter: python, cwd: ROOT, zygote }, maxSessions: n + 1, prewarm: 1, preload: PRELOAD, heartbeatIntervalMs: 0 })
  try {
    const ids = []
    for (let i = 0; i < n; i++) {
      const before = await spares(pool, 1)
      const sessionId = `pandas-idle-${i}`
      const res = await pool.execute({ sessionId, cells: [{ code: CELL }], timeoutSeconds: 120 })
      check(res.exitCode === 0 && /a\s*\n0\s+1\s*\n1\s+2/.test(res.output), `idle ${i}: the cell gave ${JSON.stringify(res.output.slice(0, 300))}`)
      const s = pool.sessions.find((x) => x.owners.includes(sessionId))
      check(s && before.includes(s.pid), `idle ${i}: the session's kernel ${s && s.pid} was not the ready spare ${JSON.stringify(before)}`)
      ids.push(sessionId)
    }
    const sessionPids = ids.map((id) => pool.sessions.find((x) => x.owners.includes(id)).pid)
    const spare = await spares(pool, 1, sessionPids)
    await sleep(cfg.idleMs)
    check(pool.sessions.length === n, `the pool has ${pool.sessions.length} sessions, expected ${n}`)
    const mem = sessionPids.map(sessionMemory)
    const parents = [...new Set(sessionPids.map(parentOf))]
    check(zygote ? parents.length === 1 && parents[0] !== process.pid : parents.length === 1 && parents[0] === process.pid,
      `the sessions' kernels were not ${zygote ? 'forked by one zygote' : 'spawned'} (parents ${JSON.stringify(parents)})`)
    const zygotePss = zygote ? pssKiB(parents[0]) : 0
    check(zygotePss !== null, 'cannot read the zygote\'s memory')
    const sparesNow = pool.spares
    const spareMem = sparesNow.length ? sessionMemory(sparesNow[0]) : null
    check(JSON.stringify(sparesNow) === JSON.stringify(spare), `the spare changed during the idle time: ${JSON.stringify(spare)} -> ${JSON.stringify(sparesNow)}`)
    out.idleSessionRssKiB = mem.map((m) => m.kernelRss + m.initRss)
    out.idleKernelRssKiB = mem.map((m) => m.kernelRss)
    out.idleInitRssKiB = mem.map((m) => m.initRss)
    out.idleSessionPssKiB = mem.map((m) => m.kernelPss + m.initPss)
    out.idleKernelPssKiB = mem.map((m) => m.kernelPss)
    out.idleInitPssKiB = mem.map((m) => m.initPss)
    out.idleTotalRssKiB = sum(out.idleSessionRssKiB)
    out.idleTotalPssKiB = sum(out.idleSessionPssKiB) + zygotePss
    const one = median(out.idleSessionRssKiB)
    out.idleTotalRssRatio = out.idleTotalRssKiB / one
    out.idleTotalPssRatio = out.idleTotalPssKiB / one
    out.idleSpare = spareMem
    out.idleProcesses = mem
    out.idleSessions = n
    out.idleMs = cfg.idleMs
    if (zygote) out.idleProcessPssKiB = zygotePss
  } finally {
    await pool.disposeAll({ budgetMs: 3000 }).catch(() => {})
  }
  if (!zygote) return out
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k.startsWith('idle') ? zygoteKey(k) : k, v]))
}

module.exports = { measurePandas, idleMemory, CELL, PRELOAD }
