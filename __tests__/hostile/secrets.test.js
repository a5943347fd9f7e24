'use strict'
// Hostile input: secrets. Credentials in the host's environment never reach the kernel or
// its children; the runner lives in a private directory and a tampered runner is replaced,
// never run; kv keys cannot name files.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

// The runner directory is `$TMPDIR/pykernel-<uid>/<hash>/`, shared by every kernel of this
// user. The tamper test below rewrites files in it, so this file (its own process under
// node --test) gets a TMPDIR of its own: kernels of other test files never see the
// tampered copy.
const privateTmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-hostile-tmp-'))
process.env.TMPDIR = privateTmp

const test = require('node:test')
const assert = require('node:assert/strict')
const { addon, startKernel, tempDir, realPython, assertResponsive, probeFloor, assertKernelWorks, kernelProcess } = require('./_common')

test.after(() => fs.rmSync(privateTmp, { recursive: true, force: true }))

let probe
test.before(async () => {
  probe = await startKernel()
  await probeFloor(probe) // the quiet round trip the responsiveness bound scales with
})
test.after(() => probe?.shutdown())

const SECRETS = [
  // the denylist
  'OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY', 'AZURE_OPENAI_API_KEY', 'PERPLEXITY_COOKIES',
  // the brand prefix's own secrets
  'PYKERNEL_API_KEY', 'PYKERNEL_TOKEN', 'PYKERNEL_PASSWORD', 'PYKERNEL_SESSION',
  // the secret pattern, also where an allow-prefix would keep the name
  'AWS_SECRET_ACCESS_KEY', 'AWS_ACCESS_KEY_ID', 'GITHUB_TOKEN', 'gh_token', 'NPM_TOKEN', 'DB_PASSWORD', 'MYSQL_PASSWD',
  'GOOGLE_APPLICATION_CREDENTIALS', 'SSH_PRIVATE_KEY', 'STRIPE_APIKEY', 'X-API-KEY', 'service_api-key',
  'LC_SECRET_THING', 'XDG_TOKEN_FILE', 'PYKERNEL_SECRET_SAUCE', 'PYKERNEL_DB_PASSWORD',
]
const valueOf = (name) => `hostile-secret-${name.replace(/[^A-Za-z0-9]/g, '_')}-value`
const VISIBLE = { PYKERNEL_VISIBLE: 'visible-ok', LC_HOSTILE: 'lc-ok' }

/** Python that gathers every place a variable could show up, as one text blob. */
const GATHER = [
  'import os, subprocess',
  'parts = [repr(dict(os.environ))]',
  "parts.append(open('/proc/self/environ', 'rb').read().decode('utf-8', 'replace'))",
  "parts.append(subprocess.run(['env'], capture_output=True, text=True).stdout)",
  "parts.append(subprocess.run(['sh', '-c', 'cat /proc/$$/environ'], capture_output=True).stdout.decode('utf-8', 'replace'))",
  "print('\\n'.join(parts))",
].join('\n')

async function assertNoSecrets(kernel, t) {
  const r = await kernel.execute(GATHER)
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  const shell = await kernel.execute('!env')
  // The host's view too: the namespace's init (kernel.pid) and the kernel process itself.
  const environ = (pid) => fs.readFileSync(`/proc/${pid}/environ`, 'latin1')
  const seen = [r.stdout, shell.stdout, environ(kernel.pid), environ(kernelProcess(kernel.pid))].join('\n')
  const leaked = SECRETS.filter((name) => seen.includes(valueOf(name)) || new RegExp(`(^|[\\s'"\\0])${name.replace(/[-]/g, '\\-')}=`, 'm').test(seen))
  assert.deepEqual(leaked, [], 'no secret reaches os.environ, /proc/self/environ or a child')
  for (const [name, value] of Object.entries(VISIBLE)) assert.ok(seen.includes(`${name}=${value}`), `${name} (not a secret) passes`)
  t.diagnostic(`checked ${SECRETS.length} secret variables in os.environ, /proc/self/environ, env, a shell child and !env`)
}

function secretEnv() {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME || '/root', TMPDIR: privateTmp, ...VISIBLE }
  for (const name of SECRETS) env[name] = valueOf(name)
  return env
}

test('denylisted and pattern-matched variables in baseEnv reach neither the kernel nor its children', async (t) => {
  const kernel = await startKernel({ baseEnv: secretEnv() })
  t.after(() => kernel.shutdown())
  await assertNoSecrets(kernel, t)
  await assertResponsive(probe)
})

test('the same variables in process.env (the default baseEnv) reach neither the kernel nor its children', async (t) => {
  const saved = { ...process.env }
  Object.assign(process.env, secretEnv())
  let kernel
  try {
    kernel = await startKernel()
  } finally {
    for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name]
    Object.assign(process.env, saved)
  }
  t.after(() => kernel.shutdown())
  await assertNoSecrets(kernel, t)
})

/** A cwd holding a cloned repository's `.venv/bin/python`: a script that records the
 *  environment it was started with, then runs the real Python (so discovery picks it). */
function clonedRepoWithVenv() {
  const cwd = tempDir('pykernel-hostile-clone-')
  const seen = path.join(cwd, 'seen-env')
  fs.mkdirSync(path.join(cwd, '.venv', 'bin'), { recursive: true })
  fs.writeFileSync(path.join(cwd, '.venv', 'bin', 'python'), `#!/bin/sh\nenv >> ${seen}\nexec ${realPython()} "$@"\n`, { mode: 0o755 })
  return { cwd, seen }
}

const PROBE_SECRETS = { OPENAI_API_KEY: 'sk-test-123', PYKERNEL_API_KEY: 'pk-test-456', GITHUB_TOKEN: 'ghp-test-789' }

const DISCOVERERS = {
  resolvePython: (cwd, baseEnv) => addon.resolvePython({ cwd, baseEnv }),
  checkPythonKernelAvailability: (cwd, baseEnv) => addon.checkPythonKernelAvailability({ cwd, baseEnv }),
  evalBackends: (cwd, env) => addon.evalBackends({ cwd, env }),
  'Kernel.start': async (cwd, baseEnv) => {
    const kernel = await addon.Kernel.start({ cwd, baseEnv })
    await kernel.shutdown()
  },
}

for (const [name, discover] of Object.entries(DISCOVERERS)) {
  test(`${name}: a cloned repository's .venv/bin/python is probed without the host's secrets`, async (t) => {
    const { cwd, seen } = clonedRepoWithVenv()
    t.after(() => fs.rmSync(cwd, { recursive: true, force: true }))
    const baseEnv = { PATH: process.env.PATH, HOME: process.env.HOME || '/root', TMPDIR: privateTmp, PYKERNEL_VISIBLE: 'visible-ok', ...PROBE_SECRETS }
    await discover(cwd, baseEnv)
    const recorded = fs.readFileSync(seen, 'utf8')
    assert.match(recorded, /^PYKERNEL_VISIBLE=visible-ok$/m, 'the fake interpreter ran (and variables a kernel may see reach it)')
    const leaked = Object.entries(PROBE_SECRETS).filter(([k, v]) => recorded.includes(v) || recorded.includes(`${k}=`))
    assert.deepEqual(leaked, [], 'no secret reached the probed interpreter')
  })
}

test("resolvePython's envPrefix filters the probe as it filters a kernel", async (t) => {
  const { cwd, seen } = clonedRepoWithVenv()
  t.after(() => fs.rmSync(cwd, { recursive: true, force: true }))
  const baseEnv = { PATH: process.env.PATH, HOME: process.env.HOME || '/root', ACME_VISIBLE: 'acme-ok', ACME_API_KEY: 'acme-secret-1', ACME_SESSION: 'acme-secret-2' }
  await addon.resolvePython({ cwd, baseEnv, envPrefix: 'ACME_' })
  const recorded = fs.readFileSync(seen, 'utf8')
  assert.match(recorded, /^ACME_VISIBLE=acme-ok$/m)
  assert.doesNotMatch(recorded, /acme-secret/)
})

/** The runner path, as the kernel itself reports it (sys.argv is reset for user code, so
 *  from its command line). */
async function runnerPath(kernel) {
  const r = await kernel.execute("[a for a in open('/proc/self/cmdline', 'rb').read().decode().split('\\0') if a.endswith('runner.py')][0]")
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  return JSON.parse(r.result['text/plain'].replace(/^'|'$/g, '"'))
}

test('the runner directory is private (0700, ours) and is made private again when loosened', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const runner = await runnerPath(kernel)
  const dir = path.dirname(runner)
  const base = path.dirname(dir)
  assert.ok(runner.startsWith(privateTmp + path.sep), `runner ${runner} lives under this file's TMPDIR`)
  for (const d of [dir, base]) {
    const st = fs.statSync(d)
    assert.equal(st.mode & 0o777, 0o700, `${d} is ${(st.mode & 0o777).toString(8)}`)
    assert.equal(st.uid, process.getuid())
  }
  for (const f of fs.readdirSync(dir)) {
    const st = fs.statSync(path.join(dir, f))
    assert.equal(st.mode & 0o022, 0, `${f} is not group/world writable (${(st.mode & 0o777).toString(8)})`)
  }
  fs.chmodSync(dir, 0o777)
  fs.chmodSync(base, 0o755)
  const again = await startKernel()
  t.after(() => again.shutdown())
  assert.equal(fs.statSync(dir).mode & 0o777, 0o700, 'the hash directory is private again')
  assert.equal(fs.statSync(base).mode & 0o777, 0o700, 'the base directory is private again')
})

test('a tampered runner file is replaced before the next start, never run', async (t) => {
  const first = await startKernel()
  const runner = await runnerPath(first)
  await first.shutdown()
  assert.ok(runner.startsWith(privateTmp + path.sep), `runner ${runner} lives under this file's TMPDIR (else tampering would hit other kernels)`)
  const dir = path.dirname(runner)
  const marker = path.join(tempDir('pykernel-hostile-marker-'), 'tampered-code-ran')
  const evil = `import os\nopen(${JSON.stringify(marker)}, 'a').write('%s ran\\n' % __file__)\n`
  const originals = {}
  for (const name of ['runner.py', 'pykernel_runner/__init__.py', 'pykernel_runner/kernel.py', 'prelude.py', 'pykernel_runner/magics.py', 'pykernel_runner/display.py']) {
    const file = path.join(dir, name)
    originals[name] = fs.readFileSync(file, 'utf8')
    // The tampered file still works (a stealthy attacker keeps the kernel usable).
    fs.writeFileSync(file, evil + originals[name])
  }
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  for (const [name, text] of Object.entries(originals)) {
    assert.equal(fs.readFileSync(path.join(dir, name), 'utf8'), text, `${name} restored`)
  }
  // Run what imports the lazily loaded modules too: a magic and a rich display.
  const r = await kernel.execute("%pwd\nclass H:\n    def _repr_html_(self): return '<b>x</b>'\ndisplay(H())\n1+1")
  assert.equal(r.status, 'ok', JSON.stringify(r.error))
  assert.equal(fs.existsSync(marker), false, `tampered code ran: ${fs.existsSync(marker) ? fs.readFileSync(marker, 'utf8') : ''}`)
  await assertKernelWorks(kernel)
})

test('kv keys cannot escape the store directory', async () => {
  const dir = tempDir('pykernel-hostile-kv-')
  try {
    const store = new addon.KvStore(dir, 'session-1')
    const storeDir = path.join(dir, 'kernel-store')
    assert.equal(path.dirname(store.path), storeDir)
    await store.set('fine', 1)
    for (const key of ['../x', '/etc/passwd', 'a/b', '..\\x', 'a\0b', '', '../../../../tmp/pykernel-hostile-escape', 'x'.repeat(257)]) {
      for (const call of [() => store.set(key, 'evil'), () => store.get(key), () => store.delete(key)]) {
        await assert.rejects(call, (err) => err.code === 'ERR_KV_KEY', `key ${JSON.stringify(key.slice(0, 40))} refused`)
      }
    }
    assert.deepEqual(await store.list(), ['fine'])
    // Keys that only look odd are plain keys inside the one store file.
    for (const key of ['..', '.', '~', 'etc:passwd']) {
      await store.set(key, key)
      assert.equal(await store.get(key), key)
    }
    // A hostile session id names nothing outside the store directory either.
    const sneaky = new addon.KvStore(dir, '../../../../tmp/pykernel-hostile-escape')
    assert.equal(path.dirname(sneaky.path), storeDir)
    await sneaky.set('k', 1)
    const files = fs.readdirSync(dir, { recursive: true })
    assert.ok(files.every((f) => f === 'kernel-store' || f.startsWith('kernel-store' + path.sep)), `files: ${files}`)
    assert.equal(fs.existsSync('/tmp/pykernel-hostile-escape'), false)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
