'use strict'
// The package's entry: the generated binding (`index.js`), with every entry point made
// total at the boundary napi-rs owns.
//
// napi-rs converts a call's arguments before our Rust code runs. A wrong type there
// (`execute(42)`, `{cwd: 42}`) is thrown synchronously, even from a method that returns a
// Promise, with napi's own status as its code (`StringExpected`, `InvalidArg`, ...). Here
// an async entry point always rejects instead of throwing, and every error carries one of
// our codes: napi's argument statuses become `ERR_INVALID_ARG` (the message, which names
// the field, is kept; the original status is `napiCode`), any other napi status
// `ERR_INTERNAL`. Classes and their instances are seen through Proxies (napi-rs makes
// their properties read-only), so `instanceof` and the types in `index.d.ts` are those of
// the binding. napi also ignores keys an options object's struct lacks, so a misspelt
// option (`sandbox: {writeable}`) would do nothing, silently: every options object is
// checked first (check-options.js), and a key `index.d.ts` does not declare is
// `ERR_INVALID_ARG`.
/** The platform packages published beside this one (`npm/<target>/`). */
const SUPPORTED = ['linux-x64-gnu', 'linux-arm64-gnu', 'linux-x64-musl', 'linux-arm64-musl', 'darwin-arm64', 'darwin-x64']

const binding = loadBinding()
const { unknownOption } = require('./check-options.js')

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

const ARGUMENT_STATUSES = new Set([
  'InvalidArg',
  'ObjectExpected',
  'StringExpected',
  'NameExpected',
  'FunctionExpected',
  'NumberExpected',
  'BooleanExpected',
  'ArrayExpected',
  'BigintExpected',
  'DateExpected',
  'ArrayBufferExpected',
])

/** `error` with one of our codes. */
function coded(error) {
  if (!(error instanceof Error) || (typeof error.code === 'string' && error.code.startsWith('ERR_'))) return error
  const status = error.code
  error.napiCode = status
  error.code = ARGUMENT_STATUSES.has(status) ? 'ERR_INVALID_ARG' : 'ERR_INTERNAL'
  if (error.code === 'ERR_INVALID_ARG' && !error.message.startsWith('invalid argument')) {
    error.message = `invalid argument: ${error.message}`
  }
  return error
}

/** `fn`, throwing coded errors; `entry` names its options objects in `OPTION_KEYS`. */
function totalSync(fn, entry) {
  return function (...args) {
    try {
      const refused = unknownOption(entry, args)
      if (refused) throw refused
      return fn.apply(this, args)
    } catch (error) {
      throw coded(error)
    }
  }
}

/** `fn`, rejecting (never throwing) with coded errors; `entry` as for `totalSync`. */
function totalAsync(fn, entry) {
  return function (...args) {
    let pending
    try {
      const refused = unknownOption(entry, args)
      if (refused) throw refused
      pending = fn.apply(this, args)
    } catch (error) {
      return Promise.reject(coded(error))
    }
    return pending.catch((error) => Promise.reject(coded(error)))
  }
}

/** `instance` (of the binding's class `className`) whose methods named in `kinds`
 *  ({name: total}) are total; the same object otherwise (its getters, `instanceof`). The
 *  binding's properties cannot be redefined, so the object is seen through a Proxy; each
 *  wrapped method is made once. */
function totalInstance(instance, className, kinds) {
  const wrapped = new Map()
  return new Proxy(instance, {
    get(target, name) {
      const value = Reflect.get(target, name, target)
      const total = kinds[name]
      if (!total || typeof value !== 'function') return value
      let method = wrapped.get(name)
      if (!method) {
        const bound = total(value, `${className}#${name}`)
        method = (...args) => bound.apply(target, args)
        wrapped.set(name, method)
      }
      return method
    },
  })
}

const KERNEL_METHODS = { execute: totalAsync, evaluate: totalAsync, shutdown: totalAsync, interrupt: totalSync, isComplete: totalAsync }
const POOL_METHODS = { execute: totalAsync, disposeOwner: totalAsync, disposeAll: totalAsync, reopen: totalSync }
const KV_METHODS = { get: totalAsync, set: totalAsync, delete: totalAsync, list: totalAsync }
const OUTPUT_BUILDER_METHODS = { push: totalSync, pushEvent: totalSync, endCell: totalSync, finish: totalSync }

/** A stand-in for `cls`: `new` gives a total instance and throws coded errors, the
 *  statics in `statics` replace the class's own, `instanceof` holds for the binding's
 *  objects (the prototype is the binding's). A Proxy of the class itself cannot do it:
 *  its read-only statics must be returned as they are. */
function totalClass(cls, methods, statics = {}) {
  const constructible = !('start' in statics)
  const Total = function (...args) {
    if (!constructible) {
      const error = new TypeError(`${cls.name} has no constructor: use ${cls.name}.start(options)`)
      error.code = 'ERR_INVALID_ARG'
      throw error
    }
    try {
      const refused = unknownOption(`new ${cls.name}`, args)
      if (refused) throw refused
      return totalInstance(Reflect.construct(cls, args), cls.name, methods)
    } catch (error) {
      throw coded(error)
    }
  }
  Object.defineProperty(Total, 'name', { value: cls.name })
  Total.prototype = cls.prototype
  Object.assign(Total, statics)
  return Total
}

const startKernel = totalAsync(binding.Kernel.start.bind(binding.Kernel), 'Kernel.start')
const Kernel = totalClass(binding.Kernel, KERNEL_METHODS, {
  start: (...args) => startKernel(...args).then((kernel) => totalInstance(kernel, 'Kernel', KERNEL_METHODS)),
})
const KernelPool = totalClass(binding.KernelPool, POOL_METHODS)
const KvStore = totalClass(binding.KvStore, KV_METHODS)
const OutputBuilder = totalClass(binding.OutputBuilder, OUTPUT_BUILDER_METHODS)

/** Never rejects: options it cannot take are an `ok: false` answer saying why, an unknown
 *  key as a wrong type is. The binding still gives that answer (its `isolation` is the
 *  machine's): handed a value that is not an object it answers `ok: false` at once,
 *  without probing Python, and the reason is replaced by ours. */
function checkPythonKernelAvailability(...args) {
  const refused = unknownOption('checkPythonKernelAvailability', args)
  if (!refused) return availability(...args)
  return availability(0).then((answer) => ({ ...answer, reason: refused.message }))
}
const availability = totalAsync(binding.checkPythonKernelAvailability)
const evalBackends = totalAsync(binding.evalBackends, 'evalBackends')
const resolvePython = totalAsync(binding.resolvePython, 'resolvePython')
const clampLine = totalSync(binding.clampLine, 'clampLine')
const collapsedPreview = totalSync(binding.collapsedPreview, 'collapsedPreview')
const defaultHiddenPaths = totalSync(binding.defaultHiddenPaths, 'defaultHiddenPaths')
const filterEnv = totalSync(binding.filterEnv, 'filterEnv')
const readArtifact = totalAsync(binding.readArtifact, 'readArtifact')
const renderBundle = totalSync(binding.renderBundle, 'renderBundle')
const streamingPreview = totalSync(binding.streamingPreview, 'streamingPreview')
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
  clampLine,
  collapsedPreview,
  defaultHiddenPaths,
  filterEnv,
  readArtifact,
  renderBundle,
  streamingPreview,
}
