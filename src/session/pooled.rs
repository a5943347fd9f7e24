//! A kernel as the pool sees it ([`PooledKernel`]) and what starts one ([`KernelStarter`]),
//! both implemented for the real [`Kernel`] here. The pool needs no more of a kernel than
//! this, so its logic (room, eviction, the heartbeat, restarts, deadlines) can be
//! unit-tested over a stand-in, on a paused clock, without Python.
//!
//! The pool is generic over the kernel, not over a trait object: each call stays a direct
//! call, and a cell costs no allocation more than it did.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::eval::executor::RunsCells;
use crate::kernel::fifo::Place;
use crate::kernel::{Kernel, KernelConfig, ShutdownOutcome};
use crate::process::exit::ExitInfo;
use crate::start::python::Resolved;
use crate::start::session_dir::SessionDir;

/// What the pool asks of one of its kernels; each method means what [`Kernel`]'s of the
/// same name does. Cells run on it through the executor ([`RunsCells`]).
pub trait PooledKernel: RunsCells + Send + Sync + Sized + 'static {
    /// What starts kernels of this kind.
    type Starter: KernelStarter<Self>;

    fn pid(&self) -> u32;
    fn alive(&self) -> bool;
    fn exit_info(&self) -> Option<ExitInfo>;
    /// The exit, waiting up to `wait` for it.
    fn wait_for_exit(&self, wait: Duration) -> impl Future<Output = Option<ExitInfo>> + Send;
    fn execution_count(&self) -> u32;
    /// A place in the kernel's line of executes, taken now.
    fn queue(&self) -> Place;
    /// Whether a ping is answered within `wait`.
    fn ping(&self, wait: Duration) -> impl Future<Output = bool> + Send;
    /// exit -> grace -> SIGTERM -> grace -> SIGKILL -> grace. Idempotent.
    fn shutdown(&self, grace: Duration) -> impl Future<Output = ShutdownOutcome> + Send;
    /// Makes a spawned kernel ready to run `config`'s cells (again, for a claimed spare).
    fn initialize(&self, config: &KernelConfig) -> impl Future<Output = Result<()>> + Send;
    fn initialized_for(&self, config: &KernelConfig) -> bool;
    /// The interpreter it runs, as resolved when it was spawned.
    fn resolved(&self) -> &Resolved;
    /// Whether the host's `path` is in its filesystem view.
    fn sees(&self, path: &Path) -> bool;
    /// The session directory it was started with (its installs and caches), while it
    /// lives: a spare's becomes the session's that claims it.
    fn session_dir(&self) -> Option<Arc<SessionDir>>;
    fn not_preloaded(&self, modules: &[String]) -> Vec<String>;
    /// Imports `modules` ahead of the first cell; `Ok` holds the ones that failed.
    fn preload(
        &self,
        modules: &[String],
        wait: Duration,
    ) -> impl Future<Output = Result<BTreeMap<String, String>>> + Send;
}

/// Starts the pool's kernels of kind `K`.
pub trait KernelStarter<K>: Send + Sync + 'static {
    /// A kernel process for `config`, not yet initialized.
    fn spawn(&self, config: &KernelConfig) -> impl Future<Output = Result<Arc<K>>> + Send;
    /// The interpreter `config` would run, as a local kernel would resolve it.
    fn resolve(&self, config: &KernelConfig) -> impl Future<Output = Result<Resolved>> + Send;
}

/// Starts real kernels: Python subprocesses.
pub struct Spawner;

impl KernelStarter<Kernel> for Spawner {
    fn spawn(&self, config: &KernelConfig) -> impl Future<Output = Result<Arc<Kernel>>> + Send {
        Kernel::spawn(config)
    }

    fn resolve(&self, config: &KernelConfig) -> impl Future<Output = Result<Resolved>> + Send {
        Kernel::resolve(config)
    }
}

impl PooledKernel for Kernel {
    type Starter = Spawner;

    fn pid(&self) -> u32 {
        Kernel::pid(self)
    }

    fn alive(&self) -> bool {
        Kernel::alive(self)
    }

    fn exit_info(&self) -> Option<ExitInfo> {
        Kernel::exit_info(self)
    }

    fn wait_for_exit(&self, wait: Duration) -> impl Future<Output = Option<ExitInfo>> + Send {
        Kernel::wait_for_exit(self, wait)
    }

    fn execution_count(&self) -> u32 {
        Kernel::execution_count(self)
    }

    fn queue(&self) -> Place {
        Kernel::queue(self)
    }

    fn ping(&self, wait: Duration) -> impl Future<Output = bool> + Send {
        Kernel::ping(self, wait)
    }

    fn shutdown(&self, grace: Duration) -> impl Future<Output = ShutdownOutcome> + Send {
        Kernel::shutdown(self, grace)
    }

    fn initialize(&self, config: &KernelConfig) -> impl Future<Output = Result<()>> + Send {
        Kernel::initialize(self, config)
    }

    fn initialized_for(&self, config: &KernelConfig) -> bool {
        Kernel::initialized_for(self, config)
    }

    fn resolved(&self) -> &Resolved {
        Kernel::resolved(self)
    }

    fn sees(&self, path: &Path) -> bool {
        Kernel::sees(self, path)
    }

    fn session_dir(&self) -> Option<Arc<SessionDir>> {
        Kernel::session_dir(self)
    }

    fn not_preloaded(&self, modules: &[String]) -> Vec<String> {
        Kernel::not_preloaded(self, modules)
    }

    fn preload(
        &self,
        modules: &[String],
        wait: Duration,
    ) -> impl Future<Output = Result<BTreeMap<String, String>>> + Send {
        Kernel::preload(self, modules, wait)
    }
}
