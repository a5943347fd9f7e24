#!/usr/bin/env node
'use strict'
// `npm run build:targets [-- <target> ...]`: the release addons of the platform packages,
// cross-compiled from this Linux machine with cargo-zigbuild, each written to
// `npm/<platform>/`; then `scripts/check-binaries.js` checks them.
//
// The glibc builds link against glibc 2.17 (zig ships its headers and stubs), so the
// addon loads on every mainstream distribution of the last decade; the musl builds are
// for Alpine. With no argument it builds the four Linux targets. macOS addons are built
// on macOS runners (`.github/workflows/release.yml`).
//
// Tools: rustup's targets, and cargo-zigbuild + zig from PyPI in `.venv-zig` (made here,
// pinned), so nothing needs a system package.
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
const venv = path.join(root, '.venv-zig')
const ZIG_TOOLS = ['cargo-zigbuild==0.24.1', 'ziglang==0.17.1']
// Cross builds keep their own target directory: sharing `target/` with the native build,
// their compiler settings (zig as CC, other flags for the build scripts) made the next
// `npm run build` recompile everything.
const crossTargetDir = path.join(root, 'target', 'cross')

/** Rust target (with the glibc version cargo-zigbuild links against) -> platform directory. */
const TARGETS = {
  'x86_64-unknown-linux-gnu': { build: 'x86_64-unknown-linux-gnu.2.17', platform: 'linux-x64-gnu' },
  'aarch64-unknown-linux-gnu': { build: 'aarch64-unknown-linux-gnu.2.17', platform: 'linux-arm64-gnu' },
  'x86_64-unknown-linux-musl': { build: 'x86_64-unknown-linux-musl', platform: 'linux-x64-musl' },
  'aarch64-unknown-linux-musl': { build: 'aarch64-unknown-linux-musl', platform: 'linux-arm64-musl' },
}

function sh(cmd, args, options = {}) {
  console.log(`$ ${cmd} ${args.join(' ')}`)
  execFileSync(cmd, args, { stdio: 'inherit', cwd: root, ...options })
}

function zigTools() {
  const stamp = path.join(venv, '.tools')
  if (fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === ZIG_TOOLS.join('\n')) return
  sh(process.env.PYTHON || 'python3', ['-m', 'venv', '--clear', venv])
  sh(path.join(venv, 'bin', 'python'), ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', ...ZIG_TOOLS])
  fs.writeFileSync(stamp, ZIG_TOOLS.join('\n'))
}

function main(argv) {
  const wanted = argv.length ? argv : Object.keys(TARGETS)
  for (const target of wanted) {
    if (!TARGETS[target]) {
      console.error(`build-targets: unknown target ${target}; known: ${Object.keys(TARGETS).join(', ')}`)
      process.exit(2)
    }
  }
  if (process.platform !== 'linux') {
    console.error('build-targets: cross-compiles from Linux only; on macOS run `npm run build`')
    process.exit(2)
  }
  zigTools()
  sh('rustup', ['target', 'add', ...wanted])
  // The venv first: `cargo zigbuild` and the `python -m ziglang` it falls back on.
  const env = { ...process.env, PATH: `${path.join(venv, 'bin')}${path.delimiter}${process.env.PATH}` }
  const napi = path.join(root, 'node_modules', '.bin', 'napi')
  for (const target of wanted) {
    const { build, platform } = TARGETS[target]
    const out = fs.mkdtempSync(path.join(os.tmpdir(), `pykernel-${platform}-`))
    try {
      sh(napi, ['build', '--platform', '--release', '--target', build, '--cross-compile', '--target-dir', crossTargetDir, '--output-dir', out], { env })
      const file = `pykernel.${platform}.node`
      fs.copyFileSync(path.join(out, file), path.join(root, 'npm', platform, file))
      console.log(`-> npm/${platform}/${file}`)
    } finally {
      fs.rmSync(out, { recursive: true, force: true })
    }
  }
  sh(process.execPath, [path.join(__dirname, 'check-binaries.js'), ...wanted.map((t) => TARGETS[t].platform)])
}

main(process.argv.slice(2))
