'use strict'
// The cluster and container recipes of docs/launchers.md, read from that page, run against
// stand-ins: `kubectl`, `docker` and `podman` are __tests__/helpers/stand-in-tool.py in a
// directory first on PATH, which records its argv and runs the command of `exec` here (see
// that file). So the words each recipe gives its tool are checked exactly, a real kernel
// starts through them, and the pool's placement and the agent-sandbox `launcherFor` code
// are run as printed. Then podman for real, when this machine can run a container: one
// made from a root filesystem of this machine's /usr (no image is pulled).
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { pathToFileURL } = require('node:url')

const { Kernel, KernelPool } = require('../..')
const { isAlive, waitFor } = require('../helpers/kernel')
const { onPath } = require('../helpers/launchers')

const root = path.resolve(__dirname, '..', '..')
const python = process.env.PYKERNEL_TEST_PYTHON || 'python3'
const TOOLS = ['kubectl', 'docker', 'podman']

// ------------------------------------------------------------------ reading the page

const doc = fs.readFileSync(path.join(root, 'docs', 'launchers.md'), 'utf8')
const recipesSection = (() => {
  const start = doc.indexOf('\n## Recipes\n')
  assert.ok(start >= 0, 'docs/launchers.md has no "## Recipes" section')
  const end = doc.indexOf('\n## ', start + 1)
  return doc.slice(start, end < 0 ? undefined : end)
})()
const jsBlocks = [...recipesSection.matchAll(/<!-- fragment -->\n```js\n([\s\S]*?)```/g)].map((m) => m[1])

/** Every flat array of single-quoted words in `text` whose first word is one of TOOLS. */
function toolArrays(text) {
  const arrays = []
  for (const [list] of text.matchAll(/\[\s*'[^'\n]*'(?:\s*,\s*'[^'\n]*')*\s*\]/g)) {
    const argv = JSON.parse(list.replace(/'/g, '"'))
    if (TOOLS.includes(argv[0])) arrays.push(argv)
  }
  return arrays
}

/** The distinct launchers the recipes print for kubectl, docker and podman. */
const RECIPES = [...new Map(jsBlocks.flatMap(toolArrays).map((a) => [JSON.stringify(a), a])).values()]

/** The `launchers: [...]` and `placement` of the pool in the block that names `tool` first. */
function documentedPool(tool) {
  const block = jsBlocks.find((b) => b.includes(`launchers: [['${tool}'`))
  assert.ok(block, `docs/launchers.md has no pool with launchers: [['${tool}', ...]]`)
  const m = /launchers: (\[[\s\S]*?\]\]),\s*placement: '([\w-]+)'/.exec(block)
  assert.ok(m, `the ${tool} pool of docs/launchers.md has no launchers + placement`)
  return { launchers: toolArrays(m[1]), placement: m[2] }
}

/** pykernel's words after the launcher (src/start/launcher.rs): the bootstrap as built. */
const BOOTSTRAP = (() => {
  const src = fs.readFileSync(path.join(root, 'src', 'start', 'launcher.rs'), 'utf8')
  const m = /const BOOTSTRAP: &str = r#"([\s\S]*?)"#;/.exec(src)
  assert.ok(m, 'src/start/launcher.rs has no BOOTSTRAP')
  return m[1]
})()

// ------------------------------------------------------------------ the stand-ins

/** A directory holding the stand-ins and a `python3` (the far side's, found on PATH). */
function makeStandIns() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-recipes-'))
  const shebang = `#!${fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : fs.realpathSync(python)}`
  const script = fs.readFileSync(path.join(__dirname, '..', 'helpers', 'stand-in-tool.py'), 'utf8').replace(/^#!.*/, shebang)
  for (const tool of TOOLS) fs.writeFileSync(path.join(dir, tool), script, { mode: 0o755 })
  fs.writeFileSync(path.join(dir, 'calls.jsonl'), '')
  // `python3` for recipes that leave `interpreter` at its default: a real interpreter, not
  // a venv's launcher (a symlink to one would not find its pyvenv.cfg).
  const real = spawnSync(python, ['-c', 'import sys; print(sys._base_executable)'], { encoding: 'utf8' }).stdout.trim()
  fs.symlinkSync(real, path.join(dir, 'python3'))
  return dir
}

/** The calls recorded since `from` (a count of lines), each `[tool, ...argv]`. */
const calls = (dir, from = 0) =>
  fs.readFileSync(path.join(dir, 'calls.jsonl'), 'utf8').split('\n').filter(Boolean).slice(from).map((l) => JSON.parse(l))
const execCalls = (dir, from) => calls(dir, from).filter((c) => c[1] === 'exec')

/** Asserts `argv` is `recipe` followed by pykernel's words, `interpreter` first. */
function assertLaunched(argv, recipe, interpreter, memory = '-') {
  const words = argv.slice(recipe.length)
  assert.deepEqual(argv.slice(0, recipe.length), recipe, 'the tool gets the recipe as printed')
  assert.deepEqual(words.slice(0, 4), [interpreter, '-u', '-c', BOOTSTRAP], "then the far side's Python and the bootstrap")
  assert.match(words[4], /^[0-9a-f]{64}$/, "then the runner's sha256")
  assert.equal(words[5], memory, 'then the memory limit')
  assert.match(words[6], /^\d+$/, 'then the shutdown grace in ms')
  assert.equal(words.length, 7, `nothing more: ${JSON.stringify(words.slice(7))}`)
}

/** The far side's kernel and supervisor pids, from a cell. */
async function farPids(kernelOrPool, sessionId) {
  const code = 'import os; print(os.getpid(), os.getppid())'
  if (kernelOrPool instanceof Kernel) {
    const r = await kernelOrPool.execute(code)
    assert.equal(r.status, 'ok', JSON.stringify(r.error))
    return r.stdout.trim().split(' ').map(Number)
  }
  const r = await kernelOrPool.execute({ sessionId, cells: [{ code }] })
  assert.equal(r.exitCode, 0, r.output)
  return r.output.trim().split(' ').map(Number)
}

const gone = (pids) => waitFor(() => pids.every((p) => !isAlive(p)), { timeoutMs: 10_000 })

describe('the recipes of docs/launchers.md, through stand-in tools', () => {
  let dir
  const savedPath = process.env.PATH
  before(() => {
    dir = makeStandIns()
    process.env.PATH = `${dir}${path.delimiter}${savedPath}`
  })
  after(() => {
    process.env.PATH = savedPath
    fs.rmSync(dir, { recursive: true, force: true })
  })

  test('the page prints a kubectl, a docker and a podman recipe, with the options it explains', () => {
    const has = (pred) => RECIPES.some(pred)
    assert.ok(has((a) => a[0] === 'kubectl' && a.includes('-i') && a.includes('-c') && a.at(-1) === '--'), JSON.stringify(RECIPES))
    assert.ok(has((a) => a[0] === 'docker' && a.includes('-w') && a.includes('-u')), JSON.stringify(RECIPES))
    assert.ok(has((a) => a[0] === 'podman' && a.includes('-w') && a.includes('-u')), JSON.stringify(RECIPES))
    // No recipe asks for a terminal.
    for (const a of RECIPES) assert.ok(!a.includes('-t') && !a.includes('-it'), a.join(' '))
  })

  for (const recipe of RECIPES) {
    test(`${recipe.join(' ')}: the tool gets exactly the recipe and pykernel's words; a cell runs; nothing is left`, async () => {
      const from = calls(dir).length
      const memory = 4 * 1024 ** 3
      const kernel = await Kernel.start({ launcher: recipe, interpreter: python, memoryLimitBytes: memory })
      let pids
      try {
        const r = await kernel.execute('1+1')
        assert.equal(r.status, 'ok', JSON.stringify(r.error))
        assert.equal(r.result['text/plain'], '2')
        assert.equal(kernel.isolation.mode, 'launcher')
        pids = await farPids(kernel)
      } finally {
        await kernel.shutdown()
      }
      const launched = execCalls(dir, from)
      assert.equal(launched.length, 1, JSON.stringify(launched))
      assertLaunched(launched[0], recipe, python, String(memory))
      assert.ok(await gone([...pids, kernel.pid]), `left running: ${[...pids, kernel.pid].filter(isAlive)}`)
    })
  }

  test('without -i the command gets no stdin, and the start fails saying so', async () => {
    const recipe = RECIPES.find((a) => a[0] === 'docker').filter((w) => w !== '-i')
    await assert.rejects(Kernel.start({ launcher: recipe, interpreter: python }), (e) => {
      assert.equal(e.code, 'ERR_KERNEL_START_FAILED')
      assert.match(e.message, /the link closed while the runner was being sent/)
      return true
    })
  })

  test("the kubectl pool: launchers + 'least-loaded' puts two sessions on the two pods", async (t) => {
    const { launchers, placement } = documentedPool('kubectl')
    assert.equal(placement, 'least-loaded')
    assert.equal(launchers.length, 2)
    const from = calls(dir).length
    const pool = new KernelPool({ kernel: { interpreter: python }, launchers, placement, prewarm: 0 })
    t.after(() => pool.disposeAll())
    const [a, b] = await Promise.all(['s1', 's2'].map((s) => pool.execute({ sessionId: s, cells: [{ code: '1+1' }] })))
    assert.equal(a.output.trim(), '2', a.output)
    assert.equal(b.output.trim(), '2', b.output)
    const launched = execCalls(dir, from)
    assert.equal(launched.length, 2, JSON.stringify(launched))
    // Each pod's recipe once, in whichever order the two starts reached the tool.
    const used = launchers.map((l) => launched.filter((c) => JSON.stringify(c.slice(0, l.length)) === JSON.stringify(l)))
    assert.deepEqual(used.map((u) => u.length), [1, 1], JSON.stringify(launched))
    used.forEach(([argv], i) => assertLaunched(argv, launchers[i], python))
    assert.deepEqual(pool.sessions.map((s) => JSON.stringify(s.launcher)).sort(), launchers.map((l) => JSON.stringify(l)).sort())
    const pids = [...(await farPids(pool, 's1')), ...(await farPids(pool, 's2'))]
    await pool.disposeAll()
    assert.ok(await gone(pids), `left running: ${pids.filter(isAlive)}`)
  })

  test('the agent-sandbox launcherFor, run as printed: a claim and a pod per session, released by endSession', async (t) => {
    const block = jsBlocks.find((b) => b.includes("kind: 'SandboxClaim'"))
    assert.ok(block, 'docs/launchers.md has no agent-sandbox block')
    // As a module of this package's directory, so that `from 'pykernel'` is this package.
    const modDir = fs.mkdtempSync(path.join(root, '.recipes-test-'))
    t.after(() => fs.rmSync(modDir, { recursive: true, force: true }))
    const file = path.join(modDir, 'agent-sandbox.mjs')
    fs.writeFileSync(file, `${block}\nexport { pool, endSession, claimName }\n`)
    const { pool, endSession, claimName } = await import(pathToFileURL(file).href)
    t.after(() => pool.disposeAll())
    const claimFile = (s) => path.join(dir, 'claims', `${claimName(s)}.json`)
    const podOf = (s) => JSON.parse(fs.readFileSync(claimFile(s), 'utf8')).sandboxObject.metadata.annotations['agents.x-k8s.io/pod-name']

    const from = calls(dir).length
    const [alice, bob] = await Promise.all(['alice@example', 'bob'].map((s) => pool.execute({ sessionId: s, cells: [{ code: '1+1' }] })))
    assert.equal(alice.output.trim(), '2', alice.output)
    assert.equal(bob.output.trim(), '2', bob.output)
    assert.notEqual(podOf('alice@example'), podOf('bob'))
    // Each session's kernel went into its claim's pod, by the recipe's exec line.
    const launched = execCalls(dir, from)
    assert.equal(launched.length, 2, JSON.stringify(launched))
    for (const s of ['alice@example', 'bob']) {
      const recipe = ['kubectl', 'exec', '-i', '-n', 'agents', podOf(s), '-c', 'python', '--']
      const mine = launched.filter((c) => c[5] === podOf(s))
      assert.equal(mine.length, 1, JSON.stringify(launched))
      assertLaunched(mine[0], recipe, 'python3')
    }
    // The claim flow the page describes: create, wait for Ready, the sandbox, then its pod.
    const verbs = calls(dir, from).filter((c) => c[0] === 'kubectl' && c[1] === '-n').map((c) => c[3])
    assert.deepEqual(verbs.sort(), ['create', 'create', 'get', 'get', 'get', 'get', 'wait', 'wait'])

    // endSession: the kernel, then the claim. Bob's session is untouched.
    const alicePids = await farPids(pool, 'alice@example')
    await endSession('alice@example')
    assert.equal(fs.existsSync(claimFile('alice@example')), false)
    assert.ok(await gone(alicePids), `left running: ${alicePids.filter(isAlive)}`)
    const again = await pool.execute({ sessionId: 'bob', cells: [{ code: '2+2' }] })
    assert.equal(again.output.trim(), '4')
    assert.equal(again.kernelRestarted, false)
    // A new call of the ended session claims anew.
    const back = await pool.execute({ sessionId: 'alice@example', cells: [{ code: '3+3' }] })
    assert.equal(back.output.trim(), '6')
    assert.ok(fs.existsSync(claimFile('alice@example')))
    const bobPids = await farPids(pool, 'bob')
    const alicePids2 = await farPids(pool, 'alice@example')
    await Promise.all([endSession('alice@example'), endSession('bob')])
    assert.deepEqual(fs.readdirSync(path.join(dir, 'claims')), [])
    assert.ok(await gone([...bobPids, ...alicePids2]), 'a kernel is left running')
  })
})
