'use strict'
// Attribution: the very runner.py the addon used (found from the kernel's command line),
// driven over plain Node pipes with the NDJSON protocol, no addon. Comparing these rows with
// pykernel's splits the cost between the Python side and the addon/JS side. pykernel.js
// interleaves these runs with its own so both see the same machine.
const path = require('node:path')
const { spawnTracked, LineReader, withTimeout } = require('./proc')

/** What the addon gives its kernels for the runner's bytecode (`fd:<n>`, a descriptor of
 *  this very process: the bench is the addon's host); set by pykernel.js. */
const runnerBytecode = { dir: null }
const { msSince, now } = require('./stats')

class Runner {
  constructor(python, runnerPath) {
    const env = {}
    for (const k of ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TMPDIR']) if (process.env[k]) env[k] = process.env[k]
    // The runner's bytecode the addon holds, handed over as the addon hands it to its
    // kernels: its descriptor, as the child's fd 3.
    const stdio = ['pipe', 'pipe', 'pipe']
    const held = /^fd:(\d+)$/.exec(runnerBytecode.dir || '')
    if (held) {
      stdio.push(Number(held[1]))
      env.PYKERNEL_BYTECODE = 'fd:3'
    }
    this.dir = path.dirname(runnerPath)
    this.child = spawnTracked(python, ['-u', runnerPath], { cwd: path.resolve(__dirname, '..', '..'), env, stdio })
    this.child.stderr.resume()
    this.reader = new LineReader(this.child.stdout)
    this.seq = 0
    this.pending = null
    this.child.on('exit', (code, signal) => {
      if (this.pending) this.pending(new Error(`runner exited ${code ?? signal}`))
    })
  }
  send(obj) {
    this.child.stdin.write(JSON.stringify(obj) + '\n')
  }
  /** Sends a request and feeds its frames to `onFrame` until its done (or ready) frame. */
  request(obj, onFrame) {
    const id = obj.id || `b${++this.seq}`
    return new Promise((resolve, reject) => {
      this.pending = reject
      this.reader.onLine = (line) => {
        let msg
        try {
          msg = JSON.parse(line)
        } catch {
          return
        }
        if (msg.id !== id) return
        if (msg.type === 'done' || msg.type === 'ready') {
          this.reader.onLine = null
          this.pending = null
          resolve(msg)
        } else if (onFrame) onFrame(msg)
      }
      this.send({ ...obj, id })
    })
  }
  init() {
    return this.request({
      type: 'init',
      cwd: path.resolve(__dirname, '..', '..'),
      env: {},
      statusMime: 'application/x-pykernel-status',
      prelude: path.join(this.dir, 'prelude.py'),
      envPrefix: 'PYKERNEL_',
    })
  }
  execute(code, onFrame) {
    return this.request({ type: 'execute', code, silent: false, storeHistory: true }, onFrame)
  }
  async close() {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    this.send({ type: 'exit' })
    this.child.stdin.end()
    await withTimeout(new Promise((r) => this.child.once('exit', r)), 3000, 'runner exit').catch(() => this.child.kill('SIGKILL'))
  }
}

async function oneResult(r) {
  let got = null
  const done = await r.execute('1+1', (f) => {
    if (f.type === 'result') got = f.bundle && f.bundle['text/plain']
  })
  if (done.status !== 'ok' || got !== '2') throw new Error(`runner 1+1 gave ${got} (${done.status})`)
}

/** One cold start of the runner alone: spawn -> ready -> the `1+1` result, in ms. The
 *  pykernel cold-start loop calls it after each of its own samples, so both see the same
 *  machine. */
async function runnerColdStart(python, runnerPath) {
  const t0 = now()
  const r = new Runner(python, runnerPath)
  try {
    await withTimeout(r.init(), 30_000, 'runner init')
    await oneResult(r)
    return msSince(t0)
  } finally {
    await r.close()
  }
}

/** Runs `code` and counts what streams back: stdout bytes and image/png display frames. */
async function runnerCount(r, code) {
  let bytes = 0
  let frames = 0
  const t0 = now()
  const done = await r.execute(code, (f) => {
    if (f.type === 'stdout') bytes += f.data.length
    else if (f.type === 'display' && f.bundle && f.bundle['image/png']) frames++
  })
  const ms = msSince(t0)
  if (done.status !== 'ok') throw new Error(`runner cell failed (${done.status})`)
  return { ms, bytes, frames }
}

/** A started, initialised runner. */
async function startRunner(python, runnerPath) {
  const r = new Runner(python, runnerPath)
  await withTimeout(r.init(), 30_000, 'runner init')
  return r
}

module.exports = { Runner, startRunner, runnerColdStart, runnerOneResult: oneResult, runnerCount, runnerBytecode }
