//! The kernel's `Command`, built but not spawned: what runs, where, with which variables,
//! in which session, under which sandbox. Spawning and the lifecycle live in `kernel/start.rs` and `kernel/ending.rs`.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::sandbox::Plan;

/// Everything that decides how the kernel process starts.
pub struct LaunchSpec<'a> {
    pub python: &'a Path,
    pub runner: &'a Path,
    pub cwd: &'a Path,
    /// The complete environment: filtered host variables plus host-managed ones.
    pub env: &'a BTreeMap<String, String>,
    pub memory_limit_bytes: Option<u64>,
    /// A pids cgroup the kernel starts in (`maxProcesses`).
    pub cgroup: Option<&'a crate::process::pids_cgroup::PidsCgroup>,
    /// The sandbox, prepared in the host; entered between fork and exec.
    pub sandbox: &'a Plan,
    /// A descriptor of the host's the kernel inherits (the runner's sealed bytecode).
    pub inherit: Option<std::os::fd::RawFd>,
}

/// A std `Command` (not tokio's): the kernel is reaped by [`crate::process::reaper`], and in a
/// sandbox it is not even the process this command spawns.
pub fn build_command(spec: &LaunchSpec<'_>) -> Command {
    let mut cmd = Command::new(spec.python);
    cmd.arg("-u")
        .arg(spec.runner)
        .current_dir(spec.cwd)
        .env_clear()
        .envs(spec.env)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let memory_limit = spec.memory_limit_bytes;
    let cgroup_procs = spec
        .cgroup
        .map(|c| c as *const crate::process::pids_cgroup::PidsCgroup as usize);
    let sandbox = spec.sandbox as *const Plan as usize;
    let inherit = spec.inherit;
    // SAFETY: between fork and exec only async-signal-safe calls are allowed; everything
    // here is a plain system call and nothing allocates. The plan and the cgroup outlive
    // the spawn (the caller holds them).
    unsafe {
        cmd.pre_exec(move || {
            close_inherited_fds_on_exec();
            if let Some(fd) = inherit {
                // Ours in this copy only: clearing close-on-exec here lets it through.
                nix::libc::fcntl(fd, nix::libc::F_SETFD, 0);
            }
            if let Some(cgroup) = cgroup_procs {
                let cgroup = &*(cgroup as *const crate::process::pids_cgroup::PidsCgroup);
                cgroup.enter_from_child()?;
            }
            if let Some(limit) = memory_limit {
                nix::sys::resource::setrlimit(
                    nix::sys::resource::Resource::RLIMIT_AS,
                    limit,
                    limit,
                )
                .map_err(std::io::Error::from)?;
            }
            // Its own session (one signal to the group reaches the kernel and every
            // child it started; the terminal's Ctrl-C aimed at the host does not reach
            // it), inside the sandbox.
            let sandbox = &*(sandbox as *const Plan);
            sandbox.enter()
        });
    }
    cmd
}

/// Between fork and exec: descriptors the host opened without close-on-exec (files,
/// sockets of other libraries) must not reach the child, so everything above stdio is
/// marked close-on-exec. A kernel older than Linux 5.11 refuses the flag; then only what
/// the host marked itself is closed. Async-signal-safe: one system call.
pub fn close_inherited_fds_on_exec() {
    #[cfg(target_os = "linux")]
    // SAFETY: close_range only changes flags of this process's descriptors.
    unsafe {
        nix::libc::syscall(
            nix::libc::SYS_close_range,
            3u32,
            u32::MAX,
            nix::libc::CLOSE_RANGE_CLOEXEC,
        );
    }
}
