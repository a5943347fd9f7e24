//! The namespace half of the sandbox (Linux): a user namespace owning a PID, mount, IPC
//! (and, without network, a network) namespace, with a `/proc` of its own.
//!
//! The kernel process is the init of its PID namespace. That is what makes it safe
//! against the host even as root: the host and every other kernel have no pid in its
//! namespace (nothing to signal, ptrace or open under `/proc`), and when the kernel ends
//! the Linux kernel kills every process in the namespace, whatever it did to its session
//! or process group.
//!
//! How the process tree is built (all in the child between fork and exec, with plain
//! system calls only, because the host is multi-threaded):
//!
//! ```text
//! host ──fork──> C: unshare(user|pid|mount|ipc[|net]), uid/gid maps, mounts,
//!   │               clone(CLONE_PARENT) ──> G, writes G's pid to the host, exits
//!   └──────────── G (the host's child, pid 1 inside): setsid, mount /proc,
//!                   drop capabilities, Landlock, exec python
//! ```
//!
//! The first process forked after `unshare(CLONE_NEWPID)` becomes the namespace's init,
//! so C cannot be the kernel itself; `CLONE_PARENT` makes G a child of the host rather
//! than of C, so C can exit at once and no supervisor process stays behind (a forked
//! copy of the host would hold the host's memory, its secrets included).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::libc;

/// Everything the child needs, formatted before fork (the child must not allocate).
pub struct NamespacePlan {
    flags: libc::c_int,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// Directories bind-mounted read-only over themselves, with the mount flags the
    /// kernel requires us to keep (a user namespace may not clear nosuid, nodev, ...).
    read_only: Vec<(CString, libc::c_ulong)>,
    /// One directory beneath them left writable (the runner's bytecode cache while it
    /// is being built).
    hole: Option<CString>,
    loopback_up: bool,
    /// C writes G's pid here; the host reads it after spawn.
    report: (OwnedFd, OwnedFd),
}

pub const PROC: &[u8] = b"/proc\0";
const PROC_FS: &[u8] = b"proc\0";
const ROOT: &[u8] = b"/\0";
const SETGROUPS: &[u8] = b"/proc/self/setgroups\0";
const UID_MAP: &[u8] = b"/proc/self/uid_map\0";
const GID_MAP: &[u8] = b"/proc/self/gid_map\0";

impl NamespacePlan {
    pub fn new(network: bool, read_only: &[PathBuf], hole: Option<&Path>) -> io::Result<Self> {
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        let mut flags =
            libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
        if !network {
            flags |= libc::CLONE_NEWNET;
        }
        let read_only = read_only
            .iter()
            .map(|dir| Ok((c_path(dir)?, kept_mount_flags(dir)?)))
            .collect::<io::Result<Vec<_>>>()?;
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        Ok(NamespacePlan {
            flags,
            // The host's own ids, and only they, exist inside: files of other users
            // show as nobody, and no id can be gained.
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            read_only,
            hole: hole.map(c_path).transpose()?,
            loopback_up: !network,
            report: (r, w),
        })
    }

    /// Runs in the forked child (C). Returns only in G, which goes on to exec Python.
    ///
    /// # Safety
    /// Call only between fork and exec: it uses async-signal-safe system calls only,
    /// and C ends with `_exit`.
    pub unsafe fn enter(&self) -> io::Result<()> {
        check(libc::unshare(self.flags))?;
        write_file(SETGROUPS, b"deny")?;
        write_file(UID_MAP, &self.uid_map)?;
        write_file(GID_MAP, &self.gid_map)?;
        // Our mounts stay in our namespace and the host's never reach us.
        check(libc::mount(
            std::ptr::null(),
            ROOT.as_ptr().cast(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        if let Some(hole) = &self.hole {
            // A mount of its own, carried into the read-only bind below (MS_REC) and
            // left writable by the read-only remount, which applies to the top only.
            check(libc::mount(
                hole.as_ptr(),
                hole.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ))?;
        }
        for (dir, kept) in &self.read_only {
            check(libc::mount(
                dir.as_ptr(),
                dir.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ))?;
            check(libc::mount(
                std::ptr::null(),
                dir.as_ptr(),
                std::ptr::null(),
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | kept,
                std::ptr::null(),
            ))?;
        }
        if self.loopback_up {
            loopback_up()?;
        }
        let pid = fork_as_sibling()?;
        if pid > 0 {
            // C: tell the host who the kernel is, and leave.
            let bytes = (pid as u32).to_ne_bytes();
            libc::write(self.report.1.as_raw_fd(), bytes.as_ptr().cast(), 4);
            libc::_exit(0);
        }
        // G: pid 1 of the new namespace.
        check(libc::setsid())?;
        check(libc::mount(
            PROC_FS.as_ptr().cast(),
            PROC.as_ptr().cast(),
            PROC_FS.as_ptr().cast(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ))?;
        drop_capabilities()
    }

    /// After spawn, in the host: the kernel's pid (G), which C reported before exiting.
    pub fn kernel_pid(&self) -> io::Result<u32> {
        let mut bytes = [0u8; 4];
        let fd = self.report.0.as_raw_fd();
        // SAFETY: reading into a local buffer from a pipe we own. C wrote before it
        // exited, and the spawn returned only after C was reaped, so this never blocks
        // unless C died before writing (then the spawn itself failed).
        let n = unsafe { libc::read(fd, bytes.as_mut_ptr().cast(), 4) };
        if n != 4 {
            return Err(io::Error::other(
                "the sandbox did not report the kernel's pid",
            ));
        }
        Ok(u32::from_ne_bytes(bytes))
    }

    /// After a failed spawn: G may have been created and failed before exec; it is our
    /// child (CLONE_PARENT), so reap it rather than leave a zombie.
    pub fn reap_failed_kernel(&self) {
        let fd = self.report.0.as_raw_fd();
        // SAFETY: plain system calls on our own pipe and child.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            let mut bytes = [0u8; 4];
            if libc::read(fd, bytes.as_mut_ptr().cast(), 4) == 4 {
                let pid = u32::from_ne_bytes(bytes) as libc::pid_t;
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// Bounding set emptied, ambient set cleared and root made powerless across exec: the
/// kernel is root in its own user namespace (as the creator), and without this a cell
/// could undo the read-only mounts or mount over what we set up.
unsafe fn drop_capabilities() -> io::Result<()> {
    for cap in 0..64 {
        // EINVAL past the last capability this Linux knows.
        libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
    }
    libc::prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL,
        0,
        0,
        0,
    );
    const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
    const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
    check(libc::prctl(
        libc::PR_SET_SECUREBITS,
        SECBIT_NOROOT | SECBIT_NOROOT_LOCKED,
        0,
        0,
        0,
    ))?;
    Ok(())
}

/// `fork()` whose child becomes a child of our parent (the host), not of us.
unsafe fn fork_as_sibling() -> io::Result<libc::pid_t> {
    raw_fork(libc::CLONE_PARENT)
}

/// fork(2) as a bare system call: libc's fork runs atfork handlers, which may take locks
/// that another thread of the host held when we were forked.
unsafe fn raw_fork(extra: libc::c_int) -> io::Result<libc::pid_t> {
    let flags = (extra | libc::SIGCHLD) as libc::c_ulong;
    // With a null stack the raw clone behaves like fork: the child continues here.
    let pid = libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize);
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid as libc::pid_t)
}

/// A fresh network namespace has a loopback interface that is down; bring it up so
/// local servers inside the kernel (and `localhost`) still work.
unsafe fn loopback_up() -> io::Result<()> {
    let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    check(sock)?;
    let mut req: libc::ifreq = std::mem::zeroed();
    for (i, b) in b"lo".iter().enumerate() {
        req.ifr_name[i] = *b as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_LOOPBACK | libc::IFF_RUNNING) as i16;
    let result = libc::ioctl(sock, libc::SIOCSIFFLAGS, &req);
    libc::close(sock);
    check(result)
}

unsafe fn write_file(path: &[u8], bytes: &[u8]) -> io::Result<()> {
    let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
    check(fd)?;
    let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    let err = io::Error::last_os_error();
    libc::close(fd);
    if written != bytes.len() as isize {
        return Err(err);
    }
    Ok(())
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

/// The flags of the mount holding `dir` that a remount inside a user namespace must keep.
fn kept_mount_flags(dir: &Path) -> io::Result<libc::c_ulong> {
    let stat = nix::sys::statvfs::statvfs(dir)?;
    use nix::sys::statvfs::FsFlags;
    let flags = stat.flags();
    let mut kept = 0;
    for (has, flag) in [
        (FsFlags::ST_NOSUID, libc::MS_NOSUID),
        (FsFlags::ST_NODEV, libc::MS_NODEV),
        (FsFlags::ST_NOEXEC, libc::MS_NOEXEC),
        (FsFlags::ST_NOATIME, libc::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, libc::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if flags.contains(has) {
            kept |= flag;
        }
    }
    // No atime flag reported means strictatime, which a remount must then ask for.
    if !flags.intersects(FsFlags::ST_NOATIME | FsFlags::ST_RELATIME) {
        kept |= libc::MS_STRICTATIME;
    }
    Ok(kept)
}

/// Whether this machine lets an unprivileged process build the namespaces above, tried
/// for real in a throwaway child (user namespaces can be disabled by sysctl, by
/// AppArmor, or inside containers that mask `/proc`).
pub fn probe() -> std::result::Result<(), String> {
    let plan = NamespacePlan::new(true, &[], None).map_err(|e| e.to_string())?;
    const STEPS: [&str; 6] = [
        "",
        "unshare(user, pid, mount, ipc)",
        "writing the uid/gid maps",
        "making mounts private",
        "forking into the pid namespace",
        "mounting a /proc of its own",
    ];
    // SAFETY: the child uses system calls only and ends with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        unsafe {
            let step = probe_child(&plan);
            libc::_exit(step);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for the child we just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => Ok(()),
        Some(step @ 1..=5) => Err(format!(
            "{} failed (unprivileged user namespaces are not available)",
            STEPS[step as usize]
        )),
        _ => Err(format!("the probe ended with status {status}")),
    }
}

unsafe fn probe_child(plan: &NamespacePlan) -> i32 {
    if libc::unshare(plan.flags | libc::CLONE_NEWNET) < 0 {
        return 1;
    }
    if write_file(SETGROUPS, b"deny").is_err()
        || write_file(UID_MAP, &plan.uid_map).is_err()
        || write_file(GID_MAP, &plan.gid_map).is_err()
    {
        return 2;
    }
    let private = libc::mount(
        std::ptr::null(),
        ROOT.as_ptr().cast(),
        std::ptr::null(),
        libc::MS_REC | libc::MS_PRIVATE,
        std::ptr::null(),
    );
    if private < 0 {
        return 3;
    }
    let pid = match raw_fork(0) {
        Ok(pid) => pid,
        Err(_) => return 4,
    };
    if pid == 0 {
        let mounted = libc::mount(
            PROC_FS.as_ptr().cast(),
            PROC.as_ptr().cast(),
            PROC_FS.as_ptr().cast(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        );
        libc::_exit(if mounted < 0 { 5 } else { 0 });
    }
    let mut status = 0;
    libc::waitpid(pid, &mut status, 0);
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        5
    }
}
