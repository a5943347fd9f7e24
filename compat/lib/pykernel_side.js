'use strict'
// The pykernel side: each session in a fresh kernel (`Kernel.start` with the given
// interpreter, the session's directory as cwd, default options otherwise, as an agent
// host starts one), each cell through `kernel.execute`, observed as the Jupyter driver
// observes ipykernel (same fields, raw; compare.js normalizes).
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..', '..')
const CELL_TIMEOUT_MS = Number(process.env.PYKERNEL_COMPAT_CELL_TIMEOUT || 60) * 1000
const IMAGE_MIMES = ['image/png', 'image/jpeg']

/** [width, height] of a base64 PNG or JPEG, or null. */
function imageSize(mime, data) {
  let raw
  try {
    raw = Buffer.from(String(data), 'base64')
  } catch {
    return null
  }
  if (mime === 'image/png' && raw.length >= 24 && raw.subarray(0, 8).equals(Buffer.from('89504e470d0a1a0a', 'hex'))) {
    return [raw.readUInt32BE(16), raw.readUInt32BE(20)]
  }
  if (mime === 'image/jpeg' && raw[0] === 0xff && raw[1] === 0xd8) {
    let i = 2
    while (i + 9 < raw.length) {
      if (raw[i] !== 0xff) return null
      const marker = raw[i + 1]
      if (marker === 0xc0 || marker === 0xc1 || marker === 0xc2) return [raw.readUInt16BE(i + 7), raw.readUInt16BE(i + 5)]
      i += 2 + raw.readUInt16BE(i + 2)
    }
  }
  return null
}

/** What is kept of a MIME bundle: its types, its text/plain, its images' sizes. */
function bundle(data) {
  const images = IMAGE_MIMES.filter((m) => m in data).map((mime) => ({ mime, size: imageSize(mime, data[mime]) }))
  return { mimes: Object.keys(data).sort(), text: data['text/plain'] ?? null, images }
}

async function runCell(kernel, code) {
  const cell = { status: null, ename: null, evalue: null, stdout: '', stderr: '', result: null, displays: [], updates: 0, clears: 0, outputs: [] }
  const t0 = performance.now()
  const r = await kernel.execute(code, {
    timeoutMs: CELL_TIMEOUT_MS,
    onEvent: (e) => {
      if (e.type === 'stdout' || e.type === 'stderr') cell.outputs.push(e.type)
      else if (e.type === 'display' && e.update) {
        cell.updates += 1
        cell.outputs.push('update')
      } else if (e.type === 'display') {
        cell.displays.push(bundle(e.bundle))
        cell.outputs.push('display')
      } else if (e.type === 'result') cell.outputs.push('result')
      else if (e.type === 'clear') {
        cell.clears += 1
        cell.outputs.push('clear')
      } else if (e.type === 'error') cell.outputs.push('error')
    },
  })
  cell.ms = Math.round((performance.now() - t0) * 10) / 10
  cell.status = r.timedOut ? 'timeout' : r.kernelDied ? 'died' : r.status
  cell.stdout = r.stdout
  cell.stderr = r.stderr
  if (r.result) cell.result = bundle(r.result)
  if (r.error) {
    cell.ename = r.error.ename
    cell.evalue = r.error.evalue
  }
  return cell
}

/**
 * Runs each session ({name, cwd, cells: [{id, code}]}) in its own kernel; calls
 * `onCell(observation)` per cell (with `session` and `id`), or with `{session,
 * sessionError}` when a kernel could not start or died (the session's later cells are
 * then left out).
 */
async function runSessions(sessions, { python, onCell, addon = require(ROOT) }) {
  for (const session of sessions) {
    let kernel
    try {
      kernel = await addon.Kernel.start({ interpreter: python, cwd: session.cwd })
      for (const c of session.cells) {
        const obs = await runCell(kernel, c.code)
        onCell({ ...obs, session: session.name, id: c.id })
        if (obs.status === 'died') throw new Error(`the kernel died in cell ${c.id}: ${obs.evalue}`)
      }
    } catch (e) {
      onCell({ session: session.name, sessionError: e.message })
    } finally {
      if (kernel) await kernel.shutdown({ graceMs: 2000 }).catch(() => {})
    }
  }
}

module.exports = { runSessions, runCell, imageSize }
