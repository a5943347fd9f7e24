'use strict'
// Unknown keys in option objects: napi-rs reads the fields it knows and ignores the rest,
// so a misspelt option did nothing and said nothing. Each is an ERR_INVALID_ARG naming
// the key's path and the keys its object has; constructors and sync functions throw,
// async methods reject. The keys come from index.d.ts (src/napi/signatures.rs, generated).
const fs = require('node:fs')
const path = require('node:path')
const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, python, startKernel, kernelDefaults, tempDir } = require('../helpers/kernel')
const optionTable = require('../../scripts/option-table.js')

const root = path.join(__dirname, '..', '..')
/** What index.d.ts declares: the keys the addon's table (src/napi/signatures.rs) has,
 *  while it is current (the last test checks it is). */
const DOCUMENTED = optionTable.optionTable(fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8'))
const { Kernel, KernelPool, KvStore, OutputBuilder } = addon

test('a misspelt sandbox key is refused, not a kernel that runs unconfined', async () => {
  const cwd = tempDir()
  const outside = tempDir()
  const target = path.join(outside, 'escaped.txt')
  // What the caller meant: writes confined to cwd, no network. What napi read: neither.
  const outcome = await startKernel({ cwd, sandbox: { writeable: [cwd], netwrok: false } }).then(
    async (kernel) => {
      const r = await kernel.execute(`open(${JSON.stringify(target)}, 'w').write('x')`)
      const { enforced } = kernel.isolation
      await kernel.shutdown()
      return { status: r.status, enforced }
    },
    (error) => error,
  )
  assert.ok(outcome instanceof Error, `the kernel started and its cell wrote outside cwd: ${JSON.stringify(outcome)}`)
  assert.equal(outcome.code, 'ERR_INVALID_ARG', outcome.message)
  assert.equal(
    outcome.message,
    'invalid argument `sandbox.writeable`: SandboxOptions has no key `writeable` (did you mean `writable`?); ' +
      `its keys are ${Object.keys(DOCUMENTED.interfaces.SandboxOptions).join(', ')}`,
  )
  assert.equal(fs.existsSync(target), false)
  // The same typo one level down, in the pool's kernel defaults, before any kernel starts.
  assert.throws(() => new KernelPool({ prewarm: 1, kernel: { ...kernelDefaults(), sandbox: { netwrok: false } } }), {
    code: 'ERR_INVALID_ARG',
    message: /^invalid argument `kernel\.sandbox\.netwrok`: SandboxOptions has no key `netwrok` \(did you mean `network`\?\); its keys are /,
  })
})

test('the message names the nearest key when one is a likely misspelling, and no other', async () => {
  const refusal = (options) => startKernel(options).then((k) => k.shutdown().then(() => null), (e) => e.message)
  const cases = [
    [{ startup_timeout_ms: 10 }, '`startup_timeout_ms`', 'startupTimeoutMs'],
    [{ StartupTimeoutMs: 10 }, '`StartupTimeoutMs`', 'startupTimeoutMs'],
    [{ interpeter: python }, '`interpeter`', 'interpreter'],
    [{ prelaod: [] }, '`prelaod`', 'preload'],
    // Two letters swapped are one edit, or a short key would find no match.
    [{ cdw: '/' }, '`cdw`', 'cwd'],
    [{ deadline: 10 }, '`deadline`', 'deadlineMs'],
    [{ sandbox: { writable: [], netwrok: false } }, '`sandbox.netwrok`', 'network'],
  ]
  for (const [options, at, near] of cases) {
    const message = await refusal(options)
    assert.ok(message?.startsWith(`invalid argument ${at}: `), `${JSON.stringify(options)}: ${message}`)
    assert.ok(message.includes(`(did you mean \`${near}\`?)`), message)
  }
  for (const options of [{ colour: 'red' }, { sandbox: { docker: true } }, { io: 1 }]) {
    const message = await refusal(options)
    assert.ok(message?.includes('has no key'), `${JSON.stringify(options)}: ${message}`)
    assert.ok(!message.includes('did you mean'), message)
  }
  // A key whose value is undefined is a misspelling all the same.
  assert.match(await refusal({ sandbox: { writeable: undefined } }), /`sandbox\.writeable`/)
  // Cells, by index.
  const pool = new KernelPool({ prewarm: 0, heartbeatIntervalMs: 0, kernel: kernelDefaults() })
  try {
    await assert.rejects(pool.execute({ cells: [{ code: '1' }, { code: '2', titel: 'x' }] }), {
      code: 'ERR_INVALID_ARG',
      message: `invalid argument \`cells[1].titel\`: EvalCell has no key \`titel\` (did you mean \`title\`?); its keys are ${Object.keys(DOCUMENTED.interfaces.EvalCell).join(', ')}`,
    })
    assert.deepEqual(pool.sessions, [], 'no session was made for the refused request')
  } finally {
    await pool.disposeAll()
  }
})

/** An artifact for readArtifact to find, in a directory of its own. */
function artifactDir() {
  const dir = tempDir()
  fs.writeFileSync(path.join(dir, 'out-1.txt'), 'hello\n', { mode: 0o600 })
  return dir
}

/**
 * How each entry point of the table is called: `args` are valid arguments (`null`:
 * none), each test putting its own options object in their place; `kernel` and `pool`
 * are live ones. An entry point of index.d.ts without a line here fails the tests below.
 */
function callers({ kernel, pool }) {
  const dir = artifactDir()
  return {
    checkPythonKernelAvailability: { kind: 'answer', args: [null], call: (a) => addon.checkPythonKernelAvailability(...a) },
    collapsedPreview: { kind: 'sync', args: ['text', null], call: (a) => addon.collapsedPreview(...a) },
    evalBackends: { kind: 'async', args: [null], call: (a) => addon.evalBackends(...a) },
    filterEnv: { kind: 'sync', args: [{ PATH: '/bin' }, null], call: (a) => addon.filterEnv(...a) },
    readArtifact: { kind: 'async', args: ['artifact://out-1', null], call: (a) => addon.readArtifact(...a), fill: { ReadArtifactOptions: { artifactsDir: dir } } },
    renderBundle: { kind: 'sync', args: [{ 'text/plain': 'x' }, null], call: (a) => addon.renderBundle(...a) },
    fitImages: { kind: 'async', args: [[{ mime: 'image/png', data: '' }], null], call: (a) => addon.fitImages(...a), fill: { ImageToFit: { mime: 'image/png', data: '' } } },
    resolvePython: { kind: 'async', args: [null], call: (a) => addon.resolvePython(...a) },
    pythonCandidates: { kind: 'sync', args: [null], call: (a) => addon.pythonCandidates(...a) },
    streamingPreview: { kind: 'sync', args: ['text', null], call: (a) => addon.streamingPreview(...a) },
    // `reattach` needs a launcher, which every key's sandbox rules out: the pool's
    // `kernel.reattach` (applied to launched sessions only) takes it here.
    'Kernel.start': { kind: 'async', args: [null], call: (a) => Kernel.start(...a), fill: { KernelStartOptions: { reattach: undefined } } },
    'Kernel#execute': { kind: 'async', args: ['1', null], call: (a) => kernel.execute(...a) },
    'Kernel#evaluate': { kind: 'async', args: [[{ code: '1' }], null], call: (a) => kernel.evaluate(...a) },
    // Last for the kernel: accepted, it ends it.
    'Kernel#shutdown': { kind: 'async', args: [null], call: (a) => kernel.shutdown(...a), last: true },
    'new KernelPool': { kind: 'sync', args: [null], call: (a) => new KernelPool(...a) },
    'KernelPool#execute': { kind: 'async', args: [null], call: (a) => pool.execute(...a) },
    'KernelPool#disposeOwner': { kind: 'async', args: ['nobody', null], call: (a) => pool.disposeOwner(...a) },
    'KernelPool#disposeAll': { kind: 'async', args: [null], call: (a) => pool.disposeAll(...a), last: true },
    'new KvStore': { kind: 'sync', args: [tempDir(), 'session', null], call: (a) => new KvStore(...a) },
    'new OutputBuilder': { kind: 'sync', args: [null], call: (a) => new OutputBuilder(...a) },
    'OutputBuilder#finish': { kind: 'sync', args: [null], call: (a) => new OutputBuilder().finish(...a) },
  }
}

/** What calling `call` did: `{ thrown }` synchronously, `{ rejected }`, or `{ value }`. */
async function outcomeOf(call) {
  let pending
  try {
    pending = call()
  } catch (thrown) {
    return { thrown }
  }
  if (!(pending instanceof Promise)) return { value: pending }
  return pending.then(
    (value) => ({ value }),
    (rejected) => ({ rejected }),
  )
}

/** Values for the keys an object of `shape` needs to be valid, and for the kernel's
 *  interpreter (so an accepted call starts the test's Python). */
const REQUIRED = {
  EvalCell: { code: '1' },
  EvalRequest: { cells: [{ code: '1' }] },
  KernelOptions: { interpreter: python },
  KernelStartOptions: { interpreter: python },
  ResolvePythonOptions: { interpreter: python },
  EvalBackendsOptions: { interpreter: python },
  NetworkAllowList: { allow: [] },
  ReattachOptions: { graceMs: 1000 },
}

/** A valid value of `shape` with `plant` (a path of keys, the last one unknown) set. */
function planted(shape, plant, fill) {
  if (Array.isArray(shape)) return [planted(shape[0], plant, fill)]
  const value = { ...REQUIRED[shape], ...fill[shape] }
  const [key, ...rest] = plant
  value[key] = rest.length ? planted(DOCUMENTED.interfaces[shape][key], rest, fill) : 1
  return value
}

/** Every place an unknown key can go in an object of `shape`: `[keys]`, each ending in
 *  the unknown key, nested objects included (each interface once per path). */
function plantings(shape, seen = new Set()) {
  const name = Array.isArray(shape) ? shape[0] : shape
  const found = [['notAnOption']]
  if (seen.has(name)) return found
  for (const [key, nested] of Object.entries(DOCUMENTED.interfaces[name])) {
    if (nested !== null) for (const p of plantings(nested, new Set([...seen, name]))) found.push([key, ...p])
  }
  return found
}

/** `keys` as the message writes the path: `sandbox.x`, `cells[0].x`. */
function pathOf(slot, keys) {
  let at = Array.isArray(slot.shape) ? `${slot.name}[0]` : ''
  let shape = Array.isArray(slot.shape) ? slot.shape[0] : slot.shape
  for (const key of keys) {
    at = at ? `${at}.${key}` : key
    const nested = DOCUMENTED.interfaces[shape]?.[key]
    if (Array.isArray(nested)) at += '[0]'
    shape = Array.isArray(nested) ? nested[0] : nested
  }
  return at
}

test('every entry point refuses an unknown key at every level, as it refuses a wrong type', async (t) => {
  const kernel = await startKernel()
  const pool = new KernelPool({ prewarm: 0, heartbeatIntervalMs: 0, kernel: kernelDefaults() })
  t.after(() => Promise.all([kernel.shutdown(), pool.disposeAll()]))
  const table = callers({ kernel, pool })
  assert.deepEqual(Object.keys(table).sort(), Object.keys(DOCUMENTED.entryPoints).sort(), 'a caller for each entry point')
  const seen = []
  for (const [entry, slots] of Object.entries(DOCUMENTED.entryPoints)) {
    const { kind, args, call, fill = {} } = table[entry]
    for (const [i, slot] of slots.entries()) {
      if (!slot) continue
      for (const plant of plantings(slot.shape)) {
        const at = pathOf(slot, plant)
        const bad = args.map((a, j) => (j === i ? planted(slot.shape, plant, fill) : a === null ? undefined : a))
        const outcome = await outcomeOf(() => call(bad))
        // A call that was not refused may have made a kernel or a pool: end it.
        await outcome.value?.shutdown?.()
        await outcome.value?.disposeAll?.()
        const label = `${entry}: ${at}`
        seen.push(label)
        if (kind === 'answer') {
          assert.equal(outcome.value?.ok, false, `${label}: ${JSON.stringify(outcome)}`)
          assert.ok(outcome.value.reason.startsWith(`invalid argument \`${at}\`: `), `${label}: ${outcome.value.reason}`)
          assert.ok(outcome.value.isolation, 'the answer still says what the machine enforces')
          continue
        }
        const error = kind === 'sync' ? outcome.thrown : outcome.rejected
        assert.ok(error, `${label} is ${kind === 'sync' ? 'thrown' : 'a rejection'}: ${JSON.stringify(outcome)}`)
        assert.equal(error.code, 'ERR_INVALID_ARG', `${label}: ${error.message}`)
        assert.ok(error.message.startsWith(`invalid argument \`${at}\`: `), `${label}: ${error.message}`)
      }
    }
  }
  assert.ok(kernel.alive, 'no refused call reached the kernel')
  assert.deepEqual(pool.sessions, [], 'no refused call reached the pool')
  // The nested levels where a typo costs most, among those tried.
  for (const want of [
    'Kernel.start: sandbox.notAnOption',
    'new KernelPool: kernel.notAnOption',
    'new KernelPool: kernel.sandbox.notAnOption',
    'KernelPool#execute: cells[0].notAnOption',
    'Kernel#evaluate: cells[0].notAnOption',
    'evalBackends: settings.notAnOption',
  ]) {
    assert.ok(seen.includes(want), `${want} (tried: ${seen.join('; ')})`)
  }
})

/** An object of `shape` with every key index.d.ts declares for it, nested ones filled the
 *  same way and the others undefined (an absent option), plus the values it needs. */
function everyKey(shape, fill) {
  if (Array.isArray(shape)) return [everyKey(shape[0], fill)]
  const value = {}
  for (const [key, nested] of Object.entries(DOCUMENTED.interfaces[shape])) value[key] = nested === null ? undefined : everyKey(nested, fill)
  return { ...value, ...REQUIRED[shape], ...fill[shape] }
}

test('every key each interface declares is accepted, at every level', async (t) => {
  const kernel = await startKernel()
  const pool = new KernelPool({ prewarm: 0, heartbeatIntervalMs: 0, kernel: kernelDefaults() })
  t.after(() => Promise.all([kernel.shutdown(), pool.disposeAll()]))
  const table = callers({ kernel, pool })
  const entries = Object.entries(DOCUMENTED.entryPoints).sort(([a], [b]) => Boolean(table[a].last) - Boolean(table[b].last))
  for (const [entry, slots] of entries) {
    const { kind, args, call, fill = {} } = table[entry]
    const full = args.map((a, i) => (slots[i] ? everyKey(slots[i].shape, fill) : a))
    const outcome = await outcomeOf(() => call(full))
    const failure = outcome.thrown || outcome.rejected
    assert.equal(failure, undefined, `${entry}(${JSON.stringify(full)}): ${failure?.message}`)
    const value = outcome.value
    if (kind === 'answer') assert.equal(value.ok, true, `${entry}: ${value.reason}`)
    // What it made is ended again.
    if (entry === 'Kernel.start') await value.shutdown()
    if (entry === 'new KernelPool') await value.disposeAll()
    if (entry === 'KernelPool#execute') assert.equal(value.exitCode, 0, value.output)
    if (entry === 'Kernel#execute') assert.equal(value.status, 'ok')
    if (entry === 'readArtifact') assert.equal(value, 'hello\n')
  }
})

test('free-form dictionaries (env, baseEnv, MIME bundles) take any key', async (t) => {
  const kernel = await startKernel({ env: { ANY_NAME_AT_ALL: 'x' }, baseEnv: { ...process.env, ANOTHER_ONE: 'y' } })
  t.after(() => kernel.shutdown())
  const r = await kernel.execute("import os; os.environ['ANY_NAME_AT_ALL'] + os.environ['THIS_CELL']", { env: { THIS_CELL: 'z' } })
  assert.equal(r.result['text/plain'], "'xz'")
  assert.equal(addon.renderBundle({ 'text/plain': 'p', 'application/x-anything': { any: 1 } }).text, 'p')
  assert.equal(addon.filterEnv({ PATH: '/bin', ANY_NAME: 'v' }, {}).PATH, '/bin')
})

test('src/napi/signatures.rs is what index.d.ts says now, and has every field of the Rust option structs', () => {
  assert.equal(
    fs.readFileSync(optionTable.RUST_TABLE, 'utf8'),
    optionTable.expected(),
    'src/napi/signatures.rs is stale: run `npm run build` (scripts/dts.js) and commit it',
  )
  // The fields napi reads from each `#[napi(object)]` struct the table names, in their
  // JavaScript spelling: a struct field missing from index.d.ts (a stale build) fails here.
  const structs = new Map()
  for (const file of fs.readdirSync(path.join(root, 'src', 'napi'))) {
    const source = fs.readFileSync(path.join(root, 'src', 'napi', file), 'utf8')
    for (const [, name, body] of source.matchAll(/#\[napi\(object[^\]]*\]\s*(?:#\[[^\]]*\]\s*)*pub struct (\w+)(?:<[^>]*>)? \{([\s\S]*?)\n\}/g)) {
      const fields = [...body.matchAll(/^ {4}(?:#\[napi\(js_name = "(\w+)"\)\]\s*)?pub (\w+):/gm)].map(([, jsName, field]) =>
        jsName ?? field.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase()),
      )
      structs.set(name, fields)
    }
  }
  const checked = Object.keys(DOCUMENTED.interfaces).filter((name) => structs.has(name))
  for (const name of ['SandboxOptions', 'KernelOptions', 'PoolOptions', 'EvalCell', 'ResolvePythonOptions', 'OutputBuilderOptions']) {
    assert.ok(checked.includes(name), `${name} is a Rust struct the table names`)
  }
  for (const name of checked) {
    assert.deepEqual(Object.keys(DOCUMENTED.interfaces[name]).sort(), [...structs.get(name)].sort(), `${name}: the table's keys are the struct's fields`)
  }
  // `Kernel.start` takes the kernel's options (it `extends` them) and its own.
  assert.deepEqual(Object.keys(DOCUMENTED.interfaces.KernelStartOptions), [...structs.get('KernelOptions'), 'signal', 'deadlineMs'])
  // The objects read by hand (`OptionReader`): every key the Rust code reads is one the
  // table has, or passing it would now be refused.
  const known = new Set(Object.values(DOCUMENTED.interfaces).flatMap((keys) => Object.keys(keys)))
  const read = []
  for (const file of fs.readdirSync(path.join(root, 'src', 'napi'))) {
    const source = fs.readFileSync(path.join(root, 'src', 'napi', file), 'utf8')
    for (const [, key] of source.matchAll(/\b(?:reader|options)\s*\.(?:get|millis|timeout_millis|callback)(?:::<[\s\S]*?>)?\(\s*"(\w+)"/g)) read.push(key)
  }
  for (const key of ['cells', 'sessionId', 'maxCapturedBytes', 'onOutput', 'artifactId', 'deadlineMs']) assert.ok(read.includes(key), `${key} is found among the keys read (${read})`)
  assert.deepEqual(read.filter((key) => !known.has(key)), [], 'keys read that no interface declares')
})
