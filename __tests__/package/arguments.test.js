'use strict'
// Arguments of the wrong type, at every entry point: the addon checks them itself
// (src/napi/args.rs, against src/napi/signatures.rs), so each is an ERR_INVALID_ARG whose
// message names the parameter (or the option's path) and the JavaScript types expected
// and given; sync entry points throw it, async ones return a rejected Promise and never
// throw. No napi status and no Rust wording reaches the caller.
const fs = require('node:fs')
const path = require('node:path')
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, startKernel, kernelDefaults, tempDir } = require('../helpers/kernel')
const optionTable = require('../../scripts/option-table.js')

const { Kernel, KernelPool, KvStore, OutputBuilder } = addon
const root = path.join(__dirname, '..', '..')

/** Calls `call` as an entry point of `kind` ('sync' or 'async') and returns its error:
 *  thrown for a sync one, the rejection for an async one (which must not throw). */
async function errorOf(kind, call) {
  let pending
  try {
    pending = call()
  } catch (thrown) {
    assert.equal(kind, 'sync', `an async entry point threw synchronously: ${thrown.message}`)
    return thrown
  }
  assert.equal(kind, 'async', `a sync entry point returned ${pending}`)
  assert.ok(pending instanceof Promise, 'an async entry point returns a Promise')
  return pending.then(
    (value) => assert.fail(`resolved with ${JSON.stringify(value)}`),
    (rejected) => rejected,
  )
}

/**
 * Each entry point (as index.d.ts names them) with wrong-type calls and the exact
 * message each gives. `kernel`, `pool`, `store` and `builder` are live ones.
 */
function cases({ kernel, pool, store, builder, dir }) {
  return {
    'Kernel.start': ['async', [
      [() => Kernel.start(42), '`options`: expected an object, got a number'],
      [() => Kernel.start({ ...kernelDefaults(), cwd: 42 }), '`cwd`: expected a string, got a number'],
      [() => Kernel.start({ sandbox: { writable: ['.', 7] } }), '`sandbox.writable[1]`: expected a string, got a number'],
      [() => Kernel.start({ sandbox: 5 }), '`sandbox`: expected a string or an object, got a number'],
      [() => Kernel.start({ onCall: 'f' }), '`onCall`: expected a function, got a string'],
      [() => Kernel.start({ env: { A: 1 } }), '`env.A`: expected a string, got a number'],
      [() => Kernel.start({ signal: 1 }), '`signal`: expected an object, got a number'],
    ]],
    'Kernel#execute': ['async', [
      [() => kernel.execute(42), '`code`: expected a string, got a number'],
      [() => kernel.execute(), '`code`: expected a string, got undefined'],
      [() => kernel.execute(null), '`code`: expected a string, got null'],
      [() => kernel.execute('1', 5), '`options`: expected an object, got a number'],
      [() => kernel.execute('1', { timeoutMs: '5' }), '`timeoutMs`: expected a number, got a string'],
      [() => kernel.execute('1', { onEvent: {} }), '`onEvent`: expected a function, got an object'],
      [() => kernel.execute('1', { env: { A: 1 } }), '`env.A`: expected a string or null, got a number'],
    ]],
    'Kernel#evaluate': ['async', [
      [() => kernel.evaluate('print(1)'), '`cells`: expected an array of objects, got a string'],
      [() => kernel.evaluate([{ code: 1 }]), '`cells[0].code`: expected a string, got a number'],
      [() => kernel.evaluate([{ code: '1' }, {}]), '`cells[1].code`: expected a string, got undefined'],
      [() => kernel.evaluate([{ code: '1' }], { includeFigureText: 1 }), '`includeFigureText`: expected a boolean, got a number'],
    ]],
    'Kernel#isComplete': ['async', [
      [() => kernel.isComplete(1), '`code`: expected a string, got a number'],
      [() => kernel.isComplete(), '`code`: expected a string, got undefined'],
    ]],
    'Kernel#shutdown': ['async', [[() => kernel.shutdown(5), '`options`: expected an object, got a number']]],
    'new KernelPool': ['sync', [
      [() => new KernelPool(5), '`options`: expected an object, got a number'],
      [() => new KernelPool({ maxSessions: true }), '`maxSessions`: expected a number or a string, got a boolean'],
      [() => new KernelPool({ kernel: { sandbox: { writable: [1] } } }), '`kernel.sandbox.writable[0]`: expected a string, got a number'],
      [() => new KernelPool({ launchers: [['ssh', 1]] }), '`launchers[0][1]`: expected a string, got a number'],
    ]],
    'KernelPool#execute': ['async', [
      [() => pool.execute(), '`request`: expected an object, got undefined'],
      [() => pool.execute({}), '`cells`: expected an array of objects, got undefined'],
      [() => pool.execute({ cells: [{ code: '1' }], sessionId: 7 }), '`sessionId`: expected a string, got a number'],
      [() => pool.execute({ cells: [{ code: '1' }], launcher: 'ssh' }), '`launcher`: expected an array of strings, got a string'],
    ]],
    'KernelPool#disposeOwner': ['async', [[() => pool.disposeOwner(5), '`ownerId`: expected a string, got a number']]],
    'KernelPool#disposeAll': ['async', [[() => pool.disposeAll('soon'), '`options`: expected an object, got a string']]],
    'new KvStore': ['sync', [
      [() => new KvStore(5, 's'), '`artifactsDir`: expected a string, got a number'],
      [() => new KvStore(dir, 's', { envPrefix: 1 }), '`envPrefix`: expected a string, got a number'],
    ]],
    'KvStore#get': ['async', [[() => store.get(5), '`key`: expected a string, got a number']]],
    'KvStore#set': ['async', [[() => store.set(undefined, 1), '`key`: expected a string, got undefined']]],
    'KvStore#delete': ['async', [[() => store.delete([]), '`key`: expected a string, got an array']]],
    'new OutputBuilder': ['sync', [[() => new OutputBuilder({ lineBytes: '1' }), '`lineBytes`: expected a number, got a string']]],
    'OutputBuilder#push': ['sync', [[() => builder.push(5), '`text`: expected a string, got a number']]],
    'OutputBuilder#pushEvent': ['sync', [[() => builder.pushEvent('stdout'), '`event`: expected an object, got a string']]],
    'OutputBuilder#finish': ['sync', [
      [() => builder.finish('done'), '`outcome`: expected an object, got a string'],
      [() => builder.finish({ timedOut: 1 }), '`timedOut`: expected a boolean, got a number'],
    ]],
    checkPythonKernelAvailability: ['answer', [
      [() => addon.checkPythonKernelAvailability(42), '`options`: expected an object, got a number'],
      [() => addon.checkPythonKernelAvailability({ cwd: 42 }), '`cwd`: expected a string, got a number'],
    ]],
    evalBackends: ['async', [[() => addon.evalBackends({ settings: { py: 'yes' } }), '`settings.py`: expected a boolean, got a string']]],
    resolvePython: ['async', [[() => addon.resolvePython({ baseEnv: 5 }), '`baseEnv`: expected an object, got a number']]],
    pythonCandidates: ['sync', [[() => addon.pythonCandidates({ cwd: 5 }), '`cwd`: expected a string, got a number']]],
    clampLine: ['sync', [
      [() => addon.clampLine(5), '`line`: expected a string, got a number'],
      [() => addon.clampLine('x', '5'), '`maxColumns`: expected a number, got a string'],
    ]],
    collapsedPreview: ['sync', [[() => addon.collapsedPreview(5n), '`text`: expected a string, got a bigint']]],
    filterEnv: ['sync', [
      [() => addon.filterEnv(5), '`env`: expected an object, got a number'],
      [() => addon.filterEnv({ A: 1 }), '`env.A`: expected a string or undefined, got a number'],
    ]],
    readArtifact: ['async', [
      [() => addon.readArtifact('artifact://x'), '`options`: expected an object, got undefined'],
      [() => addon.readArtifact(5, { artifactsDir: dir }), '`uri`: expected a string, got a number'],
      [() => addon.readArtifact('artifact://x', {}), '`artifactsDir`: expected a string, got undefined'],
    ]],
    renderBundle: ['sync', [[() => addon.renderBundle('text'), '`bundle`: expected an object, got a string']]],
    fitImages: ['async', [
      [() => addon.fitImages('x.png'), '`images`: expected an array of objects, got a string'],
      [() => addon.fitImages([{ mime: 'image/png', data: 5 }]), '`images[0].data`: expected a string, got a number'],
      [() => addon.fitImages([], { maxEdge: '1568' }), '`maxEdge`: expected a number, got a string'],
    ]],
    streamingPreview: ['sync', [[() => addon.streamingPreview(5), '`text`: expected a string or an array of strings, got a number']]],
  }
}

test('every entry point refuses a wrong type with ERR_INVALID_ARG naming it and the types; async ones reject', async (t) => {
  const dir = tempDir()
  const kernel = await startKernel()
  const pool = new KernelPool({ prewarm: 0, heartbeatIntervalMs: 0, kernel: kernelDefaults() })
  const store = new KvStore(dir, 'args')
  const builder = new OutputBuilder()
  t.after(() => Promise.all([kernel.shutdown(), pool.disposeAll()]))
  const table = cases({ kernel, pool, store, builder, dir })
  // Each entry point that takes an argument has a case.
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const taking = optionTable.entryPointsOf(dts).filter(([, params]) => params.length > 0).map(([entry]) => entry)
  assert.deepEqual(taking.filter((entry) => !table[entry]), [], 'entry points without a case here')
  for (const [entry, [kind, calls]] of Object.entries(table)) {
    for (const [call, message] of calls) {
      const label = `${entry}: ${message}`
      if (kind === 'answer') {
        const answer = await errorOf('async', () => call().then((a) => Promise.reject(a)))
        assert.equal(answer.ok, false, label)
        assert.equal(answer.reason, `invalid argument ${message}`, label)
        assert.ok(answer.isolation, 'the answer still says what the machine enforces')
        continue
      }
      const error = await errorOf(kind, call)
      assert.ok(error instanceof Error, label)
      assert.equal(error.code, 'ERR_INVALID_ARG', `${label}: ${error.code} ${error.message}`)
      assert.equal(error.message, `invalid argument ${message}`, label)
    }
  }
  assert.ok(kernel.alive, 'no refused call reached the kernel')
  assert.equal((await kernel.execute('6*7')).result['text/plain'], '42')
  assert.deepEqual(pool.sessions, [], 'no refused call reached the pool')
})

test('Kernel has no constructor, and the classes are the binding\'s own', async () => {
  assert.throws(() => new Kernel(), { code: 'ERR_INVALID_ARG', message: 'Kernel has no constructor: use Kernel.start(options)' })
  const binding = require('../../index.js')
  assert.equal(addon.Kernel, binding.Kernel)
  assert.equal(addon.JsKernel, binding.Kernel)
  assert.equal(addon.KernelPool, binding.KernelPool)
  const kernel = await startKernel()
  try {
    assert.ok(kernel instanceof Kernel)
  } finally {
    await kernel.shutdown()
  }
})

test('a value that throws when read is the argument\'s error, never an uncoded one', async () => {
  const hostile = { ...kernelDefaults() }
  Object.defineProperty(hostile, 'cwd', { enumerable: true, get: () => { throw new Error('boom') } })
  const error = await errorOf('async', () => Kernel.start(hostile))
  assert.equal(error.code, 'ERR_INVALID_ARG')
  assert.equal(error.message, 'invalid argument `cwd`: could not be read: boom')
  const revoked = Proxy.revocable({}, {})
  revoked.revoke()
  const thrown = await errorOf('sync', () => new KernelPool(revoked.proxy))
  assert.equal(thrown.code, 'ERR_INVALID_ARG', thrown.message)
  assert.match(thrown.message, /^invalid argument `options`: could not be read: /)
})

test('an unknown key names its path and the likely key, at every depth', async () => {
  await assert.rejects(Kernel.start({ sandbox: { writeable: ['.'] } }), {
    code: 'ERR_INVALID_ARG',
    message: 'invalid argument `sandbox.writeable`: SandboxOptions has no key `writeable` (did you mean `writable`?); its keys are network, writable, hidden, installs',
  })
  assert.throws(() => new KernelPool({ kernel: { sandbox: { network: { alow: [] } } } }), {
    code: 'ERR_INVALID_ARG',
    message: 'invalid argument `kernel.sandbox.network.alow`: NetworkAllowList has no key `alow` (did you mean `allow`?); its keys are allow',
  })
})
