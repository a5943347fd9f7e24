'use strict'
// sandbox.network = { allow: [...] }, attacked. A server of the host's on localhost stands
// for the outside world (this machine sends nothing further): the kernel fetches from it
// through the host's proxy by the name on the list, and is refused (a 403 and a status
// event) for the same server named by its address, for a name that is not on the list and
// for a port the entry does not give; a raw TCP connection has no route at all, to the
// outside or to the host's loopback. `%pip install` works with the index on the list.
// As root and as an ordinary user (`useradd`); on a machine that refuses user namespaces
// the list is refused (ERR_SANDBOX), never silently open. `egress-zygote.test.js` runs
// it again with every kernel forked.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { isRoot, sharedDir, runEdgeHost, attackModes, startedRun } = require('../helpers/hosts')
const { writeWheel, packageIndex } = require('../helpers/wheel')
const { userVenv } = require('../helpers/venvs')

const zygote = process.env.PYKERNEL_TEST_ZYGOTE === '1'

/** Fetches `urls` with urllib (which takes its proxy from the environment, as requests
 *  and pip do) and opens raw TCP connections to `raw`; prints what each got. */
const fetchCell = (urls, raw) => `
import errno, json, os, socket, urllib.error, urllib.request
out = {'proxy': os.environ.get('HTTPS_PROXY'), 'no_proxy': os.environ.get('NO_PROXY'), 'fetched': {}, 'raw': {}}
for url in ${JSON.stringify(urls)}:
    try:
        out['fetched'][url] = urllib.request.urlopen(url, timeout=20).read().decode()
    except urllib.error.HTTPError as e:
        out['fetched'][url] = '%d %s' % (e.code, e.read().decode().strip())
    except OSError as e:
        out['fetched'][url] = str(e)
for host, port in ${JSON.stringify(raw)}:
    try:
        socket.create_connection((host, port), timeout=5).close()
        out['raw']['%s:%d' % (host, port)] = 'connected'
    except OSError as e:
        out['raw']['%s:%d' % (host, port)] = errno.errorcode.get(e.errno, str(e))
print(json.dumps(out))
`

const MODES = attackModes()

for (const mode of MODES) {
  const skip = mode.needsUser && !mode.host.user ? 'needs root and useradd: the test user is made with useradd' : false
  test.describe(isRoot ? mode.name : mode.name.replace('root host', `host as uid ${process.getuid()}`), { skip }, () => {
    const namespaces = !mode.host.noUserns
    let index, workspace, result

    test.before(async () => {
      workspace = sharedDir(mode.host.user, 'pykernel-egress-', '/var/tmp')
      index = await packageIndex(writeWheel(workspace))
      const here = `localhost:${index.port}`
      const base = { interpreter: path.join(userVenv(mode.host.user), 'bin', 'python'), cwd: workspace, ...(zygote ? { preload: ['json'] } : {}) }
      const listed = { ...base, sandbox: { network: { allow: [here] } } }
      const runs = [
        {
          name: 'fetch',
          options: listed,
          code: fetchCell(
            [`http://${here}/simple/pk-defaults/`, `http://127.0.0.1:${index.port}/simple/pk-defaults/`, 'https://example.com/', `http://${here}/simple/pk-defaults/`],
            [['10.255.255.1', 443], ['127.0.0.1', index.port]],
          ),
        },
        { name: 'default-ports', options: { ...base, sandbox: { network: { allow: ['localhost'] } } }, code: fetchCell([`http://${here}/simple/pk-defaults/`], []) },
        { name: 'told', options: listed, code: fetchCell(['https://example.com/'], []), evaluate: true },
        {
          name: 'pip',
          options: listed,
          code: `%pip install -q --disable-pip-version-check --target ./site --index-url http://${here}/simple/ pk-defaults\nimport json, os; print(json.dumps({'installed': sorted(os.listdir('site'))}))`,
        },
        { name: 'bad-list', options: { ...base, sandbox: { network: { allow: ['https://pypi.org/simple'] } } }, code: '1' },
      ]
      result = await runEdgeHost(mode.host, runs, { timeoutMs: 180_000 })
      assert.ok(result.report && !result.report.fatal, `the host reported (exit ${result.code ?? result.signal}): ${result.report?.fatal ?? ''} ${result.stderr.slice(-2000)}`)
    })

    test.after(() => {
      index?.server.close()
      for (const dir of [workspace, result?.dir]) if (dir) fs.rmSync(dir, { recursive: true, force: true })
    })

    const entry = (name) => {
      const found = result.report.runs[name]
      assert.ok(found, `run ${name} is in the report`)
      return found
    }
    const run = (name) => {
      const found = entry(name)
      assert.equal(found.startError, undefined, `${name}: the kernel started`)
      return found
    }

    test('an entry that is not a host name is refused before anything starts', () => {
      assert.match(entry('bad-list').startError, /^ERR_INVALID_ARG: .*sandbox\.network\.allow.*"https:\/\/pypi\.org\/simple": a URL, not a host/)
    })

    if (!namespaces) {
      test('without user namespaces an allow list is refused, never silently open', () => {
        for (const name of ['fetch', 'default-ports', 'pip']) {
          assert.match(entry(name).startError, /^ERR_SANDBOX: cannot sandbox the kernel: sandbox\.network = \{ allow \} cannot be enforced on this machine: it needs user namespaces/, name)
        }
      })
      return
    }

    test('the listed host is reached through the proxy, by its name, and nothing else is', () => {
      const { verdict, isolation, startMode } = run('fetch')
      assert.equal(startMode, zygote ? 'zygote' : 'spawn')
      assert.ok(isolation.enforced.includes('network-allow-list'), isolation.enforced.join(' '))
      assert.equal(verdict.proxy, 'http://127.0.0.1:3128')
      assert.equal(verdict.no_proxy, null, 'the host\'s exceptions do not send requests around the proxy')
      const [byName, byAddress, other] = Object.keys(verdict.fetched)
      assert.match(verdict.fetched[byName], /pk_defaults-1\.0-py3-none-any\.whl/)
      assert.match(verdict.fetched[byAddress], new RegExp(`^403 pykernel sandbox: 127\\.0\\.0\\.1:${index.port} is not on this kernel's network allow list \\(localhost:${index.port}\\); the host can add it to sandbox\\.network\\.allow$`))
      // HTTPS asks for a tunnel (CONNECT), which the proxy refuses before any byte of TLS.
      assert.equal(verdict.fetched[other], '<urlopen error Tunnel connection failed: 403 Forbidden>')
      // No route out, and the host's loopback is not the kernel's.
      assert.equal(verdict.raw['10.255.255.1:443'], 'ENETUNREACH')
      assert.equal(verdict.raw[`127.0.0.1:${index.port}`], 'ECONNREFUSED')
    })

    test('each refused host is a status event of the cell, once, and a line of its agent text', () => {
      const hosts = run('fetch').statuses.filter((s) => s.op === 'sandbox').map((s) => s.data)
      assert.deepEqual(hosts, [
        // Refused by the proxy, as they came,
        { denied: 'connect', host: `127.0.0.1:${index.port}` },
        { denied: 'connect', host: 'example.com:443' },
        // and the raw connection off the machine, by the kernel's own account (its own
        // loopback, where nothing listened, is no refusal).
        { denied: 'connect', host: '10.255.255.1:443' },
      ])
      const notices = run('told').output.split('\n').filter((l) => l.startsWith('[sandbox: '))
      assert.deepEqual(notices, [
        '[sandbox: the connection to example.com:443 was refused; this kernel reaches only the hosts of sandbox.network.allow through its HTTP(S) proxy; direct connections have no route: the host can add it to that list]',
      ])
      assert.ok(!index.requests.some((r) => r === '/') , 'nothing reached the index but through the listed name')
    })

    test('an entry without a port admits 80 and 443 only', () => {
      const { verdict } = run('default-ports')
      const [only] = Object.values(verdict.fetched)
      assert.match(only, new RegExp(`^403 pykernel sandbox: localhost:${index.port} is not on this kernel's network allow list \\(localhost\\): its entries for localhost admit ports 80 and 443 only`))
    })

    test('%pip install works with the package index on the list', () => {
      const entry = run('pip')
      assert.equal(entry.status, 'ok', `${entry.error} ${entry.stdout}`)
      assert.ok(entry.verdict.installed.includes('pkdefaults'), JSON.stringify(entry.verdict))
      assert.ok(index.requests.includes('/simple/pk-defaults/'), index.requests.join(' '))
    })
  })
}
