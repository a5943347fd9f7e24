'use strict'
// What the kernel sees of the host environment, and which Python it runs.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { addon, startKernel, run, tempDir, realPython } = require('../helpers/kernel')

test('filterEnv keeps what Python needs and drops secrets', () => {
  const kept = addon.filterEnv({
    PATH: '/bin',
    HOME: '/root',
    LC_FOO: 'x',
    XDG_CONFIG_HOME: '/c',
    LD_LIBRARY_PATH: '/l',
    PYKERNEL_CUSTOM: '1',
    OPENAI_API_KEY: 's',
    ANTHROPIC_API_KEY: 's',
    UNSAFE_TOKEN: 's',
    MY_SECRET: 's',
    PYKERNEL_API_KEY: 's',
    EDITOR: 'vim',
  })
  assert.deepEqual(Object.keys(kept).sort(), ['HOME', 'LC_FOO', 'LD_LIBRARY_PATH', 'PATH', 'PYKERNEL_CUSTOM', 'XDG_CONFIG_HOME'])
  assert.deepEqual(Object.keys(addon.filterEnv({ ACME_X: '1', PYKERNEL_X: '1' }, { envPrefix: 'ACME_' })), ['ACME_X'])
})

test('filterEnv keeps what tools need behind a proxy or a private index, and drops the SSH agent', () => {
  const wanted = ['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'no_proxy',
    'SSL_CERT_FILE', 'SSL_CERT_DIR', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'PIP_INDEX_URL', 'PIP_EXTRA_INDEX_URL',
    'PIP_TRUSTED_HOST', 'CUDA_VISIBLE_DEVICES', 'TOKENIZERS_PARALLELISM']
  const env = Object.fromEntries([...wanted, 'SSH_AUTH_SOCK', 'SSH_AGENT_PID'].map((name) => [name, 'x']))
  assert.deepEqual(Object.keys(addon.filterEnv(env)).sort(), [...wanted].sort())
})

test('secrets never reach the kernel; allowed variables do', async (t) => {
  const kernel = await startKernel({
    baseEnv: {
      ...process.env,
      OPENAI_API_KEY: 'sk-leak',
      MY_SECRET: 'leak',
      GITHUB_TOKEN: 'leak',
      LC_FOO: 'lc',
      PYKERNEL_FOO: 'brand',
    },
    env: { HOST_MANAGED: 'yes' },
  })
  t.after(() => kernel.shutdown())
  const { result } = await run(
    kernel,
    [
      'import os, subprocess',
      "names = ['OPENAI_API_KEY', 'MY_SECRET', 'GITHUB_TOKEN', 'LC_FOO', 'PYKERNEL_FOO', 'HOST_MANAGED']",
      "child = subprocess.run(['env'], capture_output=True, text=True).stdout",
      "proc = open('/proc/self/environ', 'rb').read().decode()",
      // str(): on one line (the tuple itself would be pretty-printed over several)
      "str(({n: os.environ.get(n) for n in names}, 'leak' in child, 'leak' in proc, bool(os.environ.get('PATH'))))",
    ].join('\n'),
  )
  assert.equal(
    result.result['text/plain'],
    `"({'OPENAI_API_KEY': None, 'MY_SECRET': None, 'GITHUB_TOKEN': None, 'LC_FOO': 'lc', 'PYKERNEL_FOO': 'brand', 'HOST_MANAGED': 'yes'}, False, False, True)"`,
  )
})

test('envPrefix: the brand prefix the filter keeps (and whose secrets it drops) is the kernel\'s own', async (t) => {
  const baseEnv = { ...process.env, ACME_MODE: 'kept', ACME_TOKEN: 'dropped', PYKERNEL_MODE: 'not ours', ACME_DB_PASSWORD: 'dropped' }
  const kernel = await startKernel({ envPrefix: 'ACME_', baseEnv })
  t.after(() => kernel.shutdown())
  const seen = await kernel.execute("import os\nsorted((k, v) for k, v in os.environ.items() if k.startswith(('ACME_', 'PYKERNEL_MODE')))")
  assert.equal(seen.result['text/plain'], "[('ACME_MODE', 'kept')]")
})

test('an envPrefix that cannot begin a variable name is refused, saying what is valid', async () => {
  const refused = (err) => err.code === 'ERR_INVALID_ARG' && /envPrefix/.test(err.message) && /letters, digits and '_'/.test(err.message)
  assert.throws(() => addon.filterEnv({}, { envPrefix: 'a b' }), refused)
  await assert.rejects(addon.Kernel.start({ envPrefix: 'a b' }), refused)
  await assert.rejects(addon.resolvePython({ envPrefix: 'ACME-' }), refused)
  assert.throws(() => new addon.KvStore(tempDir(), 's', { envPrefix: 'x=y' }), refused)
  assert.deepEqual(addon.filterEnv({ X: '1' }, { envPrefix: '' }), {}, 'empty is no brand prefix')
})

test('the kernel gets PYTHONUNBUFFERED and PYTHONIOENCODING', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const { result } = await run(kernel, "import os; (os.environ['PYTHONUNBUFFERED'], os.environ['PYTHONIOENCODING'])")
  assert.equal(result.result['text/plain'], "('1', 'utf-8')")
})

test('a .venv in cwd is chosen first and its bin dir leads PATH', async (t) => {
  const cwd = tempDir()
  execFileSync(realPython(), ['-m', 'venv', '--without-pip', path.join(cwd, '.venv')])
  const baseEnv = { ...process.env }
  delete baseEnv.VIRTUAL_ENV
  delete baseEnv.CONDA_PREFIX
  const resolved = await addon.resolvePython({ cwd, baseEnv })
  assert.equal(resolved.source, 'venv')
  assert.equal(resolved.path, path.join(cwd, '.venv', 'bin', 'python'))
  assert.equal(resolved.env.VIRTUAL_ENV, path.join(cwd, '.venv'))
  const kernel = await addon.Kernel.start({ cwd, baseEnv })
  t.after(() => kernel.shutdown())
  assert.equal(kernel.interpreter, path.join(cwd, '.venv', 'bin', 'python'))
  const { result } = await run(kernel, "import os, sys; str((sys.prefix, os.environ['PATH'].split(':')[0], os.environ['VIRTUAL_ENV']))")
  const venv = path.join(cwd, '.venv')
  assert.equal(result.result['text/plain'], `"('${venv}', '${venv}/bin', '${venv}')"`)
})

test('resolvePython learns the real executable behind a shim and reports what it skipped', async () => {
  const cwd = tempDir()
  const baseEnv = { ...process.env }
  delete baseEnv.VIRTUAL_ENV
  delete baseEnv.CONDA_PREFIX
  baseEnv.HOME = cwd
  // A shim, as pyenv or asdf install: a script named python/python3 first on PATH that
  // execs the real interpreter. The kernel must run the real one (`sys.executable`).
  const shims = tempDir()
  for (const name of ['python', 'python3']) {
    fs.writeFileSync(path.join(shims, name), `#!/bin/sh\nexec ${JSON.stringify(realPython())} "$@"\n`, { mode: 0o755 })
  }
  baseEnv.PATH = `${shims}:${baseEnv.PATH}`
  const resolved = await addon.resolvePython({ cwd, baseEnv })
  assert.equal(resolved.source, 'path')
  assert.equal(resolved.path, realPython(), 'the real executable, not the shim')
  assert.ok(!resolved.path.startsWith(shims))
  assert.match(resolved.version, /^3\.\d+\.\d+$/)
  const reasons = resolved.skipped.map((s) => `${s.candidate}: ${s.reason}`).join('\n')
  assert.match(reasons, /VIRTUAL_ENV: not set/)
  assert.match(reasons, /cwd venv .*\.venv: .*does not exist/)
  assert.match(reasons, /managed venv .*python-env: .*does not exist/)
})

test('checkPythonKernelAvailability says why when there is no Python', async () => {
  const cwd = tempDir()
  const none = await addon.checkPythonKernelAvailability({ cwd, baseEnv: { PATH: cwd, HOME: cwd } })
  assert.equal(none.ok, false)
  assert.match(none.reason, /no usable Python found/)
  const some = await addon.checkPythonKernelAvailability({ cwd })
  assert.equal(some.ok, true)
  assert.ok(fs.existsSync(some.path))
})

test('checkPythonKernelAvailability never throws: a mistyped option or a missing cwd is a plain answer', async () => {
  for (const [options, reason] of [
    [{ cwd: 42 }, /^invalid argument `cwd`: expected a string, got a number$/],
    [42, /^invalid argument `options`: expected an object, got a number$/],
    [{ cwd: '/no/such/dir' }, /^cwd \/no\/such\/dir does not exist; pass an existing directory as `cwd`\.$/],
  ]) {
    const answer = await addon.checkPythonKernelAvailability(options)
    assert.equal(answer.ok, false, JSON.stringify(options))
    assert.match(answer.reason, reason)
  }
  // A missing cwd is named as such, not blamed on every interpreter that was tried.
  await assert.rejects(addon.resolvePython({ cwd: '/no/such/dir' }), { code: 'ERR_CWD_INVALID' })
  const backends = await addon.evalBackends({ cwd: '/no/such/dir' })
  assert.match(backends.pythonError, /cwd \/no\/such\/dir does not exist/)
})

test('a relative cwd is the host\'s: for Kernel.start, a request and a pool session', async (t) => {
  const root = fs.realpathSync(tempDir())
  // `sub/sub` exists too: resolved against the kernel's own directory, `sub` became it.
  // The request's cwd lies inside the kernel's: a cwd the kernel was not started in must
  // be in its view, and the host's /tmp is not.
  fs.mkdirSync(path.join(root, 'sub', 'sub', 'sub'), { recursive: true })
  const before = process.cwd()
  process.chdir(root)
  t.after(() => process.chdir(before))
  const kernel = await startKernel({ cwd: 'sub' })
  t.after(() => kernel.shutdown())
  assert.equal((await run(kernel, 'import os; os.getcwd()')).result.result['text/plain'], `'${path.join(root, 'sub')}'`)
  assert.equal((await run(kernel, 'import os; os.getcwd()', { cwd: 'sub/sub' })).result.result['text/plain'], `'${path.join(root, 'sub', 'sub')}'`)
  const pool = new addon.KernelPool({ prewarm: 0, kernel: { interpreter: realPython() } })
  t.after(() => pool.disposeAll())
  const r = await pool.execute({ cwd: 'sub', cells: [{ code: 'import os; os.getcwd()' }] })
  assert.equal(r.exitCode, 0, r.output)
  assert.match(r.output, new RegExp(`'${path.join(root, 'sub')}'`))
})

test('the protocol trace switch is named with the kernel\'s envPrefix', () => {
  const script = `
    const { Kernel } = require(${JSON.stringify(path.resolve(__dirname, '..', '..'))})
    Kernel.start({ envPrefix: 'ACME_', interpreter: ${JSON.stringify(realPython())} }).then(async (k) => {
      await k.execute('6*7')
      await k.shutdown()
    })`
  const traced = (env) => {
    const out = require('node:child_process').spawnSync(process.execPath, ['-e', script], {
      env: { ...process.env, ...env }, encoding: 'utf8', timeout: 30000,
    })
    assert.equal(out.status, 0, out.stderr)
    return /\] -> \{"type":"execute"/.test(out.stderr)
  }
  assert.equal(traced({ ACME_PYTHON_IPC_TRACE: '1' }), true, 'ACME_PYTHON_IPC_TRACE=1 traces')
  assert.equal(traced({ PYKERNEL_PYTHON_IPC_TRACE: '1' }), false, 'the default brand\'s switch does not')
})

test('PYKERNEL_TRACE=1 logs the lifecycle to stderr; unset, nothing', async () => {
  const { spawnSync } = require('node:child_process')
  const script = `const { Kernel } = require(${JSON.stringify(require('node:path').resolve(__dirname, '..', '..'))})
Kernel.start({ interpreter: process.env.PYKERNEL_TEST_PYTHON || undefined }).then(async (k) => { await k.execute('1'); await k.shutdown() })`
  const run = (trace) => spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, PYKERNEL_TRACE: trace }, timeout: 60_000 })
  const traced = run('1')
  assert.equal(traced.status, 0, traced.stderr)
  assert.match(traced.stderr, /kernel started pid=\d+/)
  assert.match(traced.stderr, /execute pid=\d+/)
  const quiet = run('0')
  assert.equal(quiet.status, 0, quiet.stderr)
  assert.equal(quiet.stderr, '')
})

test('discovery order: VIRTUAL_ENV, then CONDA_PREFIX, then <cwd>/.venv, then python before python3 on PATH', async () => {
  const root = tempDir()
  const venv = (name) => {
    const dir = path.join(root, name)
    execFileSync(realPython(), ['-m', 'venv', '--without-pip', dir])
    return dir
  }
  const active = venv('active')
  const conda = venv('conda')
  const cwd = path.join(root, 'project')
  fs.mkdirSync(cwd)
  const local = path.join(cwd, '.venv')
  execFileSync(realPython(), ['-m', 'venv', '--without-pip', local])
  // `python` and `python3` on PATH lead to different interpreters: which one runs shows
  // which name was looked up first.
  const shims = path.join(root, 'shims')
  fs.mkdirSync(shims)
  const first = venv('first')
  const second = venv('second')
  fs.writeFileSync(path.join(shims, 'python'), `#!/bin/sh\nexec ${JSON.stringify(path.join(first, 'bin', 'python'))} "$@"\n`, { mode: 0o755 })
  fs.writeFileSync(path.join(shims, 'python3'), `#!/bin/sh\nexec ${JSON.stringify(path.join(second, 'bin', 'python'))} "$@"\n`, { mode: 0o755 })
  const base = { ...process.env, HOME: root, PATH: `${shims}:/usr/bin:/bin` }
  delete base.VIRTUAL_ENV
  delete base.CONDA_PREFIX
  const pick = async (vars, dir) => {
    const r = await addon.resolvePython({ cwd: dir, baseEnv: { ...base, ...vars } })
    return [r.source, r.path]
  }
  const py = (dir) => path.join(dir, 'bin', 'python')
  assert.deepEqual(await pick({ VIRTUAL_ENV: active, CONDA_PREFIX: conda }, cwd), ['venv', py(active)])
  assert.deepEqual(await pick({ CONDA_PREFIX: conda }, cwd), ['conda', py(conda)])
  assert.deepEqual(await pick({}, cwd), ['venv', py(local)])
  assert.deepEqual(await pick({}, root), ['path', py(first)], '`python` before `python3`')
})

test('the probe runs once per candidate, cwd and shim variables in a process (a slow shim is paid for once)', async () => {
  const root = tempDir()
  const shims = path.join(root, 'shims')
  fs.mkdirSync(shims)
  // A shim that counts its runs, as a pyenv shim would cost one: in the directory it runs
  // in, the one a probe (confined) may write.
  for (const name of ['python', 'python3']) {
    fs.writeFileSync(path.join(shims, name), `#!/bin/sh\necho "$PWD" >> calls\nexec ${JSON.stringify(realPython())} "$@"\n`, { mode: 0o755 })
  }
  const baseEnv = { ...process.env, HOME: root, PATH: `${shims}:/usr/bin:/bin` }
  delete baseEnv.VIRTUAL_ENV
  delete baseEnv.CONDA_PREFIX
  const elsewhere = path.join(root, 'elsewhere')
  fs.mkdirSync(elsewhere)
  const count = (file) => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim().split('\n').length : 0)
  const runs = () => count(path.join(root, 'calls')) + count(path.join(elsewhere, 'calls'))
  const a = await addon.resolvePython({ cwd: root, baseEnv })
  assert.equal(a.path, realPython())
  assert.equal(runs(), 1, 'probed once')
  await addon.resolvePython({ cwd: root, baseEnv })
  const kernel = await addon.Kernel.start({ cwd: root, baseEnv })
  await kernel.shutdown()
  assert.equal(runs(), 1, 'the second resolve and the kernel start used the cached probe')
  await addon.resolvePython({ cwd: elsewhere, baseEnv })
  assert.equal(runs(), 2, 'another cwd (a shim may pick another Python there) is probed again')
  await addon.resolvePython({ cwd: root, baseEnv: { ...baseEnv, PYENV_VERSION: '3.11' } })
  assert.equal(runs(), 3, 'so is another PYENV_VERSION')
})
