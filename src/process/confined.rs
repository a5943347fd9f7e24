//! A one-shot helper (the interpreter probe, the bytecode compile step) run to its end
//! under a sandbox plan, with a time limit and a cap on what it may print. The helper
//! may be anything a repository ships as its Python, so it is confined as a kernel is.

use crate::process::exit::ExitInfo;
use crate::sandbox::Plan;

/// The most of a one-shot helper's stderr (and, as a rule, stdout) the host keeps.
pub const HELPER_OUTPUT_BYTES: u64 = 64 * 1024;

/// How a one-shot helper run by [`run_confined`] ended.
pub struct Finished {
    /// Exited with status 0.
    pub success: bool,
    /// As a person would say it: "exit code 1", "killed by signal 9 (SIGKILL)".
    pub status: String,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs a one-shot helper (the discovery probe, the bytecode compile step) to its end
/// under `plan`, killed (with its group) if it runs past `limit`. It may be anything a
/// repository ships as its Python, so it gets the kernel's sandbox too.
pub fn run_confined(
    mut cmd: std::process::Command,
    plan: &Plan,
    limit: std::time::Duration,
    max_output: u64,
) -> std::io::Result<Finished> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    use std::sync::{Arc, Condvar, Mutex};

    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    plan.set_command(&cmd)?;
    let plan_addr = plan as *const Plan as usize;
    // SAFETY: the plan outlives the spawn; `enter` uses async-signal-safe calls only.
    unsafe {
        cmd.pre_exec(move || (*(plan_addr as *const Plan)).enter());
    }
    let mut child = cmd.spawn()?;
    let pid = plan.kernel_pid(child.id())? as i32;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    if plan.spawns_through_launcher() {
        let _ = child.wait(); // the launcher, gone at once
    }
    // Killed only while unreaped, so the pid (and group) is still this helper's.
    let reaped = Arc::new((Mutex::new(false), Condvar::new()));
    let timed_out = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let (reaped, timed_out) = (reaped.clone(), timed_out.clone());
        std::thread::spawn(move || {
            let (lock, wake) = &*reaped;
            let done = wake
                .wait_timeout_while(lock.lock().unwrap(), limit, |done| !*done)
                .unwrap()
                .0;
            if !*done {
                timed_out.store(true, std::sync::atomic::Ordering::SeqCst);
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        })
    };
    // A helper says what it was asked; one that floods is cut off (its pipe closes)
    // rather than kept in the host's memory.
    fn read_some(pipe: Option<impl Read>, most: u64) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(pipe) = pipe {
            let _ = pipe.take(most).read_to_end(&mut out);
        }
        out
    }
    let reader = std::thread::spawn(move || read_some(stdout, max_output));
    let err = read_some(stderr, HELPER_OUTPUT_BYTES);
    let out = reader.join().unwrap_or_default();
    let mut status = 0;
    {
        let (lock, wake) = &*reaped;
        let mut done = lock.lock().unwrap();
        // SAFETY: reaping our own child (the helper; a CLONE_PARENT sibling in a sandbox).
        unsafe { nix::libc::waitpid(pid, &mut status, 0) };
        *done = true;
        wake.notify_all();
    }
    let _ = watchdog.join();
    let info = if nix::libc::WIFEXITED(status) {
        ExitInfo {
            code: Some(nix::libc::WEXITSTATUS(status)),
            signal: None,
        }
    } else {
        ExitInfo {
            code: None,
            signal: Some(nix::libc::WTERMSIG(status)),
        }
    };
    Ok(Finished {
        success: info.code == Some(0),
        status: info.to_string(),
        timed_out: timed_out.load(std::sync::atomic::Ordering::SeqCst),
        stdout: out,
        stderr: err,
    })
}
