'use strict'
// The pykernel CLI (bin/pykernel.js), run as a child process against real Python.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile, execFileSync, spawn } = require('node:child_process')

const bin = path.join(__dirname, '..', '..', 'bin', 'pykernel.js')
const python = process.env.PYKERNEL_TEST_PYTHON || undefined
const pythonArgs = python ? ['--python', python] : []

// A 1x1 PNG.
const TINY_PNG =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

/** Runs the CLI to completion: { code, signal, stdout, stderr }. `input` is piped to stdin. */
function cli(args, { input = '', cwd, env, timeout = 30000 } = {}) {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [bin, ...args], { cwd, env, timeout }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, signal: err ? err.signal : null, stdout, stderr })
    })
    child.stdin.end(input)
  })
}

function tmpdir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'pykernel-cli-test-'))
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Runs the CLI on `code`, presses Ctrl-C (SIGINT to the CLI alone, as the terminal sends
 * it to the foreground group, which the kernel is not in) `presses` times, 300 ms apart,
 * once the cell printed "ready". { code, stdout, stderr, waitedMs: from the last press to the exit }.
 */
async function pressCtrlC(code, presses) {
  const child = spawn(process.execPath, [bin, 'exec', code, ...pythonArgs], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c) => (stdout += c))
  child.stderr.on('data', (c) => (stderr += c))
  const closed = new Promise((resolve) => child.on('close', (exitCode) => resolve([exitCode, Date.now()])))
  while (!stdout.includes('ready') && child.exitCode === null) await sleep(25)
  let pressedAt
  for (let i = 0; i < presses; i++) {
    if (i) await sleep(300)
    child.kill('SIGINT')
    pressedAt = Date.now()
  }
  const [exitCode, exitedAt] = await closed
  return { code: exitCode, stdout, stderr, waitedMs: exitedAt - pressedAt }
}

const IGNORES_CTRL_C =
  'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint("ready", flush=True)\ntime.sleep(30)'

// Started with the file, checked by its test below: the library's 5 s interrupt grace
// then passes while the other tests run.
const ignoredCtrlC = pressCtrlC(IGNORES_CTRL_C, 1)

test('exec prints stdout', async () => {
  const r = await cli(['exec', 'print(1+1)', ...pythonArgs])
  assert.equal(r.stderr, '')
  assert.equal(r.stdout, '2\n')
  assert.equal(r.code, 0)
})

test('exec echoes a final expression after the output', async () => {
  const r = await cli(['exec', 'print("a")\n1 + 1', ...pythonArgs])
  assert.equal(r.stdout, 'a\n2\n')
  assert.equal(r.code, 0)
})

test('exec sends stderr to stderr', async () => {
  const r = await cli(['exec', 'import sys\nsys.stderr.write("oops\\n")\nprint("fine")', ...pythonArgs])
  assert.equal(r.stdout, 'fine\n')
  assert.match(r.stderr, /oops/)
  assert.equal(r.code, 0)
})

test('exec streams output while the cell runs', async () => {
  const code = 'import time\nprint("first", flush=True)\ntime.sleep(1.0)\nprint("second", flush=True)'
  const child = spawn(process.execPath, [bin, 'exec', code, ...pythonArgs], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let firstAt
  let secondAt
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (chunk) => {
    stdout += chunk
    if (firstAt === undefined && stdout.includes('first')) firstAt = Date.now()
    if (secondAt === undefined && stdout.includes('second')) secondAt = Date.now()
  })
  const exitedAt = await new Promise((resolve) => child.on('close', () => resolve(Date.now())))
  assert.equal(stdout, 'first\nsecond\n')
  assert.ok(firstAt < exitedAt, 'the first line arrives before the process exits')
  // Live: the first line is not held back until the second one exists.
  assert.ok(secondAt - firstAt >= 500, `first line arrived only ${secondAt - firstAt} ms before the second`)
})

test('an exception exits 1 with the traceback on stderr', async () => {
  const r = await cli(['exec', "raise ValueError('x')", ...pythonArgs])
  assert.equal(r.code, 1)
  assert.equal(r.stdout, '')
  assert.match(r.stderr, /Traceback \(most recent call last\)/)
  assert.match(r.stderr, /ValueError: x/)
})

test("a cell's own KernelDied is printed as any exception is; only a real death is reported as one", async () => {
  const r = await cli(['exec', "class KernelDied(Exception): pass\nraise KernelDied('mine')", ...pythonArgs])
  assert.equal(r.code, 1)
  assert.match(r.stderr, /^Traceback \(most recent call last\):\n[^]*\nKernelDied: mine\n$/)
  assert.doesNotMatch(r.stderr, /pykernel: /)
  const died = await cli(['exec', 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)', ...pythonArgs])
  assert.equal(died.code, 1)
  assert.equal(died.stderr, 'pykernel: the Python kernel died during the cell (killed by signal 9 (SIGKILL); possibly out of memory)\n')
})

test('--json prints every event as NDJSON and ends with done', async () => {
  const r = await cli(['exec', '--json', 'print("hi")\n40 + 2', ...pythonArgs])
  assert.equal(r.code, 0)
  assert.ok(r.stdout.endsWith('\n'))
  const lines = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l))
  assert.deepEqual(lines[0], { type: 'stdout', text: 'hi\n' })
  assert.deepEqual(lines[1], { type: 'result', bundle: { 'text/plain': '42' } })
  const last = lines[lines.length - 1]
  assert.equal(last.type, 'done')
  assert.equal(last.result.status, 'ok')
  assert.equal(last.result.executionCount, 1)
  assert.deepEqual(last.result.result, { 'text/plain': '42' })
  assert.equal(lines.length, 3)
})

test('--json with an error: error event, done with status error, exit 1', async () => {
  const r = await cli(['exec', '--json', '1/0', ...pythonArgs])
  assert.equal(r.code, 1)
  const lines = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l))
  assert.equal(lines[0].type, 'error')
  assert.equal(lines[0].ename, 'ZeroDivisionError')
  assert.equal(lines.at(-1).type, 'done')
  assert.equal(lines.at(-1).result.status, 'error')
})

test('run executes a file without changing the working directory', async () => {
  const dir = tmpdir()
  const cwd = tmpdir()
  const file = path.join(dir, 'script.py')
  fs.writeFileSync(file, 'import os\nprint("from file")\nprint(os.getcwd())\n')
  const r = await cli(['run', file, ...pythonArgs], { cwd })
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout, `from file\n${fs.realpathSync(cwd)}\n`)
})

test("--cwd: the kernel starts there and finds its .venv; a script's file is found from the shell's cwd", async () => {
  const project = fs.realpathSync(tmpdir())
  const shell = fs.realpathSync(tmpdir())
  execFileSync(python || 'python3', ['-m', 'venv', '--without-pip', path.join(project, '.venv')])
  fs.writeFileSync(path.join(shell, 'where.py'), 'import os, sys\nprint(os.getcwd(), sys.prefix, __file__)\n')
  // No --python, nothing that outranks a cwd's .venv: discovery from --cwd finds it.
  const env = { ...process.env }
  delete env.VIRTUAL_ENV
  delete env.CONDA_PREFIX
  const venv = path.join(project, '.venv')
  const [exec, script, check, relative] = await Promise.all([
    cli(['exec', 'import os, sys\nprint(os.getcwd(), sys.prefix)', '--cwd', project], { cwd: shell, env }),
    cli(['--cwd', project, 'run', 'where.py'], { cwd: shell, env }),
    cli(['check', `--cwd=${project}`], { cwd: shell, env }),
    cli(['--cwd', path.relative(shell, project), 'repl'], { cwd: shell, env, input: 'import os\nos.getcwd()\n' }),
  ])
  assert.equal(exec.stdout, `${project} ${venv}\n`, exec.stderr)
  assert.equal(exec.code, 0)
  assert.equal(script.stdout, `${project} ${venv} ${path.join(shell, 'where.py')}\n`, script.stderr)
  assert.equal(script.code, 0)
  assert.match(check.stdout, new RegExp(`^interpreter: ${venv}/bin/python$`, 'm'))
  assert.match(check.stdout, /^source: +venv$/m)
  assert.equal(relative.stdout, `Out[2]: '${project}'\n`, relative.stderr)
})

test('--cwd must name a directory: a usage error, exit 2', async () => {
  const file = path.join(tmpdir(), 'file.txt')
  fs.writeFileSync(file, '')
  const cases = [
    [['--cwd', '/nonexistent/pykernel-dir', 'exec', '1'], '--cwd /nonexistent/pykernel-dir: no such directory'],
    [['exec', '1', '--cwd', file], `--cwd ${file}: not a directory`],
    [['check', '--cwd'], '--cwd needs a value'],
    [['--cwd', 'relative', '--launcher', 'env', '-c', '1'], "--cwd with --launcher is the far side's directory: give it as an absolute path, not 'relative'"],
  ]
  const results = await Promise.all(cases.map(([args]) => cli(args)))
  results.forEach((r, i) => {
    assert.deepEqual([r.code, r.stdout, r.stderr], [2, '', `pykernel: ${cases[i][1]}; see pykernel --help\n`])
  })
})

/** A script that prints what python gives a script: its names, argv and import path. */
function writeIntrospectingScript(dir) {
  fs.writeFileSync(path.join(dir, 'helper.py'), 'WHERE = "beside the script"\n')
  const script = path.join(dir, 'show.py')
  fs.writeFileSync(
    script,
    'import json, sys\nimport helper\n' +
      'print(json.dumps([__name__, __file__, sys.argv, sys.path[0], helper.WHERE]))\n' +
      'import __main__\nassert __main__.__dict__ is globals()\n' +
      '1 + 1\n', // not echoed: a script, not a cell
  )
  return script
}

test('run gives the script what python gives it: __main__, __file__, sys.argv, sys.path[0]', async () => {
  const dir = fs.realpathSync(tmpdir()) // what os.getcwd() gives
  const script = writeIntrospectingScript(dir)
  // A relative path, and arguments that look like pykernel's own options.
  const r = await cli([...pythonArgs, 'run', 'show.py', '--python', 'x', '--json', '-c', '--', 'y'], { cwd: dir })
  assert.equal(r.stderr, '')
  assert.deepEqual(JSON.parse(r.stdout), [
    '__main__',
    script,
    ['show.py', '--python', 'x', '--json', '-c', '--', 'y'],
    dir,
    'beside the script',
  ])
  assert.equal(r.code, 0)
})

test("run: pykernel's options go before the script", async () => {
  const dir = tmpdir()
  const script = writeIntrospectingScript(dir)
  const r = await cli(['--json', 'run', ...pythonArgs, script, 'arg'], { cwd: dir })
  assert.equal(r.code, 0, r.stderr)
  const events = r.stdout.trimEnd().split('\n').map((line) => JSON.parse(line))
  assert.deepEqual(JSON.parse(events[0].text)[2], [script, 'arg'])
  assert.equal(events.at(-1).type, 'done')
})

test("a script's traceback names its file and lines, not the cell that ran it", async () => {
  const dir = tmpdir()
  const script = path.join(dir, 'fails.py')
  fs.writeFileSync(script, 'def f():\n    return 1 / 0\n\nf()\n')
  const broken = path.join(dir, 'broken.py')
  fs.writeFileSync(broken, 'x = 1\ny = (\n')
  const [r, syntax] = await Promise.all([cli(['run', script, ...pythonArgs]), cli(['run', broken, ...pythonArgs])])
  assert.equal(r.code, 1)
  assert.equal(
    r.stderr,
    'Traceback (most recent call last):\n' +
      `  File "${script}", line 4, in <module>\n    f()\n` +
      `  File "${script}", line 2, in f\n    return 1 / 0\n           ~~^~~\n` +
      'ZeroDivisionError: division by zero\n',
  )
  assert.equal(syntax.code, 1)
  assert.match(syntax.stderr, new RegExp(`^  File "${broken}", line 2\\n    y = \\(\\n.*\\nSyntaxError: `))
  assert.doesNotMatch(r.stderr + syntax.stderr, /<cell/)
})

test('sys.exit in a script is the exit status, as python gives it', async () => {
  const cases = [
    ['import sys\nsys.exit(3)', 3, ''],
    ['import sys\nsys.exit()', 0, ''],
    ['import sys\nsys.exit(0)', 0, ''],
    ['raise SystemExit(256 + 4)', 4, ''],
    ['import sys\nsys.exit("no input given")', 1, 'no input given\n'],
    ['exit(5)', 5, ''],
  ]
  const results = await Promise.all(cases.map(([code]) => cli([...pythonArgs, '-c', code])))
  results.forEach((r, i) => {
    assert.deepEqual([r.code, r.stderr], [cases[i][1], cases[i][2]], cases[i][0])
  })
})

test("-c runs code as one script: sys.argv[0] is '-c', tracebacks name <string>", async () => {
  const r = await cli([...pythonArgs, '-c', 'import sys\nprint(sys.argv, __name__)\n1 / 0', 'a', '--json'])
  assert.equal(r.stdout, "['-c', 'a', '--json'] __main__\n")
  assert.equal(
    r.stderr,
    'Traceback (most recent call last):\n  File "<string>", line 3, in <module>\nZeroDivisionError: division by zero\n',
  )
  assert.equal(r.code, 1)
})

test('-, run - and plain pykernel with piped stdin run stdin as one script', async () => {
  const input = 'import sys\nprint(sys.argv)\n2 + 2\nraise KeyError("k")\nprint("not reached")\n'
  const [dash, runDash, plain] = await Promise.all([
    cli([...pythonArgs, '-', 'a'], { input }),
    cli([...pythonArgs, 'run', '-', 'b'], { input }),
    cli([...pythonArgs], { input }),
  ])
  assert.equal(dash.stdout, "['-', 'a']\n")
  assert.equal(runDash.stdout, "['-', 'b']\n")
  assert.equal(plain.stdout, "['']\n")
  for (const r of [dash, runDash, plain]) {
    assert.equal(r.stderr, 'Traceback (most recent call last):\n  File "<stdin>", line 4, in <module>\nKeyError: \'k\'\n')
    assert.equal(r.code, 1)
  }
})

test('run with a missing file names it, in one line, and exits 2', async () => {
  const r = await cli(['run', 'pykernel-no-such-file.py', 'arg', ...pythonArgs], { cwd: tmpdir() })
  assert.equal(r.code, 2)
  assert.equal(r.stdout, '')
  assert.equal(r.stderr, 'pykernel: cannot read pykernel-no-such-file.py: no such file; see pykernel --help\n')
})

test('displayed images are saved to files and their paths printed', async () => {
  const dir = tmpdir()
  const imagesDir = path.join(dir, 'images')
  const code = `print("before")\ndisplay({"image/png": "${TINY_PNG}", "text/plain": "<png>"}, raw=True)\nprint("after")`
  const r = await cli(['exec', code, '--images-dir', imagesDir, ...pythonArgs])
  assert.equal(r.code, 0, r.stderr)
  const m = r.stdout.match(/^before\n\[image saved: (.+)\]\nafter\n$/)
  assert.ok(m, `unexpected stdout: ${JSON.stringify(r.stdout)}`)
  assert.equal(path.dirname(m[1]), imagesDir)
  assert.equal(path.basename(m[1]), 'pykernel-image-1.png')
  assert.deepEqual(fs.readFileSync(m[1]).subarray(0, 8), PNG_MAGIC)
})

test('images go to a new temporary folder by default', async () => {
  const code = `display({"image/png": "${TINY_PNG}", "text/plain": "<png>"}, raw=True)`
  const r = await cli(['exec', code, ...pythonArgs])
  assert.equal(r.code, 0, r.stderr)
  const m = r.stdout.match(/^\[image saved: (.+)\]\n$/)
  assert.ok(m, `unexpected stdout: ${JSON.stringify(r.stdout)}`)
  assert.ok(m[1].startsWith(path.join(os.tmpdir(), 'pykernel-images-')))
  assert.deepEqual(fs.readFileSync(m[1]).subarray(0, 8), PNG_MAGIC)
  fs.rmSync(path.dirname(m[1]), { recursive: true, force: true })
})

test('displays are rendered by the addon: HTML shows as Markdown, an image drops its text stand-in', async () => {
  const dir = tmpdir()
  const code = [
    'display({"text/html": "<b>bold</b>"}, raw=True)',
    `display({"image/png": "${TINY_PNG}", "text/plain": "<Figure>"}, raw=True)`,
  ].join('\n')
  const r = await cli(['exec', code, '--images-dir', dir, ...pythonArgs])
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout, `**bold**\n[image saved: ${path.join(dir, 'pykernel-image-1.png')}]\n`)
})

test('repl with piped stdin runs cells and shows Out[N]', async () => {
  const r = await cli(['repl', ...pythonArgs], { input: 'x = 5\nx * 2\n' })
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout, 'Out[2]: 10\n')
})

test('repl splits blocks: colon lines wait for a blank line, brackets for closing', async () => {
  const input = [
    'for i in range(2):',
    '    print(i)',
    '',
    'total = (1 +',
    '         2)',
    'total',
    'def f(a):',
    '    return a * 3',
    '',
    'f(total)',
    'exit',
    'print("not reached")',
  ].join('\n')
  const r = await cli(['repl', ...pythonArgs], { input })
  assert.equal(r.code, 0, r.stderr)
  assert.equal(r.stdout, '0\n1\nOut[3]: 3\nOut[5]: 9\n')
})

test('repl keeps going after an error and exits 1', async () => {
  const r = await cli(['repl', ...pythonArgs], { input: 'raise KeyError("k")\n"still here"\n' })
  assert.equal(r.code, 1)
  assert.match(r.stderr, /KeyError: 'k'/)
  assert.equal(r.stdout, "Out[2]: 'still here'\n")
})

test("repl asks the kernel's Python whether input is complete: strings, f-strings, decorators, blocks, cell magics", async () => {
  const input = [
    'x = 5',
    `f"{f'{x!r}'}"`,
    's = """one',
    '',
    'two"""',
    's',
    'def twice(f):',
    '    return lambda: f() * 2',
    '',
    '@twice',
    'def g():',
    '    return 21',
    '',
    'g()',
    'if x > 1:',
    '    print("big")',
    '',
    '%%bash',
    'echo from bash',
    '',
    '!echo shell line',
    '1 +* 2',
    'x',
  ].join('\n')
  const r = await cli(['repl', ...pythonArgs], { input })
  assert.equal(
    r.stdout,
    "Out[2]: '5'\nOut[4]: 'one\\n\\ntwo'\nOut[7]: 42\nbig\nfrom bash\nshell line\nOut[12]: 5\n",
    r.stderr,
  )
  // The line that cannot compile ran as it was, and Python said why.
  assert.match(r.stderr, /^ {4}1 \+\* 2\n.*\nSyntaxError: invalid syntax\n$/m)
  assert.equal(r.code, 1)
})

/** Python 3.12 (pyenv's), whose f-strings nest the same quotes and span lines, or undefined. */
function python312() {
  const versions = path.join(os.homedir(), '.pyenv', 'versions')
  const dir = fs.existsSync(versions) && fs.readdirSync(versions).find((v) => v.startsWith('3.12.'))
  return dir ? path.join(versions, dir, 'bin', 'python3.12') : undefined
}

test('repl on Python 3.12: f-strings that nest the same quotes, and span lines', { skip: python312() ? false : 'no Python 3.12 under ~/.pyenv' }, async () => {
  const input = ['x = 5', 'f"{f"{x!r}"}"', 'f"{"("}"', 'f"{', 'x + 1', '}"'].join('\n')
  const r = await cli(['repl', '--python', python312()], { input })
  assert.equal(r.stdout, "Out[2]: '5'\nOut[3]: '('\nOut[4]: '6'\n", r.stderr)
  assert.equal(r.code, 0)
})

test('--timeout interrupts a long cell and exits 1', async () => {
  const started = Date.now()
  const r = await cli(['exec', 'import time\ntime.sleep(20)', '--timeout', '0.5', ...pythonArgs])
  assert.equal(r.code, 1)
  assert.match(r.stderr, /timed out after 0\.5 s/)
  assert.ok(Date.now() - started < 10000)
})

test('--timeout 0 is no limit, as the library\'s timeoutMs: 0', async () => {
  const r = await cli(['exec', 'import time\ntime.sleep(0.3)\nprint("done")', '--timeout', '0', ...pythonArgs])
  assert.equal(r.stderr, '')
  assert.equal(r.stdout, 'done\n')
  assert.equal(r.code, 0)
})

test('Ctrl-C interrupts the running cell and exits 130', async () => {
  const r = await pressCtrlC('import time\nprint("ready", flush=True)\ntime.sleep(30)', 1)
  assert.equal(r.code, 130)
  assert.match(r.stderr, /KeyboardInterrupt/)
  assert.ok(r.waitedMs < 2000, `exited ${r.waitedMs} ms after Ctrl-C`)
})

test('Ctrl-C on a cell that ignores it: the kernel is killed after the 5 s grace, one line, exit 130', async () => {
  const r = await ignoredCtrlC
  assert.equal(r.stdout, 'ready\n')
  assert.equal(r.stderr, 'pykernel: the kernel did not respond to the interrupt and was killed\n')
  assert.equal(r.code, 130)
  assert.ok(r.waitedMs >= 4500 && r.waitedMs < 9000, `exited ${r.waitedMs} ms after Ctrl-C`)
})

test('a second Ctrl-C exits at once', async () => {
  const r = await pressCtrlC(IGNORES_CTRL_C, 2)
  assert.equal(r.stderr, 'pykernel: interrupted again; exiting\n')
  assert.equal(r.code, 130)
  assert.ok(r.waitedMs < 1500, `exited ${r.waitedMs} ms after the second Ctrl-C`)
})

test("a script's kernel death gives python's status: os._exit(n) is n, a signal s is 128+s", async () => {
  const [exited, signalled] = await Promise.all([
    cli([...pythonArgs, '-c', 'import os; os._exit(7)']),
    cli([...pythonArgs, '-c', 'import os, signal; os.kill(os.getpid(), signal.SIGTERM)']),
  ])
  assert.equal(exited.code, 7, exited.stderr)
  assert.equal(signalled.code, 143, signalled.stderr)
})

test('a dying kernel is reported in exactly one line, with its exit code or signal, and exits 1', async () => {
  const [exited, killed, crashed] = await Promise.all(
    [
      'import os\nos._exit(3)',
      'import os, signal\nos.kill(os.getpid(), signal.SIGKILL)',
      'import ctypes\nctypes.string_at(0)',
    ].map((code) => cli(['exec', code, ...pythonArgs])),
  )
  assert.equal(exited.stderr, 'pykernel: the Python kernel died during the cell (exit code 3)\n')
  const deathLines = (r) => r.stderr.split('\n').filter((line) => /died/.test(line))
  assert.deepEqual(deathLines(killed), [
    'pykernel: the Python kernel died during the cell (killed by signal 9 (SIGKILL); possibly out of memory)',
  ])
  assert.deepEqual(deathLines(crashed), ['pykernel: the Python kernel died during the cell (killed by signal 11 (SIGSEGV))'])
  // Before it, the crash's fault report from the kernel's stderr, one line per line.
  assert.match(crashed.stderr, /^Fatal Python error: Segmentation fault\n\n/)
  assert.ok(crashed.stderr.endsWith('\npykernel: the Python kernel died during the cell (killed by signal 11 (SIGSEGV))\n'))
  for (const r of [exited, killed, crashed]) {
    assert.equal(r.code, 1)
    assert.equal(r.stdout, '')
  }
})

test('check reports the interpreter and its source', async () => {
  const r = await cli(['check', ...pythonArgs])
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, /^interpreter: \S+/m)
  assert.match(r.stdout, /^source: +\w+/m)
  assert.match(r.stdout, /^version: +3\.\d+/m)
  // This machine gives every protection (user namespaces and Landlock ABI 6+).
  assert.match(r.stdout, /^sandbox: +namespaces\+landlock \(.*pid-namespace.*signal-scope/m)
  assert.doesNotMatch(r.stdout, /not enforced/)
  assert.ok(python, 'PYKERNEL_TEST_PYTHON names the interpreter (npm test sets it)')
  assert.ok(r.stdout.includes(python))
  assert.match(r.stdout, /^source: +explicit$/m)
})

test('check names why a machine refuses user namespaces and how to allow them, beside what a kernel loses', async () => {
  // A seccomp filter refuses new user namespaces, as Docker's default profile does.
  const launcher = path.join(__dirname, '..', 'helpers', 'host-launcher.py')
  const seccomp = await new Promise((resolve) => {
    execFile('python3', [launcher, '--no-userns', '--', process.execPath, bin, 'check', ...pythonArgs], { timeout: 60000 }, (err, stdout, stderr) =>
      resolve({ code: err ? err.code : 0, stdout, stderr }),
    )
  })
  assert.equal(seccomp.code, 0, seccomp.stderr)
  assert.match(seccomp.stdout, /^sandbox: +landlock /m)
  assert.match(seccomp.stdout, /^ {2}not enforced: no session installs/m)
  assert.match(seccomp.stdout, /^user namespaces: refused: a seccomp filter refuses them/m)
  assert.match(seccomp.stdout, /^ {2}to allow them: run the container with a seccomp profile that allows unshare/m)
  assert.match(seccomp.stdout, /^ {2}to allow them: or keep the container as the sandbox/m)
  const off = await cli(['check', ...pythonArgs], { env: { ...process.env, PYKERNEL_SANDBOX_NAMESPACES: '0' } })
  assert.equal(off.code, 0, off.stderr)
  assert.match(off.stdout, /^user namespaces: refused: PYKERNEL_SANDBOX_NAMESPACES=0 .*\n {2}to allow them: unset PYKERNEL_SANDBOX_NAMESPACES$/m)
  const json = await cli(['check', '--json', ...pythonArgs], { env: { ...process.env, PYKERNEL_SANDBOX_NAMESPACES: '0' } })
  const report = JSON.parse(json.stdout)
  assert.deepEqual(report.availability.isolation.userNamespaces.fix, ['unset PYKERNEL_SANDBOX_NAMESPACES'])
  // Where they are given, nothing is said of them.
  const given = await cli(['check', ...pythonArgs])
  assert.doesNotMatch(given.stdout, /user namespaces/)
})

test('the sandbox\'s refusals are told on stderr with the flag that allows them; --writable adds a directory', async () => {
  const cwd = tmpdir()
  const elsewhere = fs.mkdtempSync(path.join('/var/tmp', 'pykernel-cli-writable-'))
  const target = path.join(elsewhere, 'out.txt')
  const code = `open(${JSON.stringify(target)}, 'w').write('x')`
  const refused = await cli(['exec', code, ...pythonArgs], { cwd })
  assert.equal(refused.code, 1)
  assert.match(refused.stderr, /PermissionError|Read-only file system/)
  assert.ok(refused.stderr.includes(`pykernel: the sandbox refused writing ${target} (--writable <dir> allows a directory)`), refused.stderr)
  const allowed = await cli(['exec', code, '--writable', elsewhere, ...pythonArgs], { cwd })
  assert.equal(allowed.code, 0, allowed.stderr)
  assert.equal(fs.readFileSync(target, 'utf8'), 'x')
  const launched = await cli(['exec', '1', '--writable', elsewhere, '--launcher', 'env'])
  assert.equal(launched.code, 2)
  assert.match(launched.stderr, /--writable is for kernels here/)
  fs.rmSync(elsewhere, { recursive: true, force: true })
})

test('check with an unusable interpreter exits 1', async () => {
  const r = await cli(['check', '--python', '/nonexistent/python3'])
  assert.equal(r.code, 1)
  assert.match(r.stderr, /pykernel: .*\/nonexistent\/python3/)
})

test('a start-up error prints pykernel: <message> naming --python, and exits 2', async () => {
  const r = await cli(['exec', 'print(1)', '--python', '/nonexistent/python3'])
  assert.equal(r.code, 2)
  assert.equal(
    r.stderr,
    'pykernel: interpreter /nonexistent/python3 is not usable: /nonexistent/python3 does not exist. ' +
      'Pass a Python 3.8+ executable as --python <path>.\n',
  )
  assert.equal(r.stdout, '')
})

test('with no Python to be found, the error says to pass --python', async () => {
  // No venv in cwd, nothing on PATH, no HOME: discovery finds nothing.
  const env = { PATH: '/nonexistent' }
  const [run, check] = await Promise.all([
    cli(['exec', 'print(1)'], { cwd: tmpdir(), env }),
    cli(['check'], { cwd: tmpdir(), env }),
  ])
  assert.equal(run.code, 2)
  assert.match(run.stderr, /^pykernel: no usable Python found \(tried: .*\)\. Install Python 3\.8\+ or pass --python <path>/)
  assert.equal(check.code, 1)
  assert.match(check.stderr, /^pykernel: no usable Python found .* pass --python <path>/)
  assert.doesNotMatch(run.stderr + check.stderr, /`interpreter`/)
})

test("--help prints usage, as docs/cli.md shows it", async () => {
  const help = await cli(['--help'])
  assert.equal(help.code, 0)
  assert.match(help.stdout, /^Usage:/)
  assert.equal(help.stderr, '')
  const readme = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'cli.md'), 'utf8')
  assert.ok(readme.includes('`pykernel --help`:\n\n```\n' + help.stdout + '```\n'), 'docs/cli.md shows another usage text')
})

test('--version and -V print the package version and exit 0', async () => {
  const { version } = require('../../package.json')
  for (const flag of ['--version', '-V']) {
    const r = await cli([flag])
    assert.equal(r.code, 0)
    assert.equal(r.stdout, `pykernel ${version}\n`)
    assert.equal(r.stderr, '')
  }
})

test('a usage error is one line on stderr and exits 2', async () => {
  const cases = [
    [['exec', '--frobnicate', 'print(1)'], "unknown option '--frobnicate'"],
    [['exec', 'print(1)', '--timeout', 'soon'], "--timeout must be a number of seconds (0: no limit), got 'soon'"],
    [['exec', 'print(1)', '--timeout=-1'], "--timeout must be a number of seconds (0: no limit), got '-1'"],
    [['exec', 'print(1)', '--python'], '--python needs a value'],
    [['exec'], 'exec takes exactly one argument: the code to run (quote it)'],
    [['frobnicate'], "unknown command 'frobnicate'"],
    [['exec', '1', '--json=yes'], '--json takes no value'],
    [['-x', 'exec', '1'], "unknown option '-x'"],
    [['exec', '1', '--python', '--json'], "--python needs a value (one that starts with '-' is written --python=<value>)"],
    [['-c'], '-c needs a value'],
    [['exec', '1', '--image-budget', 'off'], '--image-budget is for pykernel mcp (run, exec and the REPL save images whole, see --images-dir)'],
    [['--image-budget', 'maxEdge=800', '-c', '1'], '--image-budget is for pykernel mcp (run, exec and the REPL save images whole, see --images-dir)'],
    [['mcp', '--image-budget', 'maxEdge=big'], "--image-budget takes 'off' or maxEdge=<n>,maxBytes=<n>,maxTotalBytes=<n> (any of them), got 'maxEdge=big'"],
    [['mcp', '--images-dir', '/tmp'], '--images-dir is for run, exec and the REPL; pykernel mcp returns images to its client'],
    [['check', '--images-dir', '/tmp'], '--images-dir is for run, exec and the REPL; check shows no images'],
  ]
  const results = await Promise.all(cases.map(([args]) => cli(args)))
  results.forEach((r, i) => {
    assert.equal(r.stderr, `pykernel: ${cases[i][1]}; see pykernel --help\n`)
    assert.equal(r.stdout, '')
    assert.equal(r.code, 2)
  })
})

test('without its native addon the CLI says what to install, in one line, and exits 2', async () => {
  // The package as npm installs it when the platform package is left out: no .node file.
  const root = path.join(__dirname, '..', '..')
  const copy = tmpdir()
  const { files } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
  for (const entry of ['package.json', ...files]) fs.cpSync(path.join(root, entry), path.join(copy, entry), { recursive: true })
  const env = { ...process.env }
  delete env.NAPI_RS_NATIVE_LIBRARY_PATH
  const run = (args) =>
    new Promise((resolve) => {
      execFile(process.execPath, [path.join(copy, 'bin', 'pykernel.js'), ...args], { env, cwd: copy }, (err, stdout, stderr) =>
        resolve({ code: err ? err.code : 0, stdout, stderr }),
      )
    })
  const results = await Promise.all([run(['exec', '1']), run(['-c', '1']), run(['check']), run(['mcp'])])
  for (const r of results) {
    assert.equal(r.code, 2)
    assert.equal(r.stdout, '')
    assert.match(r.stderr, /^pykernel: pykernel has no native addon for this machine \(linux-x64-gnu\)\. .*`npm run build`.*\n$/)
    assert.equal(r.stderr.split('\n').length, 2, r.stderr)
  }
  // What needs no addon still works.
  assert.equal((await run(['--version'])).code, 0)
})

test('--launcher starts the kernel through a command (words or a JSON array); bad ones are usage errors', async () => {
  const far = "import sys; print(sys.modules['pykernel_runner'].__file__)"
  for (const launcher of ['env', '["env"]']) {
    const r = await cli([...pythonArgs, '--launcher', launcher, '-c', far])
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, /\/pykernel-far-[0-9a-f]{16}\/pykernel_runner\/__init__\.py\n$/)
  }
  const empty = await cli(['--launcher', ' ', '-c', '1'])
  assert.equal(empty.code, 2)
  assert.match(empty.stderr, /--launcher needs a command/)
  const json = await cli(['--launcher', '[1]', '-c', '1'])
  assert.match(json.stderr, /array of strings/)
  const check = await cli(['check', '--launcher', 'env'])
  assert.match(check.stderr, /--launcher does not apply/)
  // --reattach keeps the launched kernel's link; it needs a launcher and a duration.
  const kept = await cli([...pythonArgs, '--launcher', 'env', '--reattach', '30', '-c', far])
  assert.equal(kept.code, 0, kept.stderr)
  for (const [args, said] of [
    [['--reattach', '30', '-c', '1'], /--reattach keeps a launched kernel .*give --launcher too/],
    [['--launcher', 'env', '--reattach', '0', '-c', '1'], /--reattach must be a number of seconds, got '0'/],
    [['--launcher', 'env', '--reattach', 'soon', '-c', '1'], /--reattach must be a number of seconds, got 'soon'/],
    [['--launcher', 'env', '--reattach', '99999', '-c', '1'], /reattach\.graceMs/],
  ]) {
    const r = await cli([...pythonArgs, ...args])
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`)
    assert.match(r.stderr, said)
  }
  const missing = await cli([...pythonArgs, '--launcher', 'no-such-launcher-pk', 'exec', '1'])
  assert.equal(missing.code, 2)
  assert.match(missing.stderr, /cannot run the launcher `no-such-launcher-pk`/)
})
