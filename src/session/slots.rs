//! Room for live kernels: the cap behind a pool's `maxSessions` and `maxConcurrent`.
//!
//! Every kernel process a pool runs (starting, idle, busy, or a prewarmed spare) holds a
//! [`Slot`], and there are never more slots out than the capacity. A slot is given back by
//! dropping it, which its holder does only once the kernel's process is gone (a confirmed
//! shutdown), never when a handle goes: the cap counts processes, not handles.
//!
//! Whoever cannot get a slot waits for [`Slots::changed`]: a slot given back, or anything
//! else that may make room (a session gone idle, which a waiter may evict). Spares never
//! take a slot while anyone waits ([`Slots::try_take_spare`]), so they cannot starve calls.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

pub struct Slots {
    capacity: usize,
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Default)]
struct State {
    taken: usize,
    waiting: usize,
}

/// Room for one kernel process; dropping it gives the room back.
pub struct Slot(Arc<Slots>);

/// Counts its holder among the waiters while it lives.
pub struct Waiting(Arc<Slots>);

impl Slots {
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            capacity,
            state: Mutex::default(),
            changed: Notify::new(),
        })
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Slots out now.
    pub fn taken(&self) -> usize {
        self.state.lock().unwrap().taken
    }

    /// A free slot, if there is one; never waits.
    pub fn try_take(self: &Arc<Self>) -> Option<Slot> {
        let mut state = self.state.lock().unwrap();
        (state.taken < self.capacity).then(|| {
            state.taken += 1;
            Slot(self.clone())
        })
    }

    /// A free slot for a spare: none while a call waits for room, which comes first.
    pub fn try_take_spare(self: &Arc<Self>) -> Option<Slot> {
        let mut state = self.state.lock().unwrap();
        (state.waiting == 0 && state.taken < self.capacity).then(|| {
            state.taken += 1;
            Slot(self.clone())
        })
    }

    /// Marks the caller as waiting for room until the guard is dropped.
    pub fn waiting(self: &Arc<Self>) -> Waiting {
        self.state.lock().unwrap().waiting += 1;
        Waiting(self.clone())
    }

    /// Resolves at the next [`Slots::notify`] or slot given back after this call, even
    /// one that happens before it is first polled (`Notify::notify_waiters` reaches every
    /// `Notified` already made): ask for it *before* looking for room, and no change
    /// between the look and the wait is missed.
    pub fn changed(&self) -> impl Future<Output = ()> + Send + '_ {
        self.changed.notified()
    }

    /// Room may have appeared (a session went idle, a spare became ready, the pool is
    /// being disposed): wakes every waiter to look again.
    pub fn notify(&self) {
        self.changed.notify_waiters();
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.state.lock().unwrap().taken -= 1;
        self.0.notify();
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.state.lock().unwrap().waiting -= 1;
        // A spare may take the room now; waiters are unaffected.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use tokio::time::{sleep, timeout, Instant};

    #[test]
    fn never_more_slots_out_than_the_capacity() {
        let slots = Slots::new(2);
        let a = slots.try_take().unwrap();
        let b = slots.try_take().unwrap();
        assert!(slots.try_take().is_none());
        assert_eq!(slots.taken(), 2);
        drop(a);
        assert_eq!(slots.taken(), 1);
        let _c = slots.try_take().expect("the slot given back is free again");
        assert!(slots.try_take().is_none());
        drop(b);
    }

    #[test]
    fn spares_step_aside_while_a_call_waits() {
        let slots = Slots::new(2);
        let waiting = slots.waiting();
        assert!(slots.try_take_spare().is_none());
        let call = slots
            .try_take()
            .expect("a waiting call still gets a free slot");
        drop(waiting);
        let spare = slots
            .try_take_spare()
            .expect("no waiter: the spare may have it");
        drop((call, spare));
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_between_the_look_and_the_wait_is_not_missed() {
        let slots = Slots::new(1);
        let held = slots.try_take().unwrap();
        let changed = slots.changed();
        assert!(slots.try_take().is_none()); // the look: no room
        drop(held); // room appears before the waiter is first polled
        timeout(Duration::from_secs(1), changed)
            .await
            .expect("the change was kept for the waiter");
        assert!(slots.try_take().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn notify_wakes_every_waiter() {
        let slots = Slots::new(1);
        let woken = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let (slots, woken) = (slots.clone(), woken.clone());
                tokio::spawn(async move {
                    let changed = slots.changed();
                    changed.await;
                    woken.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        tokio::task::yield_now().await;
        sleep(Duration::from_millis(10)).await;
        assert_eq!(woken.load(Ordering::SeqCst), 0, "nothing changed yet");
        slots.notify();
        for task in tasks {
            timeout(Duration::from_secs(1), task)
                .await
                .unwrap()
                .unwrap();
        }
        assert_eq!(woken.load(Ordering::SeqCst), 3);
    }

    /// Many takers, each waiting for room the way the pool does (look, else wait for a
    /// change, up to a deadline) and holding its slot a while: never more out than the
    /// capacity, and with patience enough every one gets a turn.
    #[tokio::test(start_paused = true)]
    async fn waiters_share_the_room_and_never_exceed_it() {
        let slots = Slots::new(2);
        let out = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..20u64)
            .map(|i| {
                let (slots, out, peak) = (slots.clone(), out.clone(), peak.clone());
                tokio::spawn(async move {
                    let deadline = Instant::now() + Duration::from_secs(60);
                    let _waiting = slots.waiting();
                    let slot = loop {
                        let changed = slots.changed();
                        if let Some(slot) = slots.try_take() {
                            break slot;
                        }
                        if tokio::time::timeout_at(deadline, changed).await.is_err() {
                            return false;
                        }
                    };
                    let now = out.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    sleep(Duration::from_millis(10 + (i * 7) % 30)).await;
                    out.fetch_sub(1, Ordering::SeqCst);
                    drop(slot);
                    true
                })
            })
            .collect();
        for task in tasks {
            assert!(task.await.unwrap(), "every taker got a slot in time");
        }
        assert_eq!(peak.load(Ordering::SeqCst), 2);
        assert_eq!(slots.taken(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_with_no_change_ends_at_its_deadline() {
        let slots = Slots::new(1);
        let _held = slots.try_take().unwrap();
        let started = Instant::now();
        let changed = slots.changed();
        assert!(timeout(Duration::from_millis(300), changed).await.is_err());
        assert_eq!(started.elapsed(), Duration::from_millis(300));
    }
}
