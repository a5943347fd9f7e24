#!/usr/bin/env node
'use strict'
// After `napi build`: what the generated index.d.ts cannot say by itself. A class without
// a `#[napi(constructor)]` gets no constructor line, which TypeScript reads as a public
// `new Kernel()`; at run time that throws. Optional fields get `| undefined`.
// Then option-keys.js, the keys of each options object, from the finished index.d.ts
// (see scripts/option-table.js). Idempotent, so builds stay reproducible.
const fs = require('node:fs')
const path = require('node:path')
const optionTable = require('./option-table.js')

const file = path.join(__dirname, '..', 'index.d.ts')
const NO_CONSTRUCTOR = {
  Kernel: 'Kernels are made by `Kernel.start(options)`.',
}

let text = fs.readFileSync(file, 'utf8')
for (const [name, why] of Object.entries(NO_CONSTRUCTOR)) {
  const opening = `export declare class ${name} {\n`
  const at = text.indexOf(opening)
  if (at < 0) throw new Error(`index.d.ts has no class ${name}`)
  const line = `  /** ${why} */\n  private constructor()\n`
  const body = at + opening.length
  if (!text.startsWith(line, body)) text = text.slice(0, body) + line + text.slice(body)
}
// Optional fields say `| undefined`: under `exactOptionalPropertyTypes` a caller may then
// pass `{cwd: maybeCwd}` with `maybeCwd` undefined, which the addon accepts as absent.
text = text.replace(/^(\s+(?:readonly )?\w+\?: )(.+)$/gm, (line, head, type) => {
  // A function type's own `undefined` (in what it returns) is not the field's.
  const optional = type.includes('=>') ? /\)\s*\|\s*undefined$/ : /\|\s*undefined\b/
  if (optional.test(type)) return line
  return `${head}${type.includes('=>') ? `(${type})` : type} | undefined`
})
fs.writeFileSync(file, text)
fs.writeFileSync(path.join(__dirname, '..', 'option-keys.js'), optionTable.expected(file))
