//! Directories the host makes for its kernels in its temporary directory: a kernel's
//! private TMPDIR ([`PRIVATE_TMP`], inside its filesystem view its `/tmp`, see
//! `sandbox/view.rs`), and what a session keeps for its kernels ([`SESSION`], see `session_dir.rs`).
//!
//! Made 0700, named for the kind and the host process (`pykernel-tmp-<host pid>-<random>`),
//! so no other user reads one and a later host can tell whose it is. Removed once the
//! kernel is reaped (the kernel's owner spawns [`HostDir::remove_when_reaped`]), whatever
//! ended it: shutdown, a crash, a kill. A host that exits with kernels alive removes
//! theirs from an `atexit` handler (Node) and from `process`'s `exit` event (Bun runs no
//! `atexit` handler; napi's cleanup hooks run in neither). A host killed with SIGKILL
//! cannot: the next host to make one of a kind removes that kind's directories of hosts
//! that no longer run, as it does their cgroups.

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::process::exit::ExitInfo;

/// A kernel's private temporary directory.
pub const PRIVATE_TMP: &str = "pykernel-tmp-";
/// What a session keeps for its kernels (see `session_dir.rs`).
pub const SESSION: &str = "pykernel-session-";

/// Directories of kernels still alive, for the host's exit.
static LIVE: Mutex<Option<HashMap<u64, PathBuf>>> = Mutex::new(None);
static NEXT: AtomicU64 = AtomicU64::new(1);

/// One directory; removed when dropped, or sooner, when its kernel is reaped.
#[derive(Debug)]
pub struct HostDir {
    path: PathBuf,
    id: u64,
}

impl HostDir {
    /// A new directory of the kind `prefix` in the host's temporary directory, 0700.
    pub fn create(prefix: &'static str) -> io::Result<HostDir> {
        static SWEPT: Mutex<Vec<&str>> = Mutex::new(Vec::new());
        static AT_EXIT: Once = Once::new();
        let base = std::env::temp_dir();
        {
            let mut swept = SWEPT.lock().unwrap();
            if !swept.contains(&prefix) {
                swept.push(prefix);
                sweep(&base, prefix);
            }
        }
        AT_EXIT.call_once(|| {
            // SAFETY: registers a plain function; it runs once, at exit.
            unsafe { nix::libc::atexit(remove_all_at_exit) };
        });
        let dir = tempfile::Builder::new()
            .prefix(&format!("{prefix}{}-", std::process::id()))
            .tempdir_in(&base)?;
        let path = dir.keep();
        // Made with the umask's mode (0755 as a rule): no other user may read it.
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        let id = NEXT.fetch_add(1, Ordering::SeqCst);
        LIVE.lock()
            .unwrap()
            .get_or_insert_with(HashMap::new)
            .insert(id, path.clone());
        Ok(HostDir { path, id })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory once `exit` says the kernel was reaped (or its sender is
    /// gone: the kernel object was dropped). The receiver turns `true` once it is gone.
    pub fn remove_when_reaped(
        self,
        mut exit: watch::Receiver<Option<ExitInfo>>,
    ) -> watch::Receiver<bool> {
        let (removed, gone) = watch::channel(false);
        tokio::spawn(async move {
            let _ = exit.wait_for(Option::is_some).await;
            let _ = tokio::task::spawn_blocking(move || drop(self)).await;
            let _ = removed.send(true);
        });
        gone
    }
}

impl Drop for HostDir {
    fn drop(&mut self) {
        if let Some(live) = LIVE.lock().unwrap().as_mut() {
            live.remove(&self.id);
        }
        remove(&self.path, Duration::from_millis(500));
    }
}

/// Removes `dir` and everything in it. A process of the kernel that is still ending may
/// add a file meanwhile: the removal is tried again until `patience` is spent. Symlinks
/// inside are removed, never followed.
fn remove(dir: &Path, patience: Duration) {
    let started = Instant::now();
    loop {
        match crate::store::safe_fs::remove_tree(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) if started.elapsed() >= patience => {
                tracing::warn!(
                    "cannot remove the kernel's private tmp {}: {e}",
                    dir.display()
                );
                return;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

extern "C" fn remove_all_at_exit() {
    remove_all();
}

/// Removes the directories of every kernel still alive: the host is exiting (its
/// kernels end on their own once their pipes close). Never blocks on a lock another
/// thread holds.
pub fn remove_all() {
    let Ok(mut live) = LIVE.try_lock() else {
        return;
    };
    for (_, dir) in live.take().unwrap_or_default() {
        remove(&dir, Duration::from_millis(200));
    }
}

/// Removes the directories of kind `prefix` of this user's hosts that no longer run.
fn sweep(base: &Path, prefix: &str) {
    let uid = nix::unistd::getuid().as_raw();
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(host) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        let ours = entry.metadata().is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if ours && host != std::process::id() as i32 && !alive(host) {
            remove(&entry.path(), Duration::from_millis(100));
        }
    }
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
        .map_or_else(|e| e != nix::errno::Errno::ESRCH, |()| true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn made_private_and_removed_with_what_it_holds() {
        let tmp = HostDir::create(PRIVATE_TMP).unwrap();
        let path = tmp.path().to_path_buf();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert!(path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&format!("{PRIVATE_TMP}{}-", std::process::id())));
        std::fs::create_dir(path.join("sub")).unwrap();
        std::fs::write(path.join("sub/file"), "x").unwrap();
        std::os::unix::fs::symlink("/", path.join("root-link")).unwrap();
        drop(tmp);
        assert!(!path.exists());
        assert!(
            Path::new("/").exists(),
            "a symlink inside is never followed"
        );
    }

    #[test]
    fn a_dead_hosts_directories_are_swept_and_a_live_ones_kept() {
        let base = tempfile::tempdir().unwrap();
        // A pid that cannot be running: past the largest a Linux hands out.
        let dead = base.path().join(format!("{PRIVATE_TMP}99999999-abc"));
        let live = base
            .path()
            .join(format!("{PRIVATE_TMP}{}-abc", std::process::id()));
        let other = base.path().join("pykernel-tmp-notapid-abc");
        for dir in [&dead, &live, &other] {
            std::fs::create_dir(dir).unwrap();
        }
        sweep(base.path(), PRIVATE_TMP);
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(other.exists());
    }
}
