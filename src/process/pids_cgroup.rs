//! The pids cgroup a kernel with `maxProcesses` runs in, where the host may make one
//! (cgroup v1 `pids`, or v2 with the pids controller, under the host's own cgroup).
//!
//! It does two things the watcher in `process_guard` cannot. Its `pids.max` is a hard
//! backstop: the Linux kernel refuses a fork or a new thread past it, however fast a bomb
//! forks, where the watcher only looks every 20 ms. And its `cgroup.procs` lists every
//! process of the kernel (not threads), whatever it did to its session, group or PID
//! namespace, so the watcher counts from it and everything left in it can be killed.
//!
//! The pids controller counts tasks, threads included, so `pids.max` cannot be the
//! process limit itself (`ThreadPoolExecutor(100)` would fail under `maxProcesses: 64`).
//! It is [`THREADS_PER_PROCESS`] times the limit: room for every allowed process to run
//! that many threads, and still a bound on what a bomb can take from the machine.
//!
//! The directory is removed as soon as the kernel is reaped (its owner drops this), and a
//! host killed before it could remove its directories leaves them to the next host, which
//! sweeps the directories of hosts that no longer exist before it makes its own.

use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Threads each allowed process may run, on average, before the backstop refuses more.
/// A Python kernel runs about five of its own; thread pools default to at most 32.
pub const THREADS_PER_PROCESS: usize = 32;

/// The most `pids.max` accepts (Linux's `PID_MAX_LIMIT`).
const PID_MAX_LIMIT: usize = 4 * 1024 * 1024;

/// Set to `0` in the host's environment (or a kernel's `baseEnv`) to run without the
/// cgroup: the watcher alone then enforces `maxProcesses`, as on a machine where the host
/// may not make one. For tests, as `PYKERNEL_SANDBOX_NAMESPACES=0` is for namespaces.
pub const DISABLE_VAR: &str = "PYKERNEL_PIDS_CGROUP";

/// How long a dropped cgroup keeps trying to empty and remove itself.
const REMOVAL_TRIES: u32 = 500;
const REMOVAL_PAUSE: Duration = Duration::from_millis(10);

/// A pids cgroup made for one kernel; emptied (its processes killed) and removed when
/// dropped, which its owner does once the kernel is reaped.
pub struct PidsCgroup {
    dir: PathBuf,
    /// The cgroup's path as `/proc/<pid>/cgroup` shows it for a member.
    path: String,
    /// `<dir>/cgroup.procs`, ready for the child to write itself into before exec.
    procs: CString,
}

impl PidsCgroup {
    /// A new cgroup under ours whose `pids.max` backs up a limit of `processes`, or None
    /// where that is not allowed or `env` turns it off ([`DISABLE_VAR`]).
    pub fn create(processes: usize, env: &HashMap<String, String>) -> Option<PidsCgroup> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        if env.get(DISABLE_VAR).is_some_and(|v| v == "0") {
            return None;
        }
        let (base, base_path) = pids_cgroup_of_self()?;
        sweep_dead_hosts(&base);
        let name = format!(
            "pykernel-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        );
        let dir = base.join(&name);
        std::fs::create_dir(&dir).ok()?;
        let made = PidsCgroup {
            procs: CString::new(
                dir.join("cgroup.procs")
                    .into_os_string()
                    .into_encoded_bytes(),
            )
            .ok()?,
            path: format!("{}/{name}", base_path.trim_end_matches('/')),
            dir,
        };
        std::fs::write(made.dir.join("pids.max"), backstop(processes).to_string()).ok()?;
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

    /// The live processes in the cgroup (host pids). `cgroup.procs` lists processes, not
    /// threads, on v1 and v2, and a process leaves it when it exits, reaped or not.
    pub fn processes(&self) -> Vec<u32> {
        let Ok(text) = std::fs::read_to_string(self.dir.join("cgroup.procs")) else {
            return Vec::new();
        };
        let mut pids: Vec<u32> = text.lines().filter_map(|l| l.parse().ok()).collect();
        // v1 does not promise a list free of duplicates.
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// SIGKILL to every process in the cgroup, never to a pid that was reused meanwhile.
    pub fn kill_all(&self) {
        for pid in self.processes() {
            kill_if_member(pid, &self.path);
        }
    }

    /// Removes the directory; true once it is gone. Fails while a process is in it.
    fn try_remove(&self) -> bool {
        match std::fs::remove_dir(&self.dir) {
            Ok(()) => true,
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
    }
}

impl Drop for PidsCgroup {
    /// Whatever is still in the cgroup belongs to a kernel that is gone (its owner drops
    /// it after the reap, or after a start that failed): kill it, then remove the
    /// directory. Usually nothing is left (a PID namespace dies with its init) and the
    /// first try succeeds; otherwise a thread retries for a few seconds, off the caller's
    /// path. A host that exits meanwhile leaves the directory to the next host's sweep.
    fn drop(&mut self) {
        if self.try_remove() {
            return;
        }
        let leftover = PidsCgroup {
            dir: std::mem::take(&mut self.dir),
            path: std::mem::take(&mut self.path),
            procs: self.procs.clone(),
        };
        let spawned = std::thread::Builder::new()
            .name("pykernel-cgroup-removal".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                for _ in 0..REMOVAL_TRIES {
                    leftover.kill_all();
                    std::thread::sleep(REMOVAL_PAUSE);
                    if leftover.try_remove() {
                        break;
                    }
                }
                if !leftover.try_remove() {
                    tracing::warn!(dir = %leftover.dir.display(), "cannot remove the kernel's pids cgroup");
                }
                // Already tried: the copy's own drop must not start another thread.
                std::mem::forget(leftover);
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the cgroup removal thread: {e}");
        }
    }
}

/// `pids.max` for a limit of `processes`: [`THREADS_PER_PROCESS`] tasks for each.
fn backstop(processes: usize) -> usize {
    processes
        .saturating_mul(THREADS_PER_PROCESS)
        .min(PID_MAX_LIMIT)
}

/// Removes the directories of hosts that no longer run (a host killed with SIGKILL
/// cannot remove its own). A live host's directory is never touched: between making it
/// and its kernel entering it, it is empty, and removing it would fail that start. An
/// empty directory whose host is gone has no owner left; one that still holds processes
/// stays (rmdir refuses) until they end.
fn sweep_dead_hosts(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let ours = std::process::id();
    for entry in entries.filter_map(|e| e.ok()) {
        let Some(host) = entry.file_name().to_str().and_then(host_of) else {
            continue;
        };
        if host != ours && !Path::new("/proc").join(host.to_string()).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// The host pid in a directory name `pykernel-<pid>-<n>`.
fn host_of(name: &str) -> Option<u32> {
    let (pid, n) = name.strip_prefix("pykernel-")?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(n))
        .then(|| pid.parse().ok())
        .flatten()
}

/// SIGKILL to `pid` if it is a member of the cgroup at `path`. The check and the signal go
/// through a pidfd, which holds the pid: a process that exited after the cgroup listed it
/// cannot have its number reused by another before the signal.
#[cfg(target_os = "linux")]
fn kill_if_member(pid: u32, path: &str) {
    use nix::libc;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: plain system calls; the descriptor is owned from here on.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return;
    }
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    if member_of(pid, path) {
        // SAFETY: a signal through our own pidfd.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
    }
}

#[cfg(not(target_os = "linux"))]
fn kill_if_member(_pid: u32, _path: &str) {}

/// Whether process `pid` is in the pids cgroup at `path` (v1 `N:pids:<path>`, v2
/// `0::<path>`).
#[cfg(target_os = "linux")]
fn member_of(pid: u32, path: &str) -> bool {
    let Ok(table) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return false;
    };
    table.lines().any(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, at) = (parts.next(), parts.next(), parts.next());
        let pids = controllers.is_some_and(|c| c.is_empty() || c.split(',').any(|c| c == "pids"));
        pids && at == Some(path)
    })
}

/// Where this process's pids cgroup lives, if the pids controller is there and writable:
/// the directory, and its path as `/proc/<pid>/cgroup` shows it.
fn pids_cgroup_of_self() -> Option<(PathBuf, String)> {
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
            return Some((candidate, path.to_string()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backstop_leaves_room_for_threads_and_stays_in_range() {
        assert_eq!(backstop(65), 65 * 32);
        assert_eq!(backstop(4_194_305), PID_MAX_LIMIT);
        assert_eq!(backstop(usize::MAX), PID_MAX_LIMIT);
    }

    #[test]
    fn only_our_directory_names_are_read_as_a_host_pid() {
        assert_eq!(host_of("pykernel-1509-0"), Some(1509));
        assert_eq!(host_of("pykernel-1509-12"), Some(1509));
        for other in [
            "pykernel-1509",
            "pykernel--0",
            "pykernel-x-0",
            "pykernel-1509-0-1",
            "pykernel-tmp-abc",
            "system.slice",
        ] {
            assert_eq!(host_of(other), None, "{other}");
        }
    }

    #[test]
    fn the_switch_turns_the_cgroup_off() {
        let env = HashMap::from([(DISABLE_VAR.to_string(), "0".to_string())]);
        assert!(PidsCgroup::create(64, &env).is_none());
    }
}
