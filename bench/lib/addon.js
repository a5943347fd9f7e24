'use strict'
// The addon under test. The built `.node` (or PYKERNEL_BENCH_ADDON) is copied to a private
// file at the start of the run and `require('..')` loads that copy (through index.js's
// NAPI_RS_NATIVE_LIBRARY_PATH), so a rebuild in the work tree during the run can neither
// swap nor truncate the library being measured. A debug build is detected from its ELF
// section headers (a `.debug_info` section) and flagged in the report.
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..', '..')

/** Names of the ELF64 little-endian sections of `b`, or null when it is not one. */
function elfSections(b) {
  try {
    if (b.readUInt32BE(0) !== 0x7f454c46 || b[4] !== 2 || b[5] !== 1) return null
    const shoff = Number(b.readBigUInt64LE(0x28))
    const shentsize = b.readUInt16LE(0x3a)
    const shnum = b.readUInt16LE(0x3c)
    const shstrndx = b.readUInt16LE(0x3e)
    const strOff = Number(b.readBigUInt64LE(shoff + shstrndx * shentsize + 0x18))
    const names = []
    for (let i = 0; i < shnum; i++) {
      const n = b.readUInt32LE(shoff + i * shentsize)
      const start = strOff + n
      names.push(b.toString('latin1', start, b.indexOf(0, start)))
    }
    return names
  } catch {
    return null
  }
}

function snapshotAddon() {
  if (process.env.NAPI_RS_NATIVE_LIBRARY_PATH) return { path: process.env.NAPI_RS_NATIVE_LIBRARY_PATH, note: 'NAPI_RS_NATIVE_LIBRARY_PATH set by the caller' }
  const src = path.resolve(process.env.PYKERNEL_BENCH_ADDON || path.join(ROOT, 'pykernel.linux-x64-gnu.node'))
  if (!fs.existsSync(src)) return { path: src, note: 'not built: run `npx napi build --platform --release`' }
  const bytes = fs.readFileSync(src)
  const st = fs.statSync(src)
  const sections = elfSections(bytes)
  const snap = path.join(os.tmpdir(), `pykernel-bench-${process.pid}.node`)
  fs.writeFileSync(snap, bytes, { mode: 0o755 })
  process.on('exit', () => {
    try {
      fs.unlinkSync(snap)
    } catch {}
  })
  process.env.NAPI_RS_NATIVE_LIBRARY_PATH = snap
  return {
    path: src,
    bytes: bytes.length,
    mtime: st.mtime.toISOString(),
    sha256: crypto.createHash('sha256').update(bytes).digest('hex').slice(0, 16),
    debugInfo: sections ? sections.includes('.debug_info') : null,
  }
}

module.exports = { snapshotAddon, ROOT }
