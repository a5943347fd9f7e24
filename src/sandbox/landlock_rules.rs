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

/// What the ruleset restricts.
pub struct Rules<'a> {
    pub abi: i32,
    /// Writes allowed only beneath these directories.
    pub writable: Option<&'a [PathBuf]>,
    pub deny_tcp: bool,
}

/// The ruleset, ready for `landlock_restrict_self`, and the names of what it enforces.
pub fn build(rules: &Rules<'_>) -> Result<(OwnedFd, Vec<&'static str>), String> {
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
    if rules.writable.is_some() {
        ruleset = ruleset
            .handle_access(AccessFs::from_write(abi))
            .map_err(|e| e.to_string())?;
        enforced.push("writes-confined");
    } else {
        // Landlock refuses to move or link a file into another directory unless a rule
        // grants `Refer` (pip's wheel builds, atomic saves do it): grant it everywhere.
        ruleset = ruleset
            .handle_access(AccessFs::Refer)
            .map_err(|e| e.to_string())?;
    }
    if rules.deny_tcp {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| e.to_string())?;
        enforced.push("tcp-denied");
    }
    let mut created = ruleset.create().map_err(|e| e.to_string())?;
    if rules.writable.is_none() {
        let root = PathFd::new("/").map_err(|e| format!("opening /: {e}"))?;
        created = created
            .add_rule(PathBeneath::new(root, AccessFs::Refer))
            .map_err(|e| e.to_string())?;
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
    Ok((fd, enforced))
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
