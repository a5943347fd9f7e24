'use strict'
// IPython-style magics and shell commands (docs/python.md#magics-and-shell-commands), against
// real Python.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { startKernel, run, ok, value, strayMembers, kernelProcess, tempDir } = require('../helpers/kernel')
const { pipDistribution } = require('../helpers/pip-distribution')

const CAP_NOTICE = '[output truncated: shell output capped at 1 MiB / 3000 lines]'

function statuses(events, op) {
  return events.filter((e) => e.type === 'status' && e.op === op)
}

function commOf(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
  } catch {
    return ''
  }
}

test('magics', async (t) => {
  const dir = fs.realpathSync(tempDir('pykernel-magics-'))
  const kernel = await startKernel({ cwd: dir })
  t.after(() => kernel.shutdown())

  await t.test('cells without magics do not import the magics module', async () => {
    assert.equal(await value(kernel, "import sys; 'pykernel_runner.magics' in sys.modules"), 'False')
    assert.equal(await value(kernel, 'x = 10 % 3\nx != 2'), 'True')
    // a one-line assignment to a new name is no automagic candidate
    await ok(kernel, 'first = 1')
    await ok(kernel, 'second, third = 2, 3')
    // nor is an expression that starts with a number: no magic's name does
    assert.equal(await value(kernel, '1+1'), '2')
    assert.equal(await value(kernel, '2 * 3'), '6')
    assert.equal(await value(kernel, "'pykernel_runner.magics' in sys.modules"), 'False')
    await ok(kernel, '%pwd')
    assert.equal(await value(kernel, "'pykernel_runner.magics' in sys.modules"), 'True')
  })

  await t.test('%pwd returns the working directory', async () => {
    const { result } = await ok(kernel, '%pwd')
    assert.equal(result.result['text/plain'], `'${dir}'`)
    assert.equal(await value(kernel, 'here = %pwd\nhere'), `'${dir}'`)
  })

  await t.test('%cd changes directory for the session, with ~ and a status event', async () => {
    fs.mkdirSync(path.join(dir, 'sub dir'), { recursive: true })
    const { result, events } = await ok(kernel, '%cd "sub dir"')
    assert.deepEqual(statuses(events, 'cd').map((e) => e.data), [{ path: path.join(dir, 'sub dir') }])
    assert.equal(result.stdout, `${path.join(dir, 'sub dir')}\n`)
    assert.equal(await value(kernel, 'import os; os.getcwd()'), `'${path.join(dir, 'sub dir')}'`)
    const home = (await ok(kernel, '%cd')).events
    assert.equal(statuses(home, 'cd')[0].data.path, fs.realpathSync(os.homedir()))
    await ok(kernel, '%cd ~')
    assert.equal(await value(kernel, 'os.getcwd()'), `'${fs.realpathSync(os.homedir())}'`)
    await ok(kernel, `%cd ${dir}`)
    assert.equal(await value(kernel, '%pwd'), `'${dir}'`)
  })

  await t.test('%ls returns the sorted directory listing', async () => {
    for (const name of ['b.txt', 'a.txt', 'C.txt']) fs.writeFileSync(path.join(dir, name), '')
    const listing = JSON.parse((await value(kernel, 'listing = %ls\nimport json; json.dumps(listing)')).slice(1, -1))
    assert.deepEqual(listing, fs.readdirSync(dir).sort())
    assert.equal(await value(kernel, `%ls "${dir}/sub dir"`), '[]')
  })

  await t.test('%env lists, reads and sets; %set_env sets', async () => {
    assert.equal(await value(kernel, "e = %env\ntype(e).__name__, e['PATH'] == os.environ['PATH']"), "('dict', True)")
    const set = await ok(kernel, '%env PK_ONE=1')
    assert.equal(set.result.stdout, 'env: PK_ONE=1\n')
    await ok(kernel, '%env PK_TWO two words')
    await ok(kernel, '%set_env PK_THREE 3')
    assert.equal(await value(kernel, "os.environ['PK_ONE'], os.environ['PK_TWO'], os.environ['PK_THREE']"), "('1', 'two words', '3')")
    assert.equal(await value(kernel, '%env PK_ONE'), "'1'")
    const missing = await run(kernel, '%env PK_NOT_SET')
    assert.equal(missing.result.error.ename, 'UsageError')
  })

  await t.test('%time runs a statement or expression, prints times, returns the value', async () => {
    const { result, events } = await ok(kernel, '%time sum(range(10))')
    assert.equal(result.result['text/plain'], '45')
    assert.match(result.stdout, /^CPU times: user .+, sys: .+, total: .+\nWall time: .+\n$/)
    const [status] = statuses(events, 'time')
    assert.equal(typeof status.data.elapsedMs, 'number')
    await ok(kernel, '%time timed = 6 * 7')
    assert.equal(await value(kernel, 'timed'), '42')
    const cell = await ok(kernel, '%%time\nimport time\ntime.sleep(0.05)\n"slept"')
    assert.equal(cell.result.result['text/plain'], "'slept'")
    assert.ok(statuses(cell.events, 'time')[0].data.elapsedMs >= 45)
  })

  await t.test('%timeit and %%timeit repeat runs and report the time per loop', async () => {
    const line = await ok(kernel, '%timeit -n 3 -r 2 sum(range(10))')
    assert.match(line.result.stdout, /^\S+ \S+ ± \S+ \S+ per loop \(mean ± std\. dev\. of 2 runs, 3 loops each\)\n$/)
    const [status] = statuses(line.events, 'timeit')
    assert.equal(status.data.loops, 3)
    assert.equal(status.data.runs, 2)
    assert.equal(typeof status.data.msPerLoop, 'number')
    const cell = await ok(kernel, '%%timeit -n 2 -r 3 base = 5\ntotal = base * 2')
    assert.match(cell.result.stdout, /of 3 runs, 2 loops each/)
    assert.equal(statuses(cell.events, 'timeit')[0].data.loops, 2)
    const auto = await ok(kernel, 'r = %timeit -q -o pass\nr.loops >= 1000, len(r.all_runs)')
    assert.equal(auto.result.result['text/plain'], '(True, 7)')
    assert.equal(auto.result.stdout, '')
  })

  await t.test('%who and %whos list user names only', async () => {
    await ok(kernel, '%reset -f')
    await ok(kernel, 'a = 1\nimport json as jsonmod\ndef f(): pass\n_private = 2')
    const who = await ok(kernel, '%who')
    assert.deepEqual(who.result.stdout.trim().split('\t'), ['a', 'f', 'jsonmod'])
    for (const hidden of ['display', 'env', '__pykernel__', '__pykernel_magic__', '_private']) {
      assert.ok(!who.result.stdout.includes(hidden), `%who listed ${hidden}`)
    }
    assert.equal(await value(kernel, '%who_ls'), "['a', 'f', 'jsonmod']")
    assert.equal((await ok(kernel, '%who int')).result.stdout, 'a\n')
    const whos = (await ok(kernel, '%whos')).result.stdout.split('\n')
    assert.match(whos[0], /^Variable\s+Type\s+Data\/Info$/)
    assert.match(whos[1], /^-+$/)
    assert.match(whos[2], /^a\s+int\s+1$/)
    assert.match(whos[3], /^f\s+function\s+<function f at/)
  })

  await t.test('%reset clears user names and keeps the prelude', async () => {
    await ok(kernel, '%reset -f')
    await ok(kernel, 'a = 1\nb = 2\ndisplay = "shadowed"')
    const { events } = await ok(kernel, '%reset -f')
    assert.equal(statuses(events, 'reset').length, 1)
    assert.equal(statuses(events, 'reset')[0].data.removed, 2)
    const gone = await run(kernel, 'a')
    assert.equal(gone.result.error.ename, 'NameError')
    assert.equal((await ok(kernel, '%who')).result.stdout, 'Interactive namespace is empty.\n')
    const after = await ok(kernel, "display('shown')\nenv('PATH') is not None")
    assert.deepEqual(after.result.displays[0], { 'text/plain': "'shown'" })
    assert.equal(after.result.result['text/plain'], 'True')
    // the magics work in the cell right after a reset, and in the same cell
    await ok(kernel, '%reset\n!true\nb = %pwd')
    assert.equal(await value(kernel, 'b'), `'${dir}'`)
  })

  await t.test('%load shows a file and runs it', async () => {
    const file = path.join(dir, 'loadme.py')
    fs.writeFileSync(file, 'loaded = 6 * 7\nprint("ran", loaded)\n')
    const { result } = await ok(kernel, `%load ${file}`)
    assert.equal(result.stdout, 'loaded = 6 * 7\nprint("ran", loaded)\nran 42\n')
    assert.equal(await value(kernel, 'loaded'), '42')
  })

  await t.test('%run runs a script as __main__ with argv and merges its globals', async () => {
    const file = path.join(dir, 'script.py')
    fs.writeFileSync(file, 'import sys\nif __name__ == "__main__":\n    print(sys.argv)\n    produced = len(sys.argv)\n')
    const { result } = await ok(kernel, `%run ${file} one "two words"`)
    assert.equal(result.stdout, `['${file}', 'one', 'two words']\n`)
    assert.equal(await value(kernel, 'produced, __name__, sys.argv'), "(3, '__main__', [''])")
    const missing = await run(kernel, '%run no_such_script.py')
    assert.equal(missing.result.error.ename, 'UsageError')
  })

  await t.test('%%bash and %%sh run the body, streamed; a non-zero exit is stated', async () => {
    const bash = await ok(kernel, '%%bash\necho "bash ${BASH_VERSION%%.*}"\necho oops >&2')
    assert.match(bash.result.stdout, /^bash \d+\n$/)
    assert.equal(bash.result.stderr, 'oops\n')
    const sh = await ok(kernel, '%%sh\necho "$0"\nexit 3')
    assert.equal(sh.result.stdout, '/bin/sh\n')
    assert.equal(sh.result.stderr, 'Command exited with code 3\n')
  })

  await t.test('%%capture keeps the cell output in an object, per cell', async () => {
    await ok(kernel, 'import sys, threading, time\nproxy = sys.stdout')
    await ok(kernel, "threading.Thread(target=lambda: (time.sleep(0.3), print('late'))).start()")
    const { result, events } = await ok(
      kernel,
      [
        '%%capture cap',
        "print('out', sys.stdout is proxy)",
        "print('err', file=sys.stderr)",
        "display({'text/plain': 'shown'}, raw=True)",
        '!echo from shell',
        "import os; os.system('echo from fd 1')",
        '%cd .',
        'time.sleep(0.5)',
        '41 + 1',
      ].join('\n'),
    )
    assert.equal(result.stdout, '')
    assert.equal(result.stderr, '')
    assert.equal(result.displays.length, 0)
    assert.equal(result.result, undefined)
    assert.equal(statuses(events, 'cd').length, 1, 'status events are not captured')
    assert.equal(await value(kernel, 'cap.stdout'), `'out True\\nfrom shell\\nfrom fd 1\\n${dir}\\n'`)
    assert.equal(await value(kernel, 'cap.stderr'), "'err\\n'")
    assert.equal(await value(kernel, '[o.data for o in cap.outputs]'), "[{'text/plain': 'shown'}, {'text/plain': '42'}]")
    // The thread's line came during the capture but belongs to the cell before: late.
    assert.deepEqual(events.filter((e) => e.late).map((e) => e.text), ['late\n'])
    const shown = await ok(kernel, 'cap.show()')
    assert.equal(shown.result.stdout, `out True\nfrom shell\nfrom fd 1\n${dir}\n`)
    assert.equal(shown.result.stderr, 'err\n')
    assert.equal(shown.result.displays.length, 2)
    // output after the capture is not captured
    assert.equal((await ok(kernel, "print('visible')")).result.stdout, 'visible\n')
  })

  await t.test('%%writefile writes or appends the body', async () => {
    const file = path.join(dir, 'written.txt')
    const first = await ok(kernel, `%%writefile ${file}\nline one\nline two`)
    assert.equal(fs.readFileSync(file, 'utf8'), 'line one\nline two\n')
    assert.equal(first.result.stdout, `Writing ${file}\n`)
    assert.deepEqual(statuses(first.events, 'writefile')[0].data, { path: file, bytes: 18, append: false })
    const more = await ok(kernel, `%%writefile -a ${file}\nline three\n`)
    assert.equal(fs.readFileSync(file, 'utf8'), 'line one\nline two\nline three\n')
    assert.deepEqual(statuses(more.events, 'writefile')[0].data, { path: file, bytes: 11, append: true })
    // `%%file` is IPython's alias of it.
    const alias = path.join(dir, 'alias.txt')
    const aliased = await ok(kernel, `%%file ${alias}\nvia the alias`)
    assert.equal(fs.readFileSync(alias, 'utf8'), 'via the alias\n')
    assert.equal(aliased.result.stdout, `Writing ${alias}\n`)
  })

  await t.test('unknown magics raise a UsageError NameError', async () => {
    const line = await run(kernel, '%nosuch arg')
    assert.equal(line.result.error.ename, 'NameError')
    assert.equal(line.result.error.evalue, "UsageError: Line magic function '%nosuch' not found.")
    const cell = await run(kernel, '%%nosuch\nbody')
    assert.equal(cell.result.error.evalue, "UsageError: Cell magic function '%%nosuch' not found.")
    const late = await run(kernel, 'x = 1\n%%bash')
    assert.equal(late.result.error.evalue, "UsageError: Line magic function '%%bash' not found.")
  })

  await t.test('only lines that start a statement are rewritten', async () => {
    assert.equal(await value(kernel, 's = """\n%pwd\n!ls\n"""\ns'), "'\\n%pwd\\n!ls\\n'")
    assert.equal(await value(kernel, "s = '''\n  !ls\n''' + \"!x\"\ns"), "'\\n  !ls\\n!x'")
    assert.equal(await value(kernel, 'x = (10 %\n 3)\nx'), '1')
    assert.equal(await value(kernel, 'x = (10\n% 3)\nx'), '1')
    assert.equal(await value(kernel, 'x = 10 \\\n% 3\nx'), '1')
    const continuation = await run(kernel, 'x = 10 %\n 3')
    assert.equal(continuation.result.error.ename, 'SyntaxError')
    const block = await ok(kernel, 'if True:\n    !echo hi\n    here = %pwd\nhere')
    assert.equal(block.result.stdout, 'hi\n')
    assert.equal(block.result.result['text/plain'], `'${dir}'`)
    // line numbers survive the rewrite
    const traced = await run(kernel, '!true\n%pwd\n1/0')
    assert.match(traced.result.error.traceback.join(''), /line 3/)
  })

  await t.test('$name and {expr} expand in shell commands', async () => {
    await ok(kernel, "word = 'hello'\nn = 3")
    assert.equal((await ok(kernel, '!echo $word {n * 2}')).result.stdout, 'hello 6\n')
    assert.equal((await ok(kernel, "!echo '$word' $$HOME")).result.stdout, `$word ${process.env.HOME}\n`)
    // an undefined name leaves the command to the shell, as IPython does
    assert.equal((await ok(kernel, '!echo $HOME')).result.stdout, `${process.env.HOME}\n`)
    assert.equal((await ok(kernel, "!echo 'a b' | awk '{print $2}'")).result.stdout, 'b\n')
  })

  await t.test('shell children read /dev/null: !head and !cat return at once', async () => {
    const started = Date.now()
    await ok(kernel, '!head -n 1', { timeoutMs: 5000 })
    await ok(kernel, '!cat', { timeoutMs: 5000 })
    assert.ok(Date.now() - started < 4000)
    assert.equal(await value(kernel, '1 + 1'), '2')
  })

  await t.test('!cmd streams its output as the child writes it', async () => {
    const seen = []
    const started = Date.now()
    const { result } = await ok(kernel, '!echo first; sleep 1; echo second', {
      onEvent: (e) => seen.push({ ...e, at: Date.now() - started }),
    })
    const out = seen.filter((e) => e.type === 'stdout')
    assert.equal(out[0].text, 'first\n')
    assert.ok(out[0].at < 800, `first line came after ${out[0].at} ms`)
    assert.equal(result.stdout, 'first\nsecond\n')
    const partial = await ok(kernel, "!printf first; sleep 1; printf second")
    assert.deepEqual(
      partial.events.filter((e) => e.type === 'stdout').map((e) => e.text),
      ['first', 'second'],
    )
    assert.equal(await value(kernel, '!true\n_exit_code'), '0')
  })

  await t.test('x = !cmd streams the output as the child writes it, and captures it', async () => {
    const seen = []
    const started = Date.now()
    const cell = "x = !printf 'first\\n'; sleep 1; printf 'second\\n'\nx, x.returncode"
    const { result } = await ok(kernel, cell, {
      onEvent: (e) => seen.push({ ...e, at: Date.now() - started }),
    })
    const out = seen.filter((e) => e.type === 'stdout')
    assert.ok(out.length > 0, "the child's output streamed")
    assert.equal(out[0].text, 'first\n')
    // The child sleeps a second before its second line: the first came before it ended.
    const second = out.find((e) => e.text.includes('second'))
    assert.ok(second && second.at - out[0].at >= 500, `first at ${out[0].at} ms, second at ${second && second.at} ms`)
    // Streamed once, and the value is the captured lines (shown only as the last expression).
    assert.equal(result.stdout, 'first\nsecond\n')
    assert.equal(result.result['text/plain'], "(['first', 'second'], 0)")
    const quiet = await ok(kernel, "y = !printf 'a\\nb\\n'")
    assert.equal(quiet.result.stdout, 'a\nb\n')
    assert.equal(quiet.result.result, undefined)
    assert.equal(await value(kernel, 'y'), "['a', 'b']")
  })

  await t.test('a failing !cmd is stated', async () => {
    const { result } = await ok(kernel, '!echo out; exit 2')
    assert.equal(result.stdout, 'out\n')
    assert.equal(result.stderr, 'Command exited with code 2\n')
    assert.equal(await value(kernel, '_exit_code'), '2')
  })

  await t.test('x = !cmd returns an SList', async () => {
    await ok(kernel, "x = !printf 'first\\nsecond'")
    assert.equal(await value(kernel, 'x, x.returncode, type(x).__name__'), "(['first', 'second'], 0, 'SList')")
    await ok(kernel, "rows = !printf 'a 1 x\\nb 2 y\\nc 3 z\\n'")
    assert.equal(await value(kernel, 'rows.n'), "'a 1 x\\nb 2 y\\nc 3 z'")
    assert.equal(await value(kernel, 'rows.s'), "'a 1 x b 2 y c 3 z'")
    assert.equal(await value(kernel, 'rows.l is rows'), 'True')
    assert.equal(await value(kernel, "rows.grep('B')"), "['b 2 y']")
    assert.equal(await value(kernel, "rows.grep('b', prune=True)"), "['a 1 x', 'c 3 z']")
    assert.equal(await value(kernel, "rows.grep('^[12]$', field=1)"), "['a 1 x', 'b 2 y']")
    assert.equal(await value(kernel, 'rows.fields(0, -1)'), "['a x', 'b y', 'c z']")
    assert.equal(await value(kernel, 'rows.fields()'), "[['a', '1', 'x'], ['b', '2', 'y'], ['c', '3', 'z']]")
    await ok(kernel, "sizes = !printf 'f 21 k\\nb 3 z\\nd 100 a\\nc none y\\n'")
    assert.equal(await value(kernel, 'sizes.sort()'), "['b 3 z', 'c none y', 'd 100 a', 'f 21 k']")
    assert.equal(await value(kernel, 'sizes.sort(1)'), "['d 100 a', 'f 21 k', 'b 3 z', 'c none y']")
    assert.equal(await value(kernel, 'sizes.sort(field=1, nums=True)'), "['c none y', 'b 3 z', 'f 21 k', 'd 100 a']")
    assert.equal(await value(kernel, 'type(sizes.sort(2)).__name__, sizes[0]'), "('SList', 'f 21 k')", 'a sorted copy; the list is unchanged')
    await ok(kernel, `paths = !printf '${dir}\\n/no/such/path'`)
    assert.equal(await value(kernel, 'paths.p'), `[PosixPath('${dir}')]`)
    const failed = await ok(kernel, "bad = !echo partial; echo why >&2; exit 4\nbad, bad.returncode")
    assert.equal(failed.result.result['text/plain'], "(['partial'], 4)")
    assert.equal(failed.result.stdout, 'partial\n', 'streamed as well as captured')
    assert.equal(failed.result.stderr, 'why\nCommand exited with code 4\n')
    // !!cmd's value is shown, so its stdout is not streamed too.
    const twice = await ok(kernel, '!!echo twice')
    assert.equal(twice.result.result['text/plain'], "['twice']")
    assert.equal(twice.result.stdout, '')
  })

  await t.test('shell output is capped at 3000 lines with one notice', async () => {
    const { result } = await ok(kernel, '!seq 3100')
    const lines = result.stdout.split('\n')
    assert.equal(lines.length, 3001)
    assert.equal(lines[2999], '3000')
    assert.equal(result.stderr.split(CAP_NOTICE).length - 1, 1)
    assert.equal(await value(kernel, 'many = !seq 5000\nlen(many), many[-1]'), "(3000, '3000')")
  })

  await t.test('!yes | head -c 5000000 is capped at 1 MiB and the kernel stays responsive', async () => {
    const started = Date.now()
    const { result } = await ok(kernel, '!yes | head -c 5000000', { timeoutMs: 20000 })
    assert.ok(Date.now() - started < 10000)
    assert.ok(result.stdout.length <= 1024 * 1024)
    assert.ok(result.stdout.length >= 3000 * 2)
    assert.equal(result.stderr.split(CAP_NOTICE).length - 1, 1)
    assert.equal(await value(kernel, '1 + 1'), '2')
    const long = await ok(kernel, "!head -c 3000000 /dev/zero | tr '\\0' x")
    assert.equal(long.result.stdout, 'x'.repeat(1024 * 1024))
    assert.equal(long.result.stderr, `${CAP_NOTICE}\n`)
  })

  await t.test('an interrupted !cmd leaves no child behind', async () => {
    const py = kernelProcess(kernel.pid)
    const { result } = await run(kernel, '!sleep 30', { timeoutMs: 500 })
    assert.equal(result.cancelled, true)
    assert.equal(result.timedOut, true)
    const stubborn = await run(kernel, "!trap '' INT TERM; sleep 30; echo never", { timeoutMs: 500 })
    assert.equal(stubborn.result.cancelled, true)
    // The group holds init (kernel.pid) and the Python kernel; anything else was left.
    const left = strayMembers(kernel.pid, py)
    assert.deepEqual(left.map(commOf), [], 'processes left in the kernel group')
    assert.equal(await value(kernel, '1 + 1'), '2')
  })
})

test('%pip over a package with a compiled extension imported says a restart is needed, and keeps the imported version', async (t) => {
  const dist = pipDistribution(t, { name: 'pkext-dist', module: 'pkext', prefix: 'pykernel-pip-ext-' })
  const kernel = await startKernel({ cwd: dist.dir })
  t.after(() => kernel.shutdown())
  const install = (version) => ok(kernel, dist.pipLine(version), { timeoutMs: 120000 })
  await install('1')
  // An extension module as the import system leaves one (its file ends in an extension
  // suffix): building a real one would need a compiler.
  await ok(kernel, [
    'import sys, types, importlib.machinery, pkext',
    "ext = types.ModuleType('pkext._speedups')",
    "ext.__file__ = '/nowhere/_speedups' + importlib.machinery.EXTENSION_SUFFIXES[0]",
    "sys.modules['pkext._speedups'] = ext",
  ].join('\n'))
  const second = await install('2')
  const [status] = statuses(second.events, 'pip')
  assert.deepEqual(status.data.restart_needed, ['pkext'])
  assert.deepEqual(status.data.evicted, [])
  assert.match(second.result.stdout, /Note: pkext has compiled extensions already imported, which cannot be loaded again in this process/)
  assert.match(second.result.stdout, /Restart the kernel to use what is installed now \(a call with \{ reset: true \}, or a new kernel\)/)
  assert.doesNotMatch(second.result.stdout, /the next import loads/, 'no promise a fresh import cannot keep')
  assert.equal(await value(kernel, 'import pkext\npkext.__version__'), "'1'", 'the imported version stays whole')
})

test('%env lists the environment with secret-looking values hidden; setting one does not echo it', async (t) => {
  const kernel = await startKernel()
  t.after(() => kernel.shutdown())
  const listed = await kernel.execute("import os\nos.environ['PK_DOC_API_TOKEN'] = 's3cret-value'\nos.environ['PK_DOC_PLAIN'] = 'plain-value'\n%env")
  assert.equal(listed.status, 'ok', JSON.stringify(listed.error))
  const text = listed.result['text/plain']
  assert.match(text, /'PK_DOC_PLAIN': 'plain-value'/)
  assert.match(text, /'PK_DOC_API_TOKEN': '<hidden>'/)
  assert.doesNotMatch(text, /s3cret-value/)
  const set = await kernel.execute('%env PK_DOC_PASSWORD=hunter2')
  assert.equal(set.stdout, 'env: PK_DOC_PASSWORD=<hidden>\n')
  assert.equal((await kernel.execute("import os\nos.environ['PK_DOC_PASSWORD']")).result['text/plain'], "'hunter2'", 'the value is set all the same')
  assert.equal((await kernel.execute('%env PK_DOC_SHOWN=visible')).stdout, 'env: PK_DOC_SHOWN=visible\n')
})

test('%cd - returns to the previous directory; with none it says so', async (t) => {
  const kernel = await startKernel({ cwd: '/' })
  t.after(() => kernel.shutdown())
  const none = await kernel.execute('%cd -')
  assert.equal(none.status, 'error')
  assert.match(none.error.evalue, /no previous directory/)
  const tmp = require('node:fs').realpathSync(require('node:os').tmpdir())
  await kernel.execute(`%cd ${tmp}`)
  await kernel.execute('%cd /usr')
  await kernel.execute('%cd -')
  assert.equal((await kernel.execute('import os\nos.getcwd()')).result['text/plain'], `'${tmp}'`)
  await kernel.execute('%cd -')
  assert.equal((await kernel.execute('os.getcwd()')).result['text/plain'], "'/usr'", 'and back again')
})

test('%pip installs offline, streams, and evicts the modules of changed distributions', async (t) => {
  const dist = pipDistribution(t, { name: 'pkdemo-dist', module: 'pkdemo', prefix: 'pykernel-pip-' })
  const kernel = await startKernel({ cwd: dist.dir })
  t.after(() => kernel.shutdown())
  const install = (version) => ok(kernel, dist.pipLine(version), { timeoutMs: 120000 })

  const first = await install('1')
  assert.match(first.result.stdout, /Successfully installed pkdemo-dist-1/)
  assert.ok(first.events.filter((e) => e.type === 'stdout').length >= 2, 'pip output streamed in pieces')
  const [status1] = statuses(first.events, 'pip')
  assert.equal(status1.data.command, 'install')
  assert.equal(status1.data.returncode, 0)
  assert.deepEqual(status1.data.changed, ['pkdemo-dist==1'])
  assert.equal(await value(kernel, 'import pkdemo\npkdemo.__version__'), "'1'")

  const second = await install('2')
  assert.deepEqual(statuses(second.events, 'pip')[0].data.evicted, ['pkdemo'])
  assert.equal(await value(kernel, "import sys\n'pkdemo' in sys.modules"), 'False')
  assert.equal(await value(kernel, 'import pkdemo\npkdemo.__version__'), "'2'")

  const removed = await ok(kernel, '%pip uninstall pkdemo-dist', { timeoutMs: 60000 })
  const [status3] = statuses(removed.events, 'pip')
  assert.deepEqual(status3.data.removed, ['pkdemo-dist'])
  assert.deepEqual(status3.data.evicted, ['pkdemo'])
  assert.equal((await run(kernel, 'import pkdemo')).result.error.ename, 'ModuleNotFoundError')

  const failed = await run(kernel, '%pip install --no-index no-such-dist-pkdemo', { timeoutMs: 60000 })
  assert.equal(failed.result.status, 'ok')
  assert.match(failed.result.stderr, /Command exited with code 1/)
  assert.equal(statuses(failed.events, 'pip')[0].data.returncode, 1)
})
