#!/usr/bin/env node
'use strict'
// `npm run pack`: every installable tarball in `dist/`.
//
// - `dist/pykernel-<version>.tgz`, the main package: JavaScript, types, the runner's
//   sources, the CLI, README, LICENSE, CHANGELOG, and no addon. Its package.json is the
//   repository's without scripts or devDependencies, plus `optionalDependencies` on every
//   platform package at the same version (what `napi prepublish` writes at release): npm
//   installs the one whose `os`/`cpu`/`libc` match the machine, and nothing compiles.
// - `dist/pykernel-<platform>-<version>.tgz` for each `npm/<platform>/` that holds its
//   addon (`npm run build:targets` builds the Linux ones; CI on macOS the others).
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
// `PYKERNEL_DIST` moves the output (the tests pack into a temporary directory).
const dist = path.resolve(process.env.PYKERNEL_DIST || path.join(root, 'dist'))

function npmPack(dir) {
  const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', dist], { cwd: dir, encoding: 'utf8' })
  return out.trim().split('\n').pop()
}

function main() {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
  fs.rmSync(dist, { recursive: true, force: true })
  fs.mkdirSync(dist)

  const platforms = fs.readdirSync(path.join(root, 'npm')).sort()
  const built = []
  for (const platform of platforms) {
    const dir = path.join(root, 'npm', platform)
    const sub = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))
    if (sub.version !== pkg.version) throw new Error(`npm/${platform}/package.json is version ${sub.version}, not ${pkg.version}`)
    if (fs.existsSync(path.join(dir, `pykernel.${platform}.node`))) built.push(npmPack(dir))
  }

  // The main package, staged so the repository's package.json stays the developers'.
  const stage = path.join(dist, '.stage')
  fs.mkdirSync(stage)
  for (const entry of [...pkg.files, 'README.md', 'LICENSE', 'CHANGELOG.md']) {
    fs.cpSync(path.join(root, entry), path.join(stage, entry), {
      recursive: true,
      filter: (src) => !/(^|\/)__pycache__(\/|$)|\.pyc$/.test(src),
    })
  }
  const { scripts, devDependencies, ...published } = pkg
  published.files = [...pkg.files, 'CHANGELOG.md']
  published.optionalDependencies = Object.fromEntries(
    platforms.map((platform) => [JSON.parse(fs.readFileSync(path.join(root, 'npm', platform, 'package.json'), 'utf8')).name, pkg.version]),
  )
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(published, null, 2)}\n`)
  const main = npmPack(stage)
  fs.rmSync(stage, { recursive: true, force: true })

  console.log(`dist/${main}`)
  for (const file of built) console.log(`dist/${file}`)
  const missing = platforms.filter((p) => !fs.existsSync(path.join(root, 'npm', p, `pykernel.${p}.node`)))
  if (missing.length) console.log(`(not built here, so not packed: ${missing.join(', ')})`)
}

main()
