//! What this machine can enforce, probed once per process, and what a kernel started
//! here lacks of the defaults, in words a user can act on.

#[cfg(target_os = "linux")]
use super::{landlock_rules, namespaces, privileges, seccomp};
use std::sync::OnceLock;

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
    /// An environment can be overlaid with a session's installs in the view; else why not.
    pub overlay: std::result::Result<(), String>,
    /// Where user namespaces are refused: why, and what the machine's administrator can
    /// do about it.
    pub namespaces_refused: Option<super::userns_diagnosis::Diagnosis>,
}

/// What a kernel's policy asks for, as far as what it lacks depends on it.
pub(super) struct Asked {
    /// It keeps the host's network.
    pub network: bool,
    pub writes_confined: bool,
    /// It hides credential stores (the default list, or a list of the host's).
    pub hides: bool,
    pub session_installs: bool,
}

/// Probed once per process: a throwaway child tries the namespaces for real.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            // What a machine without unprivileged user namespaces gives, on this one.
            let turned_off = std::env::var("PYKERNEL_SANDBOX_NAMESPACES").as_deref() == Ok("0");
            let probe = if turned_off {
                Err("turned off by PYKERNEL_SANDBOX_NAMESPACES=0".to_string())
            } else {
                namespaces::probe()
            };
            let namespaces_refused = probe.as_ref().err().map(|probe_error| {
                use super::userns_diagnosis::{diagnose, Facts};
                let facts = Facts {
                    turned_off,
                    host_program: std::fs::read_link("/proc/self/exe").ok(),
                    probe_error: probe_error.clone(),
                };
                diagnose(
                    std::path::Path::new("/proc"),
                    std::path::Path::new("/"),
                    &facts,
                )
            });
            Support {
                namespaces_refused,
                view: probe.as_ref().is_ok_and(|p| p.view),
                overlay: match &probe {
                    Ok(p) => p.overlay.clone(),
                    Err(_) => Err("no user namespaces".into()),
                },
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
                overlay: Err("not Linux".into()),
                namespaces_refused: None,
            }
        }
    })
}

/// The default protections this machine cannot give, in words a user can act on.
pub(super) fn missing(support: &Support, asked: &Asked) -> Vec<String> {
    let network = asked.network;
    let writable = asked.writes_confined;
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
        if writable && guarded {
            missing.push(
                "the cwd's .git is writable (hooks and config written there run outside the sandbox at the next git command): Landlock cannot make part of a writable directory read-only".into(),
            );
        } else if writable {
            missing.push(
                "writes are not confined: without a filesystem view or Landlock the kernel writes wherever the host's user may (the home directory's dotfiles, the environment, the cwd's .git)".into(),
            );
        }
        if asked.hides && guarded {
            missing.push(
                "the hidden credential stores are unreadable but not empty: their names still list (Landlock refuses reading what is in them; a filesystem view shows them empty)".into(),
            );
        } else if asked.hides {
            missing.push(
                "the credential stores under the home directory (~/.ssh, ~/.aws, ...) are readable: hiding them needs a filesystem view or Landlock".into(),
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
    if asked.session_installs {
        if let Err(why) = &support.overlay {
            missing.push(if writable {
                format!("no session installs ({why}): the environment is read-only to the kernel, so %pip install fails; sandbox.installs = 'shared' makes it writable (what a cell installs then runs in every later kernel)")
            } else {
                format!("no session installs ({why}): %pip install writes the shared environment, which every later kernel runs")
            });
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
            overlay: if namespaces && view {
                Ok(())
            } else {
                Err("no view".into())
            },
            namespaces_refused: None,
        };
        let asked = |network: bool, writes_confined: bool| Asked {
            network,
            writes_confined,
            hides: true,
            session_installs: true,
        };
        assert_eq!(
            missing(&support(true, true, 7, true), &asked(true, false)),
            Vec::<String>::new()
        );
        let no_userns = missing(&support(false, false, 7, true), &asked(true, false)).join("\n");
        let confined = missing(&support(false, false, 7, true), &asked(true, true)).join("\n");
        for lost in [
            ".git is writable",
            "unreadable but not empty",
            "no session installs (no view): the environment is read-only",
        ] {
            assert!(confined.contains(lost), "{lost} not in:\n{confined}");
        }
        let unguarded = missing(&support(false, false, 0, true), &asked(true, true)).join("\n");
        assert!(unguarded.contains("writes are not confined"), "{unguarded}");
        assert!(
            unguarded.contains("~/.ssh, ~/.aws, ...) are readable"),
            "{unguarded}"
        );
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
        let offline = missing(&support(false, false, 7, true), &asked(false, true)).join("\n");
        assert!(
            offline.contains("every socket but socketpair is refused"),
            "{offline}"
        );
        assert!(
            offline.contains("is readable by the kernel (kv itself"),
            "{offline}"
        );
        let old_linux = missing(&support(true, false, 7, true), &asked(true, false)).join("\n");
        assert!(old_linux.contains("mount_setattr"), "{old_linux}");
        // Its network namespace keeps no socket file away, and refuses no socket.
        let old_offline = missing(&support(true, false, 7, true), &asked(false, false)).join("\n");
        assert!(
            old_offline.contains("with sandbox.network = false too"),
            "{old_offline}"
        );
        assert!(
            !old_offline.contains("every socket but socketpair is refused"),
            "{old_offline}"
        );
        assert!(!old_linux.contains("no PID namespace"), "{old_linux}");
        let bare = missing(&support(false, false, 0, false), &asked(true, false)).join("\n");
        assert!(bare.contains("no Landlock either"), "{bare}");
        assert!(bare.contains("no seccomp filter (no filter)"), "{bare}");
    }
}
