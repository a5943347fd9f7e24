//! The zygote (Linux): a Python process that imports a kernel's `preload` list once and
//! forks every new kernel from itself, so each starts with pandas (or whatever the list
//! names) already imported, in milliseconds, sharing the imported pages copy-on-write.
//!
//! One zygote serves the kernels whose start would be the same up to the per-kernel
//! parts ([`ZygoteKey`]): the interpreter, the runner, the environment, the sandbox's
//! namespaces and the preload list. A kernel's cwd, private TMPDIR, memory limit and
//! Landlock domain are its own and travel with its fork request. The zygotes of a
//! process are kept in a small registry and live as long as the process (closing our
//! end of its socket ends one, and with it its kernels).
//!
//! How a fork works (`runner/pykernel_runner/zygote.py` is the other side): the host makes the
//! kernel's three pipes and sends their far ends, with the Landlock ruleset it built for
//! the kernel, over a SOCK_SEQPACKET socket (SCM_RIGHTS). The zygote forks; the child
//! takes the pipes as its fd 0-2, enters namespaces of its own beneath the zygote's and
//! its Landlock domain, and runs the runner's `main()`. The zygote answers with a pidfd
//! of the kernel, from which we learn its pid as this process sees it.
//!
//! The zygote reaps its kernels; it reports each exit and keeps the zombie until we
//! answer `reap`, so the pid we signal cannot be reused meanwhile (see `reaper`).

use std::collections::{BTreeMap, HashMap};
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags,
    SockFlag, SockType,
};
use serde_json::json;
use tokio::sync::{oneshot, watch};

use crate::process::exit::ExitInfo;
use crate::process::reaper::KernelProcess;
use crate::sandbox::{Network, Plan, Policy, SandboxConfig, Target};
use crate::start::command::{build_command, LaunchSpec};
use crate::start::zygote_imports::Imports;
use crate::wire::zygote::{ForkedSandbox, FromZygote, ToZygote};

/// Variables that may differ between kernels of one zygote: each fork sets its own.
const PER_KERNEL_VARIABLES: &[&str] = &[
    "TMPDIR",
    "TMP",
    "TEMP",
    // A session's caches (see `session_dir.rs`).
    "MPLCONFIGDIR",
    "PIP_CACHE_DIR",
    "XDG_CACHE_HOME",
];
/// Zygotes one process keeps; a new one replaces one without kernels, or is not made.
const MAX_ZYGOTES: usize = 4;
/// The longest message either side sends (a fork request carries the environment).
const MAX_MESSAGE: usize = 1 << 20;

/// What kernels forked from one zygote have in common.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZygoteKey {
    pub python: PathBuf,
    pub runner: PathBuf,
    /// The kernel's environment without [`PER_KERNEL_VARIABLES`].
    pub env: BTreeMap<String, String>,
    pub sandbox: SandboxConfig,
    pub preload: Vec<String>,
}

impl ZygoteKey {
    pub fn new(
        python: &Path,
        runner: &Path,
        env: &BTreeMap<String, String>,
        sandbox: &SandboxConfig,
        preload: &[String],
    ) -> ZygoteKey {
        let mut env = env.clone();
        for key in PER_KERNEL_VARIABLES {
            env.remove(*key);
        }
        // Whether the runner's bytecode was ready when the kernel started is not the
        // zygote's business (it takes what is ready when it starts).
        env.remove(crate::start::bytecode::ENV_VAR);
        // Landlock's writable directories are per kernel (its own ruleset); only whether
        // the network is shared changes the zygote (its network namespace).
        let sandbox = match sandbox {
            SandboxConfig::Off => SandboxConfig::Off,
            SandboxConfig::On(policy) => SandboxConfig::On(Policy {
                // The zygote needs no proxy of its own: it is offline too.
                network: match policy.network {
                    Network::Host => Network::Host,
                    Network::Loopback | Network::Allow(_) => Network::Loopback,
                },
                ..Policy::default()
            }),
        };
        ZygoteKey {
            python: python.to_path_buf(),
            runner: runner.to_path_buf(),
            env,
            sandbox,
            preload: preload.to_vec(),
        }
    }
}

/// What a zygote said when its imports were done.
#[derive(Debug, Clone, Default)]
pub struct Ready {
    /// Modules that failed to import, with why.
    pub errors: BTreeMap<String, String>,
    /// The zygote's threads (native ones too: OpenBLAS starts its pool on import).
    pub threads: u64,
    /// Python threads: a fork copies only the forking one, so a zygote with more is
    /// not used.
    pub python_threads: u64,
    /// Whether kernels get namespaces of their own (the zygote is a namespace's init).
    pub namespaces: bool,
    /// What its imports depend on: (path, mtime in ns, size) (see `zygote_imports.rs`).
    pub watched: Vec<(PathBuf, u64, u64)>,
}

enum Waiter {
    Ready(oneshot::Sender<Ready>),
    Fork(oneshot::Sender<std::result::Result<(u32, ExitChannel), String>>),
    Exit(std::sync::mpsc::Sender<Option<ExitInfo>>),
    /// A kernel whose requester gave up before it was forked: killed, reaped when it
    /// reports its exit.
    Orphan,
}

type ExitChannel = std::sync::mpsc::Receiver<Option<ExitInfo>>;

pub struct Zygote {
    key: ZygoteKey,
    socket: OwnedFd,
    process: Arc<KernelProcess>,
    ready: std::sync::OnceLock<Ready>,
    /// The watch on what its imports came from, set with `ready`.
    imports: std::sync::OnceLock<Imports>,
    next_id: AtomicU64,
    waiters: Mutex<HashMap<u64, Waiter>>,
    dead: AtomicBool,
    /// Forks no more (its imports are stale); stopped once its last kernel ends.
    retired: AtomicBool,
    kernels: AtomicUsize,
}

/// A kernel process the zygote forked, with the host's ends of its pipes.
pub struct Forked {
    pub process: Arc<KernelProcess>,
    pub exit: watch::Receiver<Option<ExitInfo>>,
    pub stdin: std::process::ChildStdin,
    pub stdout: std::process::ChildStdout,
    pub stderr: std::process::ChildStderr,
}

/// A kernel's own part of a fork.
pub struct ForkRequest<'a> {
    pub env: &'a BTreeMap<String, String>,
    pub cwd: &'a Path,
    pub memory_limit_bytes: Option<u64>,
    /// The kernel's Landlock ruleset (the host built it for this kernel's cwd and tmp).
    pub landlock: Option<RawFd>,
    /// What the kernel applies itself: its view, its seccomp filters (`Plan::for_forked_kernel`).
    pub sandbox: Option<ForkedSandbox>,
    /// The kernel's end of the channel its proxy's listener goes to the host on.
    pub proxy: Option<RawFd>,
}

/// Everything needed to start a zygote for `key`.
#[derive(Clone)]
pub struct ZygoteStart {
    pub key: ZygoteKey,
    /// The runner directory's base (read-only inside the sandbox).
    pub runner_base: PathBuf,
    pub wait: Duration,
}

impl Zygote {
    /// Starts a zygote and waits (at most `start.wait`) until its imports are done.
    pub async fn start(start: ZygoteStart) -> std::result::Result<Arc<Zygote>, String> {
        let ZygoteStart {
            key,
            runner_base,
            wait,
        } = start;
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| format!("socketpair: {e}"))?;
        let runner_dir = key
            .runner
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"));
        // Landlock would forbid the mounts every kernel makes; each kernel enters its own.
        let (plan, _) = Plan::prepare(
            &key.sandbox,
            &Target {
                runner_base: Some(&runner_base),
                zygote: true,
                ..Target::new(&runner_dir)
            },
        )
        .map_err(|e| e.to_string())?;
        let plan = plan.for_zygote();
        let mut env = key.env.clone();
        env.insert("PYKERNEL_ZYGOTE".into(), json!(key.preload).to_string());
        // Its kernels load what they import later from the zygote's copy of it.
        let bytecode = crate::start::bytecode::ready(&key.python);
        if let Some(bundle) = &bytecode {
            env.insert(
                crate::start::bytecode::ENV_VAR.into(),
                format!("fd:{}", bundle.fd()),
            );
        }
        let mut command = build_command(&LaunchSpec {
            python: &key.python,
            runner: &key.runner,
            cwd: &runner_dir,
            env: &env,
            memory_limit_bytes: None,
            cgroup: None,
            sandbox: &plan,
            inherit: bytecode.as_ref().map(|b| b.fd()),
        });
        command
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        plan.set_command(&command).map_err(|e| e.to_string())?;
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start it: {e}"))?;
        let pid = plan
            .kernel_pid(child.id())
            .map_err(|e| format!("cannot start it in its sandbox: {e}"))?;
        // Our copy of its end must go, or its end of the socket never reads EOF.
        drop(command);
        if let Some(stderr) = child.stderr.take() {
            log_stderr(stderr);
        }
        if plan.spawns_through_launcher() {
            std::thread::spawn(move || child.wait());
        }
        let (process, _exit) = KernelProcess::watch(pid, false);
        let zygote = Arc::new(Zygote {
            key,
            socket: ours,
            process,
            ready: std::sync::OnceLock::new(),
            imports: std::sync::OnceLock::new(),
            next_id: AtomicU64::new(1),
            waiters: Mutex::new(HashMap::new()),
            dead: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            kernels: AtomicUsize::new(0),
        });
        let (tx, rx) = oneshot::channel();
        zygote.waiters.lock().unwrap().insert(0, Waiter::Ready(tx));
        let reader = zygote.clone();
        std::thread::Builder::new()
            .name("pykernel-zygote".into())
            .stack_size(256 * 1024)
            .spawn(move || reader.read_messages())
            .map_err(|e| format!("cannot start its reader thread: {e}"))?;
        let ready = match tokio::time::timeout(wait, rx).await {
            Ok(Ok(ready)) => ready,
            Ok(Err(_)) => {
                zygote.stop();
                return Err("it ended before its imports were done".into());
            }
            Err(_) => {
                zygote.stop();
                return Err(format!(
                    "its imports took longer than {} ms",
                    wait.as_millis()
                ));
            }
        };
        if ready.python_threads > 1 {
            zygote.stop();
            return Err(format!(
                "its imports started {} Python threads, and a fork would lose them",
                ready.python_threads - 1
            ));
        }
        for (module, error) in &ready.errors {
            tracing::info!(module = %module, "the zygote could not preload it (its kernels will try): {error}");
        }
        // A few hundred inotify watches and stats: on a thread that may block.
        let watched = ready.watched.clone();
        let imports = tokio::task::spawn_blocking(move || Imports::watch(watched))
            .await
            .map_err(|e| format!("cannot watch its imports: {e}"))?;
        if imports.unwatched() > 0 {
            tracing::debug!(
                unwatched = imports.unwatched(),
                "paths of the zygote's imports without an inotify watch are compared by stat before each fork"
            );
        }
        let _ = zygote.imports.set(imports);
        let _ = zygote.ready.set(ready);
        Ok(zygote)
    }

    /// The preload modules its kernels start with imported.
    pub fn imported(&self) -> Vec<String> {
        let failed = self.ready.get().map(|r| &r.errors);
        self.key
            .preload
            .iter()
            .filter(|m| !failed.is_some_and(|f| f.contains_key(*m)))
            .cloned()
            .collect()
    }

    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Whether what its imports came from is unchanged (see `zygote_imports.rs`). A
    /// `%pip install` (in a kernel or anywhere) or an edited module makes it stale: a
    /// kernel forked from it would start with the old code, where a spawned one would
    /// import the new. One non-blocking read, unless some path could not be watched.
    pub fn is_current(&self) -> bool {
        self.imports.get().is_some_and(Imports::unchanged)
    }

    /// Forks no more; ends once its last kernel has (ending it sooner would end them).
    pub fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        if self.kernels() == 0 {
            self.stop();
        }
    }

    /// Kernels forked and not yet ended.
    pub fn kernels(&self) -> usize {
        self.kernels.load(Ordering::SeqCst)
    }

    /// The zygote's pid.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Ends the zygote (and, in a sandbox, every kernel it forked).
    pub fn stop(&self) {
        self.dead.store(true, Ordering::SeqCst);
        self.process.signal_group(Signal::SIGKILL);
    }

    /// Forks a kernel; errs (for the caller to spawn one instead) when the zygote cannot.
    pub async fn fork(
        self: &Arc<Self>,
        request: ForkRequest<'_>,
        wait: Duration,
    ) -> std::result::Result<Forked, String> {
        if self.is_dead() {
            return Err("the zygote has ended".into());
        }
        let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string());
        let (stdin_r, stdin_w) = pipe()?;
        let (stdout_r, stdout_w) = pipe()?;
        let (stderr_r, stderr_w) = pipe()?;
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let mut env = request.env.clone();
        env.remove(crate::start::bytecode::ENV_VAR);
        env.insert("PYTHONUNBUFFERED".into(), "1".into());
        env.insert("PYTHONIOENCODING".into(), "utf-8".into());
        let arena_max = env
            .get("MALLOC_ARENA_MAX")
            .and_then(|v| v.parse::<u32>().ok());
        let message = ToZygote::Fork {
            id,
            env: &env,
            cwd: request.cwd.display().to_string(),
            memory_limit: request.memory_limit_bytes,
            arena_max,
            landlock: request.landlock.is_some(),
            sandbox: request.sandbox,
        };
        let mut fds = vec![
            stdin_r.as_raw_fd(),
            stdout_w.as_raw_fd(),
            stderr_w.as_raw_fd(),
        ];
        fds.extend(request.landlock);
        fds.extend(request.proxy);
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().unwrap().insert(id, Waiter::Fork(tx));
        if let Err(e) = self.send(&message, &fds) {
            self.waiters.lock().unwrap().remove(&id);
            if e.raw_os_error() == Some(nix::libc::EPIPE)
                || e.raw_os_error() == Some(nix::libc::ECONNRESET)
            {
                self.dead.store(true, Ordering::SeqCst);
            }
            return Err(format!("cannot ask the zygote: {e}"));
        }
        // The zygote holds its own copies now.
        drop((stdin_r, stdout_w, stderr_w));
        let mut rx = rx;
        let answer = match tokio::time::timeout(wait, &mut rx).await {
            Ok(answer) => answer,
            Err(_) => {
                // Under the lock the reader answers with: either it answered already,
                // or whatever it forks later is killed.
                let mut waiters = self.waiters.lock().unwrap();
                rx.close();
                match rx.try_recv() {
                    Ok(answer) => Ok(answer),
                    Err(_) => {
                        waiters.insert(id, Waiter::Orphan);
                        return Err(format!(
                            "the zygote did not fork within {} ms",
                            wait.as_millis()
                        ));
                    }
                }
            }
        };
        let (pid, exited) = match answer {
            Ok(Ok(forked)) => forked,
            Ok(Err(reason)) => return Err(reason),
            Err(_) => return Err("the zygote ended".into()),
        };
        self.kernels.fetch_add(1, Ordering::SeqCst);
        let namespaces = self.ready.get().is_some_and(|r| r.namespaces);
        let zygote = self.clone();
        let (process, exit) = KernelProcess::watch_adopted(pid, namespaces, exited, move || {
            let _ = zygote.send(&ToZygote::Reap { id }, &[]);
        });
        Ok(Forked {
            process,
            exit,
            stdin: std::process::ChildStdin::from(stdin_w),
            stdout: std::process::ChildStdout::from(stdout_r),
            stderr: std::process::ChildStderr::from(stderr_r),
        })
    }

    fn send(&self, message: &ToZygote<'_>, fds: &[RawFd]) -> std::io::Result<()> {
        let bytes = serde_json::to_string(message).map_err(std::io::Error::other)?;
        let iov = [IoSlice::new(bytes.as_bytes())];
        let rights = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
        sendmsg::<()>(
            self.socket.as_raw_fd(),
            &iov,
            cmsgs,
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map(|_| ())
        .map_err(std::io::Error::from)
    }

    /// The reader thread: routes the zygote's messages until its socket closes.
    fn read_messages(self: Arc<Self>) {
        let mut buffer = vec![0u8; MAX_MESSAGE];
        loop {
            let mut cmsg = nix::cmsg_space!([RawFd; 4]);
            let (len, fds) = {
                let mut iov = [IoSliceMut::new(&mut buffer)];
                let received = recvmsg::<()>(
                    self.socket.as_raw_fd(),
                    &mut iov,
                    Some(&mut cmsg),
                    MsgFlags::MSG_CMSG_CLOEXEC,
                );
                let msg = match received {
                    Ok(msg) => msg,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => break,
                };
                let mut fds = Vec::new();
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmRights(raw) = c {
                            // SAFETY: the kernel just gave us these descriptors.
                            fds.extend(
                                raw.into_iter()
                                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                            );
                        }
                    }
                }
                (msg.bytes, fds)
            };
            if len == 0 {
                break;
            }
            match serde_json::from_slice::<FromZygote>(&buffer[..len]) {
                Ok(message) => self.route(message, fds),
                Err(e) => {
                    tracing::warn!("the zygote sent a message that is not one of its own: {e}")
                }
            }
        }
        self.dead.store(true, Ordering::SeqCst);
        for (_, waiter) in self.waiters.lock().unwrap().drain() {
            match waiter {
                Waiter::Exit(tx) => {
                    let _ = tx.send(None);
                }
                // Dropped: their receivers learn that the zygote ended.
                Waiter::Ready(_) | Waiter::Fork(_) | Waiter::Orphan => {}
            }
        }
    }

    fn route(&self, message: FromZygote, fds: Vec<OwnedFd>) {
        let mut waiters = self.waiters.lock().unwrap();
        match message {
            FromZygote::Ready {
                errors,
                threads,
                python_threads,
                namespaces,
                watch,
            } => {
                if let Some(Waiter::Ready(tx)) = waiters.remove(&0) {
                    let _ = tx.send(Ready {
                        errors,
                        threads,
                        python_threads,
                        namespaces,
                        watched: watch,
                    });
                }
            }
            FromZygote::Forked { id } => {
                let pidfd = fds.into_iter().next();
                let pid = pidfd.as_ref().and_then(pid_of);
                let (tx, rx) = std::sync::mpsc::channel();
                match (waiters.remove(&id), pid) {
                    (Some(Waiter::Fork(reply)), Some(pid)) if !reply.is_closed() => {
                        waiters.insert(id, Waiter::Exit(tx));
                        let _ = reply.send(Ok((pid, rx)));
                    }
                    _ => {
                        // Nobody waits for this kernel (or we cannot name it): end it
                        // through its pidfd, which cannot reach a reused pid.
                        if let Some(fd) = &pidfd {
                            kill_pidfd(fd);
                        }
                        waiters.insert(id, Waiter::Orphan);
                    }
                }
            }
            FromZygote::Failed { id, error } => {
                if let Some(Waiter::Fork(reply)) = waiters.remove(&id) {
                    let reason = error.unwrap_or_else(|| "unknown".into());
                    let _ = reply.send(Err(format!("the zygote could not fork it: {reason}")));
                }
            }
            FromZygote::Exited { id, status } => {
                let info = status.map(|s| ExitInfo {
                    code: s.code,
                    signal: s.signal,
                });
                match waiters.remove(&id) {
                    Some(Waiter::Exit(tx)) => {
                        let left = self.kernels.fetch_sub(1, Ordering::SeqCst) - 1;
                        let _ = tx.send(info);
                        if left == 0 && self.retired.load(Ordering::SeqCst) {
                            drop(waiters);
                            self.stop();
                        }
                    }
                    Some(Waiter::Orphan) => {
                        drop(waiters);
                        let _ = self.send(&ToZygote::Reap { id }, &[]);
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The pid a pidfd refers to, as this process's PID namespace numbers it.
fn pid_of(pidfd: &OwnedFd) -> Option<u32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix("Pid:"))
        .and_then(|pid| pid.trim().parse::<i64>().ok())
        .filter(|pid| *pid > 0)
        .map(|pid| pid as u32)
}

fn kill_pidfd(pidfd: &OwnedFd) {
    // SAFETY: pidfd_send_signal on a descriptor we own; no memory is passed.
    unsafe {
        nix::libc::syscall(
            nix::libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            nix::libc::SIGKILL,
            std::ptr::null::<nix::libc::siginfo_t>(),
            0u32,
        );
    }
}

/// The zygote's own diagnostics (an import's warnings) go to the host's log.
fn log_stderr(stderr: std::process::ChildStderr) {
    let _ = std::thread::Builder::new()
        .name("pykernel-zygote-log".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                tracing::debug!(target: "pykernel::zygote", "{line}");
            }
        });
}

struct Slot {
    key: ZygoteKey,
    state: watch::Receiver<Option<std::result::Result<Arc<Zygote>, String>>>,
}

static SLOTS: Mutex<Vec<Slot>> = Mutex::new(Vec::new());

/// The zygote for `start.key`, started if there is none (a start that failed is not
/// tried again in this process); `None` when there is none to use within `wait`.
pub async fn for_kernel(start: ZygoteStart, wait: Duration) -> Option<Arc<Zygote>> {
    let stale = SLOTS
        .lock()
        .unwrap()
        .iter()
        .find(|slot| slot.key == start.key)
        .and_then(|slot| slot.state.borrow().as_ref()?.as_ref().ok().cloned())
        .filter(|z| !z.is_current());
    if let Some(stale) = stale {
        tracing::info!("the zygote's imports changed on disk; a new one is started");
        stale.retire();
    }
    let mut state = {
        let mut slots = SLOTS.lock().unwrap();
        slots.retain(|slot| {
            !matches!(&*slot.state.borrow(), Some(Ok(z)) if z.is_dead() || z.retired.load(Ordering::SeqCst))
        });
        match slots.iter().find(|slot| slot.key == start.key) {
            Some(slot) => slot.state.clone(),
            None => {
                if slots.len() >= MAX_ZYGOTES {
                    let idle = slots.iter().position(|slot| match &*slot.state.borrow() {
                        Some(Ok(z)) => z.kernels() == 0,
                        Some(Err(_)) => true,
                        None => false,
                    });
                    let idle = idle?;
                    if let Some(Ok(z)) = &*slots.remove(idle).state.borrow() {
                        z.stop();
                    }
                }
                let (tx, rx) = watch::channel(None);
                let key = start.key.clone();
                tokio::spawn(async move {
                    let started = Zygote::start(start).await;
                    if let Err(e) = &started {
                        tracing::warn!("no zygote for these kernels; they are spawned: {e}");
                    }
                    let _ = tx.send(Some(started));
                });
                slots.push(Slot {
                    key,
                    state: rx.clone(),
                });
                rx
            }
        }
    };
    let _ = tokio::time::timeout(wait, state.wait_for(Option::is_some)).await;
    let zygote = match &*state.borrow() {
        Some(Ok(zygote)) if !zygote.is_dead() => Some(zygote.clone()),
        _ => None,
    };
    zygote
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Writable;

    #[test]
    fn kernels_that_differ_only_in_their_own_parts_share_a_zygote() {
        let env = |tmp: &str| {
            BTreeMap::from([
                ("PATH".to_string(), "/usr/bin".to_string()),
                ("TMPDIR".to_string(), tmp.to_string()),
            ])
        };
        let writable = |dirs: Vec<&str>| {
            SandboxConfig::On(Policy {
                writable: Writable::Confined(dirs.into_iter().map(PathBuf::from).collect()),
                ..Policy::default()
            })
        };
        let key = |env: &BTreeMap<String, String>, sandbox: &SandboxConfig, preload: &[&str]| {
            let preload: Vec<String> = preload.iter().map(|s| s.to_string()).collect();
            ZygoteKey::new(
                Path::new("/py"),
                Path::new("/r/runner.py"),
                env,
                sandbox,
                &preload,
            )
        };
        let mut per_kernel = env("/tmp/a");
        per_kernel.insert("MPLCONFIGDIR".into(), "/tmp/s/cache/matplotlib".into());
        let a = key(&per_kernel, &writable(vec!["/x"]), &["pandas"]);
        // Its own TMPDIR and writable directories (its own Landlock ruleset) are a
        // kernel's: the same zygote serves both.
        assert_eq!(a, key(&env("/tmp/b"), &writable(vec!["/y"]), &["pandas"]));
        assert_eq!(a.env.get("TMPDIR"), None);
        assert_eq!(a.env.get("MPLCONFIGDIR"), None);
        // What the zygote itself depends on is not.
        assert_ne!(a, key(&env("/tmp/a"), &writable(vec!["/x"]), &["numpy"]));
        let offline = SandboxConfig::On(Policy {
            network: Network::Loopback,
            writable: Writable::All,
            ..Policy::default()
        });
        assert_ne!(a, key(&env("/tmp/a"), &offline, &["pandas"]));
        assert_ne!(a, key(&env("/tmp/a"), &SandboxConfig::Off, &["pandas"]));
        let mut other = env("/tmp/a");
        other.insert("PYTHONPATH".into(), "/elsewhere".into());
        assert_ne!(a, key(&other, &writable(vec!["/x"]), &["pandas"]));
    }

    #[test]
    fn a_pidfd_names_its_process_as_this_namespace_numbers_it() {
        // SAFETY: pidfd_open of our own pid; the descriptor is owned below.
        let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, std::process::id(), 0u32) };
        assert!(fd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        assert_eq!(pid_of(&fd), Some(std::process::id()));
        // Not a pidfd: no pid.
        let file = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(pid_of(&OwnedFd::from(file)), None);
    }
}
