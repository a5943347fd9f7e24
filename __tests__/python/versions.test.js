'use strict'
// Every Python version the documentation promises (3.8 to 3.13) runs a kernel: output, results,
// errors, magics, shell commands, top-level await, display. Each version present on the
// machine is tested (pyenv's, the system's, anything on PATH); one that is missing is
// reported as skipped, by name, never counted as passed. 3.7 is refused clearly.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { Kernel } = require('../..')

const VERSIONS = ['3.8', '3.9', '3.10', '3.11', '3.12', '3.13']

/** An interpreter of version `v` on this machine, or undefined. */
function find(v) {
  const candidates = [`/usr/bin/python${v}`, `/usr/local/bin/python${v}`]
  const pyenv = path.join(process.env.PYENV_ROOT || path.join(os.homedir(), '.pyenv'), 'versions')
  if (fs.existsSync(pyenv)) {
    for (const dir of fs.readdirSync(pyenv).sort().reverse()) {
      if (dir === v || dir.startsWith(`${v}.`)) candidates.push(path.join(pyenv, dir, 'bin', `python${v}`))
    }
  }
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    if (!dir.includes('shims')) candidates.push(path.join(dir, `python${v}`))
  }
  for (const candidate of candidates) {
    try {
      const got = execFileSync(candidate, ['-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
      if (got === v) return candidate
    } catch {}
  }
  return undefined
}

for (const v of VERSIONS) {
  const interpreter = find(v)
  test(`Python ${v} runs a kernel`, { skip: interpreter ? false : `no Python ${v} on this machine` }, async () => {
    const kernel = await Kernel.start({ interpreter })
    try {
      const first = await kernel.execute('import sys\nprint("%d.%d" % sys.version_info[:2])\nd = {"a": [1, 2]}\nd')
      assert.equal(first.status, 'ok')
      assert.equal(first.stdout, `${v}\n`)
      assert.equal(first.result['text/plain'], "{'a': [1, 2]}")

      const error = await kernel.execute('1/0')
      assert.equal(error.status, 'error')
      assert.equal(error.error.ename, 'ZeroDivisionError')

      const magic = await kernel.execute('%time y = sum(range(10))\nasync def f():\n    return y\nawait f()')
      assert.equal(magic.status, 'ok', JSON.stringify(magic.error))
      assert.equal(magic.result['text/plain'], '45')
      assert.match(magic.stdout, /Wall time/)

      const shell = await kernel.execute('display({"k": 1}, raw=True)\n!echo from-shell')
      assert.equal(shell.status, 'ok')
      assert.deepEqual(shell.displays, [{ k: 1 }])
      assert.equal(shell.stdout, 'from-shell\n')
      assert.equal(shell.executionCount, 4)
    } finally {
      await kernel.shutdown()
    }
  })
}

test('Python 3.7 is refused with a clear error', { skip: find('3.7') ? false : 'no Python 3.7 on this machine' }, async () => {
  await assert.rejects(Kernel.start({ interpreter: find('3.7') }), (error) => {
    assert.equal(error.code, 'ERR_PYTHON_INVALID')
    assert.match(error.message, /3\.8\+ is required/)
    return true
  })
})
