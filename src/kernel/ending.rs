//! How a kernel ends: shutdown's steps (exit, SIGTERM, SIGKILL), signalling its group,
//! waiting for its exit, and the report of a kernel that died during a cell.

use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::time::timeout;

use super::config::{ShutdownOutcome, DEFAULT_SHUTDOWN_GRACE};
use super::connection::FRAME_WRITE_WAIT;
use super::end_cause::EndCause;
use super::Kernel;
use crate::error::StderrTail;
use crate::process::exit::ExitInfo;
use crate::wire::events::{ErrorInfo, ExecuteOutcome};
use crate::wire::protocol::HostFrame;

/// How long a confirmed shutdown waits for the kernel's private tmp to be removed.
pub(super) const TMP_REMOVAL_WAIT: Duration = Duration::from_secs(2);

impl Kernel {
    /// The frame stream ended without `done`: the kernel died (or stopped talking, in
    /// which case it is of no further use and is killed). State how it ended: by the
    /// cause the host recorded when it ended the kernel, else by its exit.
    pub(super) async fn report_death(&self, outcome: &mut ExecuteOutcome) {
        let exit = match self.wait_for_exit(Duration::from_secs(2)).await {
            Some(exit) => exit,
            None => {
                // The frames ended but the process lives on: it closed its protocol pipe
                // (a cell can) and is of no further use.
                self.ending.set(EndCause::Silenced);
                self.terminate(DEFAULT_SHUTDOWN_GRACE).await;
                self.exit_info().unwrap_or(ExitInfo {
                    code: None,
                    signal: None,
                })
            }
        };
        let cause = self.ending.cause();
        outcome.ok = false;
        outcome.kernel_died = true;
        outcome.kernel_killed = cause.is_some();
        outcome.execution_count = self.execution_count();
        let evalue = match cause {
            Some(cause) => cause.told(&exit),
            None if exit.signal == Some(Signal::SIGKILL as i32) => {
                format!("the Python kernel died during the cell ({exit}; possibly out of memory)")
            }
            None => format!("the Python kernel died during the cell ({exit})"),
        };
        let tail = self.stderr_tail().await.0;
        outcome.error = Some(ErrorInfo {
            ename: crate::wire::events::KERNEL_DIED.into(),
            evalue,
            traceback: tail.lines().map(str::to_string).collect(),
        });
    }

    /// exit -> grace -> SIGTERM -> grace -> SIGKILL -> grace. Idempotent.
    pub async fn shutdown(&self, grace: Duration) -> ShutdownOutcome {
        self.ending.set(EndCause::ShutDownByHost);
        if self.alive() {
            // Bounded: a kernel that stopped reading its stdin (stopped, or a cell that
            // never reads) leaves a write of ours stuck holding the pipe; the signals
            // below end it all the same.
            let _ = timeout(FRAME_WRITE_WAIT, self.send(&HostFrame::Exit)).await;
            let _ = timeout(FRAME_WRITE_WAIT, self.writer.close()).await;
            if self.wait_for_exit(grace).await.is_none() {
                self.terminate(grace).await;
            }
        }
        // Children the kernel left behind share its process group.
        self.kill_group(Signal::SIGKILL);
        let exit = self.exit_info();
        if let (Some(removed), true) = (&self.tmp_removed, exit.is_some()) {
            // What the kernel kept in its private tmp is gone when shutdown returns.
            let mut removed = removed.clone();
            let _ = timeout(TMP_REMOVAL_WAIT, removed.wait_for(|gone| *gone)).await;
        }
        ShutdownOutcome {
            confirmed: exit.is_some(),
            exit,
        }
    }

    /// SIGTERM, then SIGKILL, to the whole group, each with `grace` to take effect.
    pub(super) async fn terminate(&self, grace: Duration) {
        for signal in [Signal::SIGTERM, Signal::SIGKILL] {
            self.kill_group(signal);
            if self.wait_for_exit(grace).await.is_some() {
                return;
            }
        }
    }

    /// Signals the kernel's group, never after the kernel was reaped (its pid may be
    /// someone else's by then). In a sandbox nothing of the kernel outlives it; without
    /// one, children that stayed in the group are signalled while the kernel lives.
    pub(super) fn kill_group(&self, signal: Signal) {
        match &self.far {
            Some(far) => {
                let _ = far.signals.send(signal);
            }
            None => {
                self.process.signal_group(signal);
            }
        }
    }

    /// The exit, waiting up to `wait` for it.
    pub(crate) async fn wait_for_exit(&self, wait: Duration) -> Option<ExitInfo> {
        let mut exit = self.exit.clone();
        let _ = timeout(wait, exit.wait_for(|e| e.is_some())).await;
        self.exit_info()
    }

    /// The runner's own stderr, after giving the drain a moment to catch up with a process
    /// that just ended.
    pub(super) async fn stderr_tail(&self) -> StderrTail {
        if !self.alive() {
            let mut closed = self.stderr_closed.clone();
            let _ = timeout(Duration::from_millis(500), closed.wait_for(|c| *c)).await;
        }
        let tail = self.stderr_tail.lock().unwrap();
        let (a, b) = tail.as_slices();
        let mut bytes = a.to_vec();
        bytes.extend_from_slice(b);
        StderrTail(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // Nobody can reach this kernel any more; never leave it running.
        if self.alive() {
            self.kill_group(Signal::SIGKILL);
        }
    }
}
