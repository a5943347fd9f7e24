//! Why this machine refuses unprivileged user namespaces, and what its administrator can
//! do about it: `pykernel check` says so, beside what a kernel loses meanwhile
//! (`isolation.missing`).
//!
//! The usual causes, each with its own switch: Ubuntu's AppArmor restriction (23.10 and
//! later: `kernel.apparmor_restrict_unprivileged_userns`), Debian's older patch
//! (`kernel.unprivileged_userns_clone`), a limit of zero namespaces (RHEL 7's default:
//! `user.max_user_namespaces`), and a container whose seccomp profile refuses
//! `unshare(CLONE_NEWUSER)` (Docker's default does).

use std::path::{Path, PathBuf};

/// The cause in words, and what to do, one step a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    pub cause: String,
    pub fix: Vec<String>,
}

/// What was read off the machine.
#[derive(Debug, Default)]
pub struct Facts {
    /// `PYKERNEL_SANDBOX_NAMESPACES=0` in the host's environment.
    pub turned_off: bool,
    /// The program the host runs as (`/proc/self/exe`): an AppArmor profile names it.
    pub host_program: Option<PathBuf>,
    /// The probe's own account of what failed.
    pub probe_error: String,
}

/// Diagnoses from the machine's own `/proc` (`proc_root`, `/proc` but in tests) and the
/// container markers under `root`.
pub fn diagnose(proc_root: &Path, root: &Path, facts: &Facts) -> Diagnosis {
    let read = |path: &str| {
        std::fs::read_to_string(proc_root.join(path))
            .ok()
            .map(|s| s.trim().to_string())
    };
    if facts.turned_off {
        return Diagnosis {
            cause: "PYKERNEL_SANDBOX_NAMESPACES=0 in the host's environment turns them off".into(),
            fix: vec!["unset PYKERNEL_SANDBOX_NAMESPACES".into()],
        };
    }
    if read("sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        let program = facts
            .host_program
            .as_ref()
            .map_or("/usr/bin/node".to_string(), |p| p.display().to_string());
        return Diagnosis {
            cause: "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu 23.10 and later)".into(),
            fix: vec![
                format!(
                    "allow them to this program only: write /etc/apparmor.d/pykernel-host as\n    abi <abi/4.0>,\n    include <tunables/global>\n    profile pykernel-host {program} flags=(unconfined) {{\n      userns,\n    }}\nthen run `sudo apparmor_parser -r /etc/apparmor.d/pykernel-host`"
                ),
                "or for every program: `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (and the same line in /etc/sysctl.d/60-userns.conf to keep it)".into(),
            ],
        };
    }
    if read("sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Diagnosis {
            cause: "the kernel.unprivileged_userns_clone sysctl is 0".into(),
            fix: vec![
                "`sudo sysctl -w kernel.unprivileged_userns_clone=1` (and the same line in /etc/sysctl.d/60-userns.conf to keep it)".into(),
            ],
        };
    }
    if read("sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Diagnosis {
            cause: "the user.max_user_namespaces sysctl is 0".into(),
            fix: vec![
                "`sudo sysctl -w user.max_user_namespaces=15000` (and the same line in /etc/sysctl.d/60-userns.conf to keep it)".into(),
            ],
        };
    }
    let seccomp = read("self/status")
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim().to_string()))
        })
        .is_some_and(|mode| mode == "2");
    if seccomp {
        let container = in_container(proc_root, root);
        return Diagnosis {
            cause: format!(
                "a seccomp filter refuses them{}",
                if container {
                    " (this is a container: Docker's default seccomp profile refuses unshare(CLONE_NEWUSER))"
                } else {
                    " (a seccomp profile this process runs under)"
                }
            ),
            fix: vec![
                "run the container with a seccomp profile that allows unshare and clone with CLONE_NEWUSER: Docker's own profile with those two rules changed, passed as `--security-opt seccomp=profile.json` (podman allows them by default; in Kubernetes, a `seccompProfile` of type Localhost)".into(),
                "or keep the container as the sandbox and start kernels with `sandbox: 'off'`".into(),
            ],
        };
    }
    Diagnosis {
        cause: facts.probe_error.clone(),
        fix: vec![
            "see the `not enforced` lines: the kernel runs confined by Landlock and seccomp alone"
                .into(),
        ],
    }
}

/// Whether this process runs in a container, by the markers the usual runtimes leave.
fn in_container(proc_root: &Path, root: &Path) -> bool {
    if root.join(".dockerenv").exists() || root.join("run/.containerenv").exists() {
        return true;
    }
    std::fs::read_to_string(proc_root.join("1/cgroup")).is_ok_and(|c| {
        ["docker", "kubepods", "containerd", "libpod", "lxc"]
            .iter()
            .any(|m| c.contains(m))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let file = dir.path().join("proc").join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        }
        dir
    }

    fn diagnose_on(dir: &tempfile::TempDir, facts: &Facts) -> Diagnosis {
        diagnose(&dir.path().join("proc"), dir.path(), facts)
    }

    #[test]
    fn each_cause_is_named_with_its_own_switch() {
        let facts = Facts {
            host_program: Some("/opt/node/bin/node".into()),
            probe_error: "unshare failed".into(),
            ..Facts::default()
        };
        let ubuntu = machine(&[("sys/kernel/apparmor_restrict_unprivileged_userns", "1\n")]);
        let d = diagnose_on(&ubuntu, &facts);
        assert!(d.cause.contains("AppArmor"), "{d:?}");
        assert!(
            d.fix[0].contains("profile pykernel-host /opt/node/bin/node"),
            "{d:?}"
        );
        assert!(d.fix[0].contains("userns,"), "{d:?}");
        assert!(
            d.fix[1].contains("apparmor_restrict_unprivileged_userns=0"),
            "{d:?}"
        );

        let debian = machine(&[
            ("sys/kernel/apparmor_restrict_unprivileged_userns", "0\n"),
            ("sys/kernel/unprivileged_userns_clone", "0\n"),
        ]);
        let d = diagnose_on(&debian, &facts);
        assert!(
            d.fix[0].contains("kernel.unprivileged_userns_clone=1"),
            "{d:?}"
        );

        let rhel = machine(&[("sys/user/max_user_namespaces", "0\n")]);
        assert!(diagnose_on(&rhel, &facts).fix[0].contains("user.max_user_namespaces=15000"));

        let docker = machine(&[
            (
                "self/status",
                "Name:\tnode\nSeccomp:\t2\nSeccomp_filters:\t1\n",
            ),
            ("1/cgroup", "0::/system.slice/docker-abc.scope\n"),
        ]);
        let d = diagnose_on(&docker, &facts);
        assert!(d.cause.contains("this is a container"), "{d:?}");
        assert!(
            d.fix.iter().any(|f| f.contains("--security-opt seccomp")),
            "{d:?}"
        );

        let unknown = machine(&[("self/status", "Seccomp:\t0\n")]);
        assert_eq!(diagnose_on(&unknown, &facts).cause, "unshare failed");

        let off = Facts {
            turned_off: true,
            ..Facts::default()
        };
        assert!(diagnose_on(&ubuntu, &off).fix[0].contains("unset"));
    }
}
