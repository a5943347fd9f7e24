//! A cell's time budget (docs/api.md#kernelpool-sessions-behind-an-eval-tool): a wall-clock window that stands still while calls to
//! another model (`agent()`, `completion()`) are in flight. Pauses are counted, since
//! `parallel()` keeps several calls in flight at once; when the last one returns, a fresh
//! window starts, so a cell that waited on a slow agent gets its whole budget for the work
//! after it. Every other bridge call (`tool.*`, `read`, `budget`, ...) counts against the
//! budget: a thread calling `tool.ping()` in a loop must not hold the clock forever.
//!
//! The clock stopping and starting again is reported to the host as status events
//! (`{op: 'timeout', data: {state: 'paused', call}}`, then `{state: 'resumed', pausedMs}`),
//! once per stop however many calls overlap, so a UI can show why a cell is not timing out.
//!
//! Pure bookkeeping over the instants it is given; the caller owns the clock.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::wire::events::StatusEvent;

#[derive(Debug, Clone)]
pub struct Watchdog {
    timeout: Option<Duration>,
    window_start: Instant,
    in_flight: usize,
    /// When the clock last stopped (meaningful while `in_flight > 0`).
    paused_at: Instant,
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
            paused_at: now,
        }
    }

    /// A bridge call began. True when it stopped the clock (no other was in flight).
    pub fn pause(&mut self, now: Instant) -> bool {
        self.in_flight += 1;
        if self.in_flight == 1 {
            self.paused_at = now;
        }
        self.in_flight == 1
    }

    /// A bridge call ended; when none is left, the window starts again at `now`. Returns how
    /// long the clock stood still when this restarted it.
    pub fn resume(&mut self, now: Instant) -> Option<Duration> {
        let was_paused = self.paused();
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.in_flight == 0 {
            self.window_start = now;
        }
        (was_paused && !self.paused()).then(|| now.saturating_duration_since(self.paused_at))
    }

    /// The cell ended: calls still in flight (in threads it left running) no longer stop
    /// anything. Returns how long the clock stood still when it was stopped, so the host
    /// can close the pause it reported.
    pub fn end(&mut self, now: Instant) -> Option<Duration> {
        let paused_for = self
            .paused()
            .then(|| now.saturating_duration_since(self.paused_at));
        self.in_flight = 0;
        paused_for
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

/// The status event for the clock stopping: `call` is the call that stopped it.
pub fn paused_status(call: &str) -> StatusEvent {
    let mut data = Map::new();
    data.insert("state".into(), Value::String("paused".into()));
    data.insert("call".into(), Value::String(call.into()));
    StatusEvent {
        op: "timeout".into(),
        data,
    }
}

/// The status event for the clock starting again after standing still for `paused_for`.
pub fn resumed_status(paused_for: Duration) -> StatusEvent {
    let mut data = Map::new();
    data.insert("state".into(), Value::String("resumed".into()));
    let ms = u64::try_from(paused_for.as_millis()).unwrap_or(u64::MAX);
    data.insert("pausedMs".into(), Value::from(ms));
    StatusEvent {
        op: "timeout".into(),
        data,
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
        assert!(w.pause(t0 + SECOND), "the first call stops the clock");
        assert!(!w.pause(t0 + 2 * SECOND), "a second one finds it stopped");
        assert_eq!(w.deadline(), None);
        assert_eq!(w.resume(t0 + 5 * SECOND), None);
        assert_eq!(w.deadline(), None, "one call is still in flight");
        assert_eq!(
            w.resume(t0 + 7 * SECOND),
            Some(6 * SECOND),
            "stood still since the first"
        );
        assert_eq!(w.deadline(), Some(t0 + 8 * SECOND));
    }

    #[test]
    fn the_end_of_the_cell_closes_an_open_pause() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(Some(SECOND), t0);
        assert_eq!(w.end(t0), None, "nothing to close");
        w.pause(t0);
        assert_eq!(w.end(t0 + 3 * SECOND), Some(3 * SECOND));
        assert!(!w.paused());
        assert_eq!(
            w.resume(t0 + 4 * SECOND),
            None,
            "a late reply reports nothing"
        );
    }

    #[test]
    fn status_events_name_the_state() {
        let paused = paused_status("agent");
        assert_eq!(paused.op, "timeout");
        assert_eq!(
            Value::Object(paused.data),
            serde_json::json!({"state": "paused", "call": "agent"})
        );
        let resumed = resumed_status(Duration::from_millis(1500));
        assert_eq!(
            Value::Object(resumed.data),
            serde_json::json!({"state": "resumed", "pausedMs": 1500})
        );
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
        assert_eq!(w.resume(t0 + SECOND), None);
        assert!(!w.paused());
        assert_eq!(w.deadline(), Some(t0 + 2 * SECOND));
    }
}
