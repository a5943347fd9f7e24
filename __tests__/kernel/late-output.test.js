'use strict'
// Output belongs to the cell that made it: what a subprocess, a forked copy or a thread of
// an ended cell writes to fds 1/2 while a later cell runs arrives as late output, never as
// that cell's own stdout/stderr, and in the agent text the late block ends before the
// running cell's own text resumes. The writers wait for a file the later cell makes (in
// the kernel's own TMPDIR), so the tests hold under load without guessing at sleeps.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startKernel } = require('../helpers/kernel')

const START = '[late output from an earlier cell]\n'
const END = '[end of late output]\n'

/** The agent text cut into the text inside late blocks and the text outside them. */
function lateAndOwn(output) {
  let late = ''
  let own = ''
  let rest = output
  for (;;) {
    const at = rest.indexOf(START)
    if (at < 0) return { late, own: own + rest }
    own += rest.slice(0, at)
    rest = rest.slice(at + START.length)
    const end = rest.indexOf(END)
    if (end < 0) return { late: late + rest, own }
    late += rest.slice(0, end)
    rest = rest.slice(end + END.length)
  }
}

/** Cell 1 leaves `writer` behind (it waits for GO, writes, then makes DONE); cell 2 makes
 *  GO, waits for DONE, lets the pump read, then prints; cell 3 prints. */
async function lateWhileTheNextCellRuns(t, writer, { reap = '' } = {}) {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const setup = [
    'import os, sys, tempfile, threading, time',
    'd = tempfile.mkdtemp()',
    "GO, DONE = os.path.join(d, 'go'), os.path.join(d, 'done')",
    'def wait_for(path):',
    '    while not os.path.exists(path):',
    '        time.sleep(0.01)',
    writer,
    "print('cell one')",
  ].join('\n')
  const first = await kernel.execute(setup)
  assert.equal(first.status, 'ok', JSON.stringify(first.error))
  assert.equal(first.stdout, 'cell one\n')
  const events = []
  const r = await kernel.evaluate(
    [
      { code: `open(GO, 'w').close()\nwait_for(DONE)\n${reap}time.sleep(0.5)\nprint('own two')\n_ = sys.stderr.write('own err\\n')` },
      { code: "print('own three')" },
    ],
    { onEvent: (cell, e) => events.push({ cell, ...e }) },
  )
  assert.equal(r.cells.length, 2, r.output)
  for (const cell of r.cells) assert.equal(cell.status, 'ok', JSON.stringify(cell.error))
  return { kernel, events, r }
}

function assertLateOnly(got, expected) {
  const { events, r } = got
  // Each cell's own output is its own and nothing else.
  assert.equal(r.cells[0].stdout, 'own two\n')
  assert.equal(r.cells[0].stderr, 'own err\n')
  assert.equal(r.cells[1].stdout, 'own three\n')
  assert.equal(r.cells[1].stderr, '')
  // The writer's text arrived, all of it as late events, each stream's in its order (the
  // two streams' relative order is not kept: they have a pipe and a pump each).
  const all = [...expected.stdout, ...expected.stderr]
  for (const stream of ['stdout', 'stderr']) {
    const late = events.filter((e) => e.late && e.type === stream).map((e) => e.text).join('')
    assert.equal(late, expected[stream].join(''), `late ${stream}`)
  }
  const unmarked = events.filter((e) => !e.late && all.some((x) => (e.text ?? '').includes(x.trim())))
  assert.deepEqual(unmarked, [])
  // In the agent text the late block holds the writer's text only: the cells' own text
  // after it is outside it.
  const { late: inLate, own } = lateAndOwn(r.output)
  for (const text of all) assert.ok(inLate.includes(text.trim()), `agent text: ${JSON.stringify(r.output)}`)
  assert.equal(own.split('\n').filter(Boolean).sort().join('|'), ['own err', 'own three', 'own two'].join('|'), `agent text: ${JSON.stringify(r.output)}`)
}

test('a subprocess of cell 1 writing during cell 2: late events, not cell 2\'s stdout', { timeout: 30_000 }, async (t) => {
  const got = await lateWhileTheNextCellRuns(t, [
    'import subprocess',
    "child = subprocess.Popen(['sh', '-c', 'while [ ! -e \"$1\" ]; do sleep 0.01; done; echo late-sub; echo late-sub-err >&2; touch \"$2\"', 'sh', GO, DONE])",
  ].join('\n'), { reap: 'child.wait()\n' })
  assertLateOnly(got, { stdout: ['late-sub\n'], stderr: ['late-sub-err\n'] })
})

test('a forked copy of cell 1 writing during cell 2: late events, not cell 2\'s stdout', { timeout: 30_000 }, async (t) => {
  const got = await lateWhileTheNextCellRuns(t, [
    'pid = os.fork()',
    'if pid == 0:',
    '    wait_for(GO)',
    "    os.write(1, b'late-fork\\n')",
    "    print('late-fork-print')",
    "    os.write(2, b'late-fork-err\\n')",
    "    open(DONE, 'w').close()",
    '    os._exit(0)',
  ].join('\n'), { reap: 'os.waitpid(pid, 0)\n' })
  assertLateOnly(got, { stdout: ['late-fork\n', 'late-fork-print\n'], stderr: ['late-fork-err\n'] })
})

test('an os.write thread of cell 1 writing during cell 2: late events, not cell 2\'s stdout', { timeout: 30_000 }, async (t) => {
  const got = await lateWhileTheNextCellRuns(t, [
    'def write_late():',
    '    wait_for(GO)',
    "    os.write(1, b'late-thread\\n')",
    "    os.write(2, bytearray(b'late-thread-err\\n'))",
    "    open(DONE, 'w').close()",
    'threading.Thread(target=write_late, daemon=True).start()',
  ].join('\n'))
  assertLateOnly(got, { stdout: ['late-thread\n'], stderr: ['late-thread-err\n'] })
})

test('a child still running keeps its pipe; cell 2 reads it as late, and its pipes work as usual', { timeout: 30_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  // A child that writes once per cell it is told about, over several cells.
  await kernel.execute([
    'import os, subprocess, tempfile, time',
    'd = tempfile.mkdtemp()',
    "child = subprocess.Popen(['sh', '-c', 'for i in 1 2 3; do while [ ! -e \"$1/go$i\" ]; do sleep 0.01; done; echo tick$i; touch \"$1/done$i\"; done', 'sh', d])",
  ].join('\n'))
  const lates = []
  for (const i of [1, 2, 3]) {
    const r = await kernel.execute(
      `open(os.path.join(d, 'go${i}'), 'w').close()\nwhile not os.path.exists(os.path.join(d, 'done${i}')): time.sleep(0.01)\ntime.sleep(0.3)\nos.system('echo own${i}')\nprint('print${i}')`,
      { onEvent: (e) => e.late && lates.push(e.text) },
    )
    assert.equal(r.stdout, `own${i}\nprint${i}\n`)
  }
  await kernel.execute('child.wait()')
  await kernel.execute('pass', { onEvent: (e) => e.late && lates.push(e.text) })
  assert.equal(lates.join(''), 'tick1\ntick2\ntick3\n')
})

test('pipes of ended cells are closed once no writer is left: 2000 cells with children, the fd count stays put', { timeout: 180_000 }, async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const count = "import os\nlen(os.listdir('/proc/self/fd'))"
  const cell = "pid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\nprint('x')"
  await kernel.execute('import os')
  const before = Number((await kernel.execute(count)).result['text/plain'])
  for (let i = 0; i < 20; i++) {
    const r = await kernel.evaluate(Array.from({ length: 100 }, () => ({ code: cell })))
    assert.equal(r.cells.length, 100)
    assert.ok(r.cells.every((c) => c.status === 'ok' && c.stdout === 'x\n'), r.output.slice(0, 500))
  }
  // The pump closes a pipe when it reads its end: a moment after the last cell.
  await new Promise((resolve) => setTimeout(resolve, 200))
  const after = Number((await kernel.execute(count)).result['text/plain'])
  assert.ok(after <= before + 4, `fds: ${before} before, ${after} after 2000 cells`)
})
