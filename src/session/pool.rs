//! Sessions: which kernel a request runs on, and the life of those kernels (README.md#kernelpool-sessions-behind-an-eval-tool).
//!
//! `session` mode keeps one kernel per key (session id | session file | cwd, plus the real
//! cwd, the interpreter and the launcher the request named). A session that names no
//! launcher runs on the pool's default (`kernel.launcher`, or here), or where the pool
//! places it when its first kernel starts (see `placement.rs`), for the rest of its life.
//! Calls on one session take turns in call order ([`Fifo`]); calls on different sessions
//! run at once. Idle sessions are evicted, and a heartbeat replaces kernels that died or
//! stopped answering while idle. A kernel that dies under a cell is replaced for the next
//! call, and that cell is not run again (it may have had effects); a request whose first
//! cell never reached a dead kernel runs in a fresh one. The result always says when state
//! was lost.
//! `per-call` mode starts a kernel per request and shuts it down after.
//!
//! The pool's cap (`maxSessions`, or `maxConcurrent` per call) counts kernel processes,
//! spares included: each holds a [`Slot`] until it is gone. A kernel that needs room and
//! finds none ends a spare, else the least recently used idle session, else waits for a
//! session to go idle, up to `acquire_timeout`. Room is only sought once the interpreter
//! resolved, so a request that cannot start ends nobody's kernel; a session that never
//! had a kernel is forgotten when its call ends.
//!
//! The kernel of a session is only changed by whoever holds the session's turn (a call,
//! or the heartbeat when the session is idle) or by disposal and eviction, which take it
//! away (eviction only from a session nobody is in line for) and shut it down.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use crate::error::{KernelError, Result};
use crate::eval::executor::{Cell, EvalOptions, EvalResult, Evaluation};
use crate::kernel::fifo::{Fifo, Place, Turn};
use crate::kernel::{
    AbortHandle, Caller, Kernel, KernelConfig, DEFAULT_SHUTDOWN_GRACE, PRELOAD_WAIT,
};
use crate::session::placement::{Load, Loads, Placement, Placer, SessionRef};
use crate::session::slots::{Slot, Slots};
use crate::start::launcher::Launcher;
use crate::start::python::Resolved;
use crate::wire::events::KernelEvent;

pub const DEFAULT_TIMEOUT_SECONDS: f64 = 30.0;
pub const MAX_TIMEOUT_SECONDS: f64 = 3600.0;
/// How many evicted sessions are remembered, to tell each one's next call.
const EVICTIONS_REMEMBERED: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    Session,
    PerCall,
}

#[derive(Clone)]
pub struct PoolConfig {
    pub mode: PoolMode,
    /// The most kernels `session` mode runs at once, spares included.
    pub max_sessions: usize,
    /// The most kernels `per-call` mode runs at once, spares included.
    pub max_concurrent: usize,
    /// How long a call waits for room when the pool is at its cap before it fails.
    pub acquire_timeout: Duration,
    pub idle_timeout: Duration,
    /// Zero turns the heartbeat off.
    pub heartbeat_interval: Duration,
    pub heartbeat_timeout: Duration,
    /// Each shutdown step (exit, SIGTERM, SIGKILL) waits this long.
    pub shutdown_grace: Duration,
    /// Defaults for every kernel; a request's cwd and interpreter override them.
    pub kernel: KernelConfig,
    pub artifacts_dir: Option<PathBuf>,
    /// Spawned spare kernels kept ready, so a new session's first cell does not wait for
    /// Python to start. They only take free room: never more than the cap, and none while
    /// a call waits for room. They start on the pool's default launcher (`kernel.launcher`,
    /// or here) and serve only kernels meant to run there.
    pub prewarm: usize,
    /// Modules every spare imports once it is ready, so a session that claims it finds
    /// them in `sys.modules` (see [`Kernel::preload`]).
    pub preload: Vec<String>,
    /// Where sessions that name no launcher run, when not on `kernel.launcher`.
    pub placement: Option<Placement>,
    /// Whether the words after a launcher a request, `launchers` or `launcherFor` names are
    /// quoted for a shell on the far side (`launcherShell`); by default when it is ssh.
    pub launcher_shell: Option<bool>,
    /// The cwd of a launched kernel whose request names none: `kernel.cwd` as given (a
    /// directory of the far side), empty for the far side's own start directory.
    pub far_cwd: PathBuf,
}

impl PoolConfig {
    pub fn new(kernel: KernelConfig) -> Self {
        Self {
            mode: PoolMode::Session,
            max_sessions: 4,
            max_concurrent: 4,
            acquire_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(300),
            heartbeat_interval: Duration::from_secs(5),
            heartbeat_timeout: Duration::from_secs(2),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            artifacts_dir: None,
            prewarm: 1,
            preload: Vec::new(),
            placement: None,
            launcher_shell: None,
            far_cwd: match kernel.launcher {
                Some(_) => kernel.cwd.clone(),
                None => PathBuf::new(),
            },
            kernel,
        }
    }

    /// The most kernels this pool runs at once, and the option that sets it.
    pub fn cap(&self) -> (usize, &'static str) {
        match self.mode {
            PoolMode::Session => (self.max_sessions, "maxSessions"),
            PoolMode::PerCall => (self.max_concurrent, "maxConcurrent"),
        }
    }

    /// Refuses (`ERR_ARTIFACTS_DIR`) an artifactsDir that is not safe to use, at
    /// construction, so the first call does not find out; missing ones are created 0700.
    /// Each kernel checks again as it starts, and each write as it happens.
    /// The settings every kernel of the pool starts with, spares included: the pool's
    /// `artifactsDir` is the kernel's unless `kernel` names its own (a spare without it
    /// could not read back `artifact://` output in the session that claims it).
    pub fn session_kernel(&self) -> KernelConfig {
        let mut config = self.kernel.clone();
        if config.artifacts_dir.is_none() {
            config.artifacts_dir = self.artifacts_dir.clone();
        }
        if config.preload.is_empty() {
            // Every kernel of the pool is then forked from a zygote that imported them.
            config.preload = self.preload.clone();
        }
        config
    }

    /// The settings of a kernel run through `launcher` (`None`: here) for a request that
    /// names `cwd` and `interpreter` (else the pool's). A launched kernel's cwd is the far
    /// side's, taken as given; a local one is made absolute against the host's.
    fn kernel_for(
        &self,
        cwd: Option<&Path>,
        interpreter: Option<&String>,
        launcher: Option<Launcher>,
    ) -> KernelConfig {
        let mut config = self.session_kernel();
        config.cwd = match (&launcher, cwd) {
            (Some(_), Some(cwd)) => cwd.to_path_buf(),
            (Some(_), None) => self.far_cwd.clone(),
            (None, Some(cwd)) => std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf()),
            // Local only when the pool's default is: `kernel.cwd` is then a local one.
            (None, None) => config.cwd,
        };
        if interpreter.is_some() {
            config.interpreter = interpreter.cloned();
        }
        config.launcher = launcher;
        config
    }

    pub fn prepare_artifacts_dirs(&self) -> Result<()> {
        for dir in [&self.artifacts_dir, &self.kernel.artifacts_dir]
            .into_iter()
            .flatten()
        {
            crate::store::safe_fs::ensure_private_dir("artifactsDir", dir)?;
        }
        Ok(())
    }
}

#[derive(Default)]
pub struct PoolRequest {
    pub cells: Vec<Cell>,
    pub session_id: Option<String>,
    pub session_file: Option<String>,
    /// As the caller gave it: made absolute against the host's cwd for a local kernel,
    /// the far side's for a launched one.
    pub cwd: Option<PathBuf>,
    pub interpreter: Option<String>,
    /// Run the session's kernel through this argv prefix, not where the pool would.
    pub launcher: Option<Vec<String>>,
    pub owner_id: Option<String>,
    /// `None` is the default (30 s); 0 is no timeout.
    pub timeout_seconds: Option<f64>,
    /// The same in milliseconds, for budgets under a second; not with `timeout_seconds`.
    pub timeout_ms: Option<f64>,
    pub reset: bool,
    pub abort: Option<Arc<AbortHandle>>,
    /// The name of the full output's artifact (checked); a fresh one by default.
    pub artifact_id: Option<String>,
    /// Overrides the kernel options' `include_figure_text`.
    pub include_figure_text: Option<bool>,
    /// Receives the sanitized agent text as it is built.
    pub on_output: Option<Box<dyn FnMut(String) + Send>>,
    /// Variables for this request's cells only (`None` unsets).
    pub env: Option<BTreeMap<String, Option<String>>>,
    /// Where this request's full output goes when cut, instead of the pool's.
    pub artifacts_dir: Option<PathBuf>,
    /// One budget, from admission, for waiting, starting a kernel and all the cells.
    pub deadline: Option<Duration>,
    /// Notices decided while reading the request (a clamped per-cell timeout).
    pub notices: Vec<String>,
}

/// What identifies a session's kernel.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    /// `session:<id>`, `file:<path>` or `cwd:<path>`.
    pub identity: String,
    /// The real cwd of a local kernel; for a launched or not yet placed one, as given.
    pub cwd: PathBuf,
    /// The requested interpreter's real path (as given for a launched or not yet placed
    /// kernel); empty for discovery.
    pub interpreter: String,
    /// The launcher the request named, else `kernel.launcher` when the pool places no
    /// session; `None` for a local kernel or one the pool places.
    pub launcher: Option<Launcher>,
}

impl std::fmt::Display for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} @ {}", self.identity, self.cwd.display())?;
        if !self.interpreter.is_empty() {
            write!(f, " [{}]", self.interpreter)?;
        }
        if let Some(launcher) = &self.launcher {
            write!(f, " via {}", launcher.describe())?;
        }
        Ok(())
    }
}

/// A session as `sessions` reports it.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub key: String,
    pub pid: Option<u32>,
    pub owners: Vec<String>,
    pub busy: bool,
    pub last_used: SystemTime,
    pub execution_count: u32,
    /// Where its kernels run: the launcher's argv; `None` here, or not placed yet.
    pub launcher: Option<Vec<String>>,
}

/// A kernel process of the pool and the room it takes. Given back through
/// [`PoolInner::end`], which frees the room only once the process is gone.
struct LiveKernel {
    kernel: Arc<Kernel>,
    slot: Slot,
    /// Counts it on its launcher (least-loaded placement) until it is gone.
    _load: Option<Load>,
}

/// The settings a session's kernels start with (a per-call request's too): known when it
/// is admitted, or once the pool has placed it, as its first kernel starts.
#[derive(Clone)]
enum Site {
    Placed(Box<KernelConfig>),
    Unplaced(Unplaced),
}

impl Site {
    /// The site of a session: its kernels know their session (the kv store, bridge calls).
    fn for_session(self, session_id: String) -> Site {
        match self {
            Site::Placed(mut config) => {
                config.session_id = Some(session_id);
                Site::Placed(config)
            }
            Site::Unplaced(mut unplaced) => {
                unplaced.session_id = Some(session_id);
                Site::Unplaced(unplaced)
            }
        }
    }
}

/// A request the pool has yet to place: what it asked for, and who it is.
#[derive(Clone)]
struct Unplaced {
    /// As the request gave it: whether it is a local path depends on the placement.
    cwd: Option<PathBuf>,
    /// The request's, else the pool's.
    interpreter: Option<String>,
    session_id: Option<String>,
    who: SessionRef,
}

struct Session {
    key: SessionKey,
    site: Mutex<Site>,
    turns: Arc<Fifo>,
    kernel: Mutex<Option<LiveKernel>>,
    /// Set once a kernel was started for it: a session that never had one holds no state.
    had_kernel: AtomicBool,
    owners: Mutex<BTreeSet<String>>,
    last_used: Mutex<(Instant, SystemTime)>,
    disposed: AtomicBool,
    resets: Mutex<Resets>,
    /// The cell running now, so disposal can stop it.
    running: Mutex<Option<Arc<AbortHandle>>>,
    /// Told to the next call: the kernel was lost while idle.
    lost_while_idle: Mutex<Option<String>>,
}

/// Resets asked for while an earlier one is pending or its call still runs are done once
/// (they coalesce).
#[derive(Default)]
struct Resets {
    requested: u64,
    performed: u64,
    /// A reset whose call has not finished; resets asked for meanwhile share it.
    pending: Option<u64>,
}

impl Session {
    fn touch(&self) {
        *self.last_used.lock().unwrap() = (Instant::now(), SystemTime::now());
    }

    fn current_kernel(&self) -> Option<Arc<Kernel>> {
        self.kernel
            .lock()
            .unwrap()
            .as_ref()
            .map(|k| k.kernel.clone())
    }

    fn take_kernel(&self) -> Option<LiveKernel> {
        self.kernel.lock().unwrap().take()
    }

    fn info(&self) -> SessionInfo {
        let kernel = self.current_kernel();
        SessionInfo {
            key: self.key.to_string(),
            pid: kernel.as_ref().filter(|k| k.alive()).map(|k| k.pid()),
            owners: self.owners.lock().unwrap().iter().cloned().collect(),
            busy: self.turns.busy(),
            last_used: self.last_used.lock().unwrap().1,
            execution_count: kernel.map_or(0, |k| k.execution_count()),
            launcher: match &*self.site.lock().unwrap() {
                Site::Placed(config) => config.launcher.as_ref().map(|l| l.argv.clone()),
                Site::Unplaced(_) => None,
            },
        }
    }
}

pub struct Pool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    config: PoolConfig,
    sessions: Mutex<HashMap<SessionKey, Arc<Session>>>,
    disposing: AtomicBool,
    /// `dispose_all` calls that began and have not ended: `reopen` waits for none of them.
    disposals: AtomicU64,
    /// Counts `reopen`s: a maintenance task of an earlier opening ends when it changes.
    opening: AtomicU64,
    /// Kernels whose shutdown was not confirmed, retried on every maintenance tick. They
    /// keep their room: their processes may still run.
    unconfirmed: Mutex<Vec<LiveKernel>>,
    /// Admission runs on the caller's thread, outside the runtime; work it starts goes here.
    runtime: tokio::runtime::Handle,
    /// Spare kernels initialized with the pool's default configuration.
    spares: Mutex<Spares>,
    /// The cap: one slot per kernel process.
    slots: Arc<Slots>,
    /// Sessions evicted lately and why, told to each one's next call (oldest first).
    evictions: Mutex<VecDeque<(SessionKey, String)>>,
    /// Where sessions that name no launcher run.
    placer: Placer,
}

#[derive(Default)]
struct Spares {
    ready: Vec<LiveKernel>,
    spawning: usize,
}

/// Where a new kernel will run.
enum Room {
    /// A spare that fits, with its slot.
    Spare(LiveKernel),
    /// Room to start one.
    Slot(Slot),
    /// Nothing yet: wait for room.
    Wait,
    /// The call was aborted while it waited.
    Aborted,
}

/// A request admitted at call time: its session and place in line are fixed.
pub struct Admission {
    pool: Arc<PoolInner>,
    target: Target,
    request: PoolRequest,
    annotations: Vec<String>,
    timeout: Option<Duration>,
    caller: Caller,
    deadline: Option<tokio::time::Instant>,
}

enum Target {
    Session {
        session: Arc<Session>,
        place: Place,
        reset_epoch: Option<u64>,
    },
    PerCall(Site),
}

impl Pool {
    /// Must be called inside a tokio runtime: it starts the maintenance task.
    pub fn new(config: PoolConfig) -> Pool {
        let placer = Placer::new(
            config.placement.clone(),
            config.kernel.launcher.clone(),
            config.launcher_shell,
        );
        let inner = Arc::new(PoolInner {
            slots: Slots::new(config.cap().0),
            placer,
            config,
            sessions: Mutex::default(),
            disposing: AtomicBool::new(false),
            disposals: AtomicU64::new(0),
            opening: AtomicU64::new(0),
            unconfirmed: Mutex::default(),
            runtime: tokio::runtime::Handle::current(),
            spares: Mutex::default(),
            evictions: Mutex::default(),
        });
        tokio::spawn(maintain(Arc::downgrade(&inner), 0));
        inner.refill_spares();
        Pool { inner }
    }

    /// Takes work again after [`Pool::dispose_all`]: new sessions get fresh kernels, and
    /// maintenance and spares start over. A pool that was not disposed is left as it is;
    /// one whose disposal has not finished is refused ([`KernelError::DisposeInProgress`]),
    /// as that disposal would end what the reopening starts.
    pub fn reopen(&self) -> Result<()> {
        let inner = &self.inner;
        if inner.disposals.load(Ordering::SeqCst) > 0 {
            return Err(KernelError::DisposeInProgress);
        }
        if !inner.disposing.swap(false, Ordering::SeqCst) {
            return Ok(());
        }
        let opening = inner.opening.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::info!("reopening the pool");
        inner
            .runtime
            .spawn(maintain(Arc::downgrade(inner), opening));
        inner.refill_spares();
        Ok(())
    }

    /// Fixes the request's session and its place in that session's line, now.
    pub fn admit(&self, mut request: PoolRequest) -> Result<Admission> {
        let inner = &self.inner;
        if inner.disposing.load(Ordering::SeqCst) {
            return Err(KernelError::PoolDisposed);
        }
        let deadline = request.deadline.map(|d| tokio::time::Instant::now() + d);
        let (timeout, clamp_notice) = match (request.timeout_seconds, request.timeout_ms) {
            (Some(_), Some(_)) => {
                return Err(KernelError::InvalidArgument {
                    name: "timeoutMs",
                    reason: "give `timeoutSeconds` or `timeoutMs`, not both".into(),
                })
            }
            (None, Some(ms)) => clamp_timeout_ms(ms)?,
            (seconds, None) => clamp_timeout(seconds)?,
        };
        if let Some(dir) = &request.artifacts_dir {
            crate::store::safe_fs::ensure_private_dir("artifactsDir", dir)?;
        }
        // A first cell's reset is the request's: it shares the coalescing of resets.
        request.reset |= request.cells.first().is_some_and(|cell| cell.reset);
        let site = inner.site_of(&request)?;
        let mut caller = Caller {
            session_id: request.session_id.clone(),
            owner: request
                .owner_id
                .clone()
                .or_else(|| request.session_id.clone()),
        };
        let target = match inner.config.mode {
            PoolMode::PerCall => {
                // Refused now, as in session mode, not after the call waited for room.
                if let Site::Placed(config) = &site {
                    if config.launcher.is_none() {
                        checked_cwd(&config.cwd)?;
                    }
                }
                Target::PerCall(site)
            }
            PoolMode::Session => {
                let key = session_key(&request, &site)?;
                let session_id = request
                    .session_id
                    .clone()
                    .unwrap_or_else(|| key.identity.clone());
                let owner = request
                    .owner_id
                    .clone()
                    .or_else(|| request.session_id.clone())
                    .unwrap_or_else(|| key.identity.clone());
                caller = Caller {
                    session_id: Some(session_id.clone()),
                    owner: Some(owner.clone()),
                };
                let site = site.for_session(session_id);
                let (session, place) = inner.session_for(key, site, owner);
                let reset_epoch = request.reset.then(|| {
                    let mut resets = session.resets.lock().unwrap();
                    match resets.pending {
                        Some(epoch) => epoch,
                        None => {
                            resets.requested += 1;
                            resets.pending = Some(resets.requested);
                            resets.requested
                        }
                    }
                });
                Target::Session {
                    session,
                    place,
                    reset_epoch,
                }
            }
        };
        let mut annotations: Vec<String> = clamp_notice.into_iter().collect();
        annotations.append(&mut request.notices);
        Ok(Admission {
            pool: inner.clone(),
            target,
            request,
            annotations,
            timeout,
            caller,
            deadline,
        })
    }

    /// Pids of the spawned spare kernels that are ready.
    pub fn spare_pids(&self) -> Vec<u32> {
        let spares = self.inner.spares.lock().unwrap();
        spares
            .ready
            .iter()
            .filter(|k| k.kernel.alive())
            .map(|k| k.kernel.pid())
            .collect()
    }

    /// Disposal's default bound: the three shutdown steps.
    pub fn default_budget(&self) -> Duration {
        self.inner.config.shutdown_grace * 3
    }

    pub fn sessions(&self) -> Vec<SessionInfo> {
        let sessions = self.inner.all_sessions();
        let mut infos: Vec<_> = sessions.iter().map(|s| s.info()).collect();
        infos.sort_by(|a, b| a.key.cmp(&b.key));
        infos
    }

    /// Disposes every session `owner` owned last. Idempotent; bounded by `budget` even
    /// when a cell is stuck.
    pub async fn dispose_owner(&self, owner: &str, budget: Duration) {
        let sessions = self.inner.all_sessions();
        let mut orphaned = Vec::new();
        for session in sessions {
            let mut owners = session.owners.lock().unwrap();
            if owners.remove(owner) && owners.is_empty() {
                orphaned.push(session.clone());
            }
        }
        dispose_all_of(&self.inner, orphaned, budget).await;
    }

    /// Disposes every session and refuses new work; for hosts' signal handlers.
    pub fn dispose_all(&self, budget: Duration) -> impl std::future::Future<Output = ()> + Send {
        // Refusing work, and counting as a disposal in progress, start now, not when the
        // future is first polled: a `reopen()` right after must see it.
        let inner = self.inner.clone();
        inner.disposing.store(true, Ordering::SeqCst);
        let running = DisposalRunning::new(&inner);
        async move {
            let _running = running;
            // Calls waiting for room fail now, not at their deadline.
            inner.slots.notify();
            let sessions = inner.all_sessions();
            dispose_all_of(&inner, sessions, budget).await;
            let spares = std::mem::take(&mut inner.spares.lock().unwrap().ready);
            for spare in spares {
                inner.end_within(spare, budget / 3).await;
            }
            inner.retry_unconfirmed(budget).await;
        }
    }
}

/// A `dispose_all` under way, counted in `PoolInner::disposals` until it ends or is dropped.
struct DisposalRunning(Arc<PoolInner>);

impl DisposalRunning {
    fn new(inner: &Arc<PoolInner>) -> Self {
        inner.disposals.fetch_add(1, Ordering::SeqCst);
        DisposalRunning(inner.clone())
    }
}

impl Drop for DisposalRunning {
    fn drop(&mut self) {
        self.0.disposals.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // The maintenance task holds only a weak reference and ends with the pool; the
        // kernels end with their last reference (their Drop kills them).
        self.inner.disposing.store(true, Ordering::SeqCst);
    }
}

impl PoolInner {
    /// Where a request's kernel runs: through the launcher it names, else on the pool's
    /// default, unless the pool places sessions: then where it decides as the first kernel
    /// starts.
    fn site_of(&self, request: &PoolRequest) -> Result<Site> {
        let named = request
            .launcher
            .clone()
            .map(|argv| Launcher::new(argv, self.config.launcher_shell))
            .transpose()?;
        if named.is_none() && self.placer.places() {
            return Ok(Site::Unplaced(Unplaced {
                cwd: request.cwd.clone(),
                interpreter: request
                    .interpreter
                    .clone()
                    .or_else(|| self.config.kernel.interpreter.clone()),
                session_id: None,
                who: SessionRef {
                    session_id: request.session_id.clone(),
                    session_file: request.session_file.clone(),
                    owner_id: request.owner_id.clone(),
                },
            }));
        }
        let launcher = named.or_else(|| self.config.kernel.launcher.clone());
        Ok(Site::Placed(Box::new(self.config.kernel_for(
            request.cwd.as_deref(),
            request.interpreter.as_ref(),
            launcher,
        ))))
    }

    /// The settings of the next kernel of `site`, placed first if it is not yet (it then
    /// stays where it was placed), and the count a least-loaded choice took for it.
    /// `None`: aborted while the host's `launcherFor` was deciding. Cancel safety:
    /// dropping the future leaves the site unplaced.
    async fn placed(
        &self,
        site: &Mutex<Site>,
        abort: &AbortHandle,
    ) -> Result<Option<(KernelConfig, Option<Load>)>> {
        let unplaced = match &*site.lock().unwrap() {
            Site::Placed(config) => return Ok(Some(((**config).clone(), None))),
            Site::Unplaced(unplaced) => unplaced.clone(),
        };
        let (launcher, load) = tokio::select! {
            placed = self.placer.place(unplaced.who.clone()) => placed?,
            _ = abort.aborted() => return Ok(None),
        };
        let mut config = self.config.kernel_for(
            unplaced.cwd.as_deref(),
            unplaced.interpreter.as_ref(),
            launcher,
        );
        config.session_id = unplaced.session_id;
        if config.launcher.is_none() {
            checked_cwd(&config.cwd)?;
        }
        tracing::info!(
            launcher = config
                .launcher
                .as_ref()
                .map_or("(here)".into(), |l| l.describe()),
            "placed a session"
        );
        *site.lock().unwrap() = Site::Placed(Box::new(config.clone()));
        Ok(Some((config, load)))
    }

    /// A snapshot of the sessions (the lock is not held while they are worked on).
    fn all_sessions(&self) -> Vec<Arc<Session>> {
        self.sessions.lock().unwrap().values().cloned().collect()
    }

    /// The session for `key` and a place in its line, taken under the sessions lock so
    /// that eviction (which only takes sessions nobody is in line for) cannot take it
    /// between the two.
    fn session_for(&self, key: SessionKey, site: Site, owner: String) -> (Arc<Session>, Place) {
        let mut sessions = self.sessions.lock().unwrap();
        if let Some(session) = sessions.get(&key) {
            session.owners.lock().unwrap().insert(owner);
            return (session.clone(), session.turns.join());
        }
        let evicted = {
            let mut evictions = self.evictions.lock().unwrap();
            let found = evictions.iter().position(|(k, _)| *k == key);
            found.and_then(|i| evictions.remove(i)).map(|(_, why)| why)
        };
        let session = Arc::new(Session {
            key: key.clone(),
            site: Mutex::new(site),
            turns: Fifo::new(),
            kernel: Mutex::default(),
            had_kernel: AtomicBool::new(false),
            owners: Mutex::new(BTreeSet::from([owner])),
            last_used: Mutex::new((Instant::now(), SystemTime::now())),
            disposed: AtomicBool::new(false),
            resets: Mutex::default(),
            running: Mutex::default(),
            lost_while_idle: Mutex::new(evicted),
        });
        sessions.insert(key, session.clone());
        let place = session.turns.join();
        (session, place)
    }

    /// Remembers that `key` was evicted, so its next call is told its state is gone.
    fn record_eviction(&self, key: SessionKey, why: String) {
        let mut evictions = self.evictions.lock().unwrap();
        evictions.retain(|(k, _)| *k != key);
        if evictions.len() == EVICTIONS_REMEMBERED {
            evictions.pop_front();
        }
        evictions.push_back((key, why));
    }

    async fn dispose(&self, session: Arc<Session>, budget: Duration) {
        {
            let mut sessions = self.sessions.lock().unwrap();
            if sessions
                .get(&session.key)
                .is_some_and(|s| Arc::ptr_eq(s, &session))
            {
                sessions.remove(&session.key);
            }
        }
        if let Some(live) = stop_session(&session) {
            self.end_within(live, budget / 3).await;
        }
    }

    /// After a call on `session`: forgets the session if it never had a kernel (its start
    /// failed, no room came in time, the call was aborted first) and nobody is in line
    /// for it, so nothing of it is left behind; then lets waiters look for room (it may
    /// be idle now).
    fn after_call(self: &Arc<Self>, session: &Arc<Session>) {
        {
            let mut sessions = self.sessions.lock().unwrap();
            let forget = !session.had_kernel.load(Ordering::SeqCst)
                && !session.turns.busy()
                && sessions
                    .get(&session.key)
                    .is_some_and(|s| Arc::ptr_eq(s, session));
            if forget {
                tracing::info!(key = %session.key, "forgetting a session that never had a kernel");
                sessions.remove(&session.key);
            }
        }
        self.slots.notify();
        self.refill_spares();
    }

    /// Spawns spares until `prewarm` are ready or on their way, in free room only.
    fn refill_spares(self: &Arc<Self>) {
        if self.disposing.load(Ordering::SeqCst) {
            return;
        }
        let slots = {
            let mut spares = self.spares.lock().unwrap();
            spares.ready.retain(|k| k.kernel.alive());
            let have = spares.ready.len() + spares.spawning;
            let slots: Vec<Slot> = (have..self.config.prewarm)
                .map_while(|_| self.slots.try_take_spare())
                .collect();
            spares.spawning += slots.len();
            slots
        };
        for slot in slots {
            let pool = Arc::downgrade(self);
            let config = self.config.session_kernel();
            let grace = self.config.shutdown_grace;
            let loads = self.placer.loads().clone();
            let preload = self.config.preload.clone();
            self.runtime.spawn(async move {
                // Initialized with the pool's defaults: a session claiming it with the
                // same settings (the usual case) runs its first cell at once.
                let started = match start_in(slot, &config, grace, &loads, None).await {
                    Ok(spare) => preload_spare(spare, &preload, grace).await,
                    failed => failed,
                };
                // Dropped with the pool: the kernel's Drop kills it.
                let Some(pool) = pool.upgrade() else { return };
                let spare = {
                    let mut spares = pool.spares.lock().unwrap();
                    spares.spawning -= 1;
                    match started {
                        Ok(spare) if !pool.disposing.load(Ordering::SeqCst) => {
                            spares.ready.push(spare);
                            None
                        }
                        Ok(spare) => Some(spare),
                        Err(failed) => {
                            tracing::info!("could not start a spare kernel: {}", failed.error);
                            if let Some(kernel) = failed.unconfirmed {
                                pool.unconfirmed.lock().unwrap().push(kernel);
                            }
                            None
                        }
                    }
                };
                match spare {
                    Some(spare) => {
                        pool.end(spare).await;
                    }
                    // A waiter may claim it, or end it for its room.
                    None => pool.slots.notify(),
                }
            });
        }
    }

    /// A ready kernel for `config` in room of its own: a spare that fits, else a fresh
    /// start in `room` (the room of a kernel this call replaced), else in room found or
    /// waited for (see [`PoolInner::wait_for_room`]). `load`: the count a least-loaded
    /// placement took for it. `None`: aborted while waiting.
    async fn new_kernel(
        self: &Arc<Self>,
        config: &KernelConfig,
        room: Option<Slot>,
        abort: &AbortHandle,
        mut load: Option<Load>,
    ) -> Result<Option<LiveKernel>> {
        // Before a spare is initialized with it: its kv store path reaches the runner there.
        config.prepare_artifacts_dir()?;
        let mut room = match (room, self.take_spare(config, None)) {
            (_, Some(spare)) => Room::Spare(spare),
            (Some(slot), None) => Room::Slot(slot),
            (None, None) => Room::Wait,
        };
        let mut resolved = None;
        loop {
            room = match room {
                Room::Spare(spare) => {
                    if spare.kernel.initialized_for(config) {
                        return Ok(Some(spare));
                    }
                    match spare.kernel.initialize(config).await {
                        Ok(()) => return Ok(Some(spare)),
                        Err(err) => {
                            tracing::info!(
                                "a spare kernel failed to initialize ({err}); starting one"
                            );
                            self.end(spare).await.map_or(Room::Wait, Room::Slot)
                        }
                    }
                }
                // The spare taken is replaced once the call is over (see `Admission::run`),
                // not now: a Python starting beside the first cell would slow that cell.
                Room::Slot(slot) => {
                    let grace = self.config.shutdown_grace;
                    let loads = self.placer.loads();
                    return match start_in(slot, config, grace, loads, load.take()).await {
                        Ok(kernel) => Ok(Some(kernel)),
                        Err(failed) => {
                            if let Some(kernel) = failed.unconfirmed {
                                self.unconfirmed.lock().unwrap().push(kernel);
                            }
                            Err(failed.error)
                        }
                    };
                }
                Room::Wait => {
                    // Resolved before room is taken: a request whose interpreter is
                    // missing or unusable ends no other session's kernel. A launched
                    // kernel's interpreter is the far side's: nothing here to look at.
                    if resolved.is_none() && config.launcher.is_none() {
                        resolved = Some(Kernel::resolve(config).await?);
                    }
                    self.wait_for_room(config, resolved.as_ref(), abort).await?
                }
                Room::Aborted => return Ok(None),
            }
        }
    }

    /// Room for a kernel of `config`: a spare that runs its interpreter, a free slot, or
    /// the slot of a spare or of the least recently used idle session, ended for it;
    /// else waits until one of those turns up, for at most `acquire_timeout`
    /// (`ERR_POOL_FULL`). Cancel safety: dropping the future gives up nothing but its
    /// wait; a kernel being ended for it still ends, and its room goes back to the pool.
    async fn wait_for_room(
        self: &Arc<Self>,
        config: &KernelConfig,
        resolved: Option<&Resolved>,
        abort: &AbortHandle,
    ) -> Result<Room> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + self.config.acquire_timeout;
        let _waiting = self.slots.waiting();
        loop {
            let changed = self.slots.changed();
            if self.disposing.load(Ordering::SeqCst) {
                return Err(KernelError::PoolDisposed);
            }
            if let Some(spare) = self.take_spare(config, resolved) {
                return Ok(Room::Spare(spare));
            }
            if let Some(slot) = self.slots.try_take() {
                return Ok(Room::Slot(slot));
            }
            if let Some(victim) = self.evict_for_room() {
                let pool = self.clone();
                let ended = self.runtime.spawn(async move { pool.end(victim).await });
                if let Ok(Some(slot)) = ended.await {
                    return Ok(Room::Slot(slot));
                }
                // Not confirmed gone: it keeps its room, and the next victim waits for a
                // change, so a kernel that never confirms cannot cost every idle session.
            }
            tokio::select! {
                _ = changed => {}
                _ = abort.aborted() => return Ok(Room::Aborted),
                _ = tokio::time::sleep_until(deadline) => {
                    let (limit, option) = self.config.cap();
                    return Err(KernelError::PoolFull {
                        limit,
                        option,
                        waited_ms: started.elapsed().as_millis() as u64,
                        advice: match self.config.mode {
                            PoolMode::Session => "end sessions you no longer need with `disposeOwner`",
                            PoolMode::PerCall => "make fewer calls at once",
                        },
                    });
                }
            }
        }
    }

    /// Takes a kernel away to free its room: a spare first (it holds nobody's state),
    /// else the least recently used session that is idle with nobody in line for it.
    /// None while a spare is starting: it is waited for (it may fit, and either way its
    /// room comes) rather than a session's state lost.
    fn evict_for_room(&self) -> Option<LiveKernel> {
        {
            let mut spares = self.spares.lock().unwrap();
            if let Some(spare) = spares.ready.pop() {
                tracing::info!(pid = spare.kernel.pid(), "ending a spare kernel for room");
                return Some(spare);
            }
            if spares.spawning > 0 {
                return None;
            }
        }
        let mut sessions = self.sessions.lock().unwrap();
        let victim = sessions
            .values()
            .filter(|s| !s.turns.busy() && s.kernel.lock().unwrap().is_some())
            .min_by_key(|s| s.last_used.lock().unwrap().0)
            .cloned()?;
        sessions.remove(&victim.key);
        // Recorded before the lock goes: a call for this key admitted next is told.
        let (limit, option) = self.config.cap();
        self.record_eviction(
            victim.key.clone(),
            format!(
                "This session's kernel was shut down to make room for another session (the pool runs at most {limit} kernels: `{option}`); a new one was started and earlier state is gone."
            ),
        );
        drop(sessions);
        tracing::info!(key = %victim.key, "evicting the least recently used idle session for room");
        stop_session(&victim)
    }

    /// Ends `live` (one shutdown grace per step) and returns its room once the process
    /// is confirmed gone; one that is not is kept, with its room, for a later retry.
    async fn end(&self, live: LiveKernel) -> Option<Slot> {
        self.end_within(live, self.config.shutdown_grace).await
    }

    async fn end_within(&self, live: LiveKernel, grace: Duration) -> Option<Slot> {
        match end_kernel(live, grace).await {
            Ok(slot) => Some(slot),
            Err(unconfirmed) => {
                self.unconfirmed.lock().unwrap().push(unconfirmed);
                None
            }
        }
    }

    /// A spare for `config`, if one is ready: with the pool's settings any spare fits
    /// (no resolution, a blocking-pool thread, on the way); otherwise, for a local kernel,
    /// one running the interpreter `config` resolves to, when `resolved` is known. Spares
    /// run on the pool's default launcher (or here): a kernel meant elsewhere takes none.
    fn take_spare(&self, config: &KernelConfig, resolved: Option<&Resolved>) -> Option<LiveKernel> {
        let pool = &self.config.kernel;
        if config.launcher != pool.launcher {
            return None;
        }
        let mut spares = self.spares.lock().unwrap();
        let index = if config.interpreter == pool.interpreter
            && config.cwd == pool.cwd
            && config.base_env == pool.base_env
        {
            spares.ready.iter().position(|k| k.kernel.alive())?
        } else if config.launcher.is_some() {
            // What a launched kernel's interpreter or cwd are is the far side's business:
            // only a spare started with the same settings is known to fit.
            return None;
        } else if config.sandbox != pool.sandbox || config.sandbox.confines_writes() {
            // The sandbox is fixed at spawn, and confined writes name the cwd: such a
            // spare cannot serve a session elsewhere.
            return None;
        } else {
            // Nor can one whose view does not show the session's cwd (under the host's
            // /tmp, which a spare's view replaces).
            let resolved = resolved?;
            spares.ready.iter().position(|k| {
                k.kernel.alive() && k.kernel.resolved() == resolved && k.kernel.sees(&config.cwd)
            })?
        };
        Some(spares.ready.swap_remove(index))
    }

    async fn retry_unconfirmed(&self, budget: Duration) {
        let kernels = std::mem::take(&mut *self.unconfirmed.lock().unwrap());
        for live in kernels {
            self.end_within(live, budget / 3).await;
        }
    }

    /// Evicts the sessions idle for the idle timeout with nobody in line for them.
    async fn evict_idle(&self, now: Instant) {
        let idle = self.config.idle_timeout;
        let evicted: Vec<Arc<Session>> = {
            let mut sessions = self.sessions.lock().unwrap();
            let keys: Vec<SessionKey> = sessions
                .values()
                .filter(|s| {
                    !s.turns.busy() && now.duration_since(s.last_used.lock().unwrap().0) >= idle
                })
                .map(|s| s.key.clone())
                .collect();
            let evicted: Vec<_> = keys.iter().filter_map(|k| sessions.remove(k)).collect();
            // Recorded before the lock goes: a call for one of these keys admitted next
            // is told.
            for session in evicted.iter().filter(|s| s.current_kernel().is_some()) {
                self.record_eviction(
                    session.key.clone(),
                    format!(
                        "This session was idle for {} s and its kernel was shut down; a new one was started and earlier state is gone.",
                        idle.as_secs_f64()
                    ),
                );
            }
            evicted
        };
        for session in evicted {
            tracing::info!(key = %session.key, "evicting idle session");
            if let Some(live) = stop_session(&session) {
                self.end(live).await;
            }
        }
    }
}

/// A start that failed, and the kernel (with its room) if its end was not confirmed.
struct StartFailed {
    error: KernelError,
    unconfirmed: Option<LiveKernel>,
}

/// Starts a kernel in `slot`: spawned, then initialized with `config`. On failure nothing
/// is left: the process is confirmed gone before its room is given back.
///
/// A launched kernel is counted on its launcher from the start (`load`, or a count of its
/// own), so a least-loaded choice made meanwhile sees it.
async fn start_in(
    slot: Slot,
    config: &KernelConfig,
    grace: Duration,
    loads: &Arc<Loads>,
    load: Option<Load>,
) -> Result<LiveKernel, StartFailed> {
    let load = load.or_else(|| config.launcher.as_ref().map(|l| loads.count(l)));
    let kernel = Kernel::spawn(config).await.map_err(|error| StartFailed {
        error,
        unconfirmed: None,
    })?;
    let live = LiveKernel {
        kernel,
        slot,
        _load: load,
    };
    match live.kernel.initialize(config).await {
        Ok(()) => Ok(live),
        Err(error) => Err(StartFailed {
            error,
            unconfirmed: end_kernel(live, grace).await.err(),
        }),
    }
}

/// Imports the pool's `preload` in a spare that just started, but for what it was forked
/// with. A module that fails is logged and the spare kept (the session's
/// own import will say why); a spare that does not answer is ended.
async fn preload_spare(
    spare: LiveKernel,
    modules: &[String],
    grace: Duration,
) -> Result<LiveKernel, StartFailed> {
    let modules = spare.kernel.not_preloaded(modules);
    if modules.is_empty() {
        return Ok(spare);
    }
    match spare.kernel.preload(&modules, PRELOAD_WAIT).await {
        Ok(errors) => {
            for (module, error) in errors {
                tracing::warn!(module = %module, "a spare kernel could not preload it: {error}");
            }
            Ok(spare)
        }
        Err(error) => Err(StartFailed {
            error,
            unconfirmed: end_kernel(spare, grace).await.err(),
        }),
    }
}

/// Shuts the kernel down; its room once it is confirmed gone, else the kernel back.
async fn end_kernel(live: LiveKernel, grace: Duration) -> Result<Slot, LiveKernel> {
    if live.kernel.shutdown(grace).await.confirmed {
        Ok(live.slot)
    } else {
        Err(live)
    }
}

/// Marks the session disposed, stops its running cell and takes its kernel away.
fn stop_session(session: &Session) -> Option<LiveKernel> {
    tracing::info!(key = %session.key, "disposing session");
    session.disposed.store(true, Ordering::SeqCst);
    if let Some(abort) = session.running.lock().unwrap().clone() {
        abort.abort();
    }
    session.take_kernel()
}

impl Admission {
    /// Runs the request. Cancel safety: dropping the future gives up its place in line
    /// and its wait for room; a cell already running is left to finish in the kernel.
    pub async fn run(
        mut self,
        on_event: impl FnMut(usize, KernelEvent) + Send,
    ) -> Result<EvalResult> {
        let Some(at) = self.deadline else {
            return self.run_admitted(on_event).await;
        };
        // The deadline stops the request as its caller's abort would; the result then
        // says it was the deadline.
        let caller_abort = self.request.abort.clone().unwrap_or_default();
        let budget = self.request.deadline.unwrap_or_default();
        let watch = DeadlineWatch::start(at, budget, &caller_abort);
        self.request.abort = Some(watch.abort.clone());
        let result = self.run_admitted(on_event).await;
        match watch.passed() {
            true => watch.say_so(result),
            false => result,
        }
    }

    async fn run_admitted(
        self,
        mut on_event: impl FnMut(usize, KernelEvent) + Send,
    ) -> Result<EvalResult> {
        let Admission {
            pool,
            target,
            request,
            annotations,
            timeout,
            caller,
            deadline,
        } = self;
        let options = EvalOptions {
            timeout,
            abort: Some(request.abort.clone().unwrap_or_else(AbortHandle::new)),
            artifacts_dir: request
                .artifacts_dir
                .clone()
                .or_else(|| pool.config.artifacts_dir.clone()),
            status_mime: pool.config.kernel.status_mime.clone(),
            annotations,
            artifact_id: request.artifact_id,
            include_figure_text: request
                .include_figure_text
                .unwrap_or(pool.config.kernel.include_figure_text),
            on_output: request.on_output,
            env: request.env.clone(),
            caller: Some(caller),
            ..Default::default()
        };
        let abort = options.abort.clone().expect("set above");
        match target {
            Target::PerCall(site) => {
                run_per_call(&pool, site, request.cells, options, deadline, &mut on_event).await
            }
            Target::Session {
                session,
                place,
                reset_epoch,
            } => {
                let turn = tokio::select! {
                    turn = place.turn() => turn,
                    _ = abort.aborted() => {
                        // Aborted while waiting: nothing ran.
                        pool.after_call(&session);
                        return Ok(EvalResult { cancelled: true, ..Default::default() });
                    }
                };
                *session.running.lock().unwrap() = Some(abort.clone());
                let result = run_in_session(
                    &pool,
                    &session,
                    &turn,
                    reset_epoch,
                    request.cells,
                    options,
                    deadline,
                    &mut on_event,
                )
                .await;
                session.running.lock().unwrap().take();
                session.touch();
                if let Some(epoch) = reset_epoch {
                    // Resets asked for while this one was pending or running shared it;
                    // later ones get a reset of their own.
                    let mut resets = session.resets.lock().unwrap();
                    if resets.pending == Some(epoch) {
                        resets.pending = None;
                    }
                }
                drop(turn);
                pool.after_call(&session);
                result
            }
        }
    }
}

/// A request's deadline: aborts the request when it passes (or when the caller aborts),
/// and remembers which of the two it was.
struct DeadlineWatch {
    abort: Arc<AbortHandle>,
    passed: Arc<AtomicBool>,
    budget: Duration,
    task: tokio::task::JoinHandle<()>,
}

impl DeadlineWatch {
    fn start(at: tokio::time::Instant, budget: Duration, caller_abort: &Arc<AbortHandle>) -> Self {
        let abort = AbortHandle::new();
        let passed = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (abort, passed, caller_abort) =
                (abort.clone(), passed.clone(), caller_abort.clone());
            async move {
                tokio::select! {
                    _ = caller_abort.aborted() => {}
                    _ = tokio::time::sleep_until(at) => passed.store(true, Ordering::SeqCst),
                }
                abort.abort();
            }
        });
        DeadlineWatch {
            abort,
            passed,
            budget,
            task,
        }
    }

    fn passed(&self) -> bool {
        self.passed.load(Ordering::SeqCst)
    }

    /// The request's result as a timeout: `timedOut`, and a notice of where it stopped.
    /// A kernel start cut short by the deadline is a timed-out result too, not an error.
    fn say_so(&self, result: Result<EvalResult>) -> Result<EvalResult> {
        let mut result = match result {
            Ok(result) => result,
            Err(KernelError::StartTimeout { .. }) => EvalResult {
                cancelled: true,
                output: "(no output)".into(),
                ..Default::default()
            },
            Err(other) => return Err(other),
        };
        let ms = self.budget.as_millis();
        let started = result
            .cells
            .iter()
            .rposition(|c| !c.outcome.not_started && c.outcome.cancelled);
        let notice = match started {
            // As with a timeout, a cell that ignores the interrupt gets its kernel killed.
            Some(index) if result.kernel_died => format!(
                "eval request deadline of {ms}ms passed during cell {}; it did not stop on interrupt, so the kernel was killed and will be recreated on the next call.",
                index + 1
            ),
            Some(index) => format!(
                "eval request deadline of {ms}ms passed during cell {}; it was interrupted and later cells did not run. The kernel remains running; reset it via {{ reset: true }} if state appears corrupted.",
                index + 1
            ),
            None => format!("eval request deadline of {ms}ms passed before its next cell started; that cell and later ones did not run."),
        };
        result.add_notice(notice);
        result.timed_out = true;
        result.cancelled = true;
        result.kernel_killed |= result.kernel_died;
        result.exit_code = None;
        Ok(result)
    }
}

impl Drop for DeadlineWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A `per-call` request: a fresh kernel, shut down after; a cell asking for a reset gets
/// another.
async fn run_per_call(
    pool: &Arc<PoolInner>,
    site: Site,
    cells: Vec<Cell>,
    options: EvalOptions,
    deadline: Option<tokio::time::Instant>,
    on_event: &mut (impl FnMut(usize, KernelEvent) + Send),
) -> Result<EvalResult> {
    let abort = options.abort.clone().unwrap_or_default();
    let mut evaluation = Evaluation::new(cells, options);
    // Placed once: a cell's reset runs on the same launcher.
    let Some((config, mut load)) = pool.placed(&Mutex::new(site), &abort).await? else {
        return Ok(cancelled_waiting_for_room(evaluation));
    };
    let config = until_deadline(&config, deadline);
    let mut first = true;
    loop {
        let started = match pool.new_kernel(&config, None, &abort, load.take()).await {
            Ok(started) => started,
            Err(err) if !first => return Ok(reset_failed(evaluation, err, deadline)),
            Err(err) => return Err(err),
        };
        first = false;
        let Some(live) = started else {
            return Ok(cancelled_waiting_for_room(evaluation));
        };
        let turn = live.kernel.queue().turn().await;
        let ran = evaluation.run(&live.kernel, &turn, &mut *on_event).await;
        drop(turn);
        pool.end(live).await;
        pool.refill_spares();
        ran?;
        if !evaluation.reset_due() {
            return Ok(evaluation.finish());
        }
    }
}

/// A cell's reset whose fresh kernel did not start: the cells before it keep their
/// results; it and the later ones did not run. A start cut short by the request's
/// deadline is left for [`DeadlineWatch::say_so`] to report.
fn reset_failed(
    mut evaluation: Evaluation,
    err: KernelError,
    deadline: Option<tokio::time::Instant>,
) -> EvalResult {
    let deadline_passed = matches!(
        err,
        KernelError::StartTimeout { .. } | KernelError::StartDeadline { .. }
    ) && deadline.is_some_and(|at| tokio::time::Instant::now() >= at);
    if !deadline_passed {
        evaluation.fail_next(format!(
            "a fresh kernel for the next cell did not start: {err}; it and later cells did not run"
        ));
    }
    evaluation.finish()
}

/// `config` with its start-up bounded by the request's deadline too.
fn until_deadline(config: &KernelConfig, deadline: Option<tokio::time::Instant>) -> KernelConfig {
    let mut config = config.clone();
    if let Some(at) = deadline {
        let left = at.saturating_duration_since(tokio::time::Instant::now());
        config.startup_timeout = config
            .startup_timeout
            .min(left.max(Duration::from_millis(1)));
    }
    config
}

/// The result of a call aborted while it waited for room: nothing ran.
fn cancelled_waiting_for_room(mut evaluation: Evaluation) -> EvalResult {
    evaluation.annotate("Cancelled while waiting for room in the pool; nothing ran.");
    evaluation.result_mut().cancelled = true;
    evaluation.finish()
}

/// A session's call stopped while it waited for room: by disposal of the session (which
/// stops a waiting call as it stops a running cell), else by its caller's abort.
fn aborted_waiting_for_room(session: &Session, evaluation: Evaluation) -> Result<EvalResult> {
    if session.disposed.load(Ordering::SeqCst) {
        return Err(KernelError::SessionDisposed);
    }
    Ok(cancelled_waiting_for_room(evaluation))
}

// The request's parts, each used at a different step; a struct of them would only rename.
#[allow(clippy::too_many_arguments)]
async fn run_in_session(
    pool: &Arc<PoolInner>,
    session: &Session,
    _turn: &Turn,
    reset_epoch: Option<u64>,
    cells: Vec<Cell>,
    options: EvalOptions,
    deadline: Option<tokio::time::Instant>,
    on_event: &mut (impl FnMut(usize, KernelEvent) + Send),
) -> Result<EvalResult> {
    let disposed = || {
        session
            .disposed
            .load(Ordering::SeqCst)
            .then_some(KernelError::SessionDisposed)
    };
    if let Some(err) = disposed() {
        return Err(err);
    }
    let abort = options.abort.clone().unwrap_or_default();
    let mut evaluation = Evaluation::new(cells, options);
    if let Some(notice) = session.lost_while_idle.lock().unwrap().take() {
        evaluation.annotate(notice);
        evaluation.result_mut().session_lost = true;
    }
    // The room of a kernel this call replaces goes to its successor: a session with a
    // kernel never waits for room to replace it.
    let mut room = None;
    if let Some(epoch) = reset_epoch {
        let due = {
            let mut resets = session.resets.lock().unwrap();
            let due = epoch > resets.performed;

            resets.performed = resets.performed.max(epoch);
            due
        };
        if due {
            tracing::info!(key = %session.key, "resetting the kernel");
            if let Some(old) = session.take_kernel() {
                room = pool.end(old).await;
            }
        }
    }
    let kernel = match session.current_kernel() {
        Some(kernel) if kernel.alive() => kernel,
        previous => {
            if let Some(dead) = previous {
                let exit = dead.exit_info().map_or("ended".into(), |e| e.to_string());
                evaluation.annotate(format!(
                    "The Python kernel had ended since the last call ({exit}); a new one was started and earlier state is gone."
                ));
                evaluation.result_mut().session_lost = true;
                if let Some(old) = session.take_kernel() {
                    room = pool.end(old).await;
                }
            }
            match start_kernel(pool, session, room, &abort, deadline).await? {
                Some(kernel) => kernel,
                None => return aborted_waiting_for_room(session, evaluation),
            }
        }
    };
    let turn = kernel.queue().turn().await;
    let ran = evaluation.run(&kernel, &turn, &mut *on_event).await;
    drop(turn);

    // A kernel found dead before any cell of the request reached it (it died after the
    // liveness check): nothing ran, so the request runs once more in a fresh kernel. A
    // cell that was written to a kernel is never run again, even if that kernel died at
    // once: it may have had effects ("charged the customer") before it died.
    let dead_before_start = match &ran {
        Err(KernelError::KernelDead { exit, .. }) if evaluation.nothing_started() => {
            Some(exit.clone())
        }
        Err(_) => None,
        Ok(()) if evaluation.nothing_started() && evaluation.result_mut().kernel_died => {
            Some("its pipe was closed".to_string())
        }
        Ok(()) => None,
    };
    match (dead_before_start, ran) {
        (Some(exit), _) => {
            let room = match session.take_kernel() {
                Some(dead) => pool.end(dead).await,
                None => None,
            };
            if let Some(err) = disposed() {
                return Err(err);
            }
            tracing::info!(key = %session.key, "kernel dead before the first cell; restarting");
            evaluation.prepare_restart();
            let Some(kernel) = start_kernel(pool, session, room, &abort, deadline).await? else {
                return aborted_waiting_for_room(session, evaluation);
            };
            evaluation.annotate(format!(
                "The Python kernel ended before this call's first cell reached it ({exit}); a new one was started, the cells ran in it, and earlier state is gone."
            ));
            evaluation.result_mut().kernel_restarted = true;
            evaluation.result_mut().session_lost = true;
            let turn = kernel.queue().turn().await;
            evaluation.run(&kernel, &turn, &mut *on_event).await?;
        }
        (None, ran) => ran?,
    }
    // Cells asking for a fresh kernel: the current one is replaced before each.
    while evaluation.reset_due() {
        if let Some(err) = disposed() {
            return Err(err);
        }
        tracing::info!(key = %session.key, "resetting the kernel before a cell");
        let room = match session.take_kernel() {
            Some(old) => pool.end(old).await,
            None => None,
        };
        let started = match start_kernel(pool, session, room, &abort, deadline).await {
            Ok(started) => started,
            Err(err) => return Ok(reset_failed(evaluation, err, deadline)),
        };
        let Some(kernel) = started else {
            return aborted_waiting_for_room(session, evaluation);
        };
        let turn = kernel.queue().turn().await;
        evaluation.run(&kernel, &turn, &mut *on_event).await?;
    }
    if let Some(index) = evaluation.died_on_its_own() {
        evaluation.annotate(format!(
            "Cell {} had started, so it was not run again: it may have had effects before the kernel died. A fresh kernel starts on the next call.",
            index + 1
        ));
    }
    let result = evaluation.finish();
    if result.kernel_died || result.kernel_killed {
        // Replaced before the next call; its room is free once it is gone.
        if let Some(dead) = session.take_kernel() {
            pool.end(dead).await;
        }
    }
    Ok(result)
}

/// Starts the session's kernel in `room`, or in room found for it. `None`: aborted while
/// waiting for room.
async fn start_kernel(
    pool: &Arc<PoolInner>,
    session: &Session,
    room: Option<Slot>,
    abort: &AbortHandle,
    deadline: Option<tokio::time::Instant>,
) -> Result<Option<Arc<Kernel>>> {
    let Some((config, load)) = pool.placed(&session.site, abort).await? else {
        return Ok(None);
    };
    tracing::info!(key = %session.key, "starting kernel");
    let config = until_deadline(&config, deadline);
    let Some(live) = pool.new_kernel(&config, room, abort, load).await? else {
        return Ok(None);
    };
    let kernel = live.kernel.clone();
    *session.kernel.lock().unwrap() = Some(live);
    session.had_kernel.store(true, Ordering::SeqCst);
    Ok(Some(kernel))
}

/// Idle eviction, the heartbeat and retries of unconfirmed shutdowns, until the pool goes.
async fn maintain(pool: Weak<PoolInner>, opening: u64) {
    let mut last_heartbeat = Instant::now();
    loop {
        let tick = match pool.upgrade() {
            Some(inner) => {
                let config = &inner.config;
                let mut tick = (config.idle_timeout / 4).min(Duration::from_secs(1));
                if !config.heartbeat_interval.is_zero() {
                    tick = tick.min(config.heartbeat_interval);
                }
                tick.max(Duration::from_millis(10))
            }
            None => return,
        };
        tokio::time::sleep(tick).await;
        let Some(inner) = pool.upgrade() else { return };
        if inner.disposing.load(Ordering::SeqCst) || inner.opening.load(Ordering::SeqCst) != opening
        {
            return;
        }
        let now = Instant::now();
        inner.evict_idle(now).await;
        let sessions = inner.all_sessions();
        let heartbeat = inner.config.heartbeat_interval;
        if !heartbeat.is_zero() && now.duration_since(last_heartbeat) >= heartbeat {
            last_heartbeat = now;
            for session in &sessions {
                check_heartbeat(&inner, session).await;
            }
        }
        inner
            .retry_unconfirmed(inner.config.shutdown_grace * 3)
            .await;
    }
}

/// Pings an idle session's kernel; a dead or silent one is removed, and the next call is
/// told its state was lost.
async fn check_heartbeat(pool: &PoolInner, session: &Session) {
    let Some(turn) = session.turns.try_join() else {
        return; // busy: its call will see how the kernel is doing
    };
    check_kernel(pool, session, &turn).await;
    drop(turn);
    // Idle again: a call waiting for room may evict it.
    pool.slots.notify();
}

async fn check_kernel(pool: &PoolInner, session: &Session, _turn: &Turn) {
    let Some(kernel) = session.current_kernel() else {
        return;
    };
    let timeout = pool.config.heartbeat_timeout;
    let mut exit = kernel.exit_info();
    if exit.is_none() {
        if kernel.ping(timeout).await {
            return;
        }
        // A kernel that died just before the ping fails it too, while its exit may not be
        // known yet (its init reports it a moment later, later still on a loaded machine):
        // that moment is waited for before it is called wedged.
        exit = kernel.wait_for_exit(timeout).await;
    }
    let lost = match exit {
        Some(exit) => format!("The Python kernel ended while idle ({exit}); a new one was started and earlier state is gone."),
        None => {
            kernel.shutdown(pool.config.shutdown_grace).await;
            "The Python kernel stopped answering while idle and was replaced; earlier state is gone."
                .to_string()
        }
    };
    tracing::info!(key = %session.key, "heartbeat replaced the kernel");
    if let Some(gone) = session.take_kernel() {
        pool.end(gone).await;
    }
    *session.lost_while_idle.lock().unwrap() = Some(lost);
}

/// The real path of `cwd`, refused (`ERR_CWD_INVALID`) when it is no directory.
fn checked_cwd(cwd: &Path) -> Result<PathBuf> {
    let (real, is_dir) = real_path(cwd).map_err(|_| KernelError::CwdInvalid {
        path: cwd.to_path_buf(),
        reason: "does not exist",
    })?;
    if !is_dir {
        return Err(KernelError::CwdInvalid {
            path: cwd.to_path_buf(),
            reason: "is not a directory",
        });
    }
    Ok(real)
}

fn session_key(request: &PoolRequest, site: &Site) -> Result<SessionKey> {
    // A local kernel's cwd and interpreter are keyed by their real paths. A launched one's
    // are the far side's, and one the pool has yet to place may run on either side: both
    // are keyed as given, and nothing here is looked at.
    let (cwd, interpreter, launcher) = match site {
        Site::Placed(config) if config.launcher.is_none() => {
            let cwd = checked_cwd(&config.cwd)?;
            let interpreter = config
                .interpreter
                .as_deref()
                .map(|i| real_interpreter(i, &cwd))
                .unwrap_or_default();
            (cwd, interpreter, None)
        }
        Site::Placed(config) => (
            config.cwd.clone(),
            config.interpreter.clone().unwrap_or_default(),
            config.launcher.clone(),
        ),
        Site::Unplaced(unplaced) => (
            unplaced.cwd.clone().unwrap_or_default(),
            unplaced.interpreter.clone().unwrap_or_default(),
            None,
        ),
    };
    let identity = if let Some(id) = &request.session_id {
        format!("session:{id}")
    } else if let Some(file) = &request.session_file {
        format!("file:{file}")
    } else {
        format!("cwd:{}", cwd.display())
    };
    Ok(SessionKey {
        identity,
        cwd,
        interpreter,
        launcher,
    })
}

/// The interpreter's real path for the key; a path that does not resolve keys as given
/// (starting it will report the problem).
fn real_interpreter(interpreter: &str, cwd: &Path) -> String {
    let expanded = match interpreter.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map_or(PathBuf::from(interpreter), |h| PathBuf::from(h).join(rest)),
        None => PathBuf::from(interpreter),
    };
    let path = if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    };
    // In a venv or conda environment the executable is usually a symlink to the base
    // interpreter: two environments made from one Python would resolve to one key and
    // share a kernel (the second silently running in the first one's packages). There
    // the environment's own directory is resolved and the file name kept.
    let environment = path
        .parent()
        .and_then(Path::parent)
        .filter(|env| env.join("pyvenv.cfg").is_file() || env.join("conda-meta").is_dir());
    if let (Some(_), Some(dir), Some(name)) = (environment, path.parent(), path.file_name()) {
        if let Ok((real_dir, _)) = real_path(dir) {
            return real_dir.join(name).display().to_string();
        }
    }
    real_path(&path)
        .map_or(path, |(real, _)| real)
        .display()
        .to_string()
}

/// What `std::fs::canonicalize` returns, and whether it is a directory, in four system
/// calls however long the path: open it `O_PATH`, ask /proc what the descriptor is, stat
/// it. realpath(3) reads the link of every component (a dozen calls for a venv's python
/// through pyenv), and every pool request resolves its cwd and interpreter.
#[cfg(target_os = "linux")]
fn real_path(path: &Path) -> std::io::Result<(PathBuf, bool)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_PATH)
        .open(path)?;
    let is_dir = file.metadata()?.is_dir();
    match std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        Ok(real) if real.is_absolute() => Ok((real, is_dir)),
        _ => Ok((std::fs::canonicalize(path)?, is_dir)), // no /proc
    }
}

#[cfg(not(target_os = "linux"))]
fn real_path(path: &Path) -> std::io::Result<(PathBuf, bool)> {
    let real = std::fs::canonicalize(path)?;
    let is_dir = real.is_dir();
    Ok((real, is_dir))
}

/// `timeoutSeconds`: default 30, 0 is none, otherwise clamped to 1..3600 with a notice.
pub fn clamp_timeout(requested: Option<f64>) -> Result<(Option<Duration>, Option<String>)> {
    let seconds = requested.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    if seconds.is_nan() {
        return Err(KernelError::InvalidArgument {
            name: "timeoutSeconds",
            reason: "must be a number of seconds (0 for none)".into(),
        });
    }
    if seconds == 0.0 {
        return Ok((None, None));
    }
    let clamped = seconds.clamp(1.0, MAX_TIMEOUT_SECONDS);
    let notice = (clamped != seconds).then(|| {
        format!(
            "Timeout clamped to {}s (requested {}s; allowed range 1-{}s).",
            clamped, seconds, MAX_TIMEOUT_SECONDS
        )
    });
    Ok((Some(Duration::from_secs_f64(clamped)), notice))
}

/// `timeoutMs`: 0 is none, otherwise clamped to 1..3,600,000 ms with a notice, as
/// `timeoutSeconds` is to 1..3600 s (the agent chose it).
pub fn clamp_timeout_ms(ms: f64) -> Result<(Option<Duration>, Option<String>)> {
    if ms.is_nan() || ms < 0.0 {
        return Err(KernelError::InvalidArgument {
            name: "timeoutMs",
            reason: format!(
                "must be 0 (no timeout) or a positive number of milliseconds (clamped to the allowed range with a notice), got {ms}"
            ),
        });
    }
    if ms == 0.0 {
        return Ok((None, None));
    }
    let max = MAX_TIMEOUT_SECONDS * 1000.0;
    let clamped = ms.clamp(1.0, max);
    let notice = (clamped != ms).then(|| {
        format!("Timeout clamped to {clamped}ms (requested {ms}ms; allowed range 1-{max}ms).")
    });
    Ok((Some(Duration::from_secs_f64(clamped / 1000.0)), notice))
}

/// Disposes `sessions` at the same time, so the whole takes one `budget`, not one each.
async fn dispose_all_of(inner: &Arc<PoolInner>, sessions: Vec<Arc<Session>>, budget: Duration) {
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|session| {
            let inner = inner.clone();
            tokio::spawn(async move { inner.dispose(session, budget).await })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_path_agrees_with_canonicalize() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(base.join("d")).unwrap();
        std::fs::write(base.join("d/f"), "").unwrap();
        std::os::unix::fs::symlink(base.join("d"), base.join("link-d")).unwrap();
        std::os::unix::fs::symlink("link-d/f", base.join("link-f")).unwrap();
        std::os::unix::fs::symlink(base.join("link-f"), base.join("link-link-f")).unwrap();
        let cases = [
            (base.join("link-link-f"), false),
            (base.join("link-d/../d/./f"), false),
            (base.join("link-d"), true),
            (base.clone(), true),
        ];
        for (path, dir) in cases {
            let expected = std::fs::canonicalize(&path).unwrap();
            assert_eq!(
                real_path(&path).unwrap(),
                (expected, dir),
                "{}",
                path.display()
            );
        }
        assert!(real_path(&base.join("missing")).is_err());
        std::os::unix::fs::symlink(base.join("missing"), base.join("dangling")).unwrap();
        assert!(real_path(&base.join("dangling")).is_err());
    }

    #[test]
    fn timeouts_are_clamped_with_the_exact_notice() {
        assert_eq!(
            clamp_timeout(None).unwrap(),
            (Some(Duration::from_secs(30)), None)
        );
        assert_eq!(clamp_timeout(Some(0.0)).unwrap(), (None, None));
        let (t, notice) = clamp_timeout(Some(99999.0)).unwrap();
        assert_eq!(t, Some(Duration::from_secs(3600)));
        assert_eq!(
            notice.unwrap(),
            "Timeout clamped to 3600s (requested 99999s; allowed range 1-3600s)."
        );
        assert_eq!(
            clamp_timeout(Some(0.2)).unwrap().0,
            Some(Duration::from_secs(1))
        );
        assert!(clamp_timeout(Some(f64::NAN)).is_err());
    }

    #[test]
    fn millisecond_timeouts_are_clamped_to_the_same_range() {
        assert_eq!(
            clamp_timeout_ms(250.0).unwrap(),
            (Some(Duration::from_millis(250)), None)
        );
        assert_eq!(clamp_timeout_ms(0.0).unwrap(), (None, None));
        let (t, notice) = clamp_timeout_ms(5_000_000.0).unwrap();
        assert_eq!(t, Some(Duration::from_secs(3600)));
        assert_eq!(
            notice.unwrap(),
            "Timeout clamped to 3600000ms (requested 5000000ms; allowed range 1-3600000ms)."
        );
        assert_eq!(
            clamp_timeout_ms(0.5).unwrap().0,
            Some(Duration::from_millis(1))
        );
        for bad in [-1.0, f64::NAN] {
            assert!(clamp_timeout_ms(bad).is_err());
        }
    }
}
