'use strict'
// A launched kernel that outlives its link (`reattach: { graceMs }`): through a real ssh to
// a throwaway sshd on 127.0.0.1, the ssh client is killed mid-cell and mid-bridge-call and
// the host brings a new link, the cell's output whole and in order; no new link within the
// grace ends the kernel and the cell says so; and a cell that goes for the far side's attach
// socket with a forged or an already used token is refused (far side as root and as an
// ordinary user), while the host's own next link is still taken.
const { test, describe, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { Kernel } = require('../..')
const launchers = require('../helpers/launchers')
const { isAlive, waitFor } = require('../helpers/kernel')

const python = process.env.PYKERNEL_TEST_PYTHON || 'python3'
const RECORDER = path.join(__dirname, '..', 'helpers', 'link-recorder.py')
/** A word of the attach bootstrap (start/launcher.rs), which names a later link's process. */
const ATTACH_WORD = 'AF_UNIX'

/** When `pid` started, in clock ticks since boot (0 once it is gone). */
function startedAt(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19])
  } catch {
    return 0
  }
}

function comm(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
  } catch {
    return ''
  }
}

/** The ssh client carrying `kernel`'s link now: the newest one running the attach
 *  bootstrap, else the launcher the kernel started with. */
function currentSshClient(kernel, known = new Set()) {
  const attaches = launchers
    .hostPidsOfCommandLine(ATTACH_WORD)
    .filter((pid) => comm(pid) === 'ssh' && !known.has(pid))
    .sort((a, b) => startedAt(b) - startedAt(a))
  return attaches[0] ?? kernel.pid
}

/** The plain launcher (no ControlMaster: the link is the ssh client's own connection, so
 *  killing the client drops it at once). */
function plainLauncher(sshd) {
  const plain = []
  for (let i = 0; i < sshd.launcher.length; i++) {
    if (sshd.launcher[i] === '-o' && /^Control/.test(sshd.launcher[i + 1])) i++
    else plain.push(sshd.launcher[i])
  }
  return plain
}

const usable = launchers.sshAvailable()

describe('a kept link through ssh', { skip: !usable && 'ssh or sshd unavailable' }, () => {
  let sshd
  let dir
  before(async () => {
    sshd = await launchers.startSshd()
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pk-reattach-'))
  })
  after(async () => {
    await sshd?.stop()
    if (dir) fs.rmSync(dir, { recursive: true, force: true })
  })

  const start = (options = {}) =>
    Kernel.start({
      launcher: plainLauncher(sshd),
      interpreter: sshd.pythonPath ?? python,
      reattach: { graceMs: 15_000 },
      linkTimeoutMs: 3000,
      ...options,
    })

  test('the ssh client killed twice mid-cell: the host reattaches and the output is whole and in order', async () => {
    const kernel = await start()
    try {
      const marks = [path.join(dir, 'mark-1'), path.join(dir, 'mark-2')]
      // A megabyte right after each mark, while the host takes events slowly: the link
      // drops with output on its way (in ssh's and the sockets' buffers), which only the
      // far side's copy can bring again.
      const code = `import time
for i in range(400):
    print("line %04d " % i + "x" * 60, flush=True)
    if i in (100, 250):
        open(${JSON.stringify(marks[0])} if i == 100 else ${JSON.stringify(marks[1])}, "w").close()
        print("gate %d" % i, flush=True)
        time.sleep(0.1)
        print("\\n".join("burst %d %06d" % (i, j) for j in range(60000)), flush=True)
    time.sleep(0.004)
"done"`
      let expected = ''
      for (let i = 0; i < 400; i++) {
        expected += `line ${String(i).padStart(4, '0')} ${'x'.repeat(60)}\n`
        if (i === 100 || i === 250) {
          expected += `gate ${i}\n`
          for (let j = 0; j < 60000; j++) expected += `burst ${i} ${String(j).padStart(6, '0')}\n`
        }
      }
      // The host stops taking events at each burst until the link was dropped: the burst
      // backs up through the relay, the ssh client and sshd, and the drop loses what they
      // held.
      const streamed = []
      const gates = [100, 250].map((i) => {
        let open
        const opened = new Promise((resolve) => (open = resolve))
        return { text: `gate ${i}\n`, opened, open, waiting: false }
      })
      const onEvent = async (e) => {
        if (e.type !== 'stdout') return
        streamed.push(e.text)
        const gate = gates.find((g) => e.text.includes(g.text))
        if (gate) {
          gate.waiting = true
          await gate.opened
        }
      }
      const running = kernel.execute(code, { onEvent })
      const killed = new Set()
      for (const [n, mark] of marks.entries()) {
        assert.ok(await waitFor(() => fs.existsSync(mark), { timeoutMs: 30_000 }), `the cell did not reach ${mark}`)
        // The second drop: once a new link has been taken.
        if (killed.size) assert.ok(await waitFor(() => !killed.has(currentSshClient(kernel, killed)), { timeoutMs: 15_000 }), 'no new link was brought')
        assert.ok(await waitFor(() => gates[n].waiting, { timeoutMs: 15_000 }), 'the burst did not reach the host')
        await new Promise((resolve) => setTimeout(resolve, 300))
        const client = currentSshClient(kernel, killed)
        killed.add(client)
        process.kill(client, 'SIGKILL')
        gates[n].open()
      }
      const r = await running
      assert.equal(r.status, 'ok', JSON.stringify(r.error))
      assert.equal(r.result['text/plain'], "'done'")
      assert.equal(streamed.join(''), expected, 'the streamed output differs from what the cell printed')
      assert.ok(killed.size === 2 && !killed.has(currentSshClient(kernel, killed)), 'the link was not replaced twice')
      // The kernel, its state and its link live on.
      assert.equal((await kernel.execute('i')).result['text/plain'], '399')
      const outcome = await kernel.shutdown()
      assert.equal(outcome.confirmed, true)
    } finally {
      await kernel.shutdown().catch(() => {})
    }
  })

  test('the ssh client killed while a bridge call waits: the call is answered and the cell goes on', async () => {
    let kernel
    const calls = []
    kernel = await start({
      onCall: async (call) => {
        calls.push(call.name)
        // The link drops while the host works on the call; its answer goes out later.
        process.kill(currentSshClient(kernel), 'SIGKILL')
        await new Promise((resolve) => setTimeout(resolve, 500))
        return { answer: call.args.x * 2 }
      },
    })
    try {
      const pid = Number((await kernel.execute('import os; os.getpid()')).result['text/plain'])
      const r = await kernel.execute('print("before", flush=True)\nprint(tool.double(x=21))\nprint("after")')
      assert.equal(r.status, 'ok', JSON.stringify(r.error))
      assert.equal(r.stdout, "before\n{'answer': 42}\nafter\n")
      assert.deepEqual(calls, ['double'])
      assert.notEqual(currentSshClient(kernel), kernel.pid, 'no new link was brought')
      assert.equal((await kernel.execute('import os; os.getpid()')).result['text/plain'], String(pid), 'not the same kernel')
    } finally {
      await kernel.shutdown()
    }
  })

  test("the ssh client killed with the host's bytes on their way: the far side gets them all, once", async () => {
    let kernel
    let sshdSession
    // Two megabytes of answer, written while the far side's sshd is frozen: they back up
    // in the sockets and the ssh client, and the drop loses what those held.
    const data = Array.from({ length: 100_000 }, (_, i) => `${String(i).padStart(19, '0')}`).join('')
    kernel = await start({
      onCall: async () => {
        process.kill(sshdSession, 'SIGSTOP')
        setTimeout(() => {
          process.kill(currentSshClient(kernel), 'SIGKILL')
          process.kill(sshdSession, 'SIGCONT')
        }, 500)
        return { data }
      },
    })
    try {
      const supervisor = Number((await kernel.execute('import os; os.getppid()')).result['text/plain'])
      const stat = fs.readFileSync(`/proc/${supervisor}/stat`, 'utf8')
      sshdSession = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      assert.match(comm(sshdSession), /^sshd/, 'the supervisor is not a child of sshd')
      const r = await kernel.execute('import hashlib\nd = tool.big()["data"]\nprint(len(d), hashlib.sha256(d.encode()).hexdigest())', { timeoutMs: 30_000 })
      assert.equal(r.status, 'ok', JSON.stringify(r.error))
      const sha = require('node:crypto').createHash('sha256').update(data).digest('hex')
      assert.equal(r.stdout, `${data.length} ${sha}\n`)
      assert.notEqual(currentSshClient(kernel), kernel.pid, 'no new link was brought')
      assert.equal(kernel.droppedFrames, 0, 'a line arrived damaged or twice')
    } finally {
      if (sshdSession) {
        try {
          process.kill(sshdSession, 'SIGCONT')
        } catch {}
      }
      await kernel.shutdown()
    }
  })

  test('a link gone silent (the ssh client frozen, its connection still open) is replaced, and the far side takes the new one', async () => {
    const kernel = await start({ linkTimeoutMs: 1000 })
    const frozen = kernel.pid
    try {
      await kernel.execute('n = 0')
      const r = kernel.execute('import time\nfor i in range(40):\n    print(i, flush=True)\n    time.sleep(0.05)')
      await new Promise((resolve) => setTimeout(resolve, 300))
      // The far side sees no drop: sshd's connection stays up while the client is stopped.
      process.kill(frozen, 'SIGSTOP')
      const result = await r
      assert.equal(result.status, 'ok', JSON.stringify(result.error))
      assert.equal(result.stdout, Array.from({ length: 40 }, (_, i) => `${i}\n`).join(''))
      assert.notEqual(currentSshClient(kernel), frozen, 'no new link was brought')
      assert.ok(await waitFor(() => !isAlive(frozen), { timeoutMs: 5000 }), 'the silent link\'s ssh client was left running')
    } finally {
      try {
        process.kill(frozen, 'SIGCONT')
      } catch {}
      await kernel.shutdown()
    }
  })

  test("a pool's sessions through a launcher keep their kernel across a drop (kernel.reattach)", async () => {
    const { KernelPool } = require('../..')
    const pool = new KernelPool({ kernel: { launcher: plainLauncher(sshd), interpreter: sshd.pythonPath ?? python, reattach: { graceMs: 15_000 } }, prewarm: 0 })
    try {
      const first = await pool.execute({ sessionId: 's', cells: [{ code: 'import os; state = os.getpid(); print(os.getppid())' }] })
      const supervisor = Number(first.output.trim())
      const stat = fs.readFileSync(`/proc/${supervisor}/stat`, 'utf8')
      // The ssh client is the far side's only link: kill the one that carries it (the
      // launcher the pool started; the sshd session's peer).
      const clients = launchers.hostPidsOfCommandLine('pykernel_far').filter((pid) => comm(pid) === 'ssh')
      assert.equal(clients.length, 1, `ssh clients: ${clients}`)
      assert.match(comm(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])), /^sshd/)
      process.kill(clients[0], 'SIGKILL')
      const again = await pool.execute({ sessionId: 's', cells: [{ code: 'import os; print(state == os.getpid())' }] })
      assert.equal(again.output.trim(), 'True', again.output)
      assert.equal(again.kernelRestarted, false)
    } finally {
      await pool.disposeAll()
    }
  })

  test('no new link within graceMs: the cell fails with the kernel reported ended, and the far side ends it', async () => {
    // A launcher that refuses every later link: sh runs ssh unless the block file exists.
    const block = path.join(dir, 'block')
    const gate = ['sh', '-c', `[ -e ${block} ] && { echo "gate: closed by the test" >&2; exit 255; }; exec "$@"`, 'gate', ...plainLauncher(sshd)]
    const kernel = await start({ launcher: gate, launcherShell: true, reattach: { graceMs: 1500 } })
    try {
      const where = JSON.parse(
        (await kernel.execute(`import os, sys, json
print(json.dumps({"pid": os.getpid(), "supervisor": os.getppid(),
    "socket": os.path.join(os.path.dirname(os.path.dirname(sys.modules["pykernel_runner"].__file__)), "attach")}))`)).stdout,
      )
      assert.ok(fs.existsSync(where.socket), 'the far side keeps no attach socket')
      const running = kernel.execute('import time; time.sleep(60)')
      fs.writeFileSync(block, '')
      const dropped = Date.now()
      process.kill(kernel.pid, 'SIGKILL')
      const r = await running
      assert.equal(r.status, 'error')
      assert.equal(r.error.ename, 'KernelDied')
      assert.match(r.error.evalue, /lost and not resumed: no new link within the grace/)
      assert.match(r.error.evalue, /reattach grace 1500 ms/)
      // What the last attempt's launcher said, to tell a refused login from a gone host.
      assert.match(r.error.evalue, /gate: closed by the test/)
      assert.ok(Date.now() - dropped >= 1400, 'ended before the grace was over')
      assert.equal(kernel.alive, false)
      // The far side gives up too: after the grace, the kernel gets the shutdown grace.
      assert.ok(await waitFor(() => !isAlive(where.pid) && !isAlive(where.supervisor), { timeoutMs: 10_000 }), 'the far kernel outlived its grace')
      assert.ok(!fs.existsSync(where.socket), 'the attach socket outlived the kernel: a late link could try it')
      await assert.rejects(kernel.execute('1'), { code: 'ERR_KERNEL_DEAD' })
    } finally {
      fs.rmSync(block, { force: true })
      await kernel.shutdown().catch(() => {})
    }
  })

  test('through a kept link, crashes read as the far side saw them and interrupts reach the cell, without waiting for a new link', async () => {
    let kernel = await start()
    const t0 = Date.now()
    let r = await kernel.execute('import os; os._exit(7)')
    assert.equal(r.kernelDied, true)
    assert.match(r.error.evalue, /died during the cell \(exit code 7\)/)
    assert.doesNotMatch(r.error.evalue, /not resumed/)
    assert.ok(Date.now() - t0 < 10_000, 'the host waited for a new link after the kernel ended')
    kernel = await start()
    try {
      const running = kernel.execute('import time\ntry:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    print("interrupted")')
      await new Promise((resolve) => setTimeout(resolve, 500))
      await kernel.interrupt()
      r = await running
      assert.equal(r.stdout, 'interrupted\n')
      r = await kernel.execute('import os, signal; os.kill(os.getpid(), signal.SIGSEGV)')
      assert.match(r.error.evalue, /killed by signal 11 \(SIGSEGV\)/)
    } finally {
      await kernel.shutdown().catch(() => {})
    }
  })

  test('a shutdown ends a kept kernel at once: the far side does not wait for a new link', async () => {
    const kernel = await start()
    const where = JSON.parse((await kernel.execute('import os, json; print(json.dumps([os.getpid(), os.getppid()]))')).stdout)
    const outcome = await kernel.shutdown()
    assert.equal(outcome.confirmed, true)
    assert.equal(outcome.exitCode, 0)
    assert.ok(await waitFor(() => where.every((pid) => !isAlive(pid)), { timeoutMs: 5000 }), 'the far side waited for a new link after a shutdown')
  })
})

/** What a cell does to take over its kernel's link: it connects to the supervisor's attach
 *  socket (beside the runner it was loaded from) with each token of TOKENS, handing over a
 *  pipe for the answer, and prints each answer. */
const ATTACK_PY = `import array, json, os, select, socket, sys
path = os.path.join(os.path.dirname(os.path.dirname(sys.modules["pykernel_runner"].__file__)), "attach")
answers = []
for token in TOKENS:
    answer_r, answer_w = os.pipe()
    input_r, input_w = os.pipe()
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    line = '{"type":"farAttach","token":"%s","next":"%s","received":0}\\n' % (token, "7" * 32)
    s.sendmsg([line.encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [input_r, answer_w, answer_w]).tobytes())])
    os.close(answer_w)
    got = b""
    while select.select([answer_r], [], [], 5)[0]:
        chunk = os.read(answer_r, 4096)
        if not chunk:
            break
        got += chunk
    answers.append(got.decode())
    for fd in (answer_r, input_r, input_w):
        os.close(fd)
    s.close()
print(json.dumps(answers))`

describe('who may attach to a kept kernel', () => {
  const user = launchers.ensureTestUser()
  const modes = [
    { name: 'far side as root', prefix: [], python, skip: process.getuid() !== 0 && 'needs root' },
    { name: 'far side as an ordinary user', prefix: user ? launchers.asUser(user) : [], python: '/usr/bin/python3', skip: !user && 'needs root and useradd' },
  ]
  for (const mode of modes) {
    test(`a cell with a forged or an already used token is refused; the host's next link is taken (${mode.name})`, { skip: mode.skip }, async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pk-attach-attack-'))
      const log = path.join(dir, 'link.log')
      // The recorder relays the link and writes down its control lines, tokens included,
      // which only this test can read; killing it drops the link.
      const launcher = [python, RECORDER, log, '--', ...mode.prefix]
      const recorders = () => launchers.hostPidsOfCommandLine(log).sort((a, b) => startedAt(b) - startedAt(a))
      const kernel = await Kernel.start({ launcher, interpreter: mode.python, reattach: { graceMs: 15_000 }, linkTimeoutMs: 3000 })
      try {
        const uid = (await kernel.execute('import os; os.getuid()')).result['text/plain']
        assert.equal(uid, String(mode.prefix.length ? user.uid : 0))
        await kernel.execute('state = "kept"')
        // The first drop: the host's own new link brings the first token and names the next.
        const first = recorders()[0]
        process.kill(first, 'SIGKILL')
        assert.equal((await kernel.execute('state')).result['text/plain'], "'kept'")
        assert.ok(await waitFor(() => recorders().some((pid) => pid !== first), { timeoutMs: 10_000 }))
        const lines = fs.readFileSync(log, 'utf8').split('\n')
        const firstToken = JSON.parse(lines.find((l) => l.startsWith('>{"type":"farNonce"')).slice(1)).token
        const request = JSON.parse(lines.find((l) => l.startsWith('>{"type":"farAttach"')).slice(1))
        assert.equal(request.token, firstToken, 'the host did not bring the token it sent')
        assert.ok(lines.some((l) => l.startsWith('<{"type":"farAttached"')), 'the far side did not take the host')

        // The attack: a forged token, and the used one (which this cell could have seen).
        const forged = 'f'.repeat(32)
        const r = await kernel.execute(ATTACK_PY.replace('TOKENS', JSON.stringify([forged, firstToken, firstToken.toUpperCase()])))
        assert.equal(r.status, 'ok', JSON.stringify(r.error))
        const refused = '{"type":"farRefused","reason":"token"}\n'
        assert.deepEqual(JSON.parse(r.stdout), [refused, refused, refused], 'a cell took over (or was not refused) the link')

        // The host's link is untouched, and its next token still works: a second drop.
        const second = recorders()[0]
        const streamed = kernel.execute('import time\nfor i in range(50):\n    print(i, flush=True)\n    time.sleep(0.01)')
        await new Promise((resolve) => setTimeout(resolve, 150))
        process.kill(second, 'SIGKILL')
        const after = await streamed
        assert.equal(after.status, 'ok', JSON.stringify(after.error))
        assert.equal(after.stdout, Array.from({ length: 50 }, (_, i) => `${i}\n`).join(''))
        assert.equal((await kernel.execute('state')).result['text/plain'], "'kept'")
        const attaches = fs.readFileSync(log, 'utf8').split('\n').filter((l) => l.startsWith('>{"type":"farAttach"')).map((l) => JSON.parse(l.slice(1)))
        assert.equal(attaches.length, 2)
        assert.equal(attaches[1].token, attaches[0].next, 'the second link did not bring the token the first one named')
      } finally {
        await kernel.shutdown().catch(() => {})
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  }
})

/** What a cell does to lure the host's next link: it listens on a socket of its own, and
 *  writes the supervisor's reports on the protocol pipe (where the far side listens, and
 *  that the host's bytes arrived, so the host would not keep them), guessing the nonce. */
const LURE_PY = `import gc, json, os, socket, tempfile, threading
lure_dir = tempfile.mkdtemp()
lure = socket.socket(socket.AF_UNIX)
lure.bind(os.path.join(lure_dir, "attach"))
lure.listen(4)
lured = []
def wait_for_host():
    while True:
        lured.append(lure.accept())
threading.Thread(target=wait_for_host, daemon=True).start()
channel = next(o for o in gc.get_objects() if type(o).__name__ == "Channel" and hasattr(o, "fd"))
path = os.path.join(lure_dir, "attach").encode().hex()
for nonce in ["0" * 32, "", "x"]:
    # As the supervisor writes them: compact, keys in its order.
    compact = dict(separators=(",", ":"))
    os.write(channel.fd, json.dumps({"type": "farAttach", "path": path, "nonce": nonce}, **compact).encode() + b"\\n")
    os.write(channel.fd, json.dumps({"type": "farAck", "received": 1 << 40, "nonce": nonce}, **compact).encode() + b"\\n")
print("lured")`

describe("a cell that forges the supervisor's reports", () => {
  const user = launchers.ensureTestUser()
  for (const mode of [
    { name: 'far side as root', prefix: [], python, skip: process.getuid() !== 0 && 'needs root' },
    { name: 'far side as an ordinary user', prefix: user ? launchers.asUser(user) : [], python: '/usr/bin/python3', skip: !user && 'needs root and useradd' },
  ]) {
    test(`cannot send the host's next link to a socket of its own (${mode.name})`, { skip: mode.skip }, async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pk-attach-lure-'))
      const log = path.join(dir, 'link.log')
      const launcher = [python, RECORDER, log, '--', ...mode.prefix]
      const recorders = () => launchers.hostPidsOfCommandLine(log).sort((a, b) => startedAt(b) - startedAt(a))
      const kernel = await Kernel.start({ launcher, interpreter: mode.python, reattach: { graceMs: 15_000 }, linkTimeoutMs: 3000 })
      try {
        const r = await kernel.execute(LURE_PY)
        assert.equal(r.stdout, 'lured\n', JSON.stringify(r.error))
        // The forgeries reached the frame reader, which dropped them: the relay took none.
        assert.ok(kernel.droppedFrames >= 6, `dropped frames: ${kernel.droppedFrames}`)
        const first = recorders()[0]
        const running = kernel.execute('import time\nfor i in range(30):\n    print(i, flush=True)\n    time.sleep(0.01)\nlen(lured)')
        await new Promise((resolve) => setTimeout(resolve, 100))
        process.kill(first, 'SIGKILL')
        const after = await running
        assert.equal(after.status, 'ok', JSON.stringify(after.error))
        assert.equal(after.stdout, Array.from({ length: 30 }, (_, i) => `${i}\n`).join(''))
        assert.equal(after.result['text/plain'], '0', "the host's new link went to the cell's socket")
        assert.ok(recorders().some((pid) => pid !== first), 'no new link was brought')
      } finally {
        await kernel.shutdown().catch(() => {})
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  }
})

test('reattach needs a launcher, and its grace is bounded', async () => {
  await assert.rejects(Kernel.start({ interpreter: python, reattach: { graceMs: 1000 } }), { code: 'ERR_INVALID_ARG', message: /reattach.*launcher/s })
  for (const graceMs of [0, 99, 3_600_001, Number.NaN]) {
    await assert.rejects(Kernel.start({ launcher: ['env'], interpreter: python, reattach: { graceMs } }), { code: 'ERR_INVALID_ARG', message: /reattach\.graceMs/ }, `graceMs ${graceMs}`)
  }
  const kernel = await Kernel.start({ launcher: ['env'], interpreter: python, reattach: { graceMs: 100 } })
  assert.equal((await kernel.execute('1+1')).result['text/plain'], '2')
  await kernel.shutdown()
})
