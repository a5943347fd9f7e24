'use strict'
// Summaries of repeated samples: median, p90, p99 (nearest rank), min, max, mean.

function summarize(samples) {
  if (!Array.isArray(samples) || samples.length === 0) return null
  const s = [...samples].sort((a, b) => a - b)
  const n = s.length
  const rank = (p) => s[Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1))]
  const median = n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2
  const mean = s.reduce((a, b) => a + b, 0) / n
  return { n, median, p90: rank(90), p99: rank(99), min: s[0], max: s[n - 1], mean }
}

/** Milliseconds since `t0` (a process.hrtime.bigint()). */
function msSince(t0) {
  return Number(process.hrtime.bigint() - t0) / 1e6
}

const now = () => process.hrtime.bigint()

/** process.cpuUsage() delta in microseconds (user + system). */
function cpuSince(c0) {
  const d = process.cpuUsage(c0)
  return d.user + d.system
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

module.exports = { summarize, msSince, now, cpuSince, sleep }
