//! The seccomp half of the sandbox (Linux): system calls a Python kernel never needs, and
//! that would each widen what a cell can reach, are refused for every process of every
//! kernel, spawned or forked.
//!
//! What is refused, and why (the list follows Docker's default profile, minus what it
//! allows only with a capability no kernel holds, plus what Codex CLI and Anthropic's
//! sandbox-runtime deny):
//!
//! | calls | why |
//! |---|---|
//! | `ptrace`, `process_vm_readv/writev`, `kcmp`, `pidfd_getfd` | reading or steering another process (only its own tree is in reach, but a debugger in a cell is no use to an agent and each is a way around the others) |
//! | `keyctl`, `add_key`, `request_key` | the kernel keyring: the host's tokens live in its session and user keyrings |
//! | `bpf`, `perf_event_open`, `userfaultfd`, `io_uring_*` | large kernel attack surfaces behind most recent local privilege escalations |
//! | `mount`, `umount2`, `pivot_root`, `chroot`, `open_tree`, `move_mount`, `fsopen`, `fsconfig`, `fsmount`, `fspick`, `mount_setattr` | changing the filesystem view the sandbox built |
//! | `unshare`, `clone` with a `CLONE_NEW*` flag, `setns`, `clone3` | new namespaces: a nested user namespace gives back every capability over what it makes, and with it the kernel code paths user namespaces expose |
//! | `kexec_*`, `init_module`, `finit_module`, `delete_module`, `swapon`, `swapoff`, `reboot`, `acct`, `settimeofday`, `clock_settime`, `syslog`, `vhangup`, `quotactl*`, `lookup_dcookie`, `open_by_handle_at`, `iopl`, `ioperm` | the machine's own business (each also needs a capability the kernel lacks: refused here whatever a bug in that check allows) |
//!
//! `clone3` and `io_uring_*` answer ENOSYS, so libc and libraries fall back to what they
//! did before those calls existed (glibc's `posix_spawn` retries with `clone`, whose flags
//! a filter can read); everything else answers EPERM. On x86_64 the x32 numbering of every
//! call is refused too: the same call under its x32 number would pass a list of numbers.
//!
//! Without user namespaces, `network: false` adds `socket`: Landlock refuses TCP, and
//! this refuses UDP, raw and unix sockets, so no host service is reachable through a
//! socket file either (`socketpair` stays: asyncio's event loop needs it).
//!
//! The filters are built once per process, in the host, and applied between fork and
//! exec (spawned kernels) or handed to a forked kernel as bytes (`pykernel_runner/zygote.py`).

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Every namespace flag `clone` and `unshare` take.
const NAMESPACE_FLAGS: [u64; 8] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80, // CLONE_NEWTIME (unshare only; the libc crate lacks it)
];

/// Refused with EPERM, whatever their arguments.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_getfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    libc::SYS_lookup_dcookie,
    libc::SYS_open_by_handle_at,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// Refused with ENOSYS: callers fall back to an older call.
const UNAVAILABLE: &[libc::c_long] = &[
    libc::SYS_clone3,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The filters for one kind of kernel, in the order they are installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filters {
    pub programs: Vec<BpfProgram>,
}

/// What the filters refuse beyond the baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extra {
    /// Every `socket()` (the network is off and no namespace holds it).
    pub sockets: bool,
}

/// The filters for a kernel, built once per process for each `extra`; an error names
/// what could not be built (an architecture seccompiler does not know).
pub fn filters(extra: Extra) -> Result<Filters, String> {
    static PLAIN: std::sync::OnceLock<Result<Filters, String>> = std::sync::OnceLock::new();
    static NO_SOCKETS: std::sync::OnceLock<Result<Filters, String>> = std::sync::OnceLock::new();
    let cell = if extra.sockets { &NO_SOCKETS } else { &PLAIN };
    cell.get_or_init(|| build(extra)).clone()
}

fn build(extra: Extra) -> Result<Filters, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|nr| (*nr, Vec::new())).collect();
    let namespace_rules = |arg: u8| -> Result<Vec<SeccompRule>, String> {
        NAMESPACE_FLAGS
            .iter()
            .map(|flag| {
                let condition = SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(*flag),
                    *flag,
                )
                .map_err(|e| e.to_string())?;
                SeccompRule::new(vec![condition]).map_err(|e| e.to_string())
            })
            .collect()
    };
    refused.insert(libc::SYS_unshare, namespace_rules(0)?);
    // Its flags come first on every architecture (the later arguments' order differs).
    refused.insert(libc::SYS_clone, namespace_rules(0)?);
    if extra.sockets {
        refused.insert(libc::SYS_socket, Vec::new());
    }
    let compile =
        |rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32| -> Result<BpfProgram, String> {
            SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(errno as u32),
                arch,
            )
            .and_then(BpfProgram::try_from)
            .map_err(|e| e.to_string())
        };
    let unavailable = UNAVAILABLE.iter().map(|nr| (*nr, Vec::new())).collect();
    let mut programs = vec![
        compile(refused, libc::EPERM)?,
        compile(unavailable, libc::ENOSYS)?,
    ];
    programs.extend(x32_guard());
    Ok(Filters { programs })
}

/// On x86_64, the x32 ABI reaches every call again under its number plus this bit (on
/// kernels built with it), past a filter that matches numbers: refuse them all.
fn x32_guard() -> Option<BpfProgram> {
    #[cfg(target_arch = "x86_64")]
    {
        use seccompiler::sock_filter;
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
        const LD_W_ABS: u16 = 0x20;
        const JEQ_K: u16 = 0x15;
        const JGE_K: u16 = 0x35;
        const RET_K: u16 = 0x06;
        let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
        Some(vec![
            op(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
            op(JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
            op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
            op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
            op(JGE_K, 0, 1, X32_SYSCALL_BIT),
            op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
            op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        ])
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

impl Filters {
    /// The programs as bytes (`struct sock_filter` in the machine's order), one string of
    /// hex digits each, for a kernel that installs them itself.
    pub fn to_hex(&self) -> Vec<String> {
        self.programs
            .iter()
            .map(|program| {
                program
                    .iter()
                    .flat_map(|op| {
                        let mut bytes = op.code.to_ne_bytes().to_vec();
                        bytes.extend([op.jt, op.jf]);
                        bytes.extend(op.k.to_ne_bytes());
                        bytes
                    })
                    .map(|b| format!("{b:02x}"))
                    .collect()
            })
            .collect()
    }

    /// Installs every program on the calling thread (and so on all it forks and execs).
    /// `no_new_privs` must be set already (Landlock sets it).
    ///
    /// # Safety
    /// Async-signal-safe: one `prctl` per program, over memory made before the fork.
    pub unsafe fn install(&self) -> std::io::Result<()> {
        for program in &self.programs {
            let prog = libc::sock_fprog {
                len: program.len() as u16,
                filter: program.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog,
                0,
                0,
            ) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_build_on_this_machine_and_serialize_op_by_op() {
        let plain = filters(Extra { sockets: false }).unwrap();
        let offline = filters(Extra { sockets: true }).unwrap();
        assert!(plain.programs.len() >= 2);
        // One more rule, so a longer first program.
        assert!(offline.programs[0].len() > plain.programs[0].len());
        let hex = plain.to_hex();
        for (program, text) in plain.programs.iter().zip(&hex) {
            assert_eq!(text.len(), program.len() * 16, "8 bytes an op");
        }
    }

    /// The filters applied for real, in a child, to the calls they must refuse and a few
    /// a kernel must keep.
    #[test]
    fn a_filtered_process_is_refused_exactly_what_the_list_says() {
        let filters = filters(Extra { sockets: false }).unwrap();
        // SAFETY: the child runs system calls only and ends with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            unsafe {
                let fail = |code: i32| -> ! { libc::_exit(code) };
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || filters.install().is_err()
                {
                    fail(10);
                }
                let errno = || *libc::__errno_location();
                if libc::syscall(libc::SYS_keyctl, 0, 0, 0, 0, 0) != -1 || errno() != libc::EPERM {
                    fail(11);
                }
                if libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER) != -1
                    || errno() != libc::EPERM
                {
                    fail(12);
                }
                if libc::syscall(libc::SYS_clone3, 0, 0) != -1 || errno() != libc::ENOSYS {
                    fail(13);
                }
                if libc::syscall(libc::SYS_ptrace, 0, 0, 0, 0) != -1 || errno() != libc::EPERM {
                    fail(14);
                }
                // Kept: an unshare without namespaces, a fork, a socket.
                if libc::syscall(libc::SYS_unshare, libc::CLONE_FILES) != 0 {
                    fail(15);
                }
                let child = libc::fork();
                if child == 0 {
                    libc::_exit(0);
                }
                if child < 0 {
                    fail(16);
                }
                libc::waitpid(child, std::ptr::null_mut(), 0);
                if libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) < 0 {
                    fail(17);
                }
                #[cfg(target_arch = "x86_64")]
                if libc::syscall(0x4000_0000 | libc::SYS_keyctl, 0, 0, 0, 0, 0) != -1
                    || errno() != libc::ENOSYS
                {
                    fail(18);
                }
                libc::_exit(0);
            }
        }
        let mut status = 0;
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "status {status}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "the step that failed");
    }
}
