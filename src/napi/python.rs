//! Which Python, and what it may see of the environment.

use std::collections::{BTreeMap, HashMap};

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::{blocking, cwd_or_current, promise};
use crate::env::DEFAULT_ENV_PREFIX;
use crate::runtime::{self, ResolveOptions};

#[napi(object)]
pub struct ResolvePythonOptions {
    pub cwd: Option<String>,
    pub interpreter: Option<String>,
    pub base_env: Option<HashMap<String, String>>,
}

#[napi(object)]
pub struct SkippedCandidate {
    pub candidate: String,
    pub source: String,
    pub reason: String,
}

#[napi(object)]
pub struct ResolvedPython {
    /// The real executable (`sys.executable`).
    pub path: String,
    pub version: String,
    #[napi(ts_type = "'explicit' | 'venv' | 'conda' | 'managed' | 'path'")]
    pub source: String,
    /// Variables the chosen interpreter brings (VIRTUAL_ENV and PATH for a venv).
    pub env: HashMap<String, String>,
    /// Candidates tried before it, and why each was passed over.
    pub skipped: Vec<SkippedCandidate>,
}

fn resolve_options(options: Option<ResolvePythonOptions>) -> ResolveOptions {
    let options = options.unwrap_or(ResolvePythonOptions {
        cwd: None,
        interpreter: None,
        base_env: None,
    });
    ResolveOptions {
        cwd: cwd_or_current(options.cwd),
        interpreter: options.interpreter,
        base_env: options
            .base_env
            .unwrap_or_else(|| std::env::vars().collect()),
    }
}

/// Finds the Python a kernel would use (SPEC 9), probing candidates in order.
#[napi(ts_return_type = "Promise<ResolvedPython>")]
pub fn resolve_python<'env>(
    env: &'env Env,
    options: Option<ResolvePythonOptions>,
) -> Result<PromiseRaw<'env, ResolvedPython>> {
    let opts = resolve_options(options);
    promise(env, async move {
        let (resolved, skipped) = blocking(move || runtime::resolve(&opts)).await?;
        let mut added = BTreeMap::new();
        if resolved.venv.is_some() {
            added.insert(
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            );
        }
        runtime::apply_to_env(&resolved, &mut added);
        Ok(ResolvedPython {
            path: resolved.path.display().to_string(),
            version: resolved.version.clone(),
            source: resolved.source.as_str().to_string(),
            env: added.into_iter().collect(),
            skipped: skipped
                .into_iter()
                .map(|s| SkippedCandidate {
                    candidate: s.candidate,
                    source: s.source.as_str().to_string(),
                    reason: s.reason,
                })
                .collect(),
        })
    })
}

#[napi(object)]
pub struct Availability {
    pub ok: bool,
    pub path: Option<String>,
    pub version: Option<String>,
    pub reason: Option<String>,
}

/// Whether a kernel can start here; never throws. Probes are cached per interpreter and cwd.
#[napi(ts_return_type = "Promise<Availability>")]
pub fn check_python_kernel_availability<'env>(
    env: &'env Env,
    options: Option<ResolvePythonOptions>,
) -> Result<PromiseRaw<'env, Availability>> {
    let opts = resolve_options(options);
    promise(env, async move {
        Ok(match blocking(move || runtime::resolve(&opts)).await {
            Ok((resolved, _)) => Availability {
                ok: true,
                path: Some(resolved.path.display().to_string()),
                version: Some(resolved.version),
                reason: None,
            },
            Err(err) => Availability {
                ok: false,
                path: None,
                version: None,
                reason: Some(err.to_string()),
            },
        })
    })
}

#[napi(object)]
pub struct FilterEnvOptions {
    /// @default "PYKERNEL_"
    pub env_prefix: Option<String>,
}

/// The variables of `env` a kernel may see (SPEC 9): denylist, allowlist, secret pattern,
/// allow-prefixes, in that order; everything else is dropped.
#[napi]
pub fn filter_env(
    env: HashMap<String, String>,
    options: Option<FilterEnvOptions>,
) -> HashMap<String, String> {
    let prefix = options
        .and_then(|o| o.env_prefix)
        .unwrap_or_else(|| DEFAULT_ENV_PREFIX.to_string());
    crate::env::filter_env(&env, &prefix).into_iter().collect()
}
