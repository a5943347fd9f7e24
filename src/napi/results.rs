//! The result objects JavaScript receives: an execute's `ExecuteResult`, a shutdown's
//! `ShutdownResult`, and the agent-ready `EvalResult` that `Kernel.evaluate` and the pool
//! share. Conversions from the crate's outcomes only.

use napi_derive::napi;
use serde_json::Value;

use crate::eval::executor;
use crate::wire::events::ExecuteOutcome;

#[napi(object)]
pub struct ErrorInfo {
    pub ename: String,
    pub evalue: String,
    pub traceback: Vec<String>,
}

#[napi(object)]
pub struct StatusInfo {
    pub op: String,
    pub data: Value,
}

#[napi(object)]
pub struct ExecuteResult {
    #[napi(ts_type = "'ok' | 'error'")]
    pub status: String,
    pub execution_count: u32,
    pub cancelled: bool,
    pub timed_out: bool,
    pub kernel_died: bool,
    pub stdin_requested: bool,
    pub stdout: String,
    pub stderr: String,
    /// The cell's first displays: at most 100, or 64 MiB as JSON. When it showed more,
    /// the rest went to `onEvent` only, and (`execute`) a last text/plain bundle says so.
    #[napi(ts_type = "MimeBundle[]")]
    pub displays: Vec<Value>,
    /// How many displays went to `onEvent` but were left out of `displays`.
    pub displays_dropped: f64,
    /// Status events (`_emit_status`), in order.
    pub statuses: Vec<StatusInfo>,
    #[napi(ts_type = "MimeBundle")]
    pub result: Option<Value>,
    pub error: Option<ErrorInfo>,
    /// The cell's title, in results of `evaluate` and `KernelPool.execute`.
    pub title: Option<String>,
    /// What `onEvent` threw the first time it threw (`execute` only; `evaluate` and the
    /// pool say it in a notice). Every event was still delivered.
    pub on_event_error: Option<String>,
}

impl From<ExecuteOutcome> for ExecuteResult {
    fn from(o: ExecuteOutcome) -> Self {
        ExecuteResult {
            status: if o.ok { "ok" } else { "error" }.to_string(),
            execution_count: o.execution_count,
            cancelled: o.cancelled,
            timed_out: o.timed_out,
            kernel_died: o.kernel_died,
            stdin_requested: o.stdin_requested,
            stdout: o.stdout,
            stderr: o.stderr,
            displays_dropped: o.displays_dropped as f64,
            displays: o.displays,
            statuses: o
                .statuses
                .into_iter()
                .map(|s| StatusInfo {
                    op: s.op,
                    data: Value::Object(s.data),
                })
                .collect(),
            result: o.result,
            error: o.error.map(|e| ErrorInfo {
                ename: e.ename,
                evalue: e.evalue,
                traceback: e.traceback,
            }),
            title: None,
            on_event_error: None,
        }
    }
}

#[napi(object)]
pub struct ShutdownResult {
    /// The process is gone (reaped).
    pub confirmed: bool,
    pub exit_code: Option<i32>,
    /// The name of the signal that ended it, e.g. "SIGKILL".
    pub signal: Option<String>,
}

#[napi(object)]
pub struct ImageOutput {
    #[napi(ts_type = "'image/png' | 'image/jpeg'")]
    pub mime: String,
    /// Base64.
    pub data: String,
}

#[napi(object)]
pub struct TruncationInfo {
    pub total_bytes: f64,
    pub total_lines: f64,
    /// The file holding the full output, when `artifactsDir` was given.
    pub artifact_path: Option<String>,
    /// The artifact's id: the output ends with `artifact://<id>`, which `read()` in the
    /// kernel and `readArtifact` on the host resolve.
    pub artifact_id: Option<String>,
    /// Why the full output could not be kept, when `artifactsDir` was given (also a notice).
    pub artifact_error: Option<String>,
}

#[napi(object)]
pub struct EvalResult {
    pub cells: Vec<ExecuteResult>,
    /// Index of the cell that failed; later cells did not run.
    pub failed_cell: Option<u32>,
    /// What the agent reads: notices first (`[...]`), then the sanitized, truncated text.
    /// Only the host's lines start with `[` (notices, `[…N lines elided…]`, `[late output
    /// from an earlier cell]`, `[full output ...]`) or read `Command exited with code 1`:
    /// a line a cell printed that starts as one of those does (also `(no output)`,
    /// `(displayed `, behind invisible characters or not) is shown with a `\` in front.
    pub output: String,
    /// 0 ok, 1 failed, null cancelled: by an abort or a timeout (`timedOut` says which;
    /// a cell that ran past its time did not fail, it was stopped).
    #[napi(ts_type = "0 | 1 | null")]
    pub exit_code: Value,
    pub cancelled: bool,
    pub timed_out: bool,
    /// The kernel did not stop on interrupt and was killed.
    pub kernel_killed: bool,
    /// The kernel died during the request.
    pub kernel_died: bool,
    /// The session's kernel had ended without being asked to (died during the last call,
    /// since it, or before this call's first cell reached it; or stopped answering the
    /// heartbeat), and this call's cells ran in a new one. Always with `sessionLost`; a
    /// reset asked for sets neither (pool only).
    pub kernel_restarted: bool,
    /// The session's earlier state (variables, imports) was gone before this call's cells
    /// ran: the session was evicted (idle timeout, or room for another; `kernelRestarted`
    /// false) or its kernel had ended (`kernelRestarted` true); an annotation says which
    /// (pool only).
    pub session_lost: bool,
    /// The host's notices, apart from the cells' text: each heads `output` as one
    /// `[notice]` line, in this order.
    pub annotations: Vec<String>,
    pub images: Vec<ImageOutput>,
    #[napi(ts_type = "unknown[]")]
    pub json: Vec<Value>,
    /// The charts of the figures the cells showed, as data (docs/charts.md), in order;
    /// each one's card is in `output` where the figure was.
    #[napi(ts_type = "Chart[]")]
    pub charts: Vec<Value>,
    pub statuses: Vec<StatusInfo>,
    pub truncated: Option<TruncationInfo>,
}

impl From<executor::EvalResult> for EvalResult {
    fn from(r: executor::EvalResult) -> Self {
        EvalResult {
            cells: r
                .cells
                .into_iter()
                .map(|c| ExecuteResult {
                    title: c.title,
                    ..ExecuteResult::from(c.outcome)
                })
                .collect(),
            failed_cell: r.failed_cell.map(|i| i as u32),
            output: r.output,
            exit_code: r.exit_code.map_or(Value::Null, Value::from),
            cancelled: r.cancelled,
            timed_out: r.timed_out,
            kernel_killed: r.kernel_killed,
            kernel_died: r.kernel_died,
            kernel_restarted: r.kernel_restarted,
            session_lost: r.session_lost,
            annotations: r.annotations,
            images: r
                .images
                .into_iter()
                .map(|i| ImageOutput {
                    mime: i.mime.to_string(),
                    data: i.data,
                })
                .collect(),
            json: r.json,
            charts: r.charts,
            statuses: r
                .statuses
                .into_iter()
                .map(|(op, data)| StatusInfo { op, data })
                .collect(),
            truncated: r.truncated.map(|t| TruncationInfo {
                total_bytes: t.total_bytes as f64,
                total_lines: t.total_lines as f64,
                artifact_path: t.artifact_path.map(|p| p.display().to_string()),
                artifact_id: t.artifact_id,
                artifact_error: t.artifact_error,
            }),
        }
    }
}
