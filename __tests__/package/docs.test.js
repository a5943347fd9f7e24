'use strict'
// The documentation as a user reads it: README.md and docs/*.md.
//
// - Every code block a user would paste is marked, on the line before its fence:
//   `<!-- runnable -->`: it runs as pasted, imports and set-up included;
//   `<!-- fragment -->`: not run here: part of a program (names it uses are the reader's
//   own), or it needs what only the reader has (a remote host, a container).
//   Every ```js block carries one of the two. A ```text block marked `<!-- output -->` is
//   what the runnable block before it prints, exactly.
// - Each runnable block runs here as the user would run it: js as an ES module in a
//   directory inside the repository (so `import ... from 'pykernel'` resolves to this
//   package through its exports map, as from an installed copy), sh with `npx pykernel`
//   as `node bin/pykernel.js` (only pykernel one-liners are run), python as one cell
//   (`pykernel exec`), as an agent's cell runs. The test venv is found by discovery, as a user's active venv is
//   (VIRTUAL_ENV and PATH), never passed to the example.
// - A `console.log(...)` line that ends in `// text` says the line it prints: the
//   output must hold that line.
// - README.md stays at most 250 lines; every relative link and anchor in the
//   repository's Markdown resolves; no doc cites an issue number or the spec.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync, spawnSync } = require('node:child_process')

const root = path.resolve(__dirname, '..', '..')
const docs = ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)]
const RUN_TIMEOUT_MS = 120_000

// ------------------------------------------------------------------------ reading Markdown

/**
 * The fenced code blocks of a Markdown file: `{ lang, code, line, marker }`, where `marker`
 * is the `<!-- name -->` comment on the line before the fence (or null). A block inside a
 * list item is indented; its indentation is taken off.
 */
function codeBlocks(text) {
  const lines = text.split('\n')
  const blocks = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)(```+)\s*([\w-]*)/.exec(lines[i])
    if (!open) continue
    const [, indent, fence, lang] = open
    const body = []
    let j = i + 1
    while (j < lines.length && !lines[j].startsWith(indent + fence)) body.push(lines[j++].slice(indent.length))
    const marker = /^\s*<!--\s*([\w-]+)\s*-->\s*$/.exec(lines[i - 1] ?? '')
    blocks.push({ lang, code: body.join('\n') + '\n', line: i + 1, marker: marker ? marker[1] : null })
    i = j
  }
  return blocks
}

/** Markdown lines outside fenced code blocks (a block's lines read as empty). */
function proseLines(text) {
  let fence = null
  return text.split('\n').map((line) => {
    const m = /^\s*(```+|~~~+)/.exec(line)
    if (m && !fence) fence = m[1]
    else if (m && line.trim().startsWith(fence)) fence = null
    else if (!fence) return line
    return ''
  })
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading) {
  return heading.trim().toLowerCase().replace(/<[^>]+>/g, '').replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
}

const anchorCache = new Map()
function anchorsOf(file) {
  if (!anchorCache.has(file)) {
    const seen = new Map()
    const anchors = new Set()
    for (const line of proseLines(fs.readFileSync(file, 'utf8'))) {
      const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
      if (!h) continue
      const base = slug(h[1])
      const n = seen.get(base) ?? 0
      seen.set(base, n + 1)
      anchors.add(n ? `${base}-${n}` : base)
    }
    anchorCache.set(file, anchors)
  }
  return anchorCache.get(file)
}

/** The repository's Markdown files (tracked, or new and not ignored), relative to the root. */
function markdownFiles() {
  return execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.md'], { cwd: root, encoding: 'utf8' })
    .split('\n')
    .filter((f) => f && fs.existsSync(path.join(root, f)))
}

/** Every relative link (and `#anchor`) in these Markdown files that does not resolve. */
function brokenLinks(files) {
  const broken = []
  for (const rel of files) {
    const file = path.join(root, rel)
    proseLines(fs.readFileSync(file, 'utf8')).forEach((line, i) => {
      for (const [, target] of line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // http:, mailto:, ...
        const [file_, anchor] = target.split('#')
        const dest = file_ ? path.resolve(path.dirname(file), decodeURIComponent(file_)) : file
        if (!fs.existsSync(dest)) broken.push(`${rel}:${i + 1}: ${target} (no such file)`)
        else if (anchor !== undefined && dest.endsWith('.md') && !anchorsOf(dest).has(anchor)) broken.push(`${rel}:${i + 1}: ${target} (no such heading)`)
      }
    })
  }
  return broken
}

// ------------------------------------------------------------------------ running blocks

/** The environment a user with the test venv active has: discovery finds its python. */
function userEnv() {
  const env = { ...process.env }
  delete env.PYKERNEL_TEST_PYTHON
  delete env.CONDA_PREFIX
  const python = process.env.PYKERNEL_TEST_PYTHON
  if (python) {
    env.VIRTUAL_ENV = path.dirname(path.dirname(python))
    env.PATH = `${path.dirname(python)}${path.delimiter}${process.env.PATH}`
  }
  return env
}

/** How a block runs: `[program, args]` once its code is written to `file`. */
function command(block, file) {
  if (block.lang === 'js') return [process.execPath, [file]]
  if (block.lang === 'python') return [process.execPath, [path.join(root, 'bin', 'pykernel.js'), 'exec', fs.readFileSync(file, 'utf8')]]
  if (block.lang === 'sh') return ['bash', ['-e', file]]
  throw new Error(`a runnable block in ${block.lang || 'no language'}: mark only js, sh or python blocks runnable`)
}

/** A sh block's commands, each a pykernel one-liner, with `npx pykernel` as this checkout's CLI. */
function shScript(code) {
  const cli = `${JSON.stringify(process.execPath)} ${JSON.stringify(path.join(root, 'bin', 'pykernel.js'))}`
  return code
    .split('\n')
    .map((line) => {
      if (!line.trim() || line.trim().startsWith('#')) return line
      // Quoted arguments and the comment aside, no other command may ride along.
      assert.doesNotMatch(line, /[`$]/, `a sh block runs no substitution: ${line}`)
      const bare = line.replace(/"(\\.|[^"\\])*"|'[^']*'/g, '""').replace(/\s#.*$/, '')
      assert.match(bare, /^npx pykernel\b[^;&|<>`$()]*$/, `only pykernel one-liners run from a sh block: ${line}`)
      return line.replace(/^npx pykernel\b/, cli)
    })
    .join('\n')
}

function runBlock(block, dir) {
  const ext = { js: 'mjs', sh: 'sh', python: 'py' }[block.lang] ?? 'txt'
  const file = path.join(dir, `block.${ext}`)
  fs.writeFileSync(file, block.lang === 'sh' ? shScript(block.code) : block.code)
  const [program, args] = command(block, file)
  return spawnSync(program, args, { cwd: dir, env: userEnv(), encoding: 'utf8', timeout: RUN_TIMEOUT_MS, stdio: ['ignore', 'pipe', 'pipe'] })
}

/** The lines a block says it prints: `console.log(...)   // text`. */
function promisedLines(block) {
  if (block.lang !== 'js') return []
  return [...block.code.matchAll(/^\s*console\.log\(.*\)\s*\/\/ (.+)$/gm)].map((m) => m[1].trim())
}

// ------------------------------------------------------------------------ the tests

test('README.md is at most 250 lines', () => {
  const lines = fs.readFileSync(path.join(root, 'README.md'), 'utf8').trimEnd().split('\n').length
  assert.ok(lines <= 250, `README.md has ${lines} lines: move reference material into docs/`)
})

test("README.md's Install section keeps a js block first (scripts/install-check.js runs it from the tarballs)", () => {
  const section = fs.readFileSync(path.join(root, 'README.md'), 'utf8').split(/^## /m).find((s) => s.startsWith('Install'))
  assert.ok(section, 'README.md has no "## Install" section')
  const first = codeBlocks(section).find((b) => b.lang === 'js')
  assert.ok(first, 'no ```js block under "## Install"')
  assert.equal(first.marker, 'runnable')
  assert.deepEqual(promisedLines(first).filter((l) => l.includes('42')).length, 1, 'the install example prints 42')
})

test('every relative link and anchor in the Markdown resolves', () => {
  assert.deepEqual(brokenLinks(markdownFiles()), [])
})

test('every doc and heading a code comment names exists', () => {
  // As `docs/api.md#option-ranges` in a comment, or a doc named in a test (this file's probe aside).
  const pattern = '(README|docs/[a-z-]+)\\.md#[a-z0-9-]+'
  const grep = spawnSync('git', ['grep', '-n', '-o', '-E', pattern, '--', '.', ':(exclude)*.md', ':(exclude)__tests__/package/docs.test.js'], { cwd: root, encoding: 'utf8' })
  assert.ok(grep.status === 0 || grep.status === 1, grep.stderr) // 1: no match
  const missing = []
  for (const hit of grep.stdout.split('\n').filter(Boolean)) {
    const [, where, doc, anchor] = /^(.+?:\d+):(.+?)#(.+)$/.exec(hit)
    const file = path.join(root, doc)
    if (!fs.existsSync(file) || !anchorsOf(file).has(anchor)) missing.push(`${where}: ${doc}#${anchor}`)
  }
  assert.deepEqual(missing, [])
})

test('no doc cites an issue number or the spec (neither is in the repository)', () => {
  const citations = []
  for (const rel of docs) {
    proseLines(fs.readFileSync(path.join(root, rel), 'utf8')).forEach((line, i) => {
      for (const pattern of [/\bissues?\s+#?\d+/i, /(^|[^\w&/])#\d+\b/, /\bSPEC\b/, /\bSPEC\.md\b/i, /\bsection\s+\d+[a-z]?\b/i]) {
        const m = pattern.exec(line)
        if (m) citations.push(`${rel}:${i + 1}: ${m[0].trim()}`)
      }
    })
  }
  assert.deepEqual(citations, [])
})

test('every js block is marked runnable or a fragment', () => {
  const unmarked = []
  for (const rel of docs) {
    for (const block of codeBlocks(fs.readFileSync(path.join(root, rel), 'utf8'))) {
      if (block.lang === 'js' && block.marker !== 'runnable' && block.marker !== 'fragment') unmarked.push(`${rel}:${block.line}`)
    }
  }
  assert.deepEqual(unmarked, [], 'put <!-- runnable --> or <!-- fragment --> on the line before each fence')
})

test('the link checker finds a broken anchor and a missing file', () => {
  const dir = fs.mkdtempSync(path.join(root, '.docs-test-'))
  try {
    const probe = path.join(dir, 'probe.md')
    fs.writeFileSync(probe, '# Probe: one\n\n[ok](#probe-one) [bad](#nowhere) [gone](missing.md) [up](../README.md#install) [no](../README.md#nope) `[code](#x)`\n')
    const broken = brokenLinks([path.relative(root, probe)]).map((b) => b.replace(/^.*probe\.md:/, ''))
    assert.deepEqual(broken, ['3: #nowhere (no such heading)', '3: missing.md (no such file)', '3: ../README.md#nope (no such heading)'])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

for (const rel of docs) {
  const blocks = codeBlocks(fs.readFileSync(path.join(root, rel), 'utf8'))
  blocks.forEach((block, i) => {
    if (block.marker !== 'runnable') return
    const output = blocks.slice(i + 1).find((b) => b.marker === 'runnable' || b.marker === 'output')
    const expected = output?.marker === 'output' ? output.code : null
    test(`${rel}:${block.line}: the ${block.lang} block runs as pasted`, { timeout: RUN_TIMEOUT_MS + 10_000 }, () => {
      // Inside the repository, so that the package resolves its own name.
      const dir = fs.mkdtempSync(path.join(root, '.docs-test-'))
      try {
        const run = runBlock(block, dir)
        const report = `\n--- block\n${block.code}--- stdout\n${run.stdout}--- stderr\n${run.stderr}${run.error ? `--- ${run.error.message}\n` : ''}`
        assert.equal(run.status, 0, `exit status ${run.status}${run.signal ? ` (${run.signal})` : ''}${report}`)
        const printed = run.stdout.split('\n').map((l) => l.trim())
        for (const line of promisedLines(block)) assert.ok(printed.includes(line), `it does not print ${JSON.stringify(line)}${report}`)
        if (expected !== null) assert.equal(run.stdout.trimEnd(), expected.trimEnd(), `its output is not the one shown${report}`)
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  })
}
