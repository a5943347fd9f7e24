#!/usr/bin/env node
'use strict'
// What the safe defaults cost, side by side in one run, interleaved round by round:
//
//   off   `sandbox: 'off'` (no isolation at all: the reference)
//   all   `sandbox: { writable: 'all' }`: the sandbox with writes anywhere the user may
//         and installs into the shared environment (the behaviour before the defaults)
//   now   the default sandbox: writes confined to the workspace, credential stores
//         hidden, the environment an overlay of the session's own installs
//
// Rows: a cold start, a start forked from a warm zygote, a warm round trip, and a first
// `%pip install` of a local wheel in a fresh kernel (undone in the shared environment
// after each round, so each is a first install; measured after the starts, since an
// install into the shared environment retires the zygote). Then the proxy of an allow list: a
// 20 MB download from a loopback server through it, against the same download direct.
//
//   node bench/safe_defaults.js [--python PY] [--rounds N] [--out NAME]
//
// Writes bench/results/<NAME>.{json,md} (default safe-defaults) and prints the table.
// Timings are reported, never asserted.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { summarize, msSince, now, sleep } = require('./lib/stats')
const { writeWheel, packageIndex } = require('../__tests__/helpers/wheel')

const ROOT = path.resolve(__dirname, '..')

function parseArgs(argv) {
  const a = { python: process.env.PYKERNEL_BENCH_PYTHON || 'python3', rounds: 15, warm: 200, downloads: 7, out: 'safe-defaults' }
  for (let i = 0; i < argv.length; i++) {
    const x = argv[i]
    if (x === '--python') a.python = argv[++i]
    else if (x === '--rounds') a.rounds = Number(argv[++i])
    else if (x === '--out') a.out = argv[++i]
    else throw new Error(`unknown argument ${x}`)
  }
  return a
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const { Kernel } = require(ROOT)
  // A venv of its own, with pip, for the installs (its site-packages is undone each round).
  const dir = fs.mkdtempSync(path.join('/var/tmp', 'pykernel-bench-defaults-'))
  const venv = path.join(dir, 'venv')
  execFileSync(args.python, ['-m', 'venv', venv])
  const workspace = path.join(dir, 'ws')
  fs.mkdirSync(workspace)
  const wheel = path.basename(writeWheel(workspace))
  const variants = [
    { name: 'off', sandbox: 'off' },
    { name: 'all', sandbox: { writable: 'all' } },
    { name: 'now', sandbox: undefined },
  ]
  const options = (v, extra = {}) => ({ interpreter: path.join(venv, 'bin', 'python'), cwd: workspace, ...(v.sandbox ? { sandbox: v.sandbox } : {}), ...extra })
  const one = async (k) => {
    const r = await k.execute('1+1')
    if (r.result?.['text/plain'] !== '2') throw new Error(`1+1 gave ${JSON.stringify(r)}`)
  }
  const ok = async (k, code) => {
    const r = await k.execute(code, { timeoutMs: 120_000 })
    if (r.status !== 'ok') throw new Error(`${code}: ${JSON.stringify(r.error)} ${r.stdout}`)
    return r
  }
  const samples = Object.fromEntries(variants.map((v) => [v.name, { cold: [], forked: [], warm: [], pip: [] }]))

  for (const v of variants) {
    for (let i = 0; i < 3; i++) {
      const k = await Kernel.start(options(v))
      await one(k)
      await k.shutdown()
      await sleep(100)
    }
    const z = await Kernel.start(options(v, { preload: ['json'] }))
    if (z.startMode !== 'zygote') throw new Error(`${v.name}: a preload kernel started as ${z.startMode}`)
    await z.shutdown()
  }

  for (let round = 0; round < args.rounds; round++) {
    for (const v of variants) {
      const t0 = now()
      const k = await Kernel.start(options(v))
      await one(k)
      samples[v.name].cold.push(msSince(t0))
      await k.shutdown()
    }
    for (const v of variants) {
      const t0 = now()
      const k = await Kernel.start(options(v, { preload: ['json'] }))
      await one(k)
      samples[v.name].forked.push(msSince(t0))
      await k.shutdown()
    }
  }
  // After the starts: an install into the shared environment retires its zygote (its
  // imports may be stale), which would slow the next forked start of 'off' and 'all'.
  for (let round = 0; round < args.rounds; round++) {
    for (const v of variants) {
      const k = await Kernel.start(options(v))
      await one(k)
      const t0 = now()
      await ok(k, `%pip install -q --no-index --disable-pip-version-check ./${wheel}`)
      samples[v.name].pip.push(msSince(t0))
      await ok(k, 'import pkdefaults')
      // Undone where it went to the shared environment: the next round installs first again.
      if (v.name !== 'now') await ok(k, '%pip uninstall -y -q pk-defaults')
      await k.shutdown()
    }
  }

  const live = []
  for (const v of variants) live.push({ v, k: await Kernel.start(options(v)) })
  for (const { k } of live) for (let i = 0; i < 20; i++) await one(k)
  for (let block = 0; block < args.warm / 20; block++) {
    for (const { v, k } of live) {
      for (let i = 0; i < 20; i++) {
        const t0 = now()
        await one(k)
        samples[v.name].warm.push(msSince(t0))
      }
    }
  }
  for (const { k } of live) await k.shutdown()

  // The proxy: 20 MB from a loopback server, timed in the cell (the read alone).
  const index = await packageIndex(path.join(workspace, wheel))
  const download = `
import time, urllib.request
t0 = time.perf_counter()
n = len(urllib.request.urlopen('http://localhost:${index.port}/bytes/${20 * 1024 * 1024}', timeout=60).read())
assert n == ${20 * 1024 * 1024}, n
print(time.perf_counter() - t0)
`
  const through = { direct: [], proxy: [] }
  const direct = await Kernel.start(options({ sandbox: undefined }))
  const proxied = await Kernel.start(options({ sandbox: { network: { allow: [`localhost:${index.port}`] } } }))
  for (let i = 0; i < args.downloads + 1; i++) {
    for (const [name, k] of [['direct', direct], ['proxy', proxied]]) {
      const seconds = Number((await ok(k, download)).stdout.trim())
      if (i > 0) through[name].push(20 / seconds)
    }
  }
  await direct.shutdown()
  await proxied.shutdown()
  index.server.close()

  const summary = Object.fromEntries(Object.entries(samples).map(([name, s]) => [name, Object.fromEntries(Object.entries(s).map(([k, xs]) => [k, summarize(xs)]))]))
  const mbps = { direct: summarize(through.direct), proxy: summarize(through.proxy) }
  const rows = [
    ['cold start (Kernel.start + 1+1)', 'cold'],
    ['start forked from a warm zygote (+ 1+1)', 'forked'],
    ['warm round trip (1+1)', 'warm'],
    ['first `%pip install` of a local wheel', 'pip'],
  ]
  const fmt = (x) => (x >= 10 ? x.toFixed(1) : x.toFixed(2))
  const lines = [
    `# What the safe defaults cost (${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC)`,
    '',
    `Medians in ms, ${args.rounds} interleaved rounds (${args.warm} warm cells each, in blocks of 20), ${os.cpus().length} cores, interpreter \`${args.python}\` (a venv of it).`,
    '',
    '| what | off (ms) | all (ms) | now (ms) | now/all | now/off |',
    '|---|---:|---:|---:|---:|---:|',
  ]
  for (const [label, key] of rows) {
    const med = (n) => summary[n][key].median
    lines.push(`| ${label} | ${fmt(med('off'))} | ${fmt(med('all'))} | ${fmt(med('now'))} | ${(med('now') / med('all')).toFixed(2)}x | ${(med('now') / med('off')).toFixed(2)}x |`)
  }
  lines.push('')
  lines.push(`| 20 MB over loopback, in a cell | direct (MB/s) | through the proxy (MB/s) | proxy/direct |`)
  lines.push('|---|---:|---:|---:|')
  lines.push(`| median of ${args.downloads} | ${mbps.direct.median.toFixed(0)} | ${mbps.proxy.median.toFixed(0)} | ${(mbps.proxy.median / mbps.direct.median).toFixed(2)}x |`)
  lines.push('')
  lines.push("- off: `sandbox: 'off'`; all: `sandbox: { writable: 'all' }` (installs into the shared environment); now: the default sandbox (writes to the workspace, TMPDIR and the session's caches and installs; credential stores hidden).")
  lines.push('- The proxy row: `sandbox.network = { allow: [\'localhost:<port>\'] }` against the default network, the same server and bytes, downloads alternating.')
  const md = lines.join('\n') + '\n'
  fs.mkdirSync(path.join(__dirname, 'results'), { recursive: true })
  fs.writeFileSync(path.join(__dirname, 'results', `${args.out}.json`), JSON.stringify({ args, summary, samples, mbps, through }, null, 1))
  fs.writeFileSync(path.join(__dirname, 'results', `${args.out}.md`), md)
  fs.rmSync(dir, { recursive: true, force: true })
  process.stdout.write(md)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
