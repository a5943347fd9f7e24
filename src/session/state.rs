//! One session's state: its key and site, its line of calls, its kernel, its owners, its
//! resets, and what its next call is told; and the [`SessionInfo`] `sessions` reports.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::time::Instant;

use crate::kernel::fifo::Fifo;
use crate::kernel::AbortHandle;
use crate::session::key::SessionKey;
use crate::session::live::LiveKernel;
use crate::session::pooled::PooledKernel;
use crate::session::site::Site;
use crate::start::session_dir::SessionDir;

/// A session as `sessions` reports it.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub key: String,
    pub pid: Option<u32>,
    pub owners: Vec<String>,
    pub busy: bool,
    pub last_used: SystemTime,
    pub execution_count: u32,
    /// Where its kernels run: the launcher's argv; `None` here, or not placed yet.
    pub launcher: Option<Vec<String>>,
}

pub(super) struct Session<K> {
    pub(super) key: SessionKey,
    pub(super) site: Mutex<Site>,
    pub(super) turns: Arc<Fifo>,
    pub(super) kernel: Mutex<Option<LiveKernel<K>>>,
    /// Set once a kernel was started for it: a session that never had one holds no state.
    pub(super) had_kernel: AtomicBool,
    pub(super) owners: Mutex<BTreeSet<String>>,
    /// On tokio's clock, as are all the pool's times: it is the system's monotonic clock,
    /// except in unit tests, which pause it.
    pub(super) last_used: Mutex<(Instant, SystemTime)>,
    pub(super) disposed: AtomicBool,
    pub(super) resets: Mutex<Resets>,
    /// The cell running now, so disposal can stop it.
    pub(super) running: Mutex<Option<Arc<AbortHandle>>>,
    /// Told to the next call: its state is gone since the last one.
    pub(super) lost_while_idle: Mutex<Option<StateLost>>,
    /// What its kernels installed and cached, kept across resets and restarts: taken
    /// from its first kernel, removed once the session and its kernels are gone.
    pub(super) dir: Mutex<Option<Arc<SessionDir>>>,
}

/// Why a session's state is gone since its last call, for the next call to tell.
pub(super) struct StateLost {
    pub(super) notice: String,
    /// Its kernel ended without being asked to (died, hung, killed), so the next call
    /// runs in a replacement: `kernelRestarted`. An evicted session is not restarted.
    pub(super) kernel_ended: bool,
}

impl StateLost {
    pub(super) fn evicted(notice: String) -> Self {
        StateLost {
            notice,
            kernel_ended: false,
        }
    }

    pub(super) fn kernel_ended(notice: String) -> Self {
        StateLost {
            notice,
            kernel_ended: true,
        }
    }
}

/// Resets asked for while an earlier one is pending or its call still runs are done once
/// (they coalesce).
#[derive(Default)]
pub(super) struct Resets {
    pub(super) requested: u64,
    pub(super) performed: u64,
    /// A reset whose call has not finished; resets asked for meanwhile share it.
    pub(super) pending: Option<u64>,
}

impl<K: PooledKernel> Session<K> {
    pub(super) fn touch(&self) {
        *self.last_used.lock().unwrap() = (Instant::now(), SystemTime::now());
    }

    pub(super) fn current_kernel(&self) -> Option<Arc<K>> {
        self.kernel
            .lock()
            .unwrap()
            .as_ref()
            .map(|k| k.kernel.clone())
    }

    pub(super) fn take_kernel(&self) -> Option<LiveKernel<K>> {
        self.kernel.lock().unwrap().take()
    }

    pub(super) fn info(&self) -> SessionInfo {
        let kernel = self.current_kernel();
        SessionInfo {
            key: self.key.to_string(),
            pid: kernel.as_ref().filter(|k| k.alive()).map(|k| k.pid()),
            owners: self.owners.lock().unwrap().iter().cloned().collect(),
            busy: self.turns.busy(),
            last_used: self.last_used.lock().unwrap().1,
            execution_count: kernel.map_or(0, |k| k.execution_count()),
            launcher: match &*self.site.lock().unwrap() {
                Site::Placed(config) => config.launcher.as_ref().map(|l| l.argv.clone()),
                Site::Unplaced(_) => None,
            },
        }
    }
}

/// Marks the session disposed, stops its running cell and takes its kernel away.
pub(super) fn stop_session<K: PooledKernel>(session: &Session<K>) -> Option<LiveKernel<K>> {
    tracing::info!(key = %session.key, "disposing session");
    session.disposed.store(true, Ordering::SeqCst);
    if let Some(abort) = session.running.lock().unwrap().clone() {
        abort.abort();
    }
    session.take_kernel()
}
