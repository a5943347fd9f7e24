'use strict'
// Hostile cells against `uriRoots`: the host reads and writes `local://` files for a cell,
// so a path that leaves the root would hand the cell the host's own reach. The cell tries
// `..`, an absolute path, and symlinks it plants in the root (to /etc, to a directory and a
// file of the host's outside it), as a host run as root and as an ordinary user, with and
// without user namespaces. Every attempt is refused with the exception the docs name, and
// nothing outside the root is read, written or made. Then the ancestor swap: a cell that
// may write the root's parent moves it away and puts a symlink to another directory in its
// place; the host holds the root open from when the option was read, so its reads and
// writes stay in the directory it named.
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
    // The cell is told by its uris: no refusal names where the host keeps the root.
    for (const [name, said] of Object.entries(verdict)) assert.ok(!String(said).includes(cwd), `${name} names the host's path: ${said}`)
    assert.equal(fs.readFileSync(path.join(root, 'ok', 'fine.txt'), 'utf8'), 'fine')
    assert.equal(fs.existsSync(path.join('/etc', ETC_TARGET)), false, 'nothing written in /etc')
    assert.equal(fs.readFileSync(path.join(outside, 'keep'), 'utf8'), "the host's")
    assert.deepEqual(fs.readdirSync(outside), ['keep'], 'nothing made outside the root')
  })
}

/** The swap cell: the root's parent moved away, a symlink to the victim in its place,
 *  then a write and a read of the root. */
function swap(cwd, victim) {
  return `
import json, os
out = {}
def attempt(name, f):
    try:
        out[name] = f()
    except Exception as e:
        out[name] = type(e).__name__ + ": " + str(e)
cwd = ${JSON.stringify(cwd)}
# The root the host holds open is never the kernel's: no directory among its descriptors.
out["dirfds"] = [n for n in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd/" + n)]
os.rename(os.path.join(cwd, "data"), os.path.join(cwd, "moved"))
os.symlink(${JSON.stringify(victim)}, os.path.join(cwd, "data"))
attempt("write", lambda: write("local://pwn.txt", "pwned"))
attempt("read", lambda: read("local://keep"))
print(json.dumps(out))
`
}

for (const mode of attackModes()) {
  const skip = mode.needsUser && !mode.host.user ? 'needs root and useradd: the test user is made with useradd' : false
  test(`${mode.name}: a cell that swaps an ancestor of the root for a symlink reaches nothing outside it`, { skip }, async (t) => {
    const owner = mode.host.user
    // The root inside the kernel's working directory, which the cell may write.
    const cwd = sharedDir(owner, 'pykernel-uri-swap-')
    const root = path.join(cwd, 'data', 'root')
    fs.mkdirSync(root, { recursive: true, mode: 0o700 })
    if (owner) for (const dir of [path.dirname(root), root]) fs.chownSync(dir, owner.uid, owner.gid)
    // The victim: a directory of the host's user outside the root, shaped like the path
    // the swap makes (`data/root` -> `<victim>/root`), with a file the cell must not read.
    const victim = sharedDir(owner, 'pykernel-uri-victim-', '/var/tmp')
    fs.mkdirSync(path.join(victim, 'root'), { mode: 0o700 })
    fs.writeFileSync(path.join(victim, 'root', 'keep'), "the victim's")
    if (owner) for (const p of ['root', 'root/keep']) fs.chownSync(path.join(victim, p), owner.uid, owner.gid)
    let result
    t.after(() => {
      for (const dir of [cwd, victim, result?.dir]) if (dir) fs.rmSync(dir, { recursive: true, force: true })
    })
    const options = { interpreter: systemPython(), cwd, uriRoots: { local: root }, ...(zygote ? { preload: ['json'] } : {}) }
    result = await runEdgeHost(mode.host, [{ name: 'swap', options, code: swap(cwd, victim) }])
    assert.ok(result.report && !result.report.fatal, `the host reported (exit ${result.code ?? result.signal}): ${result.stderr.slice(-2000)}`)
    const { verdict, error } = startedRun(result, 'swap')
    assert.equal(error, null, `the cell ran: ${error}`)
    assert.deepEqual(verdict.dirfds, [], 'the kernel holds no directory descriptor (the host keeps the root to itself)')
    assert.equal(fs.lstatSync(path.join(cwd, 'data')).isSymbolicLink(), true, 'the cell swapped the ancestor')
    assert.deepEqual(fs.readdirSync(path.join(victim, 'root')), ['keep'], 'nothing written in the victim')
    assert.equal(fs.readFileSync(path.join(victim, 'root', 'keep'), 'utf8'), "the victim's")
    assert.notEqual(verdict.read, "the victim's", "the read did not return the victim's file")
    assert.match(String(verdict.read), /^FileNotFoundError: local:\/\/keep: no such file/)
    assert.equal(verdict.write, 5)
    assert.equal(fs.readFileSync(path.join(cwd, 'moved', 'root', 'pwn.txt'), 'utf8'), 'pwned', 'the write stayed in the root, moved with its parent')
  })
}
