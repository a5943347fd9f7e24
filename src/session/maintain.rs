//! The pool's upkeep while it lives: idle eviction, dead spares replaced, the heartbeat (a
//! dead or silent idle kernel is replaced, and its session's next call told), retries of
//! unconfirmed shutdowns.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::kernel::fifo::Turn;
use crate::session::inner::PoolInner;
use crate::session::key::SessionKey;
use crate::session::pooled::PooledKernel;
use crate::session::state::{stop_session, Session, StateLost};

/// Idle eviction, the heartbeat and retries of unconfirmed shutdowns, until the pool goes.
pub(super) async fn maintain<K: PooledKernel>(pool: Weak<PoolInner<K>>, opening: u64) {
    let mut last_heartbeat = Instant::now();
    loop {
        let tick = match pool.upgrade() {
            Some(inner) => {
                let config = &inner.config;
                let mut tick = config.idle_timeout.map_or(Duration::from_secs(1), |idle| {
                    (idle / 4).min(Duration::from_secs(1))
                });
                if !config.heartbeat_interval.is_zero() {
                    tick = tick.min(config.heartbeat_interval);
                }
                tick.max(Duration::from_millis(10))
            }
            None => return,
        };
        tokio::time::sleep(tick).await;
        let Some(inner) = pool.upgrade() else { return };
        if inner.disposing.load(Ordering::SeqCst) || inner.opening.load(Ordering::SeqCst) != opening
        {
            return;
        }
        let now = Instant::now();
        inner.evict_idle(now).await;
        inner.replace_dead_spares().await;
        let sessions = inner.all_sessions();
        let heartbeat = inner.config.heartbeat_interval;
        if !heartbeat.is_zero() && now.duration_since(last_heartbeat) >= heartbeat {
            last_heartbeat = now;
            for session in &sessions {
                check_heartbeat(&inner, session).await;
            }
        }
        inner
            .retry_unconfirmed(inner.config.shutdown_grace * 3)
            .await;
    }
}

/// Pings an idle session's kernel; a dead or silent one is removed, and the next call is
/// told its state was lost.
async fn check_heartbeat<K: PooledKernel>(pool: &PoolInner<K>, session: &Session<K>) {
    let Some(turn) = session.turns.try_join() else {
        return; // busy: its call will see how the kernel is doing
    };
    check_kernel(pool, session, &turn).await;
    drop(turn);
    // Idle again: a call waiting for room may evict it.
    pool.slots.notify();
}

async fn check_kernel<K: PooledKernel>(pool: &PoolInner<K>, session: &Session<K>, _turn: &Turn) {
    let Some(kernel) = session.current_kernel() else {
        return;
    };
    let timeout = pool.config.heartbeat_timeout;
    let mut exit = kernel.exit_info();
    if exit.is_none() {
        if kernel.ping(timeout).await {
            return;
        }
        // A kernel that died just before the ping fails it too, while its exit may not be
        // known yet (its init reports it a moment later, later still on a loaded machine):
        // that moment is waited for before it is called wedged.
        exit = kernel.wait_for_exit(timeout).await;
    }
    let lost = match exit {
        Some(exit) => format!("The Python kernel ended while idle ({exit}); a new one was started and earlier state is gone."),
        None => {
            kernel.shutdown(pool.config.shutdown_grace).await;
            "The Python kernel stopped answering while idle and was replaced; earlier state is gone."
                .to_string()
        }
    };
    tracing::info!(key = %session.key, "heartbeat replaced the kernel");
    if let Some(gone) = session.take_kernel() {
        pool.end(gone).await;
    }
    *session.lost_while_idle.lock().unwrap() = Some(StateLost::kernel_ended(lost));
}

impl<K: PooledKernel> PoolInner<K> {
    /// Evicts the sessions idle for the idle timeout with nobody in line for them; none
    /// when idle sessions are never evicted.
    async fn evict_idle(&self, now: Instant) {
        let Some(idle) = self.config.idle_timeout else {
            return;
        };
        let evicted: Vec<Arc<Session<K>>> = {
            let mut sessions = self.sessions.lock().unwrap();
            let keys: Vec<SessionKey> = sessions
                .values()
                .filter(|s| {
                    !s.turns.busy() && now.duration_since(s.last_used.lock().unwrap().0) >= idle
                })
                .map(|s| s.key.clone())
                .collect();
            let evicted: Vec<_> = keys.iter().filter_map(|k| sessions.remove(k)).collect();
            // Recorded before the lock goes: a call for one of these keys admitted next
            // is told.
            for session in evicted.iter().filter(|s| s.current_kernel().is_some()) {
                self.record_eviction(
                    session.key.clone(),
                    format!(
                        "This session was idle for {} s and its kernel was shut down; a new one was started and earlier state is gone.",
                        idle.as_secs_f64()
                    ),
                );
            }
            evicted
        };
        for session in evicted {
            tracing::info!(key = %session.key, "evicting idle session");
            if let Some(live) = stop_session(&session) {
                self.end(live).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::sleep;

    use crate::session::fake::{fake_pool, run, Call};

    #[tokio::test(start_paused = true)]
    async fn a_session_idle_for_the_idle_timeout_is_evicted() {
        let (pool, fakes) = fake_pool(|c| c.idle_timeout = Some(Duration::from_secs(10)));
        run(&pool, "a", "1").await.unwrap();
        sleep(Duration::from_secs(9)).await;
        assert!(fakes.shut_down().is_empty(), "not idle long enough yet");
        assert_eq!(pool.sessions().len(), 1);

        sleep(Duration::from_secs(2)).await;
        assert_eq!(fakes.shut_down(), [1000]);
        assert!(pool.sessions().is_empty());

        let again = run(&pool, "a", "2").await.unwrap();
        assert!(again.session_lost);
        assert!(!again.kernel_restarted, "evicted, not restarted");
        assert_eq!(
            again.annotations,
            ["This session was idle for 10 s and its kernel was shut down; a new one was started and earlier state is gone."]
        );
        assert_eq!(fakes.ran("2"), [1001]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pool_whose_idle_timeout_is_never_keeps_idle_sessions() {
        let (pool, fakes) = fake_pool(|c| c.idle_timeout = None);
        run(&pool, "a", "1").await.unwrap();
        // Long past the default (5 minutes); the upkeep ticks each second meanwhile.
        sleep(Duration::from_secs(2 * 3600)).await;
        assert!(fakes.shut_down().is_empty());
        let again = run(&pool, "a", "2").await.unwrap();
        assert!(!again.session_lost && again.annotations.is_empty());
        assert_eq!(fakes.ran("2"), [1000], "the same kernel, hours later");
    }

    #[tokio::test(start_paused = true)]
    async fn the_heartbeat_replaces_a_kernel_that_died_while_idle() {
        let (pool, fakes) = fake_pool(|c| c.heartbeat_interval = Duration::from_secs(5));
        run(&pool, "a", "1").await.unwrap();
        fakes.kernel(1000).die(3);
        sleep(Duration::from_secs(6)).await;
        assert_eq!(
            fakes.shut_down(),
            [1000],
            "taken away and ended by the heartbeat"
        );
        assert_eq!(pool.sessions()[0].pid, None);

        let next = run(&pool, "a", "2").await.unwrap();
        assert!(next.session_lost);
        assert!(next.kernel_restarted, "replaced by the heartbeat");
        assert_eq!(
            next.annotations,
            ["The Python kernel ended while idle (exit code 3); a new one was started and earlier state is gone."]
        );
        assert_eq!(fakes.ran("2"), [1001]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_heartbeat_replaces_a_kernel_that_stopped_answering() {
        let (pool, fakes) = fake_pool(|c| c.heartbeat_interval = Duration::from_secs(5));
        run(&pool, "a", "1").await.unwrap();
        fakes.kernel(1000).hang();
        // The ping, then the wait for an exit, take a heartbeat timeout (2 s) each.
        sleep(Duration::from_secs(10)).await;
        let calls = fakes.calls();
        assert!(calls.contains(&Call::Ping(1000)), "{calls:?}");
        assert!(calls.contains(&Call::Shutdown(1000)), "{calls:?}");

        let next = run(&pool, "a", "2").await.unwrap();
        assert!(next.session_lost);
        assert_eq!(
            next.annotations,
            ["The Python kernel stopped answering while idle and was replaced; earlier state is gone."]
        );
        assert_eq!(fakes.ran("2"), [1001]);
    }
}
