'use strict'
// Children of the bench: spawned with tracking so every one is killed at the end, a line
// reader for NDJSON over pipes, and /proc readings.
const fs = require('node:fs')
const { spawn } = require('node:child_process')

const children = new Set()
const extraPids = new Set() // processes we did not spawn ourselves (Jupyter kernels)

function track(child) {
  children.add(child)
  child.on('exit', () => children.delete(child))
  return child
}

function spawnTracked(cmd, args, options = {}) {
  return track(spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'], ...options }))
}

function isAlive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    return false
  }
}

function cmdline(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ')
  } catch {
    return ''
  }
}

/** Kills every child still running (and each extra pid that is still the process we
 *  were told about: its command line must contain `marker`). */
function killAll() {
  for (const child of children) {
    try {
      child.kill('SIGKILL')
    } catch {}
  }
  for (const { pid, marker } of extraPids) {
    if (isAlive(pid) && cmdline(pid).includes(marker)) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {}
    }
  }
}

/** VmRSS (or another /proc/<pid>/status field) in KiB, or null. */
function statusKiB(pid, field = 'VmRSS') {
  try {
    const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+)`, 'm'))
    return m ? Number(m[1]) : null
  } catch {
    return null
  }
}

/** Lines of a child's stdout, awaited one at a time (or handled by `onLine`). Each chunk is
 *  searched once: a long line arriving in many chunks is joined once, at its end. */
class LineReader {
  constructor(stream) {
    this.parts = []
    this.lines = []
    this.waiters = []
    this.ended = false
    this.onLine = null
    stream.setEncoding('utf8')
    stream.on('data', (chunk) => {
      let start = 0
      let i
      while ((i = chunk.indexOf('\n', start)) >= 0) {
        let line = chunk.slice(start, i)
        if (this.parts.length) {
          this.parts.push(line)
          line = this.parts.join('')
          this.parts = []
        }
        start = i + 1
        if (this.onLine) this.onLine(line)
        else if (this.waiters.length) this.waiters.shift().resolve(line)
        else this.lines.push(line)
      }
      if (start < chunk.length) this.parts.push(chunk.slice(start))
    })
    stream.on('end', () => {
      this.ended = true
      for (const w of this.waiters.splice(0)) w.reject(new Error('stream ended'))
    })
  }

  next() {
    if (this.lines.length) return Promise.resolve(this.lines.shift())
    if (this.ended) return Promise.reject(new Error('stream ended'))
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }))
  }
}

/** Resolves with the child's exit, rejects after `ms`. */
function withTimeout(promise, ms, what) {
  let timer
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}

module.exports = { spawnTracked, track, killAll, extraPids, statusKiB, LineReader, isAlive, cmdline, withTimeout }
