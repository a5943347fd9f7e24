#!/usr/bin/env node
'use strict'
// The far side of a launcher, for `pykernel/testing`: a stand-in for Python that a test
// scripts from its own process. The host runs `<launcher> <python> -u -c <bootstrap> ...`
// (docs/protocol.md#launched-kernels); with `pykernel/testing`'s launcher that is
// `node stand-in.js <socket> <python> -u -c ...`. The words after the socket are ignored.
//
// What this process does itself: its first line tells the host it has the runner
// already (`farPayload`, as a far side whose cache holds it), so the host sends none; it
// drops the link's nonce (`farNonce`), echoes the link's heartbeats, writes the
// controller's frames to the host and ends as the controller tells it to. Every other
// host frame goes to the controller, which answers it (testing.js). So a test decides
// everything but these, and the host sees a kernel process as it would any launched one.
//
// It never outlives its host or its test: when the controller's socket closes it ends at
// once, and when its stdin ends (the host closed it, or is gone) it ends unless the
// controller says to linger, and then within LINGER_CAP_MS all the same.

const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')

/** The longest a stand-in lingers after its stdin ended (a shutdown it was told to ignore). */
const LINGER_CAP_MS = 30_000

const socketPath = process.argv[2]
const hostWords = process.argv.slice(3)

/** Whether heartbeats are echoed (a silent link is a test's choice). */
let answerHeartbeats = true
let ending = false
/** The protocol output was closed on purpose: the process runs on, saying nothing. */
let silenced = false

/** Splits what the host sends into NDJSON lines (no runner comes: the hello said so). */
class HostReader {
  constructor(onLine) {
    this.onLine = onLine
    this.pending = []
  }

  push(chunk) {
    let rest = chunk
    for (let nl = rest.indexOf(0x0a); nl !== -1; nl = rest.indexOf(0x0a)) {
      this.pending.push(rest.subarray(0, nl))
      this.onLine(Buffer.concat(this.pending).toString('utf8'))
      this.pending = []
      rest = rest.subarray(nl + 1)
    }
    if (rest.length) this.pending.push(rest)
  }
}

/** One protocol line to the host. Pipes are written synchronously on Linux and macOS,
 *  so a line is out before an exit that follows it. */
function toHost(frame) {
  if (silenced) return
  try {
    process.stdout.write(`${typeof frame === 'string' ? frame : JSON.stringify(frame)}\n`)
  } catch {
    end({ code: 0 })
  }
}

/** Ends this process as told: `kernelExit` first (the host believes it over the
 *  launcher's status), then the exit code or the signal. */
function end({ code = null, signal = null, stderr = '' } = {}) {
  if (ending) return
  ending = true
  if (stderr) {
    try {
      process.stderr.write(stderr.endsWith('\n') ? stderr : `${stderr}\n`)
    } catch {}
  }
  const number = signal ? os.constants.signals[signal] ?? os.constants.signals.SIGKILL : null
  try {
    if (!silenced) process.stdout.write(`${JSON.stringify({ type: 'kernelExit', code: number ? null : code ?? 0, signal: number })}\n`)
  } catch {}
  if (!number) process.exit(code ?? 0)
  process.kill(process.pid, signal in os.constants.signals ? signal : 'SIGKILL')
  // A signal Node handles or ignores here must not leave the stand-in running.
  setTimeout(() => process.kill(process.pid, 'SIGKILL'), 100)
}

function main() {
  if (!socketPath) {
    process.stderr.write('pykernel/testing stand-in: no controller socket given; use the launcher createStandInKernel() returns\n')
    process.exit(2)
  }
  process.stdout.on('error', () => end({ code: 0 }))
  // First on the link, before anything else, as the far side's bootstrap writes it.
  toHost({ type: 'farPayload', need: false })
  const controller = net.createConnection(socketPath)
  const toController = (message) => {
    if (!controller.destroyed) controller.write(`${JSON.stringify(message)}\n`)
  }
  controller.on('error', (error) => {
    if (!ending) process.stderr.write(`pykernel/testing stand-in: the controller is gone (${error.message})\n`)
    end({ signal: 'SIGKILL' })
  })
  // The test that scripted this kernel is gone (or closed it): nothing can answer.
  controller.on('close', () => end({ signal: 'SIGKILL' }))
  controller.on('connect', () => toController({ op: 'hello', pid: process.pid, argv: hostWords }))

  let fromController = ''
  controller.setEncoding('utf8')
  controller.on('data', (text) => {
    fromController += text
    for (let nl = fromController.indexOf('\n'); nl !== -1; nl = fromController.indexOf('\n')) {
      const line = fromController.slice(0, nl)
      fromController = fromController.slice(nl + 1)
      obey(JSON.parse(line))
    }
  })

  function obey(command) {
    switch (command.op) {
      case 'write':
        toHost(command.line)
        break
      case 'stderr':
        process.stderr.write(command.text)
        break
      case 'heartbeats':
        answerHeartbeats = command.answer
        break
      case 'end':
        end(command)
        break
      case 'closeInput':
        // The host's next write fails (EPIPE), as to a kernel that is going.
        process.stdin.destroy()
        fs.closeSync(0)
        toController({ op: 'inputClosed' })
        break
      case 'silence':
        silenced = true
        fs.closeSync(1)
        break
    }
  }

  const reader = new HostReader((line) => {
    if (!line.trim()) return
    let type
    try {
      type = JSON.parse(line).type
    } catch {
      return
    }
    if (type === 'heartbeat') {
      if (answerHeartbeats) toHost({ type: 'heartbeat' })
      return
    }
    if (type === 'farNonce') return
    toController({ op: 'frame', line })
  })
  process.stdin.on('data', (chunk) => reader.push(chunk))
  let stdinOver = false
  const stdinEnded = () => {
    if (stdinOver) return
    stdinOver = true
    toController({ op: 'stdinEnd' })
    // The controller ends it at once unless the test said to ignore this; even then
    // the stand-in does not stay past the cap.
    setTimeout(() => end({ signal: 'SIGKILL' }), LINGER_CAP_MS).unref()
  }
  process.stdin.on('end', stdinEnded)
  process.stdin.on('error', stdinEnded)
}

main()
