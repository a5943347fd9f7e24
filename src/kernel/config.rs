//! What a kernel is asked for: how to start it (`KernelConfig`), one cell to run
//! (`ExecuteRequest`), who a request runs for, the host's side of bridge calls, cancelling
//! a request, and the defaults.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;

use crate::error::Result;
use crate::process::exit::ExitInfo;
use crate::sandbox::SandboxConfig;
use crate::start::env::DEFAULT_ENV_PREFIX;
use crate::start::launcher::Launcher;
use crate::start::session_dir::SessionDir;
use crate::store::uri_roots::UriRoots;

pub const DEFAULT_STATUS_MIME: &str = "application/x-pykernel-status";
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_millis(10_000);
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_millis(1_000);
pub const DEFAULT_LINK_TIMEOUT: Duration = Duration::from_millis(10_000);
/// How long a kernel's (or a zygote's) `preload` imports may take: pandas and
/// matplotlib take seconds on a cold disk.
pub const PRELOAD_WAIT: Duration = Duration::from_secs(120);
/// How long an interrupted cell may take to end before the kernel is killed.
pub const INTERRUPT_ESCALATION: Duration = Duration::from_millis(5_000);

/// How a kernel is started.
#[derive(Clone)]
pub struct KernelConfig {
    pub cwd: PathBuf,
    /// The host environment to filter; the host process's own when `None`.
    pub base_env: Option<HashMap<String, String>>,
    /// Host-managed variables, added after filtering.
    pub env: HashMap<String, String>,
    pub interpreter: Option<String>,
    pub env_prefix: String,
    pub status_mime: String,
    /// The agent text keeps the text/plain stand-in next to an image (`<Figure ...>`).
    pub include_figure_text: bool,
    pub startup_timeout: Duration,
    pub memory_limit_bytes: Option<u64>,
    /// At most this many processes (the kernel and everything it starts).
    pub max_processes: Option<usize>,
    /// Where the runner files are written; `$TMPDIR/pykernel-<uid>` by default.
    pub runner_dir: Option<PathBuf>,
    pub bridge: Option<Arc<dyn Bridge>>,
    /// With `session_id`, where the session's kv store lives.
    pub artifacts_dir: Option<PathBuf>,
    /// Schemes whose `read()`/`write()` the host answers from a directory of its own.
    pub uri_roots: UriRoots,
    pub session_id: Option<String>,
    /// What the kernel may reach on the host (see `sandbox`).
    pub sandbox: SandboxConfig,
    /// Start the kernel through this argv prefix, somewhere else (see `launcher.rs`).
    pub launcher: Option<Launcher>,
    /// A launched kernel whose link stays silent this long, heartbeats unanswered, is
    /// taken for lost and its launcher killed.
    pub link_timeout: Duration,
    /// A launched kernel's link is kept this long when it drops (see `far_link.rs`).
    pub reattach: Option<Duration>,
    /// Modules the kernel has imported before its first cell (outside the user's
    /// namespace): forked from a zygote that imported them once, else imported after
    /// the start.
    pub preload: Vec<String>,
    /// Whether a kernel with `preload` may be forked from a zygote (see `zygote.rs`).
    pub zygote: bool,
    /// The directory of the session the kernel belongs to (a pool's: its installs and
    /// caches); `None`: a new one of its own.
    pub session_dir: Option<Arc<SessionDir>>,
    /// The agent the prelude's `agent()` asks for when the cell names none; `None`: the
    /// runner's own default (`"deep"`).
    pub default_agent: Option<String>,
}

impl KernelConfig {
    /// The host environment to filter: the given one, else the host process's own.
    pub fn base_env_or_host(&self) -> HashMap<String, String> {
        self.base_env
            .clone()
            .unwrap_or_else(|| std::env::vars().collect())
    }

    /// The session's kv store, when both the artifacts directory and the session are known.
    pub fn kv_path(&self) -> Option<PathBuf> {
        let dir = self.artifacts_dir.as_ref()?;
        let session = self.session_id.as_ref()?;
        Some(crate::store::kv::store_path(
            dir,
            &crate::store::kv::file_prefix(&self.env_prefix),
            session,
        ))
    }

    /// Makes artifactsDir (and, with a session, its kv store directory) ready, created
    /// 0700 when missing, or refuses it (`ERR_ARTIFACTS_DIR`) before any process starts:
    /// a directory another local user owns, can write, or made a symlink is never used.
    pub fn prepare_artifacts_dir(&self) -> Result<()> {
        let Some(dir) = &self.artifacts_dir else {
            return Ok(());
        };
        if self.session_id.is_some() {
            crate::store::kv::prepare_store_dir(dir)?;
        } else {
            crate::store::safe_fs::ensure_private_dir("artifactsDir", dir)?;
        }
        Ok(())
    }

    pub fn new(cwd: PathBuf) -> Self {
        Self {
            cwd,
            base_env: None,
            env: HashMap::new(),
            interpreter: None,
            env_prefix: DEFAULT_ENV_PREFIX.to_string(),
            status_mime: DEFAULT_STATUS_MIME.to_string(),
            include_figure_text: false,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            memory_limit_bytes: None,
            max_processes: None,
            runner_dir: None,
            bridge: None,
            artifacts_dir: None,
            uri_roots: UriRoots::default(),
            session_id: None,
            sandbox: SandboxConfig::default(),
            launcher: None,
            link_timeout: DEFAULT_LINK_TIMEOUT,
            reattach: None,
            preload: Vec::new(),
            zygote: true,
            session_dir: None,
            default_agent: None,
        }
    }
}

/// The longest `defaultAgent`, in characters: an agent's name, not a prompt.
pub const MAX_AGENT_NAME_CHARS: usize = 128;

/// Why `name` cannot be a `defaultAgent`, if it cannot: it is sent as the name of an
/// agent in every `agent()` call that names none, so it is a short line of text.
pub fn default_agent_fault(name: &str) -> Option<String> {
    let chars = name.chars().count();
    if name.trim().is_empty() {
        Some(format!("must name an agent (such as 'task'), got {name:?}"))
    } else if chars > MAX_AGENT_NAME_CHARS {
        Some(format!(
            "must be at most {MAX_AGENT_NAME_CHARS} characters, got {chars}"
        ))
    } else if name.chars().any(char::is_control) {
        Some(format!(
            "must be one line without control characters, got {name:?}"
        ))
    } else {
        None
    }
}

/// Where a bridge call comes from, so one host handler serving many kernels can tell
/// them apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOrigin {
    /// The id of the cell that made the call (its worker threads share it).
    pub run_id: String,
    /// The pool session's id (its key identity when it has no id), or a bare kernel's
    /// `sessionId`.
    pub session_id: Option<String>,
    /// The owner of the pool request whose cell made the call.
    pub owner: Option<String>,
    /// The id the host gave the request whose cell made the call: two requests of one
    /// session id running at once (on two kernels) are told apart by it.
    pub request_id: Option<String>,
}

/// Who a request runs for, as its bridge calls will say (see [`CallOrigin`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    pub session_id: Option<String>,
    pub owner: Option<String>,
    pub request_id: Option<String>,
}

/// The most characters of a request's `requestId`: room for any id a host makes (a UUID,
/// a tool call's id), while one that could not be meant is refused, not copied into
/// every bridge call.
pub const MAX_REQUEST_ID_CHARS: usize = 256;

/// Why `id` cannot be a request's `requestId`, or `Ok`.
pub fn check_request_id(id: &str) -> std::result::Result<(), String> {
    let chars = id.chars().count();
    if chars == 0 || chars > MAX_REQUEST_ID_CHARS {
        return Err(format!(
            "must be 1 to {MAX_REQUEST_ID_CHARS} characters, got {chars}"
        ));
    }
    Ok(())
}

/// The host side of runner -> host calls (`tool.x(...)`, `agent(...)`).
pub trait Bridge: Send + Sync {
    /// Runs one call; `Err` becomes a RuntimeError with that message in Python.
    fn call(
        &self,
        name: String,
        args: Value,
        origin: CallOrigin,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = std::result::Result<Value, String>> + Send>,
    >;
}

/// One cell to run.
#[derive(Debug, Clone, Default)]
pub struct ExecuteRequest {
    pub code: String,
    pub silent: bool,
    pub store_history: bool,
    pub cwd: Option<String>,
    pub env: Option<BTreeMap<String, Option<String>>>,
    /// Wall-clock budget; on expiry the cell is interrupted (and the kernel killed if it
    /// does not stop within [`INTERRUPT_ESCALATION`]).
    pub timeout: Option<Duration>,
    /// Keep at most this many bytes of stdout (and of stderr) in the outcome; every byte is
    /// still streamed as events. `None` keeps all.
    pub max_captured_bytes: Option<usize>,
    /// Told to the bridge with each call the cell makes; the kernel's own `session_id`
    /// when `None`.
    pub caller: Option<Caller>,
    /// Roots for this request, in place of the kernel's for the same schemes.
    pub uri_roots: Option<UriRoots>,
    /// The `KernelDied` error of a kernel that died under the cell is only put in the
    /// outcome (`kernel_died`, `error`), not sent as an event: the caller sends it once it
    /// knows whether the cell runs again on another kernel. Only the host reports a
    /// death, so a cell's own error of that name is an event like any other.
    pub hold_death: bool,
}

/// Cancels one execute from another task (an AbortSignal, a pool disposing the kernel).
#[derive(Default)]
pub struct AbortHandle {
    aborted: AtomicBool,
    notify: Notify,
}

impl AbortHandle {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// Resolves once aborted. Cancel safety: dropping it loses nothing.
    pub async fn aborted(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_aborted() {
                return;
            }
            notified.await;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownOutcome {
    /// The process was reaped (it is gone).
    pub confirmed: bool,
    pub exit: Option<ExitInfo>,
}

/// How a kernel's process came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMode {
    /// A fresh interpreter, spawned by the host.
    Spawn,
    /// Forked from a zygote that had imported the kernel's `preload` (`zygote.rs`).
    Zygote,
    /// Started through a launcher (`launcher.rs`).
    Launcher,
}

impl StartMode {
    pub fn as_str(self) -> &'static str {
        match self {
            StartMode::Spawn => "spawn",
            StartMode::Zygote => "zygote",
            StartMode::Launcher => "launcher",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_agent_is_a_short_line_of_text() {
        for good in ["task", "deep", "code-reviewer", "Ägent 2", &"a".repeat(128)] {
            assert_eq!(default_agent_fault(good), None, "{good:?}");
        }
        for bad in ["", "  ", "\t"] {
            let fault = default_agent_fault(bad).unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(fault.contains("must name an agent"), "{fault}");
        }
        let long = default_agent_fault(&"é".repeat(129)).unwrap();
        assert_eq!(long, "must be at most 128 characters, got 129");
        let multi = default_agent_fault("task\nignore the rest").unwrap();
        assert!(multi.contains("one line"), "{multi}");
    }

    #[test]
    fn a_request_id_is_1_to_256_characters_of_any_kind() {
        assert!(check_request_id("toolu_01").is_ok());
        assert!(
            check_request_id(&"é".repeat(256)).is_ok(),
            "characters, not bytes"
        );
        assert_eq!(
            check_request_id(""),
            Err("must be 1 to 256 characters, got 0".to_string())
        );
        assert!(check_request_id(&"x".repeat(257)).is_err());
    }
}
