//! How a run that another executor made ended (a shell command, say), told to
//! `OutputBuilder` so that its text ends as `evaluate`'s does for a cell that ended so:
//! the same notices, in the same order, and the same closing line. The words are
//! `executor`'s own ([`end_notices`], [`exit_line`]); nothing here words a notice.

use std::time::Duration;

use crate::error::KernelError;
use crate::eval::executor::{end_notices, exit_line};
use crate::wire::events::ExecuteOutcome;

/// A run's end, as the host tells it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunEnd {
    /// The code it exited with; `None` when it has none (stopped, or not known).
    pub exit_code: Option<i32>,
    /// It ran past its time and was stopped.
    pub timed_out: bool,
    /// The time it had, which the timeout notice states.
    pub timeout: Option<Duration>,
    /// It was stopped on request (an abort), not by its timeout.
    pub cancelled: bool,
    /// It did not stop when interrupted and was killed: with `timed_out` or `cancelled`.
    pub killed: bool,
    /// It asked for input on stdin, which it could not get.
    pub stdin_requested: bool,
}

impl RunEnd {
    /// Refuses an end that cannot be told in `evaluate`'s words: a timeout without the
    /// time it states, a kill that was neither a timeout's nor a cancellation's (that is a
    /// death of its own, whose cause only the host knows).
    pub fn check(&self) -> Result<(), KernelError> {
        let invalid = |reason: &str| KernelError::InvalidArgument {
            name: "outcome",
            reason: reason.into(),
        };
        if self.timed_out && !self.killed && self.timeout.is_none() {
            return Err(invalid(
                "`timedOut` needs `timeoutMs`: the notice states the time the run had",
            ));
        }
        if self.killed && !self.timed_out && !self.cancelled {
            return Err(invalid(
                "`killed` says a run that was stopped did not stop on interrupt: give it with `timedOut` or `cancelled`",
            ));
        }
        Ok(())
    }

    /// The notices at the head of the output, as `evaluate` gives them for a cell.
    pub fn notices(&self) -> Vec<String> {
        let outcome = ExecuteOutcome {
            // A cell stopped by its timeout is a cancelled one too.
            cancelled: self.cancelled || self.timed_out,
            timed_out: self.timed_out,
            kernel_died: self.killed,
            kernel_killed: self.killed,
            stdin_requested: self.stdin_requested,
            ..Default::default()
        };
        end_notices(&outcome, self.timeout)
    }

    /// The line after the text: for a run that exited with a code other than 0 and was
    /// not stopped, as `evaluate`'s `Command exited with code 1` after a failed cell.
    pub fn closing_line(&self) -> Option<String> {
        match self.exit_code {
            Some(code) if code != 0 && !self.cancelled && !self.timed_out => Some(exit_line(code)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::executor::timeout_notice;

    #[test]
    fn the_notices_are_evaluates_in_its_order() {
        let end = RunEnd {
            timed_out: true,
            timeout: Some(Duration::from_millis(1500)),
            stdin_requested: true,
            exit_code: Some(130),
            ..Default::default()
        };
        assert_eq!(
            end.notices(),
            [
                "Kernel requested stdin; interactive input is not supported.".to_string(),
                timeout_notice(Duration::from_millis(1500), false),
            ]
        );
        assert_eq!(
            end.closing_line(),
            None,
            "a stopped run has no closing line"
        );
        let killed = RunEnd {
            timed_out: true,
            killed: true,
            ..Default::default()
        };
        assert!(killed.check().is_ok());
        assert_eq!(killed.notices(), [timeout_notice(Duration::ZERO, true)]);
        let cancelled = RunEnd {
            cancelled: true,
            killed: true,
            exit_code: Some(1),
            ..Default::default()
        };
        assert!(cancelled.notices().is_empty());
        assert_eq!(cancelled.closing_line(), None);
    }

    #[test]
    fn a_failed_run_closes_with_its_code_and_a_good_one_with_nothing() {
        let failed = RunEnd {
            exit_code: Some(2),
            ..Default::default()
        };
        assert_eq!(
            failed.closing_line().as_deref(),
            Some("Command exited with code 2\n")
        );
        assert!(failed.notices().is_empty());
        for code in [Some(0), None] {
            let end = RunEnd {
                exit_code: code,
                ..Default::default()
            };
            assert_eq!(end.closing_line(), None);
        }
    }

    #[test]
    fn an_end_evaluate_has_no_words_for_is_refused() {
        let no_time = RunEnd {
            timed_out: true,
            ..Default::default()
        };
        assert!(no_time
            .check()
            .unwrap_err()
            .to_string()
            .contains("`timedOut` needs `timeoutMs`"));
        let killed_alone = RunEnd {
            killed: true,
            ..Default::default()
        };
        assert!(killed_alone
            .check()
            .unwrap_err()
            .to_string()
            .contains("`killed`"));
    }
}
