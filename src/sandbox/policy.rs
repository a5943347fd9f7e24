//! What a kernel is told its sandbox confines (`init`'s `sandbox`, a [`SandboxPolicy`]), so
//! its runner can name each refusal and what the host could allow: the same decisions
//! [`Plan::prepare`] made, with paths as the kernel sees them (absolute and real).

use std::path::{Path, PathBuf};

use super::{Network, Plan, Target};
use crate::wire::protocol::{NetworkPolicy, SandboxPolicy};

/// The policy of a kernel started with `plan` for `target`: its writes confined to
/// `writable` (its cwd, the directories asked for, its session's caches; with its private
/// tmp, its own `/dev/shm` and the overlay of its environment), `read_only` beneath them
/// (the cwd's `.git`), `hidden` out of sight, on `network`.
pub(super) fn told(
    plan: &Plan,
    target: &Target<'_>,
    writable: Option<&[PathBuf]>,
    read_only: Option<&PathBuf>,
    hidden: &[PathBuf],
    network: &Network,
) -> SandboxPolicy {
    // The host's directories are where they are in the kernel's view; its private tmp
    // may be its /tmp, and its /dev/shm is its own (whatever the host's is).
    let tmp = target
        .private_tmp
        .map(|private| match plan.tmp_inside(private) {
            inside if inside == private => real(private),
            inside => inside,
        });
    let overlay = plan.overlay.as_ref().map(|o| real(&o.lower));
    let dedup = |dirs: Vec<String>, seen: &mut Vec<String>| {
        // The cwd may be listed among the writable directories too.
        for dir in dirs {
            if !seen.contains(&dir) {
                seen.push(dir);
            }
        }
    };
    let mut workspace = 0;
    let writable = writable.map(|dirs| {
        // The workspace and what the host listed first, then the kernel's own.
        let (own, asked): (Vec<&PathBuf>, Vec<&PathBuf>) =
            dirs.iter().partition(|d| target.writable.contains(d));
        let mut seen = Vec::new();
        dedup(
            asked.into_iter().map(|d| shown(real(d))).collect(),
            &mut seen,
        );
        workspace = seen.len();
        let own = own
            .into_iter()
            .map(|d| real(d))
            .chain(tmp)
            .chain([PathBuf::from("/dev/shm")])
            .chain(overlay)
            .map(shown)
            .collect();
        dedup(own, &mut seen);
        seen
    });
    SandboxPolicy {
        writable,
        workspace,
        read_only: read_only.map(|p| shown(real(p))).into_iter().collect(),
        hidden: hidden.iter().map(|p| shown(real(p))).collect(),
        network: match network {
            Network::Host => NetworkPolicy::Open,
            Network::Loopback => NetworkPolicy::Loopback,
            Network::Allow(_) => NetworkPolicy::Allow,
        },
        allow: match network {
            Network::Allow(list) => list.entries().map(str::to_string).collect(),
            _ => Vec::new(),
        },
    }
}

fn real(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn shown(path: PathBuf) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::super::{Policy, SandboxConfig, Writable};
    use super::*;

    #[test]
    fn the_policy_names_the_writable_directories_as_the_kernel_sees_them() {
        let cwd = tempfile::tempdir().unwrap();
        let extra = tempfile::tempdir().unwrap();
        let private = tempfile::tempdir().unwrap();
        let target = Target {
            runner_base: Some(cwd.path()),
            private_tmp: Some(private.path()),
            ..Target::new(cwd.path())
        };
        let real_cwd = real(cwd.path()).display().to_string();
        let real_extra = real(extra.path()).display().to_string();
        let config = SandboxConfig::On(Policy {
            network: Network::Loopback,
            // The cwd listed again is named once.
            writable: Writable::Confined(vec![extra.path().into(), cwd.path().into()]),
            ..Policy::default()
        });
        let Ok((plan, _)) = Plan::prepare(&config, &target) else {
            return; // no Landlock here: the option is refused, and no kernel starts
        };
        let policy = plan.policy().unwrap();
        // Its /tmp where the view mounts the private tmp there.
        let tmp = if plan.reach().private_tmp {
            "/tmp".to_string()
        } else {
            real(private.path()).display().to_string()
        };
        assert_eq!(
            policy.writable.as_deref().unwrap(),
            [real_cwd, real_extra, tmp, "/dev/shm".to_string()]
        );
        assert_eq!(policy.network, NetworkPolicy::Loopback);
        assert!(policy.read_only.is_empty());

        let all = SandboxConfig::On(Policy {
            writable: Writable::All,
            ..Policy::default()
        });
        let (open, _) = Plan::prepare(&all, &target).unwrap();
        let open = open.policy().unwrap();
        assert_eq!(open.writable, None);
        assert_eq!(open.network, NetworkPolicy::Open);
        let (off, _) = Plan::prepare(&SandboxConfig::Off, &target).unwrap();
        assert!(off.policy().is_none());
    }
}
