'use strict'
// Every refusal of the sandbox is stated. A cell that writes outside its writable
// directories, reads a hidden path or connects where its network has no route gets one
// `status` event `{op: 'sandbox', data: {denied, path | host}}` per distinct refusal and one
// line at the head of the agent text saying how the host allows it, whether the cell saw
// the error, swallowed it, or only a shell child printed it. A kernel without a sandbox
// reports nothing. `refusals-zygote.test.js` runs it all again with every kernel forked.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { startKernel, viewedDir } = require('./_common')

/** Runs `code` as one cell through `evaluate`; returns the result and its refusal events
 *  (`data` of each `sandbox` status event that names a refusal), in order. */
async function evaluate(kernel, code) {
  const streamed = []
  const result = await kernel.evaluate([{ code }], { onEvent: (_, e) => streamed.push(e) })
  const refusals = streamed.filter((e) => e.type === 'status' && e.op === 'sandbox' && e.data.denied).map((e) => e.data)
  return { result, refusals, streamed }
}

/** The notice lines of `output` that name a refusal. */
const noticeLines = (output) => output.split('\n').filter((line) => line.startsWith('[sandbox: '))

const py = JSON.stringify

/** Two directories outside /tmp (which a kernel's view replaces): the kernel's writable cwd,
 *  and one it may not write, named by their real paths. */
function dirs(t) {
  const cwd = fs.realpathSync(viewedDir('pykernel-refusals-cwd-'))
  const outside = fs.realpathSync(viewedDir('pykernel-refusals-outside-'))
  t.after(() => {
    fs.rmSync(cwd, { recursive: true, force: true })
    fs.rmSync(outside, { recursive: true, force: true })
  })
  return { cwd, outside }
}

/** A kernel whose writes are confined to `cwd`. */
async function confined(t, cwd) {
  const kernel = await startKernel({ cwd, sandbox: { writable: [cwd] } })
  t.after(() => kernel.shutdown())
  return kernel
}

test('a write outside the writable directories is stated once, by its real path, though the cell swallowed it; writes it may make are not', async (t) => {
  const { cwd, outside } = dirs(t)
  fs.symlinkSync(outside, path.join(cwd, 'link-out'))
  const kernel = await confined(t, cwd)
  const { result, refusals } = await evaluate(
    kernel,
    `
import os, tempfile
for _ in range(2):
    try:
        with open(${py(outside + '/f.txt')}, 'w') as f:
            f.write('x')
    except OSError:
        pass
try:
    os.mkdir('link-out/made')
except OSError:
    pass
with open('here.txt', 'w') as f:
    f.write('in the cwd')
with open(os.path.join(os.environ['TMPDIR'], 'tmp.txt'), 'w') as f:
    f.write('in TMPDIR')
fd, name = tempfile.mkstemp()
os.close(fd)
with open('/dev/null', 'w') as f:
    f.write('nothing')
os.makedirs('sub/dir', exist_ok=True)
os.makedirs(${py(outside)}, exist_ok=True)  # already there: nothing was refused
print(os.environ['TMPDIR'])
`,
  )
  assert.equal(result.exitCode, 0, result.output)
  assert.deepEqual(refusals, [
    { denied: 'write', path: `${outside}/f.txt` },
    { denied: 'write', path: `${outside}/made` },
  ])
  assert.deepEqual(
    result.statuses.filter((s) => s.op === 'sandbox' && s.data.denied).map((s) => s.data),
    refusals,
    'the result keeps the same events',
  )
  const lines = noticeLines(result.output)
  assert.deepEqual(lines, [
    `[sandbox: writing ${outside}/f.txt was refused; this kernel writes only beneath ${cwd} (and its own TMPDIR, caches and installs): the host can allow more with sandbox.writable]`,
    `[sandbox: writing ${outside}/made was refused; this kernel writes only beneath ${cwd} (and its own TMPDIR, caches and installs): the host can allow more with sandbox.writable]`,
  ])
  assert.ok(result.output.startsWith(`${lines[0]}\n${lines[1]}\n`), `the notices come first:\n${result.output}`)
  assert.ok(!fs.existsSync(`${outside}/f.txt`))
})

test("a cell's own threads count, and each distinct refusal past ten is counted, not named", async (t) => {
  const { cwd, outside } = dirs(t)
  const kernel = await confined(t, cwd)
  const { result, refusals } = await evaluate(
    kernel,
    `
import threading
def write_all():
    for i in range(13):
        try:
            open(${py(outside)} + '/t%d' % i, 'w')
        except OSError:
            pass
worker = threading.Thread(target=write_all)
worker.start()
worker.join()
`,
  )
  assert.equal(result.exitCode, 0, result.output)
  assert.deepEqual(
    refusals,
    [...Array.from({ length: 10 }, (_, i) => ({ denied: 'write', path: `${outside}/t${i}` })), { denied: 'more', count: 3 }],
  )
  const lines = noticeLines(result.output)
  assert.equal(lines.length, 11, result.output)
  assert.equal(lines[10], '[sandbox: 3 more refusals (a cell names at most 10)]')
})

test('a refusal only a shell child saw is found in what it printed', async (t) => {
  const { cwd, outside } = dirs(t)
  const kernel = await confined(t, cwd)
  const { result, refusals } = await evaluate(
    kernel,
    `
import sys
!touch ${outside}/by-touch
lines = !mkdir ${outside}/by-mkdir 2>&1
print(lines)
!{sys.executable} -c "open('${outside}/by-python', 'w')"
!{sys.executable} -c "import os; os.mkdir('${outside}')"
`,
  )
  assert.deepEqual(refusals, [
    { denied: 'write', path: `${outside}/by-touch` },
    { denied: 'write', path: `${outside}/by-mkdir` },
    { denied: 'write', path: `${outside}/by-python` },
  ])
  // Read-only in the kernel's view; refused by Landlock where there is none.
  assert.match(result.output, /cannot touch .*: (Read-only file system|Permission denied)/)
  assert.match(result.output, /FileExistsError: \[Errno 17\]/, 'a directory that is there: nothing refused')
  assert.equal(noticeLines(result.output).length, 3, result.output)
})

test('an OSError that escapes the cell is stated once', async (t) => {
  const { cwd, outside } = dirs(t)
  const kernel = await confined(t, cwd)
  // As a C extension raises it after its own fopen(), which no audit event sees: only
  // the escaping error tells.
  const raised = await evaluate(kernel, `import errno, os\nraise OSError(errno.EROFS, os.strerror(errno.EROFS), ${py(outside + '/by-c')})`)
  assert.equal(raised.result.exitCode, 1)
  assert.match(raised.result.output, /OSError: \[Errno 30\] Read-only file system/)
  assert.deepEqual(raised.refusals, [{ denied: 'write', path: `${outside}/by-c` }])
  // Seen by the audit hook and escaping too: one event, one line.
  const opened = await evaluate(kernel, `open(${py(outside + '/escaped')}, 'w')`)
  assert.equal(opened.result.exitCode, 1)
  assert.deepEqual(opened.refusals, [{ denied: 'write', path: `${outside}/escaped` }])
  assert.equal(noticeLines(opened.result.output).length, 1, opened.result.output)
})

test('a read of the hidden artifacts directory is stated', async (t) => {
  const artifacts = fs.realpathSync(viewedDir('pykernel-refusals-artifacts-'))
  t.after(() => fs.rmSync(artifacts, { recursive: true, force: true }))
  const kernel = await startKernel({ artifactsDir: artifacts, sessionId: 'refusals' })
  t.after(() => kernel.shutdown())
  if (!kernel.isolation.enforced.includes('filesystem-view')) return t.skip('no filesystem view here: nothing is hidden')
  fs.writeFileSync(path.join(artifacts, 'secret.json'), '{}')
  const { result, refusals } = await evaluate(
    kernel,
    `
import os
print(os.listdir(${py(artifacts)}))
try:
    open(${py(artifacts + '/secret.json')}).read()
except OSError as e:
    print(type(e).__name__)
`,
  )
  assert.equal(result.exitCode, 0, result.output)
  assert.deepEqual(refusals, [
    { denied: 'read', path: artifacts },
    { denied: 'read', path: `${artifacts}/secret.json` },
  ])
  // Both name one hidden directory: one line.
  assert.deepEqual(noticeLines(result.output), [`[sandbox: ${artifacts} is hidden from this kernel; the host can show it by leaving it out of sandbox.hidden]`])
  assert.match(result.output, /\[\]\nFileNotFoundError\n/)
})

test('with network: false, a connection or a name lookup off the machine is stated; loopback is not', async (t) => {
  const kernel = await startKernel({ sandbox: { network: false } })
  t.after(() => kernel.shutdown())
  if (!kernel.isolation.enforced.includes('network-namespace')) return t.skip('no network namespace here')
  // 10.255.255.1 has no route in the kernel's namespace: nothing leaves the machine.
  const { result, refusals } = await evaluate(
    kernel,
    `
import socket
for address in (('10.255.255.1', 443), ('127.0.0.1', 9)):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(address)
    except OSError as e:
        print(address[0], type(e).__name__)
    finally:
        s.close()
for name in ('pypi.org', 'localhost'):
    try:
        socket.getaddrinfo(name, 443)
    except OSError as e:
        print(name, type(e).__name__)
`,
  )
  assert.equal(result.exitCode, 0, result.output)
  assert.deepEqual(refusals, [
    { denied: 'connect', host: '10.255.255.1:443' },
    { denied: 'connect', host: 'pypi.org:443' },
  ])
  assert.deepEqual(noticeLines(result.output), [
    '[sandbox: the connection to 10.255.255.1:443 was refused; this kernel has no network (loopback only): the host can allow it with sandbox.network]',
    '[sandbox: the connection to pypi.org:443 was refused; this kernel has no network (loopback only): the host can allow it with sandbox.network]',
  ])
})

test("sandbox: 'off' states nothing: a refused write raises, and no event comes", async (t) => {
  const { cwd, outside } = dirs(t)
  // A sysfs attribute of mode 0444 refuses writing to root too.
  const cell = `
import os, sys
sys.audit('open', ${py(outside + '/audited')}, 'w', os.O_WRONLY | os.O_CREAT)
try:
    open('/sys/devices/system/cpu/possible', 'w')
except OSError as e:
    print(type(e).__name__)
open('/sys/devices/system/cpu/possible', 'w')
`
  const off = await startKernel({ cwd, sandbox: 'off' })
  t.after(() => off.shutdown())
  const { result, refusals, streamed } = await evaluate(off, cell)
  assert.equal(result.exitCode, 1)
  assert.match(result.output, /^PermissionError\n/m)
  assert.deepEqual(refusals, [])
  assert.deepEqual(streamed.filter((e) => e.type === 'status'), [])
  assert.deepEqual(noticeLines(result.output), [])
  // The same cell in a confined kernel is stated: the silence above is the hook's absence.
  const on = await confined(t, cwd)
  const confinedRun = await evaluate(on, cell)
  assert.deepEqual(confinedRun.refusals, [
    { denied: 'write', path: `${outside}/audited` },
    { denied: 'write', path: '/sys/devices/system/cpu/possible' },
  ])
})
