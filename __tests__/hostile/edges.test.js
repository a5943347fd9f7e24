'use strict'
// Hostile cells at the sandbox's edges. Each test is the attack a cell makes on what
// surrounds its kernel (sysctls, devices and cgroups of the machine, the host's terminal,
// socket files, keyring, /dev/shm and /tmp, other sessions' stores, the process limit),
// and asserts it failed, or, where the machine lacks the mechanism, that the kernel says
// so in `isolation.missing`. Every attack runs five ways: the host as root and as an
// ordinary user this file makes (`useradd`), each on a machine that gives user namespaces
// and on one that refuses them (a seccomp filter on the host, as Docker's default profile
// does), and once more from a Bun host; `edges-zygote.test.js` runs it all again with
// every kernel forked.
const test = require('node:test')
const assert = require('node:assert/strict')
const crypto = require('node:crypto')
const dgram = require('node:dgram')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { isRoot, systemPython, sharedDir, runEdgeHost, attackModes, startedRun } = require('../helpers/hosts')

const zygote = process.env.PYKERNEL_TEST_ZYGOTE === '1'
const MARK = crypto.randomBytes(4).toString('hex')
const HOST_KEY = `host-api-token=sk-host-keyring-secret-${MARK}`

// --- The attacks, as cells. Each prints JSON lines: what it tried and what happened. ---

/** Opens for writing (never writes) what would let root code run as the machine's root
 *  (`core_pattern` runs a program of the cell's choosing as real root on the next crash)
 *  or change the machine: sysctls, the kernel log, sysfs knobs, the cgroups it is in. */
const SYSCTL_ATTACK = `
import errno, json, os
def try_open(path):
    try:
        os.close(os.open(path, os.O_WRONLY))
        return 'opened'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
found = {}
for path in ('/proc/sys/kernel/core_pattern', '/proc/sys/vm/drop_caches', '/proc/sys/kernel/hostname',
             '/proc/sysrq-trigger', '/dev/kmsg', '/sys/kernel/mm/transparent_hugepage/enabled',
             '/sys/kernel/uevent_helper'):
    if os.path.lexists(path):
        found[path] = try_open(path)
for line in open('/proc/self/cgroup'):
    _, controllers, where = line.strip().split(':', 2)
    for base in ('/sys/fs/cgroup/' + (controllers.split(',')[0] if controllers else 'unified'), '/sys/fs/cgroup'):
        for name in ('cgroup.procs', 'pids.max', 'memory.max', 'memory.limit_in_bytes'):
            for directory in (base + where, os.path.dirname(base + where)):
                path = os.path.join(directory, name)
                if os.path.exists(path):
                    found[path] = try_open(path)
print(json.dumps({'files': found}))
`

/** Reads its capability sets and tries what a capability gives (sethostname to the name
 *  the machine already has: the attempt alone is the test). */
const CAPS_ATTACK = `
import ctypes, errno, json, socket
status = {k: v.strip() for k, v in (l.split(':', 1) for l in open('/proc/self/status')) if k.startswith(('Cap', 'NoNewPrivs', 'Seccomp'))}
libc = ctypes.CDLL(None, use_errno=True)
name = socket.gethostname().encode()
r = libc.sethostname(name, len(name))
status['sethostname'] = 'done' if r == 0 else errno.errorcode.get(ctypes.get_errno())
print(json.dumps(status))
`

/** Opens the terminal the agent runs in, prints a lie on it and reads what the user types. */
const PTY_ATTACK = `
import errno, json, os, select
target = '@@ENV:TARGET_PTY@@'
out = {'target': target, 'pts': sorted(os.listdir('/dev/pts')) if os.path.isdir('/dev/pts') else None}
try:
    fd = os.open(target, os.O_RDWR | os.O_NOCTTY)
except OSError as e:
    out['open'] = errno.errorcode.get(e.errno)
else:
    out['open'] = 'opened'
    os.write(fd, b'all tests passed, safe to approve\\n')
    ready, _, _ = select.select([fd], [], [], 4)
    out['read'] = os.read(fd, 200).decode('utf-8', 'replace') if ready else ''
print(json.dumps(out))
`

const socketAttack = (paths, tag) => `
import errno, json, socket
out = {}
for path in ${JSON.stringify(paths)}:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError as e:
        out[path] = 'no socket: ' + errno.errorcode.get(e.errno, str(e.errno))
        continue
    try:
        s.connect(path)
        s.sendall(b'GET /containers/json?${tag} HTTP/1.0\\r\\n\\r\\n')
        out[path] = 'connected'
    except OSError as e:
        out[path] = errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()
print(json.dumps({'sockets': out}))
`

/** Changes metadata of a file outside every writable directory: a setuid bit (on a root
 *  host, setuid root on any program), its times, an extended attribute, its owner. */
const metadataAttack = (file) => `
import errno, json, os
target = ${JSON.stringify(file)}
out = {}
for what, act in (('chmod', lambda: os.chmod(target, 0o4777)), ('utime', lambda: os.utime(target, (0, 0))),
                  ('setxattr', lambda: os.setxattr(target, 'user.pykernel', b'planted')),
                  ('chown', lambda: os.chown(target, os.getuid(), os.getgid())),
                  ('write', lambda: open(target, 'a').close())):
    try:
        act()
        out[what] = 'done'
    except OSError as e:
        out[what] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({'metadata': out}))
`

/** Reads the host's API token from the session keyring it shares, plants a key, reads
 *  /proc/keys. */
const KEYRING_ATTACK = `
import ctypes, errno, json, platform
libc = ctypes.CDLL(None, use_errno=True)
add_key, request_key, keyctl = {'x86_64': (248, 249, 250), 'aarch64': (217, 218, 219)}[platform.machine()]
SESSION, KEYCTL_READ, KEYCTL_SEARCH = -3, 11, 10
def err():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
out = {}
serial = libc.syscall(request_key, b'user', b'host-api-token', None, 0)
out['request_key'] = 'found' if serial >= 0 else err()
found = libc.syscall(keyctl, KEYCTL_SEARCH, SESSION, b'user', b'host-api-token', 0)
out['search'] = 'found' if found >= 0 else err()
for key in (serial, found):
    if key >= 0:
        buf = ctypes.create_string_buffer(256)
        n = libc.syscall(keyctl, KEYCTL_READ, key, buf, 256)
        out['read'] = buf.raw[:n].decode() if n >= 0 else err()
data = b'planted'
r = libc.syscall(add_key, b'user', b'planted-by-cell', data, len(data), SESSION)
out['add_key'] = 'added' if r >= 0 else err()
try:
    out['proc_keys'] = open('/proc/keys').read()
except OSError as e:
    out['proc_keys'] = errno.errorcode.get(e.errno)
print(json.dumps(out))
`

/** What seccomp refuses: a user namespace of its own (every capability over what it would
 *  make), ptrace, io_uring, bpf, perf events, userfaultfd, a mount; and what it keeps. */
const SYSCALL_ATTACK = `
import ctypes, errno, json, os, platform, socket
libc = ctypes.CDLL(None, use_errno=True)
nr = {'x86_64': {'bpf': 321, 'perf_event_open': 298, 'userfaultfd': 323, 'io_uring_setup': 425, 'clone3': 435},
      'aarch64': {'bpf': 280, 'perf_event_open': 241, 'userfaultfd': 282, 'io_uring_setup': 425, 'clone3': 435}}[platform.machine()]
def outcome(r):
    return 'done' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
out = {}
out['unshare(user)'] = outcome(libc.unshare(0x10000000))
out['ptrace(traceme)'] = outcome(libc.ptrace(0, 0, None, None))
params = ctypes.create_string_buffer(120)
out['io_uring_setup'] = outcome(libc.syscall(nr['io_uring_setup'], 8, params))
out['bpf'] = outcome(libc.syscall(nr['bpf'], 0, None, 0))
out['perf_event_open'] = outcome(libc.syscall(nr['perf_event_open'], None, 0, -1, -1, 0))
out['userfaultfd'] = outcome(libc.syscall(nr['userfaultfd'], 0))
out['clone3'] = outcome(libc.syscall(nr['clone3'], None, 0))
out['mount'] = outcome(libc.mount(b'tmpfs', b'/tmp', b'tmpfs', 0, None))
# Kept: a child process, a thread's unshare of its file table, a socketpair.
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
out['fork'] = 'done'
out['unshare(files)'] = outcome(libc.unshare(0x400))
socket.socketpair()
out['socketpair'] = 'done'
print(json.dumps({'calls': out}))
`

/** Fills /dev/shm past the kernel's memory limit and leaves a FIFO there. */
const SHM_ATTACK = `
import errno, json, os
out = {}
written = 0
try:
    with open('/dev/shm/pykernel-edge-${MARK}', 'wb') as f:
        chunk = b'\\1' * (1 << 20)
        while written < (320 << 20):
            f.write(chunk)
            f.flush()
            written += len(chunk)
except OSError as e:
    out['error'] = errno.errorcode.get(e.errno)
out['written_mib'] = written >> 20
try:
    os.mkfifo('/dev/shm/pykernel-fifo-${MARK}')
    out['fifo'] = 'made'
except OSError as e:
    out['fifo'] = errno.errorcode.get(e.errno)
print(json.dumps(out))
`

const tmpAttack = (hostFile) => `
import json, os, tempfile
tmp = os.environ.get('TMPDIR', '')
out = {'TMPDIR': tmp, 'gettempdir': tempfile.gettempdir()}
out['mode'] = oct(os.stat(tempfile.gettempdir()).st_mode & 0o777)
out['host_file_visible'] = os.path.exists(${JSON.stringify(hostFile)})
print(json.dumps(out))
`

/** Puts a symlink to a directory of the host's where its TMPDIR was (a kernel without a
 *  view can rename it: /tmp is writable), for the host's removal of it to follow. */
const tmpSwapAttack = (victim) => `
import errno, json, os
tmp = os.environ['TMPDIR']
out = {}
try:
    os.rename(tmp, tmp + '-moved')
    os.symlink(${JSON.stringify(victim)}, tmp)
    out['swapped'] = 'done'
except OSError as e:
    out['swapped'] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
`

/** Uses kv with nothing writable, then goes for another session's store directly. */
const kvAttack = (artifacts) => `
import errno, glob, json, os
out = {}
try:
    kv.set('mine', 41)
    out['kv'] = kv.get('mine')
except Exception as e:
    out['kv'] = '%s: %s' % (type(e).__name__, e)
stores = glob.glob(os.path.join(${JSON.stringify(artifacts)}, '**', '*.json'), recursive=True)
out['stores_seen'] = len(stores)
for store in stores:
    for mode in ('r', 'r+'):
        try:
            open(store, mode).close()
            out.setdefault('opened', []).append(mode)
        except OSError as e:
            out.setdefault('refused', []).append(errno.errorcode.get(e.errno))
# The host-answered call itself, with keys that would leave the store and an unknown op.
for args in ({'op': 'set', 'key': '../../escape', 'value': 1}, {'op': 'set', 'key': 'a/b', 'value': 1}, {'op': 'chmod', 'key': 'k'}):
    try:
        answer = __pykernel__.bridge_call('__pykernel.kv', args)
        out.setdefault('raw', []).append('refused' if isinstance(answer, dict) and 'refused' in answer else 'accepted')
    except RuntimeError:
        out.setdefault('raw', []).append('refused')
print(json.dumps(out))
`

/** Lifts its own pids cgroup's limit, moves its children out of the cgroup, then runs
 *  21 processes under maxProcesses 8. */
const PIDS_ATTACK = `
import errno, json, os, subprocess, sys
out = {}
cgroup = None
for line in open('/proc/self/cgroup'):
    _, controllers, where = line.strip().split(':', 2)
    if 'pids' in controllers.split(','):
        cgroup = '/sys/fs/cgroup/pids' + where
out['cgroup'] = cgroup
def write(path, text):
    try:
        with open(path, 'w') as f:
            f.write(text)
        return 'written'
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
if cgroup:
    out['pids.max'] = write(cgroup + '/pids.max', 'max')
print(json.dumps(out), flush=True)
moved = []
children = []
for _ in range(21):
    child = subprocess.Popen(['sleep', '30'])
    children.append(child)
    if cgroup:
        moved.append(write(os.path.dirname(cgroup) + '/cgroup.procs', str(child.pid)))
print(json.dumps({'moved': moved, 'running': len(children)}), flush=True)
import time
time.sleep(3)
print(json.dumps({'survived': True}), flush=True)
`

const udpAttack = (port) => `
import errno, json, socket
out = {}
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b'exfiltrated', ('127.0.0.1', ${port}))
    out['udp'] = 'sent'
except OSError as e:
    out['udp'] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
`

// --- The hosts ---------------------------------------------------------------------

const BUN = path.resolve(__dirname, '..', '..', 'node_modules', '.bin', 'bun')
const MODES = attackModes([{ name: 'root host under Bun', host: {}, runtime: BUN }])

/** A unix socket server standing for a host service (docker.sock, an ssh agent): it
 *  records every connection. */
async function socketServer(file) {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o755 })
  fs.rmSync(file, { force: true })
  const server = net.createServer((c) => {
    let said = ''
    c.on('data', (d) => (said += d))
    c.on('close', () => server.connections.push(`${file}: ${said}`))
    c.on('error', () => {})
  })
  server.connections = []
  await new Promise((resolve) => server.listen(file, resolve))
  fs.chmodSync(file, 0o777)
  return server
}

for (const mode of MODES) {
  // Not as root, the host runs as whoever runs the tests, and no other user can be made.
  const skip = mode.needsUser && !mode.host.user ? 'needs root and useradd: the test user is made with useradd' : false
  test.describe(isRoot ? mode.name : mode.name.replace('root host', `host as uid ${process.getuid()}`), { skip }, () => {
    const namespaces = !mode.host.noUserns
    let result
    let servers = []
    let udp
    let udpReceived = []
    let outside
    let hostTmpFile
    let artifacts
    let victim
    const socketFiles = []

    test.before(async () => {
      const owner = mode.host.user
      // Socket files where host services keep them: /tmp, a directory elsewhere (a home,
      // ~/.ssh/cm-*, a project), /run (root).
      socketFiles.push(path.join(os.tmpdir(), `pykernel-edge-${MARK}`, 'service.sock'))
      socketFiles.push(path.join('/var/tmp', `pykernel-edge-${MARK}`, 'agent.sock'))
      if (isRoot) socketFiles.push(`/run/pykernel-edge-${MARK}.sock`)
      servers = await Promise.all(socketFiles.map(socketServer))
      udp = dgram.createSocket('udp4')
      udp.on('message', (m) => udpReceived.push(String(m)))
      await new Promise((resolve) => udp.bind(0, '127.0.0.1', resolve))
      // Outside /tmp, as a program or a store in a home or a project would be: the
      // kernel's view shows it where it is (of the host's /tmp it sees only its own part),
      // so what keeps the attacks out is the protection under test, not the private /tmp.
      outside = sharedDir(owner, 'pykernel-edge-outside-', '/var/tmp')
      const target = path.join(outside, 'program')
      fs.writeFileSync(target, '#!/bin/sh\n')
      fs.chmodSync(target, 0o755)
      if (owner) fs.chownSync(target, owner.uid, owner.gid)
      hostTmpFile = path.join(os.tmpdir(), `pykernel-edge-host-file-${MARK}`)
      fs.writeFileSync(hostTmpFile, 'the host\'s')
      artifacts = sharedDir(owner, 'pykernel-edge-artifacts-', '/var/tmp')
      victim = sharedDir(owner, 'pykernel-edge-victim-', '/var/tmp')
      fs.writeFileSync(path.join(victim, 'keep'), 'the host\'s')
      fs.chmodSync(artifacts, 0o700)
      const base = { interpreter: systemPython(), ...(zygote ? { preload: ['json'] } : {}) }
      const runs = [
        { name: 'sysctl', options: base, code: SYSCTL_ATTACK },
        { name: 'caps', options: base, code: CAPS_ATTACK },
        { name: 'pty', options: base, code: PTY_ATTACK },
        { name: 'sockets', options: base, code: socketAttack(socketFiles, 'default') },
        { name: 'sockets-offline', options: { ...base, sandbox: { network: false } }, code: socketAttack(socketFiles, 'offline') },
        { name: 'metadata', options: { ...base, sandbox: { writable: [] } }, code: metadataAttack(target) },
        { name: 'keyring', options: base, code: KEYRING_ATTACK },
        { name: 'syscalls', options: base, code: SYSCALL_ATTACK },
        { name: 'shm', options: { ...base, memoryLimitBytes: 256 * 1024 * 1024 }, code: SHM_ATTACK },
        { name: 'tmp', options: base, code: tmpAttack(hostTmpFile) },
        { name: 'kv-victim', options: { ...base, artifactsDir: artifacts, sessionId: 'victim' }, code: 'kv.set("secret", "victim-value")' },
        { name: 'kv', options: { ...base, artifactsDir: artifacts, sessionId: 'attacker', sandbox: { writable: [] } }, code: kvAttack(artifacts) },
        { name: 'kv-default', options: { ...base, artifactsDir: artifacts, sessionId: 'attacker2' }, code: kvAttack(artifacts) },
        { name: 'pids', options: { ...base, maxProcesses: 8 }, code: PIDS_ATTACK },
        { name: 'tmp-swap', options: base, code: tmpSwapAttack(victim) },
        { name: 'udp-offline', options: { ...base, sandbox: { network: false } }, code: udpAttack(udp.address().port) },
        { name: 'exit', options: base, code: 'import os; open(os.path.join(os.environ["TMPDIR"], "left"), "w").write("x")', exit: true },
      ]
      // The pool's process limit is not forked from a zygote (a kernel with maxProcesses is spawned).
      result = await runEdgeHost({ ...mode.host, key: HOST_KEY, pty: true }, runs, mode.runtime ? { runtime: mode.runtime } : {})
      assert.ok(result.report && !result.report.fatal, `the host reported (exit ${result.code ?? result.signal}): ${result.report?.fatal ?? ''} ${result.stderr.slice(-2000)}`)
    })

    test.after(async () => {
      for (const server of servers) server.close()
      udp?.close()
      for (const file of socketFiles) fs.rmSync(path.dirname(file).includes(MARK) ? path.dirname(file) : file, { recursive: true, force: true })
      for (const name of fs.readdirSync('/dev/shm')) if (name.includes(MARK)) fs.rmSync(path.join('/dev/shm', name), { force: true })
      fs.rmSync(hostTmpFile, { force: true })
      for (const dir of [outside, artifacts, victim, result?.dir]) if (dir) fs.rmSync(dir, { recursive: true, force: true })
      for (const name of fs.readdirSync(os.tmpdir())) if (name.startsWith(`pykernel-tmp-${result?.report?.pid}-`)) fs.rmSync(path.join(os.tmpdir(), name), { recursive: true, force: true })
    })

    const run = (name) => startedRun(result, name)
    const missing = (name) => run(name).isolation.missing.join('\n')

    test('every kernel started the way this run tests', () => {
      for (const [name, entry] of Object.entries(result.report.runs)) {
        assert.equal(entry.startError, undefined, `${name}: ${entry.startError}`)
        const want = zygote && name !== 'pids' ? 'zygote' : 'spawn'
        assert.equal(entry.startMode, want, `${name} started as ${entry.startMode}: ${result.stderr.slice(-1500)}`)
        assert.equal(entry.isolation.mode, namespaces ? 'namespaces+landlock' : 'landlock', name)
      }
      assert.equal(result.report.uid, mode.host.user ? mode.host.user.uid : process.getuid())
    })

    test('no sysctl, kernel log, sysfs knob or cgroup file can be opened for writing (core_pattern runs code as real root)', () => {
      const { verdict } = run('sysctl')
      assert.ok(Object.keys(verdict.files ?? {}).length >= 4, JSON.stringify(verdict))
      for (const [file, outcome] of Object.entries(verdict.files)) assert.notEqual(outcome, 'opened', `${file} is writable from a cell`)
    })

    test('the kernel holds no capability, in any set, and cannot use one', () => {
      const { verdict } = run('caps')
      for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapAmb']) assert.equal(verdict[set], '0000000000000000', `${set}: ${JSON.stringify(verdict)}`)
      // Only a process with CAP_SETPCAP can empty its bounding set: a host that is not
      // root has none without a user namespace, and its kernel can gain nothing from the
      // set anyway (no_new_privs).
      if (namespaces || !mode.host.user) assert.equal(verdict.CapBnd, '0000000000000000', JSON.stringify(verdict))
      else assert.match(missing('caps'), /bounding set/)
      assert.equal(verdict.NoNewPrivs, '1')
      assert.notEqual(verdict.Seccomp, '0', 'a seccomp filter is in force')
      assert.equal(verdict.sethostname, 'EPERM')
    })

    test('the host\'s terminal can be neither written nor read', () => {
      const { verdict } = run('pty')
      assert.match(verdict.target, /^\/dev\/pts\/\d+$/, 'the launcher made a terminal')
      assert.notEqual(verdict.open, 'opened', JSON.stringify(verdict))
      assert.doesNotMatch(result.launcher.pty, /safe to approve/, 'nothing the cell wrote reached the terminal')
      assert.doesNotMatch(verdict.read ?? '', /hunter2/)
    })

    test('socket files of host services cannot be reached, by default and with network: false', () => {
      for (const name of namespaces ? ['sockets', 'sockets-offline'] : ['sockets-offline']) {
        const { verdict } = run(name)
        for (const [file, outcome] of Object.entries(verdict.sockets)) assert.notEqual(outcome, 'connected', `${name}: ${file}`)
      }
      const seen = servers.flatMap((s) => s.connections)
      if (namespaces) {
        assert.deepEqual(seen, [], 'no host service saw a connection')
      } else {
        // Without a view of its own, only network: false keeps them out, and the kernel
        // says so.
        assert.match(missing('sockets'), /socket files/)
        assert.deepEqual(seen.filter((c) => c.includes('offline')), [], 'no host service saw a connection from an offline kernel')
      }
    })

    test('metadata outside the writable directories cannot be changed (setuid bit, times, xattrs, owner)', () => {
      const target = path.join(outside, 'program')
      if (!namespaces) {
        assert.match(missing('metadata'), /metadata/, 'the kernel says metadata is not confined')
        return
      }
      const { verdict } = run('metadata')
      for (const [what, outcome] of Object.entries(verdict.metadata)) assert.notEqual(outcome, 'done', `${what}: ${JSON.stringify(verdict)}`)
      const st = fs.statSync(target)
      assert.equal(st.mode & 0o7777, 0o755, 'the mode is unchanged')
      assert.ok(st.mtimeMs > 0, 'the mtime is unchanged')
    })

    test('seccomp refuses a user namespace of its own, ptrace, io_uring, bpf, perf events, userfaultfd and mounts, and keeps fork and socketpair', () => {
      const { calls } = run('syscalls').verdict
      assert.ok(calls, JSON.stringify(run('syscalls')))
      for (const call of ['unshare(user)', 'ptrace(traceme)', 'bpf', 'perf_event_open', 'userfaultfd', 'mount']) assert.equal(calls[call], 'EPERM', `${call}: ${JSON.stringify(calls)}`)
      for (const call of ['io_uring_setup', 'clone3']) assert.equal(calls[call], 'ENOSYS', `${call}: ${JSON.stringify(calls)}`)
      assert.equal(calls.fork, 'done')
      assert.equal(calls['unshare(files)'], 'done')
      assert.equal(calls.socketpair, 'done')
    })

    test('the host\'s keyring is out of reach: its token unread, nothing planted, /proc/keys empty', () => {
      const { verdict } = run('keyring')
      assert.notEqual(verdict.request_key, 'found', JSON.stringify(verdict))
      assert.notEqual(verdict.search, 'found', JSON.stringify(verdict))
      assert.equal(verdict.read, undefined)
      assert.notEqual(verdict.add_key, 'added')
      if (namespaces) assert.doesNotMatch(String(verdict.proc_keys), /host-api-token/)
      else assert.match(missing('keyring'), /\/proc\/keys/)
      const keys = result.launcher.keys.join('\n')
      assert.match(keys, /host-api-token/, 'the host still has its key')
      assert.doesNotMatch(keys, /planted-by-cell/)
    })

    test('/dev/shm is the kernel\'s own, bounded by its memory limit, and gone after shutdown', () => {
      const entry = run('shm')
      if (!namespaces) {
        assert.match(missing('shm'), /\/dev\/shm/)
        return
      }
      assert.equal(entry.verdict.error, 'ENOSPC', JSON.stringify(entry.verdict))
      assert.ok(entry.verdict.written_mib <= 256, `${entry.verdict.written_mib} MiB written under a 256 MiB limit`)
      assert.equal(entry.verdict.fifo, 'made', 'its own /dev/shm works')
      assert.deepEqual(fs.readdirSync('/dev/shm').filter((n) => n.includes(MARK)), [], 'nothing reached the host\'s /dev/shm')
    })

    test('TMPDIR is private (0700), /tmp shows nothing of the host, and both are gone after shutdown and after the host exits', () => {
      const entry = run('tmp')
      assert.equal(entry.verdict.mode, '0o700', JSON.stringify(entry.verdict))
      assert.equal(entry.privateTmp.length, 1, JSON.stringify(entry.privateTmp))
      assert.equal(entry.privateTmp[0].mode, '700')
      assert.deepEqual(entry.privateTmpAfter, [], 'removed at shutdown')
      if (namespaces) assert.equal(entry.verdict.host_file_visible, false, 'the host\'s /tmp is not the kernel\'s')
      else assert.match(entry.isolation.missing.join('\n'), /\/tmp/)
      // (Not what the swap attack below moved aside: without a view, /tmp is the cell's to
      // write, and what it renames there is its own.)
      const left = fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith(`pykernel-tmp-${result.report.pid}-`) && !n.endsWith('-moved'))
      assert.deepEqual(left, [], 'nothing left after the host exited with a kernel running')
    })

    test('kv works with nothing writable, and no session reaches another session\'s store', () => {
      for (const name of ['kv', 'kv-default']) {
        const { verdict } = run(name)
        assert.equal(verdict.kv, 41, `${name}: ${JSON.stringify(verdict)}`)
        assert.deepEqual(verdict.raw, ['refused', 'refused', 'refused'], `${name}: ${JSON.stringify(verdict)}`)
        if (namespaces) {
          assert.equal(verdict.stores_seen, 0, `${name}: ${JSON.stringify(verdict)}`)
          assert.equal(verdict.opened, undefined, `${name}: ${JSON.stringify(verdict)}`)
        } else {
          // Without a view of its own the store's directory stays readable (and, with
          // writes anywhere, writable): the kernel says so.
          assert.match(missing(name), /artifactsDir/)
          if (name === 'kv') assert.ok(!(verdict.opened ?? []).includes('r+'), JSON.stringify(verdict))
        }
      }
    })

    test('a TMPDIR swapped for a symlink is not followed when the host removes it', () => {
      const { verdict } = run('tmp-swap')
      // With a view the kernel's /tmp is a mount point it cannot move.
      if (namespaces) assert.notEqual(verdict.swapped, 'done', JSON.stringify(verdict))
      assert.ok(fs.existsSync(path.join(victim, 'keep')), 'the host\'s directory behind the link is untouched')
    })

    test('maxProcesses holds: the cgroup cannot be lifted or left, and the kernel is killed past the limit', () => {
      const entry = run('pids')
      assert.equal(entry.status, 'error', JSON.stringify(entry))
      assert.match(entry.error ?? '', /more than 8 processes/, JSON.stringify(entry))
      assert.notEqual(entry.verdict['pids.max'], 'written', JSON.stringify(entry.verdict))
      assert.ok(!(entry.verdict.moved ?? []).includes('written'), JSON.stringify(entry.verdict))
      assert.equal(entry.verdict.survived, undefined)
    })

    test('network: false sends no UDP to the host', () => {
      const { verdict } = run('udp-offline')
      assert.ok(verdict.udp, JSON.stringify(verdict))
      assert.deepEqual(udpReceived, [], 'the host received nothing')
    })
  })
}

test('a Bun host that exits with a kernel running leaves no private TMPDIR behind either', async () => {
  const bun = BUN
  const base = { interpreter: systemPython(), ...(zygote ? { preload: ['json'] } : {}) }
  const runs = [{ name: 'exit', options: base, code: 'import os; open(os.path.join(os.environ["TMPDIR"], "left"), "w").write("x")', exit: true }]
  const result = await runEdgeHost({}, runs, { runtime: bun })
  fs.rmSync(result.dir, { recursive: true, force: true })
  assert.ok(result.report && !result.report.fatal, `the Bun host reported (exit ${result.code ?? result.signal}): ${result.stderr.slice(-1500)}`)
  const entry = result.report.runs.exit
  assert.equal(entry.status, 'ok', JSON.stringify(entry))
  assert.equal(entry.privateTmp.length, 1, 'the kernel had its directory while it ran')
  assert.deepEqual(fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith(`pykernel-tmp-${result.report.pid}-`)), [])
})
