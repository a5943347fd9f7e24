'use strict'
// Venvs the attack suites' hosts run, each owned by the user the host runs as (as a
// user's own project venv is), made once per user and process.
const fs = require('node:fs')
const { execFileSync } = require('node:child_process')
const { systemPython, sharedDir } = require('./hosts')

/** `dir` and what is in it made `owner`'s (the test user's files, as its own would be). */
function own(dir, owner) {
  if (owner) execFileSync('chown', ['-R', `${owner.uid}:${owner.gid}`, dir])
}

/** A venv of the system's Python, with pip, that the host's user owns (as a user's
 *  project venv is): the shared environment every kernel of that user's hosts runs (made
 *  once per user; its contents are checked after each mode). */
const venvs = new Map()
function userVenv(owner) {
  const key = owner ? owner.uid : process.getuid()
  if (!venvs.has(key)) {
    const dir = sharedDir(null, 'pykernel-venv-', '/var/tmp')
    execFileSync(systemPython(), ['-m', 'venv', dir])
    fs.chmodSync(dir, 0o755)
    own(dir, owner)
    process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
    venvs.set(key, dir)
  }
  return venvs.get(key)
}

module.exports = { own, userVenv }
