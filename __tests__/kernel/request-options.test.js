'use strict'
// A request's own options on a bare Kernel and on OutputBuilder: `requestId` on bridge
// calls, `cwd` on evaluate, `artifactPath` (the full output's exact file), and the
// outcome `OutputBuilder.finish` ends a text with. Real Python.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { addon, python, startKernel, tempDir, viewedDir } = require('../helpers/kernel')
const { hostLinesOf } = require('../helpers/host-lines')

const BIG = 'for i in range(20000): print("line", i)'

test('a bare kernel tells onCall the requestId of the request whose cell called, threads included; none when not given', async (t) => {
  const calls = []
  const kernel = await startKernel({ sessionId: 'solo', onCall: (call) => (calls.push(call), call.requestId ?? null) })
  t.after(() => kernel.shutdown())
  const threads = 'import threading\nout = []\nts = [threading.Thread(target=lambda: out.append(tool.whoami())) for _ in range(2)]\n[t.start() for t in ts]; [t.join() for t in ts]\nout.append(tool.whoami())\nout'
  const r = await kernel.evaluate([{ code: threads }], { requestId: 'eval-1' })
  assert.equal(r.output, "['eval-1', 'eval-1', 'eval-1']\n")
  const e = await kernel.execute('tool.whoami()', { requestId: 'exec-2' })
  assert.equal(e.result['text/plain'], "'exec-2'")
  await kernel.execute('tool.whoami()')
  assert.equal(calls.length, 5)
  assert.deepEqual(calls.map((c) => c.sessionId), Array(5).fill('solo'), 'the kernel keeps its sessionId beside the request id')
  assert.equal('requestId' in calls[4], false, 'absent when the request gave none')
  for (const [requestId, why] of [['', /1 to 256 characters, got 0/], ['x'.repeat(257), /got 257/], [7, /expected a string/]]) {
    await assert.rejects(kernel.evaluate([{ code: '1' }], { requestId }), (err) => err.code === 'ERR_INVALID_ARG' && /requestId/.test(err.message) && why.test(err.message))
    await assert.rejects(kernel.execute('1', { requestId }), (err) => err.code === 'ERR_INVALID_ARG' && why.test(err.message))
  }
  assert.equal(calls.length, 5, 'a refused request ran nothing')
})

test('evaluate takes a cwd as execute does: the cells run there, and it stays the kernel\'s', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const dir = viewedDir()
  fs.mkdirSync(path.join(dir, 'sub'))
  const where = 'import os; os.getcwd()'
  const r = await kernel.evaluate([{ code: where }, { code: "os.chdir('sub'); os.getcwd()" }], { cwd: dir })
  assert.equal(r.exitCode, 0, r.output)
  assert.equal(r.cells[0].result['text/plain'], `'${fs.realpathSync(dir)}'`)
  assert.equal(r.cells[1].result['text/plain'], `'${fs.realpathSync(path.join(dir, 'sub'))}'`, "a later cell goes on from where the one before left it")
  const after = await kernel.evaluate([{ code: where }])
  assert.equal(after.cells[0].result['text/plain'], `'${fs.realpathSync(path.join(dir, 'sub'))}'`, 'the cwd persists')
  // A relative one is taken from the host's working directory.
  const relative = path.relative(process.cwd(), dir)
  const back = await kernel.evaluate([{ code: where }], { cwd: relative })
  assert.equal(back.cells[0].result['text/plain'], `'${fs.realpathSync(dir)}'`)
  const executed = await kernel.execute(where, { cwd: path.join(dir, 'sub') })
  assert.equal(executed.result['text/plain'], `'${fs.realpathSync(path.join(dir, 'sub'))}'`)
  // A missing one fails the first cell, as it fails execute's.
  const missing = await kernel.evaluate([{ code: '1' }, { code: '2' }], { cwd: path.join(dir, 'missing') })
  assert.equal(missing.failedCell, 0)
  assert.match(missing.output, /^\[cell 1 of 2 failed\]\nFileNotFoundError: .*missing/)
  await assert.rejects(kernel.evaluate([{ code: '1' }], { cwd: 3 }), (err) => err.code === 'ERR_INVALID_ARG' && /cwd/.test(err.message))
})

test('artifactPath: the full output is written to that very file, which the output names', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const file = path.join(tempDir(), 'call-9.log')
  const r = await kernel.evaluate([{ code: BIG }], { artifactPath: file, artifactsDir: tempDir() })
  assert.equal(r.truncated.artifactPath, file)
  assert.equal(r.truncated.artifactId, undefined, 'a path is not an artifact:// id')
  assert.ok(r.output.endsWith(`\n[full output (20000 lines): ${file}]\n`), r.output.slice(-120))
  assert.deepEqual(hostLinesOf(r.output).slice(-1), [`[full output (20000 lines): ${file}]`])
  const full = fs.readFileSync(file, 'utf8')
  assert.equal(full, Array.from({ length: 20000 }, (_, i) => `line ${i}\n`).join(''))
  assert.equal(fs.statSync(file).mode & 0o777, 0o600)
  // A regular file there is replaced (a retried call reuses its path), and made private.
  fs.writeFileSync(file, 'old', { mode: 0o644 })
  fs.chmodSync(file, 0o644)
  const again = await kernel.evaluate([{ code: BIG.replace('line', 'again') }], { artifactPath: file })
  assert.equal(again.truncated.artifactPath, file)
  assert.match(fs.readFileSync(file, 'utf8'), /^again 0\n[^]*again 19999\n$/)
  assert.equal(fs.statSync(file).mode & 0o777, 0o600)
  // Output that is not cut leaves no file.
  const small = path.join(tempDir(), 'small.txt')
  const r2 = await kernel.evaluate([{ code: 'print("hi")' }], { artifactPath: small })
  assert.equal(r2.output, 'hi\n')
  assert.equal(fs.existsSync(small), false)

  const poolDir = tempDir()
  const pool = new addon.KernelPool({ kernel: { interpreter: python }, artifactsDir: poolDir })
  t.after(() => pool.disposeAll())
  const pooled = path.join(tempDir(), 'pooled.txt')
  const p = await pool.execute({ sessionId: 'art', artifactPath: pooled, cells: [{ code: BIG }] })
  assert.equal(p.truncated.artifactPath, pooled)
  assert.equal(p.truncated.artifactId, undefined)
  assert.ok(p.output.endsWith(`[full output (20000 lines): ${pooled}]\n`))
  assert.equal(fs.readFileSync(pooled, 'utf8'), full)
  assert.deepEqual(fs.readdirSync(poolDir).filter((f) => f.endsWith('.txt')), [], "the pool's artifactsDir got no copy")
})

test('artifactPath is refused in a directory that is missing, loose or not ours, at a symlink, relative, or with artifactId', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const pool = new addon.KernelPool({ kernel: { interpreter: python } })
  t.after(() => pool.disposeAll())
  const base = tempDir()
  const loose = path.join(base, 'loose')
  fs.mkdirSync(loose)
  fs.chmodSync(loose, 0o777)
  const linkDir = path.join(base, 'link-dir')
  fs.symlinkSync(tempDir(), linkDir)
  const aDir = path.join(base, 'a-dir')
  fs.mkdirSync(aDir)
  const victim = path.join(tempDir(), 'victim.txt')
  fs.writeFileSync(victim, 'keep me')
  const planted = path.join(tempDir(), 'planted.txt')
  fs.symlinkSync(victim, planted)
  const refused = [
    [path.join(base, 'missing', 'out.txt'), 'ERR_ARTIFACTS_DIR', /artifactPath's directory .*missing cannot be used: .*No such file.*choose another artifactPath/],
    [path.join(loose, 'out.txt'), 'ERR_ARTIFACTS_DIR', /is writable by group or others \(mode 777\): make it private \(chmod 700\) or choose another artifactPath/],
    [path.join(linkDir, 'out.txt'), 'ERR_ARTIFACTS_DIR', /link-dir is a symbolic link/],
    [planted, 'ERR_ARTIFACTS_DIR', /artifactPath .*planted\.txt is a symbolic link \(never followed\)/],
    [aDir, 'ERR_ARTIFACTS_DIR', /a-dir exists and is not a regular file/],
    ['out.txt', 'ERR_INVALID_ARG', /`artifactPath`: must be an absolute path/],
    [`${base}/`, 'ERR_INVALID_ARG', /must name a file/],
    [path.join(base, 'a\nb.txt'), 'ERR_INVALID_ARG', /control characters/],
  ]
  for (const [artifactPath, code, why] of refused) {
    const check = (err) => {
      assert.equal(err.code, code, `${artifactPath}: ${err.message}`)
      assert.match(err.message, why)
      return true
    }
    await assert.rejects(kernel.evaluate([{ code: BIG }], { artifactPath }), check)
    await assert.rejects(pool.execute({ sessionId: 'x', artifactPath, cells: [{ code: BIG }] }), check)
    assert.throws(() => new addon.OutputBuilder({ artifactPath }), check)
  }
  const both = (err) => err.code === 'ERR_INVALID_ARG' && /give `artifactPath` or `artifactId`, not both/.test(err.message)
  const file = path.join(tempDir(), 'f.txt')
  await assert.rejects(kernel.evaluate([{ code: '1' }], { artifactPath: file, artifactId: 'x' }), both)
  await assert.rejects(pool.execute({ sessionId: 'x', artifactPath: file, artifactId: 'x', cells: [{ code: '1' }] }), both)
  assert.throws(() => new addon.OutputBuilder({ artifactPath: file, artifactId: 'x' }), both)
  assert.equal(fs.readFileSync(victim, 'utf8'), 'keep me')
  assert.equal(pool.sessions.length, 0, 'a refused request started nothing')
})

test('a symlink planted at artifactPath after the check is not written through: the output says the copy is missing', () => {
  const dir = tempDir()
  const file = path.join(dir, 'out.txt')
  const builder = new addon.OutputBuilder({ artifactPath: file, headBytes: 20, tailBytes: 20 })
  const victim = path.join(tempDir(), 'victim.txt')
  fs.writeFileSync(victim, 'keep me')
  fs.symlinkSync(victim, file)
  for (let i = 0; i < 100; i++) builder.push(`line ${i}\n`)
  const r = builder.finish()
  assert.equal(fs.readFileSync(victim, 'utf8'), 'keep me')
  assert.equal(r.truncated.artifactPath, undefined)
  assert.match(r.truncated.artifactError, /artifactPath .*out\.txt is a symbolic link \(never followed\)/)
  assert.deepEqual(r.annotations, [`the full output was not saved: ${r.truncated.artifactError}`])
  assert.ok(r.output.startsWith(`[${r.annotations[0]}]\nline 0\n`), r.output)
  assert.doesNotMatch(r.output, /full output \(/)
})

/** Runs `code` in `evaluate`, and feeds the same events to an OutputBuilder finished
 *  with the outcome `outcomeOf(result)`: the two texts, for comparison. */
async function bothWays(kernel, code, evaluateOptions, outcomeOf) {
  const events = []
  const r = await kernel.evaluate([{ code }], { ...evaluateOptions, onEvent: (_, e) => events.push(e) })
  const builder = new addon.OutputBuilder()
  for (const event of events) builder.pushEvent(event)
  builder.endCell()
  return { r, built: builder.finish(outcomeOf(r)) }
}

test("OutputBuilder.finish(outcome) ends the text with evaluate's notices and closing line for the same end", async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const cases = [
    ['timed out', 'print("before")\nimport time\ntime.sleep(30)', { timeoutMs: 700 }, (r) => ({ timedOut: r.timedOut, timeoutMs: 700, exitCode: r.exitCode })],
    ['asked for stdin', 'print("a")\nname = input("name? ")', {}, () => ({ stdinRequested: true, exitCode: 1 })],
    ['failed', 'print("x")\n1 / 0', {}, () => ({ exitCode: 1 })],
    ['succeeded', 'print("fine")', {}, () => ({ exitCode: 0 })],
  ]
  for (const [what, code, options, outcomeOf] of cases) {
    const { r, built } = await bothWays(kernel, code, options, outcomeOf)
    assert.equal(built.output, r.output, what)
    assert.deepEqual(built.annotations, r.annotations, what)
  }
  const timedOut = await bothWays(kernel, 'import time; time.sleep(30)', { timeoutMs: 1500 }, () => ({ timedOut: true, timeoutMs: 1500 }))
  assert.match(timedOut.built.output, /^\[eval cell timed out after 2s; kernel interrupted but remains running\./)
  const asked = await bothWays(kernel, 'input()', {}, () => ({ stdinRequested: true, exitCode: 1 }))
  assert.match(asked.built.output, /^\[Kernel requested stdin; interactive input is not supported\.\]\n[^]*\nCommand exited with code 1\n$/)
})

test('OutputBuilder.finish(outcome): killed after a timeout as evaluate words it; cancelled and stopped runs have no closing line', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const deaf = 'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint("deaf")\ntime.sleep(60)'
  const { r, built } = await bothWays(kernel, deaf, { timeoutMs: 500 }, (r) => ({ timedOut: r.timedOut, killed: r.kernelKilled, exitCode: r.exitCode }))
  assert.equal(r.kernelKilled, true)
  assert.equal(built.output, r.output)
  assert.match(built.output, /^\[eval cell timed out and the kernel was unresponsive to interrupt; the kernel has been killed/)

  const bash = (outcome) => {
    const b = new addon.OutputBuilder()
    b.push('partial\n')
    return b.finish(outcome)
  }
  assert.equal(bash({ exitCode: 2 }).output, 'partial\nCommand exited with code 2\n')
  assert.equal(bash({ exitCode: null }).output, 'partial\n')
  assert.equal(bash({ cancelled: true, exitCode: 130 }).output, 'partial\n')
  assert.equal(bash({ cancelled: true, killed: true, exitCode: 137 }).output, 'partial\n')
  assert.equal(bash({ timedOut: true, timeoutMs: 250, exitCode: 130 }).output, '[eval cell timed out after 250ms; kernel interrupted but remains running. Reset the kernel via { reset: true } if state appears corrupted.]\npartial\n')
  assert.equal(bash().output, 'partial\n')
  assert.deepEqual(bash().annotations, [])
  const empty = new addon.OutputBuilder().finish({ exitCode: 3 })
  assert.equal(empty.output, 'Command exited with code 3\n')
})

test('OutputBuilder.finish refuses an outcome it cannot word, and the builder stays usable', () => {
  const b = new addon.OutputBuilder()
  b.push('kept\n')
  const refused = [
    [{ timedOut: true }, /`timedOut` needs `timeoutMs`/],
    [{ killed: true }, /`killed` .* give it with `timedOut` or `cancelled`/],
    [{ exitCode: 1.5 }, /`exitCode`: must be an integer of 32 bits or null, got 1.5/],
    [{ exitCode: 2 ** 31 }, /exitCode/],
    [{ timedOut: true, timeoutMs: -1 }, /timeoutMs/],
    [{ exitCode: '1' }, /`exitCode`: expected a number, got a string/],
    [{ exitcode: 1 }, /exitcode/],
    ['done', /expected an object/],
  ]
  for (const [outcome, why] of refused) {
    assert.throws(() => b.finish(outcome), (err) => err.code === 'ERR_INVALID_ARG' && why.test(err.message), JSON.stringify(outcome))
  }
  assert.equal(b.finish({ exitCode: 1 }).output, 'kept\nCommand exited with code 1\n')
})
