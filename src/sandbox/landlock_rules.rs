//! The Landlock half of the sandbox (Linux 5.13+): a ruleset made in the host and
//! enforced by the kernel process on itself just before exec.
//!
//! What it adds to the namespaces: a Landlock domain cannot ptrace processes outside it
//! (every ABI), cannot signal them or reach their abstract unix sockets (ABI 6 scopes),
//! cannot change mounts, and, when asked, writes only where it is allowed to and opens
//! no TCP connection. It is also the whole sandbox where user namespaces are not
//! available.

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use landlock::{
    AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};
use nix::libc;

/// The Landlock ABI this Linux offers (0: none).
pub fn abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the documented way to ask for the ABI version: no ruleset, no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    v.max(0) as i32
}

/// The host's `/dev/shm`, writable where the machine is guarded (shared with the host:
/// POSIX semaphores and `multiprocessing` need it).
const SHARED_MEMORY: &str = "/dev/shm";

/// What the ruleset restricts.
pub struct Rules<'a> {
    pub abi: i32,
    /// Writes allowed only beneath these directories.
    pub writable: Option<&'a [PathBuf]>,
    /// Device nodes the kernel may read and write (null, zero, ...): the only files of the
    /// machine's `/dev` it may use, when `/dev` is guarded or writes are confined.
    pub devices: &'a [PathBuf],
    /// Without a filesystem view of its own (no user namespaces), Landlock keeps the
    /// kernel off the machine's controls: no writes beneath `/proc`, `/sys` or `/dev`, and
    /// no reads of `/dev` (the host's terminals), but for `devices` and [`SHARED_MEMORY`].
    pub guard_machine: bool,
    /// Paths the kernel must not read (the credential stores, where no filesystem view
    /// hides them): reading is granted everywhere but beneath them.
    pub hidden: &'a [PathBuf],
    pub deny_tcp: bool,
}

/// The ruleset and what G (or a forked kernel) adds once its view is built: the rights to
/// grant beneath the view's own `/dev/shm` and `/dev/pts`, which do not exist in the host.
pub struct Built {
    pub fd: OwnedFd,
    pub enforced: Vec<&'static str>,
    /// Nonzero when writes are confined: the rights to grant beneath the view's own mounts.
    pub view_access: u64,
}

/// The ruleset, ready for `landlock_restrict_self`, and the names of what it enforces.
pub fn build(rules: &Rules<'_>) -> Result<Built, String> {
    let abi = ABI::from(rules.abi);
    let mut enforced = vec!["landlock"];
    // Every requested restriction must hold: nothing is dropped silently.
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        // A domain needs one handled access; creating device nodes is one no cell needs,
        // and being in a domain is what keeps ptrace and /proc/<pid> of the host away.
        .handle_access(AccessFs::MakeBlock | AccessFs::MakeChar)
        .map_err(|e| e.to_string())?;
    if rules.abi >= 6 {
        ruleset = ruleset
            .scope(Scope::Signal | Scope::AbstractUnixSocket)
            .map_err(|e| e.to_string())?;
        enforced.extend(["signal-scope", "abstract-unix-socket-scope"]);
    }
    let write = AccessFs::from_write(abi);
    if rules.writable.is_some() || rules.guard_machine {
        ruleset = ruleset.handle_access(write).map_err(|e| e.to_string())?;
        if rules.writable.is_some() {
            enforced.push("writes-confined");
        }
    } else {
        // Landlock refuses to move or link a file into another directory unless a rule
        // grants `Refer` (pip's wheel builds, atomic saves do it): grant it everywhere.
        ruleset = ruleset
            .handle_access(AccessFs::Refer)
            .map_err(|e| e.to_string())?;
    }
    let guard_reads = rules.guard_machine || !rules.hidden.is_empty();
    if guard_reads {
        ruleset = ruleset
            .handle_access(AccessFs::ReadFile)
            .map_err(|e| e.to_string())?;
    }
    if rules.guard_machine {
        enforced.push("machine-guarded");
    }
    if rules.deny_tcp {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| e.to_string())?;
        enforced.push("tcp-denied");
    }
    let mut created = ruleset.create().map_err(|e| e.to_string())?;
    let rule = |created: landlock::RulesetCreated, path: &std::path::Path, access| {
        let fd = PathFd::new(path).map_err(|e| format!("{}: {e}", path.display()))?;
        created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    if guard_reads {
        // Reads everywhere but beneath what is kept out of reach: the machine's /dev (its
        // terminals) and the hidden paths. A file or directory made later right inside a
        // directory that holds one of those is unreadable to the kernel.
        let mut unreadable: Vec<PathBuf> = rules.hidden.to_vec();
        if rules.guard_machine {
            unreadable.push(PathBuf::from("/dev"));
        }
        for path in read_grants(&unreadable) {
            created = rule(created, &path, AccessFs::ReadFile.into())?;
        }
    }
    if rules.guard_machine {
        // Writes beneath every top-level directory but the machine's own (where writes
        // are not confined anyway); a top-level directory made later is read-only.
        if rules.writable.is_none() {
            for entry in std::fs::read_dir("/").map_err(|e| format!("listing /: {e}"))? {
                let entry = entry.map_err(|e| format!("listing /: {e}"))?;
                let path = entry.path();
                let name = entry.file_name();
                if !path.is_dir() || name == "dev" || name == "proc" || name == "sys" {
                    continue;
                }
                created = rule(created, &path, write)?;
            }
        }
        let shm = std::path::Path::new(SHARED_MEMORY);
        if shm.is_dir() {
            created = rule(created, shm, write | AccessFs::ReadFile)?;
        }
    } else if rules.writable.is_none() {
        let root = PathFd::new("/").map_err(|e| format!("opening /: {e}"))?;
        created = created
            .add_rule(PathBeneath::new(root, AccessFs::Refer))
            .map_err(|e| e.to_string())?;
    }
    if rules.guard_machine || rules.writable.is_some() {
        let mut handled = write;
        if rules.guard_machine {
            handled |= AccessFs::ReadFile;
        }
        let file = AccessFs::from_file(abi) & handled;
        for device in rules.devices {
            created = rule(created, device, file)?;
        }
    }
    if let Some(paths) = rules.writable {
        for path in paths {
            // Opened here rather than through `path_beneath_rules`, which skips a path
            // it cannot open: a writable directory that is not there is an error.
            let fd =
                PathFd::new(path).map_err(|e| format!("writable path {}: {e}", path.display()))?;
            created = created
                .add_rule(PathBeneath::new(fd, AccessFs::from_write(abi)))
                .map_err(|e| format!("writable path {}: {e}", path.display()))?;
        }
    }
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or_else(|| "Landlock made no ruleset".to_string())?;
    let view_access = if rules.writable.is_some() {
        write.bits()
    } else {
        0
    };
    Ok(Built {
        fd,
        enforced,
        view_access,
    })
}

/// Where to grant reading so that everything is readable but what lies beneath
/// `unreadable`: every entry of every directory on the way down to one of those, but
/// that one. Symlinks need no rule of their own (Landlock judges what they lead to), nor
/// do sockets and devices outside `/dev`.
pub fn read_grants(unreadable: &[PathBuf]) -> Vec<PathBuf> {
    let unreadable: Vec<PathBuf> = unreadable
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    let mut grants = Vec::new();
    if !unreadable.iter().any(|p| p == std::path::Path::new("/")) {
        grant_around(std::path::Path::new("/"), &unreadable, &mut grants);
    }
    grants
}

fn grant_around(dir: &std::path::Path, unreadable: &[PathBuf], grants: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_symlink() || unreadable.contains(&path) {
            continue;
        }
        if kind.is_dir() && unreadable.iter().any(|u| u.starts_with(&path)) {
            grant_around(&path, unreadable, grants);
        } else if kind.is_dir() || kind.is_file() {
            grants.push(path);
        }
    }
}

/// Grants `access` beneath `path` (a mount of the kernel's view: its own `/dev/shm`), in
/// the ruleset not yet enforced.
///
/// # Safety
/// Async-signal-safe: three system calls.
pub unsafe fn allow_beneath(
    ruleset: libc::c_int,
    path: &std::ffi::CStr,
    access: u64,
) -> std::io::Result<()> {
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    let fd = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: fd,
    };
    let r = libc::syscall(
        libc::SYS_landlock_add_rule,
        ruleset,
        LANDLOCK_RULE_PATH_BENEATH,
        &attr as *const PathBeneathAttr,
        0u32,
    );
    let err = std::io::Error::last_os_error();
    libc::close(fd);
    if r < 0 {
        return Err(err);
    }
    Ok(())
}

/// Enforces the ruleset on the calling process (between fork and exec).
///
/// # Safety
/// Async-signal-safe: two system calls.
pub unsafe fn restrict_self(fd: libc::c_int) -> std::io::Result<()> {
    // Required unless we hold CAP_SYS_ADMIN; also keeps setuid programs from gaining
    // privileges the sandbox would not contain.
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
