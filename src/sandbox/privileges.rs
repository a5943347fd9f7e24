//! What a kernel process gives up before it runs a cell, in every mode: its capabilities
//! (every set), the host's keyring, and the right to gain privileges at exec.
//!
//! Why every set, even for a host that is not root: in the sandbox's user namespace the
//! kernel starts with every capability over what that namespace owns; without user
//! namespaces a root host's kernel would be real root with every capability
//! (`sethostname`, raw sockets, loading modules...). Emptying the bounding set and setting
//! `SECBIT_NOROOT` (locked) keeps uid 0 from getting any back at exec; the effective,
//! permitted and inheritable sets are emptied here too, since a forked kernel never execs.
//! `no_new_privs` stops setuid programs and file capabilities. A process that may not
//! change its bounding set (no CAP_SETPCAP: a host that is not root, outside a user
//! namespace) has nothing there to lose.
//!
//! The keyring: a process shares its session keyring with everything its login started,
//! the host's API tokens included (`keyctl add user token ... @s`). The kernel joins a
//! fresh anonymous one, and seccomp refuses the keyring calls from then on.

use nix::libc;

/// The capability header version that takes two 32-bit words per set.
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Joins a new anonymous session keyring: the host's is out of reach from here on.
///
/// # Safety
/// Async-signal-safe: one system call.
pub unsafe fn leave_host_keyring() -> std::io::Result<()> {
    let r = libc::syscall(
        libc::SYS_keyctl,
        KEYCTL_JOIN_SESSION_KEYRING,
        std::ptr::null::<libc::c_char>(),
    );
    if r < 0 {
        let err = std::io::Error::last_os_error();
        // A Linux without keys (CONFIG_KEYS off) has no keyring to share.
        if err.raw_os_error() != Some(libc::ENOSYS) {
            return Err(err);
        }
    }
    Ok(())
}

/// Empties the bounding and ambient sets and locks uid 0 out of capabilities at exec.
/// Call while the process still holds CAP_SETPCAP (before [`drop_capability_sets`]).
///
/// # Safety
/// Async-signal-safe: plain system calls.
pub unsafe fn drop_bounding_set() -> std::io::Result<()> {
    for cap in 0..64 {
        // EINVAL past the last capability this Linux knows; EPERM without CAP_SETPCAP,
        // where the set cannot grant anything anyway (no_new_privs).
        libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
    }
    libc::prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL,
        0,
        0,
        0,
    );
    if libc::prctl(
        libc::PR_SET_SECUREBITS,
        SECBIT_NOROOT | SECBIT_NOROOT_LOCKED,
        0,
        0,
        0,
    ) < 0
    {
        let err = std::io::Error::last_os_error();
        // Without CAP_SETPCAP (a host that is not root, no user namespace) uid 0 is not
        // ours, and there is nothing to lock out.
        if !(err.raw_os_error() == Some(libc::EPERM) && libc::geteuid() != 0) {
            return Err(err);
        }
    }
    Ok(())
}

/// Sets `no_new_privs`: nothing executed from here on gains a privilege.
///
/// # Safety
/// Async-signal-safe: one system call.
pub unsafe fn no_new_privileges() -> std::io::Result<()> {
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Empties the effective, permitted and inheritable sets (after Landlock and anything
/// else that needed them).
///
/// # Safety
/// Async-signal-safe: one system call.
pub unsafe fn drop_capability_sets() -> std::io::Result<()> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    if libc::syscall(
        libc::SYS_capset,
        &mut header as *mut CapHeader,
        data.as_ptr(),
    ) < 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process may empty its bounding set and lock uid 0 out (it holds
/// CAP_SETPCAP), read from `/proc/self/status`; `false` where that cannot be read.
pub fn can_drop_bounding_set() -> bool {
    const CAP_SETPCAP: u32 = 8;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .is_some_and(|eff| eff & (1 << CAP_SETPCAP) != 0)
}
