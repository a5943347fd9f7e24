'use strict'
// The compat venv: `compat/.venv-compat`, made on first use with the machine's Python and
// holding ipykernel + jupyter_client (the bench's versions), nbformat (which every Jupyter
// install has, and plotly's notebook renderer needs) and the libraries of the test venv
// (`__tests__/requirements.txt`: pandas, matplotlib, pillow, plotly). Its python runs both
// sides, pykernel's kernels and ipykernel, so every difference is the kernel's, not the
// interpreter's or a library's.
const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync, spawnSync } = require('node:child_process')

const ROOT = path.resolve(__dirname, '..', '..')
const VENV = process.env.PYKERNEL_COMPAT_VENV
  ? path.resolve(process.env.PYKERNEL_COMPAT_VENV)
  : path.join(ROOT, 'compat', '.venv-compat')
const VENV_PY = path.join(VENV, 'bin', 'python')
const JUPYTER = ['ipykernel==7.4.*', 'jupyter_client==8.10.*', 'nbformat']
const TEST_REQUIREMENTS = path.join(ROOT, '__tests__', 'requirements.txt')

function log(msg) {
  process.stderr.write(`[compat] ${msg}\n`)
}

/** What the venv should hold; its hash is the stamp that says the venv is up to date. */
function wanted() {
  return `${JUPYTER.join('\n')}\n${fs.readFileSync(TEST_REQUIREMENTS, 'utf8')}`
}

/** The versions that decide what a cell shows, as recorded beside the expected outputs. */
function versions(python) {
  const code = [
    'import json, platform, importlib.metadata as m',
    "names = ['ipykernel', 'jupyter_client', 'ipython', 'pandas', 'numpy', 'matplotlib', 'plotly', 'pillow', 'nbformat']",
    'out = {"python": platform.python_version()}',
    'for n in names:',
    '    try: out[n] = m.version(n)',
    '    except m.PackageNotFoundError: out[n] = None',
    'print(json.dumps(out))',
  ].join('\n')
  const r = spawnSync(python, ['-c', code], { encoding: 'utf8', timeout: 60_000 })
  if (r.status !== 0) throw new Error(`cannot read package versions from ${python}: ${r.stderr}`)
  return JSON.parse(r.stdout)
}

/** Makes (or reuses) the venv and returns its python. Throws with pip's last line when
 *  the install fails (no registry, no wheel for this Python). */
function ensureVenv() {
  const stamp = path.join(VENV, '.requirements-sha256')
  const want = crypto.createHash('sha256').update(wanted()).digest('hex')
  if (fs.existsSync(VENV_PY) && fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === want) return VENV_PY
  const base = process.env.PYKERNEL_COMPAT_PYTHON || process.env.PYTHON || 'python3'
  log(`creating ${path.relative(process.cwd(), VENV)} with ${base}`)
  execFileSync(base, ['-m', 'venv', '--clear', VENV], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 120_000 })
  log(`pip install ${JUPYTER.join(' ')} -r __tests__/requirements.txt`)
  const r = spawnSync(
    VENV_PY,
    ['-m', 'pip', 'install', '-q', '--disable-pip-version-check', ...JUPYTER, '-r', TEST_REQUIREMENTS],
    { encoding: 'utf8', timeout: 900_000, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  if (r.status !== 0) {
    const why = r.error ? r.error.message : (r.stderr || '').trim().split('\n').slice(-1)[0]
    throw new Error(`pip install into ${VENV} failed: ${why}`)
  }
  fs.writeFileSync(stamp, want)
  return VENV_PY
}

module.exports = { ensureVenv, versions, VENV, VENV_PY }
