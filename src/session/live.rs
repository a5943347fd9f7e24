//! A kernel process of the pool and the room it holds ([`LiveKernel`]): starting one in a
//! slot, preloading a spare, ending one so that its room is given back only once it is gone.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{KernelError, Result};
use crate::kernel::{AbortHandle, KernelConfig, PRELOAD_WAIT};
use crate::session::placement::{Load, Loads};
use crate::session::pooled::{KernelStarter, PooledKernel};
use crate::session::slots::Slot;

/// A kernel process of the pool and the room it takes. Given back through
/// [`PoolInner::end`](crate::session::inner::PoolInner::end), which frees the room only
/// once the process is gone.
pub(super) struct LiveKernel<K> {
    pub(super) kernel: Arc<K>,
    pub(super) slot: Slot,
    /// Counts it on its launcher (least-loaded placement) until it is gone.
    _load: Option<Load>,
}

pub(super) struct Spares<K> {
    pub(super) ready: Vec<LiveKernel<K>>,
    pub(super) spawning: usize,
}

impl<K> Default for Spares<K> {
    fn default() -> Self {
        Spares {
            ready: Vec::new(),
            spawning: 0,
        }
    }
}

/// A start that failed, and the kernel (with its room) if its end was not confirmed.
pub(super) struct StartFailed<K> {
    pub(super) error: KernelError,
    pub(super) unconfirmed: Option<LiveKernel<K>>,
}

/// Starts a kernel in `slot`: spawned, then initialized with `config`. On failure nothing
/// is left: the process is confirmed gone before its room is given back. `abort` gives
/// the start up ([`KernelError::StartAborted`]) once the process is spawned (a brief step,
/// bounded by the start-up timeout, and let finish so that no step of it is left running).
///
/// A launched kernel is counted on its launcher from the start (`load`, or a count of its
/// own), so a least-loaded choice made meanwhile sees it.
pub(super) async fn start_in<K: PooledKernel>(
    starter: &K::Starter,
    slot: Slot,
    config: &KernelConfig,
    grace: Duration,
    loads: &Arc<Loads>,
    load: Option<Load>,
    abort: Option<&AbortHandle>,
) -> Result<LiveKernel<K>, StartFailed<K>> {
    let load = load.or_else(|| config.launcher.as_ref().map(|l| loads.count(l)));
    let kernel = starter.spawn(config).await.map_err(|error| StartFailed {
        error,
        unconfirmed: None,
    })?;
    let live = LiveKernel {
        kernel,
        slot,
        _load: load,
    };
    match initialize_unless_aborted(&*live.kernel, config, abort).await {
        Ok(()) => Ok(live),
        Err(error) => Err(StartFailed {
            error,
            unconfirmed: end_kernel(live, grace).await.err(),
        }),
    }
}

/// Initializes `kernel` for `config`, unless `abort` fires first (already fired: not at all).
/// Cancel safety: the handshake is dropped half done; the caller ends the kernel.
pub(super) async fn initialize_unless_aborted<K: PooledKernel>(
    kernel: &K,
    config: &KernelConfig,
    abort: Option<&AbortHandle>,
) -> Result<()> {
    let aborted = async {
        match abort {
            Some(abort) => abort.aborted().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        _ = aborted => Err(KernelError::StartAborted),
        ready = kernel.initialize(config) => ready,
    }
}

/// Imports the pool's `preload` in a spare that just started, but for what it was forked
/// with. A module that fails is logged and the spare kept (the session's
/// own import will say why); a spare that does not answer is ended.
pub(super) async fn preload_spare<K: PooledKernel>(
    spare: LiveKernel<K>,
    modules: &[String],
    grace: Duration,
) -> Result<LiveKernel<K>, StartFailed<K>> {
    let modules = spare.kernel.not_preloaded(modules);
    if modules.is_empty() {
        return Ok(spare);
    }
    match spare.kernel.preload(&modules, PRELOAD_WAIT).await {
        Ok(errors) => {
            for (module, error) in errors {
                tracing::warn!(module = %module, "a spare kernel could not preload it: {error}");
            }
            Ok(spare)
        }
        Err(error) => Err(StartFailed {
            error,
            unconfirmed: end_kernel(spare, grace).await.err(),
        }),
    }
}

/// Shuts the kernel down; its room once it is confirmed gone, else the kernel back.
pub(super) async fn end_kernel<K: PooledKernel>(
    live: LiveKernel<K>,
    grace: Duration,
) -> Result<Slot, LiveKernel<K>> {
    if live.kernel.shutdown(grace).await.confirmed {
        Ok(live.slot)
    } else {
        Err(live)
    }
}
