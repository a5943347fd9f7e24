//! The `per-call` requests running now ([`PerCalls`]): no session's, so the pool keeps
//! them here for its disposal to stop them and end their kernels.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::kernel::AbortHandle;
use crate::session::pooled::PooledKernel;

/// The `per-call` requests running now: each one's abort, and its kernel while it has one.
pub(super) struct PerCalls<K> {
    pub(super) running: Mutex<HashMap<u64, Running<K>>>,
    pub(super) next: AtomicU64,
    /// A request's entry gone.
    pub(super) ended: Notify,
}

pub(super) struct Running<K> {
    pub(super) abort: Arc<AbortHandle>,
    pub(super) kernel: Option<Arc<K>>,
}

impl<K> Default for PerCalls<K> {
    fn default() -> Self {
        PerCalls {
            running: Mutex::default(),
            next: AtomicU64::new(0),
            ended: Notify::new(),
        }
    }
}

impl<K: PooledKernel> PerCalls<K> {
    /// Stops every running request (as its abort would) and shuts their kernels down,
    /// each step waiting `grace`; then waits for the requests to end, for the rest of
    /// `budget`. What a request does once stopped (its kernel ended through the pool, its
    /// room given back once it is gone) is its own.
    pub(super) async fn stop_all(&self, grace: Duration, budget: Duration) {
        let started = tokio::time::Instant::now();
        let kernels: Vec<Arc<K>> = {
            let running = self.running.lock().unwrap();
            running
                .values()
                .filter_map(|r| {
                    r.abort.abort();
                    r.kernel.clone()
                })
                .collect()
        };
        let shutdowns: Vec<_> = kernels
            .into_iter()
            .map(|kernel| tokio::spawn(async move { kernel.shutdown(grace).await }))
            .collect();
        for shutdown in shutdowns {
            let _ = shutdown.await;
        }
        let _ = tokio::time::timeout_at(started + budget, async {
            loop {
                let ended = self.ended.notified();
                if self.running.lock().unwrap().is_empty() {
                    return;
                }
                ended.await;
            }
        })
        .await;
    }
}
