'use strict'
// `pythonCandidates`: every interpreter candidate in discovery order, with whether it
// exists, which one is chosen and why, synchronously and without running anything: set
// up with a temporary directory and `baseEnv`, as a host's own tests would.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { addon, tempDir } = require('../helpers/kernel')

/** A file where a candidate's executable would be: nothing runs it. */
function fakePython(file) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, '#!/bin/sh\nexit 1\n', { mode: 0o755 })
  return file
}

test('pythonCandidates lists every candidate in discovery order and chooses the first that exists, without running it', (t) => {
  const root = tempDir('pykernel-candidates-')
  t.after(() => fs.rmSync(root, { recursive: true, force: true }))
  const cwd = path.join(root, 'project')
  const home = path.join(root, 'home')
  const bin = path.join(root, 'bin')
  const conda = path.join(root, 'conda')
  fakePython(path.join(conda, 'bin', 'python'))
  fakePython(path.join(cwd, 'venv', 'bin', 'python'))
  fakePython(path.join(bin, 'python3'))
  const baseEnv = { HOME: home, PATH: bin, CONDA_PREFIX: conda }

  const listed = addon.pythonCandidates({ cwd, baseEnv })
  assert.deepEqual(
    listed.map(({ candidate, path, source, exists, chosen }) => ({ candidate, path, source, exists, chosen })),
    [
      { candidate: 'interpreter option', path: undefined, source: 'explicit', exists: false, chosen: false },
      { candidate: 'VIRTUAL_ENV', path: undefined, source: 'venv', exists: false, chosen: false },
      { candidate: `CONDA_PREFIX ${conda}`, path: path.join(conda, 'bin', 'python'), source: 'conda', exists: true, chosen: true },
      { candidate: `cwd venv ${cwd}/.venv`, path: path.join(cwd, '.venv', 'bin', 'python'), source: 'venv', exists: false, chosen: false },
      { candidate: `cwd venv ${cwd}/venv`, path: path.join(cwd, 'venv', 'bin', 'python'), source: 'venv', exists: true, chosen: false },
      { candidate: `managed venv ${home}/.pykernel/python-env`, path: path.join(home, '.pykernel', 'python-env', 'bin', 'python'), source: 'managed', exists: false, chosen: false },
      { candidate: 'python on PATH', path: undefined, source: 'path', exists: false, chosen: false },
      { candidate: 'python3 on PATH', path: path.join(bin, 'python3'), source: 'path', exists: true, chosen: false },
    ],
  )
  assert.deepEqual(
    listed.map((c) => c.reason),
    [
      'not given',
      'not set',
      'the first that exists: probed first, and used if it runs as Python 3.8+',
      `${cwd}/.venv/bin/python does not exist`,
      'exists, after the chosen one (probed only if that one is not a usable Python)',
      `${home}/.pykernel/python-env/bin/python does not exist`,
      'not found on PATH',
      'exists, after the chosen one (probed only if that one is not a usable Python)',
    ],
  )

  // VIRTUAL_ENV comes before CONDA_PREFIX.
  const active = path.join(root, 'active')
  fakePython(path.join(active, 'bin', 'python'))
  const withVenv = addon.pythonCandidates({ cwd, baseEnv: { ...baseEnv, VIRTUAL_ENV: active } })
  assert.deepEqual(withVenv.filter((c) => c.chosen).map((c) => c.candidate), [`VIRTUAL_ENV ${active}`])

  // An explicit interpreter skips discovery: the others are not looked at.
  const explicit = addon.pythonCandidates({ cwd, baseEnv, interpreter: 'venv/bin/python' })
  assert.deepEqual(explicit[0], {
    candidate: 'interpreter option',
    path: path.join(cwd, 'venv', 'bin', 'python'),
    source: 'explicit',
    exists: true,
    chosen: true,
    reason: 'given as interpreter: used without discovery (if it runs as Python 3.8+)',
  })
  assert.equal(explicit.filter((c) => c.chosen).length, 1)
  assert.ok(explicit.slice(1).every((c) => c.reason === 'not looked at: the interpreter option skips discovery'))
  const gone = addon.pythonCandidates({ cwd, baseEnv, interpreter: '/nonexistent/python' })
  assert.equal(gone.some((c) => c.chosen), false)
  assert.match(gone[0].reason, /^\/nonexistent\/python does not exist \(an explicit interpreter has no fallback/)

  // Nothing at all: none chosen.
  assert.equal(addon.pythonCandidates({ cwd: root, baseEnv: { HOME: home, PATH: path.join(root, 'none') } }).some((c) => c.chosen), false)
})

test('pythonCandidates throws as resolvePython rejects: a cwd that is not a directory, a wrong option', () => {
  assert.throws(() => addon.pythonCandidates({ cwd: '/nonexistent/dir' }), (err) => err.code === 'ERR_CWD_INVALID')
  assert.throws(() => addon.pythonCandidates({ cwd: 7 }), (err) => err.code === 'ERR_INVALID_ARG')
  assert.throws(() => addon.pythonCandidates({ interpeter: 'x' }), (err) => err.code === 'ERR_INVALID_ARG')
})

test("pythonCandidates' chosen candidate is the one resolvePython picks", async (t) => {
  const root = tempDir('pykernel-candidates-')
  t.after(() => fs.rmSync(root, { recursive: true, force: true }))
  const real = process.env.PYKERNEL_TEST_PYTHON || 'python3'
  const cwd = path.join(root, 'project')
  fs.mkdirSync(path.join(cwd, '.venv', 'bin'), { recursive: true })
  fs.symlinkSync(fs.realpathSync(require('node:child_process').execFileSync(real, ['-c', 'import sys; print(sys.executable)']).toString().trim()), path.join(cwd, '.venv', 'bin', 'python'))
  const baseEnv = { HOME: path.join(root, 'home'), PATH: '/nonexistent' }
  const chosen = addon.pythonCandidates({ cwd, baseEnv }).find((c) => c.chosen)
  const resolved = await addon.resolvePython({ cwd, baseEnv })
  assert.equal(chosen.source, resolved.source)
  assert.equal(chosen.candidate, `cwd venv ${cwd}/.venv`)
  assert.deepEqual(resolved.skipped.map((s) => s.candidate), ['VIRTUAL_ENV', 'CONDA_PREFIX'])
})
