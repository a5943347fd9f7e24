//! Cells -> one kernel -> the agent-ready result (SPEC 10 and 13).
//!
//! Every event is streamed to the caller as it comes and folded, as it comes, into one
//! bounded [`OutputAccumulator`]: a cell that prints a gigabyte costs the host its head
//! and tail, not the gigabyte (the artifact file, when configured, gets every byte).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::error::Result;
use crate::events::{ExecuteOutcome, KernelEvent};
use crate::fifo::Turn;
use crate::kernel::{AbortHandle, ExecuteRequest, Kernel};
use crate::output::{render_bundle, ArtifactSink, Image, OutputAccumulator, OutputLimits};

/// How much of a cell's stdout/stderr is kept in its per-cell result; `output` is what the
/// agent reads, and the artifact holds everything.
pub const CELL_CAPTURE_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, Default)]
pub struct Cell {
    pub code: String,
    pub title: Option<String>,
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
    pub annotations: Vec<String>,
    pub images: Vec<Image>,
    pub json: Vec<Value>,
    pub statuses: Vec<(String, Value)>,
    pub truncated: Option<TruncationInfo>,
}

/// Folds events into the agent's view: text in order, images, JSON and statuses aside.
struct AgentView<'a> {
    status_mime: &'a str,
    text: OutputAccumulator,
    has_text: bool,
    images: Vec<Image>,
    json: Vec<Value>,
    statuses: Vec<(String, Value)>,
}

impl AgentView<'_> {
    fn add(&mut self, event: &KernelEvent) {
        match event {
            KernelEvent::Stdout(text) | KernelEvent::Stderr(text) => self.push_text(text),
            KernelEvent::Display { bundle, .. } | KernelEvent::Result(bundle) => {
                let rendered = render_bundle(bundle, self.status_mime);
                // Next to an image, text/plain is only its stand-in (`<Figure ...>`).
                let text_is_fallback = !rendered.images.is_empty() && !rendered.markdown;
                if !text_is_fallback {
                    self.push_line(&rendered.text);
                }
                self.images.extend(rendered.images);
                self.json.extend(rendered.json);
            }
            KernelEvent::Status { op, data } => {
                self.statuses
                    .push((op.clone(), Value::Object(data.clone())));
            }
            KernelEvent::Clear { .. } => {}
            KernelEvent::Error(error) => {
                let traceback = error.traceback.concat();
                if traceback.trim().is_empty() {
                    self.push_line(&format!("{}: {}", error.ename, error.evalue));
                } else {
                    self.push_line(&traceback);
                }
            }
        }
    }

    fn push_text(&mut self, text: &str) {
        if !text.is_empty() {
            self.has_text = true;
            self.text.push(text);
        }
    }

    /// Rendered values start on a line of their own and end one.
    fn push_line(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.push_text(text);
        if !text.ends_with('\n') {
            self.text.push("\n");
        }
    }
}

/// Runs `cells` in order on `kernel`, stopping at the first that fails; `turn` is the
/// kernel's, held for all of them.
pub async fn evaluate(
    kernel: &Kernel,
    turn: &Turn,
    cells: Vec<Cell>,
    options: EvalOptions,
    mut on_event: impl FnMut(usize, &KernelEvent) + Send,
) -> Result<EvalResult> {
    let mut result = EvalResult {
        annotations: options.annotations.clone(),
        ..Default::default()
    };
    let mut view = AgentView {
        status_mime: &options.status_mime,
        text: OutputAccumulator::new(
            options.limits,
            options.artifacts_dir.clone().map(ArtifactSink::in_dir),
        ),
        has_text: false,
        images: Vec::new(),
        json: Vec::new(),
        statuses: Vec::new(),
    };
    let total = cells.len();
    for (index, cell) in cells.into_iter().enumerate() {
        let request = ExecuteRequest {
            code: cell.code,
            store_history: true,
            timeout: options.timeout,
            max_captured_bytes: Some(CELL_CAPTURE_BYTES),
            ..Default::default()
        };
        let outcome = kernel
            .execute_holding(turn, request, options.abort.clone(), |event| {
                view.add(&event);
                on_event(index, &event);
            })
            .await?;
        let failed = !outcome.ok;
        result.cancelled |= outcome.cancelled;
        result.timed_out |= outcome.timed_out;
        result.kernel_died |= outcome.kernel_died;
        if outcome.stdin_requested {
            result
                .annotations
                .push("Kernel requested stdin; interactive input is not supported.".into());
        }
        if outcome.timed_out {
            result.annotations.push(timeout_notice(
                options.timeout.unwrap_or_default(),
                outcome.kernel_died,
            ));
            result.kernel_killed |= outcome.kernel_died;
        } else if outcome.kernel_died {
            let why = outcome
                .error
                .as_ref()
                .map_or(String::new(), |e| e.evalue.clone());
            result.annotations.push(format!(
                "{why}; the kernel's state was lost and it will be recreated on the next call."
            ));
        }
        result.cells.push(CellResult {
            outcome,
            title: cell.title.clone(),
        });
        if failed {
            result.failed_cell = Some(index);
            if total > 1 {
                let title = cell.title.map_or(String::new(), |t| format!(" ({t})"));
                result
                    .annotations
                    .push(format!("cell {} of {total}{title} failed", index + 1));
            }
            break;
        }
    }

    let failed = result.failed_cell.is_some();
    if failed && !result.cancelled {
        view.push_line("Command exited with code 1");
    }
    let has_text = view.has_text;
    let truncated = view.text.finish();
    let mut output: String = result
        .annotations
        .iter()
        .map(|a| format!("[{a}]\n"))
        .collect();
    if has_text {
        output.push_str(&truncated.text);
    } else if !view.images.is_empty() {
        output.push_str(&format!(
            "(displayed {} image(s); no text output)",
            view.images.len()
        ));
    } else {
        output.push_str("(no output)");
    }
    result.output = output;
    if truncated.truncated {
        result.truncated = Some(TruncationInfo {
            total_bytes: truncated.total_bytes,
            total_lines: truncated.total_lines,
            artifact_path: truncated.artifact_path,
        });
    }
    result.exit_code = if result.cancelled {
        None
    } else if failed {
        Some(1)
    } else {
        Some(0)
    };
    result.images = view.images;
    result.json = view.json;
    result.statuses = view.statuses;
    Ok(result)
}

/// The notice for a cell that hit its timeout (SPEC 10's exact wording).
pub fn timeout_notice(timeout: Duration, killed: bool) -> String {
    if killed {
        "eval cell timed out and the kernel was unresponsive to interrupt; the kernel has been killed and will be recreated on the next call.".into()
    } else {
        let seconds = (timeout.as_millis() as f64 / 1000.0).round() as u64;
        format!(
            "eval cell timed out after {seconds}s; kernel interrupted but remains running. Reset the kernel via {{ reset: true }} if state appears corrupted."
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
    }

    fn view(status_mime: &str) -> AgentView<'_> {
        AgentView {
            status_mime,
            text: OutputAccumulator::new(OutputLimits::default(), None),
            has_text: false,
            images: Vec::new(),
            json: Vec::new(),
            statuses: Vec::new(),
        }
    }

    #[test]
    fn images_replace_their_plain_text_stand_in() {
        let mut v = view("application/x-pykernel-status");
        v.add(&KernelEvent::Display {
            bundle: serde_json::json!({"image/png": "iVBOR", "text/plain": "<Figure size 640x480>"}),
            display_id: None,
            update: false,
        });
        assert!(!v.has_text);
        assert_eq!(v.images.len(), 1);
        v.add(&KernelEvent::Result(serde_json::json!({"text/plain": "2"})));
        v.add(&KernelEvent::Stdout("\x1b[31mred\x1b[0m\n".into()));
        assert_eq!(v.text.finish().text, "2\nred\n");
    }
}
