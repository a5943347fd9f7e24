'use strict'
// What every entry point of the binding takes, read from the generated index.d.ts and
// written to src/napi/signatures.rs, which src/napi/args.rs checks each call against:
// the types of the parameters, and of the fields of the options objects with their keys.
//
// napi-rs reads the fields of a `#[napi(object)]` struct by name and ignores the rest of
// the object, and napi-rs 3 has no attribute that refuses other keys nor a list of a
// struct's field names to check them with. index.d.ts is the one place where every
// options object is declared with its keys and types: napi generates the structs'
// interfaces from the Rust fields, and the objects read by hand (`ExecuteOptions`,
// `EvalRequest`, ...) are declared in types.d.ts. So the table is derived from it after
// each build (scripts/dts.js) and committed, rather than kept by hand beside the structs,
// where it would drift. `__tests__/package/option-keys.test.js` checks it is current and
// matches the Rust fields.
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')

/** `text` split at the commas (or `separator`s) outside brackets. */
function splitTopLevel(text, separator = ',') {
  const parts = []
  let depth = 0
  let start = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if ('<([{'.includes(c)) depth++
    // The `>` of an arrow function's `=>` closes nothing.
    else if (')]}'.includes(c) || (c === '>' && text[i - 1] !== '=')) depth--
    else if (c === separator && depth === 0) {
      parts.push(text.slice(start, i))
      start = i + 1
    }
  }
  parts.push(text.slice(start))
  return parts.map((p) => p.trim()).filter(Boolean)
}

/** The interface `type` names (an object of it, when the value is an object), as
 *  `'Name'`; `['Name']` for an array of them; null for anything else (strings,
 *  functions, `Record`s and other free-form objects, types not declared here). */
function shapeOf(type, interfaces) {
  for (const member of splitTopLevel(type, '|')) {
    if (interfaces.has(member)) return member
    const element = /^(\w+)\[\]$/.exec(member) || /^Array<(\w+)>$/.exec(member)
    if (element && interfaces.has(element[1])) return [element[1]]
  }
  return null
}

/** `{ name: { extends, fields: [[key, type]] } }` of every interface in `dts`. */
function interfacesOf(dts) {
  const found = new Map()
  for (const [, name, bases, body] of dts.matchAll(/^export interface (\w+)(?: extends ([\w, ]+))? \{\n([\s\S]*?)^\}/gm)) {
    const fields = [...body.matchAll(/^ {2}(?:readonly )?(\w+)(\??): (.+)$/gm)].map(([, key, optional, type]) => [key, type, optional === '?'])
    found.set(name, { bases: bases ? bases.split(',').map((b) => b.trim()) : [], fields })
  }
  return found
}

/** The parameters of the signature whose `(` is at `text[open]`: `[[name, type]]`. */
function paramsAt(text, open) {
  let depth = 0
  let close = open
  for (; close < text.length; close++) {
    if (text[close] === '(') depth++
    else if (text[close] === ')' && --depth === 0) break
  }
  return splitTopLevel(text.slice(open + 1, close)).map((param) => {
    const [, name, optional, type] = /^(\w+)(\??): ([\s\S]+)$/.exec(param)
    return [name, type, optional === '?']
  })
}

/** The entry points of `dts` with their parameters: `[entry, [[name, type]]]`, where an
 *  entry is `fn`, `Class.staticFn`, `new Class` or `Class#method`. */
function entryPointsOf(dts) {
  const entries = []
  for (const m of dts.matchAll(/^export declare function (\w+)\(/gm)) entries.push([m[1], paramsAt(dts, m.index + m[0].length - 1)])
  for (const [, cls, body] of dts.matchAll(/^export declare class (\w+) \{\n([\s\S]*?)^\}/gm)) {
    for (const m of body.matchAll(/^ {2}(static )?(\w+)\(/gm)) {
      const [, isStatic, name] = m
      const entry = name === 'constructor' ? `new ${cls}` : isStatic ? `${cls}.${name}` : `${cls}#${name}`
      entries.push([entry, paramsAt(body, m.index + m[0].length - 1)])
    }
  }
  return entries
}

/**
 * The table main.js checks calls against:
 * `entryPoints`: for each entry point with an options object among its parameters, one
 * slot per parameter, null or `{ name, shape }`;
 * `interfaces`: for each interface an options object may be, its keys (those of what it
 * extends first), each mapped to the shape of its value (null: not checked further).
 */
function optionTable(dts) {
  const declared = interfacesOf(dts)
  const names = new Set(declared.keys())
  const interfaces = {}
  const add = (shape) => {
    const name = Array.isArray(shape) ? shape[0] : shape
    if (name === null || name in interfaces) return
    const keys = {}
    interfaces[name] = keys
    const collect = (n) => {
      const { bases, fields } = declared.get(n)
      for (const base of bases) {
        if (!names.has(base)) throw new Error(`index.d.ts: ${n} extends ${base}, which it does not declare`)
        collect(base)
      }
      for (const [key, type] of fields) keys[key] = shapeOf(type, names)
    }
    collect(name)
    for (const nested of Object.values(keys)) add(nested)
  }
  const entryPoints = {}
  for (const [entry, params] of entryPointsOf(dts)) {
    const slots = params.map(([name, type]) => {
      const shape = shapeOf(type, names)
      return shape === null ? null : { name, shape }
    })
    if (slots.every((s) => s === null)) continue
    entryPoints[entry] = slots
    for (const slot of slots) if (slot) add(slot.shape)
  }
  return { entryPoints, interfaces }
}

/** `{ name: type }` of the type aliases of `dts` (`MimeBundle`, `KernelEvent`). */
function aliasesOf(dts) {
  const found = new Map()
  for (const [, name, type] of dts.matchAll(/^export type (\w+) =\s*([\s\S]*?)\n\n/gm)) found.set(name, type.replace(/\/\*[\s\S]*?\*\//g, ''))
  return found
}

/** Where the bracket opened at `text[open]` closes. */
function closing(text, open) {
  let depth = 0
  for (let i = open; i < text.length; i++) {
    if ('<([{'.includes(text[i])) depth++
    else if (')]}'.includes(text[i]) || (text[i] === '>' && text[i - 1] !== '=')) if (--depth === 0) return i
  }
  return -1
}

/**
 * The JavaScript type a TypeScript `type` asks for, as the Rust checker reads it:
 * `{ kind }` with kind one of string, number, boolean, null, undefined, function, object
 * (any object), any; `{ kind: 'array', of }`, `{ kind: 'record', of }`,
 * `{ kind: 'interface', name }`, `{ kind: 'union', of: [...] }`. A string literal is a
 * string (its value is checked in Rust, with a message naming the choices); a name that
 * is neither an interface nor an alias here is anything (`Kernel`, `Promise<...>`), but
 * an `AbortSignal` is an object.
 */
function typeOf(type, decl, seen = new Set()) {
  if (isFunctionType(type.trim())) return { kind: 'function' }
  const members = splitTopLevel(type.trim(), '|').map((m) => typeOfMember(m, decl, seen))
  const flat = members.flatMap((m) => (m.kind === 'union' ? m.of : [m]))
  if (flat.some((m) => m.kind === 'any')) return { kind: 'any' }
  const unique = flat.filter((m, i) => flat.findIndex((n) => JSON.stringify(n) === JSON.stringify(m)) === i)
  return unique.length === 1 ? unique[0] : { kind: 'union', of: unique }
}

/** Whether `t` is an arrow function's type: `(...) => ...`, the arrow outside brackets. */
function isFunctionType(t) {
  if (!t.startsWith('(')) return false
  const end = closing(t, 0)
  return end > 0 && /^\s*=>/.test(t.slice(end + 1))
}

function typeOfMember(t, decl, seen) {
  if (t.startsWith('(')) {
    const end = closing(t, 0)
    return end === t.length - 1 ? typeOf(t.slice(1, -1), decl, seen) : { kind: 'function' }
  }
  if (/^['"]/.test(t)) return { kind: 'string' }
  if (t === 'true' || t === 'false') return { kind: 'boolean' }
  if (['string', 'number', 'boolean', 'null', 'undefined'].includes(t)) return { kind: t }
  if (t === 'object' || t.startsWith('{') || t === 'AbortSignal') return { kind: 'object' }
  if (t.endsWith('[]')) return { kind: 'array', of: typeOf(t.slice(0, -2), decl, seen) }
  let m = /^Array<([\s\S]+)>$/.exec(t)
  if (m) return { kind: 'array', of: typeOf(m[1], decl, seen) }
  m = /^Record<string,\s*([\s\S]+)>$/.exec(t)
  if (m) return { kind: 'record', of: typeOf(m[1], decl, seen) }
  if (decl.interfaces.has(t)) return { kind: 'interface', name: t }
  if (decl.aliases.has(t) && !seen.has(t)) return typeOf(decl.aliases.get(t), decl, new Set([...seen, t]))
  return { kind: 'any' }
}

/** The type of a parameter or field: one that may be left out takes `undefined` and
 *  `null` as left out (as napi reads an `Option`), so they are not among its types. */
function slotType(type, optional, decl) {
  const ty = typeOf(type, decl)
  if (!optional || ty.kind !== 'union') return ty
  const of = ty.of.filter((m) => m.kind !== 'undefined' && m.kind !== 'null')
  return of.length === 1 ? of[0] : { kind: 'union', of }
}

/** `Kernel#execute`, `new KernelPool`, `SandboxOptions` as a Rust static's name. */
function constName(name) {
  return name
    .replace(/^new /, 'new_')
    .replace(/[#.]/g, '_')
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toUpperCase()
}

/** `ty` as a Rust `Ty` expression. */
function rustTy(ty) {
  switch (ty.kind) {
    case 'array':
      return `Ty::Array(&${rustTy(ty.of)})`
    case 'record':
      return `Ty::Record(&${rustTy(ty.of)})`
    case 'interface':
      return `Ty::Interface(&${constName(ty.name)})`
    case 'union':
      return `Ty::Union(&[${ty.of.map(rustTy).join(', ')}])`
    default:
      return `Ty::${ty.kind[0].toUpperCase()}${ty.kind.slice(1)}`
  }
}

/**
 * `src/napi/signatures.rs`: the parameters of every entry point of `dts` and the fields
 * of every interface they reach, with their types; what `src/napi/args.rs` checks a
 * call's arguments against, unknown keys included.
 */
function rustSignatures(dts) {
  const decl = { interfaces: interfacesOf(dts), aliases: aliasesOf(dts) }
  const reached = new Set()
  const reach = (ty) => {
    if (ty.kind === 'interface' && !reached.has(ty.name)) {
      reached.add(ty.name)
      for (const [, type, optional] of fieldsOf(ty.name, decl.interfaces)) reach(slotType(type, optional, decl))
    } else if (ty.of) [].concat(ty.of).forEach(reach)
  }
  const entries = entryPointsOf(dts).map(([entry, params]) => {
    const typed = params.map(([name, type, optional]) => [name, slotType(type, optional, decl), optional])
    typed.forEach(([, ty]) => reach(ty))
    return [entry, typed]
  })
  const names = new Set()
  const unique = (name) => {
    if (names.has(name)) throw new Error(`index.d.ts: two declarations are both ${name} in Rust`)
    names.add(name)
    return name
  }
  const out = [
    '// Generated after `napi build` by scripts/dts.js (scripts/option-table.js) from index.d.ts;',
    '// do not edit. What each entry point and options object takes, for `args.rs`.',
    '#![allow(dead_code)]',
    '',
    'use super::args::{Field, Interface, Param, Ty};',
  ]
  for (const [entry, params] of entries) {
    out.push('', `/// \`${entry}\``, `pub static ${unique(constName(entry))}: &[Param] = &[`)
    for (const [name, ty, optional] of params) out.push(`    Param { name: ${JSON.stringify(name)}, ty: ${rustTy(ty)}, optional: ${optional} },`)
    out.push('];')
  }
  for (const name of [...reached].sort()) {
    out.push('', `pub static ${unique(constName(name))}: Interface = Interface {`, `    name: ${JSON.stringify(name)},`, '    fields: &[')
    for (const [key, type, optional] of fieldsOf(name, decl.interfaces)) {
      out.push(`        Field { key: ${JSON.stringify(key)}, ty: ${rustTy(slotType(type, optional, decl))}, optional: ${optional} },`)
    }
    out.push('    ],', '};')
  }
  return `${out.join('\n')}\n`
}

/** The fields of interface `name`, those of what it extends first. */
function fieldsOf(name, interfaces) {
  const { bases, fields } = interfaces.get(name)
  return [
    ...bases.flatMap((base) => {
      if (!interfaces.has(base)) throw new Error(`index.d.ts: ${name} extends ${base}, which it does not declare`)
      return fieldsOf(base, interfaces)
    }),
    ...fields,
  ]
}

const RUST_TABLE = path.join(root, 'src', 'napi', 'signatures.rs')

/** signatures.rs as index.d.ts says it should read now. */
function expected(dtsFile = path.join(root, 'index.d.ts')) {
  return rustSignatures(fs.readFileSync(dtsFile, 'utf8'))
}

module.exports = { optionTable, entryPointsOf, rustSignatures, expected, splitTopLevel, RUST_TABLE }
