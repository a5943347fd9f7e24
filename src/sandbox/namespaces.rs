//! The namespace half of the sandbox (Linux): a user namespace owning a PID, mount, IPC
//! (and, without network, a network) namespace, with a `/proc` of its own.
//!
//! The kernel runs in a PID namespace of its own, under a small init (`runner.py` forks
//! it from PID 1). That is what makes it safe against the host even as root: the host
//! and every other kernel have no pid in its namespace (nothing to signal, ptrace or open
//! under `/proc`), and when the kernel ends the init ends, and the Linux kernel kills
//! every process in the namespace, whatever it did to its session or process group.
//!
//! How the process tree is built (all in the child between fork and exec, with plain
//! system calls only, because the host is multi-threaded):
//!
//! ```text
//! host ──fork──> C: unshare(user|pid|mount|ipc[|net]), uid/gid maps, loopback up,
//!   │               clone(CLONE_PARENT|CLONE_VM|CLONE_VFORK) ──> G, then writes G's pid
//!   │               to the host and exits
//!   └──────────── G (the host's child, pid 1 inside): setsid, the filesystem view
//!                   (`view.rs`, its /proc included), a fresh keyring, capabilities
//!                   dropped, Landlock, seccomp, execve python
//! ```
//!
//! The first process forked after `unshare(CLONE_NEWPID)` becomes the namespace's init,
//! so C cannot be the kernel itself; `CLONE_PARENT` makes G a child of the host rather
//! than of C, so C can exit at once and no supervisor process stays behind (a forked
//! copy of the host would hold the host's memory, its secrets included). G borrows C's
//! memory until its exec, as `vfork` does, on a stack of its own: copying the host's
//! page tables a second time cost about a millisecond of every start. So G runs only
//! `kernel_main`, which ends in `execve` or `_exit`, with signals blocked until it has
//! reset every handler (a host's handler must never run on borrowed memory).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::libc;

/// Everything the child needs, formatted before fork (the child must not allocate).
pub struct NamespacePlan {
    flags: libc::c_int,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// The kernel's filesystem view, built by G (see `view.rs`); its `/proc` is a step.
    view: super::mounts::Prepared,
    loopback_up: bool,
    /// A zygote keeps its capabilities across exec (it narrows them itself, see
    /// `pykernel_runner/zygote.py`) and has no seccomp filter: its kernels' namespaces need both.
    keep_capabilities: bool,
    /// C writes G's pid here (after G's failure report, if G failed); the host reads it
    /// after spawn.
    report: (OwnedFd, OwnedFd),
    /// What G executes, taken from the `Command` (see [`NamespacePlan::set_command`]).
    exec: std::sync::OnceLock<ExecSpec>,
    /// G's stack (it grows down from the end).
    stack: Vec<u8>,
}

/// `execve`'s arguments, made before fork.
struct ExecSpec {
    program: CString,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

// SAFETY: the raw pointers point into `_strings`, owned alongside and never mutated.
unsafe impl Send for ExecSpec {}
unsafe impl Sync for ExecSpec {}

/// What G reports on the pipe when it fails before or at exec: this word, the step, the
/// errno (then C's word with G's pid follows).
const G_FAILED: u32 = u32::MAX;
const G_STACK_BYTES: usize = 128 * 1024;

const PROC: &[u8] = b"/proc\0";
const PROC_FS: &[u8] = b"proc\0";
const ROOT: &[u8] = b"/\0";
const SETGROUPS: &[u8] = b"/proc/self/setgroups\0";
const UID_MAP: &[u8] = b"/proc/self/uid_map\0";
const GID_MAP: &[u8] = b"/proc/self/gid_map\0";

impl NamespacePlan {
    pub fn new(network: bool, view: super::mounts::Prepared) -> io::Result<Self> {
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        let mut flags =
            libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
        if !network {
            flags |= libc::CLONE_NEWNET;
        }
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        Ok(NamespacePlan {
            flags,
            // The host's own ids, and only they, exist inside: files of other users
            // show as nobody, and no id can be gained.
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            view,
            loopback_up: !network,
            keep_capabilities: false,
            report: (r, w),
            exec: std::sync::OnceLock::new(),
            stack: vec![0u8; G_STACK_BYTES],
        })
    }

    /// Takes what to execute from `cmd` (program, arguments, and the environment it sets
    /// after `env_clear`): G executes it itself, without returning into `std`.
    pub fn set_command(&self, cmd: &std::process::Command) -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let c = |s: &std::ffi::OsStr| {
            CString::new(s.as_bytes())
                .map_err(|_| io::Error::other("a NUL byte in the kernel's command"))
        };
        let program = c(cmd.get_program())?;
        let mut strings = vec![program.clone()];
        for arg in cmd.get_args() {
            strings.push(c(arg)?);
        }
        let argc = strings.len();
        for (key, value) in cmd.get_envs() {
            if let Some(value) = value {
                let mut entry = key.to_os_string();
                entry.push("=");
                entry.push(value);
                strings.push(c(&entry)?);
            }
        }
        let pointers: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        let mut argv = pointers[..argc].to_vec();
        argv.push(std::ptr::null());
        let mut envp = pointers[argc..].to_vec();
        envp.push(std::ptr::null());
        let _ = self.exec.set(ExecSpec {
            program,
            _strings: strings,
            argv,
            envp,
        });
        Ok(())
    }

    /// New namespaces (`flags`), in which only the host's own uid and gid exist.
    ///
    /// # Safety
    /// Between fork and exec: plain system calls only.
    unsafe fn unshare_as_ourselves(&self, flags: libc::c_int) -> io::Result<()> {
        check(libc::unshare(flags))?;
        write_file(SETGROUPS, b"deny")?;
        write_file(UID_MAP, &self.uid_map)?;
        write_file(GID_MAP, &self.gid_map)
    }

    /// Runs in the forked child (C). Returns only in G, which goes on to exec Python.
    ///
    /// # Safety
    /// Call only between fork and exec: it uses async-signal-safe system calls only,
    /// and C ends with `_exit`.
    pub unsafe fn enter(
        &self,
        landlock: Option<libc::c_int>,
        landlock_view_access: u64,
        view_writable: &[CString],
        seccomp: Option<&super::seccomp::Filters>,
        proxy: Option<libc::c_int>,
    ) -> io::Result<()> {
        if self.exec.get().is_none() {
            return Err(io::Error::other("the sandbox was given no command"));
        }
        self.unshare_as_ourselves(self.flags)?;
        if self.loopback_up {
            loopback_up()?;
        }
        if let Some(channel) = proxy {
            send_proxy_listener(channel)?;
        }
        // Blocked in C and, inherited, in G until G has reset every handler.
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
        let args = GArgs {
            plan: self,
            landlock: landlock.unwrap_or(-1),
            landlock_view_access,
            view_writable,
            seccomp,
        };
        let top = self.stack.as_ptr().add(self.stack.len()) as usize & !15;
        let pid = libc::clone(
            kernel_main,
            top as *mut libc::c_void,
            libc::CLONE_PARENT | libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &args as *const GArgs as *mut libc::c_void,
        );
        // G has exec'd or exited (vfork): C tells the host who the kernel is, and leaves.
        // Every descriptor is closed first: the host's spawn returns once no process
        // holds the pipe its exec errors travel on, and tearing down this copy of the
        // host's address space in `_exit` takes time nobody needs to wait for.
        let word = if pid > 0 { pid as u32 } else { 0 };
        libc::write(
            self.report.1.as_raw_fd(),
            word.to_ne_bytes().as_ptr().cast(),
            4,
        );
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
        libc::_exit(if pid > 0 { 0 } else { 1 });
    }

    /// The view G builds.
    pub fn view(&self) -> &super::mounts::Prepared {
        &self.view
    }

    /// For a zygote: G keeps its capabilities across exec.
    pub fn keep_capabilities(&mut self) {
        self.keep_capabilities = true;
    }

    /// After spawn, in the host: the kernel's pid (G), which C reported before exiting.
    pub fn kernel_pid(&self) -> io::Result<u32> {
        let first = self.read_word()?;
        if first != G_FAILED {
            if first == 0 {
                return Err(io::Error::other(
                    "the sandbox could not create the kernel process",
                ));
            }
            return Ok(first);
        }
        let step = self.read_word()?;
        let errno = self.read_word()?;
        let pid = self.read_word()?;
        if pid > 0 {
            // SAFETY: reaping our own child (G, CLONE_PARENT), which has exited.
            unsafe { libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) };
        }
        let what = match step.checked_sub(VIEW_STEP) {
            Some(index) => self
                .view
                .steps()
                .get(index as usize)
                .map(|s| {
                    format!(
                        "building the kernel's filesystem view ({})",
                        super::view::describe(s)
                    )
                })
                .unwrap_or_else(|| G_STEPS[2].to_string()),
            None => G_STEPS
                .get(step as usize)
                .copied()
                .unwrap_or("starting the kernel")
                .to_string(),
        };
        let err = io::Error::from_raw_os_error(errno as i32);
        Err(io::Error::new(err.kind(), format!("{what}: {err}")))
    }

    fn read_word(&self) -> io::Result<u32> {
        let mut bytes = [0u8; 4];
        // SAFETY: reading into a local buffer from a pipe we own. C wrote before it let
        // go of its end, and the spawn returned only after that, so the words are there
        // unless C died before writing (then the spawn itself failed).
        let n = unsafe { libc::read(self.report.0.as_raw_fd(), bytes.as_mut_ptr().cast(), 4) };
        if n != 4 {
            return Err(io::Error::other(
                "the sandbox did not report the kernel's pid",
            ));
        }
        Ok(u32::from_ne_bytes(bytes))
    }
}

struct GArgs<'a> {
    plan: &'a NamespacePlan,
    landlock: libc::c_int,
    /// Granted beneath `view_writable` (writes confined).
    landlock_view_access: u64,
    /// The view's own mounts the kernel writes, which the host could not name in the
    /// Landlock ruleset (its `/dev/shm` and ptys, the overlay of its environment).
    view_writable: &'a [CString],
    seccomp: Option<&'a super::seccomp::Filters>,
}

/// What G was doing when it failed, for the error message.
const G_STEPS: [&str; 8] = [
    "starting the kernel",
    "making the kernel a session leader",
    "building the kernel's filesystem view",
    "dropping the kernel's capabilities",
    "entering the kernel's Landlock domain",
    "executing the interpreter",
    "leaving the host's keyring",
    "installing the kernel's seccomp filter",
];
/// G's report for a failed step of the view: this plus the step's index.
const VIEW_STEP: u32 = 1000;

/// G: pid 1 of the new namespace, on its own stack in C's memory. Ends in `execve` or,
/// after reporting why, in `_exit`.
extern "C" fn kernel_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the GArgs on C's stack; C is suspended (vfork) until we exec or
    // exit, so it outlives us. Only async-signal-safe system calls follow.
    unsafe {
        let args = &*(arg as *const GArgs);
        let plan = args.plan;
        let fail = |step: u32| -> libc::c_int {
            let errno = *libc::__errno_location() as u32;
            let words = [G_FAILED, step, errno];
            libc::write(plan.report.1.as_raw_fd(), words.as_ptr().cast(), 12);
            libc::_exit(127)
        };
        // Handlers are the host's and would run on memory we only borrow.
        for sig in 1..=libc::SIGRTMAX() {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_DFL
                && old.sa_sigaction != libc::SIG_IGN
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        if libc::setsid() < 0 {
            return fail(1);
        }
        if let Err((index, err)) = plan.view.apply() {
            *libc::__errno_location() = err.raw_os_error().unwrap_or(0);
            return fail(VIEW_STEP + index as u32);
        }
        if super::privileges::leave_host_keyring().is_err() {
            return fail(6);
        }
        if !plan.keep_capabilities && super::privileges::drop_bounding_set().is_err() {
            return fail(3);
        }
        if args.landlock >= 0 && args.landlock_view_access != 0 {
            for mount in args.view_writable {
                if super::landlock_rules::allow_beneath(
                    args.landlock,
                    mount,
                    args.landlock_view_access,
                )
                .is_err()
                {
                    return fail(4);
                }
            }
        }
        if args.landlock >= 0 && super::landlock_rules::restrict_self(args.landlock).is_err() {
            return fail(4);
        }
        if !plan.keep_capabilities {
            if super::privileges::no_new_privileges().is_err()
                || super::privileges::drop_capability_sets().is_err()
            {
                return fail(3);
            }
            if let Some(filters) = args.seccomp {
                if filters.install().is_err() {
                    return fail(7);
                }
            }
        }
        let Some(exec) = plan.exec.get() else {
            return fail(5);
        };
        libc::execve(
            exec.program.as_ptr(),
            exec.argv.as_ptr(),
            exec.envp.as_ptr(),
        );
        fail(5)
    }
}

/// Our mounts stay in our namespace and the host's never reach us.
unsafe fn make_mounts_private() -> io::Result<()> {
    check(libc::mount(
        std::ptr::null(),
        ROOT.as_ptr().cast(),
        std::ptr::null(),
        libc::MS_REC | libc::MS_PRIVATE,
        std::ptr::null(),
    ))
}

/// A `/proc` showing the caller's PID namespace (call in that namespace).
unsafe fn mount_proc() -> io::Result<()> {
    check(libc::mount(
        PROC_FS.as_ptr().cast(),
        PROC.as_ptr().cast(),
        PROC_FS.as_ptr().cast(),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        std::ptr::null(),
    ))
}

/// fork(2) as a bare system call: libc's fork runs atfork handlers, which may take locks
/// that another thread of the host held when we were forked.
unsafe fn raw_fork() -> io::Result<libc::pid_t> {
    let flags = libc::SIGCHLD as libc::c_ulong;
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
    let result = libc::ioctl(sock, libc::SIOCSIFFLAGS as _, &req);
    libc::close(sock);
    check(result)
}

/// Listens on 127.0.0.1:[`KERNEL_PORT`](super::egress_proxy::KERNEL_PORT) in the
/// caller's (new) network namespace and sends the listener over `channel` to the host,
/// which serves it: the kernel's proxy, with no port of the host's opened.
///
/// # Safety
/// Between fork and exec: plain system calls over memory on the stack.
pub unsafe fn send_proxy_listener(channel: libc::c_int) -> io::Result<()> {
    let sock = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
    check(sock)?;
    let result = (|| {
        let one: libc::c_int = 1;
        check(libc::setsockopt(
            sock,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ))?;
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = super::egress_proxy::KERNEL_PORT.to_be();
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        check(libc::bind(
            sock,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ))?;
        check(libc::listen(sock, 128))?;
        // One byte of data, the listener beside it (SCM_RIGHTS).
        let mut byte = [b'l'];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut control = [0u64; 8];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), sock);
        if libc::sendmsg(channel, &msg, 0) != 1 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })();
    libc::close(sock);
    result
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

/// Whether this machine lets an unprivileged process build the namespaces above, tried
/// for real in a throwaway child (user namespaces can be disabled by sysctl, by
/// AppArmor, or inside containers that mask `/proc`).
pub fn probe() -> std::result::Result<Probe, String> {
    let plan = NamespacePlan::new(
        true,
        super::mounts::Prepared::new(Vec::new()).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    const STEPS: [&str; 6] = [
        "",
        "unshare(user, pid, mount, ipc) or writing the uid/gid maps",
        "making mounts private",
        "forking into the pid namespace",
        "mounting a /proc of its own",
        "",
    ];
    // An overlay as a session's installs make: its layers in the host's temporary
    // directory, where those live (overlayfs wants user extended attributes there).
    let layers = OverlayProbe::new();
    // SAFETY: the child uses system calls only and ends with _exit.
    let pid = unsafe { raw_fork() }.map_err(|e| format!("fork: {e}"))?;
    if pid == 0 {
        unsafe {
            let step = probe_child(&plan, layers.as_ref().ok());
            libc::_exit(step);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for the child we just forked.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let overlay = |works: bool| {
        match &layers {
        Err(e) => Err(format!("its layers could not be made: {e}")),
        Ok(layers) if !works => Err(format!(
            "an overlay with its layers in {} could not be mounted (overlayfs in a user namespace needs Linux 5.11, and a filesystem with user extended attributes there: tmpfs before Linux 6.6 has none; set TMPDIR to a directory on another filesystem)",
            layers.base_display()
        )),
        Ok(_) => Ok(()),
    }
    };
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => Ok(Probe {
            view: true,
            overlay: overlay(true),
        }),
        Some(NO_OVERLAY) => Ok(Probe {
            view: true,
            overlay: overlay(false),
        }),
        Some(NO_MOUNT_SETATTR) => Ok(Probe {
            view: false,
            overlay: Err("no filesystem view (Linux < 5.12)".into()),
        }),
        Some(step @ 1..=4) => Err(format!(
            "{} failed (unprivileged user namespaces are not available)",
            STEPS[step as usize]
        )),
        _ => Err(format!("the probe ended with status {status}")),
    }
}

/// What the namespaces give on this machine, beyond the namespaces themselves.
pub struct Probe {
    /// Whether a filesystem view can be built: `mount_setattr` (Linux 5.12) answers.
    pub view: bool,
    /// Whether an environment can be overlaid with a session's installs; else why not.
    pub overlay: std::result::Result<(), String>,
}

/// The probe's exit status when everything works but `mount_setattr` is missing.
const NO_MOUNT_SETATTR: i32 = 5;
/// ... when everything works but an overlay cannot be mounted.
const NO_OVERLAY: i32 = 6;

/// The layers of the probe's overlay, made before the fork.
struct OverlayProbe {
    dir: tempfile::TempDir,
    target: CString,
    data: CString,
}

impl OverlayProbe {
    fn new() -> io::Result<OverlayProbe> {
        let dir = tempfile::Builder::new()
            .prefix("pykernel-probe-")
            .tempdir()?;
        for layer in ["lower", "upper", "work"] {
            std::fs::create_dir(dir.path().join(layer))?;
        }
        let overlay = super::Overlay {
            lower: dir.path().join("lower"),
            upper: dir.path().join("upper"),
            work: dir.path().join("work"),
        };
        let data = overlay
            .data()
            .ok_or_else(|| io::Error::other("the temporary directory's path holds ',' or ':'"))?;
        let c = |s: &[u8]| CString::new(s).map_err(|_| io::Error::other("NUL in a path"));
        Ok(OverlayProbe {
            target: c(overlay.lower.as_os_str().as_encoded_bytes())?,
            data: c(data.as_bytes())?,
            dir,
        })
    }

    fn base_display(&self) -> String {
        self.dir
            .path()
            .parent()
            .map_or_else(String::new, |p| p.display().to_string())
    }
}

impl Drop for OverlayProbe {
    fn drop(&mut self) {
        // overlayfs leaves its scratch directory without permissions: a user that is not
        // root cannot remove it until it may list it again.
        let _ = crate::store::safe_fs::remove_tree(self.dir.path());
    }
}

unsafe fn probe_child(plan: &NamespacePlan, overlay: Option<&OverlayProbe>) -> i32 {
    if plan
        .unshare_as_ourselves(plan.flags | libc::CLONE_NEWNET)
        .is_err()
    {
        return 1;
    }
    if make_mounts_private().is_err() {
        return 2;
    }
    // A no-op change: ENOSYS before Linux 5.12, where the view cannot be built.
    let attr = [0u64; 4];
    let no_view = libc::syscall(
        libc::SYS_mount_setattr,
        libc::AT_FDCWD,
        ROOT.as_ptr(),
        0u32,
        attr.as_ptr(),
        std::mem::size_of_val(&attr),
    ) < 0;
    let pid = match raw_fork() {
        Ok(pid) => pid,
        Err(_) => return 3,
    };
    if pid == 0 {
        libc::_exit(if mount_proc().is_err() { 4 } else { 0 });
    }
    let mut status = 0;
    libc::waitpid(pid, &mut status, 0);
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) if no_view => NO_MOUNT_SETATTR,
        Some(0) => {
            let mounted = overlay.is_some_and(|o| {
                libc::mount(
                    c"overlay".as_ptr(),
                    o.target.as_ptr(),
                    c"overlay".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    o.data.as_ptr().cast(),
                ) == 0
            });
            if mounted {
                0
            } else {
                NO_OVERLAY
            }
        }
        Some(code) => code,
        None => 4,
    }
}
