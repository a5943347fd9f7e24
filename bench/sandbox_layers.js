#!/usr/bin/env node
'use strict'
// What the sandbox's layers cost: a kernel's cold start, a warm round trip, a start forked
// from a warm zygote, and a kernel forked on demand from a warm zygote that imported a big
// preload list (numpy and pandas when the interpreter has them: the fork copies the page
// tables of that heap), for three kernels side by side in one run, interleaved round by
// round so all three see the same machine:
//
//   off      this addon, `sandbox: 'off'` (the reference: no isolation at all)
//   before   an addon built from an earlier commit (`--before <.node>`), default sandbox:
//            the namespaces and Landlock without the filesystem view, seccomp, dropped
//            keyring and in-memory bytecode
//   now      this addon, default sandbox (every layer)
//
//   node bench/sandbox_layers.js [--before path/to/pykernel.linux-x64-gnu.node]
//                                [--python PY] [--rounds N] [--out NAME]
//                                [--preload numpy,pandas]
//
// Writes bench/results/<NAME>.{json,md} (default sandbox-layers) and prints the table.
// Timings are reported, never asserted.
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { summarize, msSince, now, sleep } = require('./lib/stats')

const ROOT = path.resolve(__dirname, '..')

function parseArgs(argv) {
  const a = { before: null, python: process.env.PYKERNEL_BENCH_PYTHON || path.join(ROOT, '.venv-test', 'bin', 'python'), rounds: 15, warm: 200, out: 'sandbox-layers', preload: null }
  for (let i = 0; i < argv.length; i++) {
    const x = argv[i]
    if (x === '--before') a.before = argv[++i]
    else if (x === '--python') a.python = argv[++i]
    else if (x === '--rounds') a.rounds = Number(argv[++i])
    else if (x === '--out') a.out = argv[++i]
    else if (x === '--preload') a.preload = argv[++i].split(',').filter(Boolean)
    else throw new Error(`unknown argument ${x}`)
  }
  return a
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  // The big zygote's list: numpy and pandas when the interpreter imports them, else json.
  if (!args.preload) {
    try {
      execFileSync(args.python, ['-c', 'import numpy, pandas'], { stdio: 'ignore' })
      args.preload = ['numpy', 'pandas']
    } catch {
      args.preload = ['json']
    }
  }
  const now_ = require(ROOT)
  const variants = [
    { name: 'off', Kernel: now_.Kernel, sandbox: 'off' },
    ...(args.before ? [{ name: 'before', Kernel: require(path.resolve(args.before)).Kernel }] : []),
    { name: 'now', Kernel: now_.Kernel },
  ]
  const base = { interpreter: args.python, cwd: ROOT }
  const options = (v, extra = {}) => ({ ...base, ...(v.sandbox ? { sandbox: v.sandbox } : {}), ...extra })
  const one = async (k) => {
    const r = await k.execute('1+1')
    if (r.result?.['text/plain'] !== '2') throw new Error(`1+1 gave ${JSON.stringify(r)}`)
  }
  const samples = Object.fromEntries(variants.map((v) => [v.name, { cold: [], warm: [], forked: [], onDemand: [] }]))

  // Warm-up: each variant's bytecode (built in the background after a first start), probe
  // cache and zygote.
  for (const v of variants) {
    for (let i = 0; i < 3; i++) {
      const k = await v.Kernel.start(options(v))
      await one(k)
      await k.shutdown()
      await sleep(100)
    }
    for (const preload of [['json'], args.preload]) {
      const z = await v.Kernel.start(options(v, { preload }))
      if (z.startMode !== 'zygote') throw new Error(`${v.name}: a preload kernel started as ${z.startMode}`)
      await one(z)
      await z.shutdown()
    }
  }

  for (let round = 0; round < args.rounds; round++) {
    for (const v of variants) {
      const t0 = now()
      const k = await v.Kernel.start(options(v))
      await one(k)
      samples[v.name].cold.push(msSince(t0))
      await k.shutdown()
    }
    for (const v of variants) {
      const t0 = now()
      const k = await v.Kernel.start(options(v, { preload: ['json'] }))
      await one(k)
      samples[v.name].forked.push(msSince(t0))
      await k.shutdown()
    }
    for (const v of variants) {
      const t0 = now()
      const k = await v.Kernel.start(options(v, { preload: args.preload }))
      await one(k)
      samples[v.name].onDemand.push(msSince(t0))
      if (k.startMode !== 'zygote') throw new Error(`${v.name}: a preload kernel started as ${k.startMode}`)
      await k.shutdown()
    }
  }

  // Warm round trips: one live kernel each, blocks of 20 cells in turn.
  const live = []
  for (const v of variants) live.push({ v, k: await v.Kernel.start(options(v)) })
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

  const summary = Object.fromEntries(Object.entries(samples).map(([name, s]) => [name, Object.fromEntries(Object.entries(s).map(([key, xs]) => [key, summarize(xs)]))]))
  const rows = [
    ['cold start (Kernel.start + 1+1)', 'cold'],
    ['start forked from a warm zygote (+ 1+1)', 'forked'],
    ['kernel forked on demand from a warm zygote (+ 1+1)', 'onDemand'],
    ['warm round trip (1+1)', 'warm'],
  ]
  const fmt = (x) => (x >= 10 ? x.toFixed(1) : x.toFixed(2))
  const names = variants.map((v) => v.name)
  const lines = [
    `# What the sandbox's layers cost (${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC)`,
    '',
    `Medians in ms, ${args.rounds} interleaved rounds (${args.warm} warm cells each, in blocks of 20), ${require('node:os').cpus().length} cores, load average ${require('node:os').loadavg().map((x) => x.toFixed(2)).join(' ')} at the end, interpreter \`${args.python}\`; the ratio is against \`sandbox: 'off'\`. The start forked from a warm zygote preloads \`json\`; the kernel forked on demand, \`${args.preload.join(', ')}\`.`,
    '',
    `| what | ${names.map((n) => `${n} (ms)`).join(' | ')} | ${names.filter((n) => n !== 'off').map((n) => `${n}/off`).join(' | ')} |`,
    `|---|${names.map(() => '---:').join('|')}|${names.filter((n) => n !== 'off').map(() => '---:').join('|')}|`,
  ]
  for (const [label, key] of rows) {
    const med = (n) => summary[n][key].median
    lines.push(`| ${label} | ${names.map((n) => fmt(med(n))).join(' | ')} | ${names.filter((n) => n !== 'off').map((n) => `${(med(n) / med('off')).toFixed(2)}x`).join(' | ')} |`)
  }
  lines.push('')
  lines.push(`| ratio of medians | ${names.join(' | ')} |`)
  lines.push(`|---|${names.map(() => '---:').join('|')}|`)
  lines.push(`| kernel forked on demand / local spawn (cold start) | ${names.map((n) => `${(summary[n].onDemand.median / summary[n].cold.median).toFixed(2)}x`).join(' | ')} |`)
  lines.push('')
  lines.push("- off: this addon with `sandbox: 'off'`; now: this addon, default sandbox (namespaces, the filesystem view, Landlock, seccomp, a fresh keyring, no capability, bytecode from the host's sealed memfd, a private TMPDIR)" + (args.before ? `; before: \`${args.before}\`, default sandbox` : ''))
  const md = lines.join('\n') + '\n'
  fs.mkdirSync(path.join(__dirname, 'results'), { recursive: true })
  fs.writeFileSync(path.join(__dirname, 'results', `${args.out}.json`), JSON.stringify({ args, summary, samples }, null, 1))
  fs.writeFileSync(path.join(__dirname, 'results', `${args.out}.md`), md)
  process.stdout.write(md)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
