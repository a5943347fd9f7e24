//! The one error type of the crate. Each variant has a stable `code` that JavaScript sees
//! on the thrown `Error`, and a message that says what was tried and what to do.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("no usable Python found (tried: {tried}). Install Python 3.8+ or pass `interpreter` (or set VIRTUAL_ENV) to point at one.")]
    PythonNotFound { tried: String },

    #[error("interpreter {path} is not usable: {reason}. Pass a Python 3.8+ executable as `interpreter`.")]
    PythonInvalid { path: String, reason: String },

    #[error("cwd {path} {reason}; pass an existing directory as `cwd`.")]
    CwdInvalid { path: PathBuf, reason: &'static str },

    #[error("the Python kernel did not become ready within {timeout_ms} ms (interpreter {interpreter}); it was killed.{stderr}")]
    StartTimeout {
        timeout_ms: u64,
        interpreter: String,
        stderr: StderrTail,
    },

    #[error("the Python kernel did not start within its deadline of {deadline_ms} ms (`deadlineMs`); a process already spawned was killed.")]
    StartDeadline { deadline_ms: u64 },

    #[error(
        "the kernel's start was aborted by its AbortSignal; no process of it is left running."
    )]
    StartAborted,

    #[error(
        "the Python kernel exited during start-up ({exit}; interpreter {interpreter}).{stderr}"
    )]
    StartFailed {
        exit: String,
        interpreter: String,
        stderr: StderrTail,
    },

    #[error("the Python kernel is not running ({exit}). Start a new Kernel.{stderr}")]
    KernelDead { exit: String, stderr: StderrTail },

    #[error("cannot prepare the runner directory {path}: {reason}")]
    RunnerDir { path: PathBuf, reason: String },

    /// artifactsDir, its kv store or a file in them is not safe to use (docs/security.md).
    #[error(transparent)]
    ArtifactsDir(#[from] crate::store::safe_fs::Refusal),

    #[error("this KernelPool is being disposed and takes no new work; create a new KernelPool.")]
    PoolDisposed,

    /// `reopen()` while a `disposeAll()` still runs: it would end the reopened pool too.
    #[error("disposeAll() has not finished: await it, then call reopen().")]
    DisposeInProgress,

    /// No room for a kernel within `acquireTimeoutMs`: every kernel the cap allows was
    /// busy the whole time.
    #[error("the KernelPool is full: it runs at most {limit} kernels (`{option}`), all stayed busy, and none became free within {waited_ms} ms. Raise `{option}`, {advice}, or wait longer with `acquireTimeoutMs`.")]
    PoolFull {
        limit: usize,
        option: &'static str,
        waited_ms: u64,
        /// What else frees room in this mode.
        advice: &'static str,
    },

    #[error("the session was disposed while this call waited for its turn; call again to get a fresh kernel.")]
    SessionDisposed,

    /// An `artifact://` reference names no artifact in the directory it was looked up in.
    #[error("no artifact {uri}: {path} does not exist. Artifacts are kept only for truncated output, in the artifactsDir of the call that made them.")]
    ArtifactNotFound { uri: String, path: PathBuf },

    /// The launcher's own program could not be run (not installed, not on PATH).
    #[error("cannot run the launcher `{launcher}`: {reason}. Check that its program is installed and on PATH.")]
    Launcher { launcher: String, reason: String },

    #[error("cannot sandbox the kernel: {reason}")]
    Sandbox { reason: String },

    #[error("invalid argument `{name}`: {reason}")]
    InvalidArgument { name: &'static str, reason: String },

    /// An argument of the wrong type, or a key its options object does not have, named by
    /// its path in the call (`sandbox.writable[0]`).
    #[error("invalid argument `{path}`: {reason}")]
    InvalidArgumentAt { path: String, reason: String },

    /// A napi call that should not fail did; nothing the caller can change.
    #[error("internal error: {reason}. Please report it.")]
    Internal { reason: String },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl KernelError {
    pub fn code(&self) -> &'static str {
        match self {
            KernelError::PythonNotFound { .. } => "ERR_PYTHON_NOT_FOUND",
            KernelError::PythonInvalid { .. } => "ERR_PYTHON_INVALID",
            KernelError::CwdInvalid { .. } => "ERR_CWD_INVALID",
            KernelError::StartTimeout { .. } | KernelError::StartDeadline { .. } => {
                "ERR_KERNEL_START_TIMEOUT"
            }
            KernelError::StartAborted => "ERR_ABORTED",
            KernelError::StartFailed { .. } => "ERR_KERNEL_START_FAILED",
            KernelError::KernelDead { .. } => "ERR_KERNEL_DEAD",
            KernelError::RunnerDir { .. } => "ERR_RUNNER_DIR",
            KernelError::ArtifactsDir(_) => "ERR_ARTIFACTS_DIR",
            KernelError::ArtifactNotFound { .. } => "ERR_ARTIFACT_NOT_FOUND",
            KernelError::InvalidArgument { .. } | KernelError::InvalidArgumentAt { .. } => {
                "ERR_INVALID_ARG"
            }
            KernelError::Internal { .. } => "ERR_INTERNAL",
            KernelError::Sandbox { .. } => "ERR_SANDBOX",
            KernelError::Launcher { .. } => "ERR_LAUNCHER",
            KernelError::PoolDisposed | KernelError::DisposeInProgress => "ERR_POOL_DISPOSED",
            KernelError::PoolFull { .. } => "ERR_POOL_FULL",
            KernelError::SessionDisposed => "ERR_SESSION_DISPOSED",
            KernelError::Io { .. } => "ERR_IO",
        }
    }

    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        KernelError::Io {
            context: context.into(),
            source,
        }
    }
}

/// The last lines a kernel wrote to its own stderr, rendered as a message suffix.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(pub String);

impl std::fmt::Display for StderrTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.0.trim_end();
        if text.is_empty() {
            Ok(())
        } else {
            write!(f, " Kernel stderr:\n{text}")
        }
    }
}

pub type Result<T, E = KernelError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do_and_carry_stderr() {
        let err = KernelError::StartFailed {
            exit: "exit code 1".into(),
            interpreter: "/usr/bin/python3".into(),
            stderr: StderrTail("Traceback...\nImportError: boom\n".into()),
        };
        assert_eq!(err.code(), "ERR_KERNEL_START_FAILED");
        assert_eq!(
            err.to_string(),
            "the Python kernel exited during start-up (exit code 1; interpreter /usr/bin/python3). Kernel stderr:\nTraceback...\nImportError: boom"
        );
        let cwd = KernelError::CwdInvalid {
            path: "/nope".into(),
            reason: "does not exist",
        };
        assert_eq!(
            cwd.to_string(),
            "cwd /nope does not exist; pass an existing directory as `cwd`."
        );
    }
}
