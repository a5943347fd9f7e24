//! The Python side ships inside the addon: `runner/runner.py`, the `pykernel_runner` package
//! and the prelude are embedded at build time and written to a private directory, one folder
//! per content hash, before a kernel starts (`pykernel_far.py` is a launcher's, not written).
//!
//! Why a private 0700 directory owned by us: anyone who can write the runner can run code
//! in every kernel. Before each start the files are compared with the embedded bytes and
//! rewritten (atomically, temp file + rename) when they differ or are not plain files of
//! ours, so a tampered runner is replaced, never run.
//!
//! The default place, `$TMPDIR/pykernel-<uid>`, is a name any local user can take first
//! (a directory of theirs, a symlink, a file). Such a directory is never used, but that
//! must not block every kernel either: this process then uses a private directory beside
//! it (`pykernel-<uid>-XXXXXX`, 0700, ours), says so once, and keeps using it for all its
//! kernels. A stand-in an earlier process made is reused when it is still a real 0700
//! directory of ours, not writable by anyone else, so a squatted base costs one directory,
//! not one per host process; one that is not (another user's, a symlink, loosened) is
//! passed over, and a new one made. A `runner_dir` the caller chose is theirs to fix, so a bad one is
//! an error.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use once_cell::sync::Lazy;
use sha2::{Digest, Sha256};

use crate::error::{KernelError, Result};
use crate::store::safe_fs::{self, Fault};

/// The entry point; the runner proper is a package of modules, so their bytecode is cached.
pub const RUNNER_PY: &str = include_str!("../../runner/runner.py");
pub const PRELUDE_PY: &str = include_str!("../../runner/prelude.py");

/// A module of the runner package, `runner/pykernel_runner/` (one module per concern).
macro_rules! package_module {
    ($name:literal) => {
        (
            concat!("pykernel_runner/", $name),
            include_str!(concat!("../../runner/pykernel_runner/", $name)),
        )
    };
}

const FILES: &[(&str, &str)] = &[
    ("runner.py", RUNNER_PY),
    package_module!("__init__.py"),
    package_module!("signals.py"),
    package_module!("channel.py"),
    package_module!("forward.py"),
    package_module!("capture.py"),
    package_module!("stdin.py"),
    package_module!("requests.py"),
    package_module!("lazy.py"),
    package_module!("cells.py"),
    package_module!("patches.py"),
    package_module!("kernel.py"),
    package_module!("display.py"),
    package_module!("charts.py"),
    package_module!("charts_matplotlib.py"),
    package_module!("charts_matplotlib_parts.py"),
    package_module!("charts_web.py"),
    package_module!("charts_plotly.py"),
    package_module!("charts_bins.py"),
    package_module!("charts_vegalite.py"),
    package_module!("pretty.py"),
    package_module!("ipython.py"),
    package_module!("transform.py"),
    package_module!("inspector.py"),
    package_module!("pip_modules.py"),
    package_module!("shell.py"),
    package_module!("magics.py"),
    package_module!("refusals.py"),
    package_module!("zygote.py"),
    ("prelude.py", PRELUDE_PY),
];

/// Every embedded file: its path relative to the runner directory, and its text.
pub fn files() -> &'static [(&'static str, &'static str)] {
    FILES
}

/// Where the materialized runner lives.
#[derive(Debug, Clone)]
pub struct RunnerFiles {
    /// The directory holding the `<sha>` folders: the default `$TMPDIR/pykernel-<uid>`, its
    /// private stand-in when that was refused, or the `runner_dir` the caller chose.
    pub base: PathBuf,
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

/// Writes (or verifies) the runner files under `base` and returns their paths. At the
/// default base a refused directory is replaced by a private stand-in (module docs).
pub fn materialize(base: &Path) -> Result<RunnerFiles> {
    if base == default_base_dir() {
        materialize_shared(base, &STAND_INS)
    } else {
        write_files(base)
    }
}

/// The stand-in made for each refused default base, kept for the process's lifetime.
type StandIns = Mutex<HashMap<PathBuf, PathBuf>>;

static STAND_INS: Lazy<StandIns> = Lazy::new(|| Mutex::new(HashMap::new()));

fn materialize_shared(default: &Path, stand_ins: &StandIns) -> Result<RunnerFiles> {
    // Held throughout, so concurrent starts agree on one stand-in (and warn once).
    let mut stand_ins = stand_ins.lock().unwrap();
    if let Some(dir) = stand_ins.get(default) {
        return write_files(dir);
    }
    let refused = match write_files(default) {
        Ok(files) => return Ok(files),
        Err(refused) => refused,
    };
    let parent = default.parent().unwrap_or(Path::new("/"));
    let name = default.file_name().unwrap_or_default().to_string_lossy();
    let prefix = format!("{name}-");
    if let Some(files) = earlier_stand_in(parent, &prefix) {
        tracing::warn!(
            "{refused}. Kernels of this process use {} instead.",
            files.base.display()
        );
        stand_ins.insert(default.to_path_buf(), files.base.clone());
        return Ok(files);
    }
    let made = tempfile::Builder::new()
        .prefix(&prefix)
        .permissions(fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
        .map(tempfile::TempDir::keep);
    let dir = made.map_err(|e| KernelError::RunnerDir {
        path: default.to_path_buf(),
        reason: format!(
            "{refused}; no private directory could be made in {} instead: {e}",
            parent.display()
        ),
    })?;
    let files = write_files(&dir)?;
    tracing::warn!(
        "{refused}. Kernels of this process use {} instead.",
        dir.display()
    );
    stand_ins.insert(default.to_path_buf(), dir);
    Ok(files)
}

/// A stand-in an earlier process left in `parent` (named `prefix` and 6 more characters, as
/// `tempfile` names them), with the runner written in it: the first, by name, that is a
/// real directory of ours that nobody else can write. Anything else is passed over.
fn earlier_stand_in(parent: &Path, prefix: &str) -> Option<RunnerFiles> {
    let mut candidates: Vec<PathBuf> = fs::read_dir(parent)
        .ok()?
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .and_then(|name| name.strip_prefix(prefix))
                .is_some_and(|rest| {
                    rest.len() == 6 && rest.bytes().all(|b| b.is_ascii_alphanumeric())
                })
        })
        .map(|entry| entry.path())
        .collect();
    candidates.sort();
    candidates.into_iter().find_map(|dir| {
        let sound = matches!(safe_fs::inspect_dir(&dir), Ok(None))
            && fs::symlink_metadata(&dir).is_ok_and(|meta| meta.mode() & 0o077 == 0);
        if sound {
            write_files(&dir).ok()
        } else {
            None
        }
    })
}

fn write_files(base: &Path) -> Result<RunnerFiles> {
    ensure_private_dir(base)?;
    let dir = base.join(content_hash());
    ensure_private_dir(&dir)?;
    for (name, text) in FILES {
        let path = dir.join(name);
        let parent = path.parent().unwrap_or(&dir);
        if parent != dir {
            ensure_private_dir(parent)?; // the package's folder
        }
        if !is_intact(&path, text.as_bytes()) {
            write_atomically(&dir, &path, text.as_bytes())?;
        }
    }
    Ok(RunnerFiles {
        base: base.to_path_buf(),
        runner: dir.join("runner.py"),
        prelude: dir.join("prelude.py"),
    })
}

/// A plain file of ours that nobody else can write, holding exactly `bytes`. A symlink is
/// not intact even when its target holds the right bytes: the target could change later.
fn is_intact(path: &Path, bytes: &[u8]) -> bool {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return false;
    };
    meta.is_file()
        && meta.uid() == safe_fs::our_uid()
        && meta.mode() & 0o022 == 0
        && fs::read(path).is_ok_and(|current| current == bytes)
}

/// Creates `dir` with mode 0700, or checks that an existing one is a real directory of
/// ours (never following a symlink) and makes it private again if it was loosened.
fn ensure_private_dir(dir: &Path) -> Result<()> {
    let refuse = |reason: String| KernelError::RunnerDir {
        path: dir.to_path_buf(),
        reason,
    };
    match safe_fs::inspect_dir(dir) {
        Ok(None | Some(Fault::Writable { .. })) => {
            let mode = fs::symlink_metadata(dir)
                .map_err(|e| refuse(e.to_string()))?
                .mode();
            if mode & 0o077 != 0 {
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                    .map_err(|e| refuse(format!("cannot make it private: {e}")))?;
            }
            Ok(())
        }
        Ok(Some(fault)) => Err(refuse(format!("it {fault}; remove it or set TMPDIR"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut builder = fs::DirBuilder::new();
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(dir) {
                Ok(()) => Ok(()),
                // Another process won the race; check what it made.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => ensure_private_dir(dir),
                Err(e) => Err(refuse(e.to_string())),
            }
        }
        Err(e) => Err(refuse(e.to_string())),
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
    /// A `$TMPDIR`-like directory and the default base in it, as another user may leave it.
    fn shared_tmp() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let default = tmp
            .path()
            .join(format!("pykernel-{}", nix::unistd::getuid()));
        (tmp, default)
    }

    fn assert_private_stand_in(tmp: &Path, files: &RunnerFiles, default: &Path) {
        assert_ne!(files.base, default);
        assert_eq!(files.base.parent(), Some(tmp));
        let name = files.base.file_name().unwrap().to_str().unwrap();
        let prefix = format!("{}-", default.file_name().unwrap().to_str().unwrap());
        assert!(name.starts_with(&prefix), "{name}");
        let meta = fs::symlink_metadata(&files.base).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o777, 0o700);
        assert_eq!(meta.uid(), safe_fs::our_uid());
        assert!(files.runner.starts_with(&files.base));
        assert_eq!(fs::read_to_string(&files.runner).unwrap(), RUNNER_PY);
    }

    #[test]
    fn a_symlinked_default_base_is_not_followed_and_a_private_stand_in_is_used_from_then_on() {
        let (tmp, default) = shared_tmp();
        let attacker = tmp.path().join("attacker");
        fs::create_dir(&attacker).unwrap();
        fs::set_permissions(&attacker, fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::symlink(&attacker, &default).unwrap();
        let stand_ins = StandIns::default();
        let files = materialize_shared(&default, &stand_ins).unwrap();
        assert_private_stand_in(tmp.path(), &files, &default);
        let again = materialize_shared(&default, &stand_ins).unwrap();
        assert_eq!(again.base, files.base, "later kernels reuse the stand-in");
        assert_eq!(fs::read_dir(&attacker).unwrap().count(), 0);
        assert_eq!(fs::read_link(&default).unwrap(), attacker);
    }

    #[test]
    fn a_default_base_owned_by_another_user_or_a_file_is_not_used() {
        let (tmp, default) = shared_tmp();
        fs::write(&default, "x").unwrap();
        let files = materialize_shared(&default, &StandIns::default()).unwrap();
        assert_private_stand_in(tmp.path(), &files, &default);
        assert_eq!(fs::read_to_string(&default).unwrap(), "x");

        if safe_fs::our_uid() == 0 {
            let (tmp, default) = shared_tmp();
            fs::create_dir(&default).unwrap();
            fs::set_permissions(&default, fs::Permissions::from_mode(0o755)).unwrap();
            std::os::unix::fs::chown(&default, Some(65534), Some(65534)).unwrap();
            let files = materialize_shared(&default, &StandIns::default()).unwrap();
            assert_private_stand_in(tmp.path(), &files, &default);
            assert_eq!(fs::read_dir(&default).unwrap().count(), 0);
            assert_eq!(fs::metadata(&default).unwrap().uid(), 65534);
        }
    }

    #[test]
    fn a_stand_in_made_by_an_earlier_process_is_reused_and_a_foreign_or_loose_one_is_not() {
        let (tmp, default) = shared_tmp();
        fs::write(&default, "x").unwrap();
        // Each StandIns is one host process.
        let first = materialize_shared(&default, &StandIns::default()).unwrap();
        let second = materialize_shared(&default, &StandIns::default()).unwrap();
        assert_eq!(second.base, first.base, "one stand-in for every host");
        assert_eq!(
            fs::read_dir(tmp.path()).unwrap().count(),
            2,
            "the base and one stand-in"
        );

        // Loosened by someone: files could have been planted, so it is not trusted again.
        fs::set_permissions(&first.base, fs::Permissions::from_mode(0o777)).unwrap();
        let third = materialize_shared(&default, &StandIns::default()).unwrap();
        assert_ne!(third.base, first.base);
        assert_private_stand_in(tmp.path(), &third, &default);
        fs::remove_dir_all(&third.base).unwrap();

        // A look-alike name another user made first is passed over too.
        if safe_fs::our_uid() == 0 {
            fs::set_permissions(&first.base, fs::Permissions::from_mode(0o700)).unwrap();
            std::os::unix::fs::chown(&first.base, Some(65534), Some(65534)).unwrap();
            let fourth = materialize_shared(&default, &StandIns::default()).unwrap();
            assert_ne!(fourth.base, first.base);
            assert_private_stand_in(tmp.path(), &fourth, &default);
        }
    }

    #[test]
    fn a_sound_default_base_is_used_as_is() {
        let (_tmp, default) = shared_tmp();
        let files = materialize_shared(&default, &StandIns::default()).unwrap();
        assert_eq!(files.base, default);
    }

    #[test]
    fn a_bad_chosen_runner_dir_is_an_error() {
        let (tmp, _) = shared_tmp();
        let attacker = tmp.path().join("attacker");
        fs::create_dir(&attacker).unwrap();
        let chosen = tmp.path().join("chosen");
        std::os::unix::fs::symlink(&attacker, &chosen).unwrap();
        let err = materialize(&chosen).unwrap_err();
        assert_eq!(err.code(), "ERR_RUNNER_DIR");
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        assert_eq!(fs::read_dir(&attacker).unwrap().count(), 0);
    }

    #[test]
    fn a_runner_file_planted_as_a_symlink_is_replaced_not_followed() {
        let (tmp, _) = shared_tmp();
        let base = tmp.path().join("pk");
        let files = materialize(&base).unwrap();
        // The link's target holds the right bytes today; its owner could change it later.
        let target = tmp.path().join("attacker-runner.py");
        fs::write(&target, RUNNER_PY).unwrap();
        fs::remove_file(&files.runner).unwrap();
        std::os::unix::fs::symlink(&target, &files.runner).unwrap();
        materialize(&base).unwrap();
        let meta = fs::symlink_metadata(&files.runner).unwrap();
        assert!(meta.is_file(), "the link was replaced by a plain file");
        assert_eq!(fs::read_to_string(&files.runner).unwrap(), RUNNER_PY);
        assert_eq!(fs::read_to_string(&target).unwrap(), RUNNER_PY);
    }
}
