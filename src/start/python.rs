//! Which Python runs the kernel (docs/api.md#other-exports, `resolvePython`).
//!
//! An explicit interpreter skips discovery. Otherwise the candidates, in order:
//! `VIRTUAL_ENV`, `CONDA_PREFIX`, `<cwd>/.venv`, `<cwd>/venv`, the managed venv
//! (`~/.pykernel/python-env`), then `python` and `python3` on PATH. Each is probed once per
//! process: the probe learns the real `sys.executable`, so a pyenv shim (a shell script that
//! costs tens of milliseconds) is paid for once, not on every kernel start.
//!
//! A candidate can be anything: `<cwd>/.venv/bin/python` comes with whatever repository the
//! agent cloned. So the probe runs with the environment the kernel itself would get (the
//! host's, filtered: no secrets), plus the variables a version manager's shim reads to pick
//! its Python; never with the host's own.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use once_cell::sync::Lazy;

use crate::error::{KernelError, Result};
use crate::process::confined::run_confined;
use crate::sandbox::{Plan, SandboxConfig, Target};
use crate::start::env::{EnvFilter, DEFAULT_ENV_PREFIX};

const MIN_VERSION: (u32, u32) = (3, 8);
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);
const PROBE_CODE: &str =
    "import sys; print(sys.executable); print('%d.%d.%d' % sys.version_info[:3])";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Explicit,
    Venv,
    Conda,
    Managed,
    Path,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Explicit => "explicit",
            Source::Venv => "venv",
            Source::Conda => "conda",
            Source::Managed => "managed",
            Source::Path => "path",
        }
    }
}

/// A chosen interpreter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The real executable (`sys.executable`), what the kernel is spawned with.
    pub path: PathBuf,
    pub version: String,
    pub source: Source,
    /// The virtual environment the interpreter belongs to, if any.
    pub venv: Option<PathBuf>,
}

/// A candidate that was passed over, and why (for `pykernel check`).
#[derive(Debug, Clone)]
pub struct Skipped {
    pub candidate: String,
    pub source: Source,
    pub reason: String,
}

/// Variables pyenv's and asdf's shims read to choose the Python they run. Not secrets;
/// without them a probe through a shim could learn another interpreter than the user chose.
const SHIM_SELECTORS: &[&str] = &[
    "PYENV_VERSION",
    "PYENV_ROOT",
    "PYENV_DIR",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "ASDF_PYTHON_VERSION",
    "ASDF_DEFAULT_TOOL_VERSIONS_FILENAME",
];

#[derive(Debug, Clone)]
pub struct ResolveOptions {
    pub cwd: PathBuf,
    pub interpreter: Option<String>,
    /// The host's environment (unfiltered): VIRTUAL_ENV, CONDA_PREFIX, PATH, HOME are read
    /// here; candidates are probed with it filtered.
    pub base_env: HashMap<String, String>,
    /// Filters `base_env` for the probe as for the kernel (`<PREFIX>API_KEY` is dropped).
    pub env_prefix: String,
    /// Probe in the kernel's sandbox (false only for `sandbox: 'off'`): a candidate is
    /// whatever a repository ships as its Python.
    pub sandboxed: bool,
}

impl Default for ResolveOptions {
    fn default() -> Self {
        Self {
            cwd: PathBuf::new(),
            interpreter: None,
            base_env: HashMap::new(),
            env_prefix: DEFAULT_ENV_PREFIX.to_string(),
            sandboxed: true,
        }
    }
}

impl ResolveOptions {
    /// What a candidate sees when probed: the kernel's filtered environment and the shim
    /// selectors, nothing else of the host's.
    fn probe_env(&self) -> BTreeMap<String, String> {
        let mut env = EnvFilter::new(&self.env_prefix).filter(&self.base_env);
        for name in SHIM_SELECTORS {
            if let Some(value) = self.base_env.get(*name) {
                env.insert((*name).to_string(), value.clone());
            }
        }
        env
    }

    fn skip_check(&self) -> bool {
        self.base_env
            .get(&format!("{}PYTHON_SKIP_CHECK", self.env_prefix))
            .is_some_and(|v| v == "1")
    }
}

/// Resolves the interpreter, returning it and the candidates skipped before it.
pub fn resolve(opts: &ResolveOptions) -> Result<(Resolved, Vec<Skipped>)> {
    // Every candidate is probed in the cwd: a missing one would fail them all, and the
    // error would blame the interpreters.
    check_cwd(&opts.cwd)?;
    if let Some(explicit) = &opts.interpreter {
        let path = explicit_path(explicit, &opts.cwd, &opts.base_env);
        let venv = venv_of(&path);
        return match probe(&path, opts) {
            Ok((exe, version)) => Ok((
                Resolved {
                    path: exe,
                    version,
                    source: Source::Explicit,
                    venv,
                },
                Vec::new(),
            )),
            Err(reason) => Err(KernelError::PythonInvalid {
                path: path.display().to_string(),
                reason,
            }),
        };
    }
    let mut skipped = Vec::new();
    for (candidate, source) in candidates(opts) {
        let Some(path) = candidate.path.filter(|_| candidate.exists) else {
            skipped.push(Skipped {
                candidate: candidate.label,
                source,
                reason: candidate.missing_reason,
            });
            continue;
        };
        match probe(&path, opts) {
            Ok((exe, version)) => {
                // A conda prefix has no pyvenv.cfg, so only real venvs are found here.
                let venv = venv_of(&path);
                return Ok((
                    Resolved {
                        path: exe,
                        version,
                        source,
                        venv,
                    },
                    skipped,
                ));
            }
            Err(reason) => skipped.push(Skipped {
                candidate: path.display().to_string(),
                source,
                reason,
            }),
        }
    }
    let tried = skipped
        .iter()
        .map(|s| format!("{} ({})", s.candidate, s.reason))
        .collect::<Vec<_>>()
        .join("; ");
    Err(KernelError::PythonNotFound { tried })
}

/// The environment changes a chosen interpreter brings: a venv is activated the way its
/// `activate` script would, so `pip` and console scripts of the venv come first on PATH.
pub fn apply_to_env(resolved: &Resolved, env: &mut std::collections::BTreeMap<String, String>) {
    if let Some(venv) = &resolved.venv {
        // A conda environment is named by CONDA_PREFIX (what conda's activate sets), a
        // venv by VIRTUAL_ENV; either way its bin dir leads PATH, so `!pip` and the
        // environment's own tools are the ones a cell runs.
        let variable = if is_conda_env(venv) {
            "CONDA_PREFIX"
        } else {
            "VIRTUAL_ENV"
        };
        env.insert(variable.into(), venv.display().to_string());
        let bin = venv.join("bin").display().to_string();
        let path = match env.get("PATH") {
            Some(old) if !old.is_empty() => format!("{bin}:{old}"),
            _ => bin,
        };
        env.insert("PATH".into(), path);
    }
}

struct Candidate {
    label: String,
    /// The executable it names (none: a variable not set, a name not found on PATH).
    path: Option<PathBuf>,
    exists: bool,
    missing_reason: String,
}

/// One candidate as discovery sees it, before any probe (`pythonCandidates`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// What was looked at: `VIRTUAL_ENV /v`, `cwd venv /p/.venv`, `python on PATH`, ...
    pub label: String,
    pub path: Option<PathBuf>,
    pub source: Source,
    pub exists: bool,
    /// The one `resolve` probes first (the kernel's, unless its probe fails).
    pub chosen: bool,
    pub reason: String,
}

/// Every candidate in discovery order, with filesystem checks only (nothing is run):
/// the explicit interpreter (or that none was given), then those of [`resolve`]. The
/// first that exists is `chosen`; with an explicit interpreter the others are not
/// looked at. An error when the cwd is not a directory, as for `resolve`.
pub fn list_candidates(opts: &ResolveOptions) -> Result<Vec<Listed>> {
    check_cwd(&opts.cwd)?;
    let mut out = Vec::new();
    let explicit = opts
        .interpreter
        .as_ref()
        .map(|given| explicit_path(given, &opts.cwd, &opts.base_env));
    out.push(match &explicit {
        Some(path) => {
            let exists = path.exists();
            Listed {
                label: "interpreter option".into(),
                path: Some(path.clone()),
                source: Source::Explicit,
                exists,
                chosen: exists,
                reason: if exists {
                    "given as interpreter: used without discovery (if it runs as Python 3.8+)"
                        .into()
                } else {
                    format!(
                        "{} does not exist (an explicit interpreter has no fallback: the start fails)",
                        path.display()
                    )
                },
            }
        }
        None => Listed {
            label: "interpreter option".into(),
            path: None,
            source: Source::Explicit,
            exists: false,
            chosen: false,
            reason: "not given".into(),
        },
    });
    let mut chosen = explicit.is_some();
    for (candidate, source) in candidates(opts) {
        let reason = if explicit.is_some() {
            "not looked at: the interpreter option skips discovery".to_string()
        } else if !candidate.exists {
            candidate.missing_reason
        } else if chosen {
            "exists, after the chosen one (probed only if that one is not a usable Python)"
                .to_string()
        } else {
            "the first that exists: probed first, and used if it runs as Python 3.8+".to_string()
        };
        let is_chosen = !chosen && candidate.exists;
        chosen |= is_chosen;
        out.push(Listed {
            label: candidate.label,
            path: candidate.path,
            source,
            exists: candidate.exists,
            chosen: is_chosen,
            reason,
        });
    }
    Ok(out)
}

fn candidates(opts: &ResolveOptions) -> Vec<(Candidate, Source)> {
    let env = &opts.base_env;
    let mut out = Vec::new();
    let in_dir = |dir: PathBuf, label: &str| {
        let exe = dir.join("bin").join("python");
        Candidate {
            label: format!("{label} {}", dir.display()),
            missing_reason: format!("{} does not exist", exe.display()),
            exists: exe.exists(),
            path: Some(exe),
        }
    };
    match env.get("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
        Some(v) => out.push((in_dir(PathBuf::from(v), "VIRTUAL_ENV"), Source::Venv)),
        None => out.push((unset("VIRTUAL_ENV"), Source::Venv)),
    }
    match env.get("CONDA_PREFIX").filter(|v| !v.is_empty()) {
        Some(v) => out.push((in_dir(PathBuf::from(v), "CONDA_PREFIX"), Source::Conda)),
        None => out.push((unset("CONDA_PREFIX"), Source::Conda)),
    }
    out.push((in_dir(opts.cwd.join(".venv"), "cwd venv"), Source::Venv));
    out.push((in_dir(opts.cwd.join("venv"), "cwd venv"), Source::Venv));
    match managed_venv(env) {
        Some(dir) => out.push((in_dir(dir, "managed venv"), Source::Managed)),
        None => out.push((unset("HOME"), Source::Managed)),
    }
    let path_var = env.get("PATH").cloned().unwrap_or_default();
    for name in ["python", "python3"] {
        let found = which::which_in(name, Some(&path_var), &opts.cwd).ok();
        out.push((
            Candidate {
                label: format!("{name} on PATH"),
                missing_reason: "not found on PATH".into(),
                exists: found.is_some(),
                path: found,
            },
            Source::Path,
        ));
    }
    out
}

fn unset(var: &str) -> Candidate {
    Candidate {
        label: var.to_string(),
        path: None,
        exists: false,
        missing_reason: "not set".into(),
    }
}

pub fn managed_venv(env: &HashMap<String, String>) -> Option<PathBuf> {
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| Path::new(home).join(".pykernel").join("python-env"))
}

/// `~` expanded, relative paths taken from `cwd`, bare names looked up on PATH.
fn explicit_path(explicit: &str, cwd: &Path, env: &HashMap<String, String>) -> PathBuf {
    if let Some(rest) = explicit
        .strip_prefix("~/")
        .or((explicit == "~").then_some(""))
    {
        if let Some(home) = env.get("HOME") {
            return Path::new(home).join(rest);
        }
    }
    let path = Path::new(explicit);
    if path.is_absolute() {
        return path.to_path_buf();
    }
    if !explicit.contains('/') {
        let path_var = env.get("PATH").cloned().unwrap_or_default();
        if let Ok(found) = which::which_in(explicit, Some(path_var), cwd) {
            return found;
        }
    }
    cwd.join(path)
}

/// The venv an interpreter at `<venv>/bin/python` belongs to: `pyvenv.cfg` sits above its
/// bin dir. The path is not canonicalized: a venv's python is a symlink to the base
/// interpreter, and following it would lose the venv.
/// The kernel's working directory exists and is a directory.
pub fn check_cwd(cwd: &Path) -> Result<()> {
    match std::fs::metadata(cwd) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(KernelError::CwdInvalid {
            path: cwd.to_path_buf(),
            reason: "is not a directory",
        }),
        Err(_) => Err(KernelError::CwdInvalid {
            path: cwd.to_path_buf(),
            reason: "does not exist",
        }),
    }
}

/// The virtual environment (a `pyvenv.cfg` above the bin dir) or conda environment (a
/// `conda-meta` directory there) an interpreter belongs to.
fn venv_of(exe: &Path) -> Option<PathBuf> {
    let venv = exe.parent()?.parent()?;
    (venv.join("pyvenv.cfg").is_file() || is_conda_env(venv)).then(|| venv.to_path_buf())
}

fn is_conda_env(dir: &Path) -> bool {
    dir.join("conda-meta").is_dir() && !dir.join("pyvenv.cfg").is_file()
}

/// (candidate, cwd, PATH and the shim selectors as probed) -> (real executable, version).
type ProbeKey = (PathBuf, PathBuf, Vec<(String, String)>);
type ProbeCache = HashMap<ProbeKey, (PathBuf, String)>;

static PROBES: Lazy<Mutex<ProbeCache>> = Lazy::new(|| Mutex::new(HashMap::new()));

/// Runs the candidate once to learn its real executable and version. Cached per
/// candidate, cwd (a shim may pick a different Python per directory, `.python-version`) and
/// the variables that steer a shim's choice (`PATH`, `PYENV_VERSION`, ...). Other variables
/// do not pick the interpreter, so kernels with different host-managed or prefixed
/// variables still share one probe.
fn probe(path: &Path, opts: &ResolveOptions) -> std::result::Result<(PathBuf, String), String> {
    if !path.exists() {
        return Err(format!("{} does not exist", path.display()));
    }
    if opts.skip_check() {
        return Ok((path.to_path_buf(), String::new()));
    }
    let env = opts.probe_env();
    let steering = std::iter::once("PATH")
        .chain(SHIM_SELECTORS.iter().copied())
        .filter_map(|name| Some((name.to_string(), env.get(name)?.clone())))
        .collect();
    let key = (path.to_path_buf(), opts.cwd.clone(), steering);
    if let Some(hit) = PROBES.lock().unwrap().get(&key) {
        return Ok(hit.clone());
    }
    let found = run_probe(path, &opts.cwd, &env, opts.sandboxed)?;
    PROBES.lock().unwrap().insert(key, found.clone());
    Ok(found)
}

fn run_probe(
    path: &Path,
    cwd: &Path,
    env: &BTreeMap<String, String>,
    sandboxed: bool,
) -> std::result::Result<(PathBuf, String), String> {
    let config = if sandboxed {
        SandboxConfig::default()
    } else {
        SandboxConfig::Off
    };
    let target = Target::new(cwd);
    let (plan, _) = Plan::prepare(&config, &target).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(path);
    // -S skips site-packages' .pth files (they can cost tens of ms) and the probe needs none.
    cmd.args(["-S", "-c", PROBE_CODE])
        .current_dir(cwd)
        .env_clear()
        .envs(env);
    let output = run_confined(
        cmd,
        &plan,
        PROBE_TIMEOUT,
        crate::process::confined::HELPER_OUTPUT_BYTES,
    )
    .map_err(|e| format!("cannot run it: {e}"))?;
    if output.timed_out {
        return Err(format!(
            "it did not answer within {} s",
            PROBE_TIMEOUT.as_secs()
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let (Some(exe), Some(version)) = (lines.next(), lines.next()) else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stderr = stderr.trim();
        return Err(if stderr.is_empty() {
            format!("it is not Python ({})", output.status)
        } else {
            format!("it is not Python: {}", last_line(stderr))
        });
    };
    if !output.success {
        return Err(format!("it is not Python ({})", output.status));
    }
    let parsed = parse_version(version);
    if parsed.len() != 3 {
        return Err(format!("it is not Python (printed {version:?})"));
    }
    if (parsed[0], parsed[1]) < MIN_VERSION {
        return Err(format!(
            "Python {version} is too old; {}.{}+ is required",
            MIN_VERSION.0, MIN_VERSION.1
        ));
    }
    let exe = if exe.is_empty() {
        path.to_path_buf()
    } else {
        PathBuf::from(exe)
    };
    Ok((exe, version.to_string()))
}

fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or(text)
}

/// `"3.11.4"` -> `[3, 11, 4]` (parts that are not numbers are left out).
fn parse_version(version: &str) -> Vec<u32> {
    version.split('.').filter_map(|p| p.parse().ok()).collect()
}

/// Whether `version` (as [`Resolved::version`] holds it) is at least `major.minor`.
pub fn version_at_least(version: &str, (major, minor): (u32, u32)) -> bool {
    let parsed = parse_version(version);
    parsed.len() >= 2 && (parsed[0], parsed[1]) >= (major, minor)
}

#[cfg(test)]
mod tests {

    #[test]
    fn versions_compare_by_major_and_minor() {
        assert!(version_at_least("3.11.4", (3, 9)));
        assert!(version_at_least("3.9.0", (3, 9)));
        assert!(!version_at_least("3.8.18", (3, 9)));
        assert!(version_at_least("4.0.0", (3, 9)));
        assert!(!version_at_least("", (3, 9)));
        assert!(!version_at_least("3", (3, 9)));
    }

    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn opts(cwd: &Path) -> ResolveOptions {
        ResolveOptions {
            cwd: cwd.to_path_buf(),
            interpreter: None,
            base_env: HashMap::from([
                ("PATH".to_string(), "/nonexistent".to_string()),
                ("HOME".to_string(), cwd.join("home").display().to_string()),
            ]),
            env_prefix: "PYKERNEL_".into(),
            sandboxed: true,
        }
    }

    #[test]
    fn skip_check_is_named_with_the_env_prefix() {
        let dir = std::env::temp_dir();
        let mut o = opts(&dir);
        o.base_env
            .insert("PYKERNEL_PYTHON_SKIP_CHECK".into(), "1".into());
        assert!(o.skip_check());
        o.env_prefix = "ACME_".into();
        assert!(!o.skip_check(), "another brand's switch");
        o.base_env
            .insert("ACME_PYTHON_SKIP_CHECK".into(), "1".into());
        assert!(o.skip_check());
    }

    fn fake_python(dir: &Path, script: &str) -> PathBuf {
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let exe = dir.join("bin").join("python");
        std::fs::write(&exe, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        exe
    }

    #[test]
    fn nothing_found_lists_every_candidate() {
        let dir = tempfile::tempdir().unwrap();
        let err = resolve(&opts(dir.path())).unwrap_err();
        assert_eq!(err.code(), "ERR_PYTHON_NOT_FOUND");
        let msg = err.to_string();
        assert!(msg.contains("VIRTUAL_ENV (not set)"), "{msg}");
        assert!(msg.contains("python3 on PATH (not found on PATH)"), "{msg}");
    }

    #[test]
    fn a_conda_env_is_named_by_conda_prefix_and_its_bin_leads_path() {
        let dir = tempfile::tempdir().unwrap();
        let env = dir.path().join("envs/ml");
        fake_python(&env, "echo /real/conda/python; echo 3.11.4");
        std::fs::create_dir_all(env.join("conda-meta")).unwrap();
        let mut o = opts(dir.path());
        o.base_env
            .insert("CONDA_PREFIX".into(), env.display().to_string());
        let (resolved, _) = resolve(&o).unwrap();
        assert_eq!(resolved.source, Source::Conda);
        assert_eq!(resolved.venv.as_deref(), Some(env.as_path()));
        let mut vars =
            std::collections::BTreeMap::from([("PATH".to_string(), "/usr/bin".to_string())]);
        apply_to_env(&resolved, &mut vars);
        assert_eq!(vars["PATH"], format!("{}/bin:/usr/bin", env.display()));
        assert_eq!(vars["CONDA_PREFIX"], env.display().to_string());
        assert!(!vars.contains_key("VIRTUAL_ENV"));
    }

    #[test]
    fn a_cwd_venv_comes_before_the_managed_one_and_path() {
        let dir = tempfile::tempdir().unwrap();
        fake_python(&dir.path().join(".venv"), "echo /real/python; echo 3.12.1");
        std::fs::write(dir.path().join(".venv/pyvenv.cfg"), "home = /x\n").unwrap();
        fake_python(
            &dir.path().join("home/.pykernel/python-env"),
            "echo /m; echo 3.11.0",
        );
        let (resolved, skipped) = resolve(&opts(dir.path())).unwrap();
        assert_eq!(resolved.source, Source::Venv);
        assert_eq!(resolved.path, PathBuf::from("/real/python"));
        assert_eq!(resolved.version, "3.12.1");
        assert_eq!(
            resolved.venv.as_deref(),
            Some(dir.path().join(".venv").as_path())
        );
        assert_eq!(
            skipped.len(),
            2,
            "VIRTUAL_ENV and CONDA_PREFIX were skipped"
        );
    }

    #[test]
    fn the_listing_follows_discovery_order_and_chooses_the_first_that_exists() {
        let dir = tempfile::tempdir().unwrap();
        fake_python(&dir.path().join("venv"), "exit 1");
        fake_python(&dir.path().join("home/.pykernel/python-env"), "exit 1");
        let listed = list_candidates(&opts(dir.path())).unwrap();
        let labels: Vec<_> = listed.iter().map(|l| l.label.as_str()).collect();
        let cwd = dir.path().display();
        assert_eq!(
            labels,
            [
                "interpreter option".to_string(),
                "VIRTUAL_ENV".into(),
                "CONDA_PREFIX".into(),
                format!("cwd venv {cwd}/.venv"),
                format!("cwd venv {cwd}/venv"),
                format!("managed venv {cwd}/home/.pykernel/python-env"),
                "python on PATH".into(),
                "python3 on PATH".into(),
            ]
        );
        let chosen: Vec<_> = listed.iter().map(|l| l.chosen).collect();
        assert_eq!(
            chosen,
            [false, false, false, false, true, false, false, false]
        );
        assert!(listed[5].exists && listed[5].reason.contains("after the chosen one"));
        assert_eq!(
            listed[3].reason,
            format!("{cwd}/.venv/bin/python does not exist")
        );

        let mut o = opts(dir.path());
        o.interpreter = Some("venv/bin/python".into());
        let listed = list_candidates(&o).unwrap();
        assert!(listed[0].chosen && listed.iter().filter(|l| l.chosen).count() == 1);
        assert!(listed[4].reason.contains("skips discovery"));
    }

    #[test]
    fn managed_venv_comes_before_path() {
        let dir = tempfile::tempdir().unwrap();
        fake_python(
            &dir.path().join("home/.pykernel/python-env"),
            "echo /m; echo 3.11.0",
        );
        let (resolved, _) = resolve(&opts(dir.path())).unwrap();
        assert_eq!(resolved.source, Source::Managed);
    }

    #[test]
    fn old_and_fake_pythons_are_skipped_with_reasons() {
        let dir = tempfile::tempdir().unwrap();
        fake_python(&dir.path().join(".venv"), "echo /old; echo 3.6.9");
        fake_python(&dir.path().join("venv"), "echo not python >&2; exit 1");
        let err = resolve(&opts(dir.path())).unwrap_err().to_string();
        assert!(err.contains("Python 3.6.9 is too old"), "{err}");
        assert!(err.contains("it is not Python: not python"), "{err}");
    }

    #[test]
    fn explicit_interpreter_expands_tilde_and_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        fake_python(&dir.path().join("home/env"), "echo /t; echo 3.10.2");
        std::fs::write(dir.path().join("home/env/pyvenv.cfg"), "").unwrap();
        let mut o = opts(dir.path());
        o.interpreter = Some("~/env/bin/python".into());
        let (r, _) = resolve(&o).unwrap();
        assert_eq!(r.source, Source::Explicit);
        assert_eq!(
            r.venv.as_deref(),
            Some(dir.path().join("home/env").as_path())
        );
        o.interpreter = Some("home/env/bin/python".into());
        assert_eq!(resolve(&o).unwrap().0.version, "3.10.2");
        o.interpreter = Some("./missing/python".into());
        let err = resolve(&o).unwrap_err();
        assert_eq!(err.code(), "ERR_PYTHON_INVALID");
        assert!(err.to_string().contains("does not exist"));
    }

    #[test]
    fn a_venv_leads_path() {
        let resolved = Resolved {
            path: "/v/bin/python".into(),
            version: "3.11.7".into(),
            source: Source::Venv,
            venv: Some("/v".into()),
        };
        let mut env = std::collections::BTreeMap::from([("PATH".into(), "/usr/bin".into())]);
        apply_to_env(&resolved, &mut env);
        assert_eq!(env["PATH"], "/v/bin:/usr/bin");
        assert_eq!(env["VIRTUAL_ENV"], "/v");
    }
    #[test]
    fn a_cloned_venv_python_is_probed_without_the_hosts_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let seen = dir.path().join("probe-env");
        fake_python(
            &dir.path().join(".venv"),
            &format!(
                "/usr/bin/env > {}; echo /stolen; echo 3.12.0",
                seen.display()
            ),
        );
        let mut o = opts(dir.path());
        for (name, value) in [
            ("OPENAI_API_KEY", "sk-test-123"),
            ("PYKERNEL_API_KEY", "pk-test-456"),
            ("GITHUB_TOKEN", "ghp-test-789"),
            ("PYKERNEL_VISIBLE", "visible-ok"),
            ("PYENV_VERSION", "3.12.0"),
        ] {
            o.base_env.insert(name.into(), value.into());
        }
        resolve(&o).unwrap();
        let env = std::fs::read_to_string(&seen).unwrap();
        for secret in ["sk-test-123", "pk-test-456", "ghp-test-789"] {
            assert!(!env.contains(secret), "{secret} reached the probe:\n{env}");
        }
        for kept in [
            "PYKERNEL_VISIBLE=visible-ok",
            "PYENV_VERSION=3.12.0",
            "PATH=/nonexistent",
        ] {
            assert!(env.contains(kept), "{kept} is missing:\n{env}");
        }
    }

    #[test]
    fn the_probe_cache_tells_shim_selections_apart() {
        let dir = tempfile::tempdir().unwrap();
        fake_python(
            &dir.path().join(".venv"),
            "echo /py-${PYENV_VERSION:-none}; echo 3.12.0",
        );
        let mut o = opts(dir.path());
        o.base_env.insert("PYENV_VERSION".into(), "a".into());
        assert_eq!(resolve(&o).unwrap().0.path, PathBuf::from("/py-a"));
        o.base_env.insert("PYENV_VERSION".into(), "b".into());
        assert_eq!(resolve(&o).unwrap().0.path, PathBuf::from("/py-b"));
        // A variable that does not steer the choice shares the cached probe.
        o.base_env.insert("PYKERNEL_OTHER".into(), "x".into());
        assert_eq!(resolve(&o).unwrap().0.path, PathBuf::from("/py-b"));
    }
}
