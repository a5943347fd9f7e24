//! The kernel's filesystem view (Linux, in its own mount namespace): what of the host's
//! files it sees, and what it may change.
//!
//! Built as an ordered list of mount steps, decided in the host and applied by the
//! kernel's init before anything of the kernel runs: between fork and exec for a spawned
//! kernel (`mounts.rs`, plain system calls over memory made before the fork), or by a
//! kernel forked from the zygote (`pykernel_runner/zygote.py`, the same steps sent as JSON). One
//! list, two executors: what a kernel sees does not depend on how it was started. This
//! file decides the steps; `mounts.rs` carries them out.
//!
//! What the view is, and why each part (after Docker/runc's default container):
//!
//! - **Read-only where nothing may be written.** With `writable` set, the whole tree is
//!   made read-only (`mount_setattr(AT_RECURSIVE)`) and the writable directories are bound
//!   back writable, so writes *and* metadata changes (chmod, chown, utimes, xattrs, which
//!   Landlock has no right for) fail everywhere else. Always: `/sys` (cgroup limits, kernel
//!   knobs) and, in the kernel's own `/proc`, `sys`, `sysrq-trigger`, `irq`, `bus`, `fs`.
//!   uid 0 in the sandbox's user namespace is the host's uid 0, so these owner-only files
//!   would otherwise be open to a root host's cell (`core_pattern` runs a program as real
//!   root on the next crash).
//! - **Masked `/proc` and `/sys` entries** (`kcore`, `keys`, `timer_list`, `sched_debug`,
//!   `acpi`, `scsi`, `/sys/firmware`, ...): what they show of the host is nobody's business.
//! - **A `/dev` of its own**: the harmless nodes of the host (null, zero, full, random,
//!   urandom, tty) bound into a read-only tmpfs, a fresh devpts instance (its own ptys:
//!   the host's terminals are not there), and its own size-bounded `/dev/shm`. The host's
//!   `/dev/pts/N` would let a cell print on the agent's terminal and read what the user
//!   types; the host's `/dev/shm` is a channel between sessions and memory no limit counts.
//! - **A private `/tmp`**: the kernel's private TMPDIR (a host directory, 0700, removed when
//!   the kernel is reaped) bound over `/tmp`, with the host paths the kernel needs that lie
//!   under `/tmp` (its cwd, its writable directories, the runner, its interpreter) bound
//!   back where they are. Other sessions' files and host sockets under `/tmp` are gone.
//! - **No socket files of host services**: the directories where they live are hidden
//!   (the host user's runtime directory, `/run/user`) and every pathname socket the host's
//!   network namespace has bound at start (`/proc/net/unix`: docker.sock, an ssh agent,
//!   X11, a database) gets `/dev/null` over it. Connecting to a socket needs no write
//!   permission a read-only mount would deny, so hiding is the only filesystem answer;
//!   a seccomp rule cannot tell the host's sockets from the kernel's own. A socket a host
//!   service binds after the kernel started, outside those directories, stays reachable.
//! - **Hidden directories** (replaced by an empty read-only tmpfs): the artifacts
//!   directory, where every session's kv store lives (kv goes through the host instead).
//!
//! Needs Linux 5.12 (`mount_setattr`, `open_tree`, `move_mount`); an older Linux gets no
//! view and the kernel says so in `isolation.missing`.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use nix::libc;

/// What the view is made from, as the host knows it before the kernel starts.
#[derive(Debug, Default, Clone)]
pub struct ViewSpec {
    /// `Some`: everything read-only but these directories (the kernel's cwd included).
    pub writable: Option<Vec<PathBuf>>,
    /// Bound read-only over themselves (the runner files).
    pub read_only: Vec<PathBuf>,
    /// Bound over `/tmp` (the kernel's private TMPDIR); `None` keeps the host's `/tmp`.
    pub private_tmp: Option<PathBuf>,
    /// Host directories the kernel needs where they are (its cwd, its interpreter).
    pub keep: Vec<PathBuf>,
    /// Host directories replaced by an empty read-only tmpfs (unless they hold what the
    /// kernel needs).
    pub hide: Vec<PathBuf>,
    /// Host directories and files the kernel sees empty and read-only, wherever they are
    /// (the credential stores): an empty tmpfs over a directory, `/dev/null` over a file.
    pub conceal: Vec<PathBuf>,
    /// The interpreter's environment as an overlay whose changes go to the session's own
    /// directory: what a cell installs (or scribbles) there is its session's alone.
    pub overlay: Option<super::Overlay>,
    /// The size of the kernel's `/dev/shm`; tmpfs's default (half the RAM) when `None`.
    pub shm_bytes: Option<u64>,
    /// Where the kernel starts: the process's cwd must be taken again on top of the view.
    pub cwd: PathBuf,
}

/// One step of building the view. Paths are absolute, resolved in the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Our mounts stay ours and the host's never reach us.
    MakePrivate,
    /// Every mount at or beneath the path read-only (`mount_setattr(AT_RECURSIVE)`).
    ReadOnlyTree(PathBuf),
    /// The mount at the path writable again (not those beneath it).
    Writable(PathBuf),
    /// A bind mount (with everything mounted beneath the source).
    Bind {
        source: PathBuf,
        target: PathBuf,
    },
    /// A detached copy of the tree at the path, kept in `slot` (`open_tree`), to attach
    /// after what covers it is mounted.
    Clone {
        slot: usize,
        source: PathBuf,
    },
    /// The copy in `slot` mounted at the path (`move_mount`).
    Attach {
        slot: usize,
        target: PathBuf,
    },
    /// A new filesystem (tmpfs, devpts, proc) at the path.
    Mount {
        fstype: &'static str,
        target: PathBuf,
        flags: libc::c_ulong,
        data: String,
    },
    /// The flags of our own mount at the path changed (a tmpfs made read-only once full).
    Remount {
        target: PathBuf,
        flags: libc::c_ulong,
    },
    MakeDir(PathBuf),
    /// An empty file, as the mount point of a device node.
    MakeFile(PathBuf),
    Symlink {
        target: PathBuf,
        link: PathBuf,
    },
    /// `chdir` to the path, so the process's cwd is the top mount there.
    ChangeDir(PathBuf),
    /// `/dev/null` bound over a socket file; nothing if the file went away meanwhile (a
    /// service that stopped between the host's look and the kernel's start).
    Mask(PathBuf),
    /// A read-only bind of the path over itself by a plain remount, keeping the flags the
    /// mount had (a user namespace may not clear nosuid, nodev, ...): for a Linux without
    /// `mount_setattr`.
    BindReadOnly {
        path: PathBuf,
        kept: libc::c_ulong,
    },
}

/// The host's device nodes a kernel may use (bound into its own `/dev`; without a view,
/// the only ones of `/dev` Landlock lets it open).
pub const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];
/// `/proc` entries made read-only in the kernel's own `/proc` (runc's `readonlyPaths`).
const PROC_READ_ONLY: [&str; 5] = ["bus", "fs", "irq", "sys", "sysrq-trigger"];
/// `/proc` and `/sys` entries masked (runc's `maskedPaths`, with Docker's `interrupts`).
const MASKED: [&str; 12] = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/sys/devices/virtual/powercap",
    "/sys/firmware",
];
const TMP: &str = "/tmp";
const NOSUID_NODEV_NOEXEC: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

fn is_under(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// The steps for `spec` on this machine, and what of the host they leave in sight. Also
/// makes, in the host, what they need there: the mount points of the paths kept under the
/// private `/tmp`.
pub fn steps(spec: &ViewSpec) -> io::Result<(Vec<Step>, super::Reach)> {
    let mut steps = vec![Step::MakePrivate];
    let tmp = Path::new(TMP);
    let private_tmp = spec
        .private_tmp
        .as_ref()
        .filter(|_| std::fs::symlink_metadata(tmp).is_ok_and(|m| m.is_dir()));
    // Everything the kernel must see where it is, whatever covers its parents.
    let writable = spec.writable.clone().unwrap_or_default();
    let mut needed: Vec<PathBuf> = writable.clone();
    needed.extend(spec.read_only.iter().cloned());
    needed.extend(spec.keep.iter().cloned());
    needed.push(spec.cwd.clone());
    // A private /tmp only while nothing the kernel needs is /tmp itself (a cwd of /tmp
    // keeps the host's).
    let private_tmp = private_tmp.filter(|_| !needed.iter().any(|p| tmp.starts_with(p)));
    // Mounted first, so every later step (the read-only tree, the binds, the copies of
    // paths kept under /tmp) takes the overlay along where the environment is.
    if let Some(overlay) = &spec.overlay {
        let data = overlay.data().ok_or_else(|| {
            io::Error::other(
                "the environment's path holds ',', ':' or '\\', which an overlay cannot name",
            )
        })?;
        steps.push(Step::Mount {
            fstype: "overlay",
            target: overlay.lower.clone(),
            flags: libc::MS_NOSUID | libc::MS_NODEV,
            data,
        });
    }
    match &spec.writable {
        Some(_) => steps.push(Step::ReadOnlyTree("/".into())),
        None => steps.push(Step::ReadOnlyTree("/sys".into())),
    }
    for dir in writable
        .iter()
        .filter(|d| private_tmp.is_none() || !is_under(d, tmp))
    {
        steps.push(Step::Bind {
            source: dir.clone(),
            target: dir.clone(),
        });
        steps.push(Step::Writable(dir.clone()));
    }
    if let (Some(overlay), Some(_)) = (&spec.overlay, &spec.writable) {
        // The environment's top mount (within a writable directory's bind, if it lies in
        // one): writes there go to the session's own layer.
        steps.push(Step::Writable(overlay.lower.clone()));
    }
    for dir in &spec.read_only {
        steps.push(Step::Bind {
            source: dir.clone(),
            target: dir.clone(),
        });
        steps.push(Step::ReadOnlyTree(dir.clone()));
    }
    let mut slot = 0;
    // The host paths under /tmp, copied before the private /tmp covers them.
    let mut kept_under_tmp = Vec::new();
    if let Some(private) = private_tmp {
        let mut under: Vec<&PathBuf> = needed.iter().filter(|p| is_under(p, tmp)).collect();
        under.sort();
        under.dedup();
        // A path inside another kept one comes with it.
        let outermost: Vec<&PathBuf> = under
            .iter()
            .filter(|p| !under.iter().any(|q| q != *p && is_under(p, q)))
            .copied()
            .collect();
        for path in outermost {
            if !path.is_dir() {
                continue;
            }
            let mount_point = private.join(path.strip_prefix(tmp).unwrap_or(path));
            std::fs::create_dir_all(&mount_point)?;
            steps.push(Step::Clone {
                slot,
                source: path.clone(),
            });
            kept_under_tmp.push((slot, path.clone()));
            slot += 1;
        }
    }
    let mut devices = Vec::new();
    for name in DEVICES {
        let node = Path::new("/dev").join(name);
        if std::fs::metadata(&node).is_ok_and(|m| m.file_type().is_char_device()) {
            steps.push(Step::Clone {
                slot,
                source: node.clone(),
            });
            devices.push((slot, node));
            slot += 1;
        }
    }
    if let Some(private) = private_tmp {
        steps.push(Step::Bind {
            source: private.clone(),
            target: tmp.into(),
        });
        steps.push(Step::Writable(tmp.into()));
        for (slot, path) in &kept_under_tmp {
            steps.push(Step::Attach {
                slot: *slot,
                target: path.clone(),
            });
            if writable.iter().any(|w| is_under(path, w)) {
                steps.push(Step::Writable(path.clone()));
            }
        }
    }
    // /dev: the harmless host nodes, our own ptys and shared memory, read-only otherwise.
    steps.push(Step::Mount {
        fstype: "tmpfs",
        target: "/dev".into(),
        flags: libc::MS_NOSUID | libc::MS_NOEXEC,
        data: "mode=0755,size=64k,nr_inodes=64".into(),
    });
    for (slot, node) in devices {
        steps.push(Step::MakeFile(node.clone()));
        steps.push(Step::Attach { slot, target: node });
    }
    for dir in ["/dev/pts", "/dev/shm"] {
        steps.push(Step::MakeDir(dir.into()));
    }
    for (link, target) in [
        ("/dev/ptmx", "pts/ptmx"),
        ("/dev/fd", "/proc/self/fd"),
        ("/dev/stdin", "/proc/self/fd/0"),
        ("/dev/stdout", "/proc/self/fd/1"),
        ("/dev/stderr", "/proc/self/fd/2"),
    ] {
        steps.push(Step::Symlink {
            target: target.into(),
            link: link.into(),
        });
    }
    steps.push(Step::Mount {
        fstype: "devpts",
        target: "/dev/pts".into(),
        flags: libc::MS_NOSUID | libc::MS_NOEXEC,
        data: "newinstance,ptmxmode=0666,mode=0620".into(),
    });
    steps.push(Step::Mount {
        fstype: "tmpfs",
        target: "/dev/shm".into(),
        flags: NOSUID_NODEV_NOEXEC,
        data: match spec.shm_bytes {
            Some(bytes) => format!("mode=1777,size={bytes}"),
            None => "mode=1777".into(),
        },
    });
    steps.push(Step::Remount {
        target: "/dev".into(),
        flags: libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC,
    });
    // Hidden: what holds nothing the kernel needs. A path the private /tmp covers is
    // gone already, unless it lies in a path kept there.
    let gone_with_tmp = |path: &Path| {
        private_tmp.is_some()
            && is_under(path, tmp)
            && !kept_under_tmp.iter().any(|(_, kept)| is_under(path, kept))
    };
    let holds_needed = |path: &Path| needed.iter().any(|p| is_under(p, path));
    let mut hidden = Vec::new();
    for dir in &spec.hide {
        if gone_with_tmp(dir) || holds_needed(dir) || !dir.is_dir() {
            continue;
        }
        steps.push(empty(dir));
        hidden.push(dir.clone());
    }
    // The credential stores: empty and read-only where they are, in a writable
    // directory too (the cwd may be the home directory).
    for path in &spec.conceal {
        if gone_with_tmp(path) || holds_needed(path) || hidden.iter().any(|h| is_under(path, h)) {
            continue;
        }
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => steps.push(empty(path)),
            Ok(meta) if meta.is_file() => {
                steps.push(Step::Bind {
                    source: "/dev/null".into(),
                    target: path.clone(),
                });
                steps.push(Step::ReadOnlyTree(path.clone()));
            }
            _ => continue,
        }
        hidden.push(path.clone());
    }
    for masked in MASKED.iter().filter(|m| m.starts_with("/sys/")) {
        steps.extend(mask(Path::new(masked)));
    }
    // Socket files of host services outside what is hidden already.
    for socket in host_sockets() {
        let gone = (private_tmp.is_some() && is_under(&socket, tmp))
            || is_under(&socket, Path::new("/dev"))
            || hidden.iter().any(|h| is_under(&socket, h));
        if !gone {
            steps.push(Step::Mask(socket));
        }
    }
    // The kernel's own /proc (its init is PID 1 of the namespace by now), read-only and
    // masked where the host's own would tell or change too much.
    steps.push(Step::Mount {
        fstype: "proc",
        target: "/proc".into(),
        flags: NOSUID_NODEV_NOEXEC,
        data: String::new(),
    });
    for name in PROC_READ_ONLY {
        let path = Path::new("/proc").join(name);
        if path.exists() {
            steps.push(Step::Bind {
                source: path.clone(),
                target: path.clone(),
            });
            steps.push(Step::ReadOnlyTree(path));
        }
    }
    for masked in MASKED.iter().filter(|m| m.starts_with("/proc/")) {
        steps.extend(mask(Path::new(masked)));
    }
    steps.push(Step::ChangeDir(spec.cwd.clone()));
    let reach = super::Reach {
        private_tmp: private_tmp.is_some(),
        kept_under_tmp: kept_under_tmp.into_iter().map(|(_, p)| p).collect(),
        hidden,
    };
    Ok((steps, reach))
}

/// What every namespace kernel gets where no view can be built (Linux < 5.12), and what
/// a zygote gets (its kernels build their own views from what it sees): private mounts,
/// the runner read-only, a `/proc` of its own.
pub fn minimal_steps(runner_base: Option<&Path>) -> io::Result<Vec<Step>> {
    let mut steps = vec![Step::MakePrivate];
    if let Some(base) = runner_base {
        steps.push(Step::BindReadOnly {
            path: base.to_path_buf(),
            kept: kept_mount_flags(base)?,
        });
    }
    steps.push(Step::Mount {
        fstype: "proc",
        target: "/proc".into(),
        flags: NOSUID_NODEV_NOEXEC,
        data: String::new(),
    });
    Ok(steps)
}

/// The flags of the mount holding `dir` that a remount inside a user namespace must keep.
fn kept_mount_flags(dir: &Path) -> io::Result<libc::c_ulong> {
    // Linux's statvfs f_flag bits (the kernel's ST_* values; musl's headers lack some).
    const ST_NOSUID: libc::c_ulong = 0x2;
    const ST_NODEV: libc::c_ulong = 0x4;
    const ST_NOEXEC: libc::c_ulong = 0x8;
    const ST_NOATIME: libc::c_ulong = 0x400;
    const ST_NODIRATIME: libc::c_ulong = 0x800;
    const ST_RELATIME: libc::c_ulong = 0x1000;
    let flags = nix::sys::statvfs::statvfs(dir)?.flags().bits() as libc::c_ulong;
    let mut kept = 0;
    for (has, flag) in [
        (ST_NOSUID, libc::MS_NOSUID),
        (ST_NODEV, libc::MS_NODEV),
        (ST_NOEXEC, libc::MS_NOEXEC),
        (ST_NOATIME, libc::MS_NOATIME),
        (ST_NODIRATIME, libc::MS_NODIRATIME),
        (ST_RELATIME, libc::MS_RELATIME),
    ] {
        if flags & has != 0 {
            kept |= flag;
        }
    }
    // No atime flag reported means strictatime, which a remount must then ask for.
    if flags & (ST_NOATIME | ST_RELATIME) == 0 {
        kept |= libc::MS_STRICTATIME;
    }
    Ok(kept)
}

/// An empty read-only tmpfs over a directory.
fn empty(dir: &Path) -> Step {
    Step::Mount {
        fstype: "tmpfs",
        target: dir.to_path_buf(),
        flags: libc::MS_RDONLY | NOSUID_NODEV_NOEXEC,
        data: "size=4k,nr_inodes=2,mode=0755".into(),
    }
}

/// What covers a masked path: an empty directory or `/dev/null` (none if it is absent on
/// this Linux: the kernel's own `/proc` has what the host's has).
fn mask(path: &Path) -> Option<Step> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    Some(if meta.is_dir() {
        empty(path)
    } else {
        Step::Bind {
            source: "/dev/null".into(),
            target: path.to_path_buf(),
        }
    })
}

/// Every pathname socket bound in this network namespace that is there as a socket now.
fn host_sockets() -> Vec<PathBuf> {
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = table
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(7))
        .filter(|path| path.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    found.sort();
    found.dedup();
    found.retain(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket()));
    found
}

/// What a failed step was doing, for the error message.
pub fn describe(step: &Step) -> String {
    match step {
        Step::MakePrivate => "making the kernel's mounts private".into(),
        Step::ReadOnlyTree(p) => format!("making {} read-only", p.display()),
        Step::Writable(p) => format!("making {} writable", p.display()),
        Step::Bind { source, target } => {
            format!("binding {} at {}", source.display(), target.display())
        }
        Step::Clone { source, .. } => format!("keeping {}", source.display()),
        Step::Attach { target, .. } => format!("mounting {} again", target.display()),
        Step::Mount { fstype, target, .. } => {
            format!("mounting a {fstype} at {}", target.display())
        }
        Step::Remount { target, .. } => format!("remounting {}", target.display()),
        Step::MakeDir(p) | Step::MakeFile(p) => format!("making {}", p.display()),
        Step::Symlink { link, .. } => format!("making {}", link.display()),
        Step::ChangeDir(p) => format!("entering {}", p.display()),
        Step::BindReadOnly { path, .. } => format!("making {} read-only", path.display()),
        Step::Mask(p) => format!("hiding the socket {}", p.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cwd: &Path) -> ViewSpec {
        ViewSpec {
            cwd: cwd.to_path_buf(),
            ..ViewSpec::default()
        }
    }

    #[test]
    fn writes_anywhere_keeps_the_root_writable_and_still_locks_sys_and_proc() {
        let steps = steps(&spec(Path::new("/"))).unwrap().0;
        assert!(steps.contains(&Step::ReadOnlyTree("/sys".into())));
        assert!(!steps.contains(&Step::ReadOnlyTree("/".into())));
        assert!(steps.contains(&Step::ReadOnlyTree("/proc/sys".into())));
        let proc = steps
            .iter()
            .position(|s| matches!(s, Step::Mount { fstype: "proc", .. }))
            .unwrap();
        let sys = steps
            .iter()
            .position(|s| *s == Step::ReadOnlyTree("/proc/sys".into()))
            .unwrap();
        assert!(
            proc < sys,
            "the kernel's own /proc is locked, after it is mounted"
        );
        assert_eq!(steps.last(), Some(&Step::ChangeDir("/".into())));
    }

    #[test]
    fn confined_writes_lock_the_root_and_bind_the_writable_directories_back() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let mut s = spec(dir.path());
        s.writable = Some(vec![dir.path().to_path_buf()]);
        let steps = steps(&s).unwrap().0;
        let root = steps
            .iter()
            .position(|s| *s == Step::ReadOnlyTree("/".into()))
            .unwrap();
        let back = steps
            .iter()
            .position(|s| *s == Step::Writable(dir.path().to_path_buf()))
            .unwrap();
        assert!(root < back);
    }

    #[test]
    fn paths_under_a_private_tmp_are_kept_and_their_mount_points_made() {
        let private = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir_in("/tmp").unwrap();
        let inner = cwd.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        let mut s = spec(cwd.path());
        s.private_tmp = Some(private.path().to_path_buf());
        s.keep = vec![inner.clone()];
        let (steps, reach) = steps(&s).unwrap();
        let kept: Vec<_> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Clone { source, .. } if source.starts_with("/tmp") => Some(source.clone()),
                _ => None,
            })
            .collect();
        // The inner path comes with its parent, the cwd.
        assert_eq!(kept, vec![cwd.path().to_path_buf()]);
        // The host checks a request's cwd against the same list.
        assert!(reach.private_tmp);
        assert!(reach.sees(&inner) && reach.sees(Path::new("/var/tmp")));
        assert!(!reach.sees(Path::new("/tmp/elsewhere")));
        let point = private
            .path()
            .join(cwd.path().strip_prefix("/tmp").unwrap());
        assert!(point.is_dir(), "the mount point exists in the private tmp");
    }

    #[test]
    fn a_cwd_of_tmp_itself_keeps_the_hosts_tmp() {
        let private = tempfile::tempdir().unwrap();
        let mut s = spec(Path::new("/tmp"));
        s.private_tmp = Some(private.path().to_path_buf());
        let (steps, reach) = steps(&s).unwrap();
        assert!(!reach.private_tmp && reach.sees(Path::new("/tmp/anything")));
        assert!(!steps
            .iter()
            .any(|s| matches!(s, Step::Bind { target, .. } if target == Path::new("/tmp"))));
    }

    #[test]
    fn hidden_directories_holding_what_the_kernel_needs_stay() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let inside = dir.path().join("cwd");
        std::fs::create_dir(&inside).unwrap();
        let other = tempfile::tempdir_in("/var/tmp").unwrap();
        let mut s = spec(&inside);
        s.hide = vec![dir.path().to_path_buf(), other.path().to_path_buf()];
        let (steps, reach) = steps(&s).unwrap();
        let hidden: Vec<_> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Mount {
                    fstype: "tmpfs",
                    target,
                    flags,
                    ..
                } if flags & libc::MS_RDONLY != 0 && target.starts_with("/var/tmp") => {
                    Some(target.clone())
                }
                _ => None,
            })
            .collect();
        assert_eq!(hidden, vec![other.path().to_path_buf()]);
        assert_eq!(reach.hidden, hidden);
        assert!(!reach.sees(&other.path().join("store.json")) && reach.sees(&inside));
    }
}
