//! A cap on how many processes a kernel may run (`maxProcesses`): a fork bomb in a cell
//! fails or ends the kernel instead of the machine.
//!
//! Two layers. Where the host may create a pids cgroup (cgroup v1 `pids`, or v2 with the
//! pids controller), the kernel starts inside one with `pids.max` set, so a fork past the
//! limit fails in the cell (`BlockingIOError`) and the kernel lives. Everywhere, a watcher
//! counts the members of the kernel's session from /proc and kills the group past the
//! limit. Why not RLIMIT_NPROC: it counts every process of the user, not of the kernel,
//! and root is exempt from it.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::sync::watch;

const POLL: Duration = Duration::from_millis(20);

/// A pids cgroup made for one kernel; removed when dropped (once it is empty).
pub struct PidsCgroup {
    dir: PathBuf,
    /// `<dir>/cgroup.procs`, ready for the child to write itself into before exec.
    procs: CString,
}

impl PidsCgroup {
    /// A new cgroup under ours with `pids.max = limit`, or None where that is not allowed.
    pub fn create(limit: usize) -> Option<PidsCgroup> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = pids_cgroup_of_self()?;
        let name = format!(
            "pykernel-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let dir = base.join(name);
        std::fs::create_dir(&dir).ok()?;
        let made = PidsCgroup {
            procs: CString::new(
                dir.join("cgroup.procs")
                    .into_os_string()
                    .into_encoded_bytes(),
            )
            .ok()?,
            dir,
        };
        std::fs::write(made.dir.join("pids.max"), limit.to_string()).ok()?;
        Some(made)
    }

    /// Moves the calling process into the cgroup. For `pre_exec`: only open, write and
    /// close, which are async-signal-safe.
    pub fn enter_from_child(&self) -> std::io::Result<()> {
        // SAFETY: plain system calls on a NUL-terminated path we own.
        unsafe {
            let fd = nix::libc::open(self.procs.as_ptr(), nix::libc::O_WRONLY);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let written = nix::libc::write(fd, b"0".as_ptr().cast(), 1);
            nix::libc::close(fd);
            if written != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Where this process's pids cgroup lives, if the pids controller is there and writable.
fn pids_cgroup_of_self() -> Option<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in table.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let relative = path.trim_start_matches('/');
        let candidate = if controllers.split(',').any(|c| c == "pids") {
            Path::new("/sys/fs/cgroup/pids").join(relative)
        } else if controllers.is_empty() {
            let v2 = Path::new("/sys/fs/cgroup").join(relative);
            let enabled = std::fs::read_to_string(v2.join("cgroup.subtree_control")).ok()?;
            if !enabled.split_whitespace().any(|c| c == "pids") {
                continue;
            }
            v2
        } else {
            continue;
        };
        if candidate.join("cgroup.procs").exists() {
            return Some(candidate);
        }
    }
    None
}

/// Live members of session `sid` (zombies excluded).
pub fn session_members(sid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // After the parenthesised command: state ppid pgrp session ...
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
                return false;
            };
            let fields: Vec<&str> = rest.split(' ').collect();
            fields.len() > 3 && fields[0] != "Z" && fields[3].parse::<u32>() == Ok(sid)
        })
        .count()
}

/// Watches the kernel `pid` until it exits; past `limit` processes, kills its group and
/// sets `exceeded`.
pub async fn watch_processes(
    pid: u32,
    limit: usize,
    mut exit: watch::Receiver<Option<crate::kernel::ExitInfo>>,
    exceeded: Arc<AtomicBool>,
) {
    loop {
        tokio::select! {
            _ = exit.wait_for(|e| e.is_some()) => return,
            _ = tokio::time::sleep(POLL) => {}
        }
        let count = tokio::task::spawn_blocking(move || session_members(pid))
            .await
            .unwrap_or(0);
        if count > limit {
            exceeded.store(true, Ordering::SeqCst);
            // Processes forked while the first signal is delivered are caught by the next.
            for _ in 0..5 {
                let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_members_of_a_session() {
        let sid = nix::unistd::getsid(None).unwrap().as_raw() as u32;
        assert!(
            session_members(sid) >= 1,
            "this test process is in its own session"
        );
        assert_eq!(session_members(u32::MAX - 1), 0);
    }
}
