//! Running an admitted request ([`Admission`]): its turn in the session, the session's
//! kernel (started, restarted after a death, replaced for a reset), a `per-call` request's
//! own kernels, and the request's deadline.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{KernelError, Result};
use crate::eval::executor::{Cell, EvalOptions, EvalResult, Evaluation};
use crate::kernel::fifo::{Place, Turn};
use crate::kernel::{AbortHandle, Caller, Kernel};
use crate::output::notice_line;
use crate::session::config::PoolRequest;
use crate::session::inner::PoolInner;
use crate::session::per_call::run_per_call;
use crate::session::pooled::PooledKernel;
use crate::session::request_end::{reset_failed, stopped, until_deadline};
use crate::session::room::Stopped;
use crate::session::site::Site;
use crate::session::slots::Slot;
use crate::session::state::{Session, StateLost};
use crate::wire::events::KernelEvent;

/// A request admitted at call time: its session and place in line are fixed.
pub struct Admission<K: PooledKernel = Kernel> {
    pub(super) pool: Arc<PoolInner<K>>,
    pub(super) target: Target<K>,
    pub(super) request: PoolRequest,
    pub(super) annotations: Vec<String>,
    pub(super) timeout: Option<Duration>,
    pub(super) caller: Caller,
    pub(super) deadline: Option<tokio::time::Instant>,
}

pub(super) enum Target<K> {
    Session {
        session: Arc<Session<K>>,
        place: Place,
        reset_epoch: Option<u64>,
    },
    PerCall(Site),
}

impl<K: PooledKernel> Admission<K> {
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
        let session = matches!(self.target, Target::Session { .. });
        let watch = DeadlineWatch::start(at, budget, session, &caller_abort);
        self.request.abort = Some(watch.abort.clone());
        let result = self.run_admitted(on_event).await;
        // A start cut short by the deadline may end before the watch has seen it pass.
        let start_cut = matches!(result, Err(KernelError::StartTimeout { .. }))
            && tokio::time::Instant::now() >= at;
        match watch.passed() || start_cut {
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
        let mut options = EvalOptions {
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
            artifact_path: request.artifact_path.clone(),
            uri_roots: request.uri_roots.clone(),
            ..Default::default()
        };
        // A session's request that reached no kernel runs again in a fresh one (below).
        options.rerun_unstarted = matches!(target, Target::Session { .. });
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
    /// The request runs in a session's kernel, which outlives it.
    session: bool,
    task: tokio::task::JoinHandle<()>,
}

impl DeadlineWatch {
    fn start(
        at: tokio::time::Instant,
        budget: Duration,
        session: bool,
        caller_abort: &Arc<AbortHandle>,
    ) -> Self {
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
            session,
            task,
        }
    }

    fn passed(&self) -> bool {
        self.passed.load(Ordering::SeqCst)
    }

    /// The request's result as a timeout: `timedOut`, and a notice of where it stopped,
    /// worded as the reference agent's ("Command timed out after N s"), which hosts match.
    /// A kernel start cut short by the deadline is a timed-out result too, not an error.
    fn say_so(&self, result: Result<EvalResult>) -> Result<EvalResult> {
        let mut result = match result {
            Ok(result) => result,
            Err(KernelError::StartTimeout { .. }) => EvalResult {
                cancelled: true,
                ..Default::default()
            },
            Err(other) => return Err(other),
        };
        // Said in the deadline's words only: the abort that stopped it was the deadline's.
        let aborted: Vec<String> = result
            .annotations
            .iter()
            .filter(|a| a.starts_with(Stopped::PREFIX))
            .cloned()
            .collect();
        for notice in aborted {
            result.output = result.output.replacen(&notice_line(&notice), "", 1);
            result.annotations.retain(|a| *a != notice);
        }
        let after = deadline_words(self.budget);
        let started = result
            .cells
            .iter()
            .rposition(|c| !c.outcome.not_started && c.outcome.cancelled);
        let notice = match started {
            // As with a timeout, a cell that ignores the interrupt gets its kernel killed.
            Some(index) if result.kernel_died => format!(
                "Command timed out after {after} (the request's deadline) during cell {}; it did not stop on interrupt, so the kernel was killed and will be recreated on the next call.",
                index + 1
            ),
            Some(index) if self.session => format!(
                "Command timed out after {after} (the request's deadline) during cell {}; the kernel was interrupted and later cells did not run. It keeps its state: reset it with {{ reset: true }} if that state looks corrupted.",
                index + 1
            ),
            Some(index) => format!(
                "Command timed out after {after} (the request's deadline) during cell {}; the kernel was interrupted and later cells did not run.",
                index + 1
            ),
            None if result.cells.is_empty() => format!(
                "Command timed out after {after} (the request's deadline) before its first cell started; nothing ran."
            ),
            None => format!(
                "Command timed out after {after} (the request's deadline) before its next cell started; that cell and later ones did not run."
            ),
        };
        result.add_notice(notice);
        result.timed_out = true;
        result.cancelled = true;
        result.kernel_killed |= result.kernel_died;
        result.exit_code = None;
        Ok(result)
    }
}

/// A request's deadline as its notice says it: whole seconds as the reference agent
/// prints them (4100 ms is "4 s"), a budget under a second in milliseconds ("500 ms").
fn deadline_words(budget: Duration) -> String {
    if budget < Duration::from_secs(1) {
        format!("{} ms", budget.as_millis())
    } else {
        format!("{} s", budget.as_secs_f64().round() as u64)
    }
}

impl Drop for DeadlineWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A session's call stopped before its kernel was ready: by disposal of the session (which
/// stops a waiting call as it stops a running cell), else by its caller's abort.
fn aborted_before_kernel<K: PooledKernel>(
    session: &Session<K>,
    evaluation: Evaluation,
    why: Stopped,
) -> Result<EvalResult> {
    if session.disposed.load(Ordering::SeqCst) {
        return Err(KernelError::SessionDisposed);
    }
    Ok(stopped(evaluation, why))
}

// The request's parts, each used at a different step; a struct of them would only rename.
#[allow(clippy::too_many_arguments)]
async fn run_in_session<K: PooledKernel>(
    pool: &Arc<PoolInner<K>>,
    session: &Session<K>,
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
    if let Some(lost) = session.lost_while_idle.lock().unwrap().take() {
        evaluation.annotate(lost.notice);
        evaluation.result_mut().session_lost = true;
        evaluation.result_mut().kernel_restarted = lost.kernel_ended;
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
                evaluation.result_mut().kernel_restarted = true;
                if let Some(old) = session.take_kernel() {
                    room = pool.end(old).await;
                }
            }
            match start_kernel(pool, session, room, &abort, deadline).await? {
                Ok(kernel) => kernel,
                Err(why) => return aborted_before_kernel(session, evaluation, why),
            }
        }
    };
    let turn = kernel.queue().turn().await;
    let ran = evaluation.run(&*kernel, &turn, &mut *on_event).await;
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
            let kernel = match start_kernel(pool, session, room, &abort, deadline).await? {
                Ok(kernel) => kernel,
                Err(why) => return aborted_before_kernel(session, evaluation, why),
            };
            evaluation.annotate(format!(
                "The Python kernel ended before this call's first cell reached it ({exit}); a new one was started, the cells ran in it, and earlier state is gone."
            ));
            evaluation.result_mut().kernel_restarted = true;
            evaluation.result_mut().session_lost = true;
            let turn = kernel.queue().turn().await;
            evaluation.run(&*kernel, &turn, &mut *on_event).await?;
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
        let kernel = match started {
            Ok(kernel) => kernel,
            Err(why) => return aborted_before_kernel(session, evaluation, why),
        };
        let turn = kernel.queue().turn().await;
        evaluation.run(&*kernel, &turn, &mut *on_event).await?;
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
            let notice = match dead.kernel.exit_info() {
                _ if result.kernel_killed => "The Python kernel was killed during the last call; a new one was started and earlier state is gone.".to_string(),
                Some(exit) => format!("The Python kernel died during the last call ({exit}); a new one was started and earlier state is gone."),
                None => "The Python kernel died during the last call; a new one was started and earlier state is gone.".to_string(),
            };
            *session.lost_while_idle.lock().unwrap() = Some(StateLost::kernel_ended(notice));
            pool.end(dead).await;
        }
    }
    Ok(result)
}

/// Starts the session's kernel in `room`, or in room found for it. `Err(Stopped)`: aborted
/// before it was ready.
async fn start_kernel<K: PooledKernel>(
    pool: &Arc<PoolInner<K>>,
    session: &Session<K>,
    room: Option<Slot>,
    abort: &AbortHandle,
    deadline: Option<tokio::time::Instant>,
) -> Result<std::result::Result<Arc<K>, Stopped>> {
    let Some((config, load)) = pool.placed(&session.site, abort).await? else {
        return Ok(Err(Stopped::WaitingForRoom));
    };
    tracing::info!(key = %session.key, "starting kernel");
    let mut config = until_deadline(&config, deadline);
    config.session_dir = session.dir.lock().unwrap().clone();
    let live = match pool.new_kernel(&config, room, abort, load).await? {
        Ok(live) => live,
        Err(why) => return Ok(Err(why)),
    };
    {
        // A session that has installed nothing yet takes its kernel's directory (a
        // claimed spare's own); later kernels get the session's.
        let mut dir = session.dir.lock().unwrap();
        if dir.as_ref().is_none_or(|d| d.is_empty()) {
            if let Some(started_with) = live.kernel.session_dir() {
                *dir = Some(started_with);
            }
        }
    }
    let kernel = live.kernel.clone();
    *session.kernel.lock().unwrap() = Some(live);
    session.had_kernel.store(true, Ordering::SeqCst);
    Ok(Ok(kernel))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::{sleep, Instant};

    use crate::session::fake::{fake_pool, request, run};
    use crate::session::pooled::PooledKernel;

    /// Only the host reports a death: a cell's own `KernelDied` is an error like any other,
    /// shown when it comes, and kept when the kernel then dies too.
    #[tokio::test(start_paused = true)]
    async fn a_cells_own_kernel_died_error_is_shown_as_any_error_is() {
        let (pool, _fakes) = fake_pool(|_| {});
        let errors = |events: &[crate::wire::events::KernelEvent]| -> Vec<String> {
            events
                .iter()
                .filter_map(|e| match e {
                    crate::wire::events::KernelEvent::Error(e) => {
                        Some(format!("{}: {}", e.ename, e.evalue))
                    }
                    _ => None,
                })
                .collect()
        };
        let mut events = Vec::new();
        let mine = pool
            .admit(request("a", "raise KernelDied"))
            .unwrap()
            .run(|_, event| events.push(event))
            .await
            .unwrap();
        assert_eq!(errors(&events), ["KernelDied: mine"]);
        assert!(!mine.kernel_died);
        assert_eq!(mine.exit_code, Some(1));
        assert!(mine.output.contains("KernelDied: mine"), "{}", mine.output);

        let mut events = Vec::new();
        let both = pool
            .admit(request("a", "raise KernelDied then die"))
            .unwrap()
            .run(|_, event| events.push(event))
            .await
            .unwrap();
        assert!(both.kernel_died);
        assert_eq!(
            errors(&events),
            [
                "KernelDied: mine",
                "KernelDied: the Python kernel died during the cell (exit code 1)"
            ],
            "the cell's error, then the host's report of the death"
        );
        assert!(both.output.contains("KernelDied: mine"), "{}", both.output);
    }

    #[tokio::test(start_paused = true)]
    async fn a_kernel_that_died_under_a_cell_is_replaced_and_the_cell_not_run_again() {
        let (pool, fakes) = fake_pool(|_| {});
        let died = run(&pool, "a", "die").await.unwrap();
        assert!(died.kernel_died);
        assert_eq!(died.exit_code, Some(1));
        assert_eq!(
            died.annotations,
            [
                "the Python kernel died during the cell (exit code 1); the kernel's state was lost and it will be recreated on the next call.",
                "Cell 1 had started, so it was not run again: it may have had effects before the kernel died. A fresh kernel starts on the next call.",
            ]
        );
        assert_eq!(
            fakes.ran("die"),
            [1000],
            "run once, in the kernel that died"
        );
        assert_eq!(
            fakes.shut_down(),
            [1000],
            "the dead kernel was ended, its room freed"
        );

        let next = run(&pool, "a", "1").await.unwrap();
        assert_eq!(next.exit_code, Some(0));
        assert_eq!(fakes.ran("1"), [1001]);
        assert!(
            next.session_lost && next.kernel_restarted,
            "the next call is told its state is gone"
        );
        assert_eq!(
            next.annotations,
            ["The Python kernel died during the last call (exit code 1); a new one was started and earlier state is gone."]
        );
        let after = run(&pool, "a", "2").await.unwrap();
        assert!(!after.session_lost && !after.kernel_restarted && after.annotations.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_next_call_after_a_death_while_idle_gets_a_fresh_kernel_and_is_told() {
        let (pool, fakes) = fake_pool(|_| {});
        run(&pool, "a", "1").await.unwrap();
        fakes.kernel(1000).die(3);

        let next = run(&pool, "a", "2").await.unwrap();
        assert_eq!(next.exit_code, Some(0));
        assert!(next.session_lost);
        assert!(next.kernel_restarted, "a dead kernel replaced is a restart");
        assert_eq!(
            next.annotations,
            ["The Python kernel had ended since the last call (exit code 3); a new one was started and earlier state is gone."]
        );
        assert_eq!(fakes.ran("2"), [1001]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_whose_first_cell_never_reached_the_dead_kernel_runs_in_a_fresh_one() {
        let (pool, fakes) = fake_pool(|_| {});
        run(&pool, "a", "1").await.unwrap();
        fakes.kernel(1000).die_before_next_cell();

        let next = run(&pool, "a", "2").await.unwrap();
        assert_eq!(next.exit_code, Some(0));
        assert!(next.kernel_restarted);
        assert!(next.session_lost);
        assert_eq!(
            next.annotations,
            ["The Python kernel ended before this call's first cell reached it (exit code 1); a new one was started, the cells ran in it, and earlier state is gone."]
        );
        assert_eq!(fakes.ran("2"), [1001], "written only to the fresh kernel");
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_that_passes_during_a_cell_interrupts_it() {
        let (pool, fakes) = fake_pool(|_| {});
        let mut cells = request("a", "sleep 10");
        cells.deadline = Some(Duration::from_secs(2));
        let asked = Instant::now();
        let result = pool.admit(cells).unwrap().run(|_, _| {}).await.unwrap();
        assert_eq!(asked.elapsed(), Duration::from_secs(2));
        assert!(result.timed_out && result.cancelled);
        assert_eq!(result.exit_code, None);
        assert_eq!(
            result.annotations,
            ["Command timed out after 2 s (the request's deadline) during cell 1; the kernel was interrupted and later cells did not run. It keeps its state: reset it with { reset: true } if that state looks corrupted."]
        );
        assert!(
            fakes.kernel(1000).alive(),
            "interrupted, the kernel remains"
        );
        assert!(fakes.shut_down().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_that_passes_while_waiting_for_room_runs_nothing() {
        let (pool, fakes) = fake_pool(|c| c.max_sessions = 1);
        let _busy = tokio::spawn(pool.admit(request("a", "sleep 10")).unwrap().run(|_, _| {}));
        sleep(Duration::from_secs(1)).await;

        let mut waiting = request("b", "1");
        waiting.deadline = Some(Duration::from_secs(2));
        let asked = Instant::now();
        let result = pool.admit(waiting).unwrap().run(|_, _| {}).await.unwrap();
        assert_eq!(asked.elapsed(), Duration::from_secs(2));
        assert!(result.timed_out && result.cancelled);
        assert_eq!(
            result.annotations,
            ["Command timed out after 2 s (the request's deadline) before its first cell started; nothing ran."]
        );
        assert_eq!(
            result.output,
            "[Command timed out after 2 s (the request's deadline) before its first cell started; nothing ran.]\n"
        );
        assert!(fakes.ran("1").is_empty());
        assert_eq!(fakes.spawned(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_that_passes_while_the_kernel_starts_runs_nothing() {
        let (pool, fakes) = fake_pool(|_| {});
        // A real spawn takes a moment, so the start-up timeout, cut to what is left of the
        // deadline before the spawn, ends just after the deadline.
        fakes.set_spawn_delay(Duration::from_millis(1));
        fakes.set_start_delay(Duration::from_secs(5));
        let mut slow = request("a", "1");
        slow.deadline = Some(Duration::from_secs(1));
        let asked = Instant::now();
        let result = pool.admit(slow).unwrap().run(|_, _| {}).await.unwrap();
        assert_eq!(
            asked.elapsed(),
            Duration::from_secs(1),
            "stopped by the deadline"
        );
        assert!(result.timed_out && result.cancelled);
        assert_eq!(result.exit_code, None);
        assert_eq!(
            result.annotations,
            ["Command timed out after 1 s (the request's deadline) before its first cell started; nothing ran."]
        );
        assert!(!result.output.contains("(no output)"), "{}", result.output);
        assert!(fakes.ran("1").is_empty());
        assert_eq!(
            fakes.shut_down(),
            [1000],
            "the kernel being started was ended"
        );
    }
}
