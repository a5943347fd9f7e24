//! Turns taken in the order they were asked for.
//!
//! Why not a `tokio::sync::Mutex`: its queue order is the order in which waiting futures
//! are first polled, and a future spawned per JavaScript call is polled in whatever order
//! the runtime's worker threads pick. A place in this line is taken synchronously, on the
//! caller's thread, when the call is made.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

#[derive(Default)]
pub struct Fifo {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    busy: bool,
    waiting: VecDeque<oneshot::Sender<()>>,
}

/// A place in the line; [`Place::turn`] waits for it to come up.
pub struct Place {
    /// Taken by [`Place::turn`]; a place dropped while it still has it gives its turn up.
    fifo: Option<Arc<Fifo>>,
    /// `None` once the turn is ours.
    wait: Option<oneshot::Receiver<()>>,
}

/// Holding this is having the turn; dropping it passes the turn on.
pub struct Turn(Arc<Fifo>);

impl Fifo {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Takes the next place in line, now.
    pub fn join(self: &Arc<Self>) -> Place {
        let mut state = self.state.lock().unwrap();
        let wait = if state.busy {
            let (tx, rx) = oneshot::channel();
            state.waiting.push_back(tx);
            Some(rx)
        } else {
            state.busy = true;
            None
        };
        Place {
            fifo: Some(self.clone()),
            wait,
        }
    }

    /// The turn, if nobody has it and nobody waits; never waits.
    pub fn try_join(self: &Arc<Self>) -> Option<Turn> {
        let mut state = self.state.lock().unwrap();
        if state.busy {
            return None;
        }
        state.busy = true;
        Some(Turn(self.clone()))
    }

    /// Whether someone has the turn.
    pub fn busy(&self) -> bool {
        self.state.lock().unwrap().busy
    }

    fn pass_on(&self) {
        let mut state = self.state.lock().unwrap();
        while let Some(next) = state.waiting.pop_front() {
            // A waiter that gave up dropped its receiver; skip it.
            if next.send(()).is_ok() {
                return;
            }
        }
        state.busy = false;
    }
}

impl Place {
    /// Waits until it is this place's turn.
    /// Cancel safety: dropping the future gives the place up (and the turn, if it came).
    pub async fn turn(mut self) -> Turn {
        if let Some(rx) = self.wait.as_mut() {
            // Senders are dropped unsent only by `pass_on` skipping a closed receiver,
            // and ours is open: this resolves when the turn comes.
            let _ = rx.await;
            self.wait = None;
        }
        Turn(self.fifo.take().expect("a place is turned once"))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let Some(fifo) = &self.fifo else {
            return;
        };
        let turn_is_ours = match &mut self.wait {
            None => true,
            // The turn came but nobody took it.
            Some(rx) => rx.try_recv().is_ok(),
        };
        if turn_is_ours {
            fifo.pass_on();
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.0.pass_on();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn turns_follow_the_order_places_were_taken() {
        let fifo = Fifo::new();
        let order = Arc::new(StdMutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..50 {
            let place = fifo.join();
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let _turn = place.turn().await;
                order.lock().unwrap().push(i);
                tokio::task::yield_now().await;
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..50).collect::<Vec<_>>());
        assert!(!fifo.busy());
    }

    #[tokio::test]
    async fn try_join_takes_a_free_turn_and_never_jumps_the_line() {
        let fifo = Fifo::new();
        assert!(!fifo.busy());
        let turn = fifo.try_join().expect("nobody has the turn");
        assert!(fifo.busy());
        assert!(fifo.try_join().is_none(), "the turn is taken");
        let waiting = fifo.join();
        drop(turn);
        // The turn went to the place in line, not to a later try_join.
        assert!(fifo.busy());
        assert!(fifo.try_join().is_none());
        drop(waiting.turn().await);
        assert!(!fifo.busy());
        assert!(fifo.try_join().is_some());
    }

    #[tokio::test]
    async fn a_place_given_up_does_not_block_the_line() {
        let fifo = Fifo::new();
        let first = fifo.join().turn().await;
        let abandoned = fifo.join();
        let third = fifo.join();
        drop(abandoned);
        drop(first);
        let _turn = tokio::time::timeout(std::time::Duration::from_secs(1), third.turn())
            .await
            .expect("the third place got its turn");
    }

    #[tokio::test]
    async fn a_turn_that_came_but_was_not_taken_is_passed_on() {
        let fifo = Fifo::new();
        let first = fifo.join().turn().await;
        let second = fifo.join();
        let third = fifo.join();
        drop(first); // the turn is sent to `second`, which never awaits it
        drop(second);
        let _turn = tokio::time::timeout(std::time::Duration::from_secs(1), third.turn())
            .await
            .expect("the turn moved on to the third place");
    }
}
