//! The kernel's `Command`, built but not spawned: what runs, where, with which variables,
//! in which process group. Spawning and the lifecycle live in `kernel.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use tokio::process::Command;

/// Everything that decides how the kernel process starts.
pub struct LaunchSpec<'a> {
    pub python: &'a Path,
    pub runner: &'a Path,
    pub cwd: &'a Path,
    /// The complete environment: filtered host variables plus host-managed ones.
    pub env: &'a BTreeMap<String, String>,
    pub memory_limit_bytes: Option<u64>,
    /// A pids cgroup the kernel starts in (`maxProcesses`).
    pub cgroup: Option<&'a crate::process_guard::PidsCgroup>,
}

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
        .map(|c| c as *const crate::process_guard::PidsCgroup as usize);
    // SAFETY: between fork and exec only async-signal-safe calls are allowed; setsid and
    // setrlimit are plain system calls and nothing here allocates.
    unsafe {
        cmd.pre_exec(move || {
            // Its own session (and so its own process group): one signal to the group
            // reaches the kernel and every child it started, and the terminal's Ctrl-C
            // aimed at the host does not reach the kernel.
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            // Descriptors the host opened without close-on-exec (files, sockets of
            // other libraries) must not reach Python: mark everything above stdio
            // close-on-exec. A kernel older than Linux 5.11 refuses the flag; then
            // only what the host marked itself is closed.
            nix::libc::syscall(
                nix::libc::SYS_close_range,
                3u32,
                u32::MAX,
                nix::libc::CLOSE_RANGE_CLOEXEC,
            );
            if let Some(cgroup) = cgroup_procs {
                // SAFETY: the cgroup outlives the spawn (the caller holds it), and
                // entering it only writes to a file.
                let cgroup = &*(cgroup as *const crate::process_guard::PidsCgroup);
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
            Ok(())
        });
    }
    cmd
}
