//! Waits for the kernel process and signals it without ever hitting a reused pid.
//!
//! A pid is only safe to signal while its process is unreaped: after `waitpid` the
//! number may belong to anyone. So the waiter first learns of the exit without reaping
//! (`waitid(WNOWAIT)`: the process stays a zombie and keeps its pid), then reaps it
//! under the same lock every signal takes. A signal is either sent before the reap, to
//! our own zombie or live process, or not sent at all.
//!
//! We reap ourselves rather than through tokio because in a sandbox the kernel is not
//! the process tokio spawned (see `sandbox`), and one waiting path serves both.

use std::sync::{Arc, Mutex};

use nix::libc;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::sync::watch;

use crate::process::exit::ExitInfo;

/// Signals for a kernel reached only through a link that outlives its processes (a
/// launched kernel whose link is kept): the link's keeper decides what each means.
pub type LinkedSignals = Box<dyn Fn(Signal) -> bool + Send + Sync>;

/// The kernel process, while it may be signalled.
pub struct KernelProcess {
    pid: u32,
    /// True once reaped: from then on the pid is not ours.
    reaped: Mutex<bool>,
    /// Set for a kernel behind a kept link: signals go to its keeper, not to `pid`.
    linked: Option<LinkedSignals>,
}

impl KernelProcess {
    /// Starts waiting for child `pid`; its exit is published on the returned channel.
    /// With `init`, `pid` is the init of the kernel's PID namespace, which cannot die of
    /// the kernel's signal and exits with 128 + that signal instead: read it back so.
    pub fn watch(pid: u32, init: bool) -> (Arc<KernelProcess>, watch::Receiver<Option<ExitInfo>>) {
        KernelProcess::waited_by(pid, init, |process| process.wait())
    }

    /// Starts waiting for `pid`, a process another process reaps (a zygote's kernel):
    /// `exited` brings how it ended (`None` when that is unknowable: its parent went),
    /// and `reap` lets the parent reap it. The pid stays ours until then: `reap` runs
    /// only after no signal can be sent to it any more.
    pub fn watch_adopted(
        pid: u32,
        init: bool,
        exited: std::sync::mpsc::Receiver<Option<ExitInfo>>,
        reap: impl FnOnce() + Send + 'static,
    ) -> (Arc<KernelProcess>, watch::Receiver<Option<ExitInfo>>) {
        KernelProcess::waited_by(pid, init, move |process| {
            let info = exited.recv().ok().flatten();
            *process.reaped.lock().unwrap() = true;
            reap();
            info.unwrap_or(ExitInfo {
                code: None,
                signal: None,
            })
        })
    }

    /// A kernel behind a link that may be replaced (`far_link.rs`): `pid` is the first
    /// launcher's, for what is shown; `signals` receives every signal meant for the
    /// kernel while it lives, and `exited` brings its end once the link is gone for good.
    pub fn watch_linked(
        pid: u32,
        signals: LinkedSignals,
        exited: std::sync::mpsc::Receiver<ExitInfo>,
    ) -> (Arc<KernelProcess>, watch::Receiver<Option<ExitInfo>>) {
        KernelProcess::waited_by_with(pid, false, Some(signals), move |process| {
            let info = exited.recv().unwrap_or(ExitInfo {
                code: None,
                signal: None,
            });
            *process.reaped.lock().unwrap() = true;
            info
        })
    }

    fn waited_by(
        pid: u32,
        init: bool,
        wait: impl FnOnce(&KernelProcess) -> ExitInfo + Send + 'static,
    ) -> (Arc<KernelProcess>, watch::Receiver<Option<ExitInfo>>) {
        KernelProcess::waited_by_with(pid, init, None, wait)
    }

    fn waited_by_with(
        pid: u32,
        init: bool,
        linked: Option<LinkedSignals>,
        wait: impl FnOnce(&KernelProcess) -> ExitInfo + Send + 'static,
    ) -> (Arc<KernelProcess>, watch::Receiver<Option<ExitInfo>>) {
        let process = Arc::new(KernelProcess {
            pid,
            reaped: Mutex::new(false),
            linked,
        });
        let (tx, rx) = watch::channel(None);
        let waiter = process.clone();
        let spawned = std::thread::Builder::new()
            .name("pykernel-reaper".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                let mut info = wait(&waiter);
                if let (true, Some(code @ 129..=192)) = (init, info.code) {
                    info = ExitInfo {
                        code: None,
                        signal: Some(code - 128),
                    };
                }
                let _ = tx.send(Some(info));
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start the kernel's reaper thread: {e}");
        }
        (process, rx)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Signals the kernel's process group (the kernel and everything that stayed in its
    /// group): `Some(delivered)`, or `None` when nothing was sent because the kernel was
    /// already reaped.
    pub fn signal_group(&self, signal: Signal) -> Option<bool> {
        let reaped = self.reaped.lock().unwrap();
        if *reaped || self.pid == 0 {
            return None;
        }
        if let Some(linked) = &self.linked {
            return Some(linked(signal));
        }
        Some(killpg(Pid::from_raw(self.pid as i32), signal).is_ok())
    }

    /// Signals the process alone (not its group), under the same guard as
    /// [`KernelProcess::signal_group`].
    pub fn signal_process(&self, signal: Signal) -> Option<bool> {
        let reaped = self.reaped.lock().unwrap();
        if *reaped || self.pid == 0 || self.linked.is_some() {
            return None;
        }
        Some(nix::sys::signal::kill(Pid::from_raw(self.pid as i32), signal).is_ok())
    }

    fn wait(&self) -> ExitInfo {
        let pid = self.pid as libc::id_t;
        loop {
            // SAFETY: siginfo_t is plain data; waitid fills it.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let r =
                unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
            if r == 0 {
                break;
            }
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                // Not our child (someone else reaped it): nothing left to signal.
                *self.reaped.lock().unwrap() = true;
                return ExitInfo {
                    code: None,
                    signal: None,
                };
            }
        }
        let mut reaped = self.reaped.lock().unwrap();
        let mut status = 0;
        // SAFETY: reaping our own child, which waitid saw exit.
        let r = unsafe { libc::waitpid(self.pid as libc::pid_t, &mut status, 0) };
        *reaped = true;
        drop(reaped);
        if r < 0 {
            return ExitInfo {
                code: None,
                signal: None,
            };
        }
        if libc::WIFEXITED(status) {
            ExitInfo {
                code: Some(libc::WEXITSTATUS(status)),
                signal: None,
            }
        } else if libc::WIFSIGNALED(status) {
            ExitInfo {
                code: None,
                signal: Some(libc::WTERMSIG(status)),
            }
        } else {
            ExitInfo {
                code: None,
                signal: None,
            }
        }
    }
}

#[cfg(test)]
// The reaper under test waits for these children by pid (`waitid`), which clippy cannot
// see: a `Child::wait` here would race it.
#[allow(clippy::zombie_processes)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[tokio::test]
    async fn a_reaped_pid_is_never_signalled_again() {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let (process, mut exit) = KernelProcess::watch(child.id(), false);
        assert_eq!(process.signal_group(Signal::SIGTERM), Some(true));
        exit.wait_for(|e| e.is_some()).await.unwrap();
        assert_eq!(exit.borrow().unwrap().signal, Some(libc::SIGTERM));
        // The pid is free for reuse now: no signal may even be tried.
        assert_eq!(process.signal_group(Signal::SIGKILL), None);
    }

    #[tokio::test]
    async fn an_exit_code_is_reported() {
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 7"])
            .spawn()
            .unwrap();
        let (_process, mut exit) = KernelProcess::watch(child.id(), false);
        exit.wait_for(|e| e.is_some()).await.unwrap();
        assert_eq!(exit.borrow().unwrap().code, Some(7));
    }
}
