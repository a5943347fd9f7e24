//! Whether what a zygote imported is still what is on disk (Linux).
//!
//! The zygote names what its imports came from: every directory on `sys.path` and the
//! file of every module loaded from outside the standard library, each with its mtime
//! and size (a few hundred paths for pandas). A kernel forked from a zygote whose files
//! changed since (a `%pip install`, an edited module) would start with the old code,
//! where a spawned one would import the new, so the zygote is retired first.
//!
//! Comparing every path's `stat` before each fork cost a start 0.5-1 ms. Instead each
//! path gets an inotify watch once, when the zygote is ready, and the check before a
//! fork is one non-blocking `read` of the inotify descriptor: the kernel queues an
//! event when the write, rename or unlink is made, so a change that completed before
//! the check is in the queue when it reads. The paths are compared by `stat` once more
//! after their watches are in place, which covers a change made between the zygote's
//! look and the watch. Any event at all (a write, a change of attributes or links, an
//! entry made, removed or renamed in a watched directory, the queue overflowing) counts
//! as a change: a zygote restarted for nothing costs one start its speed, a stale one
//! would run old code. A path that cannot be watched (the watch limit, a file gone
//! meanwhile) is compared by `stat` before each fork, as every path was before; so are
//! all of them where inotify is not to be had.
//!
//! inotify sees the changes made through this machine's kernel: a file on a network
//! filesystem edited from another machine is not seen (neither was its mtime, through
//! the client's attribute cache, in time).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::libc;

/// What a change to a watched file or directory is, for inotify.
const CHANGES: u32 = libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;

/// A zygote's imports: the paths they came from, (path, mtime in ns, size) as the
/// zygote saw them, and the watch on them.
#[derive(Debug, Default)]
pub struct Imports {
    /// The paths with no inotify watch: compared by `stat` before each fork.
    unwatched: Vec<(PathBuf, u64, u64)>,
    /// The inotify descriptor (non-blocking) watching the others.
    inotify: Option<OwnedFd>,
    /// Set once a change was seen: it stays changed.
    changed: AtomicBool,
}

impl Imports {
    /// Watches `paths`. Blocks for a few hundred system calls: call it off the start path.
    pub fn watch(paths: Vec<(PathBuf, u64, u64)>) -> Imports {
        // SAFETY: inotify_init1 takes flags and returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        let inotify = (fd >= 0).then(|| {
            // SAFETY: a descriptor just made, owned by nothing else.
            unsafe { OwnedFd::from_raw_fd(fd) }
        });
        let mut unwatched = Vec::new();
        let mut watched = Vec::new();
        for entry in paths {
            let added = inotify.as_ref().is_some_and(|fd| add_watch(fd, &entry.0));
            if added {
                watched.push(entry);
            } else {
                unwatched.push(entry);
            }
        }
        let imports = Imports {
            unwatched,
            inotify,
            changed: AtomicBool::new(false),
        };
        // What changed before its watch was in place.
        if !watched.iter().all(unchanged) {
            imports.changed.store(true, Ordering::SeqCst);
        }
        imports
    }

    /// Whether every path is as the zygote saw it: no event on a watched one, and the
    /// same mtime and size for the others.
    pub fn unchanged(&self) -> bool {
        if self.changed.load(Ordering::SeqCst) {
            return false;
        }
        let seen =
            self.inotify.as_ref().is_some_and(has_events) || !self.unwatched.iter().all(unchanged);
        if seen {
            self.changed.store(true, Ordering::SeqCst);
        }
        !seen
    }

    /// How many paths are compared by `stat` before each fork.
    pub fn unwatched(&self) -> usize {
        self.unwatched.len()
    }
}

fn add_watch(fd: &OwnedFd, path: &std::path::Path) -> bool {
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid descriptor and a NUL-terminated path that outlives the call.
    unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c_path.as_ptr(), CHANGES) >= 0 }
}

/// Whether the queue holds an event (or cannot be read: then nothing can be vouched for).
fn has_events(fd: &OwnedFd) -> bool {
    let mut buf = [0u8; 4096];
    // SAFETY: reads at most buf.len() bytes into buf.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n >= 0 {
        return n > 0;
    }
    let errno = std::io::Error::last_os_error().raw_os_error();
    errno != Some(libc::EAGAIN) && errno != Some(libc::EINTR)
}

fn unchanged((path, mtime, size): &(PathBuf, u64, u64)) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| {
        meta.len() == *size
            && meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .is_some_and(|d| d.as_nanos() == u128::from(*mtime))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(path: &std::path::Path) -> (PathBuf, u64, u64) {
        let meta = std::fs::metadata(path).unwrap();
        let mtime = meta
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        (path.to_path_buf(), mtime, meta.len())
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("pykernel-imports-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_file_written_in_place_is_a_change() {
        let dir = scratch("write");
        let module = dir.join("m.py");
        std::fs::write(&module, "x = 1\n").unwrap();
        let imports = Imports::watch(vec![seen(&dir), seen(&module)]);
        assert_eq!(imports.unwatched(), 0);
        assert!(imports.unchanged());
        // Same size: the old check could miss it within the mtime's granularity.
        std::fs::write(&module, "x = 2\n").unwrap();
        assert!(!imports.unchanged());
        assert!(!imports.unchanged(), "a change stays seen");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_replaced_by_a_rename_is_a_change() {
        let dir = scratch("rename");
        let module = dir.join("m.py");
        std::fs::write(&module, "x = 1\n").unwrap();
        // The module's own file only, not its directory: the rename reaches the old
        // file as a change of its links.
        let imports = Imports::watch(vec![seen(&module)]);
        assert!(imports.unchanged());
        std::fs::write(dir.join("m.py.new"), "x = 2\n").unwrap();
        std::fs::rename(dir.join("m.py.new"), &module).unwrap();
        assert!(!imports.unchanged());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_entry_made_in_a_watched_directory_is_a_change() {
        let dir = scratch("entry");
        let imports = Imports::watch(vec![seen(&dir)]);
        assert!(imports.unchanged());
        std::fs::write(dir.join("new_package.pth"), "").unwrap();
        assert!(!imports.unchanged());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_change_before_the_watch_is_seen_by_stat() {
        let dir = scratch("before");
        let module = dir.join("m.py");
        std::fs::write(&module, "x = 1\n").unwrap();
        let before = seen(&module);
        std::fs::write(&module, "x = 22\n").unwrap();
        assert!(!Imports::watch(vec![before]).unchanged());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_path_that_cannot_be_watched_is_compared_by_stat() {
        let dir = scratch("unwatched");
        let gone = dir.join("gone.py");
        let imports = Imports::watch(vec![(gone.clone(), 0, 0)]);
        assert_eq!(imports.unwatched(), 1);
        assert!(
            !imports.unchanged(),
            "a path that is not there is not as it was"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
