'use strict'
// Hostile cells against `uriRoots`: the host reads and writes `local://` files for a cell,
// so a path that leaves the root would hand the cell the host's own reach. The cell tries
// `..`, an absolute path, and symlinks it plants in the root (to /etc, to a directory and a
// file of the host's outside it), as a host run as root and as an ordinary user, with and
// without user namespaces. Every attempt is refused with the exception the docs name, and
// nothing outside the root is read, written or made.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')
const { systemPython, sharedDir, runEdgeHost, attackModes, startedRun } = require('../helpers/hosts')

const zygote = process.env.PYKERNEL_TEST_ZYGOTE === '1'
const MARK = crypto.randomBytes(4).toString('hex')
const ETC_TARGET = `pykernel-uri-${MARK}`

/** The attack cell: each attempt's outcome (`done` or the exception's name) as JSON. */
function attack(root, outside) {
  return `
import json, os
out = {}
def attempt(name, f):
    try:
        f()
        out[name] = "done"
    except Exception as e:
        out[name] = type(e).__name__ + ": " + str(e)
root = ${JSON.stringify(root)}
attempt("dotdot", lambda: write("local://../../etc/${ETC_TARGET}", "pwned"))
attempt("absolute", lambda: write("local:///etc/${ETC_TARGET}", "pwned"))
os.symlink("/etc", os.path.join(root, "etc"))
os.symlink(${JSON.stringify(outside)}, os.path.join(root, "outside"))
os.symlink(${JSON.stringify(path.join(outside, 'keep'))}, os.path.join(root, "victim"))
os.symlink("../..", os.path.join(root, "up"))
attempt("etc-write", lambda: write("local://etc/${ETC_TARGET}", "pwned"))
attempt("etc-read", lambda: read("local://etc/passwd"))
attempt("outside-write", lambda: write("local://outside/keep", "pwned"))
attempt("outside-new", lambda: write("local://outside/new/x", b"pwned"))
attempt("victim-write", lambda: write("local://victim", "pwned"))
attempt("victim-read", lambda: read("local://victim"))
attempt("up-read", lambda: read("local://up/etc/passwd"))
attempt("inside", lambda: write("local://ok/fine.txt", "fine"))
print(json.dumps(out))
`
}

for (const mode of attackModes()) {
  const skip = mode.needsUser && !mode.host.user ? 'needs root and useradd: the test user is made with useradd' : false
  test(`${mode.name}: a cell's local:// paths never leave the root (.., absolute, planted symlinks)`, { skip }, async (t) => {
    const owner = mode.host.user
    const cwd = sharedDir(owner, 'pykernel-uri-cwd-')
    const root = path.join(cwd, 'root')
    fs.mkdirSync(root, { mode: 0o700 })
    if (owner) fs.chownSync(root, owner.uid, owner.gid)
    // A directory of the host's user outside the root, outside /tmp (the kernel sees it).
    const outside = sharedDir(owner, 'pykernel-uri-outside-', '/var/tmp')
    fs.writeFileSync(path.join(outside, 'keep'), "the host's")
    if (owner) fs.chownSync(path.join(outside, 'keep'), owner.uid, owner.gid)
    let result
    t.after(() => {
      for (const dir of [cwd, outside, result?.dir]) if (dir) fs.rmSync(dir, { recursive: true, force: true })
      fs.rmSync(path.join('/etc', ETC_TARGET), { force: true })
    })
    const options = { interpreter: systemPython(), cwd, uriRoots: { local: root }, ...(zygote ? { preload: ['json'] } : {}) }
    result = await runEdgeHost(mode.host, [{ name: 'uri', options, code: attack(root, outside) }])
    assert.ok(result.report && !result.report.fatal, `the host reported (exit ${result.code ?? result.signal}): ${result.stderr.slice(-2000)}`)
    const { verdict, error } = startedRun(result, 'uri')
    assert.equal(error, null, `the cell ran: ${error}`)
    const outcome = (name) => String(verdict[name]).split(':')[0]
    assert.equal(outcome('dotdot'), 'ValueError', verdict.dotdot)
    assert.equal(outcome('absolute'), 'ValueError', verdict.absolute)
    for (const name of ['etc-write', 'etc-read', 'outside-write', 'outside-new', 'victim-write', 'victim-read', 'up-read']) {
      assert.equal(outcome(name), 'PermissionError', `${name}: ${verdict[name]}`)
    }
    assert.equal(verdict.inside, 'done')
    assert.equal(fs.readFileSync(path.join(root, 'ok', 'fine.txt'), 'utf8'), 'fine')
    assert.equal(fs.existsSync(path.join('/etc', ETC_TARGET)), false, 'nothing written in /etc')
    assert.equal(fs.readFileSync(path.join(outside, 'keep'), 'utf8'), "the host's")
    assert.deepEqual(fs.readdirSync(outside), ['keep'], 'nothing made outside the root')
  })
}
