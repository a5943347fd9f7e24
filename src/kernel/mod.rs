//! One Python kernel: a `runner.py` subprocess in its own session, spoken to over NDJSON.
//!
//! Tasks per kernel: a reader routes the runner's frames to the request they belong to, a
//! stderr drain keeps the tail of the runner's own diagnostics (so a chatty child never
//! blocks on a full pipe), and a waiter reaps the process and publishes how it ended.
//! Executes run one at a time, in arrival order.

pub mod fifo;
pub mod watchdog;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::{sleep_until, timeout, Instant};

use crate::error::{KernelError, Result, StderrTail};
use crate::kernel::fifo::{Fifo, Place, Turn};
use crate::kernel::watchdog::Watchdog;
use crate::process::exit::ExitInfo;
use crate::process::limit::Census;
use crate::process::pids_cgroup::PidsCgroup;
use crate::process::reaper::KernelProcess;
use crate::sandbox::{Isolation, Plan, Reach, SandboxConfig, Target};
use crate::start::command::{build_command, LaunchSpec};
use crate::start::env::{EnvFilter, DEFAULT_ENV_PREFIX};
use crate::start::launcher::{Launcher, PAYLOAD};
use crate::start::private_tmp::PrivateTmp;
use crate::start::python::{self, ResolveOptions, Resolved};
use crate::start::runner_files;
use crate::wire::events::{Collector, ErrorInfo, ExecuteOutcome, KernelEvent};
use crate::wire::frame_reader::{FrameReader, Next, MAX_FRAME_BYTES};
use crate::wire::protocol::{decode_line, HostFrame, RunnerFrame};

pub const DEFAULT_STATUS_MIME: &str = "application/x-pykernel-status";
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_millis(10_000);
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_millis(1_000);
pub const DEFAULT_LINK_TIMEOUT: Duration = Duration::from_millis(10_000);
/// How long a kernel's (or a zygote's) `preload` imports may take: pandas and
/// matplotlib take seconds on a cold disk.
pub const PRELOAD_WAIT: Duration = Duration::from_secs(120);
/// How long an interrupted cell may take to end before the kernel is killed.
pub const INTERRUPT_ESCALATION: Duration = Duration::from_millis(5_000);
const STDERR_TAIL_BYTES: usize = 8 * 1024;
const INIT_ID: &str = "init";
/// How long a confirmed shutdown waits for the kernel's private tmp to be removed.
const TMP_REMOVAL_WAIT: Duration = Duration::from_secs(2);
/// Frames a request may have waiting before the reader stops reading the runner's pipe.
const ROUTE_BACKLOG: usize = 64;

/// How a kernel is started.
#[derive(Clone)]
pub struct KernelConfig {
    pub cwd: PathBuf,
    /// The host environment to filter; the host process's own when `None`.
    pub base_env: Option<HashMap<String, String>>,
    /// Host-managed variables, added after filtering.
    pub env: HashMap<String, String>,
    pub interpreter: Option<String>,
    pub env_prefix: String,
    pub status_mime: String,
    /// The agent text keeps the text/plain stand-in next to an image (`<Figure ...>`).
    pub include_figure_text: bool,
    pub startup_timeout: Duration,
    pub memory_limit_bytes: Option<u64>,
    /// At most this many processes (the kernel and everything it starts).
    pub max_processes: Option<usize>,
    /// Where the runner files are written; `$TMPDIR/pykernel-<uid>` by default.
    pub runner_dir: Option<PathBuf>,
    pub bridge: Option<Arc<dyn Bridge>>,
    /// With `session_id`, where the session's kv store lives.
    pub artifacts_dir: Option<PathBuf>,
    pub session_id: Option<String>,
    /// What the kernel may reach on the host (see `sandbox`).
    pub sandbox: SandboxConfig,
    /// Start the kernel through this argv prefix, somewhere else (see `launcher.rs`).
    pub launcher: Option<Launcher>,
    /// A launched kernel whose link stays silent this long, heartbeats unanswered, is
    /// taken for lost and its launcher killed.
    pub link_timeout: Duration,
    /// Modules the kernel has imported before its first cell (outside the user's
    /// namespace): forked from a zygote that imported them once, else imported after
    /// the start.
    pub preload: Vec<String>,
    /// Whether a kernel with `preload` may be forked from a zygote (see `zygote.rs`).
    pub zygote: bool,
}

impl KernelConfig {
    /// The host environment to filter: the given one, else the host process's own.
    pub fn base_env_or_host(&self) -> HashMap<String, String> {
        self.base_env
            .clone()
            .unwrap_or_else(|| std::env::vars().collect())
    }

    /// The session's kv store, when both the artifacts directory and the session are known.
    pub fn kv_path(&self) -> Option<PathBuf> {
        let dir = self.artifacts_dir.as_ref()?;
        let session = self.session_id.as_ref()?;
        Some(crate::store::kv::store_path(
            dir,
            &crate::store::kv::file_prefix(&self.env_prefix),
            session,
        ))
    }

    /// Makes artifactsDir (and, with a session, its kv store directory) ready, created
    /// 0700 when missing, or refuses it (`ERR_ARTIFACTS_DIR`) before any process starts:
    /// a directory another local user owns, can write, or made a symlink is never used.
    pub fn prepare_artifacts_dir(&self) -> Result<()> {
        let Some(dir) = &self.artifacts_dir else {
            return Ok(());
        };
        if self.session_id.is_some() {
            crate::store::kv::prepare_store_dir(dir)?;
        } else {
            crate::store::safe_fs::ensure_private_dir("artifactsDir", dir)?;
        }
        Ok(())
    }

    pub fn new(cwd: PathBuf) -> Self {
        Self {
            cwd,
            base_env: None,
            env: HashMap::new(),
            interpreter: None,
            env_prefix: DEFAULT_ENV_PREFIX.to_string(),
            status_mime: DEFAULT_STATUS_MIME.to_string(),
            include_figure_text: false,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            memory_limit_bytes: None,
            max_processes: None,
            runner_dir: None,
            bridge: None,
            artifacts_dir: None,
            session_id: None,
            sandbox: SandboxConfig::default(),
            launcher: None,
            link_timeout: DEFAULT_LINK_TIMEOUT,
            preload: Vec::new(),
            zygote: true,
        }
    }
}

/// Where a bridge call comes from, so one host handler serving many kernels can tell
/// them apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOrigin {
    /// The id of the cell that made the call (its worker threads share it).
    pub run_id: String,
    /// The pool session's id (its key identity when it has no id), or a bare kernel's
    /// `sessionId`.
    pub session_id: Option<String>,
    /// The owner of the pool request whose cell made the call.
    pub owner: Option<String>,
}

/// Who a request runs for, as its bridge calls will say (see [`CallOrigin`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    pub session_id: Option<String>,
    pub owner: Option<String>,
}

/// The host side of runner -> host calls (`tool.x(...)`, `agent(...)`).
pub trait Bridge: Send + Sync {
    /// Runs one call; `Err` becomes a RuntimeError with that message in Python.
    fn call(
        &self,
        name: String,
        args: Value,
        origin: CallOrigin,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = std::result::Result<Value, String>> + Send>,
    >;
}

/// One cell to run.
#[derive(Debug, Clone, Default)]
pub struct ExecuteRequest {
    pub code: String,
    pub silent: bool,
    pub store_history: bool,
    pub cwd: Option<String>,
    pub env: Option<BTreeMap<String, Option<String>>>,
    /// Wall-clock budget; on expiry the cell is interrupted (and the kernel killed if it
    /// does not stop within [`INTERRUPT_ESCALATION`]).
    pub timeout: Option<Duration>,
    /// Keep at most this many bytes of stdout (and of stderr) in the outcome; every byte is
    /// still streamed as events. `None` keeps all.
    pub max_captured_bytes: Option<usize>,
    /// Told to the bridge with each call the cell makes; the kernel's own `session_id`
    /// when `None`.
    pub caller: Option<Caller>,
}

/// Cancels one execute from another task (an AbortSignal, a pool disposing the kernel).
#[derive(Default)]
pub struct AbortHandle {
    aborted: AtomicBool,
    notify: Notify,
}

impl AbortHandle {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// Resolves once aborted. Cancel safety: dropping it loses nothing.
    pub async fn aborted(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_aborted() {
                return;
            }
            notified.await;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownOutcome {
    /// The process was reaped (it is gone).
    pub confirmed: bool,
    pub exit: Option<ExitInfo>,
}

type Routes = Arc<Mutex<Router>>;

/// Which request each incoming frame goes to. Once the runner's stdout has ended it is
/// closed: a route asked for after that ends at once, so nobody waits on a dead kernel.
#[derive(Default)]
struct Router {
    routes: HashMap<String, mpsc::Sender<RunnerFrame>>,
    closed: bool,
}

/// Frames of request `id` arrive on the returned receiver until the guard is dropped.
/// Folds into `event` (stdout or stderr text) the frames of the same stream already waiting
/// behind it, so text that queued up while the consumer was slow (an async `onEvent`
/// setting the pace, then a stopped cell's backlog) is delivered in few events instead of
/// one per frame; nothing is dropped and the order is kept. Returns the first waiting
/// frame that does not fold, to be handled next.
fn fold_waiting_text(
    collector: &mut Collector,
    rx: &mut mpsc::Receiver<RunnerFrame>,
    event: &mut KernelEvent,
) -> Option<RunnerFrame> {
    /// Bounds one event: a backlog folds in pieces of about this many bytes.
    const MAX_FOLDED_BYTES: usize = 1 << 20;
    loop {
        let stdout = match event {
            KernelEvent::Stdout(text) | KernelEvent::Stderr(text)
                if text.len() < MAX_FOLDED_BYTES =>
            {
                matches!(event, KernelEvent::Stdout(_))
            }
            _ => return None,
        };
        let next = rx.try_recv().ok()?;
        let same_stream = match &next {
            RunnerFrame::Stdout { late: false, .. } => stdout,
            RunnerFrame::Stderr { late: false, .. } => !stdout,
            _ => false,
        };
        if !same_stream {
            return Some(next);
        }
        // A non-late stream frame gives its own stream's text (or nothing, when it is not
        // this request's), so nothing else can come back here.
        if let (
            Some(KernelEvent::Stdout(more) | KernelEvent::Stderr(more)),
            KernelEvent::Stdout(text) | KernelEvent::Stderr(text),
        ) = (collector.apply(next), &mut *event)
        {
            text.push_str(&more);
        }
    }
}

fn open_route<'a>(
    routes: &'a Routes,
    id: &'a str,
) -> (mpsc::Receiver<RunnerFrame>, RouteGuard<'a>) {
    let (tx, rx) = mpsc::channel(ROUTE_BACKLOG);
    let mut router = routes.lock().unwrap();
    if !router.closed {
        router.routes.insert(id.to_string(), tx);
    }
    (rx, RouteGuard { routes, id })
}

pub struct Kernel {
    pid: u32,
    process: Arc<KernelProcess>,
    isolation: Isolation,
    /// Set once a cell was told which default protections this kernel lacks.
    isolation_reported: AtomicBool,
    resolved: Resolved,
    prelude: PathBuf,
    status_mime: String,
    include_figure_text: bool,
    /// Where `read('artifact://<id>')` in the kernel finds truncated outputs.
    artifacts_dir: Option<PathBuf>,
    writer: Arc<FrameWriter>,
    routes: Routes,
    exit: watch::Receiver<Option<ExitInfo>>,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    stderr_closed: watch::Receiver<bool>,
    /// Executes run one at a time, in the order they were called.
    queue: Arc<Fifo>,
    execution_count: AtomicU32,
    next_id: AtomicU64,
    /// The request written to the runner and not yet done: what `interrupt` names.
    running: Mutex<Option<String>>,
    /// The `init` frame the runner last answered with `ready`.
    initialized: Mutex<Option<Vec<u8>>>,
    bridge: Option<Arc<dyn Bridge>>,
    /// The `session_id` it was started with: the bridge's caller when a request names none.
    session_id: Option<String>,
    max_processes: Option<usize>,
    /// Set when the process guard killed the kernel for running too many processes.
    process_limit_hit: Arc<AtomicBool>,
    /// Frames dropped, and whether the kernel was killed for an oversized one.
    stream_report: Arc<StreamReport>,
    /// Set once the host asked the kernel to end (`shutdown`, a pool's disposal).
    shut_down_by_host: AtomicBool,
    /// Set for a kernel started through a launcher.
    far: Option<FarSide>,
    /// The kv store the kernel's `__pykernel.kv` calls reach, from its last init.
    kv_home: Mutex<Option<KvHome>>,
    /// Turns `true` once the kernel's private tmp is removed (it is, once reaped).
    tmp_removed: Option<watch::Receiver<bool>>,
    /// What of the host the kernel's filesystem view shows.
    reach: Reach,
    start_mode: StartMode,
    preloaded: Vec<String>,
}

/// Where a session's kv store is kept on the host.
#[derive(Clone)]
struct KvHome {
    artifacts_dir: PathBuf,
    prefix: String,
    session_id: String,
}

/// The bridge call by which a launched kernel's `kv` reaches the host's store. Answered
/// here, never passed to the host's `onCall`.
const KV_CALL: &str = "__pykernel.kv";

/// One `kv` operation on the host's store: `{op: get|set|delete|list, key?, value?}`.
/// The store's own refusals come back as `{refused: {code, message}}`, so the cell
/// raises what it would for them (a limit is a `ValueError`); `Err` is for a call that
/// makes no sense.
fn kv_call(home: &KvHome, args: &Value) -> std::result::Result<Value, String> {
    let key = || args.get("key").and_then(Value::as_str).unwrap_or_default();
    let answer =
        crate::store::kv::KvStore::open(&home.artifacts_dir, &home.prefix, &home.session_id)
            .and_then(|store| match args.get("op").and_then(Value::as_str) {
                Some("get") => store.get(key()).map(|v| {
                    // Absent and null differ: a missing key comes back as no `value` at all.
                    let mut found = serde_json::Map::new();
                    if let Some(v) = v {
                        found.insert("value".into(), v);
                    }
                    Some(Value::Object(found))
                }),
                Some("set") => store
                    .set(key(), args.get("value").cloned().unwrap_or(Value::Null))
                    .map(|()| Some(Value::Null)),
                Some("delete") => store.delete(key()).map(|gone| Some(Value::Bool(gone))),
                Some("list") => store
                    .list()
                    .map(|keys| Some(Value::Array(keys.into_iter().map(Value::String).collect()))),
                _ => Ok(None),
            });
    match answer {
        Ok(Some(value)) => Ok(value),
        Ok(None) => Err(format!("unknown kv operation {:?}", args.get("op"))),
        Err(e) => Ok(serde_json::json!({"refused": {"code": e.code(), "message": e.to_string()}})),
    }
}

/// The runner's stdin; every host frame goes through here, one whole line at a time.
struct FrameWriter {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pid: u32,
    trace: bool,
}

impl FrameWriter {
    async fn send(&self, frame: &HostFrame) -> std::io::Result<()> {
        let line = frame.encode();
        if self.trace {
            eprint!(
                "[pykernel {}] -> {}",
                self.pid,
                String::from_utf8_lossy(&line)
            );
        }
        self.send_bytes(&line).await
    }

    /// Bytes as they are: a frame's line, or the runner sent ahead of a launched
    /// kernel's protocol.
    async fn send_bytes(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut stdin = self.stdin.lock().await;
        let pipe = stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        pipe.write_all(bytes).await?;
        pipe.flush().await
    }

    /// EOF on the runner's protocol stdin: the runner's other exit signal.
    async fn close(&self) {
        self.stdin.lock().await.take();
    }
}

impl Kernel {
    /// Resolves Python, spawns the runner and waits for it to be ready.
    pub async fn start(config: KernelConfig) -> Result<Arc<Kernel>> {
        config.prepare_artifacts_dir()?;
        let kernel = Kernel::spawn(&config).await?;
        kernel.initialize(&config).await?;
        kernel.import_preload(&config).await?;
        Ok(kernel)
    }

    /// [`Kernel::start`], given up when `abort` fires (`ERR_ABORTED`) or `deadline`, which
    /// covers all of the start, passes (`ERR_KERNEL_START_TIMEOUT`). A process already
    /// spawned is killed and reaped before the error returns.
    pub async fn start_bounded(
        config: KernelConfig,
        abort: Option<Arc<AbortHandle>>,
        deadline: Option<Duration>,
    ) -> Result<Arc<Kernel>> {
        let deadline_at = deadline.map(|d| Instant::now() + d);
        let given_up = || async {
            tokio::select! {
                biased;
                _ = async {
                    match &abort {
                        Some(abort) => abort.aborted().await,
                        None => std::future::pending().await,
                    }
                } => KernelError::StartAborted,
                _ = async {
                    match deadline_at {
                        Some(at) => sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => KernelError::StartDeadline {
                    deadline_ms: deadline.unwrap_or_default().as_millis() as u64,
                },
            }
        };
        let mut config = config;
        if let Some(deadline) = deadline {
            // Bounds the steps of the start that run processes of their own (the bytecode
            // compile) by the deadline too.
            config.startup_timeout = config.startup_timeout.min(deadline);
        }
        config.prepare_artifacts_dir()?;
        let spawning = Kernel::spawn(&config);
        tokio::pin!(spawning);
        let kernel = tokio::select! {
            biased;
            why = given_up() => {
                // The spawn is let finish (its steps are bounded by the start-up timeout):
                // dropped, it could leave its compile step's process running.
                if let Ok(kernel) = spawning.await {
                    kernel.kill_group(Signal::SIGKILL);
                    kernel.wait_for_exit(Duration::from_secs(2)).await;
                }
                return Err(why);
            }
            kernel = &mut spawning => kernel?,
        };
        tokio::select! {
            biased;
            why = given_up() => {
                kernel.kill_group(Signal::SIGKILL);
                kernel.wait_for_exit(Duration::from_secs(2)).await;
                Err(why)
            }
            ready = async {
                kernel.initialize(&config).await?;
                kernel.import_preload(&config).await
            } => ready.map(|()| kernel),
        }
    }

    /// What of `config.preload` the kernel was not forked with: all of it for a spawned
    /// kernel, the modules its zygote could not import for a forked one (a module in the
    /// kernel's cwd is not on the zygote's path). A module that fails is logged; a
    /// kernel that dies or hangs on its imports fails the start.
    pub async fn import_preload(&self, config: &KernelConfig) -> Result<()> {
        let missing = self.not_preloaded(&config.preload);
        if missing.is_empty() {
            return Ok(());
        }
        match self.preload(&missing, PRELOAD_WAIT).await {
            Ok(errors) => {
                for (module, error) in errors {
                    tracing::warn!(module = %module, "the kernel could not preload it: {error}");
                }
                Ok(())
            }
            Err(e) => {
                self.kill_group(Signal::SIGKILL);
                Err(e)
            }
        }
    }

    /// The interpreter `config` would run, as [`Kernel::spawn`] resolves it.
    pub async fn resolve(config: &KernelConfig) -> Result<Resolved> {
        let resolve_opts = ResolveOptions {
            cwd: config.cwd.clone(),
            interpreter: config.interpreter.clone(),
            base_env: config.base_env_or_host(),
            env_prefix: config.env_prefix.clone(),
            sandboxed: !config.sandbox.is_off(),
        };
        tokio::task::spawn_blocking(move || python::resolve(&resolve_opts).map(|(r, _)| r))
            .await
            .map_err(|e| KernelError::io("resolving Python", std::io::Error::other(e)))?
    }

    /// Starts the Python process, which then waits for [`Kernel::initialize`]. Most of a
    /// kernel's start-up is here, so a pool can keep a spawned spare ready.
    pub async fn spawn(config: &KernelConfig) -> Result<Arc<Kernel>> {
        if let Some(launcher) = &config.launcher {
            return Kernel::spawn_launched(config, launcher).await;
        }
        python::check_cwd(&config.cwd)?;
        let base_env = config.base_env_or_host();
        let resolved = Kernel::resolve(config).await?;
        let runner_dir = config
            .runner_dir
            .clone()
            .unwrap_or_else(runner_files::default_base_dir);
        let files = tokio::task::spawn_blocking(move || runner_files::materialize(&runner_dir))
            .await
            .map_err(|e| KernelError::io("writing the runner", std::io::Error::other(e)))??;

        let mut env = EnvFilter::new(&config.env_prefix).filter(&base_env);
        python::apply_to_env(&resolved, &mut env);
        env.extend(config.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        // Only the host makes a zygote (a runner given this would wait for fork requests).
        env.remove("PYKERNEL_ZYGOTE");
        if config.memory_limit_bytes.is_some() {
            // RLIMIT_AS counts address space, and glibc reserves a 64 MiB malloc arena per
            // thread: an idle kernel would take ~300 MiB of the limit before a cell runs.
            env.entry("MALLOC_ARENA_MAX".into())
                .or_insert_with(|| "2".into());
        }
        check_variables(&env, config)?;
        let trace = ipc_trace(&base_env, config);

        let bytecode = crate::start::bytecode::for_interpreter(
            &resolved.path,
            &files,
            &env,
            &config.sandbox,
            config.startup_timeout,
        );
        if let Some(bundle) = &bytecode {
            env.insert(
                crate::start::bytecode::ENV_VAR.into(),
                format!("fd:{}", bundle.fd()),
            );
        }
        let private_tmp = if config.sandbox.is_off() {
            None
        } else {
            Some(
                tokio::task::spawn_blocking(PrivateTmp::create)
                    .await
                    .map_err(|e| {
                        KernelError::io("making the kernel's private tmp", std::io::Error::other(e))
                    })?
                    .map_err(|e| KernelError::io("making the kernel's private tmp", e))?,
            )
        };
        let (sandbox, isolation) = {
            let target = Target {
                runner_base: Some(&files.base),
                private_tmp: private_tmp.as_ref().map(|d| d.path()),
                keep: kept_for_kernel(&resolved, &env),
                hide: config.artifacts_dir.iter().cloned().collect(),
                memory_limit_bytes: config.memory_limit_bytes,
                ..Target::new(&config.cwd)
            };
            Plan::prepare(&config.sandbox, &target)?
        };
        if let Some(tmp) = &private_tmp {
            let inside = sandbox.tmp_inside(tmp.path()).display().to_string();
            for key in ["TMPDIR", "TMP", "TEMP"] {
                env.insert(key.into(), inside.clone());
            }
        }

        #[cfg(target_os = "linux")]
        let private_tmp = match Kernel::fork_from_zygote(config, &resolved, &files, &env, &sandbox)
            .await
        {
            Some((forked, preloaded)) => {
                let pipes = StdPipes(Some(forked.stdin), Some(forked.stdout), Some(forked.stderr))
                    .open(&forked.process)?;
                return Ok(Kernel::assemble(
                    config,
                    Parts {
                        process: forked.process,
                        exit: forked.exit,
                        pipes,
                        trace,
                        isolation,
                        private_tmp,
                        reach: sandbox.reach().clone(),
                        resolved,
                        prelude: files.prelude,
                        process_limit_hit: Arc::new(AtomicBool::new(false)),
                        far: None,
                        start_mode: StartMode::Zygote,
                        preloaded,
                    },
                ));
            }
            None => private_tmp,
        };

        // In a PID namespace the kernel's init is one more process of its own.
        let max_processes = config
            .max_processes
            .map(|n| n + usize::from(sandbox.spawns_through_launcher()));
        let cgroup = max_processes.and_then(|n| PidsCgroup::create(n, &base_env));
        let mut command = build_command(&LaunchSpec {
            python: &resolved.path,
            runner: &files.runner,
            cwd: &config.cwd,
            env: &env,
            memory_limit_bytes: config.memory_limit_bytes,
            cgroup: cgroup.as_ref(),
            sandbox: &sandbox,
            inherit: bytecode.as_ref().map(|b| b.fd()),
        });
        sandbox
            .set_command(&command)
            .map_err(|e| KernelError::io("preparing the kernel's command", e))?;
        let mut child = command.spawn().map_err(|e| {
            KernelError::PythonInvalid {
                path: resolved.path.display().to_string(),
                reason: if sandbox.spawns_through_launcher() {
                    format!("cannot start it in its sandbox: {e} (`sandbox: 'off'` tells whether the sandbox is the cause)")
                } else {
                    format!("cannot start it: {e}")
                },
            }
        })?;
        let pid = sandbox
            .kernel_pid(child.id())
            .map_err(|e| KernelError::PythonInvalid {
                path: resolved.path.display().to_string(),
                reason: format!("cannot start it in its sandbox: {e}"),
            })?;
        let pipes = Pipes::take(&mut child);
        if sandbox.spawns_through_launcher() {
            // The launcher exits as soon as it has made the kernel; it is reaped off the
            // start's path (tearing down its copy of the host's memory takes a while).
            std::thread::spawn(move || child.wait());
        }
        drop(command);
        let (process, exit) = KernelProcess::watch(pid, sandbox.spawns_through_launcher());
        let pipes = pipes.open(&process)?;
        let process_limit_hit = Arc::new(AtomicBool::new(false));
        if let Some(limit) = max_processes {
            let census = match cgroup {
                Some(cgroup) => {
                    Census::Cgroup(cgroup, sandbox.spawns_through_launcher().then_some(pid))
                }
                None if sandbox.spawns_through_launcher() => Census::Namespace(pid),
                None => Census::Session(pid),
            };
            // The watcher owns the cgroup from here and removes it once the kernel is
            // reaped, whoever ends the kernel and whenever this object is dropped.
            tokio::spawn(crate::process::limit::watch_processes(
                process.clone(),
                census,
                limit,
                exit.clone(),
                process_limit_hit.clone(),
            ));
        }
        Ok(Kernel::assemble(
            config,
            Parts {
                process,
                exit,
                pipes,
                trace,
                isolation,
                private_tmp,
                reach: sandbox.reach().clone(),
                resolved,
                prelude: files.prelude,
                process_limit_hit,
                far: None,
                start_mode: StartMode::Spawn,
                preloaded: Vec::new(),
            },
        ))
    }

    /// A kernel forked from the zygote for `config`'s settings, when `config` has a
    /// `preload` and nothing the zygote cannot give (a process limit, Python < 3.9);
    /// `None` (the caller spawns one) when there is no zygote or it failed.
    #[cfg(target_os = "linux")]
    async fn fork_from_zygote(
        config: &KernelConfig,
        resolved: &Resolved,
        files: &runner_files::RunnerFiles,
        env: &BTreeMap<String, String>,
        sandbox: &Plan,
    ) -> Option<(crate::start::zygote::Forked, Vec<String>)> {
        use crate::start::zygote::{ForkRequest, ZygoteKey, ZygoteStart};
        let forkable = !config.preload.is_empty()
            && config.zygote
            && config.max_processes.is_none()
            && python::version_at_least(&resolved.version, (3, 9));
        if !forkable {
            return None;
        }
        let start = ZygoteStart {
            key: ZygoteKey::new(
                &resolved.path,
                &files.runner,
                env,
                &config.sandbox,
                &config.preload,
            ),
            runner_base: files.base.clone(),
            wait: PRELOAD_WAIT,
        };
        // Once more when the zygote turns out to have died (killed, out of memory): the
        // registry then starts a new one.
        for _ in 0..2 {
            let zygote =
                crate::start::zygote::for_kernel(start.clone(), config.startup_timeout).await?;
            let request = ForkRequest {
                env,
                cwd: &config.cwd,
                memory_limit_bytes: config.memory_limit_bytes,
                landlock: sandbox.landlock_fd(),
                sandbox: sandbox.for_forked_kernel(),
            };
            match zygote.fork(request, config.startup_timeout).await {
                Ok(forked) => return Some((forked, zygote.imported())),
                Err(e) if zygote.is_dead() => {
                    tracing::info!("the zygote had ended ({e}); trying a new one");
                }
                Err(e) => {
                    tracing::warn!("this kernel is spawned, not forked: {e}");
                    return None;
                }
            }
        }
        None
    }

    /// [`Kernel::spawn`] through `config.launcher`: the far side's Python is not resolved
    /// or probed here, and the runner travels over the pipe (see `launcher.rs`).
    async fn spawn_launched(config: &KernelConfig, launcher: &Launcher) -> Result<Arc<Kernel>> {
        if config.max_processes.is_some() {
            return Err(KernelError::InvalidArgument {
                name: "maxProcesses",
                reason: "cannot be counted through a launcher; limit processes where the kernel runs (docker run --pids-limit, a pod's pids limit)".into(),
            });
        }
        if !config.sandbox.is_off() && config.sandbox != SandboxConfig::default() {
            return Err(KernelError::InvalidArgument {
                name: "sandbox",
                reason: "applies to local kernels only; a launched kernel is isolated by what runs it (the container, the remote host, bwrap)".into(),
            });
        }
        let base_env = config.base_env_or_host();
        // The launcher runs here with the kernel's filtered variables (a local launcher
        // hands them on to the kernel, and its environ stays readable to the kernel as
        // its parent's). Only ssh gets the agent's socket: it authenticates with it, runs
        // nothing of the kernel's here, and the far side's supervisor drops a forwarded
        // one.
        let mut env = EnvFilter::new(&config.env_prefix).filter(&base_env);
        if let Some(sock) = base_env.get("SSH_AUTH_SOCK").filter(|_| launcher.is_ssh()) {
            env.insert("SSH_AUTH_SOCK".into(), sock.clone());
        }
        check_variables(&env, config)?;
        let trace = ipc_trace(&base_env, config);
        let interpreter = config
            .interpreter
            .clone()
            .unwrap_or_else(|| "python3".into());
        let mut command = launcher.command(
            &interpreter,
            config.memory_limit_bytes,
            DEFAULT_SHUTDOWN_GRACE,
            &env,
        );
        let mut child = command.spawn().map_err(|e| KernelError::Launcher {
            launcher: launcher.describe(),
            reason: e.to_string(),
        })?;
        let pid = child.id();
        let pipes = Pipes::take(&mut child);
        drop(child); // reaped by the watcher below
        let (process, exit) = KernelProcess::watch(pid, false);
        let pipes = pipes.open(&process)?;
        let kernel = Kernel::assemble(
            config,
            Parts {
                process,
                exit,
                pipes,
                trace,
                isolation: Isolation {
                    mode: "launcher".into(),
                    enforced: Vec::new(),
                    missing: Vec::new(),
                },
                private_tmp: None,
                reach: Reach::default(),
                resolved: Resolved {
                    path: PathBuf::from(&interpreter),
                    version: String::new(),
                    source: python::Source::Explicit,
                    venv: None,
                },
                // Relative: the runner's directory on the far side is its own.
                prelude: PathBuf::from("prelude.py"),
                process_limit_hit: Arc::new(AtomicBool::new(false)),
                far: Some(launcher.clone()),
                start_mode: StartMode::Launcher,
                preloaded: Vec::new(),
            },
        );
        Ok(kernel)
    }

    /// A launched kernel's runner, sent ahead of the protocol by its first `initialize`
    /// (where an abort or a deadline of the start can cut it short), and from then on its
    /// link watched. A far side that is not there (no Python, a refused login) stops
    /// reading; the init that follows then reports its stderr.
    async fn ship_runner(&self, config: &KernelConfig) {
        let Some(far) = &self.far else { return };
        if far.shipped.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = timeout(
            config.startup_timeout,
            self.writer.send_bytes(&PAYLOAD.bytes),
        )
        .await;
        // The link is judged from now: connecting and sending the runner took their time.
        if let Some(link) = &self.stream_report.link {
            link.heard();
        }
        tokio::spawn(watch_link(
            self.writer.clone(),
            self.stream_report.clone(),
            self.process.clone(),
            self.exit.clone(),
            far.link_timeout,
        ));
    }

    /// The kernel object over a started process: its reader, stderr drain and writer.
    fn assemble(config: &KernelConfig, parts: Parts) -> Arc<Kernel> {
        let Parts {
            process,
            exit,
            pipes,
            trace,
            isolation,
            private_tmp,
            reach,
            resolved,
            prelude,
            process_limit_hit,
            far,
            start_mode,
            preloaded,
        } = parts;
        let pid = process.pid();
        let tmp_removed = private_tmp.map(|tmp| tmp.remove_when_reaped(exit.clone()));
        let Pipes {
            stdin,
            stdout,
            stderr,
        } = pipes;
        widen_pipe(&stdout);
        let routes: Routes = Arc::default();
        let stream_report = Arc::new(StreamReport {
            link: far.is_some().then(LinkClock::new),
            ..StreamReport::default()
        });
        tokio::spawn(read_frames(
            stdout,
            routes.clone(),
            stream_report.clone(),
            process.clone(),
            trace,
        ));
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let (stderr_closed_tx, stderr_closed) = watch::channel(false);
        tokio::spawn(drain_stderr(
            stderr,
            stderr_tail.clone(),
            stderr_closed_tx,
            trace,
        ));
        let writer = Arc::new(FrameWriter {
            stdin: tokio::sync::Mutex::new(stdin),
            pid,
            trace,
        });
        let link_timeout = config.link_timeout;
        let far = far.map(|launcher| {
            let (signals, rx) = mpsc::unbounded_channel();
            tokio::spawn(signal_far_side(
                rx,
                writer.clone(),
                process.clone(),
                exit.clone(),
            ));
            FarSide {
                launcher,
                link_timeout,
                signals,
                ready: std::sync::OnceLock::new(),
                shipped: AtomicBool::new(false),
            }
        });
        Arc::new(Kernel {
            pid,
            process,
            isolation,
            isolation_reported: AtomicBool::new(false),
            resolved,
            prelude,
            status_mime: config.status_mime.clone(),
            include_figure_text: config.include_figure_text,
            artifacts_dir: config.artifacts_dir.clone(),
            writer,
            routes,
            exit,
            stderr_tail,
            stderr_closed,
            queue: Fifo::new(),
            execution_count: AtomicU32::new(0),
            next_id: AtomicU64::new(1),
            running: Mutex::new(None),
            initialized: Mutex::new(None),
            bridge: config.bridge.clone(),
            session_id: config.session_id.clone(),
            max_processes: config.max_processes,
            process_limit_hit,
            stream_report,
            shut_down_by_host: AtomicBool::new(false),
            far,
            kv_home: Mutex::new(None),
            tmp_removed,
            reach,
            start_mode,
            preloaded,
        })
    }

    /// Sends `init` (cwd, variables, prelude, kv store) and waits for `ready`, bounded by
    /// the start-up timeout; on failure the process is killed and the error says why.
    /// A kernel may be initialized again (a pool's spare, readied with the pool's
    /// defaults, then claimed by a session with another cwd or kv store): the runner
    /// then makes a fresh namespace and runs the prelude again.
    pub async fn initialize(&self, config: &KernelConfig) -> Result<()> {
        self.ship_runner(config).await;
        let (mut init_rx, init_route) = open_route(&self.routes, INIT_ID);
        let init = self.init_frame(config);
        let encoded = init.encode();
        // A failed write means the runner is already gone; the wait below reports why.
        let _ = self.send(&init).await;
        let ready = timeout(config.startup_timeout, async {
            while let Some(frame) = init_rx.recv().await {
                if let RunnerFrame::Ready {
                    python, executable, ..
                } = frame
                {
                    if let Some(far) = &self.far {
                        let _ = far.ready.set((executable, python));
                    }
                    return true;
                }
            }
            false
        })
        .await;
        drop(init_route);
        match ready {
            Ok(true) => {
                tracing::info!(pid = self.pid, interpreter = %self.interpreter(), "kernel started");
                *self.initialized.lock().unwrap() = Some(encoded);
                *self.kv_home.lock().unwrap() = match (&config.artifacts_dir, &config.session_id) {
                    (Some(dir), Some(session)) => Some(KvHome {
                        artifacts_dir: dir.clone(),
                        prefix: crate::store::kv::file_prefix(&config.env_prefix),
                        session_id: session.clone(),
                    }),
                    _ => None,
                };
                Ok(())
            }
            Ok(false) => {
                let exit = self.wait_for_exit(Duration::from_secs(2)).await;
                if exit.is_none() {
                    self.kill_group(Signal::SIGKILL);
                }
                Err(KernelError::StartFailed {
                    exit: exit.map_or("closed its protocol pipe".into(), |e| e.to_string()),
                    interpreter: self.interpreter().to_string(),
                    stderr: self.stderr_tail().await,
                })
            }
            Err(_) => {
                self.kill_group(Signal::SIGKILL);
                self.wait_for_exit(Duration::from_secs(2)).await;
                Err(KernelError::StartTimeout {
                    timeout_ms: config.startup_timeout.as_millis() as u64,
                    interpreter: self.interpreter().to_string(),
                    stderr: self.stderr_tail().await,
                })
            }
        }
    }

    /// The interpreter this kernel runs, as resolved when it was spawned.
    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Which of `modules` the kernel's process did not start with imported.
    pub fn not_preloaded(&self, modules: &[String]) -> Vec<String> {
        modules
            .iter()
            .filter(|m| !self.preloaded.contains(m))
            .cloned()
            .collect()
    }

    /// How the kernel's process was made: spawned, forked from a zygote, launched.
    pub fn start_mode(&self) -> StartMode {
        self.start_mode
    }

    /// Whether the host's `path` is in the kernel's filesystem view, where it is.
    pub fn sees(&self, path: &std::path::Path) -> bool {
        self.reach.sees(path)
    }

    /// The protections this kernel runs under, and the defaults it lacks.
    pub fn isolation(&self) -> &Isolation {
        &self.isolation
    }

    /// The status event that tells, once per kernel, which default protections it lacks.
    fn isolation_notice(&self) -> Option<KernelEvent> {
        if self.isolation.missing.is_empty() || self.isolation_reported.swap(true, Ordering::SeqCst)
        {
            return None;
        }
        let mut data = serde_json::Map::new();
        data.insert("mode".into(), Value::String(self.isolation.mode.clone()));
        data.insert(
            "missing".into(),
            Value::Array(
                self.isolation
                    .missing
                    .iter()
                    .cloned()
                    .map(Value::String)
                    .collect(),
            ),
        );
        Some(KernelEvent::Status {
            op: "sandbox".into(),
            data,
        })
    }

    /// The real executable: resolved here, or for a launched kernel, what the far side's
    /// Python said it is once it was ready (the name it was started by until then).
    pub fn interpreter(&self) -> &str {
        if let Some((executable, _)) = self.far.as_ref().and_then(|f| f.ready.get()) {
            return executable;
        }
        self.resolved.path.to_str().unwrap_or_default()
    }

    pub fn status_mime(&self) -> &str {
        &self.status_mime
    }

    pub fn include_figure_text(&self) -> bool {
        self.include_figure_text
    }

    pub fn alive(&self) -> bool {
        self.exit.borrow().is_none()
    }

    /// How the kernel ended. For a launched kernel, as its far side's supervisor said:
    /// the launcher's own exit status cannot tell `os._exit(137)` from SIGKILL.
    pub fn exit_info(&self) -> Option<ExitInfo> {
        let ended = (*self.exit.borrow())?;
        let far = self
            .far
            .as_ref()
            .and_then(|_| *self.stream_report.far_exit.lock().unwrap());
        Some(far.unwrap_or(ended))
    }

    pub fn execution_count(&self) -> u32 {
        self.execution_count.load(Ordering::SeqCst)
    }

    /// Protocol lines from the kernel that reached no request: frames for an unknown or
    /// finished request id, or for none, and lines that are not frames. Code in a kernel
    /// can write such lines; they change nothing, and this says how many there were.
    pub fn dropped_frames(&self) -> u64 {
        self.stream_report.dropped_frames.load(Ordering::Relaxed)
    }

    /// Runs one cell, streaming each event to `on_event` in order.
    ///
    /// Resolves with the outcome also when the cell fails, is cancelled, times out or the
    /// kernel dies during it; errs only when the kernel was already dead.
    /// Cancel safety: dropping the future leaves the cell running in the kernel; its frames
    /// are then discarded.
    pub async fn execute(
        &self,
        request: ExecuteRequest,
        abort: Option<Arc<AbortHandle>>,
        on_event: impl FnMut(KernelEvent) + Send,
    ) -> Result<ExecuteOutcome> {
        self.execute_in_turn(self.queue(), request, abort, on_event)
            .await
    }

    /// A place in this kernel's line of executes, taken now (see [`Fifo`]).
    pub fn queue(&self) -> Place {
        self.queue.join()
    }

    /// [`Kernel::execute`] with a place taken earlier, e.g. when the call was made.
    pub async fn execute_in_turn(
        &self,
        place: Place,
        request: ExecuteRequest,
        abort: Option<Arc<AbortHandle>>,
        on_event: impl FnMut(KernelEvent) + Send,
    ) -> Result<ExecuteOutcome> {
        let turn = place.turn().await;
        self.execute_holding(&turn, request, abort, on_event).await
    }

    /// Runs one cell while the caller holds this kernel's turn (several cells of one
    /// request run under one turn, so no other call gets in between).
    pub async fn execute_holding(
        &self,
        _turn: &Turn,
        request: ExecuteRequest,
        abort: Option<Arc<AbortHandle>>,
        mut on_event: impl FnMut(KernelEvent) + Send,
    ) -> Result<ExecuteOutcome> {
        if let Some(exit) = self.exit_info() {
            // Killed between cells (a process a cell left behind kept forking): say why.
            let exit = match (
                self.process_limit_hit.load(Ordering::SeqCst),
                self.max_processes,
            ) {
                (true, Some(limit)) => format!(
                    "{exit}: it ran more than {limit} processes at once, its maxProcesses limit"
                ),
                _ => exit.to_string(),
            };
            return Err(KernelError::KernelDead {
                exit,
                stderr: self.stderr_tail().await,
            });
        }
        if let Some(cwd) = request.cwd.as_deref().map(std::path::Path::new) {
            // As the kernel would resolve it (`..`, a symlink into /tmp).
            let real = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
            if !self.reach.sees(&real) {
                return Err(KernelError::InvalidArgument {
                    name: "cwd",
                    reason: format!(
                        "{} is outside this kernel's filesystem view (its /tmp is its own, and of the host's /tmp it sees only its start cwd, its writable directories, the runner and its interpreter). Start a kernel with that cwd (a pool session with that cwd gets one), or use a directory outside /tmp.",
                        cwd.display()
                    ),
                });
            }
        }
        let id = self.request_id('r');
        tracing::info!(pid = self.pid, id = %id, "execute");
        let (mut rx, _route) = open_route(&self.routes, &id);
        let frame = HostFrame::Execute {
            id: id.clone(),
            code: request.code,
            silent: request.silent,
            store_history: request.store_history,
            cwd: request.cwd,
            env: request.env,
        };
        let mut collector = Collector::new(&self.status_mime, request.max_captured_bytes);
        if abort.as_ref().is_some_and(|a| a.is_aborted()) {
            // Aborted before it reached the kernel: nothing ran.
            collector.outcome.cancelled = true;
            collector.outcome.execution_count = self.execution_count();
            return Ok(collector.outcome);
        }
        if let Some(KernelEvent::Status { op, data }) = self.isolation_notice() {
            on_event(collector.host_status(crate::wire::events::StatusEvent { op, data }));
        }
        // Named before the write: an interrupt from now on names this request.
        let _running = RunningGuard::set(&self.running, &id);
        // A dead pipe shows up below as the end of the frame stream. A write that failed
        // delivered no whole line, so the runner cannot have started the cell.
        collector.outcome.not_started = self.send(&frame).await.is_err();
        // The napi layer polls this future first on the JavaScript thread (`eager`), so the
        // request is written without a thread hop. It must stop there: frames may already
        // be waiting (the runtime's thread routes them meanwhile), and delivering more than
        // `onEvent`'s queue holds from the JavaScript thread would wait for that same thread
        // to drain the queue, forever (seen once as a frozen host in the benchmark).
        tokio::task::yield_now().await;

        let mut watchdog = Watchdog::new(request.timeout, std::time::Instant::now());
        // Calls that paused the watchdog report here when their answer is ready, just before
        // the reply is written: the clock restarts (and `resumed` is reported) before anything
        // the cell does after the call, as this branch is polled before the frames.
        let (call_done_tx, mut call_done_rx) = mpsc::unbounded_channel::<()>();
        // Set once the cell is to be stopped; the kernel is killed if it is still running then.
        let mut escalation: Option<Instant> = None;
        let mut killed = false;
        // A frame taken from `rx` while folding text that did not fold: the next one to handle.
        let mut carried: Option<RunnerFrame> = None;
        loop {
            // The clocks and the abort come before the frames: a consumer that sets the pace
            // (an async `onEvent`) keeps a frame always waiting, and frames first would then
            // never let a timeout, a deadline or an abort through.
            let stop_requested = tokio::select! {
                biased;
                Some(()) = call_done_rx.recv() => {
                    if let Some(paused_for) = watchdog.resume(std::time::Instant::now()) {
                        on_event(collector.host_status(crate::kernel::watchdog::resumed_status(paused_for)));
                    }
                    false
                }
                _ = sleep_until(watchdog.deadline().map_or_else(Instant::now, Instant::from_std)),
                    if watchdog.deadline().is_some() && escalation.is_none() => {
                    collector.outcome.timed_out = true;
                    true
                }
                _ = async { abort.as_ref().unwrap().aborted().await },
                    if abort.is_some() && escalation.is_none() => true,
                _ = sleep_until(escalation.unwrap_or_else(Instant::now)),
                    if escalation.is_some() && !killed => {
                    // The cell ignored the interrupt (C code, SIG_IGN): end the kernel.
                    killed = true;
                    self.terminate(DEFAULT_SHUTDOWN_GRACE).await;
                    false
                }
                frame = async {
                    match carried.take() {
                        Some(frame) => Some(frame),
                        None => rx.recv().await,
                    }
                } => {
                    match frame {
                        Some(RunnerFrame::Call { call_id, name, args, .. }) => {
                            if escalation.is_some() {
                                // The cell is being stopped: no new work for the host.
                                self.refuse_call(call_id, &name);
                            } else {
                                // Only waiting on another model stops the clock.
                                let pauses = crate::kernel::watchdog::pauses_for(&name);
                                if pauses && watchdog.pause(std::time::Instant::now()) {
                                    on_event(collector.host_status(crate::kernel::watchdog::paused_status(&name)));
                                }
                                let done = pauses.then(|| call_done_tx.clone());
                                let caller = request.caller.clone().unwrap_or_else(|| Caller {
                                    session_id: self.session_id.clone(),
                                    owner: None,
                                });
                                let origin = CallOrigin {
                                    run_id: id.clone(),
                                    session_id: caller.session_id,
                                    owner: caller.owner,
                                };
                                self.answer_call(origin, call_id, name, args, done);
                            }
                        }
                        Some(frame) => {
                            if let Some(mut event) = collector.apply(frame) {
                                carried = fold_waiting_text(&mut collector, &mut rx, &mut event);
                                on_event(event);
                            }
                            if collector.is_done() {
                                break;
                            }
                        }
                        None => break,
                    }
                    false
                }
            };
            if stop_requested {
                collector.outcome.cancelled = true;
                escalation = Some(Instant::now() + INTERRUPT_ESCALATION);
                self.interrupt_request(&id).await;
            }
        }
        // A call a thread left in flight: the pause ends with the cell, so a UI is not left
        // showing a stopped clock.
        if let Some(paused_for) = watchdog.end(std::time::Instant::now()) {
            on_event(collector.host_status(crate::kernel::watchdog::resumed_status(paused_for)));
        }
        let finished = collector.is_done();
        let mut outcome = collector.outcome;
        if !finished {
            self.report_death(&mut outcome, killed).await;
            if let Some(error) = &outcome.error {
                on_event(KernelEvent::Error(error.clone()));
            }
        } else {
            self.execution_count
                .store(outcome.execution_count, Ordering::SeqCst);
        }
        Ok(outcome)
    }

    /// A request id no cell can guess: a frame forged by code in the kernel (printed to
    /// the protocol fd, say) cannot pass for a real one.
    fn request_id(&self, kind: char) -> String {
        use std::hash::{BuildHasher, Hasher};
        let n = self.next_id.fetch_add(1, Ordering::SeqCst);
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(n);
        format!("{kind}{n}-{:08x}", hasher.finish() as u32)
    }

    /// The frame stream ended without `done`: the kernel died (or stopped talking, in
    /// which case it is of no further use and is killed). State how it ended.
    async fn report_death(&self, outcome: &mut ExecuteOutcome, killed_by_us: bool) {
        // The frames ended but the process lives on: it closed its protocol pipe (a cell
        // can) and is of no further use.
        let mut silenced = false;
        let exit = match self.wait_for_exit(Duration::from_secs(2)).await {
            Some(exit) => exit,
            None => {
                silenced = true;
                self.terminate(DEFAULT_SHUTDOWN_GRACE).await;
                self.exit_info().unwrap_or(ExitInfo {
                    code: None,
                    signal: None,
                })
            }
        };
        let by_host = self.shut_down_by_host.load(Ordering::SeqCst);
        let oversized = self.stream_report.oversized_frame.load(Ordering::SeqCst);
        let link_lost = self.stream_report.link_lost.load(Ordering::SeqCst);
        outcome.ok = false;
        outcome.kernel_died = true;
        outcome.kernel_killed = killed_by_us
            || silenced
            || by_host
            || oversized
            || link_lost
            || self.process_limit_hit.load(Ordering::SeqCst);
        outcome.execution_count = self.execution_count();
        let evalue = if self.process_limit_hit.load(Ordering::SeqCst) {
            format!(
                "the kernel ran more than {} processes at once (its maxProcesses limit; threads do not count) and was killed with all of them",
                self.max_processes.unwrap_or_default()
            )
        } else if oversized {
            format!(
                "the kernel sent a protocol frame over {} MiB (not allowed); it was killed",
                MAX_FRAME_BYTES >> 20
            )
        } else if link_lost {
            format!(
                "the link to the kernel was lost: nothing came back through `{}` for over {} ms, heartbeats included; the launcher was killed, and the far side ends the kernel when its link closes",
                self.far.as_ref().map_or(String::new(), |f| f.launcher.describe()),
                self.far.as_ref().map_or(0, |f| f.link_timeout.as_millis()),
            )
        } else if killed_by_us {
            "the kernel did not respond to the interrupt and was killed".to_string()
        } else if by_host {
            format!("the kernel was shut down by the host while the cell ran ({exit})")
        } else if silenced {
            "the kernel closed its protocol pipe and stopped answering; it was killed".to_string()
        } else if exit.signal == Some(Signal::SIGKILL as i32) {
            format!("the Python kernel died during the cell ({exit}; possibly out of memory)")
        } else {
            format!("the Python kernel died during the cell ({exit})")
        };
        let tail = self.stderr_tail().await.0;
        outcome.error = Some(ErrorInfo {
            ename: "KernelDied".into(),
            evalue,
            traceback: tail.lines().map(str::to_string).collect(),
        });
    }

    /// SIGINT to the kernel's process group: the running cell gets KeyboardInterrupt and
    /// shell children it started are interrupted too. Between cells the runner ignores it.
    pub fn interrupt(&self) {
        self.kill_group(Signal::SIGINT);
    }

    /// Whether the kernel was last initialized exactly as `config` would initialize it.
    pub fn initialized_for(&self, config: &KernelConfig) -> bool {
        let wanted = self.init_frame(config).encode();
        self.initialized.lock().unwrap().as_ref() == Some(&wanted)
    }

    fn init_frame(&self, config: &KernelConfig) -> HostFrame {
        HostFrame::Init {
            id: INIT_ID.to_string(),
            cwd: config.cwd.display().to_string(),
            env: config.env.clone().into_iter().collect(),
            status_mime: config.status_mime.clone(),
            prelude: Some(self.prelude.display().to_string()),
            env_prefix: config.env_prefix.clone(),
            kv_path: if self.far.is_some() {
                None
            } else {
                config.kv_path().map(|p| p.display().to_string())
            },
            // Every kernel's store is kept by the host: a cell never opens the store's
            // files (nothing it may write is needed, and no other session's store is in
            // its view).
            kv_via_host: config.kv_path().is_some(),
        }
    }

    /// Interrupts the request in flight, if any, as a timeout does (`interrupt` frame,
    /// then SIGINT), so an interrupt asked for just after the call is not lost while the
    /// runner is still reading the request; with none in flight, a plain SIGINT.
    pub async fn interrupt_running(&self) {
        let running = self.running.lock().unwrap().clone();
        match running {
            Some(id) => self.interrupt_request(&id).await,
            None => self.interrupt(),
        }
    }

    /// Stops request `id`: the `interrupt` frame names it, then SIGINT breaks into the
    /// cell (and reaches its children). A SIGINT that arrives before the runner is inside
    /// the cell is ignored there; the frame, written first, is then found as the cell
    /// starts. A stray SIGINT for an earlier request cannot hit a later one: the next
    /// request is written only after this one's `done`.
    async fn interrupt_request(&self, id: &str) {
        let frame = HostFrame::Interrupt { id: id.to_string() };
        // Never let a full pipe hold back the signal.
        let _ = timeout(FRAME_WRITE_WAIT, self.send(&frame)).await;
        self.interrupt();
    }

    /// exit -> grace -> SIGTERM -> grace -> SIGKILL -> grace. Idempotent.
    pub async fn shutdown(&self, grace: Duration) -> ShutdownOutcome {
        self.shut_down_by_host.store(true, Ordering::SeqCst);
        if self.alive() {
            // Bounded: a kernel that stopped reading its stdin (stopped, or a cell that
            // never reads) leaves a write of ours stuck holding the pipe; the signals
            // below end it all the same.
            let _ = timeout(FRAME_WRITE_WAIT, self.send(&HostFrame::Exit)).await;
            let _ = timeout(FRAME_WRITE_WAIT, self.writer.close()).await;
            if self.wait_for_exit(grace).await.is_none() {
                self.terminate(grace).await;
            }
        }
        // Children the kernel left behind share its process group.
        self.kill_group(Signal::SIGKILL);
        let exit = self.exit_info();
        if let (Some(removed), true) = (&self.tmp_removed, exit.is_some()) {
            // What the kernel kept in its private tmp is gone when shutdown returns.
            let mut removed = removed.clone();
            let _ = timeout(TMP_REMOVAL_WAIT, removed.wait_for(|gone| *gone)).await;
        }
        ShutdownOutcome {
            confirmed: exit.is_some(),
            exit,
        }
    }

    /// SIGTERM, then SIGKILL, to the whole group, each with `grace` to take effect.
    async fn terminate(&self, grace: Duration) {
        for signal in [Signal::SIGTERM, Signal::SIGKILL] {
            self.kill_group(signal);
            if self.wait_for_exit(grace).await.is_some() {
                return;
            }
        }
    }

    /// Imports `modules` in the kernel ahead of its first cell, outside the user's
    /// namespace (its stdout goes nowhere), in this kernel's turn; `Ok` holds the modules
    /// that failed, with their exceptions. An error when the kernel did not answer within
    /// `wait` (it is then of no use: the caller ends it) or died.
    pub async fn preload(
        &self,
        modules: &[String],
        wait: Duration,
    ) -> Result<BTreeMap<String, String>> {
        let turn = self.queue().turn().await;
        let id = self.request_id('l');
        let (mut rx, _route) = open_route(&self.routes, &id);
        let frame = HostFrame::Preload {
            id: id.clone(),
            modules: modules.to_vec(),
        };
        let answer = timeout(wait, async {
            self.send(&frame).await.ok()?;
            while let Some(frame) = rx.recv().await {
                if let RunnerFrame::Preloaded { errors, .. } = frame {
                    return Some(errors);
                }
            }
            None
        })
        .await;
        drop(turn);
        match answer {
            Ok(Some(errors)) => Ok(errors),
            Ok(None) => Err(KernelError::KernelDead {
                exit: self
                    .exit_info()
                    .map_or("closed its protocol pipe".into(), |e| e.to_string()),
                stderr: self.stderr_tail().await,
            }),
            Err(_) => Err(KernelError::StartTimeout {
                timeout_ms: wait.as_millis() as u64,
                interpreter: self.interpreter().to_string(),
                stderr: self.stderr_tail().await,
            }),
        }
    }

    /// Sends a ping and waits for its pong.
    pub async fn ping(&self, wait: Duration) -> bool {
        let id = self.request_id('p');
        let (mut rx, _route) = open_route(&self.routes, &id);
        if !matches!(
            timeout(wait, self.send(&HostFrame::Ping { id: id.clone() })).await,
            Ok(Ok(()))
        ) {
            return false;
        }
        matches!(
            timeout(wait, rx.recv()).await,
            Ok(Some(RunnerFrame::Pong { .. }))
        )
    }

    /// Runs a bridge call on the host and replies; `done` is told when the reply is sent.
    fn answer_call(
        &self,
        origin: CallOrigin,
        call_id: String,
        name: String,
        args: Value,
        done: Option<mpsc::UnboundedSender<()>>,
    ) {
        let bridge = self.bridge.clone();
        let artifacts_dir = self.artifacts_dir.clone();
        let kv_home = self.kv_home.lock().unwrap().clone();
        self.spawn_reply(
            async move {
                if name == KV_CALL {
                    let answer = match kv_home {
                        Some(home) => tokio::task::spawn_blocking(move || kv_call(&home, &args))
                            .await
                            .unwrap_or_else(|e| Err(e.to_string())),
                        None => Err("the kv store needs artifactsDir and sessionId on the kernel (none was given, so there is no store)".into()),
                    };
                    return HostFrame::Reply {
                        call_id,
                        ok: answer.is_ok(),
                        error: answer.as_ref().err().cloned(),
                        value: answer.ok(),
                    };
                }
                // `read('artifact://<id>')` of an output kept in this kernel's
                // artifactsDir is answered here; any other read, or an artifact that is
                // not there, goes to the host.
                let local = match (
                    crate::output::artifact_read_call(&name, &args),
                    artifacts_dir,
                ) {
                    (Some(uri), Some(dir)) => tokio::task::spawn_blocking(move || {
                        crate::output::read_artifact(&dir, &uri)
                    })
                    .await
                    .ok(),
                    _ => None,
                };
                let answer = match (local, bridge) {
                    (Some(Ok(text)), _) => Ok(Value::String(text)),
                    (Some(Err(KernelError::ArtifactNotFound { .. })) | None, Some(bridge)) => {
                        bridge.call(name, args, origin).await
                    }
                    (Some(Err(err)), _) => Err(err.to_string()),
                    (None, None) => Err("no host bridge is attached to this kernel".to_string()),
                };
                match answer {
                    Ok(value) => HostFrame::Reply {
                        call_id,
                        ok: true,
                        value: Some(value),
                        error: None,
                    },
                    Err(error) => HostFrame::Reply {
                        call_id,
                        ok: false,
                        value: None,
                        error: Some(error),
                    },
                }
            },
            done,
        );
    }

    fn refuse_call(&self, call_id: String, name: &str) {
        let reply = HostFrame::Reply {
            call_id,
            ok: false,
            value: None,
            error: Some(format!(
                "bridge call '{name}' aborted: eval cell was interrupted"
            )),
        };
        self.spawn_reply(async move { reply }, None);
    }

    /// Replies are written from their own task so a slow call never holds up the cell's
    /// frames, and many calls can be in flight at once.
    fn spawn_reply(
        &self,
        reply: impl std::future::Future<Output = HostFrame> + Send + 'static,
        done: Option<mpsc::UnboundedSender<()>>,
    ) {
        let writer = self.writer.clone();
        tokio::spawn(async move {
            let frame = reply.await;
            // Before the write: see `call_done_rx` in `execute_holding`.
            if let Some(done) = done {
                let _ = done.send(());
            }
            // The kernel may have died meanwhile; its death is reported by the execute.
            let _ = writer.send(&frame).await;
        });
    }

    async fn send(&self, frame: &HostFrame) -> std::io::Result<()> {
        self.writer.send(frame).await
    }

    /// Signals the kernel's group, never after the kernel was reaped (its pid may be
    /// someone else's by then). In a sandbox nothing of the kernel outlives it; without
    /// one, children that stayed in the group are signalled while the kernel lives.
    fn kill_group(&self, signal: Signal) {
        match &self.far {
            Some(far) => {
                let _ = far.signals.send(signal);
            }
            None => {
                self.process.signal_group(signal);
            }
        }
    }

    /// The exit, waiting up to `wait` for it.
    pub(crate) async fn wait_for_exit(&self, wait: Duration) -> Option<ExitInfo> {
        let mut exit = self.exit.clone();
        let _ = timeout(wait, exit.wait_for(|e| e.is_some())).await;
        self.exit_info()
    }

    /// The runner's own stderr, after giving the drain a moment to catch up with a process
    /// that just ended.
    async fn stderr_tail(&self) -> StderrTail {
        if !self.alive() {
            let mut closed = self.stderr_closed.clone();
            let _ = timeout(Duration::from_millis(500), closed.wait_for(|c| *c)).await;
        }
        let tail = self.stderr_tail.lock().unwrap();
        let (a, b) = tail.as_slices();
        let mut bytes = a.to_vec();
        bytes.extend_from_slice(b);
        StderrTail(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // Nobody can reach this kernel any more; never leave it running.
        if self.alive() {
            self.kill_group(Signal::SIGKILL);
        }
    }
}

/// `<PREFIX>PYTHON_IPC_TRACE=1` in the host's environment: every frame goes to stderr.
fn ipc_trace(base_env: &HashMap<String, String>, config: &KernelConfig) -> bool {
    base_env
        .get(&format!("{}PYTHON_IPC_TRACE", config.env_prefix))
        .is_some_and(|v| v == "1")
}

/// Host directories a kernel needs where they are, whatever its view covers: its
/// interpreter's installation (a venv made under /tmp) and its `PYTHONPATH`.
fn kept_for_kernel(resolved: &Resolved, env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let mut keep: Vec<PathBuf> = resolved.venv.iter().cloned().collect();
    // <prefix>/bin/python: the prefix holds its standard library.
    keep.extend(
        resolved
            .path
            .parent()
            .and_then(|bin| bin.parent())
            .map(PathBuf::from),
    );
    if let Some(path) = env.get("PYTHONPATH") {
        keep.extend(std::env::split_paths(path).filter(|p| p.is_absolute()));
    }
    keep.retain(|p| p.is_absolute() && p != std::path::Path::new("/"));
    keep
}

/// Refuses a variable no process can be given.
fn check_variables(env: &BTreeMap<String, String>, config: &KernelConfig) -> Result<()> {
    let bad = |k: &String, v: &String| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0');
    let found = env.iter().chain(&config.env).find(|(k, v)| bad(k, v));
    match found {
        Some((key, _)) => Err(KernelError::InvalidArgument {
            name: if config.env.contains_key(key) { "env" } else { "baseEnv" },
            reason: format!(
                "variable '{}' cannot be given to a process: a name must be non-empty, without '=' or NUL; a value without NUL",
                key.replace('\0', "\\0")
            ),
        }),
        None => Ok(()),
    }
}

/// The pipes of a started kernel process, as tokio's.
struct Pipes {
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    stderr: tokio::process::ChildStderr,
}

/// A spawned process's pipes, before they are handed to tokio.
struct StdPipes(
    Option<std::process::ChildStdin>,
    Option<std::process::ChildStdout>,
    Option<std::process::ChildStderr>,
);

impl Pipes {
    fn take(child: &mut std::process::Child) -> StdPipes {
        StdPipes(child.stdin.take(), child.stdout.take(), child.stderr.take())
    }
}

impl StdPipes {
    /// Kills the process when a pipe cannot be used: nobody could talk to it.
    fn open(self, process: &KernelProcess) -> Result<Pipes> {
        let StdPipes(stdin, stdout, stderr) = self;
        let pipes = (|| {
            Ok::<_, std::io::Error>(Pipes {
                stdin: stdin.map(ChildStdin::from_std).transpose()?,
                stdout: ChildStdout::from_std(stdout.expect("stdout is piped"))?,
                stderr: tokio::process::ChildStderr::from_std(stderr.expect("stderr is piped"))?,
            })
        })();
        pipes.map_err(|e| {
            process.signal_group(Signal::SIGKILL);
            KernelError::io("connecting to the kernel's pipes", e)
        })
    }
}

/// What [`Kernel::assemble`] is made of.
struct Parts {
    process: Arc<KernelProcess>,
    exit: watch::Receiver<Option<ExitInfo>>,
    pipes: Pipes,
    trace: bool,
    isolation: Isolation,
    /// Removed once the kernel is reaped.
    private_tmp: Option<PrivateTmp>,
    /// What of the host the kernel's view shows.
    reach: Reach,
    resolved: Resolved,
    prelude: PathBuf,
    process_limit_hit: Arc<AtomicBool>,
    /// The launcher, for a kernel started through one.
    far: Option<Launcher>,
    start_mode: StartMode,
    /// Modules the process started with imported (a zygote's `preload`, less failures).
    preloaded: Vec<String>,
}

/// How a kernel's process came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMode {
    /// A fresh interpreter, spawned by the host.
    Spawn,
    /// Forked from a zygote that had imported the kernel's `preload` (`zygote.rs`).
    Zygote,
    /// Started through a launcher (`launcher.rs`).
    Launcher,
}

impl StartMode {
    pub fn as_str(self) -> &'static str {
        match self {
            StartMode::Spawn => "spawn",
            StartMode::Zygote => "zygote",
            StartMode::Launcher => "launcher",
        }
    }
}

/// A kernel started through a launcher: signals travel in band, to the far side's
/// supervisor.
struct FarSide {
    launcher: Launcher,
    /// See [`KernelConfig::link_timeout`].
    link_timeout: Duration,
    signals: mpsc::UnboundedSender<Signal>,
    /// The far side's `sys.executable` and version, from its `ready`.
    ready: std::sync::OnceLock<(String, String)>,
    /// The runner was sent (see [`Kernel::ship_runner`]).
    shipped: AtomicBool,
}

/// Writes each signal asked for as a `signal` frame. SIGKILL ends the kernel whatever the
/// far side does: after a moment for the frame to act, the link is cut (stdin closed, the
/// launcher killed), and the supervisor there kills what is left when its stdin closes.
async fn signal_far_side(
    mut signals: mpsc::UnboundedReceiver<Signal>,
    writer: Arc<FrameWriter>,
    process: Arc<KernelProcess>,
    mut exit: watch::Receiver<Option<ExitInfo>>,
) {
    while let Some(signal) = signals.recv().await {
        if exit.borrow().is_some() {
            continue;
        }
        let frame = HostFrame::Signal {
            signal: signal.as_str(),
        };
        let _ = timeout(FRAME_WRITE_WAIT, writer.send(&frame)).await;
        if signal == Signal::SIGKILL {
            let _ = timeout(LINK_CUT_WAIT, exit.wait_for(|e| e.is_some())).await;
            let _ = timeout(FRAME_WRITE_WAIT, writer.close()).await;
            process.signal_group(Signal::SIGKILL);
        }
    }
}

/// How long the far side gets to act on an in-band SIGKILL before its launcher is killed.
const LINK_CUT_WAIT: Duration = Duration::from_millis(1_000);

/// Heartbeats a launched kernel's link, and cuts it when nothing came back for
/// `link_timeout`: a frozen launcher or a dead network would otherwise leave every call
/// waiting. Time the host itself spends not reading (a slow consumer holding the reader
/// back) does not count against the link.
async fn watch_link(
    writer: Arc<FrameWriter>,
    report: Arc<StreamReport>,
    process: Arc<KernelProcess>,
    mut exit: watch::Receiver<Option<ExitInfo>>,
    link_timeout: Duration,
) {
    let every = (link_timeout / 4).max(Duration::from_millis(10));
    loop {
        tokio::select! {
            _ = exit.wait_for(|e| e.is_some()) => return,
            _ = tokio::time::sleep(every) => {}
        }
        let _ = timeout(FRAME_WRITE_WAIT, writer.send(&HostFrame::Heartbeat)).await;
        let silent = report
            .link
            .as_ref()
            .map_or(Duration::ZERO, LinkClock::silent_for);
        if silent > link_timeout {
            tracing::warn!(pid = process.pid(), "the link to a launched kernel is lost");
            report.link_lost.store(true, Ordering::SeqCst);
            let _ = timeout(FRAME_WRITE_WAIT, writer.close()).await;
            process.signal_group(Signal::SIGKILL);
            return;
        }
    }
}

/// Marks a request as the one in flight while it is alive.
struct RunningGuard<'a>(&'a Mutex<Option<String>>);

impl<'a> RunningGuard<'a> {
    fn set(slot: &'a Mutex<Option<String>>, id: &str) -> Self {
        *slot.lock().unwrap() = Some(id.to_string());
        RunningGuard(slot)
    }
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = None;
    }
}

struct RouteGuard<'a> {
    routes: &'a Routes,
    id: &'a str,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        self.routes.lock().unwrap().routes.remove(self.id);
    }
}

/// How long a control frame (interrupt, exit) may wait for a pipe the kernel does not read
/// before the host goes on with signals.
const FRAME_WRITE_WAIT: Duration = Duration::from_millis(200);

/// Room for a quarter megabyte in the runner's output pipe (Linux; 64 KiB otherwise): a
/// big frame then crosses in a few writes, each waking this side once, not hundreds.
fn widen_pipe(stdout: &ChildStdout) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsFd;
        let _ = nix::fcntl::fcntl(
            stdout.as_fd(),
            nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_BYTES),
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = stdout;
}

const PIPE_BYTES: i32 = 256 * 1024;

/// What the frame reader learnt about the runner's protocol stream.
#[derive(Default)]
struct StreamReport {
    /// A launched kernel's link; `None` for a local kernel, whose reader keeps no clock.
    link: Option<LinkClock>,
    /// Lines that reached no request: frames for an unknown or finished request id (a
    /// forgery, or output of a thread that outlived its cell) or for none, and lines that
    /// are not frames.
    dropped_frames: AtomicU64,
    /// Set when the kernel sent a line over [`MAX_FRAME_BYTES`] and was killed for it.
    oversized_frame: AtomicBool,
    /// A launched kernel's end, as the far side's supervisor reported it.
    far_exit: Mutex<Option<ExitInfo>>,
    /// Set when the link watch gave a launched kernel's link up.
    link_lost: AtomicBool,
}

/// When a launched kernel's link last carried a line, for the link watch.
struct LinkClock {
    since: Instant,
    /// Milliseconds after `since` of the last line (or of [`LinkClock::heard`]).
    last_line_ms: AtomicU64,
    /// The reader is waiting for a request to take a frame: the host, not the link, is slow.
    delivering: AtomicBool,
}

impl LinkClock {
    fn new() -> Self {
        Self {
            since: Instant::now(),
            last_line_ms: AtomicU64::new(0),
            delivering: AtomicBool::new(false),
        }
    }

    fn heard(&self) {
        let now = self.since.elapsed().as_millis() as u64;
        self.last_line_ms.store(now, Ordering::Relaxed);
    }

    /// How long the link has said nothing while the host was ready to listen.
    fn silent_for(&self) -> Duration {
        if self.delivering.load(Ordering::SeqCst) {
            return Duration::ZERO;
        }
        let last = Duration::from_millis(self.last_line_ms.load(Ordering::Relaxed));
        self.since.elapsed().saturating_sub(last)
    }
}

/// Reads protocol lines and hands each frame to the request it belongs to; the rest are
/// dropped and counted. A line over [`MAX_FRAME_BYTES`] ends the kernel: reading on would
/// mean holding it, or guessing where the next frame starts in a stream that something in
/// the kernel is flooding. Ends at EOF, which closes every route: that is how a waiting
/// request learns the kernel is gone.
async fn read_frames(
    stdout: ChildStdout,
    routes: Routes,
    report: Arc<StreamReport>,
    process: Arc<KernelProcess>,
    trace: bool,
) {
    let reader = BufReader::with_capacity(PIPE_BYTES as usize, stdout);
    let mut frames = FrameReader::new(reader, MAX_FRAME_BYTES);
    loop {
        let text = match frames.next_line().await {
            Next::Line(text) => text,
            Next::End => break,
            Next::TooLong => {
                tracing::warn!(
                    pid = process.pid(),
                    "the kernel sent a protocol frame over {} MiB; killing it",
                    MAX_FRAME_BYTES >> 20
                );
                // Set before the routes close, so the request sees why it ended.
                report.oversized_frame.store(true, Ordering::SeqCst);
                process.signal_group(Signal::SIGKILL);
                break;
            }
        };
        if trace {
            eprintln!("[pykernel] <- {}", String::from_utf8_lossy(text));
        }
        if let Some(link) = &report.link {
            link.heard();
        }
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let delivered = match (decode_line(text), &report.link) {
            // The supervisor's frames; from a local kernel they are forgeries, dropped.
            (Ok(RunnerFrame::Heartbeat), Some(_)) => true,
            (Ok(RunnerFrame::KernelExit { code, signal }), Some(_)) => {
                // The last one counts: the supervisor's comes after all the kernel sent.
                *report.far_exit.lock().unwrap() = Some(ExitInfo { code, signal });
                true
            }
            (Ok(frame), Some(link)) => {
                link.delivering.store(true, Ordering::SeqCst);
                let delivered = deliver(&routes, frame).await;
                link.delivering.store(false, Ordering::SeqCst);
                delivered
            }
            (Ok(frame), None) => deliver(&routes, frame).await,
            (Err(err), _) => {
                tracing::warn!("{err}");
                if trace {
                    eprintln!("[pykernel] {err}");
                }
                false
            }
        };
        if !delivered {
            report.dropped_frames.fetch_add(1, Ordering::Relaxed);
        }
    }
    let mut router = routes.lock().unwrap();
    router.closed = true;
    router.routes.clear();
}

/// Hands `frame` to its request; false when no live request has its id.
async fn deliver(routes: &Routes, frame: RunnerFrame) -> bool {
    let Some(id) = frame.request_id() else {
        return false;
    };
    let route = routes.lock().unwrap().routes.get(id).cloned();
    match route {
        // Waits while the request is behind (its events are slow to deliver): the
        // runner then blocks on its pipe, and nothing piles up in between.
        Some(route) => route.send(frame).await.is_ok(),
        None => false,
    }
}

async fn drain_stderr(
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<u8>>>,
    closed: watch::Sender<bool>,
    trace: bool,
) {
    let mut buf = vec![0u8; 8192];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if trace {
                    eprint!("{}", String::from_utf8_lossy(&buf[..n]));
                }
                let mut tail = tail.lock().unwrap();
                tail.extend(&buf[..n]);
                let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
                tail.drain(..excess);
            }
        }
    }
    let _ = closed.send(true);
}
