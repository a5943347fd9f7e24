//! `onOutput`'s side of running a cell: the live agent text handed on as it is built,
//! with the index of its cell, and an unfinished line sent after a quiet interval.
//!
//! The sanitizer holds a line until it ends, since a `\r` may still rewrite it; a
//! progress bar or a counter printed without a newline would then reach a live UI only
//! when its cell ends. So while a cell runs, a line left unfinished with no output for
//! [`OnOutput::flush_after`] is sent as it stands (what was sent stands: see
//! `agent_text`). Quiet, mostly, not age: a line still changing faster than that is a bar
//! being redrawn (tqdm redraws every 100 ms), and sending each of its states would fill
//! the stream with them; it is sent when it pauses or ends. But output that never pauses
//! that long (a dot printed every 150 ms) would then show nothing until its cell ends; so
//! a line is also sent once it has been held for [`MAX_HOLD_FACTOR`] times the interval,
//! output or not: a bar redrawn without pause shows one state a second by default, each
//! rewrite of a sent state on a line of its own (`agent_text`'s rule).

use std::future::Future;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::eval::agent_text::AgentText;

/// How long an unfinished line waits, with no output, before it is sent by default:
/// longer than tqdm's redraw interval (100 ms), short enough that a person does not
/// read it as lag.
pub const DEFAULT_FLUSH_AFTER: Duration = Duration::from_millis(200);

/// An unfinished line held this many times [`OnOutput::flush_after`] is sent even while
/// output keeps coming: long enough that a redrawn bar is not sent at every redraw, short
/// enough that a line that never pauses still shows.
pub const MAX_HOLD_FACTOR: u32 = 5;

/// Where the live agent text goes (`onOutput`).
pub struct OnOutput {
    /// Receives each chunk with the index of the cell it is of.
    pub send: Box<dyn FnMut(String, usize) + Send>,
    /// How long an unfinished line waits, with no output, before it is sent; `None`:
    /// until it ends.
    pub flush_after: Option<Duration>,
}

impl OnOutput {
    /// Hands on the live text built so far, as cell `index`'s.
    pub fn deliver(&mut self, text: &mut AgentText, index: usize) {
        let chunk = text.take_live();
        if !chunk.is_empty() {
            (self.send)(chunk, index);
        }
    }
}

/// One cell's events folded into the agent text, its live text handed on as it comes
/// and its unfinished line after a quiet interval ([`LiveCell::run`]).
pub struct LiveCell<'a> {
    state: Mutex<State<'a>>,
    /// An event left an unfinished line to send.
    output_came: Notify,
    index: usize,
}

struct State<'a> {
    text: &'a mut AgentText,
    on_output: Option<&'a mut OnOutput>,
    /// When the unfinished line last changed.
    last_output: Instant,
    /// Since when the live stream has lacked some of the unfinished line.
    held_since: Option<Instant>,
}

impl State<'_> {
    fn deliver(&mut self, index: usize) {
        if let Some(on_output) = &mut self.on_output {
            on_output.deliver(self.text, index);
        }
    }
}

impl<'a> LiveCell<'a> {
    pub fn new(text: &'a mut AgentText, on_output: Option<&'a mut OnOutput>, index: usize) -> Self {
        LiveCell {
            state: Mutex::new(State {
                text,
                on_output,
                last_output: Instant::now(),
                held_since: None,
            }),
            output_came: Notify::new(),
            index,
        }
    }

    /// One event of the cell: `add` folds it into the text, whose live part is then
    /// handed on.
    pub fn event(&self, add: impl FnOnce(&mut AgentText)) {
        let mut state = self.lock();
        add(state.text);
        state.deliver(self.index);
        if state.text.live_line_pending() {
            let now = Instant::now();
            state.last_output = now;
            state.held_since.get_or_insert(now);
            self.output_came.notify_one();
        } else {
            state.held_since = None;
        }
    }

    /// Runs `execute` (the cell, calling [`LiveCell::event`] with each of its events),
    /// sending the unfinished line whenever it has been left alone for `flush_after`, or
    /// held for [`MAX_HOLD_FACTOR`] times that.
    ///
    /// Cancel safety: dropping it drops `execute`; nothing else is left behind.
    pub async fn run<T>(&self, execute: impl Future<Output = T>) -> T {
        let flush_after = self.lock().on_output.as_ref().and_then(|o| o.flush_after);
        let Some(flush_after) = flush_after else {
            return execute.await;
        };
        let max_hold = flush_after * MAX_HOLD_FACTOR;
        // When the unfinished line is due: after a quiet interval, or held too long.
        let due_of = |state: &State<'_>| {
            let quiet = state.last_output + flush_after;
            match state.held_since {
                Some(since) => quiet.min(since + max_hold),
                None => quiet,
            }
        };
        tokio::pin!(execute);
        loop {
            let due = {
                let state = self.lock();
                state.text.live_line_pending().then(|| due_of(&state))
            };
            let quiet = async {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => self.output_came.notified().await,
                }
            };
            tokio::select! {
                biased;
                outcome = &mut execute => return outcome,
                () = quiet => {
                    let mut state = self.lock();
                    // Output since `due` was reckoned moves it later: the loop waits again.
                    if due.is_some() && due_of(&state) <= Instant::now() {
                        state.text.flush_live_line();
                        state.held_since = None;
                        state.deliver(self.index);
                    }
                }
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<'a>> {
        // Never contended: the events and the timer are polled by one task.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::eval::agent_text::AgentTextOptions;

    /// Runs a cell that prints `steps` (text, then a pause) under `flush_after`; the
    /// chunks `onOutput` got, each with the time it got it.
    async fn chunks_of(
        steps: &[(&str, u64)],
        flush_after: Option<Duration>,
    ) -> Vec<(String, usize, u64)> {
        let got = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        let sink = got.clone();
        let mut on_output = OnOutput {
            send: Box::new(move |chunk, index| {
                let at = start.elapsed().as_millis() as u64;
                sink.lock().unwrap().push((chunk, index, at));
            }),
            flush_after,
        };
        let mut text = AgentText::new(AgentTextOptions {
            live: true,
            ..Default::default()
        });
        let live = LiveCell::new(&mut text, Some(&mut on_output), 3);
        live.run(async {
            for (printed, pause) in steps {
                live.event(|text| text.push_text(printed));
                tokio::time::sleep(Duration::from_millis(*pause)).await;
            }
        })
        .await;
        text.end_cell();
        on_output.deliver(&mut text, 3);
        let chunks = got.lock().unwrap().clone();
        chunks
    }

    #[tokio::test(start_paused = true)]
    async fn an_unfinished_line_is_sent_after_a_quiet_interval() {
        let chunks = chunks_of(&[("50%", 1500), (" done\n", 0)], Some(DEFAULT_FLUSH_AFTER)).await;
        assert_eq!(
            chunks,
            [("50%".into(), 3, 200), (" done\n".into(), 3, 1500)],
            "the index is the cell's"
        );
        let held = chunks_of(&[("50%", 1500), (" done\n", 0)], None).await;
        assert_eq!(
            held,
            [("50% done\n".into(), 3, 1500)],
            "without a flush interval"
        );
    }

    /// Redrawn for less than the maximum hold (8 redraws, 100 ms apart, under 200 ms: a
    /// hold of 1 s): its states are not sent, only the one it pauses at.
    #[tokio::test(start_paused = true)]
    async fn a_line_redrawn_faster_than_the_interval_is_sent_when_it_pauses() {
        let mut steps: Vec<(String, u64)> = (1..=8).map(|i| (format!("\r{i}0%"), 100)).collect();
        steps.last_mut().unwrap().1 = 1000;
        steps.push(("\n".into(), 0));
        let steps: Vec<(&str, u64)> = steps.iter().map(|(s, p)| (s.as_str(), *p)).collect();
        let chunks = chunks_of(&steps, Some(DEFAULT_FLUSH_AFTER)).await;
        let texts: Vec<&str> = chunks.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(texts, ["80%", "\n"]);
        assert_eq!(chunks[0].2, 700 + 200);
    }

    /// Output that never pauses for the interval (a dot every 150 ms, under 200 ms) is
    /// sent once held for the maximum (1 s), and again each time it has been held that
    /// long since; the chunks add up to what was printed.
    #[tokio::test(start_paused = true)]
    async fn a_line_that_never_pauses_is_sent_once_held_for_the_maximum() {
        let steps: Vec<(&str, u64)> = std::iter::repeat_n((".", 150), 20)
            .chain([("\n", 0)])
            .collect();
        let chunks = chunks_of(&steps, Some(DEFAULT_FLUSH_AFTER)).await;
        let times: Vec<u64> = chunks.iter().map(|c| c.2).collect();
        // Dots at 0, 150, ..., 2850: held from 0 (sent at 1000, 7 dots), from 1050 (sent
        // at 2050, 7 more), from 2100 (the rest, with the newline, at 3000).
        assert_eq!(times, [1000, 2050, 3000]);
        let texts: Vec<&str> = chunks.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(texts, [".......", ".......", "......\n"]);
    }

    /// A bar redrawn without a pause: each state sent after the maximum hold rewrites the
    /// one sent before, so it comes on a line of its own (see `agent_text`).
    #[tokio::test(start_paused = true)]
    async fn a_bar_redrawn_without_pause_shows_a_state_per_maximum_hold_each_on_its_own_line() {
        let mut steps: Vec<(String, u64)> = (1..=25).map(|i| (format!("\r{i:>3}%"), 90)).collect();
        steps.push(("\n".into(), 0));
        let steps: Vec<(&str, u64)> = steps.iter().map(|(s, p)| (s.as_str(), *p)).collect();
        let chunks = chunks_of(&steps, Some(DEFAULT_FLUSH_AFTER)).await;
        let live: String = chunks.iter().map(|c| c.0.as_str()).collect();
        // Redraws at 0, 90, ..., 2160: the state at 1000 (the 12th, from 990) and at 2080
        // (held again from 1080: the 24th, from 2070); then the last as the line ends.
        assert_eq!(live, " 12%\n 24%\n 25%\n");
        let times: Vec<u64> = chunks.iter().map(|c| c.2).collect();
        assert_eq!(times, [1000, 2080, 2250]);
    }
}
