//! Which Python, and what it may see of the environment.

use std::collections::{BTreeMap, HashMap};

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::args::{self, convert, convert_optional};
use super::signatures as sig;
use super::{blocking, cwd_or_current, promise, rejected};
use crate::error::KernelError;
use crate::eval::backends;
use crate::start::python::{self, ResolveOptions};

#[napi(object)]
pub struct ResolvePythonOptions {
    pub cwd: Option<String>,
    pub interpreter: Option<String>,
    /// Read for discovery; candidates are probed with it filtered as for a kernel.
    /// @default process.env
    #[napi(ts_type = "Record<string, string | undefined>")]
    pub base_env: Option<super::JsEnv>,
    /// The filter's prefix, as the kernel's `envPrefix`. @default "PYKERNEL_"
    pub env_prefix: Option<String>,
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

fn resolve_options(
    options: Option<ResolvePythonOptions>,
) -> std::result::Result<ResolveOptions, KernelError> {
    let options = options.unwrap_or(ResolvePythonOptions {
        cwd: None,
        interpreter: None,
        base_env: None,
        env_prefix: None,
    });
    Ok(ResolveOptions {
        cwd: cwd_or_current(options.cwd),
        interpreter: options.interpreter,
        base_env: options
            .base_env
            .map(super::defined_vars)
            .unwrap_or_else(|| std::env::vars().collect()),
        env_prefix: super::options::env_prefix(options.env_prefix)?,
        sandboxed: true,
    })
}

/// Finds the Python a kernel would use, probing candidates in order.
#[napi(
    ts_args_type = "options?: ResolvePythonOptions | undefined | null",
    ts_return_type = "Promise<ResolvedPython>"
)]
pub fn resolve_python<'env>(
    env: &'env Env,
    options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, ResolvedPython>> {
    let opts = args::check(env, sig::RESOLVE_PYTHON, &[options])
        .and_then(|()| resolve_options(convert_optional("options", options)?));
    let opts = match opts {
        Ok(opts) => opts,
        Err(err) => return rejected(env, err),
    };
    promise(env, async move {
        let (resolved, skipped) = blocking(move || python::resolve(&opts)).await?;
        let mut added = BTreeMap::new();
        if resolved.venv.is_some() {
            added.insert(
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            );
        }
        python::apply_to_env(&resolved, &mut added);
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
pub struct PythonCandidate {
    /// What was looked at: `'interpreter option'`, `'VIRTUAL_ENV /v'`, `'CONDA_PREFIX'`,
    /// `'cwd venv /p/.venv'`, `'cwd venv /p/venv'`, `'managed venv ~/.pykernel/python-env'`,
    /// `'python on PATH'`, `'python3 on PATH'`.
    pub candidate: String,
    /// The executable it names; absent when it names none (a variable not set, a name not
    /// found on PATH, no `interpreter` given).
    pub path: Option<String>,
    #[napi(ts_type = "'explicit' | 'venv' | 'conda' | 'managed' | 'path'")]
    pub source: String,
    /// The executable is there (nothing is run to tell whether it is Python).
    pub exists: bool,
    /// The one `resolvePython` probes first, and a kernel uses unless that probe fails.
    pub chosen: bool,
    /// Why it was or was not chosen.
    pub reason: String,
}

/// Every interpreter candidate in discovery order (the `interpreter` option, `VIRTUAL_ENV`,
/// `CONDA_PREFIX`, `<cwd>/.venv`, `<cwd>/venv`, the managed venv, `python` then `python3` on
/// PATH), each with whether it exists, whether it is the one chosen, and why. Synchronous
/// and without probing: only the filesystem is looked at, so a test can set up candidates
/// in a temporary directory and `baseEnv`. Throws `ERR_CWD_INVALID` for a cwd that is not
/// a directory.
#[napi(ts_args_type = "options?: ResolvePythonOptions | undefined | null")]
pub fn python_candidates(env: &Env, options: Option<Unknown>) -> Result<Vec<PythonCandidate>> {
    let listed = args::check(env, sig::PYTHON_CANDIDATES, &[options])
        .and_then(|()| resolve_options(convert_optional("options", options)?))
        .and_then(|opts| python::list_candidates(&opts))
        .map_err(|err| super::js_error(env, &err))?;
    Ok(listed
        .into_iter()
        .map(|l| PythonCandidate {
            candidate: l.label,
            path: l.path.map(|p| p.display().to_string()),
            source: l.source.as_str().to_string(),
            exists: l.exists,
            chosen: l.chosen,
            reason: l.reason,
        })
        .collect())
}

#[napi(object)]
pub struct Availability {
    pub ok: bool,
    pub path: Option<String>,
    pub version: Option<String>,
    pub reason: Option<String>,
    /// The protections a kernel started with the default sandbox gets on this machine.
    pub isolation: super::sandbox::IsolationInfo,
}

/// Whether a kernel can start here; never throws (options of the wrong shape are an
/// `ok: false` answer saying so). Probes are cached per interpreter and cwd.
#[napi(
    ts_args_type = "options?: ResolvePythonOptions",
    ts_return_type = "Promise<Availability>"
)]
pub fn check_python_kernel_availability<'env>(
    env: &'env Env,
    options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, Availability>> {
    // Options it cannot take are the answer's reason, not a rejection.
    let opts = args::check(env, sig::CHECK_PYTHON_KERNEL_AVAILABILITY, &[options])
        .and_then(|()| resolve_options(convert_optional("options", options)?))
        .map_err(|e| e.to_string());
    promise(env, async move {
        let isolation = blocking(|| Ok(crate::sandbox::default_isolation()))
            .await
            .map(|i| (&i).into())
            .unwrap_or_else(
                |e: crate::error::KernelError| super::sandbox::IsolationInfo {
                    mode: "none".into(),
                    enforced: vec![],
                    missing: vec![e.to_string()],
                    user_namespaces: None,
                },
            );
        let resolved = match opts {
            Ok(opts) => blocking(move || python::resolve(&opts))
                .await
                .map_err(|e| e.to_string()),
            Err(reason) => Err(reason),
        };
        Ok(match resolved {
            Ok((resolved, _)) => Availability {
                ok: true,
                path: Some(resolved.path.display().to_string()),
                version: Some(resolved.version),
                reason: None,
                isolation,
            },
            Err(reason) => Availability {
                ok: false,
                path: None,
                version: None,
                reason: Some(reason),
                isolation,
            },
        })
    })
}

#[napi(object)]
pub struct FilterEnvOptions {
    /// @default "PYKERNEL_"
    pub env_prefix: Option<String>,
}

/// The variables of `env` a kernel may see: denylist, allowlist, secret pattern,
/// allow-prefixes, in that order; everything else is dropped.
#[napi(ts_args_type = "env: Record<string, string | undefined>, options?: FilterEnvOptions")]
pub fn filter_env(
    js_env: &Env,
    env: Unknown,
    options: Option<Unknown>,
) -> Result<HashMap<String, String>> {
    let parsed = args::check(js_env, sig::FILTER_ENV, &[Some(env), options]).and_then(|()| {
        let options: Option<FilterEnvOptions> = convert_optional("options", options)?;
        Ok((
            super::defined_vars(convert("env", env)?),
            super::options::env_prefix(options.and_then(|o| o.env_prefix))?,
        ))
    });
    let (env, prefix) = parsed.map_err(|err| super::js_error(js_env, &err))?;
    Ok(crate::start::env::filter_env(&env, &prefix)
        .into_iter()
        .collect())
}

#[napi(object)]
pub struct BackendSettings {
    /// @default true
    pub py: Option<bool>,
    /// @default true
    pub js: Option<bool>,
}

#[napi(object)]
pub struct EvalBackendsOptions {
    /// The host tool's own settings (`eval.py`, `eval.js`).
    pub settings: Option<BackendSettings>,
    /// Where the flags are read, and the environment of the Python preflight.
    /// @default process.env
    #[napi(ts_type = "Record<string, string | undefined>")]
    pub env: Option<super::JsEnv>,
    /// @default "PYKERNEL_"
    pub env_prefix: Option<String>,
    /// `'boolean'`: `<PREFIX>PY` / `<PREFIX>JS` are booleans overriding their own setting;
    /// `'mode'`: `<PREFIX>PY` = 0/bash (JS only), 1/py (Python only), mix/both.
    /// @default 'boolean'
    #[napi(ts_type = "'boolean' | 'mode'")]
    pub flag_style: Option<String>,
    /// For the preflight.
    pub cwd: Option<String>,
    pub interpreter: Option<String>,
}

#[napi(object)]
pub struct EvalBackendsResult {
    /// Python cells can run.
    pub py: bool,
    pub js: bool,
    /// Python was asked for but is not usable here: the error to give Python cells.
    pub python_error: Option<String>,
}

/// Which eval backends a host tool should expose, with the Python preflight done.
#[napi(
    ts_args_type = "options?: EvalBackendsOptions | undefined | null",
    ts_return_type = "Promise<EvalBackendsResult>"
)]
pub fn eval_backends<'env>(
    env: &'env Env,
    options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, EvalBackendsResult>> {
    let options: Option<EvalBackendsOptions> =
        match args::check(env, sig::EVAL_BACKENDS, &[options])
            .and_then(|()| convert_optional("options", options))
        {
            Ok(options) => options,
            Err(err) => return rejected(env, err),
        };
    let options = options.unwrap_or(EvalBackendsOptions {
        settings: None,
        env: None,
        env_prefix: None,
        flag_style: None,
        cwd: None,
        interpreter: None,
    });
    let vars = options
        .env
        .map(super::defined_vars)
        .unwrap_or_else(|| std::env::vars().collect());
    let style = match options.flag_style.as_deref() {
        None | Some("boolean") => backends::FlagStyle::Boolean,
        Some("mode") => backends::FlagStyle::Mode,
        Some(other) => {
            let err = KernelError::InvalidArgument {
                name: "flagStyle",
                reason: format!("expected 'boolean' or 'mode', got '{other}'"),
            };
            return rejected(env, err);
        }
    };
    let settings = backends::Backends {
        py: options.settings.as_ref().and_then(|s| s.py).unwrap_or(true),
        js: options.settings.as_ref().and_then(|s| s.js).unwrap_or(true),
    };
    let prefix = match super::options::env_prefix(options.env_prefix) {
        Ok(prefix) => prefix,
        Err(err) => return rejected(env, err),
    };
    let chosen = backends::select(settings, &vars, &prefix, style);
    let opts = ResolveOptions {
        cwd: cwd_or_current(options.cwd),
        interpreter: options.interpreter,
        base_env: vars,
        env_prefix: prefix,
        sandboxed: true,
    };
    promise(env, async move {
        let python_error = if chosen.py {
            blocking(move || python::resolve(&opts))
                .await
                .err()
                .map(|e| format!("The Python backend is not available: {e}"))
        } else {
            None
        };
        Ok(EvalBackendsResult {
            py: chosen.py && python_error.is_none(),
            js: chosen.js,
            python_error,
        })
    })
}
