'use strict'
// The Jupyter side: bench/jupyter_bench.py run with the venv's python as a child; it times
// inside Python and prints one JSON object. Kernel pids it reports on stderr are tracked so
// that a kernel it failed to shut down is killed at the end.
const path = require('node:path')
const { spawnTracked, extraPids, withTimeout } = require('./proc')

const SCRIPT = path.resolve(__dirname, '..', 'jupyter_bench.py')

async function measureJupyter(python, cfg, log, timeoutMs) {
  const child = spawnTracked(python, [SCRIPT, JSON.stringify(cfg)])
  let stdout = ''
  let stderrTail = ''
  child.stdout.setEncoding('utf8')
  child.stderr.setEncoding('utf8')
  child.stdout.on('data', (d) => (stdout += d))
  let partial = ''
  child.stderr.on('data', (d) => {
    partial += d
    const lines = partial.split('\n')
    partial = lines.pop()
    for (const line of lines) {
      const m = line.match(/^#pid (\d+)$/)
      if (m) extraPids.add({ pid: Number(m[1]), marker: 'ipykernel' })
      else if (line.trim() && !line.includes('running over TCP without encryption')) {
        stderrTail = (stderrTail + line + '\n').slice(-2000)
      }
    }
  })
  const exit = new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({ code, signal }))
  })
  let status
  try {
    status = await withTimeout(exit, timeoutMs, 'the Jupyter bench')
  } catch (e) {
    child.kill('SIGTERM')
    await withTimeout(exit, 10_000, 'Jupyter bench SIGTERM').catch(() => child.kill('SIGKILL'))
    throw e
  }
  let out
  try {
    out = JSON.parse(stdout.trim().split('\n').pop())
  } catch {
    throw new Error(`Jupyter bench exited ${status.code ?? status.signal} without results: ${stderrTail.trim().split('\n').pop() || 'no output'}`)
  }
  if (out.error) throw new Error(`Jupyter bench failed: ${out.error}`)
  if (stderrTail.trim()) log(`jupyter stderr: ${stderrTail.trim().split('\n').slice(-3).join(' | ')}`)
  return out
}

module.exports = { measureJupyter }
