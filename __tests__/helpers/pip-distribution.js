'use strict'
// A throwaway pip distribution for the tests of `%pip` (a magic, a preloaded module, a
// zygote's modules): one package at several versions, installed offline from source trees
// in a temporary directory, and uninstalled from the test venv when the test ends.
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { python, tempDir } = require('./kernel')

/** Installs from a local source tree without an index or a build environment: setuptools
 *  comes from the test venv, so nothing is fetched. */
const OFFLINE = ['--no-index', '--no-build-isolation']

/**
 * Distribution `name` (a package `module` whose `__version__` is the version) as source
 * trees `<dir>/v<version>/` in a new temporary directory. The distribution and import
 * names differ on purpose, as Pillow's do (`PIL`): what pip changed is told by the one,
 * what a kernel imported by the other.
 *
 * - `dir`: where the trees are; a kernel that installs one with `%pip` runs there.
 * - `install(version)`: installs a version into the test venv from the host.
 * - `pipLine(version, { quiet })`: the `%pip install` line that installs it from a cell.
 *
 * It is uninstalled from the test venv when test `t` ends, whoever installed it.
 */
function pipDistribution(t, { name, module, versions = ['1', '2'], prefix = 'pk-pip-dist-' }) {
  const dir = tempDir(prefix)
  for (const version of versions) {
    const src = path.join(dir, `v${version}`)
    fs.mkdirSync(path.join(src, module), { recursive: true })
    fs.writeFileSync(
      path.join(src, 'pyproject.toml'),
      `[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n[project]\nname = "${name}"\nversion = "${version}"\n`,
    )
    fs.writeFileSync(path.join(src, module, '__init__.py'), `__version__ = "${version}"\n`)
  }
  const pip = (...args) => execFileSync(python || 'python3', ['-m', 'pip', ...args], { cwd: dir, stdio: 'ignore' })
  t.after(() => {
    try {
      pip('uninstall', '-y', '-q', name)
    } catch {}
  })
  return {
    dir,
    install: (version) => pip('install', '-q', ...OFFLINE, `./v${version}`),
    pipLine: (version, { quiet = false } = {}) => ['%pip install', ...(quiet ? ['-q'] : []), ...OFFLINE, `./v${version}`].join(' '),
  }
}

module.exports = { pipDistribution }
