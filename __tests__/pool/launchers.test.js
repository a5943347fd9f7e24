'use strict'
// Pool placement (docs/api.md#kernelpool-sessions-behind-an-eval-tool): a request's own
// launcher, `launchers` with round-robin and least-loaded placement, the host's
// `launcherFor`, spares kept on the default launcher. Real kernels through cheap local
// launchers: `env PK_PLACE=<tag>` execs the Python with one more variable, so a cell tells
// which launcher it came through.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { addon, python, waitFor } = require('../helpers/kernel')
const { unshareLauncher, unshareAvailable } = require('../helpers/launchers')

const { KernelPool } = addon
const kernel = { interpreter: python }
const at = (tag) => ['env', `PK_PLACE=${tag}`]
// PK_PLACE as the kernel sees it ('None' when it ran here, without a launcher), and a
// token of the kernel process, to tell a fresh kernel from the same one.
const PLACE = 'import os as _os; print(_os.environ.get("PK_PLACE"), _os.getpid(), id(_os))'
/** The cell's own line: the output after the host's notices (a replaced kernel's). */
const cellLine = (r) => r.output.slice(r.annotations.map((a) => `[${a}]\n`).join('').length).trim()
const placeOf = (r) => {
  assert.equal(r.exitCode, 0, r.output)
  return cellLine(r).split(' ')[0]
}
const tokenOf = (r) => cellLine(r).split(' ').slice(1).join(' ')
const run = (pool, sessionId, extra = {}) => pool.execute({ sessionId, cells: [{ code: PLACE }], ...extra })
const where = async (pool, sessionId, extra) => placeOf(await run(pool, sessionId, extra))
const info = (pool, id) => pool.sessions.filter((s) => s.key.startsWith(`session:${id} @ `))

test('a request names its launcher: part of the session key, as the interpreter is', async (t) => {
  const pool = new KernelPool({ kernel, prewarm: 0 })
  t.after(() => pool.disposeAll())
  const x = await pool.execute({ sessionId: 's', launcher: at('x'), cells: [{ code: 'v = "in x"' }, { code: PLACE }] })
  assert.equal(placeOf(x), 'x')
  // The same session id elsewhere is another session, with a kernel of its own.
  assert.equal(await where(pool, 's'), 'None')
  assert.equal(await where(pool, 's', { launcher: at('y') }), 'y')
  const again = await pool.execute({ sessionId: 's', launcher: at('x'), cells: [{ code: 'v' }] })
  assert.equal(again.output.trim(), "'in x'")
  const sessions = info(pool, 's')
  assert.equal(sessions.length, 3)
  assert.deepEqual(sessions.map((s) => s.launcher ?? null).sort(), [null, at('x'), at('y')].sort())
  assert.equal(new Set(sessions.map((s) => s.pid)).size, 3)
  // The host's env, filtered, reaches the far side through `env`; a local kernel's cwd
  // check is not made for a launched one (its cwd is the far side's).
  const far = await pool.execute({ sessionId: 'far', launcher: at('f'), cwd: '/', cells: [{ code: 'import os; os.getcwd()' }] })
  assert.equal(far.output.trim(), "'/'")
  // Nor is its interpreter looked up here: `bin/python` exists only where `env -C` goes.
  assert.ok(python, 'PYKERNEL_TEST_PYTHON names a venv python (npm test sets it)')
  const venv = path.dirname(path.dirname(python))
  assert.equal(fs.existsSync('bin/python'), false)
  const there = await pool.execute({ sessionId: 'venv', launcher: ['env', '-C', venv], interpreter: 'bin/python', cells: [{ code: 'import sys; sys.prefix' }] })
  assert.equal(there.exitCode, 0, there.output)
  assert.equal(there.output.trim(), `'${fs.realpathSync(venv)}'`)
  // A launcher that is no argv prefix is refused before anything starts.
  for (const launcher of [[], 'env', [42], ['']]) {
    await assert.rejects(run(pool, 'bad', { launcher }), { code: 'ERR_INVALID_ARG', message: /launcher/ }, JSON.stringify(launcher))
  }
  assert.deepEqual(info(pool, 'bad'), [])
})

test('launchers, round-robin: new sessions go around the list; sessions() shows where', async (t) => {
  const pool = new KernelPool({ kernel, launchers: [at('a'), at('b')] })
  t.after(() => pool.disposeAll())
  const placed = []
  for (const s of ['s1', 's2', 's3', 's4']) placed.push(await where(pool, s))
  assert.deepEqual(placed, ['a', 'b', 'a', 'b'])
  // A session's later calls stay where it is.
  assert.equal(await where(pool, 's2'), 'b')
  assert.deepEqual(
    pool.sessions.map((s) => [s.key.split(' @ ')[0], s.launcher]),
    [['session:s1', at('a')], ['session:s2', at('b')], ['session:s3', at('a')], ['session:s4', at('b')]],
  )
  // No spare: none of them would run on the default (here).
  assert.deepEqual(pool.spares, [])
})

test('launchers, per-call mode: each call is placed', async (t) => {
  const pool = new KernelPool({ mode: 'per-call', kernel, launchers: [at('a'), at('b')] })
  t.after(() => pool.disposeAll())
  assert.deepEqual([placeOf(await run(pool)), placeOf(await run(pool)), placeOf(await run(pool))], ['a', 'b', 'a'])
})

test('launchers, least-loaded: the launcher with the fewest kernels, ties by list order', async (t) => {
  const pool = new KernelPool({ kernel, launchers: [at('a'), at('b')], placement: 'least-loaded' })
  t.after(() => pool.disposeAll())
  // Placed at the same moment, they still spread out.
  const [p1, p2] = await Promise.all([where(pool, 's1'), where(pool, 's2')])
  assert.deepEqual([p1, p2].sort(), ['a', 'b'])
  // With b's session gone, b has the fewest (round-robin would say a).
  await pool.disposeOwner(p1 === 'b' ? 's1' : 's2')
  assert.equal(await where(pool, 's3'), 'b')
  // One each: the tie goes to a (round-robin would say b).
  assert.equal(await where(pool, 's4'), 'a')
  assert.equal(await where(pool, 's5'), 'b')
})

test('launcherFor (sync and async) picks by session; undefined is the default, which takes the spare', async (t) => {
  const asked = []
  const pool = new KernelPool({
    // A launched kernel's cwd is kernel.cwd as given, so it equals the spare's here: only
    // where it runs tells them apart.
    kernel: { ...kernel, cwd: process.cwd() },
    launcherFor: (key) => {
      asked.push(key)
      if (key.sessionId === 'sync') return at('s')
      if (key.sessionId === 'async') return new Promise((resolve) => setTimeout(() => resolve(at('p')), 20))
      return key.sessionId === 'none' ? undefined : null
    },
  })
  t.after(() => pool.disposeAll())
  assert.ok(await waitFor(() => pool.spares.length === 1), 'a spare is kept for the default')
  const [spare] = pool.spares
  assert.equal(await where(pool, 'sync', { ownerId: 'o1' }), 's')
  assert.equal(await where(pool, 'async'), 'p')
  assert.equal(await where(pool, 'sync'), 's')
  // A session placed elsewhere did not take the spare.
  assert.ok(!info(pool, 'sync').concat(info(pool, 'async')).some((s) => s.pid === spare))
  assert.deepEqual(pool.spares, [spare])
  // One placed on the default (here) did.
  assert.equal(await where(pool, 'none'), 'None')
  assert.equal(info(pool, 'none')[0].pid, spare)
  assert.equal(info(pool, 'none')[0].launcher, undefined)
  assert.deepEqual(asked, [{ sessionId: 'sync', ownerId: 'o1' }, { sessionId: 'async' }, { sessionId: 'none' }])
  const byFile = await pool.execute({ sessionFile: '/tmp/chat.json', cells: [{ code: PLACE }] })
  assert.equal(placeOf(byFile), 'None')
  assert.deepEqual(asked.at(-1), { sessionFile: '/tmp/chat.json' })
})

test('launcherFor that throws, rejects or returns no argv fails that request only', async (t) => {
  const answers = {
    throws: () => {
      throw new Error('no route to gpu-7')
    },
    rejects: () => Promise.reject(new Error('lookup failed')),
    number: () => 42,
    strings: () => 'ssh gpu-7',
    mixed: () => ['env', 7],
    empty: () => [],
  }
  const pool = new KernelPool({ kernel, prewarm: 0, launcherFor: ({ sessionId }) => (answers[sessionId] ?? (() => at('ok')))() })
  t.after(() => pool.disposeAll())
  const expected = {
    throws: /`launcherFor`: threw: no route to gpu-7/,
    rejects: /`launcherFor`: threw: lookup failed/,
    number: /`launcherFor`: returned a number; it must return an argv prefix/,
    strings: /`launcherFor`: returned a string/,
    mixed: /`launcherFor`: returned an array that is not all strings/,
    empty: /`launcherFor`: returned an unusable launcher: must name a program/,
  }
  for (const [id, message] of Object.entries(expected)) {
    await assert.rejects(run(pool, id), { code: 'ERR_INVALID_ARG', message }, id)
  }
  assert.equal(await where(pool, 'good'), 'ok')
  assert.deepEqual(pool.sessions.map((s) => s.key.split(' @ ')[0]), ['session:good'])
  // The next call asks again.
  answers.throws = () => at('later')
  assert.equal(await where(pool, 'throws'), 'later')
})

test('a session keeps its launcher across a reset and after its kernel died', async (t) => {
  const pool = new KernelPool({ kernel, launchers: [at('a'), at('b')] })
  t.after(() => pool.disposeAll())
  const first = await run(pool, 's')
  assert.equal(placeOf(first), 'a')
  // Were the session placed again, round-robin would now say b.
  const reset = await run(pool, 's', { reset: true })
  assert.equal(placeOf(reset), 'a')
  assert.notEqual(tokenOf(reset), tokenOf(first), 'a fresh kernel')
  const died = await pool.execute({ sessionId: 's', cells: [{ code: 'import os; os._exit(3)' }] })
  assert.equal(died.kernelDied, true, died.output)
  const after = await run(pool, 's')
  assert.equal(placeOf(after), 'a')
  assert.notEqual(tokenOf(after), tokenOf(reset))
  assert.deepEqual(info(pool, 's')[0].launcher, at('a'))
  assert.equal(await where(pool, 'other'), 'b')
})

test('a pool whose default is a launcher: its spare serves that launcher only', async (t) => {
  const pool = new KernelPool({ kernel: { ...kernel, launcher: at('d') } })
  t.after(() => pool.disposeAll())
  assert.ok(await waitFor(() => pool.spares.length === 1))
  const [spare] = pool.spares
  assert.equal(await where(pool, 'x', { launcher: at('x') }), 'x')
  assert.notEqual(info(pool, 'x')[0].pid, spare)
  assert.deepEqual(pool.spares, [spare])
  assert.equal(await where(pool, 'y'), 'd')
  assert.equal(info(pool, 'y')[0].pid, spare)
  assert.deepEqual(info(pool, 'y')[0].launcher, at('d'))
  // Naming the default launcher is the same session as naming none.
  assert.equal(await where(pool, 'y', { launcher: at('d') }), 'd')
  assert.equal(info(pool, 'y').length, 1)
})

test('a session on an unshare launcher runs in a PID namespace of its own', async (t) => {
  if (!unshareAvailable()) return t.skip('unshare is not usable here')
  const pool = new KernelPool({ kernel, launchers: [unshareLauncher(), at('a')] })
  t.after(() => pool.disposeAll())
  const code = 'import os; print(os.environ.get("PK_PLACE"), os.readlink("/proc/self/ns/pid"))'
  const [inside, beside] = [await pool.execute({ sessionId: 'u', cells: [{ code }] }), await pool.execute({ sessionId: 'e', cells: [{ code }] })]
  const hostNs = fs.readlinkSync('/proc/self/ns/pid')
  assert.equal(inside.output.split(' ')[0], 'None')
  assert.notEqual(inside.output.trim().split(' ')[1], hostNs)
  assert.equal(beside.output.split(' ')[0], 'a')
  assert.deepEqual(info(pool, 'u')[0].launcher, unshareLauncher())
})

test('invalid placement options are ERR_INVALID_ARG', () => {
  const f = () => undefined
  const cases = [
    [{ launchers: [] }, /`launchers`: must hold at least one launcher/],
    [{ launchers: [[]] }, /`launchers`: \[0\] must name a program/],
    [{ launchers: [at('a'), ['']] }, /`launchers`: \[1\] its program/],
    [{ launchers: [at('a')], launcherFor: f }, /`launcherFor`: give `launchers` or `launcherFor`, not both/],
    [{ launchers: [at('a')], placement: 'random' }, /`placement`: expected 'round-robin' or 'least-loaded'/],
    [{ placement: 'least-loaded' }, /`placement`: applies to `launchers`/],
    [{ launcherFor: f, placement: 'round-robin' }, /`placement`: applies to `launchers`/],
    [{ launcherFor: 42 }, /^invalid argument `launcherFor`: expected a function, got a number$/],
    [{ launchers: 'env' }, /launchers/],
    [{ launchers: [at('a')], kernel: { ...kernel, maxProcesses: 64 } }, /`maxProcesses`: cannot be counted through a launcher/],
    [{ launchers: [at('a')], kernel: { ...kernel, sandbox: { network: false } } }, /`sandbox`: applies to local kernels only/],
  ]
  for (const [options, message] of cases) {
    assert.throws(() => new KernelPool({ prewarm: 0, ...options }), { code: 'ERR_INVALID_ARG', message }, JSON.stringify(options))
  }
})
