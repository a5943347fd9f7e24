//! How many bridge calls one kernel may have the host working on at once.
//!
//! Every `call` frame is work the host does for the cell: a task, a call into the host's
//! `onCall` (a promise the host holds), a reply waiting for the writer. Code in the kernel
//! can write `call` frames as fast as the pipe takes them (forged on the protocol fd, or
//! real calls from many threads), so without a bound the host's memory grows with them.
//!
//! The bound is backpressure, not refusal: a call frame that finds every slot taken waits
//! in the execute loop until a reply frees one, and the frames behind it wait in the
//! request's route, then in the runner's pipe, where the cell's own writes block. A
//! legitimate cell whose threads make more calls than there are slots only waits a little
//! longer (each call still gets its answer); a flooding cell blocks itself and keeps the
//! host's memory at [`MAX_CALLS_IN_FLIGHT`] calls' worth. Refusing with an error instead
//! would fail a cell that merely started 100 threads. The clocks and the abort still run
//! while a call waits for a slot, so a cell whose calls never end is stopped by its
//! timeout as any other; a cell being stopped waits for no slot (its calls past the limit
//! are dropped unanswered: the runner fails an interrupted cell's calls itself as the cell
//! ends), so its last frames get through even when every slot is held by a reply the
//! runner does not read.
//!
//! A slot is held from the frame's arrival until its reply is written: a reply the runner
//! does not read (the cell wedged its own stdin) keeps its slot, so unread replies cannot
//! pile up either.
//!
//! Of those, the calls the host answers itself with blocking file IO (kv, a mapped
//! `read()`/`write()`, an artifact read) run on tokio's blocking pool; they take a second,
//! smaller bound, so one kernel cannot occupy that pool's threads (shared by every kernel
//! of the host) with its disk work.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bridge calls one kernel may have in flight, from the frame's arrival to its reply.
pub(super) const MAX_CALLS_IN_FLIGHT: usize = 64;
/// Of those, the host-answered calls doing blocking file IO at once.
pub(super) const MAX_BLOCKING_CALLS: usize = 4;

/// One kernel's bounds on bridge calls.
pub(super) struct CallLimits {
    in_flight: Arc<Semaphore>,
    blocking: Arc<Semaphore>,
}

/// A call's place among [`MAX_CALLS_IN_FLIGHT`]; freed when dropped (after its reply).
pub(super) struct CallSlot(#[allow(dead_code)] OwnedSemaphorePermit);

impl CallLimits {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            in_flight: Arc::new(Semaphore::new(MAX_CALLS_IN_FLIGHT)),
            blocking: Arc::new(Semaphore::new(MAX_BLOCKING_CALLS)),
        })
    }

    /// A slot now, if one is free.
    pub(super) fn try_slot(&self) -> Option<CallSlot> {
        self.in_flight
            .clone()
            .try_acquire_owned()
            .ok()
            .map(CallSlot)
    }

    /// A slot once one is free.
    /// Cancel safety: dropping the future gives up its place in the line; no slot is taken.
    pub(super) async fn slot(&self) -> CallSlot {
        let permit = self.in_flight.clone().acquire_owned().await;
        CallSlot(permit.expect("the semaphore is never closed"))
    }

    /// Runs `work` (blocking file IO) on the blocking pool once one of the
    /// [`MAX_BLOCKING_CALLS`] places is free; `Err` when it panicked.
    pub(super) async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> std::result::Result<T, String> {
        let _place = self.blocking.acquire().await;
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| e.to_string())
    }

    /// Slots free now.
    #[cfg(test)]
    fn free(&self) -> usize {
        self.in_flight.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn a_call_past_the_limit_waits_for_a_reply_to_free_a_slot() {
        let limits = CallLimits::new();
        let held: Vec<_> = (0..MAX_CALLS_IN_FLIGHT)
            .map(|_| limits.try_slot().expect("a free slot"))
            .collect();
        assert!(limits.try_slot().is_none(), "no slot past the limit");
        let waiting = tokio::time::timeout(Duration::from_millis(50), limits.slot()).await;
        assert!(
            waiting.is_err(),
            "the next call waits while every slot is held"
        );
        drop(held);
        assert_eq!(limits.free(), MAX_CALLS_IN_FLIGHT);
        let _slot = tokio::time::timeout(Duration::from_secs(5), limits.slot())
            .await
            .expect("a freed slot is taken");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn at_most_four_blocking_calls_run_at_once() {
        let limits = CallLimits::new();
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let calls = (0..16).map(|_| {
            let (limits, running, most) = (limits.clone(), running.clone(), most.clone());
            tokio::spawn(async move {
                limits
                    .blocking(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(20));
                        running.fetch_sub(1, Ordering::SeqCst);
                    })
                    .await
            })
        });
        for call in calls.collect::<Vec<_>>() {
            call.await.unwrap().unwrap();
        }
        let most = most.load(Ordering::SeqCst);
        assert!(
            (2..=MAX_BLOCKING_CALLS).contains(&most),
            "ran {most} at once"
        );
    }
}
