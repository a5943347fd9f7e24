'use strict'
// Kernels through a launcher: `Kernel.start` -> ready and the warm `1+1` round
// trip with `launcher:` set, beside a local kernel measured in the same window. Every
// variant runs the same interpreter (the bench venv's python, by absolute path on the far
// side too), so the difference is the launcher alone:
//
//   local     no launcher, `sandbox: 'off'` (a launched kernel gets no local sandbox
//             either): the reference each launcher row is divided by
//   env       `env` as the launcher: a no-op prefix, so what remains is pykernel's own
//             launcher path (python -c bootstrap, runner shipped over the pipe and
//             checked, the far-side supervisor relaying the pipe)
//   bwrap     bubblewrap (__tests__/helpers/launchers.js bwrapLauncher(): read-only view
//             of the host, own PID namespace, fresh /dev, /proc, /tmp)
//   ssh       a throwaway sshd on 127.0.0.1 (startSshd()), ControlMaster on: the first
//             connection (made by startSshd and by the discarded warm-up start) is kept as
//             the master and every start multiplexes a session over it
//   sshNoCm   the same sshd with ControlPath=none: a new TCP connection, key exchange and
//             key authentication for each start (cold start only)
//
// Runs are interleaved (each cold-start round starts every variant once; warm cells go
// in blocks of 50 per kernel in turn), as in pykernel.js, because this machine's
// latency drifts between minutes. A launcher that is not usable here gives its rows an
// `{ error }` (n/a with the reason); the other rows still run.
const fs = require('node:fs')
const path = require('node:path')
const { execFile, spawnSync } = require('node:child_process')
const { promisify } = require('node:util')
const { msSince, now } = require('./stats')

const ROOT = path.resolve(__dirname, '..', '..')
const execFileP = promisify(execFile)
const HELPERS = path.join(ROOT, '__tests__', 'helpers', 'launchers.js')

function check(cond, what) {
  if (!cond) throw new Error(what)
}

const firstLine = (s) =>
  String(s || '')
    .trim()
    .split('\n')
    .filter(Boolean)
    .pop() || ''

/** The helpers' bwrap argv, with the interpreter's tree bound back in when it lives under
 *  /tmp (the sandbox's /tmp is an empty tmpfs); null plus a reason when bwrap cannot run
 *  the interpreter here. */
function bwrapFor(L, python) {
  const extra = []
  let real = python
  try {
    real = fs.realpathSync(python)
  } catch {}
  for (const p of new Set([path.dirname(path.dirname(python)), path.dirname(path.dirname(real))])) {
    if (p === '/tmp' || p.startsWith('/tmp/')) extra.push('--ro-bind', p, p)
  }
  const argv = L.bwrapLauncher({ extra })
  const r = spawnSync(argv[0], [...argv.slice(1), python, '-c', 'pass'], { encoding: 'utf8', timeout: 10_000 })
  if (r.error) return { why: r.error.code === 'ENOENT' ? 'bwrap not installed' : `bwrap: ${r.error.message}` }
  if (r.status !== 0) return { why: `bwrap cannot sandbox here: ${firstLine(r.stderr) || `exit ${r.status}`}` }
  return { argv }
}

/** The ssh launcher without connection sharing: ssh keeps the first value of an option,
 *  so the ControlMaster/ControlPath/ControlPersist pairs are taken out, not overridden. */
function withoutControlMaster(launcher) {
  const out = []
  for (let i = 0; i < launcher.length; i++) {
    if (launcher[i] === '-o' && /^Control(Master|Path|Persist)=/.test(launcher[i + 1] || '')) {
      i++
      continue
    }
    out.push(launcher[i])
  }
  out.splice(out.length - 1, 0, '-o', 'ControlMaster=no', '-o', 'ControlPath=none')
  return out
}

async function measureLaunchers(python, cfg, log) {
  const { Kernel } = require(ROOT) // the snapshot run.js made (lib/addon.js)
  const L = require(HELPERS)
  const m = { python, launchers: {}, interpreterReported: {} }
  const base = { interpreter: python, cwd: ROOT }
  const live = new Set()
  const shutdown = async (k) => {
    live.delete(k)
    await k.shutdown({ graceMs: 1000 }).catch(() => {})
  }
  const one = async (k) => {
    const r = await k.execute('1+1')
    check(r.status === 'ok' && r.result && r.result['text/plain'] === '2', `1+1 gave ${JSON.stringify(r.result)}`)
  }

  // name -> Kernel.start options; a variant that cannot run gets `why` instead.
  const variants = [
    { name: 'Local', opts: { ...base, sandbox: 'off' }, warm: true },
    { name: 'Env', opts: { ...base, launcher: ['env'] }, warm: true },
  ]
  m.launchers.Env = ['env']
  const bw = bwrapFor(L, python)
  variants.push({ name: 'Bwrap', opts: bw.argv && { ...base, launcher: bw.argv }, why: bw.why, warm: true })
  m.launchers.Bwrap = bw.argv || null
  if (bw.why) log(`bwrap rows n/a: ${bw.why}`)

  let sshd = null
  let sshWhy = null
  if (!L.sshAvailable()) sshWhy = 'needs ssh, ssh-keygen and /usr/sbin/sshd'
  else {
    try {
      sshd = await L.startSshd()
    } catch (e) {
      sshWhy = `throwaway sshd: ${firstLine(e.message)}`
    }
  }
  if (sshWhy) log(`ssh rows n/a: ${sshWhy}`)
  const noCm = sshd && withoutControlMaster(sshd.launcher)
  variants.push({ name: 'Ssh', opts: sshd && { ...base, launcher: sshd.launcher }, why: sshWhy, warm: true })
  variants.push({ name: 'SshNoCm', opts: noCm && { ...base, launcher: noCm }, why: sshWhy, warm: false })
  m.launchers.Ssh = sshd ? sshd.launcher : null
  m.launchers.SshNoCm = noCm || null
  if (sshd) m.sshdPort = sshd.port

  const fail = (v, key, e) => {
    v.why = `${key === 'warm' ? 'warm round trip' : 'Kernel.start'}: ${firstLine(e.message)}`
    log(`launcher ${v.name} failed: ${v.why}`)
  }

  try {
    // Cold start: Kernel.start -> ready, every variant once per round; round 0 is the
    // discarded warm-up (page cache, the interpreter probe, and for ssh the untimed start
    // that finds the ControlMaster up).
    const cold = Object.fromEntries(variants.map((v) => [v.name, []]))
    // And `ssh <launcher> true` both ways, in the same rounds: what a session costs with
    // no kernel (connection or mux session, the far login shell and its startup files).
    const sshTrue = { Ssh: [], SshNoCm: [] }
    for (let i = 0; i <= cfg.coldRuns; i++) {
      if (sshd) {
        for (const [name, argv] of [['Ssh', sshd.launcher], ['SshNoCm', noCm]]) {
          if (!Array.isArray(sshTrue[name])) continue
          try {
            const t0 = now()
            await execFileP(argv[0], [...argv.slice(1), 'true'], { timeout: 10_000 })
            if (i > 0) sshTrue[name].push(msSince(t0))
          } catch (e) {
            sshTrue[name] = { error: firstLine(e.stderr || e.message) }
          }
        }
      }
      for (const v of variants) {
        if (v.why) continue
        try {
          const t0 = now()
          const k = await Kernel.start(v.opts)
          const ms = msSince(t0)
          live.add(k)
          await one(k) // untimed: the kernel works
          if (i === 0) m.interpreterReported[v.name] = k.interpreter
          else cold[v.name].push(ms)
          await shutdown(k)
        } catch (e) {
          fail(v, 'cold', e)
        }
      }
    }
    for (const v of variants) m[`start${v.name}Ms`] = v.why ? { error: v.why } : cold[v.name]
    if (sshd) {
      m.sshTrueMs = sshTrue.Ssh
      m.sshNoCmTrueMs = sshTrue.SshNoCm
    }

    // Warm round trips: one live kernel per variant, blocks of 50 cells in turn.
    const warm = variants.filter((v) => v.warm)
    const kernels = new Map()
    for (const v of warm) {
      if (v.why) continue
      try {
        const k = await Kernel.start(v.opts)
        live.add(k)
        for (let i = 0; i < cfg.warmup; i++) await one(k)
        kernels.set(v.name, k)
      } catch (e) {
        fail(v, 'warm', e)
      }
    }
    const samples = Object.fromEntries(warm.map((v) => [v.name, []]))
    const block = Math.max(1, Math.min(50, cfg.warmRuns))
    for (let done = 0; done < cfg.warmRuns; done += block) {
      for (const [name, k] of kernels) {
        const v = warm.find((x) => x.name === name)
        if (v.why) continue
        try {
          for (let i = 0; i < block && samples[name].length < cfg.warmRuns; i++) {
            const t0 = now()
            await one(k)
            samples[name].push(msSince(t0))
          }
        } catch (e) {
          fail(v, 'warm', e)
        }
      }
    }
    for (const v of warm) m[`warm${v.name}Ms`] = v.why ? { error: v.why } : samples[v.name]
  } finally {
    for (const k of [...live]) await shutdown(k)
    if (sshd) await sshd.stop().catch(() => {})
  }
  return m
}

module.exports = { measureLaunchers, withoutControlMaster }
