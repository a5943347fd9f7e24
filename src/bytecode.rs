//! The runner's bytecode cache: compiled once per interpreter by a process of its own,
//! then only read by kernels.
//!
//! Compiling the runner costs more than the rest of a kernel's start (about 50 ms), so
//! its bytecode is cached. Python's own cache (`__pycache__`) is written by whichever
//! process imports first, which would let a cell plant bytecode that every later kernel
//! runs. Instead, a short-lived process runs our compile script once per interpreter and
//! runner version, in the kernel's sandbox but with only its cache directory writable,
//! and writes `<runner dir>/bytecode/<interpreter key>/<module>.pyc`; `runner.py` loads
//! the runner's modules from there (its own finder, never `__pycache__`). Kernels see
//! the whole runner directory read-only. Without namespaces the cache is as writable as
//! the rest (see `sandbox`'s `missing`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::runner_script::{self, RunnerFiles};
use crate::sandbox::{run_confined, Plan, SandboxConfig, Target};

/// The variable that tells `runner.py` where the cache is (it removes it at once).
pub const ENV_VAR: &str = "PYKERNEL_BYTECODE";
const COMPLETE: &str = "complete";

/// Writes every module's code object as a `.pyc` (magic number, 12 bytes of zeros,
/// marshal data), then the `complete` marker. argv: runner dir, cache dir, `name=path`...
const COMPILE_SCRIPT: &str = r#"
import marshal, os, sys
ext = sys.modules["_frozen_importlib_external"]
src, cache = sys.argv[1], sys.argv[2]
for item in sys.argv[3:]:
    name, rel = item.split("=", 1)
    path = os.path.join(src, rel)
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)
    tmp = os.path.join(cache, name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(ext.MAGIC_NUMBER + bytes(12) + marshal.dumps(code))
    os.replace(tmp, os.path.join(cache, name + ".pyc"))
open(os.path.join(cache, "complete"), "wb").close()
"#;

/// The cache directory for `python` (the real executable), built first if needed.
/// `None` when it cannot be built: kernels then compile the runner themselves.
pub fn ensure(
    python: &Path,
    files: &RunnerFiles,
    env: &std::collections::BTreeMap<String, String>,
    sandbox: &SandboxConfig,
    time_limit: Duration,
) -> Option<PathBuf> {
    // Caches that could not be built in this process: an interpreter that cannot run our
    // compile script is not tried again at every start.
    static FAILED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let dir = files.runner.parent()?;
    let key: String = Sha256::digest(python.as_os_str().as_encoded_bytes())
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    // Digests of the caches this process built, for where kernels can write them.
    static BUILT: Mutex<Vec<(PathBuf, Vec<u8>)>> = Mutex::new(Vec::new());
    let cache = dir.join("bytecode").join(key);
    // Inside the namespaces the whole runner directory is read-only to kernels, so a
    // complete cache is what the compile step wrote. Elsewhere a kernel could have
    // rewritten it: use it only as this process built it, else build it again.
    let kernels_can_write = sandbox.is_off() || crate::sandbox::support().namespaces.is_err();
    if cache.join(COMPLETE).is_file() {
        if !kernels_can_write {
            return Some(cache);
        }
        let built = BUILT.lock().unwrap();
        let known = built
            .iter()
            .find(|(dir, _)| *dir == cache)
            .map(|(_, d)| d.clone());
        drop(built);
        if known.is_some() && known == digest(&cache) {
            return Some(cache);
        }
        let _ = std::fs::remove_file(cache.join(COMPLETE));
    }
    if FAILED.lock().unwrap().contains(&cache) {
        return None;
    }
    match build(python, files, &cache, env, sandbox, time_limit) {
        Ok(()) => {
            if let Some(d) = digest(&cache) {
                let mut built = BUILT.lock().unwrap();
                built.retain(|(dir, _)| *dir != cache);
                built.push((cache.clone(), d));
            }
            Some(cache)
        }
        Err(reason) => {
            FAILED.lock().unwrap().push(cache.clone());
            tracing::warn!("cannot build the runner's bytecode cache in {}: {reason}; kernels compile the runner at start", cache.display());
            None
        }
    }
}

/// sha256 over the cache's files, names and contents, in name order.
fn digest(cache: &Path) -> Option<Vec<u8>> {
    let mut names: Vec<_> = std::fs::read_dir(cache)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    names.sort();
    let mut hasher = Sha256::new();
    for name in names {
        hasher.update(name.as_encoded_bytes());
        hasher.update([0]);
        hasher.update(std::fs::read(cache.join(&name)).ok()?);
        hasher.update([0]);
    }
    Some(hasher.finalize().to_vec())
}

fn build(
    python: &Path,
    files: &RunnerFiles,
    cache: &Path,
    env: &std::collections::BTreeMap<String, String>,
    sandbox: &SandboxConfig,
    time_limit: Duration,
) -> Result<(), String> {
    let mut builder = std::fs::DirBuilder::new();
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .recursive(true)
        .create(cache)
        .map_err(|e| e.to_string())?;
    let dir = files.runner.parent().unwrap_or(&files.base);
    // The compile runs the interpreter: give it the kernel's sandbox (it may be a
    // repository's own venv), with only the cache writable inside the runner directory.
    let config = match sandbox {
        SandboxConfig::Off => SandboxConfig::Off,
        SandboxConfig::On { .. } => SandboxConfig::default(),
    };
    let (plan, _) = Plan::prepare(
        &config,
        &Target {
            cwd: cache,
            runner_base: Some(&files.base),
            private_tmp: None,
            runner_writable: Some(cache),
        },
    )
    .map_err(|e| e.to_string())?;
    let mut cmd = Command::new(python);
    cmd.args(["-I", "-S", "-c", COMPILE_SCRIPT])
        .arg(dir)
        .arg(cache)
        .args(
            runner_script::modules()
                .into_iter()
                .map(|(name, rel)| format!("{name}={rel}")),
        )
        .current_dir(cache)
        .env_clear()
        .envs(env);
    let finished = run_confined(cmd, &plan, time_limit).map_err(|e| e.to_string())?;
    let (status, stderr) = (finished.status, String::from_utf8_lossy(&finished.stderr));
    if !cache.join(COMPLETE).is_file() {
        return Err(format!(
            "the compile step ended ({status}): {}",
            stderr.trim()
        ));
    }
    Ok(())
}
