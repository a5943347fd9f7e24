'use strict'
// Kernel.start -> ready through a launcher, the far side's cache cold and warm, against a
// local start (`sandbox: 'off'`) and against `ssh … true`: `node bench/far_cache.js
// [rounds]` (release build: `npm run build`). Interleaved: each round runs every variant
// once, in turn, because this machine's latency drifts between minutes.
//
//   cold   a far side that has never seen this runner: XDG_CACHE_HOME is a fresh
//          directory each start (and so the launcher's argv is new: no bytecode hash is
//          remembered for it). The runner is shipped and the kernel compiles what it
//          imports from source, as every start did before the cache.
//   warm   the same far side every start: the runner and its bytecode come from its
//          cache, the bytecode vouched for by the host. Rounds 0-2 are discarded (they
//          fill the cache, compile, and have the hash reported).
//
//   zygote fork   Kernel.start with a preload list: forked on demand from a warm zygote
//          (namespaces of its own, the default sandbox), for the side-by-side.
//   reattach   the warm start with `reattach: { graceMs }`: the link goes through the
//          host's relay (byte counts, acknowledgements) and the far side keeps an attach
//          socket. A second table: a warm cell's round trip (`1+1`, median of 20 per
//          kernel) with and without it.
//
// bwrap's view of the host is read-only: its warm rows read the cache the env rows
// wrote (the same directory, outside /tmp, which bwrap replaces).
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')

const { Kernel } = require('..')
const L = require('../__tests__/helpers/launchers')
const { withoutControlMaster } = require('./lib/launchers')
const { summarize, msSince, now } = require('./lib/stats')

const execFileP = promisify(execFile)
const python = process.env.PYKERNEL_TEST_PYTHON || process.env.PYKERNEL_BENCH_PYTHON || 'python3'
const ROUNDS = Number(process.argv[2]) || 10
const DISCARDED = 3

async function main() {
  const scratch = fs.mkdtempSync(path.join(os.homedir(), '.pk-far-cache-bench-'))
  let fresh = 0
  const coldXdg = () => `XDG_CACHE_HOME=${path.join(scratch, `cold-${fresh++}`)}`
  const warmXdg = `XDG_CACHE_HOME=${path.join(scratch, 'warm')}`
  const bwrap = L.bwrapAvailable() ? L.bwrapLauncher() : null
  const sshd = L.sshAvailable() ? await L.startSshd() : null
  const noCm = sshd && withoutControlMaster(sshd.launcher)
  const base = { interpreter: python }
  // name -> () => Kernel.start options (null: not here)
  const variants = {
    local: () => ({ ...base, sandbox: 'off' }),
    // A kernel forked from a warm zygote when the call comes (its first start made the
    // zygote; the discarded rounds cover it), in the default sandbox.
    'zygote fork': () => ({ ...base, preload: ['json'] }),
    'env cold': () => ({ ...base, launcher: ['env', coldXdg()] }),
    'env warm': () => ({ ...base, launcher: ['env', warmXdg] }),
    // Under /tmp: bwrap's own empty tmpfs, where the far side can make it.
    'bwrap cold': bwrap && (() => ({ ...base, launcher: [...bwrap, 'env', `XDG_CACHE_HOME=/tmp/cold-${fresh++}`] })),
    'bwrap warm': bwrap && (() => ({ ...base, launcher: [...bwrap, 'env', warmXdg] })),
    'ssh cold': sshd && (() => ({ ...base, launcher: [...sshd.launcher, 'env', coldXdg()] })),
    'ssh warm': sshd && (() => ({ ...base, launcher: [...sshd.launcher, 'env', warmXdg] })),
    'env warm, reattach': () => ({ ...base, launcher: ['env', warmXdg], reattach: { graceMs: 10_000 } }),
    'ssh warm, reattach': sshd && (() => ({ ...base, launcher: [...sshd.launcher, 'env', warmXdg], reattach: { graceMs: 10_000 } })),
    'ssh noCM cold': sshd && (() => ({ ...base, launcher: [...noCm, 'env', coldXdg()] })),
    'ssh noCM warm': sshd && (() => ({ ...base, launcher: [...noCm, 'env', warmXdg] })),
  }
  const trues = sshd ? { 'ssh true': sshd.launcher, 'ssh noCM true': noCm } : {}
  const samples = Object.fromEntries([...Object.keys(variants), ...Object.keys(trues)].map((k) => [k, []]))
  const trips = Object.fromEntries(Object.keys(variants).map((k) => [k, []]))
  try {
    for (let round = 0; round < ROUNDS + DISCARDED; round++) {
      for (const [name, argv] of Object.entries(trues)) {
        const t0 = now()
        await execFileP(argv[0], [...argv.slice(1), 'true'], { timeout: 10_000 })
        if (round >= DISCARDED) samples[name].push(msSince(t0))
      }
      for (const [name, opts] of Object.entries(variants)) {
        if (!opts) continue
        const t0 = now()
        const kernel = await Kernel.start(opts())
        const ms = msSince(t0)
        if (name === 'zygote fork' && kernel.startMode !== 'zygote') throw new Error(`zygote fork started as ${kernel.startMode}`)
        const r = await kernel.execute('1+1')
        if (r.status !== 'ok') throw new Error(`${name}: ${JSON.stringify(r.error)}`)
        const each = []
        for (let i = 0; i < 20; i++) {
          const t1 = now()
          await kernel.execute('1+1')
          each.push(msSince(t1))
        }
        await kernel.shutdown()
        if (round >= DISCARDED) {
          samples[name].push(ms)
          trips[name].push(summarize(each).median)
        }
      }
      process.stderr.write(`round ${round} done\n`)
    }
  } finally {
    if (sshd) await sshd.stop()
    fs.rmSync(scratch, { recursive: true, force: true })
  }
  const med = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, summarize(v)]))
  const ref = (name) => {
    if (name.startsWith('ssh noCM')) return 'ssh noCM true'
    if (name.startsWith('ssh')) return 'ssh true'
    return 'local'
  }
  const lines = [
    `Kernel.start -> ready, median of ${ROUNDS} interleaved rounds (${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(1)} at the end), ${python}`,
    '',
    '| start | median ms | p90 ms | vs local | vs its ssh … true |',
    '|---|---:|---:|---:|---:|',
  ]
  for (const [name, s] of Object.entries(med)) {
    if (!s) {
      lines.push(`| ${name} | n/a | | | |`)
      continue
    }
    const vsLocal = (s.median / med.local.median).toFixed(2)
    const r = ref(name)
    const vsTrue = name.startsWith('ssh') && !name.endsWith('true') && med[r] ? (s.median / med[r].median).toFixed(2) : ''
    lines.push(`| ${name} | ${s.median.toFixed(1)} | ${s.p90.toFixed(1)} | ${vsLocal} | ${vsTrue} |`)
  }
  const trip = Object.fromEntries(Object.entries(trips).map(([k, v]) => [k, summarize(v)]))
  lines.push('', `A warm cell's round trip (\`1+1\`), median over the rounds of each kernel's median of 20`, '')
  lines.push('| kernel | median ms | p90 ms | vs local |', '|---|---:|---:|---:|')
  for (const [name, s] of Object.entries(trip)) {
    if (s) lines.push(`| ${name} | ${s.median.toFixed(3)} | ${s.p90.toFixed(3)} | ${(s.median / trip.local.median).toFixed(2)} |`)
  }
  process.stdout.write(lines.join('\n') + '\n')
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
