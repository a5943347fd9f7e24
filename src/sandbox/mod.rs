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

pub mod allow_list;
mod config;
pub mod egress_proxy;
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
mod support;
pub mod userns_diagnosis;
#[cfg(target_os = "linux")]
pub mod view;

pub use config::{Hidden, Installs, Network, Policy, SandboxConfig, Writable, DEFAULT_HIDDEN};
use support::{missing, Asked};
pub use support::{support, Support};

use std::path::{Path, PathBuf};

use crate::error::{KernelError, Result};
use crate::wire::protocol::SandboxPolicy;
use crate::wire::zygote::ForkedSandbox;
use allow_list::AllowList;

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
    /// Where user namespaces are refused: why, and how to allow them.
    pub namespaces_refused: Option<userns_diagnosis::Diagnosis>,
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
            namespaces_refused: None,
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
    /// The view's own mounts the kernel may write (its `/dev/shm` and ptys, the overlay
    /// of its environment), which the host could not name in the Landlock ruleset.
    #[cfg(target_os = "linux")]
    view_writable: Vec<PathBuf>,
    /// The same, ready for system calls between fork and exec.
    #[cfg(target_os = "linux")]
    view_writable_c: Vec<std::ffi::CString>,
    #[cfg(target_os = "linux")]
    seccomp: Option<seccomp::Filters>,
    /// What of the host the kernel's view shows.
    reach: Reach,
    /// The sandbox is on (`'off'` changes nothing of the process).
    confined: bool,
    /// The kernel's network.
    network: Network,
    /// Its environment as an overlay of its session's installs.
    overlay: Option<Overlay>,
    /// With an allow list, the channel its set-up sends its proxy's listener on (the
    /// host's end, the kernel's end).
    #[cfg(target_os = "linux")]
    proxy_channel: Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>,
    /// What the kernel is told it may reach, to name what it is refused.
    policy: Option<SandboxPolicy>,
}

/// An overlay of `lower` at the same place, its changes kept in `upper` (`work` is
/// overlayfs's scratch directory, on the same filesystem).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    pub lower: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
}

impl Overlay {
    /// The mount's options; `None` when a path holds a character the option syntax
    /// takes for a separator.
    pub fn data(&self) -> Option<String> {
        let paths = [&self.lower, &self.upper, &self.work];
        let plain = paths.iter().all(|p| {
            p.to_str()
                .is_some_and(|s| !s.contains([',', ':', '\\', '\n']))
        });
        plain.then(|| {
            // userxattr: the overlay's own metadata in user.* attributes, as a mount in a
            // user namespace must keep it.
            format!(
                "lowerdir={},upperdir={},workdir={},userxattr",
                self.lower.display(),
                self.upper.display(),
                self.work.display()
            )
        })
    }
}

/// The view's own mounts the kernel may write to where writes are confined.
#[cfg(target_os = "linux")]
const VIEW_MOUNTS: [&str; 2] = ["/dev/shm", "/dev/pts"];

/// The session's installs directory, as the overlay of an environment takes it: `upper`
/// holds what changed, `work` is overlayfs's scratch space, `root` holds both.
#[derive(Debug, Clone)]
pub struct InstallLayers {
    pub root: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
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
    /// The home directories beneath which `sandbox.hidden` names the credential stores:
    /// the kernel's `HOME` and the account's own.
    pub homes: Vec<PathBuf>,
    /// The interpreter's environment (a venv's root, else its prefix): an overlay of the
    /// session's installs, or writable with `installs: 'shared'`.
    pub environment: Option<PathBuf>,
    /// The session's installs directory; none for a one-shot helper.
    pub installs: Option<&'a InstallLayers>,
    /// Host directories the kernel writes besides those of the policy (its session's
    /// caches).
    pub writable: Vec<PathBuf>,
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
            homes: Vec::new(),
            environment: None,
            installs: None,
            writable: Vec::new(),
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
            view_writable: Vec::new(),
            #[cfg(target_os = "linux")]
            view_writable_c: Vec::new(),
            #[cfg(target_os = "linux")]
            seccomp: None,
            reach: Reach::default(),
            confined: false,
            network: Network::Host,
            overlay: None,
            #[cfg(target_os = "linux")]
            proxy_channel: None,
            policy: None,
        };
        let SandboxConfig::On(policy) = config else {
            isolation.mode = "off".into();
            return Ok((plan, isolation));
        };
        plan.confined = true;
        plan.network = policy.network.clone();
        let offline = policy.network != Network::Host;
        let refuse = |what: &str, needs: &str| {
            KernelError::Sandbox {
            reason: format!(
                "{what} cannot be enforced on this machine: it needs {needs} ({}; Landlock ABI {}). Drop the option, or run the host where these are available.",
                support.namespaces.as_ref().err().map_or("user namespaces available", |e| e.as_str()),
                support.landlock_abi
            ),
        }
        };
        let view_possible = support.namespaces.is_ok() && support.view;
        let extra_writable = match &policy.writable {
            Writable::Confined(extra) => Some(extra),
            Writable::All => None,
        };
        // The defaults degrade to what the machine gives (and say so); an option asked
        // for in so many words holds or is refused.
        if extra_writable.is_some_and(|extra| !extra.is_empty())
            && !view_possible
            && support.landlock_abi < 1
        {
            return Err(refuse(
                "sandbox.writable",
                "a filesystem view (user namespaces, Linux 5.12) or Landlock",
            ));
        }
        if matches!(&policy.hidden, Hidden::Paths(p) if !p.is_empty())
            && !view_possible
            && support.landlock_abi < 1
        {
            return Err(refuse(
                "sandbox.hidden",
                "a filesystem view (user namespaces, Linux 5.12) or Landlock",
            ));
        }
        if matches!(policy.network, Network::Allow(_)) && support.namespaces.is_err() {
            // Without a network namespace nothing would keep a cell from going around the
            // proxy: never silently open.
            return Err(refuse(
                "sandbox.network = { allow }",
                "user namespaces, for a network namespace left only through the host's proxy",
            ));
        }
        if policy.network == Network::Loopback
            && support.namespaces.is_err()
            && support.landlock_abi < 4
        {
            return Err(refuse(
                "sandbox.network = false",
                "user namespaces or Landlock ABI 4",
            ));
        }
        for dir in extra_writable.into_iter().flatten() {
            if let Err(e) = std::fs::read_dir(dir) {
                return Err(KernelError::Sandbox {
                    reason: format!("writable path {}: {e}", dir.display()),
                });
            }
        }
        let environment = target.environment.as_deref();
        // The kernel's cwd, the directories asked for and, with shared installs, the
        // environment: where writes are confined to (`None`: not confined).
        let writable_dirs: Option<Vec<PathBuf>> = extra_writable.map(|extra| {
            let mut dirs: Vec<PathBuf> = std::iter::once(target.cwd.to_path_buf())
                .chain(extra.iter().cloned())
                .chain(target.writable.iter().cloned())
                .collect();
            if policy.installs == Installs::Shared {
                dirs.extend(environment.map(Path::to_path_buf));
            }
            dirs
        });
        // Hooks and config written there run outside the sandbox, at the next commit;
        // unless the host lists the .git itself as writable.
        let git = target.cwd.join(".git");
        let git_listed = extra_writable.is_some_and(|extra| extra.contains(&git));
        let git_read_only =
            (writable_dirs.is_some() && !git_listed && std::fs::symlink_metadata(&git).is_ok())
                .then_some(git);
        let hidden: Vec<PathBuf> = policy
            .hidden
            .paths(&target.homes)
            .into_iter()
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .collect();
        let overlay = match (policy.installs, target.installs, environment) {
            (Installs::Session, Some(layers), Some(env)) if support.overlay.is_ok() => {
                let holds_workspace = writable_dirs.iter().flatten().any(|w| w.starts_with(env));
                let overlay = Overlay {
                    lower: env.to_path_buf(),
                    upper: layers.upper.clone(),
                    work: layers.work.clone(),
                };
                (!holds_workspace && overlay.data().is_some()).then_some(overlay)
            }
            _ => None,
        };
        // What the kernel's runner is told is hidden (to name a refused read).
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
        let mut told_hidden: Vec<PathBuf> = Vec::new();
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
        let mut modes: Vec<&str> = Vec::new();
        #[cfg(target_os = "linux")]
        {
            let devices: Vec<PathBuf> = view::DEVICES
                .iter()
                .map(|name| Path::new("/dev").join(name))
                .filter(|p| p.exists())
                .collect();
            // A zygote's kernels each build their view from what the zygote sees.
            let view = view_possible && !target.zygote;
            if support.namespaces.is_ok() {
                let mut reach = Reach::default();
                let steps = if view {
                    let mut hide = target.hide.clone();
                    hide.extend(host_runtime_dirs());
                    hide.extend(
                        target
                            .installs
                            .iter()
                            .flat_map(|layers| [layers.upper.clone(), layers.work.clone()]),
                    );
                    let mut read_only: Vec<PathBuf> = target
                        .runner_base
                        .map(Path::to_path_buf)
                        .into_iter()
                        .collect();
                    read_only.extend(git_read_only.clone());
                    view::steps(&view::ViewSpec {
                        writable: writable_dirs.clone(),
                        read_only,
                        private_tmp: target.private_tmp.map(Path::to_path_buf),
                        keep: target.keep.clone(),
                        hide,
                        conceal: hidden.clone(),
                        overlay: overlay.clone(),
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
                told_hidden = reach.hidden.clone();
                plan.reach = reach;
                let prepared =
                    steps
                        .and_then(mounts::Prepared::new)
                        .map_err(|e| KernelError::Sandbox {
                            reason: format!("preparing the kernel's filesystem view: {e}"),
                        })?;
                let ns = namespaces::NamespacePlan::new(!offline, prepared).map_err(|e| {
                    KernelError::Sandbox {
                        reason: format!("preparing namespaces: {e}"),
                    }
                })?;
                plan.namespaces = Some(ns);
                if matches!(policy.network, Network::Allow(_)) && !target.zygote {
                    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
                    plan.proxy_channel = Some(
                        socketpair(
                            AddressFamily::Unix,
                            SockType::SeqPacket,
                            None,
                            SockFlag::SOCK_CLOEXEC,
                        )
                        .map_err(|e| KernelError::Sandbox {
                            reason: format!("preparing the kernel's proxy: {e}"),
                        })?,
                    );
                    isolation.enforced.push("network-allow-list");
                }
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
                    if writable_dirs.is_some() {
                        isolation.enforced.push("writes-confined");
                    }
                    if git_read_only.is_some() {
                        isolation.enforced.push("git-read-only");
                    }
                    if !hidden.is_empty() || matches!(policy.hidden, Hidden::Default) {
                        isolation.enforced.push("credentials-hidden");
                    }
                    if policy.installs == Installs::Session && support.overlay.is_ok() {
                        isolation.enforced.push("session-installs");
                    }
                    plan.overlay = overlay.clone();
                }
                if offline {
                    isolation.enforced.push("network-namespace");
                }
            }
            // Without a view of its own, Landlock keeps the kernel off /proc, /sys and
            // /dev (root hosts: sysctls, cgroup limits, devices, the host's terminals),
            // and hides the credential stores by granting reads around them.
            let guard_machine = !view;
            // ABI 1 cannot allow moving a file into another directory (`Refer` came with
            // ABI 2), which would break pip and atomic saves: use it only where
            // nothing else holds the kernel, or where writes are confined anyway.
            let landlock_usable = support.landlock_abi >= 2
                || (support.landlock_abi == 1
                    && (plan.namespaces.is_none() || writable_dirs.is_some()));
            if landlock_usable {
                // Where no view is built, Landlock's guard grants the host's /dev/shm.
                let landlock_writable = writable_dirs.as_ref().map(|dirs| {
                    let mut dirs = dirs.clone();
                    dirs.extend(target.private_tmp.map(Path::to_path_buf));
                    dirs
                });
                // A hidden path beneath a directory the kernel writes cannot be hidden by
                // granting reads around it: what the kernel writes next to it would be
                // unreadable.
                let (landlock_hidden, readable): (Vec<PathBuf>, Vec<PathBuf>) = if view {
                    (Vec::new(), Vec::new())
                } else {
                    hidden.iter().cloned().partition(|h| {
                        !landlock_writable
                            .iter()
                            .flatten()
                            .any(|w| h.starts_with(w) && h != w)
                    })
                };
                let rules = landlock_rules::Rules {
                    abi: support.landlock_abi,
                    writable: landlock_writable.as_deref(),
                    devices: &devices,
                    guard_machine,
                    hidden: &landlock_hidden,
                    deny_tcp: offline && plan.namespaces.is_none(),
                };
                let built =
                    landlock_rules::build(&rules).map_err(|reason| KernelError::Sandbox {
                        reason: format!("preparing Landlock: {reason}"),
                    })?;
                plan.landlock = Some(built.fd);
                if view {
                    plan.landlock_view_access = built.view_access;
                    if built.view_access != 0 {
                        plan.view_writable = VIEW_MOUNTS.iter().map(PathBuf::from).collect();
                        plan.view_writable
                            .extend(overlay.as_ref().map(|o| o.lower.clone()));
                        plan.view_writable_c = plan
                            .view_writable
                            .iter()
                            .map(|p| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()))
                            .collect::<std::result::Result<_, _>>()
                            .map_err(|_| KernelError::Sandbox {
                                reason: "a writable path holds a NUL byte".into(),
                            })?;
                    }
                }
                modes.push("landlock");
                isolation.enforced.extend(built.enforced);
                if !view && !landlock_hidden.is_empty() {
                    isolation.enforced.push("credentials-hidden");
                    told_hidden = landlock_hidden.clone();
                }
                if !readable.is_empty() {
                    isolation.missing.push(format!(
                        "{} stay readable: without a filesystem view of its own, Landlock cannot hide a path inside a directory the kernel writes",
                        readable.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
                    ));
                }
            }
            if support.seccomp.is_ok() {
                let extra = seccomp::Extra {
                    sockets: offline && plan.namespaces.is_none(),
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
        let _ = (target, &hidden, &git_read_only, &overlay);
        let mut seen = std::collections::HashSet::new();
        isolation.enforced.retain(|name| seen.insert(*name));
        isolation.mode = if modes.is_empty() {
            "none".into()
        } else {
            modes.join("+")
        };
        let asked = Asked {
            network: !offline,
            writes_confined: writable_dirs.is_some(),
            hides: !hidden.is_empty() || matches!(policy.hidden, Hidden::Default),
            session_installs: policy.installs == Installs::Session,
        };
        let mut lacking = missing(support, &asked);
        lacking.append(&mut isolation.missing);
        isolation.missing = lacking;
        isolation.namespaces_refused = support.namespaces_refused.clone();
        plan.policy = Some(policy::told(
            &plan,
            target,
            writable_dirs.as_deref(),
            git_read_only.as_ref(),
            &told_hidden,
            &policy.network,
        ));
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
                return ns.enter(
                    landlock,
                    self.landlock_view_access,
                    &self.view_writable_c,
                    self.seccomp.as_ref(),
                    self.proxy_channel
                        .as_ref()
                        .map(|(_, kernel)| kernel.as_raw_fd()),
                );
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
                view_writable: Vec::new(),
                view_writable_c: Vec::new(),
                namespaces,
                seccomp: None,
                reach: self.reach,
                confined: self.confined,
                network: self.network,
                overlay: None,
                proxy_channel: None,
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
                network: self.network.is_host(),
                proxy_port: self
                    .proxy_channel
                    .is_some()
                    .then_some(egress_proxy::KERNEL_PORT),
                view: self.namespaces.as_ref().map(|ns| ns.view().to_json()),
                landlock_view_access: self.landlock_view_access,
                view_writable: self
                    .view_writable
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect(),
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

    /// The kernel's end of its proxy's channel, for a kernel that sends the listener
    /// itself (forked by a zygote).
    pub fn proxy_channel_fd(&self) -> Option<std::os::fd::RawFd> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            self.proxy_channel
                .as_ref()
                .map(|(_, kernel)| kernel.as_raw_fd())
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    /// Once the kernel started: its proxy's allow list and the listener its set-up sent
    /// (the host serves it); `None` without an allow list.
    pub fn take_egress(&mut self) -> Option<std::io::Result<(AllowList, std::net::TcpListener)>> {
        #[cfg(target_os = "linux")]
        {
            let Network::Allow(allow) = &self.network else {
                return None;
            };
            let (host, _) = self.proxy_channel.take()?;
            Some(receive_listener(&host).map(|listener| (allow.clone(), listener)))
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

/// The listener a kernel's set-up sent on `channel` (it did before the kernel started).
#[cfg(target_os = "linux")]
fn receive_listener(channel: &std::os::fd::OwnedFd) -> std::io::Result<std::net::TcpListener> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, UnixAddr};
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!(std::os::fd::RawFd);
    let msg = recvmsg::<UnixAddr>(
        channel.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(|e| {
        std::io::Error::other(format!("the kernel's proxy listener did not arrive: {e}"))
    })?;
    for cmsg in msg.cmsgs().map_err(std::io::Error::other)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            if let Some(&fd) = fds.first() {
                // SAFETY: the descriptor was just received and is ours alone.
                let listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
                for extra in &fds[1..] {
                    let _ = nix::unistd::close(*extra);
                }
                listener.set_nonblocking(true)?;
                return Ok(listener);
            }
        }
    }
    Err(std::io::Error::other(
        "the kernel's set-up sent no proxy listener",
    ))
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
    fn a_missing_writable_path_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let target = target_in(dir.path());
        let config = SandboxConfig::On(Policy {
            writable: Writable::Confined(vec![dir.path().join("absent")]),
            ..Policy::default()
        });
        let err = Plan::prepare(&config, &target).err().unwrap();
        assert_eq!(err.code(), "ERR_SANDBOX");
        // Where nothing can confine writes the option itself is refused, which is as
        // clear.
        let confinable =
            support().landlock_abi >= 1 || (support().namespaces.is_ok() && support().view);
        let expected = if confinable {
            "absent"
        } else {
            "needs a filesystem view"
        };
        assert!(err.to_string().contains(expected), "{err}");
    }
}
