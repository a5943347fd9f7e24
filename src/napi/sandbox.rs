//! `KernelOptions.sandbox` and the `isolation` reports.

use std::path::{Path, PathBuf};

use napi::bindgen_prelude::Either;
use napi_derive::napi;

use crate::error::KernelError;
use crate::sandbox::allow_list::AllowList;
use crate::sandbox::{
    Hidden, Installs, Isolation, Network, Policy, SandboxConfig, Writable, DEFAULT_HIDDEN,
};

#[napi(object, object_to_js = false)]
pub struct SandboxOptions {
    /// `true`: the host's network. `false`: none but loopback (a network namespace of its
    /// own). `{ allow: [...] }`: loopback, and HTTP and HTTPS through a proxy of the host's
    /// that admits only the listed host names (`pypi.org`, `*.pythonhosted.org` for any
    /// name beneath it, an address, each with `:port` for a port other than 80 and 443);
    /// the kernel's `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` point at it. Needs user
    /// namespaces (`ERR_SANDBOX` without). @default true
    pub network: Option<Either<bool, NetworkAllowList>>,
    /// Where a cell may write. By default: the kernel's cwd (its `.git` read-only), its
    /// private temporary directory (`TMPDIR`), its own `/dev/shm` and ptys, and its
    /// session's installs (see `installs`). Directories listed here are added (relative
    /// ones against cwd); `'all'` lets it write wherever the host's user may (but the
    /// machine's own controls and the runner files). Reads are not confined (see
    /// `hidden`). @default []
    #[napi(ts_type = "string[] | 'all'")]
    pub writable: Option<Either<Vec<String>, String>>,
    /// Files and directories a cell sees empty and read-only: by default the usual
    /// credential stores beneath the home directory (`defaultHiddenPaths()`: ssh, gnupg,
    /// the clouds', kube, docker, netrc, npmrc, pypirc, git credentials, gh, cargo
    /// credentials, password stores and keyrings, browser profiles, ...). A list replaces
    /// them (relative entries and `~/...` beneath the home directory, absolute ones as
    /// they are): `[...defaultHiddenPaths(), '.myapp']` adds one, `[]` hides nothing.
    pub hidden: Option<Vec<String>>,
    /// Where `%pip install` (or anything a cell writes into the interpreter's
    /// environment) goes. `'session'`: an overlay of the environment that belongs to the
    /// session (a pool's session, or a bare kernel), kept across `reset` and restarts,
    /// removed with it, seen by no other session. `'shared'`: the environment itself,
    /// made writable, so what a cell installs runs in every later kernel.
    /// @default 'session' ('shared' with `writable: 'all'`)
    #[napi(ts_type = "'session' | 'shared'")]
    pub installs: Option<String>,
}

/// `sandbox.network` as an allow list.
#[napi(object, object_to_js = false)]
pub struct NetworkAllowList {
    /// Host names (exact, or `*.suffix` for the names beneath it) and addresses, each
    /// with an optional `:port`.
    pub allow: Vec<String>,
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
    /// Where the machine refuses user namespaces (most of `missing` then): why, and what
    /// its administrator can do about it.
    pub user_namespaces: Option<UserNamespacesRefused>,
}

#[napi(object)]
pub struct UserNamespacesRefused {
    /// The cause, e.g. Ubuntu's AppArmor restriction, a sysctl, a container's seccomp
    /// profile.
    pub cause: String,
    /// What to do, a step each (the one that fits, or alternatives).
    pub fix: Vec<String>,
}

impl From<&Isolation> for IsolationInfo {
    fn from(i: &Isolation) -> Self {
        IsolationInfo {
            mode: i.mode.clone(),
            enforced: i.enforced.iter().map(|s| s.to_string()).collect(),
            missing: i.missing.clone(),
            user_namespaces: i
                .namespaces_refused
                .as_ref()
                .map(|d| UserNamespacesRefused {
                    cause: d.cause.clone(),
                    fix: d.fix.clone(),
                }),
        }
    }
}

/// `'off'` or the options object; anything else is an `ERR_INVALID_ARG`.
pub(super) fn sandbox_config(
    option: Option<Either<String, SandboxOptions>>,
    cwd: &Path,
) -> Result<SandboxConfig, KernelError> {
    let invalid =
        |name: &'static str, reason: String| KernelError::InvalidArgument { name, reason };
    let options = match option {
        None => return Ok(SandboxConfig::default()),
        Some(Either::A(word)) if word == "off" => return Ok(SandboxConfig::Off),
        Some(Either::A(word)) => {
            return Err(invalid(
                "sandbox",
                format!(
                    "must be 'off' or {{ network?, writable?, hidden?, installs? }}, got '{word}'"
                ),
            ))
        }
        Some(Either::B(options)) => options,
    };
    let writable = match options.writable {
        None => Writable::Confined(Vec::new()),
        Some(Either::A(dirs)) => Writable::Confined(dirs.iter().map(|d| cwd.join(d)).collect()),
        Some(Either::B(word)) if word == "all" => Writable::All,
        Some(Either::B(word)) => {
            return Err(invalid(
                "sandbox.writable",
                format!("must be a list of directories or 'all', got '{word}'"),
            ))
        }
    };
    let installs = match options.installs.as_deref() {
        None if writable == Writable::All => Installs::Shared,
        None | Some("session") => Installs::Session,
        Some("shared") => Installs::Shared,
        Some(other) => {
            return Err(invalid(
                "sandbox.installs",
                format!("must be 'session' or 'shared', got '{other}'"),
            ))
        }
    };
    let hidden = match options.hidden {
        None => Hidden::Default,
        Some(paths) => {
            if let Some(bad) = paths.iter().find(|p| p.is_empty() || p.contains('\0')) {
                return Err(invalid("sandbox.hidden", format!("{bad:?} is not a path")));
            }
            Hidden::Paths(paths.iter().map(PathBuf::from).collect())
        }
    };
    let network = match options.network {
        None | Some(Either::A(true)) => Network::Host,
        Some(Either::A(false)) => Network::Loopback,
        Some(Either::B(list)) => Network::Allow(
            AllowList::parse(&list.allow)
                .map_err(|reason| invalid("sandbox.network.allow", reason))?,
        ),
    };
    Ok(SandboxConfig::On(Policy {
        network,
        writable,
        hidden,
        installs,
    }))
}

/// The credential stores a default kernel sees empty, beneath the home directory: a
/// host that hides a directory of its own lists them with it in `sandbox.hidden`.
#[napi]
pub fn default_hidden_paths() -> Vec<String> {
    DEFAULT_HIDDEN.iter().map(|p| p.to_string()).collect()
}
