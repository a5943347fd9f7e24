'use strict'
// The pykernel side: the addon from Node, Kernel and KernelPool, with the bench venv's
// python as the interpreter. Streaming runs with `onEvent` set, as an agent would.
//
// Interleaved with it, for attribution, the same runner.py alone over plain pipes (see
// runner_direct.js): each pykernel sample is followed by the runner's, so both see the
// same machine (a shared 2-core box drifts by 2x between minutes). Those samples go to
// `m.runner`.
const path = require('node:path')
const { statusKiB, withTimeout, cmdline } = require('./proc')
const { runnerColdStart, startRunner, runnerOneResult, runnerCount, runnerBytecode } = require('./runner_direct')
const { echoColdStart } = require('./floors')
const { placementUnavailable, underEachPlacement } = require('./placement')
const { msSince, now, cpuSince, sleep } = require('./stats')

const ROOT = path.resolve(__dirname, '..', '..')

/** The Python kernel's own pid. In the sandbox `kernel.pid` is the init of the kernel's
 *  PID namespace, and the kernel is its child (RSS and CPU placement are the kernel's). */
function kernelProcess(pid) {
  try {
    const child = Number(require('node:fs').readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ')[0])
    return child || pid
  } catch {
    return pid
  }
}

function check(cond, what) {
  if (!cond) throw new Error(what)
}

async function measurePykernel(python, cfg, log, addon) {
  // index.js loads the snapshot that run.js made (lib/addon.js).
  const { Kernel, KernelPool } = require(ROOT)
  const m = { addon }
  const rm = {} // the runner alone
  m.runner = rm
  const opts = { interpreter: python, cwd: ROOT }
  const live = new Set()
  const guard = async (name, fn, target = m) => {
    try {
      await fn()
    } catch (e) {
      target[name] = { error: e.message }
      log(`${target === rm ? 'runner alone' : 'pykernel'} ${name} failed: ${e.message}`)
    }
  }
  const shutdown = async (k) => {
    live.delete(k)
    await k.shutdown({ graceMs: 1000 }).catch(() => {})
  }
  const start = async (extra = {}) => {
    const k = await Kernel.start({ ...opts, ...extra })
    live.add(k)
    return k
  }
  const one = async (k) => {
    const r = await k.execute('1+1')
    check(r.status === 'ok' && r.result && r.result['text/plain'] === '2', `1+1 gave ${JSON.stringify(r.result)}`)
  }
  let runnerPath = null
  let runner = null // a live runner-alone process for the warm and streaming runs

  try {
    // Cold start: spawn -> the 1+1 result; one discarded warm-up (probe cache, page cache).
    await guard('coldStartMs', async () => {
      const total = []
      const offTotal = []
      const startOnly = []
      const alone = []
      let aloneOk = true
      for (let i = 0; i <= cfg.coldRuns; i++) {
        const t0 = now()
        const k = await start()
        const tStart = msSince(t0)
        await one(k)
        const ms = msSince(t0)
        if (i === 0) {
          m.interpreterReported = k.interpreter
          // The runner.py the addon wrote and started.
          runnerPath = cmdline(kernelProcess(k.pid)).split(' ').find((a) => a.endsWith('runner.py')) || null
          m.runnerPath = runnerPath
          // The namespace's init keeps the environment the addon gave the kernel.
          try {
            const environ = require('node:fs').readFileSync(`/proc/${k.pid}/environ`, 'latin1').split('\0')
            const entry = environ.find((e) => e.startsWith('PYKERNEL_BYTECODE='))
            runnerBytecode.dir = entry ? entry.slice('PYKERNEL_BYTECODE='.length) : null
          } catch {}
          rm.runnerPath = runnerPath
          if (!runnerPath) rm.coldStartMs = { error: 'runner.py not found in the kernel command line' }
        } else {
          total.push(ms)
          startOnly.push(tStart)
        }
        await shutdown(k)
        // The same start without the sandbox, in the same window: what isolation costs.
        const t1 = now()
        const off = await start({ sandbox: 'off' })
        await one(off)
        if (i > 0) offTotal.push(msSince(t1))
        await shutdown(off)
        if (runnerPath && aloneOk) {
          try {
            const a = await runnerColdStart(python, runnerPath)
            if (i > 0) alone.push(a)
          } catch (e) {
            aloneOk = false
            rm.coldStartMs = { error: e.message }
            log(`runner alone coldStartMs failed: ${e.message}`)
          }
        }
      }
      m.coldStartMs = total
      m.coldStartOffMs = offTotal
      m.startToReadyMs = startOnly
      if (runnerPath && aloneOk) rm.coldStartMs = alone
    })

    if (runnerPath) {
      try {
        runner = await startRunner(python, runnerPath)
      } catch (e) {
        rm.warmRoundTripMs = { error: e.message }
        log(`runner alone failed to start: ${e.message}`)
      }
    }

    let k = null
    await guard('rssAfterStartKiB', async () => {
      k = await start()
      await one(k)
      await sleep(200)
      m.rssAfterStartKiB = statusKiB(kernelProcess(k.pid))
    })

    if (k) {
      // Warm round trips, in blocks alternating with the runner alone and the echo
      // floor: a shared machine's state (idle cores wake slowly, busy ones fast) moves the
      // echo time by 3x between minutes, so the ratio is only fair within one window.
      await guard('warmRoundTripMs', async () => {
        let echo = null
        try {
          echo = (await echoColdStart(python))[1]
        } catch (e) {
          log(`echo floor failed to start: ${e.message}`)
        }
        let off = null
        try {
          off = await start({ sandbox: 'off' })
        } catch (e) {
          m.warmRoundTripOffMs = { error: e.message }
        }
        for (let i = 0; i < cfg.warmup; i++) await one(k)
        if (off) for (let i = 0; i < cfg.warmup; i++) await one(off)
        if (runner) for (let i = 0; i < cfg.warmup; i++) await runnerOneResult(runner)
        if (echo) for (let i = 0; i < cfg.warmup; i++) await echo.request({ type: 'execute' })
        const s = []
        const so = []
        const a = []
        const e = []
        let cpuK = 0
        let cpuA = 0
        let cpuE = 0
        const block = Math.max(1, Math.min(50, cfg.warmRuns))
        const timed = async (samples, fn) => {
          const c0 = process.cpuUsage()
          for (let i = 0; i < block && samples.length < cfg.warmRuns; i++) {
            const t0 = now()
            await fn()
            samples.push(msSince(t0))
          }
          return cpuSince(c0)
        }
        while (s.length < cfg.warmRuns) {
          cpuK += await timed(s, () => one(k))
          if (off) await timed(so, () => one(off))
          if (runner) cpuA += await timed(a, () => runnerOneResult(runner))
          if (echo) cpuE += await timed(e, () => echo.request({ type: 'execute' }))
        }
        m.hostCpuPerCellUs = cpuK / cfg.warmRuns
        m.warmRoundTripMs = s
        if (off) {
          m.warmRoundTripOffMs = so
          await shutdown(off)
        }
        if (runner) {
          rm.hostCpuPerCellUs = cpuA / cfg.warmRuns
          rm.warmRoundTripMs = a
        }
        if (echo) {
          m.echoInterleaved = { warmRoundTripMs: e, hostCpuPerCellUs: cpuE / cfg.warmRuns }
          // The same, with the host and the kernel (and the echo server) pinned to one core
          // and then to two: the regimes the unpinned run can fall into (placement.js).
          const unavailable = placementUnavailable()
          if (unavailable) log(`placement rows skipped: ${unavailable}`)
          else {
            // A machine that refuses affinity changes loses these rows, not the ones above.
            await underEachPlacement([kernelProcess(k.pid), echo.child.pid], async (key) => {
              const ks = []
              const es = []
              const n = Math.ceil(cfg.warmRuns / 2)
              for (let i = 0; i < cfg.warmup; i++) await one(k)
              for (let i = 0; i < cfg.warmup; i++) await echo.request({ type: 'execute' })
              while (ks.length < n) {
                await timed(ks, () => one(k))
                await timed(es, () => echo.request({ type: 'execute' }))
              }
              m[`warm${key}Ms`] = ks
              m.echoInterleaved[`warm${key}Ms`] = es
            }).catch((e) => {
              m.warmOneCoreMs = m.warmOneCoreMs || { error: `pinning failed: ${e.message}` }
              m.warmTwoCoresMs = m.warmTwoCoresMs || { error: `pinning failed: ${e.message}` }
              log(`placement rows failed: ${e.message}`)
            })
          }
          await echo.close()
        }
      })

      // Streams and frames: each pykernel run followed by the runner alone's.
      const counted = async (name, code, what, expected, runs) => {
        const rates = []
        const cpus = []
        const alone = []
        for (let r = 0; r < runs; r++) {
          let got = 0
          const c0 = process.cpuUsage()
          const t0 = now()
          const res = await k.execute(code, {
            onEvent:
              what === 'bytes'
                ? (e) => {
                    if (e.type === 'stdout') got += e.text.length
                  }
                : (e) => {
                    if (e.type === 'display' && e.bundle['image/png']) got++
                  },
          })
          const ms = msSince(t0)
          cpus.push(cpuSince(c0) / 1000)
          check(res.status === 'ok', `${name}: ${res.status} ${res.error && res.error.evalue}`)
          check(got === expected, `${name}: onEvent got ${got} of ${expected} ${what}`)
          rates.push(expected / (what === 'bytes' ? 1e6 : 1) / (ms / 1000))
          if (runner && !(rm[name] && rm[name].error)) {
            try {
              const c = await runnerCount(runner, code)
              const n = c[what]
              check(n === expected, `runner alone ${name}: got ${n} of ${expected} ${what}`)
              alone.push(expected / (what === 'bytes' ? 1e6 : 1) / (c.ms / 1000))
            } catch (e) {
              rm[name] = { error: e.message }
              log(`runner alone ${name} failed: ${e.message}`)
              break
            }
          }
        }
        if (runner && !(rm[name] && rm[name].error)) rm[name] = alone
        m[name] = rates
        return cpus
      }

      await guard('linesMBps', async () => {
        const code = `_line = 'x' * 99\nfor _ in range(${cfg.streamBytes / 100}):\n    print(_line)\n`
        m.linesHostCpuMs = await counted('linesMBps', code, 'bytes', cfg.streamBytes, cfg.streamRuns)
      })
      m.rssAfterStreamKiB = statusKiB(kernelProcess(k.pid))
      m.hostRssAfterStreamKiB = Math.round(process.memoryUsage().rss / 1024)

      await guard('oneLineMBps', async () => {
        await counted('oneLineMBps', `print('x' * ${cfg.streamBytes - 1})`, 'bytes', cfg.streamBytes, cfg.streamRuns)
      })

      await guard('framesPerS', async () => {
        const code = `_png = ${JSON.stringify(cfg.png)}\nfor _ in range(${cfg.frames}):\n    display({'image/png': _png}, raw=True)\n`
        await counted('framesPerS', code, 'frames', cfg.frames, cfg.framesRuns)
      })
      if (runner) {
        await runner.close()
        runner = null
      }

      await guard('interruptMs', async () => {
        const s = []
        for (let r = 0; r < cfg.interruptRuns; r++) {
          let t0 = null
          const res = await withTimeout(
            k.execute("import time\nprint('go', flush=True)\ntime.sleep(10)", {
              onEvent: (e) => {
                if (t0 === null && e.type === 'stdout' && e.text.includes('go')) {
                  t0 = now()
                  k.interrupt()
                }
              },
            }),
            20_000,
            'interrupted cell',
          )
          const ms = msSince(t0)
          check(
            res.cancelled || (res.error && res.error.ename === 'KeyboardInterrupt'),
            `interrupt: ${res.status} cancelled=${res.cancelled} ${res.error && res.error.ename}`,
          )
          s.push(ms)
          await sleep(50)
        }
        m.interruptMs = s
      })
      await shutdown(k)
    }

    // KernelPool: a new session's first cell (the target for a prewarmed kernel), then
    // 4 sessions at once. Pauses let a pool's spare kernel (when it has one) get ready.
    // Its floor: one echo round trip after the same idle time. On this VM a process (host
    // thread or kernel) that slept for a second runs slowly for its first milliseconds, so
    // an absolute target alone would measure the machine.
    await guard('newSessionFirstCellMs', async () => {
      const pool = new KernelPool({ kernel: opts, maxSessions: 4, heartbeatIntervalMs: 0 })
      let echo = null
      try {
        echo = (await echoColdStart(python))[1]
      } catch (e) {
        log(`echo floor failed to start: ${e.message}`)
      }
      // The idle before each call: the mode's settle time and, when that is longer, a short
      // one too, since the machine's idle penalty grows with the idle time.
      const idles = [{ key: 'newSessionFirstCellMs', echoKey: 'echoAfterIdleMs', idleMs: cfg.settleMs, name: 'first' }]
      if (cfg.shortSettleMs < cfg.settleMs) {
        idles.push({ key: 'newSessionFirstCellShortIdleMs', echoKey: 'echoAfterShortIdleMs', idleMs: cfg.shortSettleMs, name: 'first-short' })
      }
      try {
        for (const { key, echoKey, idleMs, name } of idles) {
          const s = []
          const e = []
          for (let i = 0; i <= cfg.coldRuns; i++) {
            const sessionId = `${name}-${i}`
            await sleep(idleMs)
            const t0 = now()
            const r = await pool.execute({ sessionId, cells: [{ code: '1+1' }] })
            const ms = msSince(t0)
            check(r.exitCode === 0 && r.output.trim() === '2', `pool 1+1 gave ${JSON.stringify(r.output)}`)
            if (i > 0) s.push(ms)
            await pool.disposeOwner(sessionId)
            if (echo) {
              await sleep(idleMs)
              const t1 = now()
              await echo.request({ type: 'execute' })
              if (i > 0) e.push(msSince(t1))
            }
          }
          m[key] = s
          if (echo) m[echoKey] = e
        }
      } finally {
        if (echo) await echo.close().catch(() => {})
        await pool.disposeAll({ budgetMs: 3000 }).catch(() => {})
      }
    })

    await guard('fourSessionsMs', async () => {
      const s = []
      const off = []
      // Each run with the sandbox, then one without, in the same window.
      for (let r = 0; r < cfg.fourRuns * 2; r++) {
        const sandbox = r % 2 === 0 ? {} : { sandbox: 'off' }
        const pool = new KernelPool({ kernel: { ...opts, ...sandbox }, maxSessions: 4, heartbeatIntervalMs: 0 })
        try {
          await sleep(cfg.settleMs)
          const t0 = now()
          const rs = await Promise.all(
            [0, 1, 2, 3].map((i) => pool.execute({ sessionId: `four-${r}-${i}`, cells: [{ code: '1+1' }] })),
          )
          ;(r % 2 === 0 ? s : off).push(msSince(t0))
          for (const x of rs) check(x.exitCode === 0 && x.output.trim() === '2', `pool 1+1 gave ${JSON.stringify(x.output)}`)
        } finally {
          await pool.disposeAll({ budgetMs: 3000 }).catch(() => {})
        }
      }
      m.fourSessionsMs = s
      m.fourSessionsOffMs = off
    })
  } finally {
    if (runner) await runner.close().catch(() => {})
    for (const k of [...live]) await shutdown(k)
  }
  return m
}

module.exports = { measurePykernel }
