'use strict'
// Results -> summary rows, the targets, and the markdown table.
const { summarize } = require('./stats')

// The launcher rows' reference: a local kernel, same interpreter, `sandbox: 'off'`, timed
// interleaved with the launched ones (lib/launchers.js).
const LOCAL_START = { sides: ['pykernel', 'floor'], floorFrom: 'launchers', floor: 'startLocalMs', floorWhat: "local Kernel.start, `sandbox: 'off'`, interleaved" }
const LOCAL_WARM = { sides: ['pykernel', 'floor'], floorFrom: 'launchers', floor: 'warmLocalMs', floorWhat: "local kernel, `sandbox: 'off'`, interleaved" }

// A new session's first pandas cell (lib/pandas.js): the floor columns read the `python -c`
// samples taken in the same rounds.
const PANDAS_IMPORT_FLOOR = { floorFrom: 'pandas', floor: 'pandasImportMs', floorWhat: 'the same import and frame in a running bare interpreter (timed inside `python -c`)' }

// Idle sessions' memory after that cell (lib/pandas.js idleMemory): the floor is one bare
// interpreter that ran the same cell, idle as long, measured alone.
const IDLE_RSS_FLOOR = { floorFrom: 'pandas', floor: 'bareIdleRssKiB', floorWhat: 'one bare interpreter after the same cell (`python -c`, idle as long)' }
const IDLE_PSS_FLOOR = { floorFrom: 'pandas', floor: 'bareIdlePssKiB', floorWhat: 'one bare interpreter after the same cell (`python -c`, idle as long), alone' }

// key, label, unit, scale (raw -> shown), which sides have it, floor key and its label
// (floorFrom: the results the floor column reads, default the floors; jupyterKey: the
// Jupyter metric, default key).
const METRICS = [
  { key: 'coldStartMs', label: 'cold start: spawn -> `1+1` result', unit: 'ms', floor: 'coldStartMs', floorWhat: 'echo server spawn -> first answer' },
  { key: 'coldStartOffMs', label: "… the same with `sandbox: 'off'` (interleaved)", unit: 'ms', sides: ['pykernel'] },
  { key: 'startToReadyMs', label: '… of which Kernel.start (spawn -> ready)', unit: 'ms', sides: ['pykernel'] },
  { key: 'coldStartMs', from: 'runner', label: '… runner.py alone, plain Node pipes (no addon)', unit: 'ms', sides: ['pykernel', 'floor'], hideFloor: true, floor: 'coldStartMs' },
  // Through a launcher (lib/launchers.js): the floor column holds the local kernel measured
  // in the same window (same interpreter, `sandbox: 'off'`), so the ratio is launcher/local.
  { key: 'startEnvMs', from: 'launchers', label: '… Kernel.start through a no-op launcher (`env`: bootstrap, runner shipped, far-side relay)', unit: 'ms', ...LOCAL_START },
  { key: 'startBwrapMs', from: 'launchers', label: '… Kernel.start through `bwrap`', unit: 'ms', ...LOCAL_START },
  { key: 'startSshMs', from: 'launchers', label: '… Kernel.start through `ssh` to 127.0.0.1, ControlMaster on', unit: 'ms', ...LOCAL_START },
  { key: 'startSshNoCmMs', from: 'launchers', label: '… Kernel.start through `ssh` to 127.0.0.1, no ControlMaster (new TCP + key auth each start)', unit: 'ms', ...LOCAL_START },
  { key: 'newSessionFirstCellMs', label: "new session's first `1+1` (KernelPool, prewarmed, after {idle} s idle)", unit: 'ms', sides: ['pykernel', 'floor'], floor: 'newSessionFirstCellMs', floorWhat: 'one echo round trip after the same idle time' },
  { key: 'newSessionFirstCellShortIdleMs', label: '… after {shortIdle} s idle instead of {idle} s', unit: 'ms', sides: ['pykernel', 'floor'], when: (cfg) => cfg.shortSettleMs < cfg.settleMs, floor: 'newSessionFirstCellShortIdleMs', floorWhat: 'one echo round trip after the same idle time' },
  { key: 'pandasPreloadMs', from: 'pandas', label: "new session's first cell `import pandas as pd; pd.DataFrame({'a': [1, 2]})` (KernelPool, `preload: ['numpy', 'pandas']`, ready spare forked from the zygote)", unit: 'ms', jupyterKey: 'pandasFirstCellMs', ...PANDAS_IMPORT_FLOOR },
  { key: 'pandasZygoteMs', from: 'pandas', label: "… the same, no spare (`prewarm: 0`): the session's kernel forked from the zygote when the call comes", unit: 'ms', jupyterKey: 'pandasStartAndCellMs', ...PANDAS_IMPORT_FLOOR },
  { key: 'pandasSpawnedPreloadMs', from: 'pandas', label: '… the same, ready spare spawned with `zygote: false` (it imported the list itself)', unit: 'ms', jupyterKey: 'pandasFirstCellMs', ...PANDAS_IMPORT_FLOOR },
  { key: 'pandasPlainMs', from: 'pandas', label: '… the same, prewarmed spare without preload', unit: 'ms', jupyterKey: 'pandasFirstCellMs', ...PANDAS_IMPORT_FLOOR },
  { key: 'pandasColdMs', from: 'pandas', label: '… the same, cold (`prewarm: 0`: the kernel starts for the session)', unit: 'ms', jupyterKey: 'pandasStartAndCellMs', floorFrom: 'pandas', floor: 'pandasProcessMs', floorWhat: 'the whole `python -c` process, spawn -> exit' },
  { key: 'idleSessionRssKiB', from: 'pandas', label: 'one idle session after that cell (spawned spare that preloaded, `zygote: false`, {idleS} s idle): RSS, Python kernel + its sandbox init (median of {idleN})', unit: 'MiB', scale: 1 / 1024, ...IDLE_RSS_FLOOR },
  { key: 'idleKernelRssKiB', from: 'pandas', label: '… RSS, the Python kernel alone', unit: 'MiB', scale: 1 / 1024, sides: ['pykernel', 'floor'], ...IDLE_RSS_FLOOR },
  { key: 'idleSessionPssKiB', from: 'pandas', label: '… PSS among the {idleN} (shared pages split between the processes that map them), Python kernel + init', unit: 'MiB', scale: 1 / 1024, ...IDLE_PSS_FLOOR },
  { key: 'idleKernelPssKiB', from: 'pandas', label: '… PSS among the {idleN}, the Python kernel alone', unit: 'MiB', scale: 1 / 1024, sides: ['pykernel', 'floor'], ...IDLE_PSS_FLOOR },
  { key: 'idleTotalRssKiB', from: 'pandas', label: '{idleN} idle sessions, total RSS (sum over their processes)', unit: 'MiB', scale: 1 / 1024, ...IDLE_RSS_FLOOR },
  { key: 'idleTotalPssKiB', from: 'pandas', label: '{idleN} idle sessions, total PSS (their real total)', unit: 'MiB', scale: 1 / 1024, ...IDLE_PSS_FLOOR },
  { key: 'idleTotalRssRatio', from: 'pandas', label: '… total RSS / one session\'s RSS (RSS counts a shared page in every process: {idleN}x whatever is shared)', unit: 'x', sides: ['pykernel', 'jupyter'] },
  { key: 'idleTotalPssRatio', from: 'pandas', label: '… total PSS / one session\'s RSS', unit: 'x', sides: ['pykernel', 'jupyter'] },
  { key: 'idleZygoteSessionRssKiB', from: 'pandas', label: 'with the zygote (spares forked from it): one idle session\'s RSS, kernel + init (median of {idleN})', unit: 'MiB', scale: 1 / 1024, jupyterKey: 'idleSessionRssKiB', ...IDLE_RSS_FLOOR },
  { key: 'idleZygoteSessionPssKiB', from: 'pandas', label: '… PSS among the {idleN} and the zygote, kernel + init', unit: 'MiB', scale: 1 / 1024, jupyterKey: 'idleSessionPssKiB', ...IDLE_PSS_FLOOR },
  { key: 'idleZygoteProcessPssKiB', from: 'pandas', label: '… the zygote itself, PSS', unit: 'MiB', scale: 1 / 1024, sides: ['pykernel', 'floor'], ...IDLE_PSS_FLOOR },
  { key: 'idleZygoteTotalPssKiB', from: 'pandas', label: '{idleN} idle sessions with the zygote, total PSS (sessions + zygote)', unit: 'MiB', scale: 1 / 1024, jupyterKey: 'idleTotalPssKiB', ...IDLE_PSS_FLOOR },
  { key: 'idleZygoteTotalPssRatio', from: 'pandas', label: '… total PSS / one such session\'s RSS (which counts the pages it shares with the zygote)', unit: 'x', sides: ['pykernel', 'jupyter'], jupyterKey: 'idleTotalPssRatio' },
  { key: 'idleZygoteTotalPssVsSpawnedRatio', from: 'pandas', label: '… total PSS / one session\'s RSS without the zygote (target: <= 2x)', unit: 'x', sides: ['pykernel', 'jupyter'], jupyterKey: 'idleTotalPssRatio' },
  { key: 'warmRoundTripMs', label: 'warm `1+1` round trip', unit: 'ms', floor: 'warmRoundTripMs', floorWhat: 'echo round trip, interleaved with pykernel' },
  { key: 'warmRoundTripOffMs', label: "… with `sandbox: 'off'` (interleaved)", unit: 'ms', sides: ['pykernel'] },
  { key: 'warmRoundTripMs', from: 'runner', label: '… runner.py alone, plain Node pipes (no addon)', unit: 'ms', sides: ['pykernel', 'floor'], hideFloor: true, floor: 'warmRoundTripMs' },
  { key: 'warmOneCoreMs', label: '… host and kernel pinned to one core', unit: 'ms', sides: ['pykernel', 'floor'], floor: 'warmOneCoreMs', floorWhat: 'echo round trip, pinned the same way' },
  { key: 'warmTwoCoresMs', label: '… host pinned to one core, kernel to the other', unit: 'ms', sides: ['pykernel', 'floor'], floor: 'warmTwoCoresMs', floorWhat: 'echo round trip, pinned the same way' },
  { key: 'warmEnvMs', from: 'launchers', label: '… through a no-op launcher (`env`)', unit: 'ms', ...LOCAL_WARM },
  { key: 'warmBwrapMs', from: 'launchers', label: '… through `bwrap`', unit: 'ms', ...LOCAL_WARM },
  { key: 'warmSshMs', from: 'launchers', label: '… through `ssh` to 127.0.0.1, ControlMaster on', unit: 'ms', ...LOCAL_WARM },
  { key: 'hostCpuPerCellUs', label: 'host CPU per warm cell', unit: 'µs', floor: 'hostCpuPerCellUs', floorWhat: 'Node CPU per echo round trip, interleaved' },
  { key: 'hostCpuPerCellUs', from: 'runner', label: '… runner.py alone, plain Node pipes (no addon)', unit: 'µs', sides: ['pykernel', 'floor'], hideFloor: true, floor: 'hostCpuPerCellUs' },
  { key: 'linesMBps', label: '{MB} MB as {lines} print lines', unit: 'MB/s', higher: true, floor: 'linesMBps', floorWhat: 'bare pipe, `python -u` prints, Node reads' },
  { key: 'linesMBps', from: 'runner', label: '… runner.py alone, plain Node pipes (no addon)', unit: 'MB/s', higher: true, sides: ['pykernel', 'floor'], hideFloor: true, floor: 'linesMBps' },
  { key: 'linesHostCpuMs', label: '… host CPU for the {lines} lines', unit: 'ms', floorWhat: '' },
  { key: 'oneLineMBps', label: '{MB} MB as one line', unit: 'MB/s', higher: true, floor: 'oneLineMBps', floorWhat: 'bare pipe, one print' },
  { key: 'oneLineMBps', from: 'runner', label: '… runner.py alone, plain Node pipes (no addon)', unit: 'MB/s', higher: true, sides: ['pykernel', 'floor'], hideFloor: true, floor: 'oneLineMBps' },
  { key: 'framesPerS', label: '{frames} display frames (1x1 PNG, raw)', unit: 'frames/s', higher: true, floor: 'framesPerS', floorWhat: 'echo server writes NDJSON frames, Node parses' },
  { key: 'framesPerS', from: 'runner', label: '… runner.py alone, plain Node pipes (no addon)', unit: 'frames/s', higher: true, sides: ['pykernel', 'floor'], hideFloor: true, floor: 'framesPerS' },
  { key: 'interruptMs', label: 'interrupt -> cancelled result', unit: 'ms', floor: 'interruptMs', floorWhat: 'SIGINT to echo server in time.sleep -> answer' },
  { key: 'rssAfterStartKiB', label: 'kernel RSS after start', unit: 'MiB', scale: 1 / 1024, floor: 'bareRssKiB', floorWhat: 'idle bare interpreter' },
  { key: 'rssAfterStreamKiB', label: 'kernel RSS after the {lines}-line runs', unit: 'MiB', scale: 1 / 1024, floor: 'bareRssKiB', floorWhat: 'idle bare interpreter' },
  { key: 'fourSessionsMs', label: '4 sessions at once -> all first results', unit: 'ms', floor: 'fourSessionsMs', floorWhat: '4 echo servers at once' },
  { key: 'fourSessionsOffMs', label: "… with `sandbox: 'off'` (interleaved)", unit: 'ms', sides: ['pykernel'] },
  { key: 'pythonPassMs', label: '`python -c pass` (floor only)', unit: 'ms', sides: ['floor'], floor: 'pythonPassMs', floorWhat: 'bench venv python' },
  { key: 'basePythonPassMs', label: '`python -c pass`, base interpreter (floor only)', unit: 'ms', sides: ['floor'], floor: 'basePythonPassMs', floorWhat: 'site-packages .pth files run' },
  { key: 'pandasProcessMs', label: "`python -c \"import pandas as pd; pd.DataFrame({'a': [1, 2]})\"` (floor only)", unit: 'ms', sides: ['floor'], floorFrom: 'pandas', floor: 'pandasProcessMs', floorWhat: 'bench venv python, spawn -> exit' },
  { key: 'pandasImportMs', label: '… the import and the frame alone, timed inside that process (floor only)', unit: 'ms', sides: ['floor'], ...PANDAS_IMPORT_FLOOR },
  { key: 'linesBufferedMBps', label: '{lines} lines, bare pipe block-buffered (floor only)', unit: 'MB/s', higher: true, sides: ['floor'], floor: 'linesBufferedMBps', floorWhat: 'python without -u' },
]

function side(raw, key) {
  if (!raw) return { missing: 'not run' }
  if (raw.__error) return { missing: raw.__error, sideLevel: true }
  const v = raw[key]
  if (v === undefined || v === null) return { missing: raw.metrics_errors?.[key] || 'not measured' }
  if (v && typeof v === 'object' && !Array.isArray(v) && v.error) return { missing: v.error }
  const samples = Array.isArray(v) ? v : [v]
  return { summary: summarize(samples) }
}

function fmt(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return 'n/a'
  const a = Math.abs(x)
  if (a >= 100) return x.toFixed(0)
  if (a >= 10) return x.toFixed(1)
  if (a >= 1) return x.toFixed(2)
  return x.toFixed(3)
}

function buildRows(results, cfg) {
  const fill = (t) =>
    t.replace('{shortIdle}', String(cfg.shortSettleMs / 1000)).replace('{idle}', String(cfg.settleMs / 1000)).replace('{MB}', String(cfg.streamBytes / 1e6)).replace('{lines}', (cfg.streamBytes / 100).toLocaleString('en-US')).replace('{frames}', cfg.frames.toLocaleString('en-US')).replace('{idleS}', String(cfg.idleMs / 1000)).replace(/\{idleN\}/g, String(cfg.idleSessions))
  const rows = []
  for (const m of METRICS) {
    if (m.when && !m.when(cfg)) continue
    const scale = m.scale || 1
    const sides = m.sides || ['pykernel', 'jupyter', 'floor']
    const row = { key: m.from ? `${m.key}:${m.from}` : m.key, label: fill(m.label), unit: m.unit, higherIsBetter: !!m.higher, floorWhat: m.floorWhat || null, hideFloor: !!m.hideFloor }
    for (const s of ['pykernel', 'jupyter', 'floor']) {
      if (!sides.includes(s) || (s === 'floor' && !m.floor)) {
        row[s] = null
        continue
      }
      const src = s === 'pykernel' && m.from ? m.from : s === 'floor' && m.floorFrom ? m.floorFrom : s
      const got = side(results[src], s === 'floor' ? m.floor : s === 'jupyter' && m.jupyterKey ? m.jupyterKey : m.key)
      if (got.summary) {
        const sc = {}
        for (const [k, v] of Object.entries(got.summary)) sc[k] = k === 'n' ? v : v * scale
        row[s] = sc
      } else row[s] = got.sideLevel ? { na: got.missing, sideLevel: true } : { na: got.missing }
    }
    const med = (s) => (row[s] && row[s].median !== undefined ? row[s].median : null)
    row.ratioJupyter = med('pykernel') !== null && med('jupyter') ? med('pykernel') / med('jupyter') : null
    row.ratioFloor = med('pykernel') !== null && med('floor') ? med('pykernel') / med('floor') : null
    rows.push(row)
  }
  return rows
}

function targets(rows, cfg) {
  const r = Object.fromEntries(rows.map((x) => [x.key, x]))
  const med = (key, s) => (r[key] && r[key][s] && r[key][s].median !== undefined ? r[key][s].median : null)
  const t = []
  const add = (name, value, shown, ok) =>
    t.push({ target: name, measured: value === null ? 'n/a' : shown, holds: value === null ? null : ok })
  let v = r.coldStartMs.ratioFloor
  add('cold start <= 2x echo floor', v, `${fmt(v)}x`, v <= 2)
  v = med('coldStartMs', 'jupyter') && med('coldStartMs', 'pykernel') ? med('coldStartMs', 'jupyter') / med('coldStartMs', 'pykernel') : null
  add('cold start >= 15x faster than Jupyter', v, `${fmt(v)}x faster`, v >= 15)
  v = med('newSessionFirstCellMs', 'pykernel')
  const idle = med('newSessionFirstCellMs', 'floor')
  add(
    "new session's first cell (prewarmed) <= 5 ms",
    v,
    `${fmt(v)} ms` + (idle !== null ? ` (an echo round trip after the same idle: ${fmt(idle)} ms)` : ''),
    v <= 5,
  )
  v = r.warmRoundTripMs.ratioFloor
  add('warm round trip p50 <= 2x echo floor', v, `${fmt(v)}x`, v <= 2)
  v = med('warmRoundTripMs', 'jupyter') && med('warmRoundTripMs', 'pykernel') ? med('warmRoundTripMs', 'jupyter') / med('warmRoundTripMs', 'pykernel') : null
  add('warm round trip >= 30x faster than Jupyter', v, `${fmt(v)}x faster`, v >= 30)
  v = r.linesMBps.ratioFloor
  add('print lines >= 80% of the bare pipe', v, `${fmt(v * 100)}%`, v >= 0.8)
  v = r.linesMBps.ratioJupyter
  add('print lines >= 3x Jupyter', v, `${fmt(v)}x`, v >= 3)
  v = med('oneLineMBps', 'pykernel')
  add(`one ${cfg.streamBytes / 1e6} MB line >= 100 MB/s`, v, `${fmt(v)} MB/s`, v >= 100)
  v = med('interruptMs', 'pykernel')
  add('interrupt p50 <= 10 ms', v, `${fmt(v)} ms`, v <= 10)
  v = med('pandasPreloadMs:pandas', 'pykernel')
  const onDemand = med('pandasZygoteMs:pandas', 'pykernel')
  add("new session's first pandas cell <= 20 ms (zygote, ready spare)", v, `${fmt(v)} ms from a spare forked from the zygote (${fmt(onDemand)} ms with no spare, forked on demand)`, v <= 20)
  v = med('idleZygoteTotalPssVsSpawnedRatio:pandas', 'pykernel')
  const without = med('idleTotalPssRatio:pandas', 'pykernel')
  add(
    `${cfg.idleSessions} idle sessions' total <= 2x one session's RSS (zygote)`,
    v,
    `total PSS with the zygote ${fmt(v)}x one spawned session's RSS (${fmt(without)}x without the zygote)`,
    v <= 2,
  )
  const a = med('rssAfterStartKiB', 'pykernel')
  const b = med('rssAfterStartKiB', 'floor')
  v = a !== null && b !== null ? a - b : null
  add('kernel RSS after start <= bare interpreter + 5 MiB', v, `+${fmt(v)} MiB`, v <= 5)
  return t
}

function cell(x, unit) {
  if (x === null) return '—'
  if (x.sideLevel) return 'n/a'
  if (x.na) return `n/a (${x.na.replace(/\|/g, '/').slice(0, 120)})`
  let s = unit === 'x' ? `${fmt(x.median)}x` : `${fmt(x.median)} ${unit}`
  if (x.n > 1) s += ` (p90 ${fmt(x.p90)}, p99 ${fmt(x.p99)})`
  return s
}

const ratio = (x) => (x === null ? '—' : `${fmt(x)}x`)

function markdown(out) {
  const L = []
  const mc = out.machine
  L.push(`# pykernel benchmark (${out.mode})`)
  L.push('')
  L.push(`- date: ${out.date}`)
  L.push(`- machine: ${mc.nproc} CPUs, ${mc.cpuModel}, ${mc.memGiB} GiB; ${mc.os}; load average ${mc.loadAvgAtStart[0]} at start, ${mc.loadAvgAtEnd[0]} at end`)
  L.push(`- Node ${mc.node}; Python ${mc.python}`)
  const ad = out.raw.pykernel && out.raw.pykernel.addon
  if (ad && ad.note) L.push(`- addon: \`${ad.path}\` (${ad.note})`)
  if (ad && ad.bytes) L.push(`- addon: \`${ad.path}\` ${(ad.bytes / 2 ** 20).toFixed(1)} MiB, built ${ad.mtime}, sha256 ${ad.sha256}${ad.debugInfo ? ' — **DEBUG BUILD: numbers not representative**' : ' (release)'}`)
  L.push(`- interpreter for every row (pykernel, Jupyter, floors): \`${out.interpreters.python}\` (-> \`${out.interpreters.pythonReal}\`)`)
  if (out.interpreters.pykernelReported) L.push(`  - pykernel kernels report \`sys.executable\` = \`${out.interpreters.pykernelReported}\``)
  if (out.interpreters.jupyterKernel) L.push(`  - Jupyter kernels: \`${out.interpreters.jupyterKernel}\` (ipykernel ${out.jupyterVersions.ipykernel}, jupyter_client ${out.jupyterVersions.jupyter_client})`)
  else L.push(`  - Jupyter: n/a (${out.jupyterError})`)
  if (out.raw.pykernel && out.raw.pykernel.__error) L.push(`  - pykernel: n/a (${out.raw.pykernel.__error})`)
  L.push(`  - base interpreter (made the venv; its site-packages runs .pth files at start-up): \`${out.interpreters.base}\``)
  const la = out.raw.launchers
  if (la && la.__error) L.push(`- launcher rows: n/a (${la.__error})`)
  else if (la) {
    const rep = Object.entries(la.interpreterReported || {}).map(([k, v]) => `${k} \`${v}\``).join(', ')
    L.push(`- launcher rows (\`Kernel.start({ launcher })\`): the same interpreter, passed by absolute path, runs on the far side; the floor column is a local kernel (\`sandbox: 'off'\`, as a launched kernel has no local sandbox) timed interleaved with them, so pykernel/floor is launcher/local`)
    if (rep) L.push(`  - kernels report \`sys.executable\`: ${rep}`)
    const argv = (a) => (a ? `\`${a.join(' ')}\`` : 'n/a')
    L.push(`  - no-op: ${argv(la.launchers.Env)}; bwrap: ${argv(la.launchers.Bwrap)}`)
    L.push(`  - ssh: a throwaway sshd on 127.0.0.1 (key auth, \`UsePAM no\`), ${argv(la.launchers.Ssh)}; the discarded warm-up start finds the ControlMaster up and later starts share its connection. No ControlMaster: the same with \`-o ControlMaster=no -o ControlPath=none\` in place of the Control options`)
    const med = (x) => {
      const got = side(la, x)
      return got.summary ? `${fmt(got.summary.median)} ms` : `n/a (${got.missing})`
    }
    if (la.sshTrueMs) L.push(`  - \`ssh … true\` alone, interleaved with the starts (a session with no kernel: the connection or mux session, and the far login shell with its startup files): ${med('sshTrueMs')} with the ControlMaster, ${med('sshNoCmTrueMs')} without`)
  }
  const pv = out.pandasVersions
  const pd = out.raw.pandas
  if (pd && pd.__error) L.push(`- pandas rows: n/a (${pd.__error})`)
  else if (pd) {
    L.push(`- pandas rows (pandas ${pv.pandas}, numpy ${pv.numpy}, in the bench venv): a new session's first cell \`${pd.cell}\`, \`pool.execute\` -> result, each sample a fresh session id, its kernel disposed after; before each call the pools' spares are ready (\`pool.spares.length === 1\`; with \`preload\` that means imported) and the machine idles ${out.config.shortSettleMs / 1000} s. Rounds interleave the five pools (a spare forked from the zygote; no spare, forked on demand; a spawned spare that preloaded, \`zygote: false\`; a plain spare; cold) and the \`python -c\` floor; round 0 is discarded`)
    L.push(`  - Jupyter column: a fresh ipykernel started as in the cold-start row, then the same cell at once: kernel ready -> result in the preload and plain rows, \`start_kernel\` -> result (start + cell) in the cold row`)
    L.push(`  - idle memory, twice (\`kernel.zygote: false\`, then with the zygote, whose own PSS joins the total): one pool, \`KernelPool({ prewarm: 1, preload: ['numpy', 'pandas'], maxSessions: ${out.config.idleSessions + 1} })\`, ${out.config.idleSessions} sessions in turn, each claiming a ready spare and running the cell; once the refill spare is ready (not counted), ${out.config.idleMs / 1000} s idle, then \`VmRSS\` (\`/proc/<pid>/status\`) and \`Pss\` (\`/proc/<pid>/smaps_rollup\`) of each session's Python kernel and of its sandbox's init (\`session.pid\`, the PID namespace's init; the kernel is its child). "One session" is the median over the ${out.config.idleSessions}. Jupyter: ${out.config.idleSessions} ipykernels started at once, the cell in each, the same idle time, the kernel processes. Floor: \`python -c\` that ran the cell, idle as long, measured with no other kernel running`)
  }
  L.push(`- sizes: ${out.config.streamBytes / 1e6} MB streams (${out.config.streamBytes / 100} lines), ${out.config.frames} frames, ${out.config.warmRuns} warm cells, ${out.config.coldRuns} cold starts, ${out.config.interruptRuns} interrupts, ${out.config.fourRuns}x 4 sessions, ${out.config.pandasRuns} first pandas cells per variant`)
  L.push('')
  L.push('| metric | pykernel | Jupyter | floor | pykernel/Jupyter | pykernel/floor |')
  L.push('|---|---|---|---|---|---|')
  for (const r of out.rows) {
    const floor = r.floor === null ? '—' : r.hideFloor ? '(as above)' : `${cell(r.floor, r.unit)}${r.floorWhat ? ` — ${r.floorWhat}` : ''}`
    L.push(`| ${r.label} | ${cell(r.pykernel, r.unit)} | ${cell(r.jupyter, r.unit)} | ${floor} | ${ratio(r.ratioJupyter)} | ${ratio(r.ratioFloor)} |`)
  }
  L.push('')
  L.push('Median (p90, p99) over the runs; ratios are medians, pykernel over the other: for times and')
  L.push('memory lower is better, for MB/s and frames/s higher is better. Timings are never asserted.')
  L.push('')
  L.push('| target | measured | holds |')
  L.push('|---|---|---|')
  for (const t of out.targets) L.push(`| ${t.target} | ${t.measured} | ${t.holds === null ? 'n/a' : t.holds ? 'yes' : 'no'} |`)
  L.push('')
  return L.join('\n')
}

module.exports = { buildRows, targets, markdown, METRICS }
