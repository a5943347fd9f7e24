'use strict'
// The keys of every options object the binding takes, read from the generated index.d.ts
// and written to option-keys.js, which main.js checks calls against.
//
// napi-rs reads the fields of a `#[napi(object)]` struct by name and ignores the rest of
// the object, and napi-rs 3 has no attribute that refuses other keys nor a list of a
// struct's field names to check them with. index.d.ts is the one place where every
// options object is declared with its keys: napi generates the structs' interfaces from
// the Rust fields, and the objects read by hand (`ExecuteOptions`, `EvalRequest`, ...)
// are declared in types.d.ts. So the table is derived from it after each build and
// committed, rather than kept by hand beside the structs, where it would drift.
// `__tests__/package/option-keys.test.js` checks it is current and matches the Rust fields.
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
    const fields = [...body.matchAll(/^ {2}(?:readonly )?(\w+)\??: (.+)$/gm)].map(([, key, type]) => [key, type])
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
    const [, name, type] = /^(\w+)\??: ([\s\S]+)$/.exec(param)
    return [name, type]
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

/** option-keys.js for `table`: an entry point a line, an interface's key a line. */
function render({ entryPoints, interfaces }) {
  const lines = (object, each) => Object.entries(object).map(([key, value]) => `    ${JSON.stringify(key)}: ${each(value)},`)
  const keys = (fields) => `{\n${lines(fields, JSON.stringify).map((l) => `  ${l}`).join('\n')}\n    }`
  return `'use strict'
// Generated after \`napi build\` by scripts/dts.js (scripts/option-table.js) from index.d.ts;
// do not edit. The keys of each options object; main.js refuses any other.
module.exports = {
  entryPoints: {
${lines(entryPoints, JSON.stringify).join('\n')}
  },
  interfaces: {
${lines(interfaces, keys).join('\n')}
  },
}
`
}

/** option-keys.js as index.d.ts says it should read now. */
function expected(dtsFile = path.join(root, 'index.d.ts')) {
  return render(optionTable(fs.readFileSync(dtsFile, 'utf8')))
}

module.exports = { optionTable, render, expected, splitTopLevel }
