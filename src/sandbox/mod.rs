//! Kernel isolation: what code in a cell can reach outside its kernel.
//!
//! A cell is code an LLM wrote, running as the host's user. On Linux every kernel gets,
//! by default:
//!
//! - **Its own user, PID, mount and IPC namespaces** (`namespaces.rs`): the kernel is the
//!   init of a process tree of its own, with a `/proc` that shows only that tree. The
//!   host and other kernels have no pid there: nothing to signal, ptrace, or read under
//!   `/proc/<pid>` (`environ`, `fd/*`), even as root. When the kernel ends, Linux kills
//!   every process in the namespace, whatever it did to its session or group.
//! - **A filesystem view of its own** (`view.rs`): the runner files, `/sys` and the
//!   machine's `/proc` knobs read-only, a `/dev`, `/dev/shm` and `/tmp` of its own, the
//!   host's socket files and the artifacts directory out of sight; with `writable`,
//!   everything read-only but the writable directories.
//! - **No capability and no keyring of the host's** (`privileges.rs`), in every mode: a
//!   cell cannot undo any of it, and uid 0 in the namespace (a root host's) gains nothing.
//! - **A Landlock domain** (`landlock_rules.rs`): no signals to and no abstract unix
//!   sockets of processes outside it (ABI 6), no ptrace of them, no mount changes; with
//!   `writable`, writes only beneath the allowed directories; without a view, no writes
//!   to the machine's `/proc`, `/sys` or `/dev` and no reads of its terminals; with
//!   `network: false` and no namespaces, no TCP.
//! - **A seccomp filter** (`seccomp.rs`): the calls a Python kernel never needs and that
//!   would widen its reach (ptrace, the keyring, io_uring, bpf, mounts, namespaces).
//!
//! Why all of them: Landlock alone leaves root's `/proc/<host>/environ` readable
//! (measured) and cannot make processes die with the kernel; namespaces alone leave the
//! host's abstract sockets reachable while the network is shared, and a root host's uid 0
//! able to write its sysctls; neither has a rule for chmod or a socket file. All are
//! unprivileged (no setuid helper, no daemon) and cost about 2 ms of a start (Benchmarks).
//!
//! What the machine offers is probed once per process ([`support`]); a kernel started
//! with less than the defaults says what it lacks ([`Isolation::missing`]); an option the
//! machine cannot enforce is refused, never silently dropped.

#[cfg(target_os = "linux")]
mod landlock_rules;
#[cfg(target_os = "linux")]
mod mounts;
#[cfg(target_os = "linux")]
mod namespaces;
mod policy;
#[cfg(target_os = "linux")]
mod privileges;
#[cfg(target_os = "linux")]
pub mod seccomp;
#[cfg(target_os = "linux")]
pub mod view;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{KernelError, Result};
use crate::wire::protocol::SandboxPolicy;
use crate::wire::zygote::ForkedSandbox;

/// `KernelOptions.sandbox`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxConfig {
    /// No isolation: for hosts that already run inside a sandbox.
    Off,
    On {
        /// `false`: no network but loopback.
        network: bool,
        /// `Some`: writes only beneath the kernel's cwd, its private `/tmp`, its own
        /// `/dev/shm` and ptys, and these directories. Reads stay allowed everywhere.
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
    /// A filesystem view can be built in those namespaces (Linux 5.12+).
    pub view: bool,
    /// The Landlock ABI (0: none).
    pub landlock_abi: i32,
    /// Seccomp filters can be built for this architecture; else why not.
    pub seccomp: std::result::Result<(), String>,
}

/// Probed once per process: a throwaway child tries the namespaces for real.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            // What a machine without unprivileged user namespaces gives, on this one.
            let probe = if std::env::var("PYKERNEL_SANDBOX_NAMESPACES").as_deref() == Ok("0") {
                Err("turned off by PYKERNEL_SANDBOX_NAMESPACES=0".to_string())
            } else {
                namespaces::probe()
            };
            Support {
                view: probe.as_ref().is_ok_and(|p| p.view),
                namespaces: probe.map(|_| ()),
                landlock_abi: landlock_rules::abi(),
                seccomp: seccomp::filters(seccomp::Extra { sockets: false }).map(|_| ()),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            Support {
                namespaces: Err("not Linux".into()),
                view: false,
                landlock_abi: 0,
                seccomp: Err("not Linux".into()),
            }
        }
    })
}

/// What of the host a kernel's filesystem view shows: the host checks a path against it
/// before it hands one to the kernel (a request's cwd, a spare's new session).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// `/tmp` is the kernel's own: of the host's, only `kept_under_tmp` is there.
    pub private_tmp: bool,
    pub kept_under_tmp: Vec<PathBuf>,
    /// Covered by an empty directory.
    pub hidden: Vec<PathBuf>,
}

impl Reach {
    /// Whether the kernel sees the host's `path` where it is.
    pub fn sees(&self, path: &Path) -> bool {
        if self.hidden.iter().any(|h| path.starts_with(h)) {
            return false;
        }
        !self.private_tmp
            || !path.starts_with("/tmp")
            || self.kept_under_tmp.iter().any(|k| path.starts_with(k))
    }
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
    let target = Target::new(Path::new("/"));
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
    /// The rights the view's own mounts get in the Landlock ruleset (writes confined).
    #[cfg(target_os = "linux")]
    landlock_view_access: u64,
    #[cfg(target_os = "linux")]
    seccomp: Option<seccomp::Filters>,
    /// What of the host the kernel's view shows.
    reach: Reach,
    /// The sandbox is on (`'off'` changes nothing of the process).
    confined: bool,
    /// The kernel keeps the host's network (`false`: `sandbox.network = false`).
    network: bool,
    /// What the kernel is told it may reach, to name what it is refused.
    policy: Option<SandboxPolicy>,
}

/// What [`Plan::prepare`] needs to know about the kernel.
pub struct Target<'a> {
    pub cwd: &'a Path,
    /// Read-only inside the kernel (the runner files); none for a probe.
    pub runner_base: Option<&'a Path>,
    /// The kernel's private temporary directory: its `/tmp` in the view, its TMPDIR.
    pub private_tmp: Option<&'a Path>,
    /// Host directories the kernel needs where they are, whatever the view covers (its
    /// interpreter's prefix, `PYTHONPATH`).
    pub keep: Vec<PathBuf>,
    /// Host directories the kernel must not see (the artifacts directory).
    pub hide: Vec<PathBuf>,
    /// The kernel's memory limit, which bounds its `/dev/shm`.
    pub memory_limit_bytes: Option<u64>,
    /// A zygote: the host's view but for the runner, read-only (its kernels make theirs).
    pub zygote: bool,
}

impl<'a> Target<'a> {
    /// A target with nothing but its cwd (a one-shot helper).
    pub fn new(cwd: &'a Path) -> Self {
        Target {
            cwd,
            runner_base: None,
            private_tmp: None,
            keep: Vec::new(),
            hide: Vec::new(),
            memory_limit_bytes: None,
            zygote: false,
        }
    }
}

/// Where the host's user keeps its services' sockets (podman, gpg-agent, ssh-agent,
/// pipewire, wayland): hidden from every kernel.
#[cfg(target_os = "linux")]
fn host_runtime_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .into_iter()
        .collect();
    dirs.push(PathBuf::from("/run/user"));
    dirs
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
            #[cfg(target_os = "linux")]
            landlock_view_access: 0,
            #[cfg(target_os = "linux")]
            seccomp: None,
            reach: Reach::default(),
            confined: false,
            network: true,
            policy: None,
        };
        let SandboxConfig::On { network, writable } = config else {
            isolation.mode = "off".into();
            return Ok((plan, isolation));
        };
        plan.confined = true;
        plan.network = *network;
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
        for dir in writable.iter().flatten() {
            if let Err(e) = std::fs::read_dir(dir) {
                return Err(KernelError::Sandbox {
                    reason: format!("writable path {}: {e}", dir.display()),
                });
            }
        }
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
        let mut modes: Vec<&str> = Vec::new();
        #[cfg(target_os = "linux")]
        {
            let devices: Vec<PathBuf> = view::DEVICES
                .iter()
                .map(|name| Path::new("/dev").join(name))
                .filter(|p| p.exists())
                .collect();
            // The kernel's cwd and the directories asked for (where writes are confined).
            let writable_dirs: Option<Vec<PathBuf>> = writable.as_ref().map(|extra| {
                std::iter::once(target.cwd.to_path_buf())
                    .chain(extra.iter().cloned())
                    .collect()
            });
            // A zygote's kernels each build their view from what the zygote sees.
            let view = support.namespaces.is_ok() && support.view && !target.zygote;
            if support.namespaces.is_ok() {
                let mut reach = Reach::default();
                let steps = if view {
                    let mut hide = target.hide.clone();
                    hide.extend(host_runtime_dirs());
                    view::steps(&view::ViewSpec {
                        writable: writable_dirs.clone(),
                        read_only: target
                            .runner_base
                            .map(Path::to_path_buf)
                            .into_iter()
                            .collect(),
                        private_tmp: target.private_tmp.map(Path::to_path_buf),
                        keep: target.keep.clone(),
                        hide,
                        shm_bytes: target.memory_limit_bytes,
                        cwd: target.cwd.to_path_buf(),
                    })
                    .map(|(steps, seen)| {
                        reach = seen;
                        steps
                    })
                } else {
                    view::minimal_steps(target.runner_base)
                };
                plan.reach = reach;
                let prepared =
                    steps
                        .and_then(mounts::Prepared::new)
                        .map_err(|e| KernelError::Sandbox {
                            reason: format!("preparing the kernel's filesystem view: {e}"),
                        })?;
                let ns = namespaces::NamespacePlan::new(*network, prepared).map_err(|e| {
                    KernelError::Sandbox {
                        reason: format!("preparing namespaces: {e}"),
                    }
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
                if view {
                    isolation.enforced.extend([
                        "filesystem-view",
                        "own-dev",
                        "proc-sys-read-only",
                        "host-sockets-hidden",
                        "private-tmp",
                    ]);
                }
                if !network {
                    isolation.enforced.push("network-namespace");
                }
            }
            // Without a view of its own, Landlock keeps the kernel off /proc, /sys and
            // /dev (root hosts: sysctls, cgroup limits, devices, the host's terminals).
            let guard_machine = !view;
            // ABI 1 cannot allow moving a file into another directory (`Refer` came with
            // ABI 2), which would break pip and atomic saves: use it only where
            // nothing else holds the kernel, or where writes are confined anyway.
            let landlock_usable = support.landlock_abi >= 2
                || (support.landlock_abi == 1 && (plan.namespaces.is_none() || writable.is_some()));
            if landlock_usable {
                // Where no view is built, Landlock's guard grants the host's /dev/shm.
                let landlock_writable = writable_dirs.as_ref().map(|dirs| {
                    let mut dirs = dirs.clone();
                    dirs.extend(target.private_tmp.map(Path::to_path_buf));
                    dirs
                });
                let rules = landlock_rules::Rules {
                    abi: support.landlock_abi,
                    writable: landlock_writable.as_deref(),
                    devices: &devices,
                    guard_machine,
                    deny_tcp: !network && plan.namespaces.is_none(),
                };
                let built =
                    landlock_rules::build(&rules).map_err(|reason| KernelError::Sandbox {
                        reason: format!("preparing Landlock: {reason}"),
                    })?;
                plan.landlock = Some(built.fd);
                plan.landlock_view_access = if view { built.view_access } else { 0 };
                modes.push("landlock");
                isolation.enforced.extend(built.enforced);
            }
            if support.seccomp.is_ok() {
                let extra = seccomp::Extra {
                    sockets: !network && plan.namespaces.is_none(),
                };
                plan.seccomp =
                    Some(
                        seccomp::filters(extra).map_err(|reason| KernelError::Sandbox {
                            reason: format!("preparing the seccomp filter: {reason}"),
                        })?,
                    );
                isolation.enforced.extend(["seccomp", "own-keyring"]);
                if extra.sockets {
                    isolation.enforced.push("sockets-denied");
                }
            }
            if plan.namespaces.is_none() {
                isolation.enforced.push("capabilities-dropped");
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = target;
        isolation.mode = if modes.is_empty() {
            "none".into()
        } else {
            modes.join("+")
        };
        isolation.missing = missing(support, *network, writable.is_some());
        plan.policy = Some(policy::told(&plan, target, writable.as_deref(), *network));
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
                return ns.enter(landlock, self.landlock_view_access, self.seccomp.as_ref());
            }
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            if !self.confined {
                return Ok(());
            }
            privileges::leave_host_keyring()?;
            privileges::drop_bounding_set()?;
            if let Some(fd) = landlock {
                landlock_rules::restrict_self(fd)?;
            }
            privileges::no_new_privileges()?;
            privileges::drop_capability_sets()?;
            if let Some(filters) = &self.seccomp {
                filters.install()?;
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
                landlock_view_access: 0,
                namespaces,
                seccomp: None,
                reach: self.reach,
                confined: self.confined,
                network: self.network,
                policy: self.policy,
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            self
        }
    }

    /// What a kernel forked by the zygote applies itself: whether it keeps the host's
    /// network, its view's steps, the rights its view's own mounts get in its Landlock
    /// ruleset, and its seccomp programs. `None` with the sandbox off: the kernel changes
    /// nothing of itself.
    pub fn for_forked_kernel(&self) -> Option<ForkedSandbox> {
        #[cfg(target_os = "linux")]
        if self.confined {
            return Some(ForkedSandbox {
                network: self.network,
                view: self.namespaces.as_ref().map(|ns| ns.view().to_json()),
                landlock_view_access: self.landlock_view_access,
                seccomp: self.seccomp.as_ref().map(|f| f.to_hex()),
                keyctl: nix::libc::SYS_keyctl,
            });
        }
        None
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

    /// What of the host the kernel's view shows.
    pub fn reach(&self) -> &Reach {
        &self.reach
    }

    /// What the kernel is told its sandbox confines (`init`'s `sandbox`); `None` with the
    /// sandbox off.
    pub fn policy(&self) -> Option<&SandboxPolicy> {
        self.policy.as_ref()
    }

    /// Where a kernel started with this plan sees its private temporary directory: `/tmp`
    /// where its view mounts it there, else where it is.
    pub fn tmp_inside(&self, private: &Path) -> PathBuf {
        if self.reach.private_tmp {
            return PathBuf::from("/tmp");
        }
        private.to_path_buf()
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

/// The default protections this machine cannot give, in words a user can act on.
fn missing(support: &Support, network: bool, writable: bool) -> Vec<String> {
    let mut missing = Vec::new();
    let guarded = support.landlock_abi >= 1;
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
        #[cfg(target_os = "linux")]
        if nix::unistd::geteuid().is_root() && !privileges::can_drop_bounding_set() {
            missing.push(
                "the host is root without CAP_SETPCAP: the kernel's bounding set cannot be emptied, so a program it runs may regain capabilities (no_new_privs still stops setuid programs)".into(),
            );
        }
    }
    if support.namespaces.is_err() || !support.view {
        let why = match &support.namespaces {
            Err(_) => "no user namespaces",
            Ok(()) => "Linux < 5.12 has no mount_setattr",
        };
        missing.push(format!(
            "no filesystem view of its own ({why}): metadata outside the writable directories (chmod, chown, utimes, xattrs) is not confined, which Landlock has no right for"
        ));
        missing.push(
            "the host's /tmp and /dev/shm are shared with every process of the user (TMPDIR is still the kernel's own, 0700 to other users): a channel between sessions, and memory no limit counts".into(),
        );
        missing.push(match (&support.namespaces, network) {
            (Err(_), true) => "the host's socket files (docker.sock, an ssh agent, X11, a database) are reachable; sandbox.network = false refuses every socket but socketpair".into(),
            (Err(_), false) => "every socket but socketpair is refused (the host's socket files would be reachable otherwise): multiprocessing's forkserver and Manager cannot start".into(),
            // A network namespace does not reach socket files.
            (Ok(()), _) => "the host's socket files (docker.sock, an ssh agent, X11, a database) are reachable, with sandbox.network = false too".into(),
        });
        missing.push(if writable {
            "the artifactsDir, where every session's kv store lives, is readable by the kernel (kv itself goes through the host)".into()
        } else {
            "the artifactsDir, where every session's kv store lives, is readable and writable by the kernel (kv itself goes through the host; sandbox.writable keeps it read-only)".into()
        });
        missing.push(
            "the names of the host's keys are listed in /proc/keys (their contents stay out of reach: the keyring calls are refused)".into(),
        );
        #[cfg(target_os = "linux")]
        if support.namespaces.is_err() && !nix::unistd::geteuid().is_root() {
            missing.push(
                "the bounding set stays full (a process that is not root cannot empty it without a user namespace); with no_new_privs nothing can be gained from it".into(),
            );
        }
        if guarded {
            missing.push(
                "no pseudo-terminals (pty.openpty, pexpect): Landlock keeps the host's terminals, and with them /dev/ptmx, out of reach".into(),
            );
        } else {
            missing.push(
                "no Landlock either: the host's terminals (/dev/pts), and as root sysctls (/proc/sys), cgroup limits and devices, are open to the kernel".into(),
            );
        }
    }
    if let Err(why) = &support.seccomp {
        missing.push(format!(
            "no seccomp filter ({why}): ptrace, the keyring (keyctl), io_uring, bpf and new namespaces are not refused"
        ));
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
            runner_base: Some(dir),
            ..Target::new(dir)
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
    fn each_missing_mechanism_says_what_it_costs() {
        let support = |namespaces: bool, view: bool, landlock_abi: i32, seccomp: bool| Support {
            namespaces: if namespaces {
                Ok(())
            } else {
                Err("refused".into())
            },
            view,
            landlock_abi,
            seccomp: if seccomp {
                Ok(())
            } else {
                Err("no filter".into())
            },
        };
        assert_eq!(
            missing(&support(true, true, 7, true), true, false),
            Vec::<String>::new()
        );
        let no_userns = missing(&support(false, false, 7, true), true, false).join("\n");
        for lost in [
            "no PID namespace",
            "metadata outside the writable directories",
            "/tmp and /dev/shm are shared",
            "socket files",
            "readable and writable by the kernel",
            "/proc/keys",
            "no pseudo-terminals",
        ] {
            assert!(no_userns.contains(lost), "{lost} not in:\n{no_userns}");
        }
        let offline = missing(&support(false, false, 7, true), false, true).join("\n");
        assert!(
            offline.contains("every socket but socketpair is refused"),
            "{offline}"
        );
        assert!(
            offline.contains("is readable by the kernel (kv itself"),
            "{offline}"
        );
        let old_linux = missing(&support(true, false, 7, true), true, false).join("\n");
        assert!(old_linux.contains("mount_setattr"), "{old_linux}");
        // Its network namespace keeps no socket file away, and refuses no socket.
        let old_offline = missing(&support(true, false, 7, true), false, false).join("\n");
        assert!(
            old_offline.contains("with sandbox.network = false too"),
            "{old_offline}"
        );
        assert!(
            !old_offline.contains("every socket but socketpair is refused"),
            "{old_offline}"
        );
        assert!(!old_linux.contains("no PID namespace"), "{old_linux}");
        let bare = missing(&support(false, false, 0, false), true, false).join("\n");
        assert!(bare.contains("no Landlock either"), "{bare}");
        assert!(bare.contains("no seccomp filter (no filter)"), "{bare}");
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
