'use strict'
// The bench venv: `bench/.venv-jupyter`, made on first use with the machine's Python
// (`python3 -m venv`) and holding ipykernel + jupyter_client and pandas. Its python runs
// everything: pykernel's kernels, the Jupyter kernels and the floors, so all rows share
// one interpreter (a venv also skips the base site-packages' .pth files).
const fs = require('node:fs')
const path = require('node:path')
const { execFileSync, spawnSync } = require('node:child_process')

const BENCH = path.resolve(__dirname, '..')
const VENV = process.env.PYKERNEL_BENCH_VENV ? path.resolve(process.env.PYKERNEL_BENCH_VENV) : path.join(BENCH, '.venv-jupyter')
const VENV_PY = path.join(VENV, 'bin', 'python')
const REQUIREMENTS = ['ipykernel==7.4.*', 'jupyter_client==8.10.*']
// For the rows of a new session's first pandas cell (lib/pandas.js): any pandas (numpy
// comes with it); the report names both versions.
const PANDAS = ['pandas']

function log(msg) {
  process.stderr.write(`[bench] ${msg}\n`)
}

/** The machine's base interpreter: PYKERNEL_BENCH_PYTHON, else python3 on PATH resolved
 *  to the real executable (past pyenv shims and any active venv). */
function basePython() {
  const exe = process.env.PYKERNEL_BENCH_PYTHON || 'python3'
  const out = execFileSync(
    exe,
    ['-S', '-c', "import sys; print(getattr(sys, '_base_executable', None) or sys.executable)"],
    { encoding: 'utf8', timeout: 30_000 },
  ).trim()
  return fs.realpathSync(out)
}

function pandasVersions(py) {
  const r = spawnSync(py, ['-c', 'import pandas, numpy; print(pandas.__version__, numpy.__version__)'], {
    encoding: 'utf8',
    timeout: 120_000,
  })
  if (r.status !== 0) return null
  const [pandas, numpy] = r.stdout.trim().split(' ')
  return { pandas, numpy }
}

/** pip-installs `pkgs` into the venv; returns null or why it failed. */
function pipInstall(pkgs) {
  log(`pip install ${pkgs.join(' ')} into the bench venv`)
  const r = spawnSync(VENV_PY, ['-m', 'pip', 'install', '-q', '--disable-pip-version-check', ...pkgs], {
    encoding: 'utf8',
    timeout: 600_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  if (r.status === 0) return null
  return r.error ? r.error.message : (r.stderr || '').trim().split('\n').slice(-1)[0]
}

function jupyterVersions(py) {
  const r = spawnSync(py, ['-c', 'import ipykernel, jupyter_client; print(ipykernel.__version__, jupyter_client.__version__)'], {
    encoding: 'utf8',
    timeout: 60_000,
  })
  if (r.status !== 0) return null
  const [ipk, jc] = r.stdout.trim().split(' ')
  return { ipykernel: ipk, jupyter_client: jc }
}

/**
 * Makes (or reuses) the venv. Never throws: returns {python, base, venv, jupyter, error,
 * pandas, pandasError} where `python` is the interpreter for every row (the venv's when
 * it exists, else the base), `jupyter` is null with `error` set when ipykernel is not
 * usable, and `pandas` ({pandas, numpy} versions) is null with `pandasError` set when
 * pandas is not (also with --no-jupyter, pandas is installed: pykernel's rows need it).
 */
function setup({ skipJupyter = false } = {}) {
  const out = { python: null, base: null, venv: null, jupyter: null, error: null, pandas: null, pandasError: null }
  try {
    out.base = basePython()
  } catch (e) {
    out.error = `no python3: ${e.message.split('\n')[0]}`
    return out
  }
  out.python = out.base
  try {
    if (!fs.existsSync(VENV_PY)) {
      log(`creating ${path.relative(process.cwd(), VENV)} with ${out.base}`)
      execFileSync(out.base, ['-m', 'venv', VENV], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 120_000 })
    }
    out.venv = VENV_PY
    out.python = VENV_PY
  } catch (e) {
    out.error = `venv creation failed: ${(e.stderr || e.message).toString().trim().split('\n').pop()}`
    out.pandasError = out.error
    return out
  }
  out.pandas = pandasVersions(VENV_PY)
  if (!out.pandas) {
    const why = pipInstall(PANDAS)
    out.pandas = pandasVersions(VENV_PY)
    if (!out.pandas) out.pandasError = why ? `pip install pandas failed: ${why}` : 'pandas not importable in the bench venv'
  }
  if (skipJupyter) {
    out.error = 'skipped (--no-jupyter)'
    return out
  }
  let versions = jupyterVersions(VENV_PY)
  const ok = (v) => v && v.ipykernel.startsWith('7.4.') && v.jupyter_client.startsWith('8.10.')
  if (!ok(versions)) {
    const why = pipInstall(REQUIREMENTS)
    if (why) {
      out.error = `pip install failed: ${why}`
      return out
    }
    versions = jupyterVersions(VENV_PY)
  }
  if (!ok(versions)) {
    out.error = `ipykernel/jupyter_client not importable in the bench venv (${JSON.stringify(versions)})`
    return out
  }
  out.jupyter = versions
  return out
}

module.exports = { setup, BENCH, VENV, VENV_PY }
