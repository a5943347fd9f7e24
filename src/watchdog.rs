//! A cell's time budget (SPEC 10): a wall-clock window that stands still while calls to
//! another model (`agent()`, `completion()`) are in flight. Pauses are counted, since
//! `parallel()` keeps several calls in flight at once; when the last one returns, a fresh
//! window starts, so a cell that waited on a slow agent gets its whole budget for the work
//! after it. Every other bridge call (`tool.*`, `read`, `budget`, ...) counts against the
//! budget: a thread calling `tool.ping()` in a loop must not hold the clock forever.
//!
//! Pure bookkeeping over the instants it is given; the caller owns the clock.

use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Watchdog {
    timeout: Option<Duration>,
    window_start: Instant,
    in_flight: usize,
}

/// Whether a bridge call of this name stops the cell's clock.
pub fn pauses_for(call: &str) -> bool {
    matches!(call, "agent" | "completion")
}

impl Watchdog {
    pub fn new(timeout: Option<Duration>, now: Instant) -> Self {
        Self {
            timeout,
            window_start: now,
            in_flight: 0,
        }
    }

    /// A bridge call began.
    pub fn pause(&mut self) {
        self.in_flight += 1;
    }

    /// A bridge call ended; when none is left, the window starts again at `now`.
    pub fn resume(&mut self, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.in_flight == 0 {
            self.window_start = now;
        }
    }

    pub fn paused(&self) -> bool {
        self.in_flight > 0
    }

    /// When the cell runs out of time; `None` without a timeout or while paused.
    pub fn deadline(&self) -> Option<Instant> {
        if self.paused() {
            return None;
        }
        self.timeout.map(|t| self.window_start + t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn no_timeout_means_no_deadline() {
        let w = Watchdog::new(None, Instant::now());
        assert_eq!(w.deadline(), None);
    }

    #[test]
    fn pauses_are_counted_and_resume_starts_a_fresh_window() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(Some(SECOND), t0);
        assert_eq!(w.deadline(), Some(t0 + SECOND));
        w.pause();
        w.pause();
        assert_eq!(w.deadline(), None);
        w.resume(t0 + 5 * SECOND);
        assert_eq!(w.deadline(), None, "one call is still in flight");
        w.resume(t0 + 7 * SECOND);
        assert_eq!(w.deadline(), Some(t0 + 8 * SECOND));
    }

    #[test]
    fn only_calls_to_another_model_stop_the_clock() {
        assert!(pauses_for("agent") && pauses_for("completion"));
        for name in ["ping", "read", "budget", "concurrency", "kv", "agents"] {
            assert!(!pauses_for(name), "{name}");
        }
    }

    #[test]
    fn an_unmatched_resume_does_not_underflow() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(Some(SECOND), t0);
        w.resume(t0 + SECOND);
        assert!(!w.paused());
        assert_eq!(w.deadline(), Some(t0 + 2 * SECOND));
    }
}
