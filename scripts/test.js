#!/usr/bin/env node
'use strict'
// `npm test`: build the addon, make the test venv, run the Bun smoke test, then the
// node:test suites (last, so their summary and the list of failed tests close the output).
const { execFileSync, spawnSync } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
const venv = path.join(root, '.venv-test')
const requirements = path.join(root, '__tests__', 'requirements.txt')

function sh(cmd, args, options = {}) {
  console.log(`$ ${cmd} ${args.join(' ')}`)
  execFileSync(cmd, args, { stdio: 'inherit', cwd: root, ...options })
}

function ensureVenv() {
  const stamp = path.join(venv, '.requirements-sha256')
  const want = crypto.createHash('sha256').update(fs.readFileSync(requirements)).digest('hex')
  const python = path.join(venv, 'bin', 'python')
  if (fs.existsSync(python) && fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === want) return python
  const base = process.env.PYTHON || 'python3'
  sh(base, ['-m', 'venv', '--clear', venv])
  // pip's own lines (each package collected, then installed) show the minute this takes.
  console.log(`making the test venv ${path.relative(root, venv)} from ${path.relative(root, requirements)} (about a minute, once)`)
  sh(python, ['-m', 'pip', 'install', '--disable-pip-version-check', '--progress-bar', 'off', '-r', requirements])
  fs.writeFileSync(stamp, want)
  return python
}

function testFiles(dir) {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? testFiles(path.join(dir, e.name)) : e.name.endsWith('.test.js') ? [path.join(dir, e.name)] : []))
    .sort()
}

sh('npm', ['run', 'build'])
const python = ensureVenv()
const env = { ...process.env, PYKERNEL_TEST_PYTHON: python }

const bun = spawnSync(path.join(root, 'node_modules', '.bin', 'bun'), [path.join(root, '__tests__', 'bun', 'smoke.mjs')], {
  stdio: 'inherit',
  env,
})
if (bun.status !== 0) {
  console.error(`Bun smoke test failed (status ${bun.status}${bun.error ? `, ${bun.error.message}` : ''})`)
  process.exit(1)
}

const only = process.argv.slice(2)
const files = only.length ? only : testFiles(path.join(root, '__tests__'))
// A test that hangs fails after TEST_TIMEOUT_MS instead of holding CI until its limit.
// Node applies it to each test file as a whole too (the longest takes about a minute),
// so it is generous; a test that needs a bound of its own sets `{ timeout }`.
const TEST_TIMEOUT_MS = 300_000
// Two reporters: spec as the run goes, and scripts/test-failures.js into a file, printed
// last, so that the names of the failed tests and their first error lines end the output.
const failures = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-npm-test-')), 'failures.txt')
const node = spawnSync(
  process.execPath,
  [
    '--test',
    '--test-concurrency=2',
    `--test-timeout=${TEST_TIMEOUT_MS}`,
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    `--test-reporter=${path.join(__dirname, 'test-failures.js')}`,
    `--test-reporter-destination=${failures}`,
    ...files,
  ],
  { stdio: 'inherit', env },
)
let report = ''
try {
  report = fs.readFileSync(failures, 'utf8')
} catch {}
fs.rmSync(path.dirname(failures), { recursive: true, force: true })
const status = node.status ?? 1
if (report) console.log(`\n${report.trimEnd()}`)
else if (status !== 0) console.log(`\nnode --test ended with ${node.signal ? `signal ${node.signal}` : `status ${status}`} and named no failed test: see the output above.`)
process.exit(report ? status || 1 : status)
