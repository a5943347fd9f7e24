'use strict'
// Host-mapped URI schemes (`uriRoots`): `read("local://...")` and `write("local://...")`
// in a cell are files of a directory of the host's, read and written by the host, with a
// real kernel. The attacks on the path rules, as root and as an ordinary user, are in
// hostile/uri-roots.test.js.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { addon, startKernel, run, ok, value, tempDir } = require('../helpers/kernel')

function statuses(events, op) {
  return events.filter((e) => e.type === 'status' && e.op === op).map((e) => e.data)
}

async function failure(kernel, code, options) {
  const { result } = await run(kernel, code, options)
  assert.equal(result.status, 'error', `${code} should have failed`)
  return result.error
}

test('uriRoots: local:// reads and writes are files of the host directory, text and bytes, with the same status events', async (t) => {
  const dir = tempDir('pykernel-uri-')
  const root = path.join(dir, 'local-root')
  const calls = []
  const kernel = await startKernel({ cwd: dir, uriRoots: { local: root }, onCall: (c) => calls.push(c) })
  t.after(async () => {
    await kernel.shutdown()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  // The root and the parents are made by the write.
  const { result, events } = await ok(kernel, 'write("local://notes/today.md", "one\\ntwo\\nthree\\n")')
  assert.equal(result.result['text/plain'], '14')
  assert.deepEqual(statuses(events, 'write'), [{ path: 'local://notes/today.md', chars: 14, bytes: 14 }])
  const file = path.join(root, 'notes', 'today.md')
  assert.equal(fs.readFileSync(file, 'utf8'), 'one\ntwo\nthree\n')
  assert.equal(fs.statSync(file).mode & 0o777, 0o600)
  assert.equal(fs.statSync(path.join(root, 'notes')).mode & 0o777, 0o700)

  const read = await ok(kernel, 'read("local://notes/today.md")')
  assert.equal(read.result.result['text/plain'], "'one\\ntwo\\nthree\\n'")
  assert.deepEqual(statuses(read.events, 'read'), [{ path: 'local://notes/today.md', chars: 14 }])
  const lines = await ok(kernel, 'read("local://notes/today.md", 2, 1)')
  assert.equal(lines.result.result['text/plain'], "'two\\n'")
  assert.deepEqual(statuses(lines.events, 'read'), [{ path: 'local://notes/today.md:2-2', chars: 4 }])
  assert.equal(await value(kernel, 'read("local://notes/today.md", offset=3)'), "'three\\n'")

  // Bytes, every value of them, round-trip; the host wrote exactly them.
  assert.equal(await value(kernel, 'data = bytes(range(256)) * 3; write("local://bin/all.bin", data)'), '768')
  const bytes = fs.readFileSync(path.join(root, 'bin', 'all.bin'))
  assert.deepEqual([...bytes], [...Buffer.concat([0, 1, 2].map(() => Buffer.from([...Array(256).keys()])))])
  assert.equal(await value(kernel, 'write("local://u.txt", "é€😀")'), '3')
  assert.equal(fs.readFileSync(path.join(root, 'u.txt'), 'utf8'), 'é€😀')
  assert.equal(await value(kernel, 'read("local://u.txt") == "é€😀"'), 'True')

  // Errors are the exceptions Python code expects, saying what to do.
  const missing = await failure(kernel, 'read("local://nope.txt")')
  assert.equal(missing.ename, 'FileNotFoundError')
  assert.equal(missing.evalue, 'local://nope.txt: no such file')
  assert.equal((await failure(kernel, 'read("local://notes")')).ename, 'IsADirectoryError')
  const dotdot = await failure(kernel, 'write("local://../x", "x")')
  assert.equal(dotdot.ename, 'ValueError')
  assert.equal(dotdot.evalue, "local://../x: '..' is not allowed; name a file beneath the root, as in local://notes/today.md")
  assert.equal((await failure(kernel, 'write("local:///etc/x", "x")')).ename, 'ValueError')
  const big = await failure(kernel, 'write("local://big", b"x" * (8 * 1024 * 1024 + 1))')
  assert.equal(big.ename, 'ValueError')
  assert.match(big.evalue, /more than write\(\) takes at once \(8 MiB\)/)
  assert.equal(fs.existsSync(path.join(root, 'big')), false)
  assert.equal(calls.length, 0, 'a mapped scheme never reaches onCall')
})

test('uriRoots: a scheme with no root keeps its old ways: read goes to onCall, write raises naming the option', async (t) => {
  const dir = tempDir('pykernel-uri-')
  const calls = []
  const kernel = await startKernel({
    cwd: dir,
    uriRoots: { local: path.join(dir, 'root') },
    onCall: (c) => {
      calls.push({ name: c.name, args: c.args })
      return c.name === 'write' ? 'the host tool write' : { text: `host text of ${c.args.path}` }
    },
  })
  t.after(async () => {
    await kernel.shutdown()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  assert.equal(await value(kernel, 'read("skill://x/SKILL.md", 2, 3)'), "'host text of skill://x/SKILL.md:2-4'")
  const error = await failure(kernel, 'write("skill://x/SKILL.md", "x")')
  assert.equal(error.ename, 'ValueError')
  assert.match(error.evalue, /mapped: local\).*uriRoots: \{ skill: '\/abs\/dir' \}/)
  // A host tool named write is the host's: its calls are not taken for write().
  assert.equal(await value(kernel, 'tool.write(path="local://a", content="b")'), "'the host tool write'")
  assert.deepEqual(calls, [
    { name: 'read', args: { path: 'skill://x/SKILL.md:2-4' } },
    { name: 'write', args: { path: 'local://a', content: 'b' } },
  ])
  assert.equal(fs.existsSync(path.join(dir, 'root', 'a')), false)
})

test("uriRoots: a request's roots take the place of the kernel's for their schemes (execute, evaluate, the pool)", async (t) => {
  const dir = tempDir('pykernel-uri-')
  const [kernelRoot, requestRoot, skillRoot] = ['kernel', 'request', 'skill'].map((name) => path.join(dir, name))
  const roots = { local: kernelRoot, skill: skillRoot }
  const kernel = await startKernel({ cwd: dir, uriRoots: roots })
  const pool = new addon.KernelPool({ kernel: { interpreter: process.env.PYKERNEL_TEST_PYTHON, cwd: dir, uriRoots: roots }, prewarm: 0 })
  t.after(async () => {
    await kernel.shutdown()
    await pool.disposeAll()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  const override = { uriRoots: { local: requestRoot } }
  await ok(kernel, 'write("local://a.txt", "request"); write("skill://s.txt", "skill")', override)
  await ok(kernel, 'write("local://a.txt", "kernel")')
  assert.equal(fs.readFileSync(path.join(requestRoot, 'a.txt'), 'utf8'), 'request')
  assert.equal(fs.readFileSync(path.join(kernelRoot, 'a.txt'), 'utf8'), 'kernel', 'the next request is back on the kernel root')
  assert.equal(fs.readFileSync(path.join(skillRoot, 's.txt'), 'utf8'), 'skill', 'the other schemes stay')

  const evaluated = await kernel.evaluate([{ code: 'print(read("local://a.txt"))' }], override)
  assert.equal(evaluated.output, 'request\n')
  const pooled = await pool.execute({ sessionId: 's', cells: [{ code: 'print(read("local://a.txt"))' }], ...override })
  assert.equal(pooled.output, 'request\n')
  const pooledKernel = await pool.execute({ sessionId: 's', cells: [{ code: 'print(read("local://a.txt"))' }] })
  assert.equal(pooledKernel.output, 'kernel\n')
})

test('uriRoots: scheme names are checked', async () => {
  for (const [roots, message] of [
    [{ Local: '/tmp' }, /lowercase/],
    [{ artifact: '/tmp' }, /artifact:\/\/ already has its meaning/],
    [{ file: '/tmp' }, /file:\/\/ already has its meaning/],
    [{ 'a/b': '/tmp' }, /lowercase/],
    // The root is opened (made when missing) when the option is read, so a root that
    // cannot be is refused then, not at a cell's first write.
    [{ local: '/dev/null/root' }, /could not be opened or made: it \(or a part of its path\) is not a directory; name a directory/],
  ]) {
    await assert.rejects(startKernel({ uriRoots: roots }), (err) => err.code === 'ERR_INVALID_ARG' && /uriRoots/.test(err.message) && message.test(err.message))
  }
  const kernel = await startKernel()
  try {
    await assert.rejects(kernel.execute('1', { uriRoots: { ARTIFACT: '/tmp' } }), (err) => err.code === 'ERR_INVALID_ARG')
    await assert.rejects(kernel.execute('1', { uriRoots: { local: 7 } }), (err) => err.code === 'ERR_INVALID_ARG')
  } finally {
    await kernel.shutdown()
  }
})
