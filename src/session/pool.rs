//! The pool ([`Pool`]): admitting requests, the sessions it reports, disposal and
//! `reopen`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{KernelError, Result};
use crate::kernel::{Caller, Kernel};
use crate::session::config::{clamp_timeout, clamp_timeout_ms, PoolConfig, PoolMode, PoolRequest};
use crate::session::inner::PoolInner;
use crate::session::key::{checked_cwd, session_key};
use crate::session::maintain::maintain;
use crate::session::per_calls::PerCalls;
use crate::session::placement::Placer;
use crate::session::pooled::{PooledKernel, Spawner};
use crate::session::run::{Admission, Target};
use crate::session::site::Site;
use crate::session::slots::Slots;
use crate::session::state::{Session, SessionInfo};

pub struct Pool<K: PooledKernel = Kernel> {
    inner: Arc<PoolInner<K>>,
}

impl Pool {
    /// Must be called inside a tokio runtime: it starts the maintenance task.
    pub fn new(config: PoolConfig) -> Pool {
        Pool::with_starter(config, Spawner)
    }
}

impl<K: PooledKernel> Pool<K> {
    /// A pool whose kernels `starter` starts (the unit tests' stand-ins); as [`Pool::new`].
    pub(super) fn with_starter(config: PoolConfig, starter: K::Starter) -> Pool<K> {
        let placer = Placer::new(
            config.placement.clone(),
            config.kernel.launcher.clone(),
            config.launcher_shell,
        );
        let inner = Arc::new(PoolInner {
            slots: Slots::new(config.cap().0),
            placer,
            config,
            starter: Arc::new(starter),
            sessions: Mutex::default(),
            disposing: AtomicBool::new(false),
            disposals: AtomicU64::new(0),
            opening: AtomicU64::new(0),
            unconfirmed: Mutex::default(),
            runtime: tokio::runtime::Handle::current(),
            spares: Mutex::default(),
            evictions: Mutex::default(),
            per_calls: PerCalls::default(),
        });
        tokio::spawn(maintain(Arc::downgrade(&inner), 0));
        inner.refill_spares();
        Pool { inner }
    }

    /// Takes work again after [`Pool::dispose_all`]: new sessions get fresh kernels, and
    /// maintenance and spares start over. A pool that was not disposed is left as it is;
    /// one whose disposal has not finished is refused ([`KernelError::DisposeInProgress`]),
    /// as that disposal would end what the reopening starts.
    pub fn reopen(&self) -> Result<()> {
        let inner = &self.inner;
        if inner.disposals.load(Ordering::SeqCst) > 0 {
            return Err(KernelError::DisposeInProgress);
        }
        if !inner.disposing.swap(false, Ordering::SeqCst) {
            return Ok(());
        }
        let opening = inner.opening.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::info!("reopening the pool");
        inner
            .runtime
            .spawn(maintain(Arc::downgrade(inner), opening));
        inner.refill_spares();
        Ok(())
    }

    /// Fixes the request's session and its place in that session's line, now.
    pub fn admit(&self, mut request: PoolRequest) -> Result<Admission<K>> {
        let inner = &self.inner;
        if inner.disposing.load(Ordering::SeqCst) {
            return Err(KernelError::PoolDisposed);
        }
        let deadline = request.deadline.map(|d| tokio::time::Instant::now() + d);
        let (timeout, clamp_notice) = match (request.timeout_seconds, request.timeout_ms) {
            (Some(_), Some(_)) => {
                return Err(KernelError::InvalidArgument {
                    name: "timeoutMs",
                    reason: "give `timeoutSeconds` or `timeoutMs`, not both".into(),
                })
            }
            (None, Some(ms)) => clamp_timeout_ms(ms)?,
            (seconds, None) => clamp_timeout(seconds)?,
        };
        if let Some(dir) = &request.artifacts_dir {
            crate::store::safe_fs::ensure_private_dir("artifactsDir", dir)?;
        }
        // A first cell's reset is the request's: it shares the coalescing of resets.
        request.reset |= request.cells.first().is_some_and(|cell| cell.reset);
        let site = inner.site_of(&request)?;
        let mut caller = Caller {
            session_id: request.session_id.clone(),
            owner: request
                .owner_id
                .clone()
                .or_else(|| request.session_id.clone()),
            request_id: request.request_id.clone(),
        };
        // A request runs as it asks, else as the pool does; its kernel takes the pool's room
        // either way.
        let target = match request.mode.unwrap_or(inner.config.mode) {
            PoolMode::PerCall => {
                // Refused now, as in session mode, not after the call waited for room.
                if let Site::Placed(config) = &site {
                    if config.launcher.is_none() {
                        checked_cwd(&config.cwd)?;
                    }
                }
                Target::PerCall(site)
            }
            PoolMode::Session => {
                let key = session_key(&request, &site)?;
                let session_id = request
                    .session_id
                    .clone()
                    .unwrap_or_else(|| key.identity.clone());
                let owner = request
                    .owner_id
                    .clone()
                    .or_else(|| request.session_id.clone())
                    .unwrap_or_else(|| key.identity.clone());
                caller = Caller {
                    session_id: Some(session_id.clone()),
                    owner: Some(owner.clone()),
                    request_id: request.request_id.clone(),
                };
                let site = site.for_session(session_id);
                let (session, place) = inner.session_for(key, site, owner);
                let reset_epoch = request.reset.then(|| {
                    let mut resets = session.resets.lock().unwrap();
                    match resets.pending {
                        Some(epoch) => epoch,
                        None => {
                            resets.requested += 1;
                            resets.pending = Some(resets.requested);
                            resets.requested
                        }
                    }
                });
                Target::Session {
                    session,
                    place,
                    reset_epoch,
                }
            }
        };
        let mut annotations: Vec<String> = clamp_notice.into_iter().collect();
        annotations.append(&mut request.notices);
        Ok(Admission {
            pool: inner.clone(),
            target,
            request,
            annotations,
            timeout,
            caller,
            deadline,
        })
    }

    /// The pool's `artifactsDir`, where a tool keeps what it leaves out of a result.
    pub fn artifacts_dir(&self) -> Option<&std::path::Path> {
        self.inner.config.artifacts_dir.as_deref()
    }

    /// Pids of the spawned spare kernels that are ready.
    pub fn spare_pids(&self) -> Vec<u32> {
        let spares = self.inner.spares.lock().unwrap();
        spares
            .ready
            .iter()
            .filter(|k| k.kernel.alive())
            .map(|k| k.kernel.pid())
            .collect()
    }

    /// Disposal's default bound: the three shutdown steps.
    pub fn default_budget(&self) -> Duration {
        self.inner.config.shutdown_grace * 3
    }

    pub fn sessions(&self) -> Vec<SessionInfo> {
        let sessions = self.inner.all_sessions();
        let mut infos: Vec<_> = sessions.iter().map(|s| s.info()).collect();
        infos.sort_by(|a, b| a.key.cmp(&b.key));
        infos
    }

    /// Disposes every session `owner` owned last. Idempotent; bounded by `budget` even
    /// when a cell is stuck.
    pub async fn dispose_owner(&self, owner: &str, budget: Duration) {
        let sessions = self.inner.all_sessions();
        let mut orphaned = Vec::new();
        for session in sessions {
            let mut owners = session.owners.lock().unwrap();
            if owners.remove(owner) && owners.is_empty() {
                orphaned.push(session.clone());
            }
        }
        dispose_all_of(&self.inner, orphaned, budget).await;
    }

    /// Disposes every session and refuses new work; for hosts' signal handlers.
    pub fn dispose_all(&self, budget: Duration) -> impl std::future::Future<Output = ()> + Send {
        // Refusing work, and counting as a disposal in progress, start now, not when the
        // future is first polled: a `reopen()` right after must see it.
        let inner = self.inner.clone();
        inner.disposing.store(true, Ordering::SeqCst);
        let running = DisposalRunning::new(&inner);
        async move {
            let _running = running;
            // Calls waiting for room fail now, not at their deadline.
            inner.slots.notify();
            let sessions = inner.all_sessions();
            let per_calls = inner.per_calls.stop_all(budget / 3, budget);
            tokio::join!(dispose_all_of(&inner, sessions, budget), per_calls);
            let spares = std::mem::take(&mut inner.spares.lock().unwrap().ready);
            for spare in spares {
                inner.end_within(spare, budget / 3).await;
            }
            inner.retry_unconfirmed(budget).await;
        }
    }
}

/// A `dispose_all` under way, counted in `PoolInner::disposals` until it ends or is dropped.
struct DisposalRunning<K: PooledKernel>(Arc<PoolInner<K>>);

impl<K: PooledKernel> DisposalRunning<K> {
    fn new(inner: &Arc<PoolInner<K>>) -> Self {
        inner.disposals.fetch_add(1, Ordering::SeqCst);
        DisposalRunning(inner.clone())
    }
}

impl<K: PooledKernel> Drop for DisposalRunning<K> {
    fn drop(&mut self) {
        self.0.disposals.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<K: PooledKernel> Drop for Pool<K> {
    fn drop(&mut self) {
        // The maintenance task holds only a weak reference and ends with the pool; the
        // kernels end with their last reference (their Drop kills them).
        self.inner.disposing.store(true, Ordering::SeqCst);
    }
}

/// Disposes `sessions` at the same time, so the whole takes one `budget`, not one each.
async fn dispose_all_of<K: PooledKernel>(
    inner: &Arc<PoolInner<K>>,
    sessions: Vec<Arc<Session<K>>>,
    budget: Duration,
) {
    let tasks: Vec<_> = sessions
        .into_iter()
        .map(|session| {
            let inner = inner.clone();
            tokio::spawn(async move { inner.dispose(session, budget).await })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
}
