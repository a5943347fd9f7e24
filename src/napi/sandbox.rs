//! `KernelOptions.sandbox` and the `isolation` reports.

use std::path::Path;

use napi::bindgen_prelude::Either;
use napi_derive::napi;

use crate::error::KernelError;
use crate::sandbox::{Isolation, SandboxConfig};

#[napi(object, object_to_js = false)]
pub struct SandboxOptions {
    /// `false`: no network but loopback (a network namespace of its own). @default true
    pub network: Option<bool>,
    /// Confine writes to the kernel's cwd, a private temporary directory (`TMPDIR`),
    /// `/dev` and these directories (relative ones against cwd); reads stay allowed.
    /// @default undefined (writes anywhere the user may write, except the runner files)
    pub writable: Option<Vec<String>>,
}

/// What a kernel runs under (`kernel.isolation`) or would on this machine (`check`).
#[napi(object)]
pub struct IsolationInfo {
    /// `namespaces+landlock`, `namespaces`, `landlock`, `none`, or `off`.
    pub mode: String,
    /// The protections in force, e.g. `pid-namespace`, `signal-scope`.
    pub enforced: Vec<String>,
    /// Default protections this machine cannot give, each with what it leaves open.
    pub missing: Vec<String>,
}

impl From<&Isolation> for IsolationInfo {
    fn from(i: &Isolation) -> Self {
        IsolationInfo {
            mode: i.mode.clone(),
            enforced: i.enforced.iter().map(|s| s.to_string()).collect(),
            missing: i.missing.clone(),
        }
    }
}

/// `'off'` or the options object; anything else is an `ERR_INVALID_ARG`.
pub(super) fn sandbox_config(
    option: Option<Either<String, SandboxOptions>>,
    cwd: &Path,
) -> Result<SandboxConfig, KernelError> {
    match option {
        None => Ok(SandboxConfig::default()),
        Some(Either::A(word)) if word == "off" => Ok(SandboxConfig::Off),
        Some(Either::A(word)) => Err(KernelError::InvalidArgument {
            name: "sandbox",
            reason: format!("must be 'off' or {{ network?, writable? }}, got '{word}'"),
        }),
        Some(Either::B(options)) => Ok(SandboxConfig::On {
            network: options.network.unwrap_or(true),
            writable: options
                .writable
                .map(|dirs| dirs.iter().map(|d| cwd.join(d)).collect()),
        }),
    }
}
