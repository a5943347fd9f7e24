'use strict'
// The floors, measured from Node with the same interpreter: a bare `python -c pass`, a bare
// pipe (a Python child printing to stdout, read by Node) and a minimal NDJSON echo server
// over pipes (bench/echo_server.py).
const path = require('node:path')
const { spawnTracked, LineReader, statusKiB, withTimeout } = require('./proc')
const { msSince, now, cpuSince, sleep } = require('./stats')

const BENCH = path.resolve(__dirname, '..')
const ECHO = path.join(BENCH, 'echo_server.py')
const PIPE = path.join(BENCH, 'pipe_floor.py')

function exited(child) {
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('exit', (code, signal) => resolve({ code, signal }))
  })
}

/** Spawn -> exit of `python -c pass`. */
async function spawnPass(python) {
  const t0 = now()
  const child = spawnTracked(python, ['-c', 'pass'], { stdio: 'ignore' })
  await withTimeout(exited(child), 30_000, 'python -c pass')
  return msSince(t0)
}

/** RSS of an idle bare interpreter (it blocks reading stdin after saying R). */
async function bareRss(python) {
  const child = spawnTracked(python, ['-c', "import sys; sys.stdout.write('R\\n'); sys.stdout.flush(); sys.stdin.readline()"])
  const reader = new LineReader(child.stdout)
  await withTimeout(reader.next(), 30_000, 'bare interpreter')
  await sleep(200)
  const kib = statusKiB(child.pid)
  child.stdin.end()
  await exited(child)
  return kib
}

/** MB/s of `mode` (lines | oneline) through a bare pipe; `unbuffered` runs python -u. */
async function barePipe(python, mode, totalBytes, unbuffered) {
  const args = [...(unbuffered ? ['-u'] : []), PIPE, mode, String(totalBytes)]
  const child = spawnTracked(python, args)
  const done = exited(child)
  child.stdout.setEncoding('utf8')
  let got = 0
  let t0 = null
  let pending = ''
  await new Promise((resolve, reject) => {
    child.on('error', reject)
    child.stdout.on('data', (chunk) => {
      if (t0 === null) {
        pending += chunk
        const i = pending.indexOf('\n')
        if (i < 0) return
        got += pending.length - i - 1
        t0 = now()
        child.stdin.write('go\n')
        resolve()
        return
      }
      got += chunk.length
    })
  })
  await new Promise((resolve) => child.stdout.on('end', resolve))
  const ms = msSince(t0)
  await done
  if (got !== totalBytes) throw new Error(`bare pipe: got ${got} of ${totalBytes} bytes`)
  return totalBytes / 1e6 / (ms / 1000)
}

class Echo {
  constructor(python) {
    this.child = spawnTracked(python, ['-u', ECHO])
    this.reader = new LineReader(this.child.stdout)
    this.exit = exited(this.child)
    this.seq = 0
  }
  send(obj) {
    this.child.stdin.write(JSON.stringify(obj) + '\n')
  }
  async request(obj) {
    const id = `r${++this.seq}`
    this.send({ ...obj, id })
    for (;;) {
      const msg = JSON.parse(await this.reader.next())
      if (msg.type === 'done' && msg.id === id) return msg
    }
  }
  async close() {
    this.send({ type: 'exit' })
    this.child.stdin.end()
    await withTimeout(this.exit, 5000, 'echo server exit').catch(() => this.child.kill('SIGKILL'))
  }
}

/** Spawn -> first answer of the echo server; returns [ms, server]. */
async function echoColdStart(python) {
  const t0 = now()
  const echo = new Echo(python)
  await withTimeout(echo.request({ type: 'execute' }), 30_000, 'echo server')
  return [msSince(t0), echo]
}

async function measureFloors(python, cfg, log) {
  const f = {}
  const guard = async (name, fn) => {
    try {
      await fn()
    } catch (e) {
      f[name] = { error: e.message }
      log(`floor ${name} failed: ${e.message}`)
    }
  }

  await guard('pythonPassMs', async () => {
    await spawnPass(python)
    const s = []
    for (let i = 0; i < cfg.passRuns; i++) s.push(await spawnPass(python))
    f.pythonPassMs = s
  })
  if (cfg.basePython && cfg.basePython !== python) {
    await guard('basePythonPassMs', async () => {
      await spawnPass(cfg.basePython)
      const s = []
      for (let i = 0; i < cfg.passRuns; i++) s.push(await spawnPass(cfg.basePython))
      f.basePythonPassMs = s
    })
  }
  await guard('bareRssKiB', async () => {
    f.bareRssKiB = await bareRss(python)
  })

  await guard('coldStartMs', async () => {
    const [, warm] = await echoColdStart(python)
    await warm.close()
    const s = []
    for (let i = 0; i < cfg.coldRuns; i++) {
      const [ms, echo] = await echoColdStart(python)
      s.push(ms)
      await echo.close()
    }
    f.coldStartMs = s
  })

  await guard('warmRoundTripMs', async () => {
    const [, echo] = await echoColdStart(python)
    try {
      await sleep(200)
      f.rssAfterStartKiB = statusKiB(echo.child.pid)
      for (let i = 0; i < cfg.warmup; i++) await echo.request({ type: 'execute' })
      const s = []
      const c0 = process.cpuUsage()
      for (let i = 0; i < cfg.warmRuns; i++) {
        const t0 = now()
        await echo.request({ type: 'execute' })
        s.push(msSince(t0))
      }
      f.hostCpuPerCellUs = cpuSince(c0) / cfg.warmRuns
      f.warmRoundTripMs = s

      // Display frames as NDJSON lines, each parsed by Node.
      const rates = []
      for (let r = 0; r < cfg.framesRuns; r++) {
        let frames = 0
        const id = `f${r}`
        const t0 = now()
        await new Promise((resolve) => {
          echo.reader.onLine = (line) => {
            const msg = JSON.parse(line)
            if (msg.type === 'display' && msg.bundle['image/png']) frames++
            else if (msg.type === 'done' && msg.id === id) {
              echo.reader.onLine = null
              resolve()
            }
          }
          echo.send({ type: 'frames', id, n: cfg.frames, b64: cfg.png })
        })
        const ms = msSince(t0)
        if (frames !== cfg.frames) throw new Error(`echo frames: got ${frames} of ${cfg.frames}`)
        rates.push(cfg.frames / (ms / 1000))
      }
      f.framesPerS = rates

      // SIGINT while sleeping -> the cancelled answer.
      const ints = []
      for (let r = 0; r < cfg.interruptRuns; r++) {
        const id = `s${r}`
        echo.send({ type: 'sleep', id, seconds: 30 })
        for (;;) {
          const msg = JSON.parse(await withTimeout(echo.reader.next(), 30_000, 'echo started'))
          if (msg.type === 'started' && msg.id === id) break
        }
        const t0 = now()
        echo.child.kill('SIGINT')
        for (;;) {
          const msg = JSON.parse(await withTimeout(echo.reader.next(), 30_000, 'echo interrupt'))
          if (msg.type === 'done' && msg.id === id) {
            if (!msg.cancelled) throw new Error('echo sleep was not cancelled')
            break
          }
        }
        ints.push(msSince(t0))
      }
      f.interruptMs = ints
    } finally {
      await echo.close()
    }
  })

  await guard('fourSessionsMs', async () => {
    const s = []
    for (let r = 0; r < cfg.fourRuns; r++) {
      const t0 = now()
      const started = await Promise.all([0, 1, 2, 3].map(() => echoColdStart(python)))
      s.push(msSince(t0))
      await Promise.all(started.map(([, e]) => e.close()))
    }
    f.fourSessionsMs = s
  })

  for (const [name, mode] of [
    ['linesMBps', 'lines'],
    ['oneLineMBps', 'oneline'],
  ]) {
    await guard(name, async () => {
      const s = []
      for (let r = 0; r < cfg.streamRuns; r++) s.push(await barePipe(python, mode, cfg.streamBytes, true))
      f[name] = s
    })
  }
  await guard('linesBufferedMBps', async () => {
    const s = []
    for (let r = 0; r < cfg.streamRuns; r++) s.push(await barePipe(python, 'lines', cfg.streamBytes, false))
    f.linesBufferedMBps = s
  })
  return f
}

module.exports = { measureFloors, echoColdStart }
