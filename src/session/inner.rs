//! The pool's shared state ([`PoolInner`]) and its bookkeeping: where a request runs, the
//! session for a key, evictions remembered, disposal of a session, ending kernels.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::error::Result;
use crate::kernel::fifo::{Fifo, Place};
use crate::kernel::{AbortHandle, KernelConfig};
use crate::session::config::{PoolConfig, PoolRequest};
use crate::session::key::{checked_cwd, SessionKey};
use crate::session::live::{end_kernel, LiveKernel, Spares};
use crate::session::per_calls::PerCalls;
use crate::session::placement::{Load, Placer, SessionRef};
use crate::session::pooled::PooledKernel;
use crate::session::site::{Site, Unplaced};
use crate::session::slots::{Slot, Slots};
use crate::session::state::{stop_session, Session, StateLost};
use crate::start::launcher::Launcher;

/// How many evicted sessions are remembered, to tell each one's next call.
const EVICTIONS_REMEMBERED: usize = 1024;

pub(super) struct PoolInner<K: PooledKernel> {
    pub(super) config: PoolConfig,
    /// Starts its kernels.
    pub(super) starter: Arc<K::Starter>,
    pub(super) sessions: Mutex<HashMap<SessionKey, Arc<Session<K>>>>,
    pub(super) disposing: AtomicBool,
    /// `dispose_all` calls that began and have not ended: `reopen` waits for none of them.
    pub(super) disposals: AtomicU64,
    /// Counts `reopen`s: a maintenance task of an earlier opening ends when it changes.
    pub(super) opening: AtomicU64,
    /// Kernels whose shutdown was not confirmed, retried on every maintenance tick. They
    /// keep their room: their processes may still run.
    pub(super) unconfirmed: Mutex<Vec<LiveKernel<K>>>,
    /// Admission runs on the caller's thread, outside the runtime; work it starts goes here.
    pub(super) runtime: tokio::runtime::Handle,
    /// Spare kernels initialized with the pool's default configuration.
    pub(super) spares: Mutex<Spares<K>>,
    /// The cap: one slot per kernel process.
    pub(super) slots: Arc<Slots>,
    /// Sessions evicted lately and why, told to each one's next call (oldest first).
    pub(super) evictions: Mutex<VecDeque<(SessionKey, String)>>,
    /// Where sessions that name no launcher run.
    pub(super) placer: Placer,
    /// The `per-call` requests running now: no session's, so disposal finds them here.
    pub(super) per_calls: PerCalls<K>,
}

impl<K: PooledKernel> PoolInner<K> {
    /// Where a request's kernel runs: through the launcher it names, else on the pool's
    /// default, unless the pool places sessions: then where it decides as the first kernel
    /// starts.
    pub(super) fn site_of(&self, request: &PoolRequest) -> Result<Site> {
        let named = request
            .launcher
            .clone()
            .map(|argv| Launcher::new(argv, self.config.launcher_shell))
            .transpose()?;
        if named.is_none() && self.placer.places() {
            return Ok(Site::Unplaced(Unplaced {
                cwd: request.cwd.clone(),
                interpreter: request
                    .interpreter
                    .clone()
                    .or_else(|| self.config.kernel.interpreter.clone()),
                session_id: None,
                who: SessionRef {
                    session_id: request.session_id.clone(),
                    session_file: request.session_file.clone(),
                    owner_id: request.owner_id.clone(),
                },
            }));
        }
        let launcher = named.or_else(|| self.config.kernel.launcher.clone());
        Ok(Site::Placed(Box::new(self.config.kernel_for(
            request.cwd.as_deref(),
            request.interpreter.as_ref(),
            launcher,
        ))))
    }

    /// The settings of the next kernel of `site`, placed first if it is not yet (it then
    /// stays where it was placed), and the count a least-loaded choice took for it.
    /// `None`: aborted while the host's `launcherFor` was deciding. Cancel safety:
    /// dropping the future leaves the site unplaced.
    pub(super) async fn placed(
        &self,
        site: &Mutex<Site>,
        abort: &AbortHandle,
    ) -> Result<Option<(KernelConfig, Option<Load>)>> {
        let unplaced = match &*site.lock().unwrap() {
            Site::Placed(config) => return Ok(Some(((**config).clone(), None))),
            Site::Unplaced(unplaced) => unplaced.clone(),
        };
        let (launcher, load) = tokio::select! {
            placed = self.placer.place(unplaced.who.clone()) => placed?,
            _ = abort.aborted() => return Ok(None),
        };
        let mut config = self.config.kernel_for(
            unplaced.cwd.as_deref(),
            unplaced.interpreter.as_ref(),
            launcher,
        );
        config.session_id = unplaced.session_id;
        if config.launcher.is_none() {
            checked_cwd(&config.cwd)?;
        }
        tracing::info!(
            launcher = config
                .launcher
                .as_ref()
                .map_or("(here)".into(), |l| l.describe()),
            "placed a session"
        );
        *site.lock().unwrap() = Site::Placed(Box::new(config.clone()));
        Ok(Some((config, load)))
    }

    /// A snapshot of the sessions (the lock is not held while they are worked on).
    pub(super) fn all_sessions(&self) -> Vec<Arc<Session<K>>> {
        self.sessions.lock().unwrap().values().cloned().collect()
    }

    /// The session for `key` and a place in its line, taken under the sessions lock so
    /// that eviction (which only takes sessions nobody is in line for) cannot take it
    /// between the two.
    pub(super) fn session_for(
        &self,
        key: SessionKey,
        site: Site,
        owner: String,
    ) -> (Arc<Session<K>>, Place) {
        let mut sessions = self.sessions.lock().unwrap();
        if let Some(session) = sessions.get(&key) {
            session.owners.lock().unwrap().insert(owner);
            return (session.clone(), session.turns.join());
        }
        let evicted = {
            let mut evictions = self.evictions.lock().unwrap();
            let found = evictions.iter().position(|(k, _)| *k == key);
            found.and_then(|i| evictions.remove(i)).map(|(_, why)| why)
        };
        let session = Arc::new(Session {
            key: key.clone(),
            site: Mutex::new(site),
            turns: Fifo::new(),
            kernel: Mutex::default(),
            had_kernel: AtomicBool::new(false),
            owners: Mutex::new(BTreeSet::from([owner])),
            last_used: Mutex::new((Instant::now(), SystemTime::now())),
            disposed: AtomicBool::new(false),
            resets: Mutex::default(),
            running: Mutex::default(),
            lost_while_idle: Mutex::new(evicted.map(StateLost::evicted)),
            dir: Mutex::default(),
        });
        sessions.insert(key, session.clone());
        let place = session.turns.join();
        (session, place)
    }

    /// Remembers that `key` was evicted, so its next call is told its state is gone.
    pub(super) fn record_eviction(&self, key: SessionKey, why: String) {
        let mut evictions = self.evictions.lock().unwrap();
        evictions.retain(|(k, _)| *k != key);
        if evictions.len() == EVICTIONS_REMEMBERED {
            evictions.pop_front();
        }
        evictions.push_back((key, why));
    }

    pub(super) async fn dispose(&self, session: Arc<Session<K>>, budget: Duration) {
        {
            let mut sessions = self.sessions.lock().unwrap();
            if sessions
                .get(&session.key)
                .is_some_and(|s| Arc::ptr_eq(s, &session))
            {
                sessions.remove(&session.key);
            }
        }
        if let Some(live) = stop_session(&session) {
            self.end_within(live, budget / 3).await;
        }
    }

    /// After a call on `session`: forgets the session if it never had a kernel (its start
    /// failed, no room came in time, the call was aborted first) and nobody is in line
    /// for it, so nothing of it is left behind; then lets waiters look for room (it may
    /// be idle now).
    pub(super) fn after_call(self: &Arc<Self>, session: &Arc<Session<K>>) {
        {
            let mut sessions = self.sessions.lock().unwrap();
            let forget = !session.had_kernel.load(Ordering::SeqCst)
                && !session.turns.busy()
                && sessions
                    .get(&session.key)
                    .is_some_and(|s| Arc::ptr_eq(s, session));
            if forget {
                tracing::info!(key = %session.key, "forgetting a session that never had a kernel");
                sessions.remove(&session.key);
            }
        }
        self.slots.notify();
        self.refill_spares();
    }

    /// Ends `live` (one shutdown grace per step) and returns its room once the process
    /// is confirmed gone; one that is not is kept, with its room, for a later retry.
    pub(super) async fn end(&self, live: LiveKernel<K>) -> Option<Slot> {
        self.end_within(live, self.config.shutdown_grace).await
    }

    pub(super) async fn end_within(&self, live: LiveKernel<K>, grace: Duration) -> Option<Slot> {
        match end_kernel(live, grace).await {
            Ok(slot) => Some(slot),
            Err(unconfirmed) => {
                self.unconfirmed.lock().unwrap().push(unconfirmed);
                None
            }
        }
    }

    pub(super) async fn retry_unconfirmed(&self, budget: Duration) {
        let kernels = std::mem::take(&mut *self.unconfirmed.lock().unwrap());
        for live in kernels {
            self.end_within(live, budget / 3).await;
        }
    }
}
