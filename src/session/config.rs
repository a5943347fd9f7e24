//! What a pool is told: its settings ([`PoolConfig`], [`PoolMode`]) and one request
//! ([`PoolRequest`]), with the reading of a request's timeouts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{KernelError, Result};
use crate::eval::executor::Cell;
use crate::kernel::{AbortHandle, KernelConfig, DEFAULT_SHUTDOWN_GRACE};
use crate::session::placement::Placement;
use crate::start::launcher::Launcher;

pub const DEFAULT_TIMEOUT_SECONDS: f64 = 30.0;
pub const MAX_TIMEOUT_SECONDS: f64 = 3600.0;

/// A cap of `maxSessions` or `maxConcurrent` that is no cap (`'unlimited'`): the slots are
/// a count, so no structure grows with it, and room is never sought by eviction or waited for.
pub const UNLIMITED: usize = usize::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    Session,
    PerCall,
}

#[derive(Clone)]
pub struct PoolConfig {
    pub mode: PoolMode,
    /// The most kernels a `session` pool runs at once, spares and the kernels of its
    /// `per-call` requests included; [`UNLIMITED`] for no cap.
    pub max_sessions: usize,
    /// The most kernels a `per-call` pool runs at once, spares and the kernels of its
    /// `session` requests included; [`UNLIMITED`] for no cap.
    pub max_concurrent: usize,
    /// How long a call waits for room when the pool is at its cap before it fails.
    pub acquire_timeout: Duration,
    /// Idle sessions are evicted after this long; `None`: never.
    pub idle_timeout: Option<Duration>,
    /// Zero turns the heartbeat off.
    pub heartbeat_interval: Duration,
    pub heartbeat_timeout: Duration,
    /// Each shutdown step (exit, SIGTERM, SIGKILL) waits this long.
    pub shutdown_grace: Duration,
    /// Defaults for every kernel; a request's cwd and interpreter override them.
    pub kernel: KernelConfig,
    pub artifacts_dir: Option<PathBuf>,
    /// Spawned spare kernels kept ready, so a new session's first cell does not wait for
    /// Python to start. They only take free room: never more than the cap, and none while
    /// a call waits for room. They start on the pool's default launcher (`kernel.launcher`,
    /// or here) and serve only kernels meant to run there.
    pub prewarm: usize,
    /// Modules every spare imports once it is ready, so a session that claims it finds
    /// them in `sys.modules` (see [`Kernel::preload`](crate::kernel::Kernel::preload)).
    pub preload: Vec<String>,
    /// Where sessions that name no launcher run, when not on `kernel.launcher`.
    pub placement: Option<Placement>,
    /// Whether the words after a launcher a request, `launchers` or `launcherFor` names are
    /// quoted for a shell on the far side (`launcherShell`); by default when it is ssh.
    pub launcher_shell: Option<bool>,
    /// The cwd of a launched kernel whose request names none: `kernel.cwd` as given (a
    /// directory of the far side), empty for the far side's own start directory.
    pub far_cwd: PathBuf,
}

impl PoolConfig {
    pub fn new(kernel: KernelConfig) -> Self {
        Self {
            mode: PoolMode::Session,
            max_sessions: 4,
            max_concurrent: 4,
            acquire_timeout: Duration::from_secs(60),
            idle_timeout: Some(Duration::from_secs(300)),
            heartbeat_interval: Duration::from_secs(5),
            heartbeat_timeout: Duration::from_secs(2),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            artifacts_dir: None,
            prewarm: 1,
            preload: Vec::new(),
            placement: None,
            launcher_shell: None,
            far_cwd: match kernel.launcher {
                Some(_) => kernel.cwd.clone(),
                None => PathBuf::new(),
            },
            kernel,
        }
    }

    /// The most kernels this pool runs at once, whatever its requests' modes, and the
    /// option that sets it: the pool's mode decides which.
    pub fn cap(&self) -> (usize, &'static str) {
        match self.mode {
            PoolMode::Session => (self.max_sessions, "maxSessions"),
            PoolMode::PerCall => (self.max_concurrent, "maxConcurrent"),
        }
    }

    /// The settings every kernel of the pool starts with, spares included: the pool's
    /// `artifactsDir` is the kernel's unless `kernel` names its own (a spare without it
    /// could not read back `artifact://` output in the session that claims it).
    pub fn session_kernel(&self) -> KernelConfig {
        let mut config = self.kernel.clone();
        if config.artifacts_dir.is_none() {
            config.artifacts_dir = self.artifacts_dir.clone();
        }
        if config.preload.is_empty() {
            // Every kernel of the pool is then forked from a zygote that imported them.
            config.preload = self.preload.clone();
        }
        config
    }

    /// The settings of a kernel run through `launcher` (`None`: here) for a request that
    /// names `cwd` and `interpreter` (else the pool's). A launched kernel's cwd is the far
    /// side's, taken as given; a local one is made absolute against the host's.
    pub(super) fn kernel_for(
        &self,
        cwd: Option<&Path>,
        interpreter: Option<&String>,
        launcher: Option<Launcher>,
    ) -> KernelConfig {
        let mut config = self.session_kernel();
        config.cwd = match (&launcher, cwd) {
            (Some(_), Some(cwd)) => cwd.to_path_buf(),
            (Some(_), None) => self.far_cwd.clone(),
            (None, Some(cwd)) => std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf()),
            // Local only when the pool's default is: `kernel.cwd` is then a local one.
            (None, None) => config.cwd,
        };
        if interpreter.is_some() {
            config.interpreter = interpreter.cloned();
        }
        config.launcher = launcher;
        config
    }

    /// Refuses (`ERR_ARTIFACTS_DIR`) an artifactsDir that is not safe to use, at
    /// construction, so the first call does not find out; missing ones are created 0700.
    /// Each kernel checks again as it starts, and each write as it happens.
    pub fn prepare_artifacts_dirs(&self) -> Result<()> {
        for dir in [&self.artifacts_dir, &self.kernel.artifacts_dir]
            .into_iter()
            .flatten()
        {
            crate::store::safe_fs::ensure_private_dir("artifactsDir", dir)?;
        }
        Ok(())
    }
}

#[derive(Default)]
pub struct PoolRequest {
    pub cells: Vec<Cell>,
    /// How this request runs, when not as the pool's `mode` says: in its session's kernel,
    /// or in a fresh kernel of its own ended after the call.
    pub mode: Option<PoolMode>,
    pub session_id: Option<String>,
    pub session_file: Option<String>,
    /// As the caller gave it: made absolute against the host's cwd for a local kernel,
    /// the far side's for a launched one.
    pub cwd: Option<PathBuf>,
    pub interpreter: Option<String>,
    /// Run the session's kernel through this argv prefix, not where the pool would.
    pub launcher: Option<Vec<String>>,
    pub owner_id: Option<String>,
    /// `None` is the default (30 s); 0 is no timeout.
    pub timeout_seconds: Option<f64>,
    /// The same in milliseconds, for budgets under a second; not with `timeout_seconds`.
    pub timeout_ms: Option<f64>,
    pub reset: bool,
    pub abort: Option<Arc<AbortHandle>>,
    /// The name of the full output's artifact (checked); a fresh one by default.
    pub artifact_id: Option<String>,
    /// Overrides the kernel options' `include_figure_text`.
    pub include_figure_text: Option<bool>,
    /// Receives the sanitized agent text as it is built.
    pub on_output: Option<crate::eval::live::OnOutput>,
    /// Variables for this request's cells only (`None` unsets).
    pub env: Option<BTreeMap<String, Option<String>>>,
    /// Where this request's full output goes when cut, instead of the pool's.
    pub artifacts_dir: Option<PathBuf>,
    /// The exact file this request's full output goes to when cut (checked), in place
    /// of one in an artifacts directory.
    pub artifact_path: Option<PathBuf>,
    /// The host's id for this request, told with each of its cells' bridge calls.
    pub request_id: Option<String>,
    /// `uriRoots` for this request, in place of the kernel's for the same schemes.
    pub uri_roots: Option<crate::store::uri_roots::UriRoots>,
    /// One budget, from admission, for waiting, starting a kernel and all the cells.
    pub deadline: Option<Duration>,
    /// Notices decided while reading the request (a clamped per-cell timeout).
    pub notices: Vec<String>,
}

/// `timeoutSeconds`: default 30, 0 is none, otherwise clamped to 1..3600 with a notice.
pub fn clamp_timeout(requested: Option<f64>) -> Result<(Option<Duration>, Option<String>)> {
    let seconds = requested.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    if seconds.is_nan() {
        return Err(KernelError::InvalidArgument {
            name: "timeoutSeconds",
            reason: "must be a number of seconds (0 for none)".into(),
        });
    }
    if seconds == 0.0 {
        return Ok((None, None));
    }
    let clamped = seconds.clamp(1.0, MAX_TIMEOUT_SECONDS);
    let notice = (clamped != seconds).then(|| {
        format!(
            "Timeout clamped to {}s (requested {}s; allowed range 1-{}s).",
            clamped, seconds, MAX_TIMEOUT_SECONDS
        )
    });
    Ok((Some(Duration::from_secs_f64(clamped)), notice))
}

/// `timeoutMs`: 0 is none, otherwise clamped to 1..3,600,000 ms with a notice, as
/// `timeoutSeconds` is to 1..3600 s (the agent chose it).
pub fn clamp_timeout_ms(ms: f64) -> Result<(Option<Duration>, Option<String>)> {
    if ms.is_nan() || ms < 0.0 {
        return Err(KernelError::InvalidArgument {
            name: "timeoutMs",
            reason: format!(
                "must be 0 (no timeout) or a positive number of milliseconds (clamped to the allowed range with a notice), got {ms}"
            ),
        });
    }
    if ms == 0.0 {
        return Ok((None, None));
    }
    let max = MAX_TIMEOUT_SECONDS * 1000.0;
    let clamped = ms.clamp(1.0, max);
    let notice = (clamped != ms).then(|| {
        format!("Timeout clamped to {clamped}ms (requested {ms}ms; allowed range 1-{max}ms).")
    });
    Ok((Some(Duration::from_secs_f64(clamped / 1000.0)), notice))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_clamped_with_the_exact_notice() {
        assert_eq!(
            clamp_timeout(None).unwrap(),
            (Some(Duration::from_secs(30)), None)
        );
        assert_eq!(clamp_timeout(Some(0.0)).unwrap(), (None, None));
        let (t, notice) = clamp_timeout(Some(99999.0)).unwrap();
        assert_eq!(t, Some(Duration::from_secs(3600)));
        assert_eq!(
            notice.unwrap(),
            "Timeout clamped to 3600s (requested 99999s; allowed range 1-3600s)."
        );
        assert_eq!(
            clamp_timeout(Some(0.2)).unwrap().0,
            Some(Duration::from_secs(1))
        );
        assert!(clamp_timeout(Some(f64::NAN)).is_err());
    }

    #[test]
    fn millisecond_timeouts_are_clamped_to_the_same_range() {
        assert_eq!(
            clamp_timeout_ms(250.0).unwrap(),
            (Some(Duration::from_millis(250)), None)
        );
        assert_eq!(clamp_timeout_ms(0.0).unwrap(), (None, None));
        let (t, notice) = clamp_timeout_ms(5_000_000.0).unwrap();
        assert_eq!(t, Some(Duration::from_secs(3600)));
        assert_eq!(
            notice.unwrap(),
            "Timeout clamped to 3600000ms (requested 5000000ms; allowed range 1-3600000ms)."
        );
        assert_eq!(
            clamp_timeout_ms(0.5).unwrap().0,
            Some(Duration::from_millis(1))
        );
        for bad in [-1.0, f64::NAN] {
            assert!(clamp_timeout_ms(bad).is_err());
        }
    }
}
