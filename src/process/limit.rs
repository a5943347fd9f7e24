//! A cap on how many processes a kernel may run at once (`maxProcesses`): a fork bomb in a
//! cell ends the kernel instead of flooding the machine. Threads do not count.
//!
//! A watcher counts the kernel's processes every 20 ms and, past the limit, kills the
//! whole kernel (every process it has) and says so in the cell's result. Where a pids
//! cgroup could be made (`pids_cgroup`), its `pids.max` backs this up with a hard bound on
//! tasks that holds between two counts.
//!
//! Why the whole kernel, not just the processes over the limit (youngest first): a bomb
//! whose older processes keep forking would be trimmed every 20 ms forever, and a
//! `multiprocessing.Pool` larger than the limit would respawn the workers killed under it
//! in a loop, both until the cell's timeout, if it has one; a kernel killed once, with a
//! result that names the limit, is a failure the agent can read and act on. Killing the
//! namespace's init also stops a bomb at once (forks into a dying namespace fail), and
//! signals only a process the host has not reaped, so never a reused pid.
//!
//! Why not RLIMIT_NPROC: it counts every process of the user, not of the kernel, and root
//! is exempt from it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::watch;

use crate::process::exit::ExitInfo;
use crate::process::pids_cgroup::PidsCgroup;
use crate::process::reaper::KernelProcess;

const POLL: Duration = Duration::from_millis(20);

/// Where the watcher counts a kernel's processes: the most complete source it has.
pub enum Census {
    /// The kernel's pids cgroup: every process it started, however it detached; with the
    /// host pid of its PID namespace's init, the namespace's processes too (the larger
    /// count wins: a process the cgroup lost, moved to another, is still in the
    /// namespace).
    Cgroup(PidsCgroup, Option<u32>),
    /// The kernel's PID namespace, read from its own `/proc` through its init (host pid):
    /// every process in it and in namespaces nested in it, whatever their session.
    Namespace(u32),
    /// The session led by the kernel (host pid). A process that calls `setsid` leaves
    /// it and is not counted; this is the count where the kernel has neither of the above.
    Session(u32),
}

impl Census {
    /// Live processes (zombies excluded: they hold no resources but a pid, and the
    /// cgroup's backstop counts those).
    pub fn count(&self) -> usize {
        match self {
            Census::Cgroup(cgroup, init) => cgroup
                .processes()
                .len()
                .max(init.map_or(0, namespace_members)),
            Census::Namespace(init) => namespace_members(*init),
            Census::Session(sid) => session_members(*sid),
        }
    }
}

/// The processes of the PID namespace whose init is host pid `init`, as the namespace's
/// own `/proc` lists them (it was mounted before the kernel ran, and a cell cannot change
/// mounts). Threads are not listed; zombies are, and are left out.
fn namespace_members(init: u32) -> usize {
    process_stats(&PathBuf::from(format!("/proc/{init}/root/proc")))
        .filter(|stat| state(stat).is_some_and(|s| s != "Z"))
        .count()
}

/// The `stat` line of every process a `/proc` lists (threads are not listed).
fn process_stats(proc: &Path) -> impl Iterator<Item = String> {
    std::fs::read_dir(proc)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
}

/// Live members of session `sid` (zombies excluded).
pub fn session_members(sid: u32) -> usize {
    process_stats(Path::new("/proc"))
        .filter(|stat| {
            // After the state: ppid pgrp session ...
            let fields: Vec<&str> = after_command(stat).split(' ').collect();
            fields.len() > 3 && fields[0] != "Z" && fields[3].parse::<u32>() == Ok(sid)
        })
        .count()
}

/// The fields of a `/proc/<pid>/stat` line after the parenthesised command.
fn after_command(stat: &str) -> &str {
    stat.rfind(')')
        .and_then(|i| stat.get(i + 2..))
        .unwrap_or_default()
}

/// The state letter of a `/proc/<pid>/stat` line.
fn state(stat: &str) -> Option<&str> {
    after_command(stat)
        .split(' ')
        .next()
        .filter(|s| !s.is_empty())
}

/// Watches the kernel until it is reaped. Past `limit` processes, kills it with all its
/// processes, telling `on_exceeded` first. Then, the kernel reaped, drops the census, which
/// empties and removes the kernel's cgroup if it has one.
pub async fn watch_processes(
    process: Arc<KernelProcess>,
    census: Census,
    limit: usize,
    mut exit: watch::Receiver<Option<ExitInfo>>,
    on_exceeded: impl FnOnce() + Send + 'static,
) {
    let census = Arc::new(census);
    loop {
        tokio::select! {
            _ = exit.wait_for(|e| e.is_some()) => break,
            _ = tokio::time::sleep(POLL) => {}
        }
        let counting = census.clone();
        let count = tokio::task::spawn_blocking(move || counting.count())
            .await
            .unwrap_or(0);
        if count > limit {
            on_exceeded();
            // The group's leader is the namespace's init where there is one (its death
            // ends them all) or the kernel; without a namespace, processes forked while
            // the first signal is delivered are caught by the next. The cgroup also
            // reaches what left the group.
            for _ in 0..5 {
                if process.signal_group(Signal::SIGKILL).is_none() {
                    break;
                }
                if let Census::Cgroup(cgroup, _) = census.as_ref() {
                    cgroup.kill_all();
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let _ = exit.wait_for(|e| e.is_some()).await;
            break;
        }
    }
    // Only now is nothing of the kernel left to count: let the cgroup go (its removal
    // may wait on the file system, so not on this runtime's threads).
    let _ = tokio::task::spawn_blocking(move || drop(census)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_members_of_a_session() {
        use std::os::unix::process::CommandExt;
        // A session of its own: a shell (its leader) and the two sleeps it started.
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30 & wait"]);
        // SAFETY: setsid between fork and exec, a plain system call.
        unsafe {
            cmd.pre_exec(|| nix::unistd::setsid().map(|_| ()).map_err(Into::into));
        }
        let mut child = cmd.spawn().unwrap();
        let sid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while session_members(sid) < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let counted = session_members(sid);
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(sid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = child.wait();
        assert_eq!(counted, 3, "the shell and its two sleeps");
        assert_eq!(session_members(u32::MAX - 1), 0);
    }

    #[test]
    fn reads_the_state_after_any_command_name() {
        assert_eq!(state("6 (python) Z 2 1 1"), Some("Z"));
        assert_eq!(state("7 (a) b (c)) S 2 1 1"), Some("S"));
        assert_eq!(state("garbage"), None);
    }
}
