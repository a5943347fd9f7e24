'use strict'
// Shared helpers for the kernel tests: real Python, real processes.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const { performance } = require('node:perf_hooks')

const addon = require('../..')

/** The interpreter the tests use: the test venv when scripts/test.js made one. */
const python = process.env.PYKERNEL_TEST_PYTHON || undefined

/** With PYKERNEL_TEST_ZYGOTE=1 every kernel a test starts is forked from a zygote
 *  (a `preload` makes it so): the isolation suite runs once each way. */
const zygote = process.env.PYKERNEL_TEST_ZYGOTE === '1'

/** The options every test kernel starts with. */
function kernelDefaults() {
  return { interpreter: python, ...(zygote ? { preload: ['json'] } : {}) }
}

function startKernel(options = {}) {
  return addon.Kernel.start({ ...kernelDefaults(), ...options })
}

/** Runs `code`, collecting the streamed events alongside the result. */
async function run(kernel, code, options = {}) {
  const events = []
  const result = await kernel.execute(code, {
    ...options,
    onEvent: (e) => {
      events.push(e)
      if (options.onEvent) options.onEvent(e)
    },
  })
  return { result, events }
}

/** Runs `code` and asserts it succeeded; returns `{result, events}`. */
async function ok(kernel, code, options) {
  const out = await run(kernel, code, options)
  assert.equal(out.result.status, 'ok', `${code}\n-> ${JSON.stringify(out.result.error)}`)
  return out
}

/** The `text/plain` of a successful cell's value. */
async function value(kernel, code) {
  const { result } = await ok(kernel, code)
  return result.result && result.result['text/plain']
}

/** Live (non-zombie) pids whose process group is `pgid`, read from /proc. */
function groupMembers(pgid) {
  const members = []
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    let stat
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8')
    } catch {
      continue
    }
    // Fields after the parenthesised command: state ppid pgrp session ...
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (Number(rest[2]) === pgid && rest[0] !== 'Z') members.push(Number(entry))
  }
  return members
}

/** The Python kernel of a sandboxed kernel whose `kernel.pid` (the init of its PID
 *  namespace, the leader of its group and session) is `pid`: init's first child, as a host
 *  pid; null when init is gone or has no child. */
function kernelProcess(pid) {
  try {
    const first = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/)[0]
    return first ? Number(first) : null
  } catch {
    return null
  }
}

/** Members of the group led by `pid` (a kernel's init) other than init and its Python
 *  kernel: what a cell started and left in the group. */
function strayMembers(pid, kernelPid = kernelProcess(pid)) {
  return groupMembers(pid).filter((p) => p !== pid && p !== kernelPid)
}

/** The PID namespace of `pid` as `/proc/<pid>/ns/pid` names it (`pid:[4026…]`), or null. */
function pidNamespace(pid) {
  try {
    return fs.readlinkSync(`/proc/${pid}/ns/pid`)
  } catch {
    return null
  }
}

/** Python: the cell's PID namespace, to compare with `pidNamespace(kernel.pid)` while the
 *  kernel lives (a namespace's name can be reused once it is gone). */
const PID_NAMESPACE_PY = "__import__('os').readlink('/proc/self/ns/pid')"

/** Python: a random token of the kernel process, the same for every cell it runs (it lives
 *  in `sys`, which no namespace reset touches), different in any other process. A cell's
 *  `os.getpid()` is 2 in every sandboxed kernel, so it identifies nothing. */
const KERNEL_TOKEN_PY = "__import__('sys').__dict__.setdefault('_test_kernel_token', __import__('os').urandom(8).hex())"

/** Live (non-zombie) pids, host side, whose command line contains `marker`. A cell's
 *  `Popen(...).pid` is a pid of its namespace, so children are found by a marker instead. */
function processesWith(marker) {
  const found = []
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    let cmdline
    try {
      cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'latin1')
    } catch {
      continue
    }
    if (cmdline.includes(marker) && isAlive(Number(entry))) found.push(Number(entry))
  }
  return found
}

/** This process's live (non-zombie) children, host side, that `keep(pid)` accepts (it may
 *  read their /proc files: one that is gone meanwhile is skipped). */
function hostChildren(keep = () => true) {
  const found = []
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8')
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (Number(ppid) === process.pid && state !== 'Z' && keep(Number(entry))) found.push(Number(entry))
    } catch {
      // gone meanwhile
    }
  }
  return found
}

/** Live pids in the PID namespace `ns` (a `pidNamespace()` name), host side. */
function namespaceMembers(ns) {
  const found = []
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    if (pidNamespace(entry) === ns && isAlive(Number(entry))) found.push(Number(entry))
  }
  return found
}

/** Whether `pid` is a live process (zombies count as gone). */
function isAlive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    return false
  }
}

async function waitFor(predicate, { timeoutMs = 5000, intervalMs = 25 } = {}) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await predicate()) return true
    if (Date.now() > deadline) return false
    await new Promise((r) => setTimeout(r, intervalMs))
  }
}

/** The bound for a step that should be prompt and is late only when the scheduler makes it
 *  so: `ms` plus 100 quiet round trips of `roundTrip` (the median of five; a `1+1` cell is
 *  ~1 ms on an idle machine, 10 ms or more with a CPU hog on both cores). A bound that
 *  stands for a limit of the product (a timeout, an escalation window) stays absolute. */
async function promptBound(ms, roundTrip) {
  const times = []
  for (let i = 0; i < 5; i++) {
    const started = performance.now()
    await roundTrip()
    times.push(performance.now() - started)
  }
  times.sort((a, b) => a - b)
  return ms + 100 * times[2]
}

function tempDir(prefix = 'pykernel-test-') {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix))
}

/** A temporary directory outside /tmp, which every kernel's view shows where it is (of
 *  the host's /tmp a kernel sees only what it was started with). */
function viewedDir(prefix = 'pykernel-test-') {
  return fs.mkdtempSync(path.join('/var/tmp', prefix))
}

/** The real executable behind `python` (what the kernel would run). */
function realPython() {
  const exe = python || 'python3'
  return execFileSync(exe, ['-S', '-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim()
}

/** A shell script standing in for Python: it passes the probe (`-S -c ...`) as Python
 *  3.11.7 living at its own path, and runs `body` when started as the kernel. */
function fakeInterpreter(dir, body) {
  const exe = path.join(dir, 'fake-python')
  fs.writeFileSync(exe, `#!/bin/sh\nif [ "$1" = "-S" ]; then echo "$0"; echo 3.11.7; exit 0; fi\n${body}\n`, { mode: 0o755 })
  return exe
}

/** The pids cgroup directory pykernel makes kernels' cgroups in (this process's own, as
 *  `src/process/pids_cgroup.rs` finds it), or null where there is none or it is not writable. */
function pidsCgroupBase() {
  let table
  try {
    table = fs.readFileSync('/proc/self/cgroup', 'utf8')
  } catch {
    return null
  }
  for (const line of table.split('\n')) {
    const [, controllers, at] = line.split(':')
    if (at === undefined) continue
    let dir
    if (controllers.split(',').includes('pids')) dir = path.join('/sys/fs/cgroup/pids', at)
    else if (controllers === '') {
      dir = path.join('/sys/fs/cgroup', at)
      try {
        if (!fs.readFileSync(path.join(dir, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('pids')) continue
      } catch {
        continue
      }
    } else continue
    try {
      fs.accessSync(dir, fs.constants.W_OK)
      return dir
    } catch {}
  }
  return null
}

/** The kernel cgroups (`pykernel-<host>-<n>`) of host process `host` (default: this one). */
function kernelCgroups(host = process.pid) {
  const base = pidsCgroupBase()
  if (!base) return []
  return fs.readdirSync(base).filter((name) => name.startsWith(`pykernel-${host}-`))
}

/** The name of the kernel cgroup (`pykernel-<host>-<n>`) process `pid` is in, or null. */
function kernelCgroupOf(pid) {
  try {
    const found = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').match(/^\d+:(?:[^:\n]*,)?pids(?:,[^:\n]*)?:.*\/(pykernel-\d+-\d+)$|^0::.*\/(pykernel-\d+-\d+)$/m)
    return found ? found[1] ?? found[2] : null
  } catch {
    return null
  }
}

/** Options that run a kernel without the pids cgroup, as on a machine where the host may
 *  not make one: the watcher alone then enforces `maxProcesses`. */
const WITHOUT_CGROUP = { baseEnv: { ...process.env, PYKERNEL_PIDS_CGROUP: '0' } }

module.exports = {
  promptBound,
  hostChildren,
  zygote,
  kernelDefaults,
  pidsCgroupBase,
  kernelCgroups,
  kernelCgroupOf,
  WITHOUT_CGROUP,
  addon,
  python,
  startKernel,
  run,
  ok,
  value,
  groupMembers,
  strayMembers,
  kernelProcess,
  pidNamespace,
  PID_NAMESPACE_PY,
  KERNEL_TOKEN_PY,
  processesWith,
  namespaceMembers,
  isAlive,
  waitFor,
  tempDir,
  viewedDir,
  realPython,
  fakeInterpreter,
}
