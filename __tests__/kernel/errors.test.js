'use strict'
// Bad input gets a clear error with a stable code, and nothing hangs.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { addon, startKernel, tempDir, fakeInterpreter, processesWith, waitFor } = require('../helpers/kernel')

test('a cwd that does not exist', async () => {
  await assert.rejects(startKernel({ cwd: '/does/not/exist' }), (err) => {
    assert.equal(err.code, 'ERR_CWD_INVALID')
    assert.match(err.message, /\/does\/not\/exist does not exist; pass an existing directory/)
    return true
  })
})

test('a cwd that is a file', async () => {
  const file = path.join(tempDir(), 'file.txt')
  fs.writeFileSync(file, 'x')
  await assert.rejects(startKernel({ cwd: file }), (err) => err.code === 'ERR_CWD_INVALID' && /is not a directory/.test(err.message))
})

test('an interpreter that does not exist', async () => {
  await assert.rejects(addon.Kernel.start({ interpreter: '/nope/python3' }), (err) => {
    assert.equal(err.code, 'ERR_PYTHON_INVALID')
    assert.match(err.message, /\/nope\/python3 is not usable: .*does not exist/)
    return true
  })
})

test('an interpreter that is not Python', async () => {
  await assert.rejects(addon.Kernel.start({ interpreter: '/bin/false' }), (err) => {
    assert.equal(err.code, 'ERR_PYTHON_INVALID')
    assert.match(err.message, /is not Python/)
    return true
  })
})

test('no Python anywhere', async () => {
  const cwd = tempDir()
  await assert.rejects(addon.Kernel.start({ cwd, baseEnv: { PATH: cwd, HOME: cwd } }), (err) => {
    assert.equal(err.code, 'ERR_PYTHON_NOT_FOUND')
    assert.match(err.message, /python3 on PATH \(not found on PATH\)/)
    return true
  })
})

test('a runner that dies during start-up: its stderr is in the message', async () => {
  const exe = fakeInterpreter(tempDir(), 'echo "ImportError: the runner exploded" >&2; exit 3')
  await assert.rejects(addon.Kernel.start({ interpreter: exe }), (err) => {
    assert.equal(err.code, 'ERR_KERNEL_START_FAILED')
    assert.match(err.message, /exit code 3/)
    assert.match(err.message, /ImportError: the runner exploded/)
    return true
  })
})

test('a runner that never becomes ready times out and is killed', async () => {
  const dir = tempDir()
  // $$ would be a pid of the kernel's PID namespace: the stuck process is found on the
  // host by a marker in its command line instead.
  const marker = `pykernel-stuck-${path.basename(dir)}`
  const exe = fakeInterpreter(dir, `echo started > ${dir}/started; echo "stuck loading" >&2; exec sh -c 'sleep 30; : ${marker}'`)
  const started = Date.now()
  await assert.rejects(addon.Kernel.start({ interpreter: exe, startupTimeoutMs: 500, sandbox: { writable: [dir] } }), (err) => {
    assert.equal(err.code, 'ERR_KERNEL_START_TIMEOUT')
    assert.match(err.message, /within 500 ms/)
    assert.match(err.message, /stuck loading/)
    return true
  })
  assert.ok(Date.now() - started < 3000)
  assert.equal(fs.readFileSync(path.join(dir, 'started'), 'utf8'), 'started\n', 'the stuck runner ran')
  // Killed before the start fails; under load its end (a namespace's init waits for all
  // it holds) can take longer than the start waits for it. Left alive, it would sleep 30 s.
  assert.ok(await waitFor(() => processesWith(marker).length === 0, { timeoutMs: 8000 }), `the stuck runner is killed: ${processesWith(marker)}`)
})

test('ERR_RUNNER_DIR: no directory for the runner files (TMPDIR unusable) fails the start, naming the directory', () => {
  const { spawnSync } = require('node:child_process')
  const script = `require(${JSON.stringify(require('node:path').resolve(__dirname, '..', '..'))}).Kernel.start({ interpreter: process.env.PYKERNEL_TEST_PYTHON || undefined })
  .then((k) => { console.log('started'); return k.shutdown() }, (e) => console.log(JSON.stringify({ code: e.code, message: e.message })))`
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, TMPDIR: '/proc/pykernel-no-such-dir' }, timeout: 60_000 })
  assert.equal(r.status, 0, r.stderr)
  const { code, message } = JSON.parse(r.stdout.trim())
  assert.equal(code, 'ERR_RUNNER_DIR')
  assert.match(message, /\/proc\/pykernel-no-such-dir\/pykernel-\d+/)
  assert.match(message, /no private directory could be made/)
})

test('bad execute options are refused with a code and leave the kernel usable', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  await assert.rejects(kernel.execute('1', { timeoutMs: -5 }), (err) => err.code === 'ERR_INVALID_ARG' && /timeoutMs/.test(err.message))
  assert.equal((await kernel.execute('1+2')).result['text/plain'], '3')
})

test('Kernel cannot be constructed directly', () => {
  assert.throws(() => new addon.Kernel(), { code: 'ERR_INVALID_ARG', message: /Kernel\.start\(options\)/ })
})

test('ERR_IO: an artifact or a kv store that cannot be read is an I/O error naming the file, not a hang', async () => {
  const fs = require('node:fs')
  const path = require('node:path')
  const { execFileSync } = require('node:child_process')
  const { readArtifact, KvStore } = require('../..')
  const { tempDir } = require('../helpers/kernel')
  const artifactsDir = tempDir('pk-err-io-')
  // A FIFO planted where an artifact would be: opening it for reading would wait for a
  // writer forever; a directory cannot be read as text.
  execFileSync('mkfifo', [path.join(artifactsDir, 'planted.txt')])
  fs.mkdirSync(path.join(artifactsDir, 'folder.txt'))
  for (const id of ['planted', 'folder']) {
    await assert.rejects(readArtifact(`artifact://${id}`, { artifactsDir }), (e) => {
      assert.equal(e.code, 'ERR_IO')
      assert.match(e.message, new RegExp(`reading ${path.join(artifactsDir, id)}\\.txt: .*not a regular file`))
      return true
    })
  }
  const store = new KvStore(artifactsDir, 'session-1')
  await store.set('k', 1)
  fs.rmSync(store.path)
  fs.mkdirSync(store.path)
  await assert.rejects(store.get('k'), (e) => {
    assert.equal(e.code, 'ERR_IO')
    assert.ok(e.message.includes(store.path), e.message)
    return true
  })
})
