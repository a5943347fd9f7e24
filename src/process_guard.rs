//! A cap on how many processes a kernel may run (`maxProcesses`): a fork bomb in a cell
//! ends the kernel instead of the machine.
//!
//! Why a watcher and not RLIMIT_NPROC: that limit counts every process of the user, not of
//! the kernel, and root is exempt from it. The kernel is a session leader, so its processes
//! are the members of its session; they are counted from /proc every few milliseconds and
//! the whole group is killed when there are too many.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::sync::watch;

const POLL: Duration = Duration::from_millis(20);

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
