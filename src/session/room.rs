//! Room for a new kernel: a spare that fits, a free slot, or the slot of a spare or of the
//! least recently used idle session, ended for it; else a bounded wait. And keeping
//! spares ready in free room.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::time::Instant;

use crate::error::{KernelError, Result};
use crate::kernel::{AbortHandle, KernelConfig};
use crate::session::config::PoolMode;
use crate::session::inner::PoolInner;
use crate::session::live::{initialize_unless_aborted, preload_spare, start_in, LiveKernel};
use crate::session::placement::Load;
use crate::session::pooled::{KernelStarter, PooledKernel};
use crate::session::slots::Slot;
use crate::session::state::stop_session;
use crate::start::python::Resolved;

/// Where a call's abort stopped it before its kernel was ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stopped {
    /// Waiting for room, or for the pool to place its session.
    WaitingForRoom,
    /// While its kernel started (the kernel was ended).
    Starting,
}

impl Stopped {
    /// How each of its notices starts.
    pub(super) const PREFIX: &'static str = "Cancelled while ";

    /// The notice of a call stopped here; `nothing_ran`: no cell of it had run.
    pub(super) fn notice(self, nothing_ran: bool) -> String {
        let when = match self {
            Stopped::WaitingForRoom => "waiting for room in the pool",
            Stopped::Starting => "its kernel was starting",
        };
        let what = match nothing_ran {
            true => "nothing ran",
            false => "the cells after those that ran did not run",
        };
        format!("{}{when}; {what}.", Stopped::PREFIX)
    }
}

/// Where a new kernel will run.
enum Room<K> {
    /// A spare that fits, with its slot.
    Spare(LiveKernel<K>),
    /// Room to start one.
    Slot(Slot),
    /// Nothing yet: wait for room.
    Wait,
    /// The call was aborted while it waited.
    Aborted,
}

impl<K: PooledKernel> PoolInner<K> {
    /// Spawns spares until `prewarm` are ready or on their way, in free room only.
    pub(super) fn refill_spares(self: &Arc<Self>) {
        if self.disposing.load(Ordering::SeqCst) {
            return;
        }
        let slots = {
            let mut spares = self.spares.lock().unwrap();
            spares.ready.retain(|k| k.kernel.alive());
            let have = spares.ready.len() + spares.spawning;
            let slots: Vec<Slot> = (have..self.config.prewarm)
                .map_while(|_| self.slots.try_take_spare())
                .collect();
            spares.spawning += slots.len();
            slots
        };
        for slot in slots {
            let pool = Arc::downgrade(self);
            let starter = self.starter.clone();
            let config = self.config.session_kernel();
            let grace = self.config.shutdown_grace;
            let loads = self.placer.loads().clone();
            let preload = self.config.preload.clone();
            self.runtime.spawn(async move {
                // Initialized with the pool's defaults: a session claiming it with the
                // same settings (the usual case) runs its first cell at once.
                let started =
                    match start_in(&*starter, slot, &config, grace, &loads, None, None).await {
                        Ok(spare) => preload_spare(spare, &preload, grace).await,
                        failed => failed,
                    };
                // Dropped with the pool: the kernel's Drop kills it.
                let Some(pool) = pool.upgrade() else { return };
                let spare = {
                    let mut spares = pool.spares.lock().unwrap();
                    spares.spawning -= 1;
                    match started {
                        Ok(spare) if !pool.disposing.load(Ordering::SeqCst) => {
                            spares.ready.push(spare);
                            None
                        }
                        Ok(spare) => Some(spare),
                        Err(failed) => {
                            tracing::info!("could not start a spare kernel: {}", failed.error);
                            if let Some(kernel) = failed.unconfirmed {
                                pool.unconfirmed.lock().unwrap().push(kernel);
                            }
                            None
                        }
                    }
                };
                match spare {
                    Some(spare) => {
                        pool.end(spare).await;
                    }
                    // A waiter may claim it, or end it for its room.
                    None => pool.slots.notify(),
                }
            });
        }
    }

    /// Ends the spares found dead (killed, crashed) and starts their replacements, so a
    /// pool keeps `prewarm` ready between calls, not only after the next one.
    pub(super) async fn replace_dead_spares(self: &Arc<Self>) {
        let dead: Vec<LiveKernel<K>> = {
            let mut spares = self.spares.lock().unwrap();
            let (alive, dead) = std::mem::take(&mut spares.ready)
                .into_iter()
                .partition(|spare| spare.kernel.alive());
            spares.ready = alive;
            dead
        };
        if dead.is_empty() {
            return;
        }
        for spare in dead {
            tracing::info!("a spare kernel ended; replacing it");
            // Its room is free once it is gone: the refill below takes it again.
            drop(self.end(spare).await);
        }
        self.refill_spares();
    }

    /// A ready kernel for `config` in room of its own: a spare that fits, else a fresh
    /// start in `room` (the room of a kernel this call replaced), else in room found or
    /// waited for (see [`PoolInner::wait_for_room`]). `load`: the count a least-loaded
    /// placement took for it. `Err(Stopped)`: `abort` fired first; a kernel being started
    /// for it was ended (its room given back once it is gone).
    pub(super) async fn new_kernel(
        self: &Arc<Self>,
        config: &KernelConfig,
        room: Option<Slot>,
        abort: &AbortHandle,
        mut load: Option<Load>,
    ) -> Result<std::result::Result<LiveKernel<K>, Stopped>> {
        // Before a spare is initialized with it: its kv store path reaches the runner there.
        config.prepare_artifacts_dir()?;
        let mut room = match (room, self.take_spare(config, None)) {
            (_, Some(spare)) => Room::Spare(spare),
            (Some(slot), None) => Room::Slot(slot),
            (None, None) => Room::Wait,
        };
        let mut resolved = None;
        loop {
            room = match room {
                Room::Spare(spare) => {
                    if spare.kernel.initialized_for(config) {
                        return Ok(Ok(spare));
                    }
                    match initialize_unless_aborted(&*spare.kernel, config, Some(abort)).await {
                        Ok(()) => return Ok(Ok(spare)),
                        Err(KernelError::StartAborted) => {
                            // Half initialized for this call: no use to anyone else.
                            self.end(spare).await;
                            return Ok(Err(Stopped::Starting));
                        }
                        Err(err) => {
                            tracing::info!(
                                "a spare kernel failed to initialize ({err}); starting one"
                            );
                            self.end(spare).await.map_or(Room::Wait, Room::Slot)
                        }
                    }
                }
                // The spare taken is replaced once the call is over (see `Admission::run`),
                // not now: a Python starting beside the first cell would slow that cell.
                Room::Slot(slot) => {
                    let grace = self.config.shutdown_grace;
                    let loads = self.placer.loads();
                    let started = start_in(
                        &*self.starter,
                        slot,
                        config,
                        grace,
                        loads,
                        load.take(),
                        Some(abort),
                    )
                    .await;
                    return match started {
                        Ok(kernel) => Ok(Ok(kernel)),
                        Err(failed) => {
                            if let Some(kernel) = failed.unconfirmed {
                                self.unconfirmed.lock().unwrap().push(kernel);
                            }
                            match failed.error {
                                KernelError::StartAborted => Ok(Err(Stopped::Starting)),
                                error => Err(error),
                            }
                        }
                    };
                }
                Room::Wait => {
                    // Resolved before room is taken: a request whose interpreter is
                    // missing or unusable ends no other session's kernel. A launched
                    // kernel's interpreter is the far side's: nothing here to look at.
                    if resolved.is_none() && config.launcher.is_none() {
                        resolved = Some(self.starter.resolve(config).await?);
                    }
                    self.wait_for_room(config, resolved.as_ref(), abort).await?
                }
                Room::Aborted => return Ok(Err(Stopped::WaitingForRoom)),
            }
        }
    }

    /// Room for a kernel of `config`: a spare that runs its interpreter, a free slot, or
    /// the slot of a spare or of the least recently used idle session, ended for it;
    /// else waits until one of those turns up, for at most `acquire_timeout`
    /// (`ERR_POOL_FULL`). Cancel safety: dropping the future gives up nothing but its
    /// wait; a kernel being ended for it still ends, and its room goes back to the pool.
    async fn wait_for_room(
        self: &Arc<Self>,
        config: &KernelConfig,
        resolved: Option<&Resolved>,
        abort: &AbortHandle,
    ) -> Result<Room<K>> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + self.config.acquire_timeout;
        let _waiting = self.slots.waiting();
        loop {
            let changed = self.slots.changed();
            if self.disposing.load(Ordering::SeqCst) {
                return Err(KernelError::PoolDisposed);
            }
            if let Some(spare) = self.take_spare(config, resolved) {
                return Ok(Room::Spare(spare));
            }
            if let Some(slot) = self.slots.try_take() {
                return Ok(Room::Slot(slot));
            }
            if let Some(victim) = self.evict_for_room() {
                let pool = self.clone();
                let ended = self.runtime.spawn(async move { pool.end(victim).await });
                if let Ok(Some(slot)) = ended.await {
                    return Ok(Room::Slot(slot));
                }
                // Not confirmed gone: it keeps its room, and the next victim waits for a
                // change, so a kernel that never confirms cannot cost every idle session.
            }
            tokio::select! {
                _ = changed => {}
                _ = abort.aborted() => return Ok(Room::Aborted),
                _ = tokio::time::sleep_until(deadline) => {
                    let (limit, option) = self.config.cap();
                    return Err(KernelError::PoolFull {
                        limit,
                        option,
                        waited_ms: started.elapsed().as_millis() as u64,
                        advice: match self.config.mode {
                            PoolMode::Session => "end sessions you no longer need with `disposeOwner`",
                            PoolMode::PerCall => "make fewer calls at once",
                        },
                    });
                }
            }
        }
    }

    /// Takes a kernel away to free its room: a spare first (it holds nobody's state),
    /// else the least recently used session that is idle with nobody in line for it.
    /// None while a spare is starting: it is waited for (it may fit, and either way its
    /// room comes) rather than a session's state lost.
    fn evict_for_room(&self) -> Option<LiveKernel<K>> {
        {
            let mut spares = self.spares.lock().unwrap();
            if let Some(spare) = spares.ready.pop() {
                tracing::info!(pid = spare.kernel.pid(), "ending a spare kernel for room");
                return Some(spare);
            }
            if spares.spawning > 0 {
                return None;
            }
        }
        let mut sessions = self.sessions.lock().unwrap();
        let victim = sessions
            .values()
            .filter(|s| !s.turns.busy() && s.kernel.lock().unwrap().is_some())
            .min_by_key(|s| s.last_used.lock().unwrap().0)
            .cloned()?;
        sessions.remove(&victim.key);
        // Recorded before the lock goes: a call for this key admitted next is told.
        let (limit, option) = self.config.cap();
        self.record_eviction(
            victim.key.clone(),
            format!(
                "This session's kernel was shut down to make room for another session (the pool runs at most {limit} kernels: `{option}`); a new one was started and earlier state is gone."
            ),
        );
        drop(sessions);
        tracing::info!(key = %victim.key, "evicting the least recently used idle session for room");
        stop_session(&victim)
    }

    /// A spare for `config`, if one is ready: with the pool's settings any spare fits
    /// (no resolution, a blocking-pool thread, on the way); otherwise, for a local kernel,
    /// one running the interpreter `config` resolves to, when `resolved` is known. Spares
    /// run on the pool's default launcher (or here): a kernel meant elsewhere takes none.
    fn take_spare(
        &self,
        config: &KernelConfig,
        resolved: Option<&Resolved>,
    ) -> Option<LiveKernel<K>> {
        let pool = &self.config.kernel;
        if config.launcher != pool.launcher {
            return None;
        }
        // A spare's environment shows none of what the session installed.
        if config.session_dir.as_ref().is_some_and(|d| !d.is_empty()) {
            return None;
        }
        let mut spares = self.spares.lock().unwrap();
        let index = if config.interpreter == pool.interpreter
            && config.cwd == pool.cwd
            && config.base_env == pool.base_env
        {
            spares.ready.iter().position(|k| k.kernel.alive())?
        } else if config.launcher.is_some() {
            // What a launched kernel's interpreter or cwd are is the far side's business:
            // only a spare started with the same settings is known to fit.
            return None;
        } else if config.sandbox != pool.sandbox || config.sandbox.confines_writes() {
            // The sandbox is fixed at spawn, and confined writes name the cwd: such a
            // spare cannot serve a session elsewhere.
            return None;
        } else {
            // Nor can one whose view does not show the session's cwd (under the host's
            // /tmp, which a spare's view replaces).
            let resolved = resolved?;
            spares.ready.iter().position(|k| {
                k.kernel.alive() && k.kernel.resolved() == resolved && k.kernel.sees(&config.cwd)
            })?
        };
        Some(spares.ready.swap_remove(index))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::{sleep, Instant};

    use crate::error::KernelError;
    use crate::session::fake::{fake_pool, request, run};
    use crate::session::pooled::PooledKernel;

    #[tokio::test(start_paused = true)]
    async fn the_least_recently_used_idle_session_makes_room() {
        let (pool, fakes) = fake_pool(|c| c.max_sessions = 2);
        run(&pool, "a", "1").await.unwrap(); // kernel 1000
        sleep(Duration::from_secs(1)).await;
        run(&pool, "b", "1").await.unwrap(); // kernel 1001
        sleep(Duration::from_secs(1)).await;
        run(&pool, "a", "2").await.unwrap(); // a is now the most recently used
        sleep(Duration::from_secs(1)).await;

        run(&pool, "c", "1").await.unwrap();
        assert_eq!(fakes.shut_down(), [1001], "b was the least recently used");
        assert!(fakes.kernel(1000).alive());

        let b = run(&pool, "b", "again").await.unwrap();
        assert_eq!(fakes.shut_down(), [1001, 1000], "then a was");
        assert!(b.session_lost);
        assert_eq!(
            b.annotations,
            ["This session's kernel was shut down to make room for another session (the pool runs at most 2 kernels: `maxSessions`); a new one was started and earlier state is gone."]
        );
        assert_eq!(fakes.ran("again"), [1003]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_at_the_cap_waits_for_a_session_to_go_idle_then_runs() {
        let (pool, fakes) = fake_pool(|c| c.max_sessions = 1);
        let busy = tokio::spawn(pool.admit(request("a", "sleep 5")).unwrap().run(|_, _| {}));
        sleep(Duration::from_secs(1)).await;

        let asked = Instant::now();
        let b = run(&pool, "b", "1").await.unwrap();
        assert_eq!(
            asked.elapsed(),
            Duration::from_secs(4),
            "until a's cell ended"
        );
        assert_eq!(b.exit_code, Some(0));
        assert!(b.output.contains("ran 1"), "{}", b.output);
        assert_eq!(fakes.shut_down(), [1000], "a, idle, was evicted for b");
        assert_eq!(fakes.ran("1"), [1001]);
        assert_eq!(busy.await.unwrap().unwrap().exit_code, Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_finds_no_room_in_time_fails_with_pool_full() {
        let (pool, fakes) = fake_pool(|c| {
            c.max_sessions = 1;
            c.acquire_timeout = Duration::from_secs(3);
        });
        let _busy = tokio::spawn(pool.admit(request("a", "sleep 10")).unwrap().run(|_, _| {}));
        sleep(Duration::from_secs(1)).await;

        let err = run(&pool, "b", "1").await.unwrap_err();
        assert_eq!(err.code(), "ERR_POOL_FULL");
        assert!(
            matches!(
                err,
                KernelError::PoolFull {
                    limit: 1,
                    option: "maxSessions",
                    waited_ms: 3000,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "the KernelPool is full: it runs at most 1 kernels (`maxSessions`), all stayed busy, and none became free within 3000 ms. Raise `maxSessions`, end sessions you no longer need with `disposeOwner`, or wait longer with `acquireTimeoutMs`."
        );
        assert_eq!(fakes.spawned(), 1, "nothing was started for b");
        assert!(fakes.shut_down().is_empty(), "and nothing ended for it");
    }

    #[tokio::test(start_paused = true)]
    async fn an_unlimited_pool_starts_a_kernel_for_every_session_and_evicts_none() {
        let (pool, fakes) = fake_pool(|c| {
            c.max_sessions = crate::session::config::UNLIMITED;
            c.acquire_timeout = Duration::ZERO;
        });
        let busy: Vec<_> = (0..12)
            .map(|i| {
                let call = pool.admit(request(&format!("s{i}"), "sleep 5")).unwrap();
                tokio::spawn(call.run(|_, _| {}))
            })
            .collect();
        sleep(Duration::from_secs(1)).await;
        assert_eq!(fakes.spawned(), 12, "all at once, none waiting");
        for call in busy {
            assert_eq!(call.await.unwrap().unwrap().exit_code, Some(0));
        }
        assert!(fakes.shut_down().is_empty(), "nobody evicted");
        assert_eq!(pool.sessions().len(), 12);
    }

    #[tokio::test(start_paused = true)]
    async fn a_claimed_spare_is_replaced_once_the_call_is_over() {
        let (pool, fakes) = fake_pool(|c| c.prewarm = 1);
        sleep(Duration::from_millis(10)).await;
        assert_eq!(pool.spare_pids(), [1000]);

        let first = run(&pool, "a", "1").await.unwrap();
        assert_eq!(first.exit_code, Some(0));
        assert_eq!(
            fakes.ran("1"),
            [1000],
            "the session's first cell ran in the spare"
        );
        sleep(Duration::from_millis(10)).await;
        assert_eq!(pool.spare_pids(), [1001]);
        assert_eq!(fakes.spawned(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_spare_that_dies_is_replaced_without_waiting_for_a_call() {
        let (pool, fakes) = fake_pool(|c| c.prewarm = 1);
        sleep(Duration::from_millis(10)).await;
        assert_eq!(pool.spare_pids(), [1000]);

        fakes.kernel(1000).die(-9);
        // The upkeep looks at least once a second.
        sleep(Duration::from_millis(1100)).await;
        assert_eq!(pool.spare_pids(), [1001], "replaced with no call made");
        assert_eq!(
            fakes.shut_down(),
            [1000],
            "the dead spare was ended, its room freed"
        );
    }
}
