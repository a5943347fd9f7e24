'use strict'
// The package's entry: the generated binding (`index.js`), or an error that says what to
// do when no addon fits this machine. Every entry point of the binding checks its own
// arguments (src/napi/args.rs): a wrong type or an unknown option key is ERR_INVALID_ARG,
// thrown by sync ones and a rejection from async ones.
/** The platform packages published beside this one (`npm/<target>/`). */
const SUPPORTED = ['linux-x64-gnu', 'linux-arm64-gnu', 'linux-x64-musl', 'linux-arm64-musl', 'darwin-arm64', 'darwin-x64']

const binding = loadBinding()

/** The generated loader, with an error that says what to do when no addon fits. */
function loadBinding() {
  try {
    return require('./index.js')
  } catch (error) {
    const target = nativeTarget()
    const wrapped = new Error(
      `pykernel has no native addon for this machine (${target}). ` +
        (SUPPORTED.includes(target)
          ? `Its package \`pykernel-${target}\` is not installed: npm leaves it out when optional ` +
            'dependencies are omitted (--omit=optional) or the lockfile was made on another platform. ' +
            'Reinstall with optional dependencies (`npm install pykernel`); in a clone of the repository, ' +
            'build it with `npm run build` (needs Rust).'
          : `Prebuilt addons exist for ${SUPPORTED.join(', ')}; on this platform build it from a clone ` +
            'with `npm run build` (needs Rust).'),
    )
    wrapped.code = 'ERR_NO_BINDING'
    wrapped.cause = error
    throw wrapped
  }
}

/** This machine as the platform packages name it: `linux-x64-gnu`, `darwin-arm64`, ... */
function nativeTarget() {
  if (process.platform !== 'linux') return `${process.platform}-${process.arch}`
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null
  const glibc = report?.header?.glibcVersionRuntime
  return `linux-${process.arch}-${glibc ? 'gnu' : 'musl'}`
}

const {
  Kernel,
  KernelPool,
  KvStore,
  OutputBuilder,
  checkPythonKernelAvailability,
  evalBackends,
  resolvePython,
  pythonCandidates,
  clampLine,
  collapsedPreview,
  defaultHiddenPaths,
  filterEnv,
  fitImages,
  readArtifact,
  renderBundle,
  streamingPreview,
} = binding
const JsKernel = Kernel
const JsKernelPool = KernelPool
const JsKvStore = KvStore

// Names only, no spread: Node's ESM loader reads a CommonJS module's named exports from
// this literal without running it, so `import { Kernel } from 'pykernel'` works
// (`__tests__/package/package.test.js` checks that every export of the binding is here).
module.exports = {
  Kernel,
  JsKernel,
  KernelPool,
  JsKernelPool,
  KvStore,
  JsKvStore,
  OutputBuilder,
  checkPythonKernelAvailability,
  evalBackends,
  resolvePython,
  pythonCandidates,
  clampLine,
  collapsedPreview,
  defaultHiddenPaths,
  filterEnv,
  fitImages,
  readArtifact,
  renderBundle,
  streamingPreview,
}
