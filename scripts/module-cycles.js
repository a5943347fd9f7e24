#!/usr/bin/env node
'use strict'
// `node scripts/module-cycles.js [--folders]`: the crate's files as a graph (an edge wherever a file
// names an item of another: `crate::a::b`, `super::x`), and every cycle in it. A cycle
// means two files cannot be read, or changed, one without the other; the layers in
// docs/architecture.md only hold while there are none. Exits 1 if there is one. With
// `--folders`, it first prints which folder uses which.
//
// Test modules are left out (a test may reach anywhere), and so are `mod` declarations
// (a parent names its children without depending on them). Paths resolve to the
// deepest file that exists: `crate::kernel::config::KernelConfig` is `kernel/config.rs`
// if there is one, else `kernel/mod.rs` (or `kernel.rs`).
const fs = require('node:fs')
const path = require('node:path')

const src = path.resolve(__dirname, '..', 'src')

function rustFiles(dir) {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? rustFiles(path.join(dir, e.name)) : e.name.endsWith('.rs') ? [path.join(dir, e.name)] : []))
}

// The module path of a file: src/kernel/mod.rs -> ['kernel'], src/lib.rs -> [].
function modulePath(file) {
  const parts = path.relative(src, file).replace(/\.rs$/, '').split(path.sep)
  const last = parts[parts.length - 1]
  if (last === 'mod' || last === 'lib') parts.pop()
  return parts
}

// The file holding the deepest module named by `segments`, or null.
function fileOf(segments, byModule) {
  for (let n = segments.length; n >= 0; n--) {
    const file = byModule.get(segments.slice(0, n).join('::'))
    if (file) return file
  }
  return null
}

// The source without comments, strings and test modules.
function code(text) {
  const cut = text.search(/#\[cfg\(test\)\]\s*(pub(\([a-z]+\))?\s+)?mod\s+\w+\s*\{/)
  if (cut >= 0) text = text.slice(0, cut)
  return text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '')
    .replace(/"(\\.|[^"\\])*"/g, '""')
}

// Every path a file names: `crate::a::b`, `super::a`, and each path of a `use` tree
// (`use crate::a::{b, c::{d, e}}` names a::b, a::c::d and a::c::e).
function namedPaths(text, self) {
  const paths = []
  const parentOf = (mod, depth) => mod.slice(0, Math.max(0, mod.length - depth))
  for (const m of text.matchAll(/\b(crate|super(?:::super)*|self)::/g)) {
    const root = m[1]
    const base = root === 'crate' ? [] : root === 'self' ? self.module : parentOf(self.module, root.split('::').length)
    for (const tail of useTree(text, m.index + m[0].length).paths) paths.push([...base, ...tail])
  }
  return paths
}

// The paths of the use tree (or plain path) that starts at `at`: its module segments only
// (a segment that is not a module name, such as `Kernel` or `self`, ends it), and where it
// ends.
function useTree(text, at) {
  const segments = []
  let i = at
  for (;;) {
    while (/\s/.test(text[i] ?? '')) i++
    if (text[i] === '{') {
      const paths = []
      i++
      for (;;) {
        while (/[\s,]/.test(text[i] ?? '')) i++
        if (text[i] === '}' || i >= text.length) break
        const inner = useTree(text, i)
        for (const p of inner.paths) paths.push([...segments, ...p])
        i = inner.end
      }
      return { paths: paths.length ? paths : [segments], end: i + 1 }
    }
    const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i, i + 200))
    if (!word) break
    i += word[0].length
    // An item (`Kernel`, `Kernel::spawn`) or `self` ends the module path.
    if (!/^[a-z_][a-z0-9_]*$/.test(word[0]) || word[0] === 'self') break
    segments.push(word[0])
    if (text.startsWith('::', i)) i += 2
    else break
  }
  // Skip the rest of this item (`as name`, generics) up to where the group goes on.
  while (i < text.length && !/[,}{;\n]/.test(text[i])) i++
  return { paths: [segments], end: i }
}

function main() {
  const files = rustFiles(src)
  const byModule = new Map(files.map((f) => [modulePath(f).join('::'), f]))
  const edges = new Map(files.map((f) => [f, new Set()]))
  for (const file of files) {
    // `super` is the parent of the file's module: for a/mod.rs that is the crate, for a/b.rs a.
    const self = { module: modulePath(file) }
    for (const segments of namedPaths(code(fs.readFileSync(file, 'utf8')), self)) {
      const target = fileOf(segments, byModule)
      if (target && target !== file && !target.endsWith(`${path.sep}lib.rs`)) edges.get(file).add(target)
    }
  }
  const rel = (f) => path.relative(src, f)
  if (process.argv.includes('--folders')) {
    // Which folder's files name which other folder's: the layers as they are.
    const folder = (f) => rel(f).split(path.sep)[0].replace(/\.rs$/, '')
    const uses = new Map()
    for (const [from, targets] of edges)
      for (const to of targets) {
        if (folder(from) === folder(to)) continue
        if (!uses.has(folder(from))) uses.set(folder(from), new Set())
        uses.get(folder(from)).add(folder(to))
      }
    for (const [from, to] of [...uses].sort()) console.log(`${from} -> ${[...to].sort().join(', ')}`)
  }
  const cycles = stronglyConnected(files, edges).filter((c) => c.length > 1)
  if (!cycles.length) {
    console.log(`no cycles among ${files.length} files in src/`)
    return 0
  }
  for (const cycle of cycles) console.log(`cycle of ${cycle.length} files: ${cycle.map(rel).sort().join(', ')}`)
  return 1
}

// Tarjan's algorithm: the graph's strongly connected components.
function stronglyConnected(nodes, edges) {
  let index = 0
  const order = new Map()
  const low = new Map()
  const stack = []
  const onStack = new Set()
  const components = []
  const visit = (v) => {
    order.set(v, index)
    low.set(v, index++)
    stack.push(v)
    onStack.add(v)
    for (const w of edges.get(v)) {
      if (!order.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v), low.get(w)))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), order.get(w)))
    }
    if (low.get(v) === order.get(v)) {
      const component = []
      let w
      do {
        w = stack.pop()
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      components.push(component)
    }
  }
  for (const v of nodes) if (!order.has(v)) visit(v)
  return components
}

process.exit(main())
