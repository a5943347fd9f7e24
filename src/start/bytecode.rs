//! The runner's bytecode: compiled once per interpreter in each host process, kept in
//! sealed memory, and handed to every kernel it starts.
//!
//! Compiling the runner costs more than the rest of a kernel's start (about 80 ms for all
//! of it, 20 ms for what a kernel imports at start), so its bytecode is made once. Where
//! it lives decides who can change it. Python's own `__pycache__` is written by whichever
//! process imports first; a cache in a shared directory can be rewritten by anything of
//! the user's that runs outside a sandbox (a `sandbox: 'off'` kernel, another host's
//! kernel whose view shows that directory), and a digest kept beside it can be rewritten
//! with it. So nothing of it is on disk: a short-lived process runs our compile script
//! (in the kernel's sandbox: the interpreter may be a repository's own) and writes every
//! module's code object to its stdout; the host puts the bytes in a memfd, seals it
//! against any change (`F_SEAL_WRITE`, shrink, grow, and further seals), and passes it
//! to each kernel as an inherited descriptor (`PYKERNEL_BYTECODE=fd:<n>`), whose
//! `runner.py` loads the runner's modules from it (its own finder, never `__pycache__`).
//! A planted file anywhere is never read; a kernel cannot change what the next one gets.
//!
//! The compile runs in the background on a process's first kernel for an interpreter, so
//! that kernel compiles what it imports from source meanwhile (as one whose interpreter
//! cannot run the script does), and every later one gets the sealed copy.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::process::confined::run_confined;
use crate::sandbox::{Plan, SandboxConfig, Target};
use crate::start::runner_files::{self, RunnerFiles};

/// The variable that tells `runner.py` which descriptor holds the bytecode (it removes
/// it at once).
pub const ENV_VAR: &str = "PYKERNEL_BYTECODE";

/// The most the compile step may write: the runner's code objects are ~450 KB.
const MAX_BUNDLE_BYTES: u64 = 16 * 1024 * 1024;

/// Writes, to stdout, a header line (the interpreter's magic number in hex, then each
/// module's name, offset and length in what follows, separated by spaces: `runner.py`
/// reads it with nothing imported) and then every module's marshalled code object.
/// argv: runner dir, then `name=path` for each module.
const COMPILE_SCRIPT: &str = r#"
import marshal, os, sys
ext = sys.modules["_frozen_importlib_external"]
src = sys.argv[1]
header, blobs, offset = [ext.MAGIC_NUMBER.hex()], [], 0
for item in sys.argv[2:]:
    name, rel = item.split("=", 1)
    path = os.path.join(src, rel)
    with open(path, "rb") as f:
        blob = marshal.dumps(compile(f.read(), path, "exec", dont_inherit=True))
    header += [name, str(offset), str(len(blob))]
    blobs.append(blob)
    offset += len(blob)
out = sys.stdout.buffer
out.write(" ".join(header).encode() + b"\n")
for blob in blobs:
    out.write(blob)
out.flush()
"#;

/// One interpreter's sealed bytecode.
#[derive(Debug)]
pub struct Bundle {
    fd: OwnedFd,
}

impl Bundle {
    /// The descriptor a kernel inherits.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

enum State {
    Building,
    Ready(Arc<Bundle>),
    /// The interpreter cannot run the compile script: its kernels compile from source.
    Failed,
}

static BUNDLES: Mutex<Option<HashMap<PathBuf, State>>> = Mutex::new(None);

/// The sealed bytecode for `python` (the real executable), if this process has it; if
/// not, its compile is started in the background (once) and `None` returned: the kernel
/// starting now compiles what it needs from source.
pub fn for_interpreter(
    python: &Path,
    files: &RunnerFiles,
    env: &std::collections::BTreeMap<String, String>,
    sandbox: &SandboxConfig,
    time_limit: Duration,
) -> Option<Arc<Bundle>> {
    let mut bundles = BUNDLES.lock().unwrap();
    let bundles = bundles.get_or_insert_with(HashMap::new);
    match bundles.get(python) {
        Some(State::Ready(bundle)) => return Some(bundle.clone()),
        Some(State::Building | State::Failed) => return None,
        None => {}
    }
    bundles.insert(python.to_path_buf(), State::Building);
    let (interpreter, files, env, sandbox) = (
        python.to_path_buf(),
        files.clone(),
        env.clone(),
        sandbox.clone(),
    );
    let spawned = std::thread::Builder::new()
        .name("pykernel-bytecode".into())
        .spawn(move || {
            let state = match build(&interpreter, &files, &env, &sandbox, time_limit) {
                Ok(bundle) => State::Ready(Arc::new(bundle)),
                Err(reason) => {
                    tracing::warn!("cannot compile the runner's bytecode with {}: {reason}; its kernels compile the runner at start", interpreter.display());
                    State::Failed
                }
            };
            BUNDLES
                .lock()
                .unwrap()
                .get_or_insert_with(HashMap::new)
                .insert(interpreter, state);
        });
    if spawned.is_err() {
        bundles.remove(python);
    }
    None
}

/// The sealed bytecode for `python`, if this process has it already (builds nothing).
pub fn ready(python: &Path) -> Option<Arc<Bundle>> {
    match BUNDLES.lock().unwrap().as_ref()?.get(python) {
        Some(State::Ready(bundle)) => Some(bundle.clone()),
        _ => None,
    }
}

fn build(
    python: &Path,
    files: &RunnerFiles,
    env: &std::collections::BTreeMap<String, String>,
    sandbox: &SandboxConfig,
    time_limit: Duration,
) -> Result<Bundle, String> {
    let dir = files.runner.parent().unwrap_or(&files.base);
    // The compile runs the interpreter: give it the kernel's sandbox (it may be a
    // repository's own venv); it writes nothing.
    let config = match sandbox {
        SandboxConfig::Off => SandboxConfig::Off,
        SandboxConfig::On(_) => SandboxConfig::default(),
    };
    let (plan, _) = Plan::prepare(
        &config,
        &Target {
            runner_base: Some(&files.base),
            ..Target::new(dir)
        },
    )
    .map_err(|e| e.to_string())?;
    let mut cmd = Command::new(python);
    cmd.args(["-I", "-S", "-c", COMPILE_SCRIPT])
        .arg(dir)
        .args(
            runner_files::modules()
                .into_iter()
                .map(|(name, rel)| format!("{name}={rel}")),
        )
        .current_dir(dir)
        .env_clear()
        .envs(env);
    let finished =
        run_confined(cmd, &plan, time_limit, MAX_BUNDLE_BYTES).map_err(|e| e.to_string())?;
    if !finished.success {
        return Err(format!(
            "the compile step ended ({}): {}",
            finished.status,
            String::from_utf8_lossy(&finished.stderr).trim()
        ));
    }
    check(&finished.stdout)?;
    seal(&finished.stdout).map_err(|e| format!("keeping it in sealed memory: {e}"))
}

/// The bundle is what the compile script writes: a header naming every module of the
/// runner, each within the bytes that follow.
fn check(bytes: &[u8]) -> Result<(), String> {
    let newline = memchr::memchr(b'\n', bytes).ok_or("no header line")?;
    let header = std::str::from_utf8(&bytes[..newline]).map_err(|e| format!("its header: {e}"))?;
    let body = (bytes.len() - newline - 1) as u64;
    let words: Vec<&str> = header.split(' ').collect();
    let modules: HashMap<&str, (u64, u64)> = words
        .get(1..)
        .unwrap_or_default()
        .chunks(3)
        .filter_map(|w| match w {
            [name, offset, length] => Some((*name, (offset.parse().ok()?, length.parse().ok()?))),
            _ => None,
        })
        .collect();
    for (name, _) in runner_files::modules() {
        let at = modules
            .get(name.as_str())
            .ok_or_else(|| format!("{name} is missing"))?;
        if at.0.checked_add(at.1).is_none_or(|end| end > body) {
            return Err(format!("{name} lies outside it"));
        }
    }
    Ok(())
}

/// `bytes` in a memfd no one can change any more.
#[cfg(target_os = "linux")]
fn seal(bytes: &[u8]) -> std::io::Result<Bundle> {
    use nix::libc;
    // SAFETY: plain system calls on a descriptor we own; the name is a C string.
    unsafe {
        let fd = libc::memfd_create(
            c"pykernel-bytecode".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        );
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd);
        let mut file = std::fs::File::from(fd);
        std::io::Write::write_all(&mut file, bytes)?;
        let fd = OwnedFd::from(file);
        let seals =
            libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
        if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Bundle { fd })
    }
}

/// Without memfds: a file opened read-only and unlinked at once, so no path leads to it
/// (there is no `/proc` to reopen it through).
#[cfg(not(target_os = "linux"))]
fn seal(bytes: &[u8]) -> std::io::Result<Bundle> {
    let mut file = tempfile::NamedTempFile::new()?;
    std::io::Write::write_all(&mut file, bytes)?;
    let read_only = std::fs::File::open(file.path())?;
    drop(file);
    let fd = OwnedFd::from(read_only);
    // SAFETY: marking our own descriptor close-on-exec (only the kernels get it).
    unsafe { nix::libc::fcntl(fd.as_raw_fd(), nix::libc::F_SETFD, nix::libc::FD_CLOEXEC) };
    Ok(Bundle { fd })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn a_sealed_bundle_cannot_be_written_resized_or_unsealed() {
        let bundle = seal(b"{}\nbytes").unwrap();
        let fd = bundle.fd();
        use nix::libc;
        // SAFETY: system calls on our own descriptor.
        unsafe {
            assert!(libc::pwrite(fd, b"x".as_ptr().cast(), 1, 0) < 0);
            assert!(libc::ftruncate(fd, 0) < 0);
            assert!(
                libc::fcntl(fd, libc::F_ADD_SEALS, 0) < 0
                    || libc::fcntl(fd, libc::F_GET_SEALS) & libc::F_SEAL_SEAL != 0
            );
            // A writable mapping is refused too.
            let map = libc::mmap(
                std::ptr::null_mut(),
                4,
                libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            assert_eq!(map, libc::MAP_FAILED);
        }
        let mut back = String::new();
        std::io::Read::read_to_string(
            &mut std::fs::File::open(format!("/proc/self/fd/{fd}")).unwrap(),
            &mut back,
        )
        .unwrap();
        assert_eq!(back, "{}\nbytes");
    }

    #[test]
    fn a_bundle_missing_a_module_or_pointing_past_its_end_is_refused() {
        let bundle = |skip: &str, long: &str| {
            let mut header = vec!["00".to_string()];
            for (name, _) in runner_files::modules() {
                if name != skip {
                    let length = if name == long { "5" } else { "1" };
                    header.extend([name, "0".into(), length.into()]);
                }
            }
            format!("{}\nx", header.join(" "))
        };
        assert_eq!(check(bundle("", "").as_bytes()), Ok(()));
        assert!(check(bundle("", "pykernel_runner").as_bytes())
            .unwrap_err()
            .contains("outside"));
        assert!(check(bundle("pykernel_prelude", "").as_bytes())
            .unwrap_err()
            .contains("missing"));
        assert!(check(b"no header").is_err());
    }
}
