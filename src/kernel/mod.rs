//! One Python kernel: a `runner.py` subprocess in its own session, spoken to over NDJSON.
//!
//! Tasks per kernel: a reader routes the runner's frames to the request they belong to, a
//! stderr drain keeps the tail of the runner's own diagnostics (so a chatty child never
//! blocks on a full pipe), and a waiter reaps the process and publishes how it ended.
//! Executes run one at a time, in arrival order.
//!
//! The files: `config` (what a kernel is asked for), `prepare` (everything decided and
//! made before a local kernel's process exists), `spawn` (making the process: spawned,
//! forked from a zygote, or launched), `start` (those steps in order, the connection
//! opened over the process, the `init` handshake), `connection` (the frame writer and
//! reader over the pipes), `execute` (a cell, its budget, its bridge calls, interrupts),
//! `call_limits` (how many bridge calls the host works on at once for one kernel),
//! `end_cause` (what ended a kernel, set once where it happens), `ending` (shutdown,
//! and the report of a kernel that died), `far_side` (a launched kernel's signals and
//! link), `far_link` (a launched kernel's link kept across a drop), `host_calls` (the kv store answered by the host), `egress` (what a cell hears
//! of its kernel's proxy), `watchdog` (a cell's time budget) and `fifo` (executes in
//! arrival order).

mod call_limits;
mod config;
mod connection;
mod egress;
mod end_cause;
mod ending;
mod execute;
mod far_link;
mod far_reports;
mod far_side;
pub mod fifo;
mod host_calls;
mod prepare;
mod spawn;
mod start;
pub mod watchdog;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use self::connection::{FrameWriter, Routes, StreamReport};
use self::end_cause::Ending;
use self::far_side::FarSide;
use self::host_calls::KvHome;
use crate::kernel::fifo::Fifo;
use crate::process::exit::ExitInfo;
use crate::process::reaper::KernelProcess;
use crate::sandbox::{Isolation, Reach};
use crate::start::python::Resolved;
use crate::wire::protocol::{HostFrame, SandboxPolicy};

pub use self::config::{
    check_request_id, default_agent_fault, AbortHandle, Bridge, CallOrigin, Caller, ExecuteRequest,
    KernelConfig, ShutdownOutcome, StartMode, DEFAULT_LINK_TIMEOUT, DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_STARTUP_TIMEOUT, DEFAULT_STATUS_MIME, INTERRUPT_ESCALATION, PRELOAD_WAIT,
};

/// One Python process and the connection to it. Made by `start`; every method that
/// talks to the runner takes `&self`, so a pool shares a kernel as an `Arc`.
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
    /// The schemes whose `read()`/`write()` the host answers (`uriRoots`).
    uri_roots: crate::store::uri_roots::UriRoots,
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
    /// The bounds on the bridge calls the host works on at once for this kernel.
    call_limits: Arc<call_limits::CallLimits>,
    /// The `session_id` it was started with: the bridge's caller when a request names none.
    session_id: Option<String>,
    /// Frames dropped, and whether the kernel was killed for an oversized one.
    stream_report: Arc<StreamReport>,
    /// What ended the kernel, when the host ended it.
    ending: Arc<Ending>,
    /// Set for a kernel started through a launcher.
    far: Option<FarSide>,
    /// The kv store the kernel's `__pykernel.kv` calls reach, from its last init.
    kv_home: Mutex<Option<KvHome>>,
    /// Turns `true` once the kernel's private tmp is removed (it is, once reaped).
    tmp_removed: Option<watch::Receiver<bool>>,
    /// What of the host the kernel's filesystem view shows.
    reach: Reach,
    /// Refusals of its proxy (an allow list), taken by the cell running when they come.
    denials: Option<
        tokio::sync::Mutex<
            tokio::sync::mpsc::UnboundedReceiver<crate::sandbox::egress_proxy::Denied>,
        >,
    >,
    /// Its session's directory, while the kernel lives.
    session_dir: Option<std::sync::Weak<crate::start::session_dir::SessionDir>>,
    /// What its sandbox confines (the runner's `init` carries it); none without one.
    policy: Option<SandboxPolicy>,
    start_mode: StartMode,
    preloaded: Vec<String>,
}

impl Kernel {
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

    /// Its session's directory (installs and caches), while it lives (`None` without).
    pub fn session_dir(&self) -> Option<Arc<crate::start::session_dir::SessionDir>> {
        self.session_dir.as_ref()?.upgrade()
    }

    /// What this kernel's sandbox confines, as its runner was told; `None` with the
    /// sandbox off and for a launched kernel.
    pub fn sandbox_policy(&self) -> Option<&SandboxPolicy> {
        self.policy.as_ref()
    }

    /// The protections this kernel runs under, and the defaults it lacks.
    pub fn isolation(&self) -> &Isolation {
        &self.isolation
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

    /// The `session_id` it was started with, which its bridge calls name by default.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
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

    pub(super) async fn send(&self, frame: &HostFrame) -> std::io::Result<()> {
        self.writer.send(frame).await
    }
}
