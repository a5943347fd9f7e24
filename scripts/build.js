#!/usr/bin/env node
'use strict'
// `npm run build` (`--debug` for `build:debug`): the addon for this machine, then
// scripts/dts.js over the generated types (which builds once more when the table of
// argument types it writes changed).
//
// build.rs leaves out the rebuild napi's CLI asks for when its folder of type definitions
// is missing (see there), so a crate cargo thinks fresh can meet an empty folder (removed
// by hand, or made new by another CLI version): the generated index.d.ts then declares
// nothing. That is seen here, and the crate is compiled once more to write the types.
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
const napi = path.join(root, 'node_modules', '.bin', 'napi')
const args = ['build', '--platform', ...(process.argv.includes('--debug') ? [] : ['--release'])]

function build() {
  execFileSync(napi, args, { cwd: root, stdio: 'inherit' })
}

function typesDeclared() {
  return fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8').includes('export declare class Kernel ')
}

build()
if (!typesDeclared()) {
  console.log('build: the type definitions came out empty (their folder was new); compiling the crate again to write them')
  const lib = path.join(root, 'src', 'lib.rs')
  const now = new Date()
  fs.utimesSync(lib, now, now)
  build()
  if (!typesDeclared()) throw new Error('index.d.ts declares no Kernel after a full rebuild: see the napi build output above')
}
require('./dts.js').finish(build)
