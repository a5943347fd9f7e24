#!/usr/bin/env node
'use strict'
// After `napi build`: what the generated index.d.ts cannot say by itself. A class whose
// constructor only refuses (`Kernel`: its start is async) is declared with a private
// one, so TypeScript refuses `new Kernel()` too. Optional fields get `| undefined`.
// Then src/napi/signatures.rs, the types of every entry point's parameters and of the
// options objects' fields, from the finished index.d.ts (see scripts/option-table.js).
// The addon compiles that table in: when it changed, the addon is built once more with
// the same profile (scripts/build.js passes it on), which leaves index.d.ts as it was, since
// the table declares nothing to JavaScript. Idempotent, so builds stay reproducible.
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const optionTable = require('./option-table.js')

const root = path.join(__dirname, '..')
const file = path.join(root, 'index.d.ts')
const NO_CONSTRUCTOR = {
  Kernel: 'Kernels are made by `Kernel.start(options)`.',
}

function finishDts() {
  let text = fs.readFileSync(file, 'utf8')
  for (const [name, why] of Object.entries(NO_CONSTRUCTOR)) {
    const opening = `export declare class ${name} {\n`
    const at = text.indexOf(opening)
    if (at < 0) throw new Error(`index.d.ts has no class ${name}`)
    const body = at + opening.length
    const generated = '  constructor()\n'
    if (text.startsWith(generated, body)) text = text.slice(0, body) + text.slice(body + generated.length)
    const line = `  /** ${why} */\n  private constructor()\n`
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
}

/** The finished types and table; `rebuild` builds the addon again (with the profile of
 *  the build before) when the table changed. */
function finish(rebuild) {
  finishDts()
  const table = optionTable.expected(file)
  const current = fs.existsSync(optionTable.RUST_TABLE) ? fs.readFileSync(optionTable.RUST_TABLE, 'utf8') : ''
  if (table === current) return
  fs.writeFileSync(optionTable.RUST_TABLE, table)
  console.log('src/napi/signatures.rs changed: building the addon again with it')
  rebuild()
  finishDts()
  if (optionTable.expected(file) !== table) throw new Error('src/napi/signatures.rs changed again after the rebuild')
}

if (require.main === module) {
  const release = process.argv.includes('--release') ? ['--release'] : []
  finish(() => execFileSync(path.join(root, 'node_modules', '.bin', 'napi'), ['build', '--platform', ...release], { stdio: 'inherit', cwd: root }))
}

module.exports = { finish }
