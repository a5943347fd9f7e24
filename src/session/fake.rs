//! A stand-in kernel for the session layer's unit tests: no Python, and every move on a
//! tokio clock the test pauses. It records what the pool asks of it, and can be told to
//! die (now, or as the next cell is written to it), to hang, or to be slow to start.
//!
//! A cell's code is a small script: `sleep <seconds>` takes that long (stopped by the
//! request's abort or the cell's timeout, as a real interrupt would stop it), `die` ends
//! the kernel under the cell, anything else prints itself and succeeds.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::sleep;

use crate::error::{KernelError, Result, StderrTail};
use crate::eval::executor::{Cell, EvalResult, RunsCells};
use crate::kernel::fifo::{Fifo, Place, Turn};
use crate::kernel::{AbortHandle, ExecuteRequest, KernelConfig, ShutdownOutcome};
use crate::process::exit::ExitInfo;
use crate::session::config::{PoolConfig, PoolRequest};
use crate::session::pool::Pool;
use crate::session::pooled::{KernelStarter, PooledKernel};
use crate::start::python::{Resolved, Source};
use crate::wire::events::{ErrorInfo, ExecuteOutcome, KernelEvent};

/// What the pool asked of a kernel, by its pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Call {
    Spawn(u32),
    Initialize(u32),
    /// A cell written to the kernel, with its code.
    Execute(u32, String),
    Ping(u32),
    Shutdown(u32),
}

/// What every fake kernel of a pool shares: the log, the knobs, the kernels made.
#[derive(Default)]
pub(super) struct Fakes {
    calls: Mutex<Vec<Call>>,
    kernels: Mutex<Vec<Arc<FakeKernel>>>,
    next_pid: AtomicU32,
    /// How long spawning a process takes (not bounded by the start-up timeout).
    spawn_delay: Mutex<Duration>,
    /// How long a kernel takes to initialize (bounded by its start-up timeout).
    start_delay: Mutex<Duration>,
}

impl Fakes {
    pub(super) fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }

    /// Every kernel spawned so far, oldest first.
    pub(super) fn kernels(&self) -> Vec<Arc<FakeKernel>> {
        self.kernels.lock().unwrap().clone()
    }

    pub(super) fn kernel(&self, pid: u32) -> Arc<FakeKernel> {
        self.kernels()
            .into_iter()
            .find(|k| k.pid == pid)
            .expect("a kernel with that pid")
    }

    pub(super) fn spawned(&self) -> usize {
        self.kernels.lock().unwrap().len()
    }

    /// Pids the pool shut down, in order.
    pub(super) fn shut_down(&self) -> Vec<u32> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Shutdown(pid) => Some(pid),
                _ => None,
            })
            .collect()
    }

    /// Pids that ran (were written) the cell `code`.
    pub(super) fn ran(&self, code: &str) -> Vec<u32> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Execute(pid, run) if run == code => Some(pid),
                _ => None,
            })
            .collect()
    }

    pub(super) fn set_spawn_delay(&self, delay: Duration) {
        *self.spawn_delay.lock().unwrap() = delay;
    }

    pub(super) fn set_start_delay(&self, delay: Duration) {
        *self.start_delay.lock().unwrap() = delay;
    }
}

pub(super) struct FakeStarter(pub(super) Arc<Fakes>);

impl KernelStarter<FakeKernel> for FakeStarter {
    fn spawn(
        &self,
        _config: &KernelConfig,
    ) -> impl Future<Output = Result<Arc<FakeKernel>>> + Send {
        let fakes = self.0.clone();
        async move {
            let delay = *fakes.spawn_delay.lock().unwrap();
            sleep(delay).await;
            let pid = 1000 + fakes.next_pid.fetch_add(1, Ordering::SeqCst);
            let kernel = Arc::new(FakeKernel {
                pid,
                queue: Fifo::new(),
                exit: watch::Sender::new(None),
                hung: AtomicBool::new(false),
                die_before_next_cell: AtomicBool::new(false),
                executions: AtomicU32::new(0),
                initialized: Mutex::new(None),
                resolved: resolved(),
                fakes: fakes.clone(),
            });
            fakes.record(Call::Spawn(pid));
            fakes.kernels.lock().unwrap().push(kernel.clone());
            Ok(kernel)
        }
    }

    async fn resolve(&self, _config: &KernelConfig) -> Result<Resolved> {
        Ok(resolved())
    }
}

fn resolved() -> Resolved {
    Resolved {
        path: PathBuf::from("/fake/bin/python3"),
        version: "3.12.0".into(),
        source: Source::Path,
        venv: None,
    }
}

pub(super) struct FakeKernel {
    pub(super) pid: u32,
    queue: Arc<Fifo>,
    exit: watch::Sender<Option<ExitInfo>>,
    /// Answers no ping, and its cells end only when stopped.
    hung: AtomicBool,
    /// Dies as the next cell is written to it: alive when looked at, dead when used.
    die_before_next_cell: AtomicBool,
    executions: AtomicU32,
    /// The cwd and kv store it was last initialized with, as a real init frame names them.
    initialized: Mutex<Option<(PathBuf, Option<PathBuf>)>>,
    resolved: Resolved,
    fakes: Arc<Fakes>,
}

impl FakeKernel {
    /// Ends the process now, as if it had exited with `code`.
    pub(super) fn die(&self, code: i32) {
        self.exit.send_replace(Some(ExitInfo {
            code: Some(code),
            signal: None,
        }));
    }

    pub(super) fn hang(&self) {
        self.hung.store(true, Ordering::SeqCst);
    }

    pub(super) fn die_before_next_cell(&self) {
        self.die_before_next_cell.store(true, Ordering::SeqCst);
    }

    fn dead(&self) -> KernelError {
        KernelError::KernelDead {
            exit: self.exit_info().map_or("ended".into(), |e| e.to_string()),
            stderr: StderrTail(String::new()),
        }
    }
}

impl RunsCells for FakeKernel {
    async fn execute_holding(
        &self,
        _turn: &Turn,
        request: ExecuteRequest,
        abort: Option<Arc<AbortHandle>>,
        mut on_event: impl FnMut(KernelEvent) + Send,
    ) -> Result<ExecuteOutcome> {
        if self.die_before_next_cell.swap(false, Ordering::SeqCst) {
            self.die(1);
        }
        if !self.alive() {
            return Err(self.dead());
        }
        let mut outcome = ExecuteOutcome::default();
        if abort.as_ref().is_some_and(|a| a.is_aborted()) {
            outcome.cancelled = true;
            return Ok(outcome);
        }
        self.fakes
            .record(Call::Execute(self.pid, request.code.clone()));
        let code = request.code.trim();
        let takes = match code.strip_prefix("sleep ") {
            Some(seconds) => Some(Duration::from_secs_f64(seconds.parse().unwrap())),
            None if self.hung.load(Ordering::SeqCst) => Some(Duration::MAX / 4),
            None => None,
        };
        if let Some(takes) = takes {
            let aborted = async {
                match &abort {
                    Some(abort) => abort.aborted().await,
                    None => std::future::pending().await,
                }
            };
            let timeout = request.timeout.unwrap_or(Duration::MAX / 4);
            tokio::select! {
                _ = sleep(takes) => {}
                _ = aborted => outcome.cancelled = true,
                _ = sleep(timeout) => {
                    outcome.cancelled = true;
                    outcome.timed_out = true;
                }
            }
            if outcome.cancelled {
                // Interrupted: KeyboardInterrupt in the cell, the kernel lives on.
                outcome.error = Some(ErrorInfo {
                    ename: "KeyboardInterrupt".into(),
                    evalue: String::new(),
                    traceback: Vec::new(),
                });
                return Ok(outcome);
            }
        }
        // The cell's own exception of the name the host gives a death: an error like any
        // other (`raise KernelDied`), and one its kernel dies right after (`... then die`).
        if let Some(rest) = code.strip_prefix("raise KernelDied") {
            let error = ErrorInfo {
                ename: crate::wire::events::KERNEL_DIED.into(),
                evalue: "mine".into(),
                traceback: vec!["KernelDied: mine".into()],
            };
            on_event(KernelEvent::Error(error.clone()));
            outcome.error = Some(error);
            if rest != " then die" {
                outcome.execution_count = self.executions.fetch_add(1, Ordering::SeqCst) + 1;
                return Ok(outcome);
            }
        }
        if code == "die" || code.ends_with(" then die") {
            self.die(1);
            let evalue = format!(
                "the Python kernel died during the cell ({})",
                self.exit_info().expect("dead")
            );
            outcome.kernel_died = true;
            let error = ErrorInfo {
                ename: crate::wire::events::KERNEL_DIED.into(),
                evalue,
                traceback: Vec::new(),
            };
            // As a kernel reports its death: an event, unless the caller holds it.
            if !request.hold_death {
                on_event(KernelEvent::Error(error.clone()));
            }
            outcome.error = Some(error);
            return Ok(outcome);
        }
        let text = format!("ran {code}\n");
        on_event(KernelEvent::Stdout(text.clone()));
        outcome.stdout = text;
        outcome.ok = true;
        outcome.execution_count = self.executions.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(outcome)
    }
}

impl PooledKernel for FakeKernel {
    type Starter = FakeStarter;

    fn pid(&self) -> u32 {
        self.pid
    }

    fn alive(&self) -> bool {
        self.exit.borrow().is_none()
    }

    fn exit_info(&self) -> Option<ExitInfo> {
        *self.exit.borrow()
    }

    fn wait_for_exit(&self, wait: Duration) -> impl Future<Output = Option<ExitInfo>> + Send {
        let mut exit = self.exit.subscribe();
        async move {
            let _ = tokio::time::timeout(wait, exit.wait_for(|e| e.is_some())).await;
            *exit.borrow()
        }
    }

    fn execution_count(&self) -> u32 {
        self.executions.load(Ordering::SeqCst)
    }

    fn queue(&self) -> Place {
        self.queue.join()
    }

    fn ping(&self, wait: Duration) -> impl Future<Output = bool> + Send {
        self.fakes.record(Call::Ping(self.pid));
        async move {
            if self.hung.load(Ordering::SeqCst) {
                sleep(wait).await;
                return false;
            }
            self.alive()
        }
    }

    fn shutdown(&self, _grace: Duration) -> impl Future<Output = ShutdownOutcome> + Send {
        self.fakes.record(Call::Shutdown(self.pid));
        if self.alive() {
            self.exit.send_replace(Some(ExitInfo {
                code: None,
                signal: Some(15),
            }));
        }
        let exit = self.exit_info();
        async move {
            ShutdownOutcome {
                confirmed: true,
                exit,
            }
        }
    }

    fn initialize(&self, config: &KernelConfig) -> impl Future<Output = Result<()>> + Send {
        self.fakes.record(Call::Initialize(self.pid));
        let delay = *self.fakes.start_delay.lock().unwrap();
        let limit = config.startup_timeout;
        let fingerprint = (config.cwd.clone(), config.kv_path());
        async move {
            if delay > limit {
                sleep(limit).await;
                self.die(1);
                return Err(KernelError::StartTimeout {
                    timeout_ms: limit.as_millis() as u64,
                    interpreter: "/fake/bin/python3".into(),
                    stderr: StderrTail(String::new()),
                });
            }
            sleep(delay).await;
            *self.initialized.lock().unwrap() = Some(fingerprint);
            Ok(())
        }
    }

    fn initialized_for(&self, config: &KernelConfig) -> bool {
        *self.initialized.lock().unwrap() == Some((config.cwd.clone(), config.kv_path()))
    }

    fn resolved(&self) -> &Resolved {
        &self.resolved
    }

    fn sees(&self, _path: &Path) -> bool {
        true
    }

    fn session_dir(&self) -> Option<Arc<crate::start::session_dir::SessionDir>> {
        None
    }

    fn not_preloaded(&self, modules: &[String]) -> Vec<String> {
        modules.to_vec()
    }

    async fn preload(
        &self,
        _modules: &[String],
        _wait: Duration,
    ) -> Result<BTreeMap<String, String>> {
        Ok(BTreeMap::new())
    }
}

/// A pool of fake kernels in the host's temporary directory: no spares and no heartbeat
/// unless `adjust` asks for them.
pub(super) fn fake_pool(adjust: impl FnOnce(&mut PoolConfig)) -> (Pool<FakeKernel>, Arc<Fakes>) {
    let mut config = PoolConfig::new(KernelConfig::new(std::env::temp_dir()));
    config.prewarm = 0;
    config.heartbeat_interval = Duration::ZERO;
    adjust(&mut config);
    let fakes = Arc::new(Fakes::default());
    let pool = Pool::with_starter(config, FakeStarter(fakes.clone()));
    (pool, fakes)
}

/// A request for one cell of `code` on session `id`.
pub(super) fn request(id: &str, code: &str) -> PoolRequest {
    PoolRequest {
        cells: vec![Cell {
            code: code.into(),
            ..Default::default()
        }],
        session_id: Some(id.into()),
        ..Default::default()
    }
}

/// Runs one cell of `code` on session `id`, from admission to result.
pub(super) async fn run(pool: &Pool<FakeKernel>, id: &str, code: &str) -> Result<EvalResult> {
    pool.admit(request(id, code))?.run(|_, _| {}).await
}
