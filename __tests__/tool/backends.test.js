'use strict'
// Which eval backends a host tool exposes, with the Python preflight.
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, tempDir } = require('../helpers/kernel')

test('both backends by default when Python is here', async () => {
  assert.deepEqual(await addon.evalBackends({ env: { ...process.env } }), { py: true, js: true })
})

test('boolean flags override only their own setting', async () => {
  const env = { ...process.env, PYKERNEL_PY: '0' }
  assert.deepEqual(await addon.evalBackends({ env }), { py: false, js: true })
  const onlyPy = await addon.evalBackends({ env: { ...process.env, PYKERNEL_JS: 'false' } })
  assert.deepEqual(onlyPy, { py: true, js: false })
  const setting = await addon.evalBackends({ settings: { js: false }, env: { ...process.env, PYKERNEL_JS: '1' } })
  assert.deepEqual(setting, { py: true, js: true })
  const branded = await addon.evalBackends({ envPrefix: 'ACME_', env: { ...process.env, ACME_PY: 'off' } })
  assert.deepEqual(branded, { py: false, js: true })
})

test('mode flags: 0/bash, 1/py, mix/both', async () => {
  const pick = (v) => addon.evalBackends({ flagStyle: 'mode', env: { ...process.env, PYKERNEL_PY: v } })
  assert.deepEqual(await pick('bash'), { py: false, js: true })
  assert.deepEqual(await pick('0'), { py: false, js: true })
  assert.deepEqual(await pick('1'), { py: true, js: false })
  assert.deepEqual(await pick('py'), { py: true, js: false })
  assert.deepEqual(await pick('mix'), { py: true, js: true })
  await assert.rejects(addon.evalBackends({ flagStyle: 'other' }), (e) => e.code === 'ERR_INVALID_ARG')
})

test('no Python: JavaScript stays, Python cells get a clear availability error', async () => {
  const dir = tempDir()
  const r = await addon.evalBackends({ cwd: dir, env: { PATH: dir, HOME: dir, PYKERNEL_PY: 'both' } })
  assert.equal(r.py, false)
  assert.equal(r.js, true)
  assert.match(r.pythonError, /^The Python backend is not available: no usable Python found/)
})
