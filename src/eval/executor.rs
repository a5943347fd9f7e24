//! Cells -> one kernel -> the agent-ready result.
//!
//! Every event is streamed to the caller as it comes and folded, as it comes, into one
//! bounded [`AgentText`]: a cell that prints a gigabyte costs the host its head and tail,
//! not the gigabyte (the artifact file, when configured, gets every byte).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::Result;
use crate::eval::agent_text::{AgentText, AgentTextOptions, AgentTextResult};
use crate::eval::live::{LiveCell, OnOutput};
use crate::eval::refusals::RefusalNotices;
use crate::kernel::fifo::Turn;
use crate::kernel::{AbortHandle, Caller, ExecuteRequest, Kernel};
use crate::output::{notice_line, ArtifactSink, Image, OutputLimits};
use crate::wire::events::{ExecuteOutcome, KernelEvent};
use crate::wire::protocol::SandboxPolicy;

/// What cells run on: a [`Kernel`], or a stand-in for one in the session layer's unit
/// tests (the pool's logic around a kernel is tested without Python).
pub trait RunsCells: Sync {
    /// Runs one cell while the caller holds the kernel's turn, as
    /// [`Kernel::execute_holding`] does.
    fn execute_holding(
        &self,
        turn: &Turn,
        request: ExecuteRequest,
        abort: Option<Arc<AbortHandle>>,
        on_event: impl FnMut(KernelEvent) + Send,
    ) -> impl Future<Output = Result<ExecuteOutcome>> + Send;

    /// What the kernel's sandbox confines, which words its refusals; none by default.
    fn sandbox_policy(&self) -> Option<&SandboxPolicy> {
        None
    }
}

impl RunsCells for Kernel {
    fn execute_holding(
        &self,
        turn: &Turn,
        request: ExecuteRequest,
        abort: Option<Arc<AbortHandle>>,
        on_event: impl FnMut(KernelEvent) + Send,
    ) -> impl Future<Output = Result<ExecuteOutcome>> + Send {
        Kernel::execute_holding(self, turn, request, abort, on_event)
    }

    fn sandbox_policy(&self) -> Option<&SandboxPolicy> {
        Kernel::sandbox_policy(self)
    }
}

/// How much of a cell's stdout/stderr is kept in its per-cell result; `output` is what the
/// agent reads, and the artifact holds everything.
pub const CELL_CAPTURE_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, Default)]
pub struct Cell {
    pub code: String,
    pub title: Option<String>,
    /// This cell's own timeout in place of the request's; `Some(None)` is none.
    pub timeout: Option<Option<Duration>>,
    /// A fresh kernel before this cell: [`Evaluation::run`] stops before it (unless it is
    /// the first cell of the run) for the pool to replace the kernel.
    pub reset: bool,
}

#[derive(Default)]
pub struct EvalOptions {
    /// Per cell; `None` is no timeout.
    pub timeout: Option<Duration>,
    pub abort: Option<Arc<AbortHandle>>,
    pub artifacts_dir: Option<PathBuf>,
    pub status_mime: String,
    /// Notices decided before any cell ran (e.g. a clamped timeout).
    pub annotations: Vec<String>,
    pub limits: OutputLimits,
    /// The name of the full output's artifact (checked); a fresh one by default.
    pub artifact_id: Option<String>,
    /// Keep the text/plain stand-in next to an image (`<Figure size ...>`).
    pub include_figure_text: bool,
    /// Receives the sanitized agent text as it is built (see `agent_text` and `live`).
    pub on_output: Option<OnOutput>,
    /// Variables for each cell of the request only (`None` unsets), undone after each.
    pub env: Option<BTreeMap<String, Option<String>>>,
    /// Who the request runs for, as its bridge calls say.
    pub caller: Option<Caller>,
    /// The exact file the full output goes to when cut (checked with
    /// `output::check_artifact_path`), in place of one in `artifacts_dir`.
    pub artifact_path: Option<PathBuf>,
    /// The working directory the request's first cell runs in; it stays the kernel's.
    pub cwd: Option<String>,
    /// A request none of whose cells reached its kernel runs again in a fresh one (the
    /// pool's sessions): the death of that first kernel is then not part of its output.
    pub rerun_unstarted: bool,
    /// `uriRoots` for this request, in place of the kernel's for the same schemes.
    pub uri_roots: Option<crate::store::uri_roots::UriRoots>,
}

#[derive(Debug, Clone, Default)]
pub struct CellResult {
    pub outcome: ExecuteOutcome,
    pub title: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct TruncationInfo {
    pub total_bytes: u64,
    pub total_lines: u64,
    pub artifact_path: Option<PathBuf>,
    /// Its id: `artifact://<id>` in the output.
    pub artifact_id: Option<String>,
    /// Why the artifact could not be kept, when it should have been.
    pub artifact_error: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct EvalResult {
    pub cells: Vec<CellResult>,
    pub failed_cell: Option<usize>,
    pub output: String,
    /// 0 ok, 1 failed, `None` cancelled.
    pub exit_code: Option<i32>,
    pub cancelled: bool,
    pub timed_out: bool,
    pub kernel_killed: bool,
    pub kernel_died: bool,
    pub kernel_restarted: bool,
    /// The session's earlier state was gone before this call's cells ran (evicted, or its
    /// kernel had ended); the annotations say why.
    pub session_lost: bool,
    pub annotations: Vec<String>,
    pub images: Vec<Image>,
    pub json: Vec<Value>,
    /// The charts of the figures shown (docs/charts.md), in order.
    pub charts: Vec<Value>,
    pub statuses: Vec<(String, Value)>,
    pub truncated: Option<TruncationInfo>,
}

impl EvalResult {
    /// Adds a notice learnt after the result was built (such as the host's `onEvent`
    /// throwing): it joins `annotations`, and its `[...]` line follows theirs at the head
    /// of `output`.
    pub fn add_notice(&mut self, notice: impl Into<String>) {
        let notice = notice.into();
        let head: String = self.annotations.iter().map(|a| notice_line(a)).collect();
        let at = if self.output.starts_with(&head) {
            head.len()
        } else {
            0
        };
        self.output.insert_str(at, &notice_line(&notice));
        self.annotations.push(notice);
    }
}

/// Runs `cells` in order on `kernel`, stopping at the first that fails; `turn` is the
/// kernel's, held for all of them.
pub async fn evaluate(
    kernel: &Kernel,
    turn: &Turn,
    cells: Vec<Cell>,
    options: EvalOptions,
    on_event: impl FnMut(usize, KernelEvent) + Send,
) -> Result<EvalResult> {
    let mut evaluation = Evaluation::new(cells, options);
    evaluation.run(kernel, turn, on_event).await?;
    Ok(evaluation.finish())
}

/// One request's cells and what they produced so far. A request may span two kernels:
/// when one dies under a cell, the pool starts another and calls [`Evaluation::run`]
/// again, which retries that cell and goes on from there.
pub struct Evaluation {
    cells: Vec<Cell>,
    /// The next cell to run.
    next: usize,
    options: EvalOptions,
    result: EvalResult,
    text: AgentText,
    /// The sandbox's refusals so far, each to be told once.
    refusals: RefusalNotices,
}

impl Evaluation {
    pub fn new(cells: Vec<Cell>, options: EvalOptions) -> Self {
        let artifact = match (&options.artifact_path, &options.artifacts_dir) {
            (Some(path), _) => Some(ArtifactSink::at_path(path.clone())),
            (None, Some(dir)) => Some(match options.artifact_id.clone() {
                Some(id) => ArtifactSink::named(dir.clone(), id),
                None => ArtifactSink::in_dir(dir.clone()),
            }),
            (None, None) => None,
        };
        let text = AgentText::new(AgentTextOptions {
            limits: options.limits,
            artifact,
            status_mime: options.status_mime.clone(),
            include_figure_text: options.include_figure_text,
            live: options.on_output.is_some(),
        });
        Evaluation {
            cells,
            next: 0,
            result: EvalResult {
                annotations: options.annotations.clone(),
                ..Default::default()
            },
            options,
            text,
            refusals: RefusalNotices::default(),
        }
    }

    pub fn annotate(&mut self, notice: impl Into<String>) {
        self.result.annotations.push(notice.into());
    }

    /// The cell that failed, with whether the kernel died under it (not killed by us).
    pub fn died_on_its_own(&self) -> Option<usize> {
        let index = self.result.failed_cell?;
        let outcome = &self.result.cells.last()?.outcome;
        let on_its_own = outcome.kernel_died && !outcome.kernel_killed && !outcome.cancelled;
        on_its_own.then_some(index)
    }

    /// No cell of the request reached the kernel: it was dead before the first one was
    /// written, so the request may run in a fresh kernel without running anything twice.
    pub fn nothing_started(&self) -> bool {
        self.result.cells.iter().all(|c| c.outcome.not_started)
    }

    /// Starts over from the first cell, for a fresh kernel, forgetting the attempt that
    /// never reached the dead one.
    pub fn prepare_restart(&mut self) {
        self.next = 0;
        self.result.failed_cell = None;
        self.result.kernel_died = false;
        self.result.cells.clear();
        self.result
            .annotations
            .retain(|a| !a.ends_with(DIED_NOTICE_END));
    }

    /// The next cell could not run (its fresh kernel did not start): it counts as the
    /// failed one, with `notice`; the cells before it keep their results.
    pub fn fail_next(&mut self, notice: impl Into<String>) {
        self.result.failed_cell = Some(self.next);
        self.annotate(notice);
    }

    pub fn result_mut(&mut self) -> &mut EvalResult {
        &mut self.result
    }

    /// The next cell asks for a fresh kernel, and no cell failed: the pool replaces the
    /// kernel, then calls [`Evaluation::run`] again.
    pub fn reset_due(&self) -> bool {
        self.result.failed_cell.is_none()
            && self.cells.get(self.next).is_some_and(|cell| cell.reset)
    }

    /// The timeout cell `index` runs under: its own, else the request's.
    fn timeout_of(&self, index: usize) -> Option<Duration> {
        self.cells[index].timeout.unwrap_or(self.options.timeout)
    }

    /// Runs the cells from the next one, stopping at the first that fails, and before a
    /// later cell that asks for a fresh kernel ([`Evaluation::reset_due`]).
    pub async fn run(
        &mut self,
        kernel: &impl RunsCells,
        turn: &Turn,
        mut on_event: impl FnMut(usize, KernelEvent) + Send,
    ) -> Result<()> {
        let total = self.cells.len();
        let first = self.next;
        while self.next < total {
            let index = self.next;
            if index > first && self.cells[index].reset {
                break;
            }
            let cell = self.cells[index].clone();
            let request = ExecuteRequest {
                code: cell.code,
                store_history: true,
                timeout: self.timeout_of(index),
                max_captured_bytes: Some(CELL_CAPTURE_BYTES),
                env: self.options.env.clone(),
                caller: self.options.caller.clone(),
                // Once: a later cell goes on where the one before it left the kernel.
                cwd: (index == 0).then(|| self.options.cwd.clone()).flatten(),
                uri_roots: self.options.uri_roots.clone(),
                hold_death: true,
                ..Default::default()
            };
            let abort = self.options.abort.clone();
            let may_rerun = self.options.rerun_unstarted && self.nothing_started();
            let live = LiveCell::new(&mut self.text, self.options.on_output.as_mut(), index);
            // The kernel's death is held in the outcome (`hold_death`) until it says whether
            // the cell reached the kernel at all. Keyed on the host's report
            // (`kernel_died`), never on an error's name: a cell may raise its own
            // `KernelDied`, which is shown as any error is.
            let execute = kernel.execute_holding(turn, request, abort, |event| {
                live.event(|text| text.add(&event));
                on_event(index, event);
            });
            let outcome = live.run(execute).await;
            let rerun = may_rerun && outcome.as_ref().is_ok_and(|o| o.not_started);
            let death = outcome
                .as_ref()
                .ok()
                .filter(|o| o.kernel_died && !rerun)
                .and_then(|o| o.error.clone());
            if let Some(error) = death {
                let event = KernelEvent::Error(error);
                live.event(|text| text.add(&event));
                on_event(index, event);
            }
            self.text.end_cell();
            deliver_live(&mut self.text, &mut self.options.on_output, index);
            let outcome = outcome?;
            self.next += 1;
            let failed = !outcome.ok;
            self.refusals
                .add(&outcome.statuses, kernel.sandbox_policy());
            self.record(index, &outcome);
            self.result.cells.push(CellResult {
                outcome,
                title: cell.title.clone(),
            });
            if failed {
                self.result.failed_cell = Some(index);
                break;
            }
        }
        Ok(())
    }

    fn record(&mut self, index: usize, outcome: &ExecuteOutcome) {
        let timeout = self.timeout_of(index);
        let result = &mut self.result;
        if outcome.displays_dropped > 0 {
            let cell = if self.cells.len() > 1 {
                format!("cell {}: ", index + 1)
            } else {
                String::new()
            };
            result.annotations.push(format!(
                "{cell}{}; their images, JSON and charts are left out of `images`, `json` and `charts` likewise",
                outcome.displays_notice()
            ));
        }
        result.cancelled |= outcome.cancelled;
        result.timed_out |= outcome.timed_out;
        result.kernel_died |= outcome.kernel_died;
        if outcome.timed_out {
            result.kernel_killed |= outcome.kernel_died;
        } else if outcome.kernel_died && !outcome.cancelled {
            result.kernel_killed |= outcome.kernel_killed;
        }
        result.annotations.extend(end_notices(outcome, timeout));
    }

    /// The agent-ready result: notices first, then the text, or what stands for none.
    pub fn finish(mut self) -> EvalResult {
        let total = self.cells.len();
        let mut result = self.result;
        result.annotations.extend(self.refusals.into_notices());
        if let Some(index) = result.failed_cell {
            if total > 1 {
                let title = self.cells[index]
                    .title
                    .as_ref()
                    .map_or(String::new(), |t| format!(" ({t})"));
                result
                    .annotations
                    .push(format!("cell {} of {total}{title} failed", index + 1));
            }
            if !result.cancelled {
                self.text.push_closing_line(&exit_line(1));
                // The closing line is the failed cell's.
                deliver_live(&mut self.text, &mut self.options.on_output, index);
            }
        }
        let (output, built) = close_output(self.text, &mut result.annotations);
        let truncated = built.truncated;
        result.output = output;
        result.images.extend(built.images);
        result.json.extend(built.json);
        result.charts.extend(built.charts);
        result.statuses.extend(built.statuses);
        result.truncated = truncated.map(|truncated| TruncationInfo {
            total_bytes: truncated.total_bytes,
            total_lines: truncated.total_lines,
            artifact_path: truncated.artifact_path,
            artifact_id: built.artifact_id,
            artifact_error: truncated.artifact_error,
        });
        result.exit_code = if result.cancelled {
            None
        } else if result.failed_cell.is_some() {
            Some(1)
        } else {
            Some(0)
        };
        result
    }
}

/// Hands the live text built so far to `on_output`, when there is one, as cell `index`'s.
fn deliver_live(text: &mut AgentText, on_output: &mut Option<OnOutput>, index: usize) {
    if let Some(on_output) = on_output {
        on_output.deliver(text, index);
    }
}

/// The notices a cell's end gives, in this order: stdin asked for, then its timeout
/// (`timeout` is the budget it ran under) or the death of its kernel. `OutputBuilder`
/// gives the same for a run another executor made (`eval::run_end`).
pub fn end_notices(outcome: &ExecuteOutcome, timeout: Option<Duration>) -> Vec<String> {
    let mut notices = Vec::new();
    if outcome.stdin_requested {
        notices.push("Kernel requested stdin; interactive input is not supported.".into());
    }
    if outcome.timed_out {
        notices.push(timeout_notice(
            timeout.unwrap_or_default(),
            outcome.kernel_died,
        ));
    } else if outcome.kernel_died && !outcome.cancelled {
        let why = outcome
            .error
            .as_ref()
            .map_or(String::new(), |e| e.evalue.clone());
        notices.push(format!("{why}{DIED_NOTICE_END}"));
    }
    notices
}

/// The line after every cell of a request that failed (and was not stopped).
pub fn exit_line(code: i32) -> String {
    format!("Command exited with code {code}\n")
}

/// The agent text finished as `output` reads: `notices` at its head (joined by one
/// for a full output that could not be kept), then the body. Returns `output` and the
/// rest of what was built.
pub fn close_output(text: AgentText, notices: &mut Vec<String>) -> (String, AgentTextResult) {
    let built = text.finish();
    if let Some(error) = built
        .truncated
        .as_ref()
        .and_then(|t| t.artifact_error.as_ref())
    {
        // The output itself is fine; say why the promised full copy is missing.
        notices.push(format!("the full output was not saved: {error}"));
    }
    // The host's notices: the only lines before the body, which cannot forge them (a
    // cell line starting with `[` is escaped, see `output::host_lines`).
    let mut output: String = notices.iter().map(|a| notice_line(a)).collect();
    output.push_str(&built.body);
    (output, built)
}

const DIED_NOTICE_END: &str =
    "; the kernel's state was lost and it will be recreated on the next call.";

/// The notice for a cell that hit its timeout (its wording is documented: docs/api.md#kernelevaluatecells-options-the-agent-ready-result).
pub fn timeout_notice(timeout: Duration, killed: bool) -> String {
    if killed {
        "eval cell timed out and the kernel was unresponsive to interrupt; the kernel has been killed and will be recreated on the next call.".into()
    } else {
        // Under a second (`timeoutMs`), seconds would round to 0.
        let after = if timeout < Duration::from_secs(1) {
            format!("{}ms", timeout.as_millis())
        } else {
            format!("{}s", (timeout.as_millis() as f64 / 1000.0).round() as u64)
        };
        format!(
            "eval cell timed out after {after}; kernel interrupted but remains running. Reset the kernel via {{ reset: true }} if state appears corrupted."
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_notice_rounds_to_whole_seconds() {
        assert!(timeout_notice(Duration::from_millis(4100), false)
            .starts_with("eval cell timed out after 4s; kernel interrupted"));
        assert!(timeout_notice(Duration::from_millis(4600), false).contains("after 5s"));
        assert!(timeout_notice(Duration::from_secs(1), true).contains("has been killed"));
        assert!(timeout_notice(Duration::from_millis(250), false)
            .starts_with("eval cell timed out after 250ms; kernel interrupted"));
    }

    #[test]
    fn a_late_notice_follows_the_others_at_the_head_of_the_output() {
        let mut result = EvalResult {
            annotations: vec!["cell 2 of 2 failed".into()],
            output: "[cell 2 of 2 failed]\n[not a notice]\nboom\n".into(),
            ..Default::default()
        };
        result.add_notice("onEvent threw: x");
        assert_eq!(
            result.output,
            "[cell 2 of 2 failed]\n[onEvent threw: x]\n[not a notice]\nboom\n"
        );
        assert_eq!(
            result.annotations,
            ["cell 2 of 2 failed", "onEvent threw: x"]
        );

        let mut bare = EvalResult {
            output: "(no output)".into(),
            ..Default::default()
        };
        bare.add_notice("n");
        assert_eq!(bare.output, "[n]\n(no output)");
    }
}
