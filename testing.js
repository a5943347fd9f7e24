'use strict'
// `pykernel/testing`: a stand-in kernel for a host's own tests, scripted in JavaScript,
// so a test can make kernels that start slowly or not at all, print, block, die, ignore
// interrupts or never confirm their shutdown, without Python.
//
// It is only a launcher (docs/launchers.md): `createStandInKernel()` returns an argv
// prefix that runs testing/stand-in.js, which speaks the far side of the launcher
// protocol and asks this process, over a Unix socket in a private directory, what to
// answer. So every kernel goes through the pool's own code (starts, deadlines, aborts,
// interrupts, escalation, shutdown, the link watch) exactly as a launched Python would,
// and nothing here can change what a pool guarantees: the host still kills a launched
// kernel's process when it must, whatever the script says.
//
// Callbacks rather than a declarative script: a test's own state (a latch it releases,
// a counter, an AbortSignal) drives the kernel directly, and a declarative table is a
// few lines of JavaScript on top of them.

const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const STAND_IN = path.join(__dirname, 'testing', 'stand-in.js')

/** How long `close()` waits for the stand-ins to end after their socket closed. */
const CLOSE_WAIT_MS = 2_000
/** How long a stand-in that is gone waits to be reaped before it counts as ended. */
const REAP_WAIT_MS = 2_000
/** How long `kernel(n)` and `untilBusy()` wait by default: a kernel that never starts, or
 *  a cell that never comes, fails the test that waits rather than holding it forever. */
const WAIT_MS = 10_000

/** `{ timeoutMs }` of a wait, checked. */
function waitMs(options, what) {
  const ms = options?.timeoutMs ?? WAIT_MS
  if (!Number.isFinite(ms) || ms <= 0) throw new TypeError(`pykernel/testing: ${what}'s timeoutMs must be a positive number, got ${String(ms)}`)
  return ms
}

/** An error a wait rejects with: `ERR_STAND_IN_WAIT`, saying what did not happen. */
function waitError(message) {
  return Object.assign(new Error(`pykernel/testing: ${message}`), { code: 'ERR_STAND_IN_WAIT' })
}

/** The controllers' directories not yet removed: removed when this process exits, also
 *  for a test that never called `close()`. */
const directories = new Set()
process.once('exit', () => {
  for (const dir of directories) fs.rmSync(dir, { recursive: true, force: true })
})

/** A promise and the function that settles it: `await gate.promise` blocks a cell
 *  until the test calls `gate.release()`. */
function latch() {
  let release
  const promise = new Promise((resolve) => {
    release = resolve
  })
  return { promise, release }
}

/** A cell's Python exception, as a script throws it: `throw pythonError('ValueError', 'boom')`. */
function pythonError(ename, evalue, traceback = []) {
  const error = new Error(evalue)
  error.ename = ename
  error.traceback = traceback
  return error
}

/** Until `pid` is no process at all (reaped, not a zombie), for at most REAP_WAIT_MS. */
async function reaped(pid) {
  const until = Date.now() + REAP_WAIT_MS
  while (Date.now() < until) {
    try {
      process.kill(pid, 0)
    } catch (error) {
      if (error.code === 'ESRCH') return
    }
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** One request the host sent: what `onExecute` is given. */
class Cell {
  constructor(frame, index) {
    this.id = frame.id
    this.index = index
    this.code = frame.code
    this.cwd = frame.cwd ?? null
    this.env = frame.env ?? null
    this.silent = Boolean(frame.silent)
    this.storeHistory = frame.storeHistory !== false
    this.interrupted = false
    this.interruptAsked = false
    this.done = false
    this.failed = false
    this.controller = new AbortController()
  }

  /** Aborted when the host interrupts the cell (unless interrupts are ignored). */
  get signal() {
    return this.controller.signal
  }
}

/** One stand-in kernel process, as its script sees it. */
class StandIn {
  constructor(fake, socket, hello, ordinal) {
    this.fake = fake
    this.socket = socket
    /** 1 for the first kernel this fake started, 2 for the next... */
    this.ordinal = ordinal
    /** The stand-in's process id on this machine (the pool's `pid` for it). */
    this.pid = hello.pid
    /** The words the host appended to the launcher (`<python> -u -c <bootstrap> ...`). */
    this.argv = hello.argv
    /** The last `init` the host sent (`cwd`, `env`, ...), or null before the first. */
    this.init = null
    this.inits = 0
    /** Every request the host sent, in order. */
    this.cells = []
    this.interrupts = 0
    /** In-band signals the host sent, by name, in order. */
    this.signals = []
    /** `exit` frames received: a shutdown the host asked for. */
    this.exitRequests = 0
    this.pings = 0
    /** How the process ended, once it has: `{code, signal, reason}`. */
    this.exit = null
    this.executionCount = 0
    this.ignoring = { interrupts: false, exit: false, sigterm: false, sigkill: false, stdinEnd: false, pings: false }
    this.running = null
    this.queue = []
    this.calls = new Map()
    this.busyWaiters = []
    this.nextCall = 1
    this.ending = null
    this.ended = new Promise((resolve) => {
      this.endedResolve = resolve
    })
    this.started = null
  }

  /** Whether the process is still running. */
  get alive() {
    return this.exit === null
  }

  /** Whether a cell is running. */
  get busy() {
    return this.running !== null
  }

  /** Resolves with the running cell once one runs (at once if one does); rejects when
   *  the kernel ends first, or after `timeoutMs` (default 10 s) without one. */
  untilBusy(options) {
    const ms = waitMs(options, 'untilBusy()')
    if (this.running) return Promise.resolve(this.running)
    if (this.exit || this.closing) return Promise.reject(waitError(`kernel ${this.ordinal} ended; no cell will run on it`))
    return new Promise((resolve, reject) => {
      const waiter = {
        resolve: (cell) => {
          clearTimeout(timer)
          resolve(cell)
        },
        reject: (err) => {
          clearTimeout(timer)
          reject(err)
        },
      }
      const timer = setTimeout(() => {
        this.busyWaiters = this.busyWaiters.filter((w) => w !== waiter)
        reject(waitError(`no cell ran on kernel ${this.ordinal} within ${ms} ms`))
      }, ms)
      this.busyWaiters.push(waiter)
    })
  }

  /** Makes the stand-in ignore what it would otherwise obey. `shutdown: true` is all of
   *  `exit`, `stdinEnd`, `sigterm` and `sigkill`: a kernel whose shutdown the pool cannot
   *  confirm within its grace. (The host still kills the process when it cuts the link,
   *  1 s after its in-band SIGKILL: a launched kernel cannot outlive that.) */
  ignore(what) {
    const { shutdown, heartbeats, ...rest } = what
    if (shutdown) Object.assign(this.ignoring, { exit: true, stdinEnd: true, sigterm: true, sigkill: true })
    for (const [key, value] of Object.entries(rest)) {
      if (!(key in this.ignoring)) throw new TypeError(`pykernel/testing: ignore() knows no '${key}' (known: shutdown, heartbeats, ${Object.keys(this.ignoring).join(', ')})`)
      this.ignoring[key] = Boolean(value)
    }
    if (heartbeats !== undefined) this.command({ op: 'heartbeats', answer: !heartbeats })
    return this
  }

  stdout(text) {
    this.emit({ type: 'stdout', data: String(text) })
  }

  stderr(text) {
    this.emit({ type: 'stderr', data: String(text) })
  }

  /** A display, as the prelude's `display()` sends it: `{mime: value}`. */
  display(bundle, { displayId, update } = {}) {
    this.emit({ type: 'display', bundle, ...(displayId ? { displayId } : {}), ...(update ? { update: true } : {}) })
  }

  clear(wait = false) {
    this.emit({ type: 'clear', wait })
  }

  /** The cell's value: a string is its `text/plain`, an object a MIME bundle. */
  result(value) {
    const bundle = typeof value === 'object' && value !== null ? value : { 'text/plain': String(value) }
    this.emit({ type: 'result', bundle })
  }

  /** Fails the running cell with a Python exception (it ends when the script returns). */
  error(ename, evalue, traceback = []) {
    if (this.running) this.running.failed = true
    this.emit({ type: 'error', ename, evalue, traceback })
  }

  /** A bridge call from the running cell, answered by the host's `onCall`. */
  call(name, args) {
    const cell = this.running
    if (!cell) return Promise.reject(new Error('pykernel/testing: call() needs a running cell'))
    const callId = `stand-in-${this.nextCall++}`
    return new Promise((resolve, reject) => {
      this.calls.set(callId, { resolve, reject })
      this.write({ type: 'call', id: cell.id, callId, name, args })
    })
  }

  /** Ends the process now, with an exit code or by a signal (`'SIGKILL'`, `'SIGSEGV'`):
   *  a running cell's request fails as when Python dies. Text for its stderr, optional.
   *  Resolves with the exit once the process is gone. */
  die({ code, signal, stderr } = {}) {
    return this.end({ code: signal ? null : code ?? 1, signal: signal ?? null, stderr, reason: 'die' })
  }

  /** Closes the protocol output and keeps running: to the host, a kernel that stopped
   *  talking (it ends it, as it would a Python whose pipe a cell closed). */
  silence() {
    this.command({ op: 'silence' })
  }

  /** Closes its stdin and runs on: the host's next write to it fails, as to a kernel
   *  that is ending (the host has not seen it end yet). Resolves once it is closed. */
  closeInput() {
    this.command({ op: 'closeInput' })
    return new Promise((resolve) => {
      this.inputClosed = resolve
    })
  }

  emit(frame) {
    // Output of a cell that has ended has no request to go to (the host drops it).
    if (this.running) this.write({ ...frame, id: this.running.id })
  }

  write(frame) {
    this.command({ op: 'write', line: JSON.stringify(frame) })
  }

  command(message) {
    if (!this.socket.destroyed) this.socket.write(`${JSON.stringify(message)}\n`)
  }

  end({ code = null, signal = null, stderr = '', reason }) {
    if (!this.ending && this.alive) {
      this.ending = { code, signal, reason }
      this.command({ op: 'end', code, signal, stderr })
    }
    return this.ended
  }

  /** The stand-in's socket closed: its process is gone, or going. */
  async closed() {
    if (this.exit || this.closing) return
    this.closing = true
    for (const waiter of this.busyWaiters.splice(0)) waiter.reject(waitError(`kernel ${this.ordinal} ended before a cell ran`))
    // Not ended by its script: the host killed it (the link cut after an in-band
    // SIGKILL, a start that was given up) or the fake was closed.
    const exit = this.ending ?? { code: null, signal: 'SIGKILL', reason: 'killed' }
    for (const { reject } of this.calls.values()) reject(new Error('pykernel/testing: the kernel ended'))
    this.calls.clear()
    // Ended once its parent (the host) has reaped it: by then the host knows, so what a
    // test does next meets a kernel the pool has seen end, never one ending meanwhile.
    await reaped(this.pid)
    this.exit = exit
    this.endedResolve(exit)
  }

  async frame(frame) {
    switch (frame.type) {
      case 'init':
        this.init = frame
        this.inits++
        try {
          await this.started
        } catch (error) {
          this.end({ code: 1, stderr: `stand-in kernel: onStart failed: ${error?.stack ?? error}`, reason: 'start failed' })
          return
        }
        this.write({ type: 'ready', id: frame.id, pid: this.pid, python: '3.12.0', executable: 'pykernel-stand-in' })
        return
      case 'execute':
        this.queue.push(frame)
        if (!this.running) this.next()
        return
      case 'interrupt':
        this.interrupt(frame.id)
        return
      case 'signal':
        this.signals.push(frame.signal)
        if (frame.signal === 'SIGINT') this.interrupt(this.running?.id)
        else if (frame.signal === 'SIGTERM' && !this.ignoring.sigterm) this.end({ signal: 'SIGTERM', reason: 'SIGTERM' })
        else if (frame.signal === 'SIGKILL' && !this.ignoring.sigkill) this.end({ signal: 'SIGKILL', reason: 'SIGKILL' })
        return
      case 'exit':
        this.exitRequests++
        if (!this.ignoring.exit) this.end({ code: 0, reason: 'exit' })
        return
      case 'stdinEnd':
        // As a launched kernel ends when its link closes: its supervisor kills it.
        if (!this.ignoring.stdinEnd) this.end({ signal: 'SIGKILL', reason: 'stdin closed' })
        return
      case 'ping':
        this.pings++
        if (!this.ignoring.pings) this.write({ type: 'pong', id: frame.id })
        return
      case 'preload':
        this.write({ type: 'preloaded', id: frame.id, errors: {} })
        return
      case 'isComplete':
        this.write({ type: 'completeness', id: frame.id, status: 'complete' })
        return
      case 'reply': {
        const call = this.calls.get(frame.callId)
        if (!call) return
        this.calls.delete(frame.callId)
        if (frame.ok) call.resolve(frame.value)
        else call.reject(new Error(frame.error))
        return
      }
    }
  }

  /** The host's `interrupt` frame, and the in-band SIGINT that follows it: one interrupt. */
  interrupt(id) {
    const cell = this.running
    if (!cell || cell.id !== id || cell.interruptAsked) return
    cell.interruptAsked = true
    this.interrupts++
    if (this.ignoring.interrupts) return
    cell.interrupted = true
    cell.controller.abort(new Error('interrupted'))
    cell.failed = true
    this.emit({ type: 'error', ename: 'KeyboardInterrupt', evalue: '', traceback: [] })
    this.finish(cell, true)
  }

  next() {
    const frame = this.queue.shift()
    if (!frame) return
    const cell = new Cell(frame, this.cells.length)
    this.cells.push(cell)
    this.running = cell
    this.write({ type: 'started', id: cell.id })
    for (const waiter of this.busyWaiters.splice(0)) waiter.resolve(cell)
    const script = this.fake.onExecute
    Promise.resolve()
      .then(() => (script ? script(cell, this) : undefined))
      .then(
        (value) => {
          if (cell.done) return
          if (value !== undefined) this.result(value)
          this.finish(cell, false)
        },
        (error) => {
          if (cell.done) return
          this.error(error?.ename ?? error?.name ?? 'Error', error?.message ?? String(error), error?.traceback ?? [])
          this.finish(cell, false)
        },
      )
  }

  finish(cell, cancelled) {
    cell.done = true
    if (!cell.silent && cell.storeHistory) this.executionCount++
    this.emit({
      type: 'done',
      status: cell.failed ? 'error' : 'ok',
      executionCount: this.executionCount,
      cancelled,
      stdinRequested: false,
    })
    for (const [callId, { reject }] of this.calls) {
      reject(new Error('pykernel/testing: the cell ended before the call was answered'))
      this.calls.delete(callId)
    }
    this.running = null
    this.next()
  }
}

/** Starts the controller; its `launcher` goes in `kernel: { launcher }` (or a request's). */
async function createStandInKernel(options = {}) {
  const { onStart, onExecute } = options
  for (const [name, fn] of Object.entries({ onStart, onExecute })) {
    if (fn !== undefined && typeof fn !== 'function') throw new TypeError(`pykernel/testing: ${name} must be a function`)
  }
  // Private to this user: nobody else can connect and script a kernel.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-stand-in-'))
  fs.chmodSync(dir, 0o700)
  directories.add(dir)
  const socketPath = path.join(dir, 'controller.sock')
  const kernels = []
  const sockets = new Set()
  const fake = {
    launcher: [process.execPath, STAND_IN, socketPath],
    kernels,
    /** The scripts; either may be replaced between calls. */
    onStart,
    onExecute,
    /** How many kernel processes have started (connected back). */
    get starts() {
      return kernels.length
    },
    /** The stand-ins whose process is still running. */
    get running() {
      return kernels.filter((k) => k.alive)
    },
    /** `exit` frames received, over every kernel: shutdowns the host asked for. */
    get exitRequests() {
      return kernels.reduce((n, k) => n + k.exitRequests, 0)
    },
    /** Messages from a stand-in process that could not be read; each such process was
     *  cut off (its kernel then ends as one whose link was lost). */
    errors: [],
    /** Resolves with the `n`-th kernel (1-based) once it has started; rejects after
     *  `timeoutMs` (default 10 s), or when the controller is closed first. */
    kernel(n, options) {
      if (!Number.isInteger(n) || n < 1) throw new TypeError(`pykernel/testing: kernel(n) takes a whole number from 1, got ${String(n)}`)
      const ms = waitMs(options, 'kernel(n)')
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting = waiting.filter((w) => w !== look)
          reject(waitError(`kernel ${n} did not start within ${ms} ms (${kernels.length} started)`))
        }, ms)
        const look = (closedError) => {
          if (closedError) {
            clearTimeout(timer)
            reject(closedError)
          } else if (kernels[n - 1]) {
            clearTimeout(timer)
            resolve(kernels[n - 1])
          } else {
            waiting.push(look)
          }
        }
        look()
      })
    },
    /** Ends every stand-in and removes the socket's directory. */
    async close() {
      for (const look of waiting.splice(0)) look(waitError('the controller was closed'))
      const closed = new Promise((resolve) => server.close(() => resolve()))
      for (const socket of sockets) socket.destroy()
      await closed
      await Promise.race([
        Promise.all(kernels.map((k) => k.ended)),
        new Promise((resolve) => setTimeout(resolve, CLOSE_WAIT_MS).unref()),
      ])
      fs.rmSync(dir, { recursive: true, force: true })
      directories.delete(dir)
    },
  }
  let waiting = []
  const server = net.createServer((socket) => {
    sockets.add(socket)
    let kernel = null
    let buffered = ''
    socket.setEncoding('utf8')
    socket.on('error', () => {})
    socket.on('close', () => {
      sockets.delete(socket)
      if (kernel) kernel.closed()
    })
    socket.on('data', (text) => {
      buffered += text
      for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl)
        buffered = buffered.slice(nl + 1)
        let message, frame
        try {
          message = JSON.parse(line)
          if (message?.op === 'frame') frame = JSON.parse(message.line)
        } catch (err) {
          // Our own stand-in writes these lines; one that cannot be read is a broken
          // process, not a reason to throw in this process's event loop.
          fake.errors.push(new Error(`pykernel/testing: unreadable message from a stand-in (${err.message}): ${line.slice(0, 200)}`))
          socket.destroy()
          return
        }
        if (message.op === 'hello') {
          kernel = new StandIn(fake, socket, message, kernels.length + 1)
          kernels.push(kernel)
          kernel.started = Promise.resolve().then(() => fake.onStart?.(kernel))
          kernel.started.catch(() => {})
          const woken = waiting
          waiting = []
          for (const look of woken) look()
        } else if (kernel && message.op === 'frame') {
          kernel.frame(frame)
        } else if (kernel && message.op === 'inputClosed') {
          kernel.inputClosed?.()
        } else if (kernel && message.op === 'stdinEnd') {
          kernel.frame({ type: 'stdinEnd' })
        }
      }
    })
  })
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(socketPath, resolve)
  })
  // A test that forgets close() is not kept alive by the controller.
  server.unref()
  return fake
}

module.exports = { createStandInKernel, latch, pythonError }
