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
  assert.match(words[7], /^([0-9a-f]{64}|-)$/, "then the bytecode's sha256 the host vouches for, or -")
  assert.equal(words[8], '-', 'then the reattach grace: none')
  assert.equal(words.length, 9, `nothing more: ${JSON.stringify(words.slice(9))}`)
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
      // A far side that has the runner cached reads nothing before the protocol: the
      // supervisor says its input ended before the host said anything.
      assert.match(e.message, /the link closed (while the runner was being sent|before the host sent anything: the launcher gives the far side no stdin)/)
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

// ------------------------------------------------------------------ the real kubectl's reading

test("the agent-sandbox block's jsonpath expressions, read by a real kubectl offline", (t) => {
  if (!onPath('kubectl')) return t.skip('kubectl is not installed: only the stand-in read them')
  const block = jsBlocks.find((b) => b.includes("kind: 'SandboxClaim'"))
  // The words as the JavaScript string literals make them (`\\.` is `\.`).
  const paths = [...block.matchAll(/'(jsonpath=[^']*)'/g)].map((m) => m[1].replace(/\\\\/g, '\\'))
  assert.equal(paths.length, 2, block)
  // One object with both fields, as kubectl would print a claim's status and a sandbox's
  // annotations: each expression must pick its own.
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-jsonpath-')), 'object.json')
  t.after(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }))
  fs.writeFileSync(file, JSON.stringify({
    apiVersion: 'v1', kind: 'ConfigMap',
    metadata: { name: 'x', namespace: 'agents', annotations: { 'agents.x-k8s.io/pod-name': 'pod-1' } },
    status: { sandbox: { name: 'sandbox-1' } },
  }))
  for (const expr of paths) {
    // `label --local` prints the object it would send, through `-o`, without a server.
    const r = spawnSync('kubectl', ['label', '--local', '-f', file, 'probe=1', '-o', expr], { encoding: 'utf8', env: { ...process.env, KUBECONFIG: '/dev/null' }, timeout: 30_000 })
    assert.equal(r.status, 0, r.stderr)
    assert.equal(r.stdout, expr.includes('.status.') ? 'sandbox-1' : 'pod-1', expr)
  }
})

// ------------------------------------------------------------------ podman for real

/** What stops podman here, or null: it is missing, or no container starts. */
let podmanProblem = onPath('podman') ? null : 'podman is not installed (Debian: apt-get install podman)'

/**
 * The `podman run` options under which a container starts on this machine, trying the
 * default runtime, then runc: crun 1.8 refuses a host whose cgroup v2 hierarchy has a
 * controller beside v1 ones ("cgroups in hybrid mode not supported"), runc does not. And
 * podman's default ulimits (nofile 1048576, nproc at podman's own) need CAP_SYS_RESOURCE
 * when they exceed the hard limits here: then the host's own limits are given.
 */
function podmanRunOptions(rootfs) {
  const hard = (name) => {
    const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith(name))
    const v = line.trim().split(/\s{2,}/)[2]
    return v === 'unlimited' ? null : Number(v)
  }
  const nofile = hard('Max open files')
  const nproc = Math.min(hard('Max processes') ?? 32768, 32768)
  const ulimits = [[], [...(nofile ? ['--ulimit', `nofile=${nofile}:${nofile}`] : []), '--ulimit', `nproc=${nproc}:${nproc}`]]
  const runtimes = [[], ...(onPath('runc') ? [['--runtime', 'runc']] : [])]
  const errors = []
  for (const runtime of runtimes) {
    for (const limits of ulimits) {
      const opts = { global: runtime, run: [...limits, '--network', 'none', '-v', '/usr:/usr:ro'] }
      const r = spawnSync('podman', [...opts.global, 'run', '--rm', ...opts.run, '--rootfs', rootfs, 'true'], { encoding: 'utf8', timeout: 60_000 })
      if (r.status === 0) return opts
      errors.push(`podman ${[...runtime, 'run', ...limits].join(' ')}: ${(r.stderr || r.error?.message || '').trim()}`)
    }
  }
  throw new Error(`no container starts here:\n${errors.join('\n')}`)
}

/** A root filesystem of nothing but this machine's /usr (bound read-only at run). */
function makeRootfs() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-rootfs-'))
  fs.chmodSync(dir, 0o755) // the container's `/`: the recipe's `-u 1000` must get through it
  for (const d of ['usr', 'etc', 'proc', 'dev', 'sys', 'work', 'tmp']) fs.mkdirSync(path.join(dir, d))
  fs.chmodSync(path.join(dir, 'tmp'), 0o1777)
  for (const l of ['bin', 'lib', 'lib64', 'sbin']) fs.symlinkSync(`usr/${l}`, path.join(dir, l))
  fs.writeFileSync(path.join(dir, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\n')
  fs.writeFileSync(path.join(dir, 'etc', 'group'), 'root:x:0:\n')
  return dir
}

describe('the podman recipes through a real podman', () => {
  const name = `pykernel-recipe-${process.pid}`
  let rootfs
  let options
  before(() => {
    if (podmanProblem) return
    if (!fs.existsSync('/usr/bin/python3')) {
      podmanProblem = 'the container is made of /usr, which has no python3'
      return
    }
    rootfs = makeRootfs()
    try {
      options = podmanRunOptions(rootfs)
      const r = spawnSync('podman', [...options.global, 'run', '-d', '--init', ...options.run, '--name', name, '--rootfs', rootfs, 'sleep', 'infinity'], { encoding: 'utf8', timeout: 60_000 })
      if (r.status !== 0) throw new Error(r.stderr)
    } catch (e) {
      podmanProblem = `podman cannot run a container on this machine: ${e.message}`
    }
  })
  after(() => {
    if (rootfs) {
      spawnSync('podman', ['rm', '-f', '-t', '0', name], { stdio: 'ignore', timeout: 60_000 })
      fs.rmSync(rootfs, { recursive: true, force: true })
    }
  })

  /** The container's processes (their command lines), as podman reports them. */
  const processes = () => spawnSync('podman', ['top', name, 'args'], { encoding: 'utf8' }).stdout.trim().split('\n').slice(1).map((l) => l.trim())
  const idle = ['/run/podman-init -- sleep infinity', 'sleep infinity']
  const podmanRecipes = () => RECIPES.filter((a) => a[0] === 'podman')

  test('each podman recipe, its container renamed: a cell runs inside, and shutdown leaves only the container', async (t) => {
    if (podmanProblem) return t.skip(podmanProblem)
    assert.ok(podmanRecipes().length >= 2)
    for (const recipe of podmanRecipes()) {
      const launcher = [...recipe.slice(0, -1), name]
      const kernel = await Kernel.start({ launcher }) // interpreter: python3, the container's
      try {
        const r = await kernel.execute(`import os, subprocess
subprocess.Popen(["sleep", "1000"], start_new_session=True)
print(open("/proc/1/cmdline").read().split("\\0")[0], os.getuid(), os.getcwd())`)
        assert.equal(r.status, 'ok', JSON.stringify(r.error))
        const [init, uid, cwd] = r.stdout.trim().split(' ')
        assert.equal(init, '/run/podman-init', 'the cell ran in the container')
        const w = recipe.indexOf('-w')
        const u = recipe.indexOf('-u')
        assert.equal(uid, u < 0 ? '0' : recipe[u + 1], launcher.join(' '))
        if (w >= 0) assert.equal(cwd, recipe[w + 1], launcher.join(' '))
        assert.equal(kernel.interpreter, '/usr/bin/python3')
      } finally {
        await kernel.shutdown()
      }
      // The kernel, its supervisor and the cell's `sleep` in a session of its own: gone.
      assert.ok(await waitFor(() => JSON.stringify(processes()) === JSON.stringify(idle), { timeoutMs: 10_000 }), `${launcher.join(' ')}: left ${JSON.stringify(processes())}`)
    }
  })

  test("the podman client killed: the supervisor ends the kernel when its stdin closes", async (t) => {
    if (podmanProblem) return t.skip(podmanProblem)
    const kernel = await Kernel.start({ launcher: [...podmanRecipes()[0].slice(0, -1), name] })
    try {
      assert.equal((await kernel.execute('1+1')).result['text/plain'], '2')
      assert.ok(processes().length > idle.length, JSON.stringify(processes()))
      process.kill(kernel.pid, 'SIGKILL')
      assert.ok(await waitFor(() => JSON.stringify(processes()) === JSON.stringify(idle), { timeoutMs: 10_000 }), `left ${JSON.stringify(processes())}`)
    } finally {
      await kernel.shutdown().catch(() => {})
    }
  })
})
