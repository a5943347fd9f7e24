//! Kernel isolation: what code in a cell can reach outside its kernel.
//!
//! A cell is code an LLM wrote, running as the host's user. On Linux every kernel gets,
//! by default:
//!
//! - **Its own user, PID, mount and IPC namespaces** (`namespaces.rs`): the kernel is the
//!   init of a process tree of its own, with a `/proc` that shows only that tree. The
//!   host and other kernels have no pid there: nothing to signal, ptrace, or read under
//!   `/proc/<pid>` (`environ`, `fd/*`), even as root. When the kernel ends, Linux kills
//!   every process in the namespace, whatever it did to its session or group. The
//!   runner files are mounted read-only inside, so nothing a cell writes is ever run by
//!   a later kernel. Capabilities are dropped, so a cell cannot undo any of it.
//! - **A Landlock domain** (`landlock_rules.rs`): no signals to and no abstract unix
//!   sockets of processes outside it (ABI 6), no ptrace of them, no mount changes; with
//!   `writable`, writes only beneath the allowed directories; with `network: false` and
//!   no namespaces, no TCP.
//!
//! Why both: Landlock alone leaves root's `/proc/<host>/environ` readable (measured) and
//! cannot make processes die with the kernel; namespaces alone leave the host's abstract
//! sockets reachable while the network is shared. Both are unprivileged (no setuid
//! helper, no daemon) and cost a few system calls at spawn.
//!
//! What the machine offers is probed once per process ([`support`]); a kernel started
//! with less than the defaults says what it lacks ([`Isolation::missing`]); an option the
//! machine cannot enforce is refused, never silently dropped.

#[cfg(target_os = "linux")]
mod landlock_rules;
#[cfg(target_os = "linux")]
mod namespaces;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{KernelError, Result};

/// `KernelOptions.sandbox`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxConfig {
    /// No isolation: for hosts that already run inside a sandbox.
    Off,
    On {
        /// `false`: no network but loopback.
        network: bool,
        /// `Some`: writes only beneath the kernel's cwd, a private temporary directory,
        /// `/dev` and these directories. Reads stay allowed everywhere.
        writable: Option<Vec<PathBuf>>,
    },
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig::On {
            network: true,
            writable: None,
        }
    }
}

impl SandboxConfig {
    pub fn is_off(&self) -> bool {
        matches!(self, SandboxConfig::Off)
    }

    pub fn confines_writes(&self) -> bool {
        matches!(
            self,
            SandboxConfig::On {
                writable: Some(_),
                ..
            }
        )
    }
}

/// What this machine can enforce.
#[derive(Debug, Clone)]
pub struct Support {
    /// User + PID + mount namespaces with a `/proc` of their own; else why not.
    pub namespaces: std::result::Result<(), String>,
    /// The Landlock ABI (0: none).
    pub landlock_abi: i32,
}

/// Probed once per process: a throwaway child tries the namespaces for real.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            // What a machine without unprivileged user namespaces gives, on this one.
            let namespaces = if std::env::var("PYKERNEL_SANDBOX_NAMESPACES").as_deref() == Ok("0") {
                Err("turned off by PYKERNEL_SANDBOX_NAMESPACES=0".to_string())
            } else {
                namespaces::probe()
            };
            Support {
                namespaces,
                landlock_abi: landlock_rules::abi(),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            Support {
                namespaces: Err("not Linux".into()),
                landlock_abi: 0,
            }
        }
    })
}

/// What a kernel got: the protections in force and, in words, the defaults it lacks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Isolation {
    /// `namespaces+landlock`, `namespaces`, `landlock`, `none` (nothing available) or
    /// `off` (asked for).
    pub mode: String,
    pub enforced: Vec<&'static str>,
    pub missing: Vec<String>,
}

/// What a kernel started with the default sandbox gets on this machine.
pub fn default_isolation() -> Isolation {
    let root = Path::new("/");
    let target = Target {
        cwd: root,
        runner_base: None,
        private_tmp: None,
        runner_writable: None,
    };
    match Plan::prepare(&SandboxConfig::default(), &target) {
        Ok((_, isolation)) => isolation,
        Err(e) => Isolation {
            mode: "none".into(),
            enforced: vec![],
            missing: vec![e.to_string()],
        },
    }
}

/// Everything prepared in the host for one spawn; [`Plan::enter`] applies it in the child.
pub struct Plan {
    #[cfg(target_os = "linux")]
    namespaces: Option<namespaces::NamespacePlan>,
    #[cfg(target_os = "linux")]
    landlock: Option<std::os::fd::OwnedFd>,
}

/// What [`Plan::prepare`] needs to know about the kernel.
pub struct Target<'a> {
    pub cwd: &'a Path,
    /// Read-only inside the kernel (the runner files); none for a probe.
    pub runner_base: Option<&'a Path>,
    /// The private temporary directory, made when writes are confined.
    pub private_tmp: Option<&'a Path>,
    /// A directory beneath `runner_base` left writable: only for the one process that
    /// builds the runner's bytecode cache, never for a kernel.
    pub runner_writable: Option<&'a Path>,
}

impl Plan {
    /// Chooses the protections for `config` on this machine. Errs when an option that
    /// was asked for cannot be enforced here.
    pub fn prepare(config: &SandboxConfig, target: &Target<'_>) -> Result<(Plan, Isolation)> {
        let support = support();
        let mut isolation = Isolation::default();
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
        let mut plan = Plan {
            #[cfg(target_os = "linux")]
            namespaces: None,
            #[cfg(target_os = "linux")]
            landlock: None,
        };
        let SandboxConfig::On { network, writable } = config else {
            isolation.mode = "off".into();
            return Ok((plan, isolation));
        };
        let refuse = |what: &str, needs: &str| {
            KernelError::Sandbox {
            reason: format!(
                "{what} cannot be enforced on this machine: it needs {needs} ({}; Landlock ABI {}). Drop the option, or run the host where these are available.",
                support.namespaces.as_ref().err().map_or("user namespaces available", |e| e.as_str()),
                support.landlock_abi
            ),
        }
        };
        if writable.is_some() && support.landlock_abi < 1 {
            return Err(refuse("sandbox.writable", "Landlock"));
        }
        if !network && support.namespaces.is_err() && support.landlock_abi < 4 {
            return Err(refuse(
                "sandbox.network = false",
                "user namespaces or Landlock ABI 4",
            ));
        }
        let writable_dirs = writable.as_ref().map(|extra| {
            let mut dirs = vec![target.cwd.to_path_buf(), PathBuf::from("/dev")];
            dirs.extend(target.private_tmp.map(Path::to_path_buf));
            dirs.extend(extra.iter().cloned());
            dirs
        });
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
        let mut modes: Vec<&str> = Vec::new();
        #[cfg(target_os = "linux")]
        {
            if support.namespaces.is_ok() {
                let ns = namespaces::NamespacePlan::new(
                    *network,
                    &target
                        .runner_base
                        .map(Path::to_path_buf)
                        .into_iter()
                        .collect::<Vec<_>>(),
                    target.runner_writable,
                )
                .map_err(|e| KernelError::Sandbox {
                    reason: format!("preparing namespaces: {e}"),
                })?;
                plan.namespaces = Some(ns);
                modes.push("namespaces");
                isolation.enforced.extend([
                    "user-namespace",
                    "pid-namespace",
                    "own-proc",
                    "runner-read-only",
                    "capabilities-dropped",
                ]);
                if !network {
                    isolation.enforced.push("network-namespace");
                }
            }
            // ABI 1 cannot allow moving a file into another directory (`Refer` came with
            // ABI 2), which would break pip and atomic saves: use it only where
            // nothing else holds the kernel, or where writes are confined anyway.
            let landlock_usable = support.landlock_abi >= 2
                || (support.landlock_abi == 1
                    && (plan.namespaces.is_none() || writable_dirs.is_some()));
            if landlock_usable {
                let rules = landlock_rules::Rules {
                    abi: support.landlock_abi,
                    writable: writable_dirs.as_deref(),
                    deny_tcp: !network && plan.namespaces.is_none(),
                };
                let (fd, enforced) =
                    landlock_rules::build(&rules).map_err(|reason| KernelError::Sandbox {
                        reason: format!("preparing Landlock: {reason}"),
                    })?;
                plan.landlock = Some(fd);
                modes.push("landlock");
                isolation.enforced.extend(enforced);
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = writable_dirs;
        isolation.mode = if modes.is_empty() {
            "none".into()
        } else {
            modes.join("+")
        };
        isolation.missing = missing(support, *network);
        Ok((plan, isolation))
    }

    /// Applies the plan in the forked child, before exec. Also makes the kernel the
    /// leader of its own session (one signal to the group reaches all it started).
    ///
    /// # Safety
    /// Call only between fork and exec: async-signal-safe system calls only.
    pub unsafe fn enter(&self) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let landlock = self.landlock.as_ref().map(|fd| fd.as_raw_fd());
            if let Some(ns) = &self.namespaces {
                // Never returns on success: the kernel is exec'd from there.
                return ns.enter(landlock);
            }
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            if let Some(fd) = landlock {
                landlock_rules::restrict_self(fd)?;
            }
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            Ok(())
        }
    }

    /// Names what the sandboxed process executes (call before spawning `cmd`): in
    /// namespace mode the kernel is exec'd by the sandbox itself.
    pub fn set_command(&self, cmd: &std::process::Command) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        if let Some(ns) = &self.namespaces {
            return ns.set_command(cmd);
        }
        let _ = cmd;
        Ok(())
    }

    /// The kernel's pid, given the pid of the process that was spawned: in namespace
    /// mode the kernel is a second process the spawned one reported.
    pub fn kernel_pid(&self, spawned: u32) -> std::io::Result<u32> {
        #[cfg(target_os = "linux")]
        if let Some(ns) = &self.namespaces {
            return ns.kernel_pid();
        }
        Ok(spawned)
    }

    /// The same plan for a zygote, whose kernels each make namespaces and mounts of their
    /// own and then enter their own Landlock domain: without Landlock (which forbids
    /// mounts), and keeping its capabilities across exec (mapping root into a kernel's
    /// user namespace needs CAP_SETFCAP; the zygote keeps that one alone).
    pub fn for_zygote(self) -> Plan {
        #[cfg(target_os = "linux")]
        {
            let mut namespaces = self.namespaces;
            if let Some(ns) = &mut namespaces {
                ns.keep_capabilities();
            }
            Plan {
                landlock: None,
                namespaces,
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            self
        }
    }

    /// The Landlock ruleset, for a kernel that enters it itself (forked by a zygote).
    pub fn landlock_fd(&self) -> Option<std::os::fd::RawFd> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            self.landlock.as_ref().map(|fd| fd.as_raw_fd())
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    /// Whether the spawned process is only a launcher that exits at once (namespaces).
    pub fn spawns_through_launcher(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.namespaces.is_some()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }
}

/// The most of each of a one-shot helper's streams the host keeps.
const HELPER_OUTPUT_BYTES: u64 = 64 * 1024;

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
    // A helper says a few lines; one that floods is cut off (its pipe closes) rather
    // than kept in the host's memory.
    fn read_some(pipe: Option<impl Read>) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(pipe) = pipe {
            let _ = pipe.take(HELPER_OUTPUT_BYTES).read_to_end(&mut out);
        }
        out
    }
    let reader = std::thread::spawn(move || read_some(stdout));
    let err = read_some(stderr);
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
        crate::kernel::ExitInfo {
            code: Some(nix::libc::WEXITSTATUS(status)),
            signal: None,
        }
    } else {
        crate::kernel::ExitInfo {
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

/// The default protections this machine cannot give, in words a user can act on.
fn missing(support: &Support, network: bool) -> Vec<String> {
    let mut missing = Vec::new();
    if let Err(why) = &support.namespaces {
        missing.push(format!(
            "no PID namespace ({why}): processes that leave the kernel's process group can outlive shutdown, and as root the host's /proc/<pid> entries (environ included) stay readable"
        ));
        missing.push(
            "runner files are writable by the kernel: they are verified before each start, but a kernel can race a later start".into(),
        );
        if support.landlock_abi == 1 {
            missing.push(
                "Landlock ABI 1 cannot allow moving a file into another directory: such renames fail (EXDEV)".into(),
            );
        }
        if support.landlock_abi < 1 {
            missing.push(
                "no Landlock: the kernel can signal and ptrace the host and other kernels".into(),
            );
        } else if support.landlock_abi < 6 {
            missing.push(format!(
                "Landlock ABI {} has no signal scoping: the kernel can signal the host",
                support.landlock_abi
            ));
        }
    }
    if network && support.landlock_abi < 6 {
        missing.push(format!(
            "Landlock ABI {} has no abstract unix socket scoping: the host's abstract sockets are reachable (use sandbox.network = false)",
            support.landlock_abi
        ));
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target_in(dir: &Path) -> Target<'_> {
        Target {
            cwd: dir,
            runner_base: Some(dir),
            private_tmp: None,
            runner_writable: None,
        }
    }

    #[test]
    fn off_enforces_nothing_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let target = target_in(dir.path());
        let (plan, isolation) = Plan::prepare(&SandboxConfig::Off, &target).unwrap();
        assert_eq!(isolation.mode, "off");
        assert!(isolation.enforced.is_empty());
        assert!(!plan.spawns_through_launcher());
    }

    #[test]
    fn a_missing_writable_path_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let target = target_in(dir.path());
        let config = SandboxConfig::On {
            network: true,
            writable: Some(vec![dir.path().join("absent")]),
        };
        let err = Plan::prepare(&config, &target).err().unwrap();
        assert_eq!(err.code(), "ERR_SANDBOX");
        // Without Landlock the option itself is refused, which is as clear.
        let expected = if support().landlock_abi >= 1 {
            "absent"
        } else {
            "needs Landlock"
        };
        assert!(err.to_string().contains(expected), "{err}");
    }
}
