'use strict'
// The runner is one package, pykernel_runner: rich display, pretty printing, the notebook
// shell, the cell transformer, shell commands, the magics and the zygote are its modules,
// and no directory of the runner is on a cell's sys.path. So a cell cannot import the
// runner's modules under names of their own (nor runner.py or the prelude as modules),
// while everything they do still works, and the host's bytecode still covers each of them.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { startKernel, ok, value, waitFor, tempDir } = require('../helpers/kernel')

// The names the runner's modules had while they lay beside the package, on sys.path.
const OLD_NAMES = ['pykernel_display', 'pykernel_pretty', 'pykernel_ipython', 'pykernel_magics', 'pykernel_zygote', 'pykernel_far']
// The package's modules a cell's features import when first used.
const LAZY_MODULES = ['display', 'ipython', 'magics', 'pretty', 'shell', 'transform'].map((m) => `pykernel_runner.${m}`)

/** What a cell prints as JSON. */
async function printed(kernel, code) {
  const { result } = await ok(kernel, code)
  return JSON.parse(result.stdout)
}

/** Uses what each lazily imported module does, checking it still works. */
async function useEveryFeature(kernel, cwd) {
  assert.equal(await value(kernel, '%pwd'), `'${cwd}'`)
  assert.equal((await ok(kernel, '!echo from the shell')).result.stdout, 'from the shell\n')
  await ok(kernel, "%%capture kept\nprint('captured')")
  assert.equal(await value(kernel, 'kept.stdout'), "'captured\\n'")

  const { events } = await ok(kernel, "class H:\n    def _repr_html_(self):\n        return '<b>x</b>'\ndisplay(H())\ndisplay({'a': [1, 2]})")
  const bundles = events.filter((e) => e.type === 'display').map((e) => e.bundle)
  assert.equal(bundles[0]['text/html'], '<b>x</b>')
  assert.equal(bundles[1]['text/plain'], "{'a': [1, 2]}")

  assert.equal(await value(kernel, 'type(get_ipython()).__name__'), "'ZMQInteractiveShell'")
  assert.equal(await value(kernel, "get_ipython().run_line_magic('pwd', '')"), `'${cwd}'`)
  assert.equal(await value(kernel, "get_ipython().getoutput('echo through the shell')"), "['through the shell']")

  const loaded = await printed(kernel, "import json, sys\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith('pykernel_runner.'))))")
  for (const name of LAZY_MODULES) assert.ok(loaded.includes(name), `${name} is loaded: ${loaded}`)
}

/** Whether the runner's old module names, runner.py or the prelude can be imported. */
async function assertRunnerNotImportable(kernel) {
  const importable = await printed(kernel, `
import json
importable = []
for name in ${JSON.stringify(OLD_NAMES)}:
    try:
        __import__(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            importable.append('%s: %r' % (name, exc))
    else:
        importable.append(name)
print(json.dumps(importable))`)
  assert.deepEqual(importable, [], 'no old name imports')

  // Looked up, not imported: importing runner.py would start a second kernel in the cell.
  const found = await printed(kernel, `
import importlib.util, json, os, sys
package = os.path.dirname(sys.modules['pykernel_runner'].__file__)
runner_dir = os.path.realpath(os.path.dirname(package))
def is_runner_dir(entry):
    entry = os.path.realpath(entry or os.getcwd())
    return entry == runner_dir or os.path.exists(os.path.join(entry, 'pykernel_runner', '__init__.py'))
def origin(name):
    spec = importlib.util.find_spec(name)
    return spec.origin if spec is not None else None
print(json.dumps({
    'runnerDir': runner_dir,
    'onPath': [entry for entry in sys.path if is_runner_dir(entry)],
    'asModules': [name for name in ('runner', 'prelude')
                  if (origin(name) or '').startswith(runner_dir + os.sep)],
}))`)
  assert.ok(fs.existsSync(`${found.runnerDir}/runner.py`), `the runner's directory is found: ${found.runnerDir}`)
  assert.deepEqual(found.onPath, [], "no runner directory is on the cell's sys.path")
  assert.deepEqual(found.asModules, [], 'runner.py and the prelude are not modules a cell can import')
}

test("a cell cannot import the runner's modules by their old names, nor find the runner on sys.path; what they do still works", async (t) => {
  const cwd = fs.realpathSync(tempDir('pykernel-runner-package-'))
  const kernel = await startKernel({ cwd })
  t.after(() => kernel.shutdown())
  // First every feature: each module is imported when first needed, and with it, once,
  // whatever it changes in the process.
  await useEveryFeature(kernel, cwd)
  await assertRunnerNotImportable(kernel)
})

test('a kernel forked from a zygote has none of the runner on its sys.path either', async (t) => {
  const cwd = fs.realpathSync(tempDir('pykernel-runner-package-'))
  const kernel = await startKernel({ cwd, preload: ['json'] })
  t.after(() => kernel.shutdown())
  assert.equal(kernel.startMode, 'zygote')
  await useEveryFeature(kernel, cwd)
  await assertRunnerNotImportable(kernel)
})

test("every module of the package, the lazily imported ones too, comes from the host's bytecode", async (t) => {
  const cwd = fs.realpathSync(tempDir('pykernel-runner-package-'))
  const origins = "import json, sys\nprint(json.dumps({n: o for f in sys.meta_path if hasattr(f, 'origins') for n, o in f.origins.items()}))"
  let kernel = null
  // The host compiles the bytecode in the background after its first kernel starts.
  const got = await waitFor(async () => {
    if (kernel) await kernel.shutdown()
    kernel = await startKernel({ cwd })
    return (await printed(kernel, origins)).pykernel_runner === 'host'
  }, { timeoutMs: 15_000, intervalMs: 50 })
  t.after(() => kernel.shutdown())
  assert.ok(got, "a kernel got the host's bytecode")
  await useEveryFeature(kernel, cwd)
  const from = await printed(kernel, origins)
  for (const name of LAZY_MODULES) assert.equal(from[name], 'host', `${name}: ${JSON.stringify(from)}`)
  assert.deepEqual([...new Set(Object.values(from))], ['host'], JSON.stringify(from))
})
