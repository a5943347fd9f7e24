//! Which session a request is for: its [`SessionKey`], from the real paths of a local
//! kernel's cwd and interpreter (as given for a launched or not yet placed one).

use std::path::{Path, PathBuf};

use crate::error::{KernelError, Result};
use crate::session::config::PoolRequest;
use crate::session::site::Site;
use crate::start::launcher::Launcher;

/// What identifies a session's kernel.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    /// `session:<id>`, `file:<path>` or `cwd:<path>`.
    pub identity: String,
    /// The real cwd of a local kernel; for a launched or not yet placed one, as given.
    pub cwd: PathBuf,
    /// The requested interpreter's real path (as given for a launched or not yet placed
    /// kernel); empty for discovery.
    pub interpreter: String,
    /// The launcher the request named, else `kernel.launcher` when the pool places no
    /// session; `None` for a local kernel or one the pool places.
    pub launcher: Option<Launcher>,
}

impl std::fmt::Display for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} @ {}", self.identity, self.cwd.display())?;
        if !self.interpreter.is_empty() {
            write!(f, " [{}]", self.interpreter)?;
        }
        if let Some(launcher) = &self.launcher {
            write!(f, " via {}", launcher.describe())?;
        }
        Ok(())
    }
}

/// The real path of `cwd`, refused (`ERR_CWD_INVALID`) when it is no directory.
pub(super) fn checked_cwd(cwd: &Path) -> Result<PathBuf> {
    let (real, is_dir) = real_path(cwd).map_err(|_| KernelError::CwdInvalid {
        path: cwd.to_path_buf(),
        reason: "does not exist",
    })?;
    if !is_dir {
        return Err(KernelError::CwdInvalid {
            path: cwd.to_path_buf(),
            reason: "is not a directory",
        });
    }
    Ok(real)
}

pub(super) fn session_key(request: &PoolRequest, site: &Site) -> Result<SessionKey> {
    // A local kernel's cwd and interpreter are keyed by their real paths. A launched one's
    // are the far side's, and one the pool has yet to place may run on either side: both
    // are keyed as given, and nothing here is looked at.
    let (cwd, interpreter, launcher) = match site {
        Site::Placed(config) if config.launcher.is_none() => {
            let cwd = checked_cwd(&config.cwd)?;
            let interpreter = config
                .interpreter
                .as_deref()
                .map(|i| real_interpreter(i, &cwd))
                .unwrap_or_default();
            (cwd, interpreter, None)
        }
        Site::Placed(config) => (
            config.cwd.clone(),
            config.interpreter.clone().unwrap_or_default(),
            config.launcher.clone(),
        ),
        Site::Unplaced(unplaced) => (
            unplaced.cwd.clone().unwrap_or_default(),
            unplaced.interpreter.clone().unwrap_or_default(),
            None,
        ),
    };
    let identity = if let Some(id) = &request.session_id {
        format!("session:{id}")
    } else if let Some(file) = &request.session_file {
        format!("file:{file}")
    } else {
        format!("cwd:{}", cwd.display())
    };
    Ok(SessionKey {
        identity,
        cwd,
        interpreter,
        launcher,
    })
}

/// The interpreter's real path for the key; a path that does not resolve keys as given
/// (starting it will report the problem).
fn real_interpreter(interpreter: &str, cwd: &Path) -> String {
    let expanded = match interpreter.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map_or(PathBuf::from(interpreter), |h| PathBuf::from(h).join(rest)),
        None => PathBuf::from(interpreter),
    };
    let path = if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    };
    // In a venv or conda environment the executable is usually a symlink to the base
    // interpreter: two environments made from one Python would resolve to one key and
    // share a kernel (the second silently running in the first one's packages). There
    // the environment's own directory is resolved and the file name kept.
    let environment = path
        .parent()
        .and_then(Path::parent)
        .filter(|env| env.join("pyvenv.cfg").is_file() || env.join("conda-meta").is_dir());
    if let (Some(_), Some(dir), Some(name)) = (environment, path.parent(), path.file_name()) {
        if let Ok((real_dir, _)) = real_path(dir) {
            return real_dir.join(name).display().to_string();
        }
    }
    real_path(&path)
        .map_or(path, |(real, _)| real)
        .display()
        .to_string()
}

/// What `std::fs::canonicalize` returns, and whether it is a directory, in four system
/// calls however long the path: open it `O_PATH`, ask /proc what the descriptor is, stat
/// it. realpath(3) reads the link of every component (a dozen calls for a venv's python
/// through pyenv), and every pool request resolves its cwd and interpreter.
#[cfg(target_os = "linux")]
fn real_path(path: &Path) -> std::io::Result<(PathBuf, bool)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_PATH)
        .open(path)?;
    let is_dir = file.metadata()?.is_dir();
    match std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        Ok(real) if real.is_absolute() => Ok((real, is_dir)),
        _ => Ok((std::fs::canonicalize(path)?, is_dir)), // no /proc
    }
}

#[cfg(not(target_os = "linux"))]
fn real_path(path: &Path) -> std::io::Result<(PathBuf, bool)> {
    let real = std::fs::canonicalize(path)?;
    let is_dir = real.is_dir();
    Ok((real, is_dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_path_agrees_with_canonicalize() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(base.join("d")).unwrap();
        std::fs::write(base.join("d/f"), "").unwrap();
        std::os::unix::fs::symlink(base.join("d"), base.join("link-d")).unwrap();
        std::os::unix::fs::symlink("link-d/f", base.join("link-f")).unwrap();
        std::os::unix::fs::symlink(base.join("link-f"), base.join("link-link-f")).unwrap();
        let cases = [
            (base.join("link-link-f"), false),
            (base.join("link-d/../d/./f"), false),
            (base.join("link-d"), true),
            (base.clone(), true),
        ];
        for (path, dir) in cases {
            let expected = std::fs::canonicalize(&path).unwrap();
            assert_eq!(
                real_path(&path).unwrap(),
                (expected, dir),
                "{}",
                path.display()
            );
        }
        assert!(real_path(&base.join("missing")).is_err());
        std::os::unix::fs::symlink(base.join("missing"), base.join("dangling")).unwrap();
        assert!(real_path(&base.join("dangling")).is_err());
    }
}
