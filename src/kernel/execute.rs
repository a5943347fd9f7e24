//! Running a cell: the request's frames, its time budget and the escalation from an
//! interrupt to a kill, bridge calls answered while it runs, interrupts, and the other
//! requests (preload, isComplete, ping).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, timeout, Instant};

use super::call_limits::CallSlot;
use super::config::{
    AbortHandle, CallOrigin, Caller, ExecuteRequest, DEFAULT_SHUTDOWN_GRACE, INTERRUPT_ESCALATION,
};
use super::connection::{fold_waiting_text, open_route, RunningGuard, FRAME_WRITE_WAIT};
use super::egress::CellRefusals;
use super::end_cause::EndCause;
use super::host_calls::{kv_call, uri_write, UriRead, KV_CALL, READ_CALL, WRITE_CALL};
use super::Kernel;
use crate::error::{KernelError, Result};
use crate::kernel::fifo::{Place, Turn};
use crate::kernel::watchdog::Watchdog;
use crate::store::uri_roots::UriRoots;
use crate::wire::events::{Collector, ExecuteOutcome, KernelEvent};
use crate::wire::protocol::{Completeness, HostFrame, RunnerFrame};

impl Kernel {
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
            let exit = match self.ending.cause() {
                Some(EndCause::ProcessLimit { limit }) => format!(
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
        let hold_death = request.hold_death;
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
        let uri_roots = Arc::new(self.uri_roots.with(request.uri_roots.as_ref()));
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
        let mut refusals = CellRefusals::open(self.denials.as_ref()).await;
        // Set once the cell is to be stopped; the kernel is killed if it is still running then.
        let mut escalation: Option<Instant> = None;
        let mut killed = false;
        // A frame taken from `rx` while folding text that did not fold: the next one to handle.
        let mut carried: Option<RunnerFrame> = None;
        // A call frame that found every slot taken (see `call_limits`): no frame is read
        // past it until a reply frees a slot, so a flood of calls waits in the runner's
        // pipe, not in the host's memory. The kernel's end lets it go unanswered.
        let mut waiting_call: Option<CallFrame> = None;
        let mut exit = self.exit.clone();
        loop {
            let mut ready_call: Option<(CallFrame, CallSlot)> = None;
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
                Some(denied) = refusals.next() => {
                    if let Some(status) = refusals.status(denied) {
                        on_event(collector.host_status(status));
                    }
                    false
                }
                _ = sleep_until(escalation.unwrap_or_else(Instant::now)),
                    if escalation.is_some() && !killed => {
                    // The cell ignored the interrupt (C code, SIG_IGN): end the kernel.
                    killed = true;
                    self.ending.set(EndCause::InterruptIgnored);
                    self.terminate(DEFAULT_SHUTDOWN_GRACE).await;
                    false
                }
                slot = self.call_limits.slot(), if waiting_call.is_some() => {
                    ready_call = waiting_call.take().map(|call| (call, slot));
                    false
                }
                _ = async { drop(exit.wait_for(Option::is_some).await) }, if waiting_call.is_some() => {
                    // No reply can reach a dead kernel: read on to the end of its frames.
                    waiting_call = None;
                    false
                }
                frame = async {
                    match carried.take() {
                        Some(frame) => Some(frame),
                        None => rx.recv().await,
                    }
                }, if waiting_call.is_none() => {
                    match frame {
                        Some(RunnerFrame::Call { call_id, name, args, .. }) => {
                            let call = CallFrame { call_id, name, args };
                            match self.call_limits.try_slot() {
                                Some(slot) => ready_call = Some((call, slot)),
                                // A cell being stopped gets no slot to wait for: the
                                // runner fails its calls itself once the cell ends.
                                None if escalation.is_some() => {}
                                None => waiting_call = Some(call),
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
            if let Some((call, slot)) = ready_call {
                if escalation.is_some() {
                    // The cell is being stopped: no new work for the host.
                    self.refuse_call(call.call_id, &call.name, slot);
                } else {
                    // Only waiting on another model stops the clock.
                    let pauses = crate::kernel::watchdog::pauses_for(&call.name);
                    if pauses && watchdog.pause(std::time::Instant::now()) {
                        on_event(
                            collector
                                .host_status(crate::kernel::watchdog::paused_status(&call.name)),
                        );
                    }
                    let done = pauses.then(|| call_done_tx.clone());
                    let caller = request.caller.clone().unwrap_or_else(|| Caller {
                        session_id: self.session_id.clone(),
                        ..Caller::default()
                    });
                    let origin = CallOrigin {
                        run_id: id.clone(),
                        session_id: caller.session_id,
                        owner: caller.owner,
                        request_id: caller.request_id,
                    };
                    self.answer_call(origin, call, done, uri_roots.clone(), slot);
                }
            }
            if stop_requested {
                collector.outcome.cancelled = true;
                escalation = Some(Instant::now() + INTERRUPT_ESCALATION);
                // Read on: the stopped cell's last frames are behind it, and its calls fail
                // in the runner as the cell ends (a reply could not reach them sooner if
                // every slot is held by replies the runner is not reading).
                waiting_call = None;
                self.interrupt_request(&id).await;
            }
        }
        for status in refusals.rest() {
            on_event(collector.host_status(status));
        }
        // A call a thread left in flight: the pause ends with the cell, so a UI is not left
        // showing a stopped clock.
        if let Some(paused_for) = watchdog.end(std::time::Instant::now()) {
            on_event(collector.host_status(crate::kernel::watchdog::resumed_status(paused_for)));
        }
        let finished = collector.is_done();
        let mut outcome = collector.outcome;
        if !finished {
            self.report_death(&mut outcome).await;
            if let Some(error) = outcome.error.as_ref().filter(|_| !hold_death) {
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
    pub(super) fn request_id(&self, kind: char) -> String {
        use std::hash::{BuildHasher, Hasher};
        let n = self.next_id.fetch_add(1, Ordering::SeqCst);
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(n);
        format!("{kind}{n}-{:08x}", hasher.finish() as u32)
    }

    /// The status event that tells, once per kernel, which default protections it lacks.
    pub(super) fn isolation_notice(&self) -> Option<KernelEvent> {
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

    /// SIGINT to the kernel's process group: the running cell gets KeyboardInterrupt and
    /// shell children it started are interrupted too. Between cells the runner ignores it.
    pub fn interrupt(&self) {
        self.kill_group(Signal::SIGINT);
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
    pub(super) async fn interrupt_request(&self, id: &str) {
        let frame = HostFrame::Interrupt { id: id.to_string() };
        // Never let a full pipe hold back the signal.
        let _ = timeout(FRAME_WRITE_WAIT, self.send(&frame)).await;
        self.interrupt();
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
            Ok(None) => Err(self.gone().await),
            Err(_) => Err(KernelError::StartTimeout {
                timeout_ms: wait.as_millis() as u64,
                interpreter: self.interpreter().to_string(),
                stderr: self.stderr_tail().await,
            }),
        }
    }

    /// Whether `code`, a REPL's lines so far, is a cell to run, as the runner's `codeop`
    /// answers after its input rules (`docs/protocol.md#iscomplete`), in the turn `place`
    /// holds: asked while a cell runs, it is answered after that cell. An error when the
    /// kernel has died.
    /// Cancel safety: dropping the future gives up the turn; an answer that comes later
    /// reaches no request.
    pub async fn is_complete_in_turn(&self, place: Place, code: String) -> Result<Completeness> {
        let _turn = place.turn().await;
        let id = self.request_id('c');
        let (mut rx, _route) = open_route(&self.routes, &id);
        let frame = HostFrame::IsComplete {
            id: id.clone(),
            code,
        };
        if self.send(&frame).await.is_ok() {
            while let Some(frame) = rx.recv().await {
                if let RunnerFrame::Completeness { status, .. } = frame {
                    return Ok(status);
                }
            }
        }
        Err(self.gone().await)
    }

    /// The error of a request whose kernel closed its pipes (it died, or is ending).
    async fn gone(&self) -> KernelError {
        KernelError::KernelDead {
            exit: self
                .exit_info()
                .map_or("closed its protocol pipe".into(), |e| e.to_string()),
            stderr: self.stderr_tail().await,
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
    /// `slot` is held until then.
    fn answer_call(
        &self,
        origin: CallOrigin,
        call: CallFrame,
        done: Option<mpsc::UnboundedSender<()>>,
        uri_roots: Arc<UriRoots>,
        slot: CallSlot,
    ) {
        let CallFrame {
            call_id,
            name,
            args,
        } = call;
        let limits = self.call_limits.clone();
        let bridge = self.bridge.clone();
        let artifacts_dir = self.artifacts_dir.clone();
        let kv_home = self.kv_home.lock().unwrap().clone();
        self.spawn_reply(
            async move {
                if name == KV_CALL {
                    let answer = match kv_home {
                        Some(home) => limits
                            .blocking(move || kv_call(&home, &args))
                            .await
                            .unwrap_or_else(Err),
                        None => Err("the kv store needs artifactsDir and sessionId on the kernel (none was given, so there is no store)".into()),
                    };
                    return reply_frame(call_id, answer);
                }
                if name == WRITE_CALL {
                    let answer = limits
                        .blocking(move || uri_write(&uri_roots, &args))
                        .await
                        .unwrap_or_else(Err);
                    return reply_frame(call_id, answer);
                }
                // The prelude's `read()` of a `scheme://` path: answered from a mapped root,
                // else passed on as the `read` call hosts know, its answer under `reply`.
                let (name, args, wrapped) = if name == READ_CALL {
                    let read = match UriRead::parse(&args) {
                        Ok(read) => read,
                        Err(error) => return reply_frame(call_id, Err(error)),
                    };
                    if uri_roots.find(&read.path).is_some() {
                        let answer = limits
                            .blocking(move || read.answer(&uri_roots).ok_or("no root".to_string()))
                            .await
                            .unwrap_or_else(Err);
                        return reply_frame(call_id, answer);
                    }
                    ("read".to_string(), read.host_call(), true)
                } else {
                    (name, args, false)
                };
                // `read('artifact://<id>')` of an output kept in this kernel's
                // artifactsDir is answered here; any other read, or an artifact that is
                // not there, goes to the host.
                let local = match (
                    crate::output::artifact_read_call(&name, &args),
                    artifacts_dir,
                ) {
                    (Some(uri), Some(dir)) => limits
                        .blocking(move || crate::output::read_artifact(&dir, &uri))
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
                let answer = answer.map(|value| match wrapped {
                    true => serde_json::json!({ "reply": value }),
                    false => value,
                });
                reply_frame(call_id, answer)
            },
            done,
            slot,
        );
    }

    fn refuse_call(&self, call_id: String, name: &str, slot: CallSlot) {
        let reply = HostFrame::Reply {
            call_id,
            ok: false,
            value: None,
            error: Some(format!(
                "bridge call '{name}' aborted: eval cell was interrupted"
            )),
        };
        self.spawn_reply(async move { reply }, None, slot);
    }

    /// Replies are written from their own task so a slow call never holds up the cell's
    /// frames, and many calls can be in flight at once (as many as `call_limits` allows:
    /// the slot is given back once the reply is written, or cannot be).
    fn spawn_reply(
        &self,
        reply: impl std::future::Future<Output = HostFrame> + Send + 'static,
        done: Option<mpsc::UnboundedSender<()>>,
        slot: CallSlot,
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
            drop(slot);
        });
    }
}

/// A `call` frame of the running request, answered once it has a slot.
struct CallFrame {
    call_id: String,
    name: String,
    args: Value,
}

/// The reply to call `call_id`: its value, or the error the cell raises as a RuntimeError.
fn reply_frame(call_id: String, answer: std::result::Result<Value, String>) -> HostFrame {
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
}
