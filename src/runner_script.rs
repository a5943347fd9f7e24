//! The Python side ships inside the addon: `runner/*.py` are embedded at build time and
//! written to a private directory, one folder per content hash, before a kernel starts.
//!
//! Why a private 0700 directory owned by us: anyone who can write the runner can run code
//! in every kernel. Before each start the files are compared with the embedded bytes and
//! rewritten (atomically, temp file + rename) when they differ, so a tampered runner is
//! replaced, never run.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{KernelError, Result};

/// The entry point; the runner proper is a package of modules, so their bytecode is cached.
pub const RUNNER_PY: &str = include_str!("../runner/runner.py");
pub const PRELUDE_PY: &str = include_str!("../runner/prelude.py");
pub const DISPLAY_PY: &str = include_str!("../runner/pykernel_display.py");
pub const MAGICS_PY: &str = include_str!("../runner/pykernel_magics.py");

/// A module of the runner package, `runner/pykernel_runner/` (one module per concern).
macro_rules! package_module {
    ($name:literal) => {
        (
            concat!("pykernel_runner/", $name),
            include_str!(concat!("../runner/pykernel_runner/", $name)),
        )
    };
}

const FILES: &[(&str, &str)] = &[
    ("runner.py", RUNNER_PY),
    package_module!("__init__.py"),
    package_module!("signals.py"),
    package_module!("channel.py"),
    package_module!("capture.py"),
    package_module!("stdin.py"),
    package_module!("requests.py"),
    package_module!("siblings.py"),
    package_module!("cells.py"),
    package_module!("patches.py"),
    package_module!("kernel.py"),
    ("prelude.py", PRELUDE_PY),
    ("pykernel_display.py", DISPLAY_PY),
    ("pykernel_magics.py", MAGICS_PY),
];

/// Where the materialized runner lives.
#[derive(Debug, Clone)]
pub struct RunnerFiles {
    pub runner: PathBuf,
    pub prelude: PathBuf,
}

/// The runner's Python modules as the kernel imports them: (module name, file relative
/// to the runner directory). The prelude is not imported but compiled under the name
/// `pykernel_prelude`; `runner.py` is the script itself.
pub fn modules() -> Vec<(String, &'static str)> {
    FILES
        .iter()
        .filter(|(name, _)| *name != "runner.py")
        .map(|(name, _)| {
            let module = match *name {
                "prelude.py" => "pykernel_prelude".to_string(),
                other => other
                    .trim_end_matches(".py")
                    .trim_end_matches("/__init__")
                    .replace('/', "."),
            };
            (module, *name)
        })
        .collect()
}

/// First 16 hex digits of the sha256 over every embedded file, names included.
pub fn content_hash() -> String {
    let mut hasher = Sha256::new();
    for (name, text) in FILES {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(text.as_bytes());
        hasher.update([0]);
    }
    hasher
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The private base directory: `$TMPDIR/pykernel-<uid>`.
pub fn default_base_dir() -> PathBuf {
    let uid = nix::unistd::getuid().as_raw();
    std::env::temp_dir().join(format!("pykernel-{uid}"))
}

/// Writes (or verifies) the runner files under `base` and returns their paths.
pub fn materialize(base: &Path) -> Result<RunnerFiles> {
    ensure_private_dir(base)?;
    let dir = base.join(content_hash());
    ensure_private_dir(&dir)?;
    for (name, text) in FILES {
        let path = dir.join(name);
        let parent = path.parent().unwrap_or(&dir);
        if parent != dir {
            ensure_private_dir(parent)?; // the package's folder
        }
        let current = fs::read(&path).ok();
        if current.as_deref() != Some(text.as_bytes()) {
            write_atomically(&dir, &path, text.as_bytes())?;
        }
    }
    Ok(RunnerFiles {
        runner: dir.join("runner.py"),
        prelude: dir.join("prelude.py"),
    })
}

/// Creates `dir` with mode 0700, or checks that an existing one is ours and private.
fn ensure_private_dir(dir: &Path) -> Result<()> {
    let refuse = |reason: String| KernelError::RunnerDir {
        path: dir.to_path_buf(),
        reason,
    };
    match fs::symlink_metadata(dir) {
        Ok(meta) => {
            if !meta.is_dir() {
                return Err(refuse("it exists and is not a directory; remove it".into()));
            }
            let uid = nix::unistd::getuid().as_raw();
            if meta.uid() != uid {
                return Err(refuse(format!(
                    "it is owned by uid {}, not by us (uid {uid}); remove it or set TMPDIR",
                    meta.uid()
                )));
            }
            if meta.mode() & 0o077 != 0 {
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                    .map_err(|e| refuse(format!("cannot make it private: {e}")))?;
            }
            Ok(())
        }
        Err(_) => {
            let mut builder = fs::DirBuilder::new();
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(dir) {
                Ok(()) => Ok(()),
                // Another process won the race; check what it made.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => ensure_private_dir(dir),
                Err(e) => Err(refuse(e.to_string())),
            }
        }
    }
}

fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let fail = |e: std::io::Error| KernelError::RunnerDir {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    tmp.write_all(bytes).map_err(fail)?;
    tmp.as_file().sync_all().map_err(fail)?;
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o600)).map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn materializes_privately_and_repairs_tampering() {
        let base = tempfile::tempdir().unwrap();
        let base = base.path().join("pk");
        let files = materialize(&base).unwrap();
        assert_eq!(fs::read_to_string(&files.runner).unwrap(), RUNNER_PY);
        let mode = fs::metadata(&base).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);

        fs::write(&files.runner, "import os; os.system('evil')").unwrap();
        let again = materialize(&base).unwrap();
        assert_eq!(fs::read_to_string(&again.runner).unwrap(), RUNNER_PY);
    }

    #[test]
    fn the_runner_package_is_written_privately_and_whole() {
        let base = tempfile::tempdir().unwrap();
        let files = materialize(base.path()).unwrap();
        let package = files.runner.parent().unwrap().join("pykernel_runner");
        assert_eq!(fs::metadata(&package).unwrap().mode() & 0o777, 0o700);
        // Every module of the package is embedded: one left out would fail only at import.
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("runner/pykernel_runner");
        for entry in fs::read_dir(source).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".py") {
                let text = fs::read_to_string(package.join(&name));
                assert!(text.is_ok(), "pykernel_runner/{name} is not in FILES");
            }
        }
    }

    #[test]
    fn a_shared_mode_directory_is_made_private() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("pk");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        materialize(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    }

    #[test]
    fn a_file_in_the_way_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let path = base.path().join("pk");
        fs::write(&path, "x").unwrap();
        let err = materialize(&path).unwrap_err();
        assert_eq!(err.code(), "ERR_RUNNER_DIR");
    }
}
