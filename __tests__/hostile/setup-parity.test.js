'use strict'
// A kernel's confinement is set up twice: by the host between fork and exec for a spawned
// kernel (src/sandbox/namespaces.rs and the steps it runs), and by the zygote's child in
// Python for a forked one (runner/pykernel_runner/zygote.py). This pins the two together:
// for each sandbox setting, the spawned kernel and the forked one must find themselves in
// the same state (credentials, capabilities, no_new_privs, seccomp, the namespaces they do
// not share with the host, their user and group maps, the mounts of their view, their
// place in their PID namespace), as root and as an ordinary user, with and without user
// namespaces. A step one side takes and the other forgets shows up here as a difference.
// Mounts are compared as a cell sees them, the top one at each mount point: a forked
// kernel's view is built on the zygote's, so mounts of the zygote's lie beneath it.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { isRoot, testUser, systemPython, runEdgeHost } = require('../helpers/hosts')

// The host's own namespaces: the cell reports which of its own differ from these.
const HOST_NAMESPACES = Object.fromEntries(fs.readdirSync('/proc/self/ns').map((n) => [n, fs.readlinkSync(`/proc/self/ns/${n}`)]))

const STATE_CELL = `
import json, os
def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return type(e).__name__
status = {}
for line in read('/proc/self/status').splitlines():
    key, _, value = line.partition(':')
    if key in ('Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb',
               'NoNewPrivs', 'Seccomp', 'Seccomp_filters'):
        status[key] = ' '.join(value.split())
host = json.loads('@@HOST_NS@@')
own = sorted(n for n in os.listdir('/proc/self/ns')
             if n in host and os.readlink('/proc/self/ns/' + n) != host[n])
# What the cell sees at each mount point: the mount on top there (one that no other mount
# at the same point is stacked on), by where, which file system and how it is mounted.
entries = []
for line in read('/proc/self/mountinfo').splitlines():
    fields = line.split()
    entries.append((fields[0], fields[1], fields[4], fields[fields.index('-') + 1], fields[5]))
covered = {(parent, point) for _, parent, point, _, _ in entries}
# A mask over one of the host's socket files depends on which sockets the host had when
# the kernel started (other tests make and remove theirs): those are left out.
def socket_mask(point, fstype):
    return fstype == 'devtmpfs' and not point.startswith(('/dev', '/proc'))
# Each kernel has a session directory of its own (its caches): compared by what it is.
import re
def session_free(point):
    return re.sub(r'pykernel-session-\\d+-\\w+', 'pykernel-session-*', point)
mounts = [' '.join((session_free(point), fstype, options)) for mid, _, point, fstype, options in entries
          if (mid, point) not in covered and not socket_mask(point, fstype)]
print(json.dumps({'state': {
    'status': status,
    'namespaces': own,
    'uid_map': ' '.join(read('/proc/self/uid_map').split()),
    'gid_map': ' '.join(read('/proc/self/gid_map').split()),
    'setgroups': read('/proc/self/setgroups').strip(),
    'mounts': sorted(mounts),
    'pid': os.getpid() if 'pid' in own else 'host',
    'ppid_is_init': os.getppid() == 1 if 'pid' in own else 'host',
    'cwd_writable': os.access(os.getcwd(), os.W_OK),
    'umask': os.umask(0o22),
}}))
`

const SETTINGS = [
  { name: 'default', sandbox: undefined },
  { name: 'offline', sandbox: { network: false } },
  { name: 'nothing writable', sandbox: { writable: [] } },
]

const user = isRoot ? testUser() : null
const HOSTS = [
  { name: 'root host', host: {} },
  { name: 'root host, no user namespaces', host: { noUserns: true } },
  { name: 'ordinary user', host: { user }, needsUser: true },
  { name: 'ordinary user, no user namespaces', host: { user, noUserns: true }, needsUser: true },
]

for (const { name, host, needsUser } of HOSTS) {
  const skip = needsUser && !user ? 'needs root and useradd: the test user is made with useradd' : false
  test(`${isRoot ? name : name.replace('root host', `host as uid ${process.getuid()}`)}: a forked kernel is confined exactly as a spawned one`, { skip }, async () => {
    const code = STATE_CELL.replace('@@HOST_NS@@', JSON.stringify(HOST_NAMESPACES))
    const runs = SETTINGS.flatMap(({ name: setting, sandbox }) =>
      [
        ['spawned', { zygote: false }],
        ['forked', {}],
      ].map(([how, extra]) => ({
        name: `${setting}/${how}`,
        // `preload` on both, so the two differ only in how the process was made.
        options: { interpreter: systemPython(), preload: ['json'], ...(sandbox ? { sandbox } : {}), ...extra },
        code,
      })),
    )
    const result = await runEdgeHost(host, runs)
    try {
      assert.ok(result.report && !result.report.fatal, `the host reported (exit ${result.code ?? result.signal}): ${result.report?.fatal ?? ''} ${result.stderr.slice(-2000)}`)
      for (const { name: setting } of SETTINGS) {
        const spawned = result.report.runs[`${setting}/spawned`]
        const forked = result.report.runs[`${setting}/forked`]
        for (const [how, entry, mode] of [['spawned', spawned, 'spawn'], ['forked', forked, 'zygote']]) {
          assert.equal(entry.startError, undefined, `${setting}/${how}: ${entry.startError}`)
          assert.equal(entry.startMode, mode, `${setting}/${how} started as it should`)
          assert.ok(entry.verdict.state, `${setting}/${how} reported its state: ${entry.stdout} ${entry.error}`)
        }
        assert.deepEqual(forked.verdict.state, spawned.verdict.state, `${setting}: the forked kernel's state is the spawned one's`)
        assert.deepEqual(forked.isolation, spawned.isolation, `${setting}: both say the same of their isolation`)
      }
    } finally {
      if (result.dir) fs.rmSync(result.dir, { recursive: true, force: true })
    }
  })
}
