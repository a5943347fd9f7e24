//! How a request ends short of its cells: its abort before its kernel was ready, a reset
//! whose fresh kernel did not start; and a kernel's start bounded by the request's deadline.
//! Shared by session and `per-call` requests.

use std::time::Duration;

use crate::error::KernelError;
use crate::eval::executor::{EvalResult, Evaluation};
use crate::kernel::KernelConfig;
use crate::output::notice_line;
use crate::session::room::Stopped;

/// A cell's reset whose fresh kernel did not start: the cells before it keep their
/// results; it and the later ones did not run. A start cut short by the request's
/// deadline is left for [`DeadlineWatch::say_so`] to report.
pub(super) fn reset_failed(
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
pub(super) fn until_deadline(
    config: &KernelConfig,
    deadline: Option<tokio::time::Instant>,
) -> KernelConfig {
    let mut config = config.clone();
    if let Some(at) = deadline {
        let left = at.saturating_duration_since(tokio::time::Instant::now());
        config.startup_timeout = config
            .startup_timeout
            .min(left.max(Duration::from_millis(1)));
    }
    config
}

/// The result of a call its abort stopped before its kernel was ready (`why`): cancelled,
/// with a notice of where it stopped. When no cell had run, the notices are all of the
/// output (no "(no output)": nothing ran to print nothing), as for a call aborted before
/// its turn.
pub(super) fn stopped(mut evaluation: Evaluation, why: Stopped) -> EvalResult {
    let nothing_ran = evaluation.nothing_started();
    evaluation.annotate(why.notice(nothing_ran));
    evaluation.result_mut().cancelled = true;
    let mut result = evaluation.finish();
    if nothing_ran {
        result.output = result.annotations.iter().map(|a| notice_line(a)).collect();
    }
    result
}
