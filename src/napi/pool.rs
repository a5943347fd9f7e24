//! The `KernelPool` class: sessions of kernels behind an agent's eval tool.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::agent_text::{artifact_id, artifact_path, LiveOutput};

use super::agent_text::with_on_output_error;
use super::args::{self, convert, convert_optional};
use super::cells::read_cells;
use super::cells::EvalCell;
use super::delivery::with_on_event_error;
use super::delivery::EventSink;
use super::kernel::KernelOptions;
use super::options::{bounds, optional_integer, optional_millis, preload_modules, OptionReader};
use super::placement::read_placement;
use super::results::EvalResult;
use super::signatures as sig;
use super::{js_error, promise, rejected};
use crate::error::KernelError;
use crate::session::config::{PoolConfig, PoolMode, PoolRequest, UNLIMITED};
use crate::session::placement::Placement;
use crate::session::pool::Pool;

#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct PoolOptions {
    /// @default 'session'
    #[napi(ts_type = "'session' | 'per-call'")]
    pub mode: Option<String>,
    /// The most kernels 'session' mode runs at once: every kernel process counts, whether
    /// starting, idle, busy, a prewarmed spare or the kernel of a request with `mode:
    /// 'per-call'`. A new kernel beyond it ends a spare, else the least recently used idle
    /// session, else waits (see `acquireTimeoutMs`). In 'per-call' mode it is the default
    /// of `maxConcurrent`. An integer from 1 to 1024, or 'unlimited': no cap, so no session
    /// is ever evicted for room and no call waits for it (each kernel is a process: the
    /// host bounds how many it asks for).
    /// @default 4
    #[napi(ts_type = "number | 'unlimited'")]
    pub max_sessions: Option<Either<f64, String>>,
    /// 'per-call' mode only: the most kernels (calls, any prewarmed spares, and the
    /// sessions of requests with `mode: 'session'`) running at once; calls beyond it wait
    /// their turn (see `acquireTimeoutMs`). An integer from 1 to 1024, or 'unlimited'.
    /// @default maxSessions (4)
    #[napi(ts_type = "number | 'unlimited'")]
    pub max_concurrent: Option<Either<f64, String>>,
    /// How long a call waits for room when the pool runs as many kernels as it may, all
    /// busy, before it fails with `ERR_POOL_FULL`; from 0 (fail at once) to 3,600,000.
    /// @default 60000
    pub acquire_timeout_ms: Option<f64>,
    /// Idle sessions are evicted after this long; from 0 to 604,800,000 (7 days), or
    /// 'never': an idle session keeps its kernel until it is disposed (or evicted for room
    /// under `maxSessions`). @default 300000
    #[napi(ts_type = "number | 'never'")]
    pub idle_timeout_ms: Option<Either<f64, String>>,
    /// Idle kernels are pinged this often; 0 turns it off. Up to 3,600,000. @default 5000
    pub heartbeat_interval_ms: Option<f64>,
    /// A ping unanswered this long marks the kernel wedged; from 1 to 3,600,000.
    /// @default 2000
    pub heartbeat_timeout_ms: Option<f64>,
    /// Each shutdown step waits this long; from 0 to 3,600,000. @default 1000
    pub shutdown_grace_ms: Option<f64>,
    /// Where full outputs are written when the agent's copy is cut.
    pub artifacts_dir: Option<String>,
    /// Kernels kept started and initialized with the pool's settings for new sessions (a
    /// session with its own cwd or kv store initializes one again). Spares count against
    /// `maxSessions` (`maxConcurrent`) and only fill free room: none while a call waits
    /// for room. They run on the pool's default launcher (`kernel.launcher`, or here) and
    /// are only given to sessions that run there, never to one placed or sent elsewhere.
    /// @default 1 in 'session' mode (0 with `launchers`, unless one of them is
    /// `kernel.launcher`), 0 in 'per-call'. An integer from 0 to 64.
    pub prewarm: Option<f64>,
    /// Modules every kernel of the pool starts with imported (e.g. `['numpy', 'pandas',
    /// 'matplotlib.pyplot']`), so a new session finds them in `sys.modules` and its
    /// `import pandas as pd` is instant: the default for `kernel.preload`. On Linux the
    /// kernels are forked from a zygote that imported them once (see
    /// `KernelOptions.preload`); where they cannot be, spares import them once ready and
    /// a session that starts its own kernel imports what it needs itself. Imported by the
    /// runner, not in the session's namespace (no name is defined); a module that fails
    /// to import is logged and skipped. Dotted module names, at most 64.
    pub preload: Option<Vec<String>>,
    /// Defaults for every kernel (a request's cwd, interpreter and launcher override them).
    pub kernel: Option<KernelOptions>,
    /// Launchers (argv prefixes, as `kernel.launcher`) to place sessions on: a session
    /// whose request names no `launcher` runs on one of them, chosen by `placement` when
    /// its first kernel starts and kept for the session's life (a `reset`, or a restart
    /// after its kernel died, runs on the same one; once disposed or evicted, the session
    /// is placed anew). Their words are quoted for a shell as
    /// `kernel.launcherShell` says. Not with `launcherFor`; an empty list or an empty argv
    /// is `ERR_INVALID_ARG`; so are `kernel.maxProcesses` and a `kernel.sandbox` other than
    /// the default or 'off' (a launched kernel takes neither). Spares stay on the pool's
    /// default launcher (see `prewarm`).
    pub launchers: Option<Vec<Vec<String>>>,
    /// How `launchers` are given to new sessions: 'round-robin' (each on the next of the
    /// list, in the order their first kernels start) or 'least-loaded' (on the one running
    /// the fewest of this pool's kernels, spares and those of requests that named it
    /// included; ties go to the earlier in the list). Only with `launchers`.
    /// @default 'round-robin'
    #[napi(ts_type = "'round-robin' | 'least-loaded'")]
    pub placement: Option<String>,
    /// Where a session whose request names no `launcher` runs: asked once, when the
    /// session's first kernel starts (the answer is kept for the session's life, as with
    /// `launchers`), with the request's `sessionId`, `sessionFile` and `ownerId` (each when
    /// given). It returns an argv prefix, or `undefined`/`null` for the pool's default
    /// (`kernel.launcher`, or here), or a Promise of one. A throw, a rejection or any other
    /// value fails that request with `ERR_INVALID_ARG` naming `launcherFor` (the pool
    /// goes on; the session's next call asks again). While it decides, the session's later
    /// calls wait; the request's `signal` and `deadlineMs` bound the wait. Not with
    /// `launchers`. Spares run on the default and serve only the sessions it sends there.
    #[napi(
        ts_type = "(sessionKey: { sessionId?: string; sessionFile?: string; ownerId?: string }) => string[] | undefined | null | Promise<string[] | undefined | null>"
    )]
    pub launcher_for: Option<FunctionRef<Value, Unknown<'static>>>,
}

#[napi(object)]
pub struct SessionInfo {
    pub key: String,
    pub pid: Option<u32>,
    pub owners: Vec<String>,
    /// A call is running or waiting.
    pub busy: bool,
    /// Milliseconds since the epoch.
    pub last_used: f64,
    pub execution_count: u32,
    /// The launcher its kernels run through (the request's, the pool's default or where
    /// the pool placed it); absent when they run here, or before the pool placed it.
    pub launcher: Option<Vec<String>>,
}

#[napi(object)]
pub struct DisposeOptions {
    /// Upper bound for the whole disposal, from 0 to 3,600,000. @default 3000
    pub budget_ms: Option<f64>,
}

fn budget(
    options: Option<DisposeOptions>,
    pool: &Pool,
) -> std::result::Result<Duration, KernelError> {
    optional_millis(
        "budgetMs",
        options.and_then(|o| o.budget_ms),
        (0, bounds::MAX_GRACE_MS),
        pool.default_budget(),
    )
}

/// A cap (`maxSessions`, `maxConcurrent`): an integer from 1 to 1024, or 'unlimited'.
fn cap(
    name: &'static str,
    value: Option<Either<f64, String>>,
) -> std::result::Result<Option<usize>, KernelError> {
    let max = bounds::MAX_SESSIONS;
    let reason = |got: String| KernelError::InvalidArgument {
        name,
        reason: format!("must be an integer from 1 to {max} or 'unlimited', got {got}"),
    };
    match value {
        None => Ok(None),
        Some(Either::A(n)) if n.fract() == 0.0 && (1.0..=max as f64).contains(&n) => {
            Ok(Some(n as usize))
        }
        Some(Either::A(n)) => Err(reason(n.to_string())),
        Some(Either::B(word)) if word == "unlimited" => Ok(Some(UNLIMITED)),
        Some(Either::B(word)) => Err(reason(format!("'{word}'"))),
    }
}

/// A request's `mode`, when it gives one.
fn request_mode(mode: Option<String>) -> std::result::Result<Option<PoolMode>, KernelError> {
    match mode.as_deref() {
        None => Ok(None),
        Some(mode) => parse_mode(mode).map(Some),
    }
}

fn parse_mode(mode: &str) -> std::result::Result<PoolMode, KernelError> {
    match mode {
        "session" => Ok(PoolMode::Session),
        "per-call" => Ok(PoolMode::PerCall),
        other => Err(KernelError::InvalidArgument {
            name: "mode",
            reason: format!("expected 'session' or 'per-call', got '{other}'"),
        }),
    }
}

/// The pool clamps a timeout to its range with a notice (the agent chose it); a negative
/// one is a mistake, not a request for the shortest.
fn timeout_seconds(value: Option<f64>) -> std::result::Result<Option<f64>, KernelError> {
    match value {
        Some(s) if s < 0.0 => Err(KernelError::InvalidArgument {
            name: "timeoutSeconds",
            reason: format!(
                "must be 0 (no timeout) or a positive number of seconds (clamped to the \
                 allowed range with a notice), got {s}"
            ),
        }),
        other => Ok(other),
    }
}

/// Sessions of kernels: the engine behind an agent's eval tool.
#[napi(js_name = "KernelPool")]
pub struct JsKernelPool {
    inner: Arc<Pool>,
}

#[napi]
impl JsKernelPool {
    #[napi(constructor, ts_args_type = "options?: PoolOptions | undefined | null")]
    pub fn new(env: Env, options: Option<Unknown>) -> Result<Self> {
        super::init_tracing();
        super::remove_private_tmps_on_exit(&env);
        let build = || -> std::result::Result<PoolConfig, KernelError> {
            args::check(&env, sig::NEW_KERNEL_POOL, &[options])?;
            let options: PoolOptions = convert_optional("options", options)?.unwrap_or_default();
            let kernel_options = options.kernel.unwrap_or_default();
            let given_cwd = kernel_options.cwd.clone();
            let launcher_shell = kernel_options.launcher_shell;
            let kernel = kernel_options.into_config(&env)?;
            let mut config = PoolConfig::new(kernel);
            config.launcher_shell = launcher_shell;
            if config.kernel.launcher.is_none() {
                // A kernel the pool sends elsewhere starts in `cwd` as given, there.
                config.far_cwd = given_cwd.map(PathBuf::from).unwrap_or_default();
            }
            config.placement = read_placement(
                &env,
                options.launchers,
                options.placement,
                options.launcher_for,
                launcher_shell,
            )?;
            if let Some(Placement::Launchers { .. }) = &config.placement {
                // Every placed session would fail to start: refused now.
                if config.kernel.max_processes.is_some() {
                    return Err(KernelError::InvalidArgument {
                        name: "maxProcesses",
                        reason: "cannot be counted through a launcher, and every session of a pool with `launchers` runs through one; limit processes where the kernels run".into(),
                    });
                }
                if !config.kernel.sandbox.is_off()
                    && config.kernel.sandbox != crate::sandbox::SandboxConfig::default()
                {
                    return Err(KernelError::InvalidArgument {
                        name: "sandbox",
                        reason: "applies to local kernels only, and every session of a pool with `launchers` runs through one; leave it out or set it to 'off'".into(),
                    });
                }
            }
            config.mode = request_mode(options.mode)?.unwrap_or(PoolMode::Session);
            if let Some(max) = cap("maxSessions", options.max_sessions)? {
                config.max_sessions = max;
            }
            let max_concurrent = cap("maxConcurrent", options.max_concurrent)?;
            config.max_concurrent = match (max_concurrent, config.mode) {
                (Some(max), PoolMode::PerCall) => max,
                (None, PoolMode::PerCall) => config.max_sessions,
                // Ignoring it would leave a host believing its calls are capped by it.
                (Some(_), PoolMode::Session) => {
                    return Err(KernelError::InvalidArgument {
                        name: "maxConcurrent",
                        reason: "applies to mode 'per-call'; in 'session' mode `maxSessions` caps the kernels, those of requests with `mode: 'per-call'` included".into(),
                    })
                }
                (None, PoolMode::Session) => config.max_concurrent,
            };
            config.acquire_timeout = optional_millis(
                "acquireTimeoutMs",
                options.acquire_timeout_ms,
                (0, bounds::MAX_WAIT_MS),
                config.acquire_timeout,
            )?;
            config.idle_timeout = match options.idle_timeout_ms {
                None => config.idle_timeout,
                Some(Either::A(ms)) => Some(optional_millis(
                    "idleTimeoutMs",
                    Some(ms),
                    (0, bounds::MAX_LONG_MS),
                    Duration::ZERO,
                )?),
                Some(Either::B(word)) if word == "never" => None,
                Some(Either::B(word)) => {
                    return Err(KernelError::InvalidArgument {
                        name: "idleTimeoutMs",
                        reason: format!(
                        "must be a number of milliseconds from 0 to {} or 'never', got '{word}'",
                        bounds::MAX_LONG_MS
                    ),
                    })
                }
            };
            config.heartbeat_interval = optional_millis(
                "heartbeatIntervalMs",
                options.heartbeat_interval_ms,
                (0, bounds::MAX_WAIT_MS),
                config.heartbeat_interval,
            )?;
            config.heartbeat_timeout = optional_millis(
                "heartbeatTimeoutMs",
                options.heartbeat_timeout_ms,
                (1, bounds::MAX_WAIT_MS),
                config.heartbeat_timeout,
            )?;
            config.shutdown_grace = optional_millis(
                "shutdownGraceMs",
                options.shutdown_grace_ms,
                (0, bounds::MAX_GRACE_MS),
                config.shutdown_grace,
            )?;
            config.artifacts_dir = options.artifacts_dir.map(PathBuf::from);
            let prewarm = optional_integer("prewarm", options.prewarm, (0, bounds::MAX_PREWARM))?;
            // Spares run on the default launcher: with `launchers`, no session that names
            // none would take one, unless the default is one of them.
            let spares_fit = match &config.placement {
                Some(Placement::Launchers { launchers, .. }) => config
                    .kernel
                    .launcher
                    .as_ref()
                    .is_some_and(|default| launchers.contains(default)),
                _ => true,
            };
            config.prewarm = match (prewarm, config.mode) {
                (Some(n), _) => n as usize,
                (None, PoolMode::Session) if spares_fit => 1,
                (None, _) => 0,
            };
            config.preload = preload_modules(options.preload)?;
            config.prepare_artifacts_dirs()?;
            Ok(config)
        };
        let config = build().map_err(|err| js_error(&env, &err))?;
        let pool = napi::bindgen_prelude::within_runtime_if_available(|| Pool::new(config));
        Ok(Self {
            inner: Arc::new(pool),
        })
    }

    /// Runs a request's cells in its session's kernel and returns the agent-ready result.
    #[napi(
        ts_args_type = "request: EvalRequest",
        ts_return_type = "Promise<EvalResult>"
    )]
    pub fn execute<'env>(
        &self,
        env: &'env Env,
        request: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, EvalResult>> {
        let request: Object = match args::check(env, sig::KERNEL_POOL_EXECUTE, &[Some(request)])
            .and_then(|()| convert("request", request))
        {
            Ok(request) => request,
            Err(err) => return rejected(env, err),
        };
        let reader = OptionReader::new(env, Some(&request));
        let parsed = (|| {
            let cells: Vec<EvalCell> = reader.get("cells", "an array of { code, title? }")?.ok_or(
                KernelError::InvalidArgument {
                    name: "cells",
                    reason: "is required: an array of { code, title? }".into(),
                },
            )?;
            let (cells, notices) = read_cells(cells)?;
            let cancellation = reader.signal()?;
            let request = PoolRequest {
                cells,
                mode: request_mode(reader.get("mode", "'session' or 'per-call'")?)?,
                notices,
                session_id: reader.get("sessionId", "a string")?,
                session_file: reader.get("sessionFile", "a string")?,
                // As given: the pool makes a local kernel's absolute against the host's
                // cwd, and leaves a launched one's to the far side.
                cwd: reader.get::<String>("cwd", "a string")?.map(PathBuf::from),
                interpreter: reader.get("interpreter", "a string")?,
                launcher: reader.get("launcher", "an array of strings (an argv prefix)")?,
                owner_id: reader.get("ownerId", "a string")?,
                timeout_seconds: timeout_seconds(reader.get("timeoutSeconds", "a number")?)?,
                timeout_ms: reader.get("timeoutMs", "a number")?,
                reset: reader.get("reset", "a boolean")?.unwrap_or(false),
                abort: None,
                artifact_id: artifact_id(&reader)?,
                include_figure_text: reader.get("includeFigureText", "a boolean")?,
                on_output: None,
                env: reader
                    .get::<HashMap<String, Option<String>>>("env", "an object of strings or nulls")?
                    .map(|vars| vars.into_iter().collect()),
                artifacts_dir: reader
                    .get::<String>("artifactsDir", "a string")?
                    .map(super::host_path),
                deadline: reader.timeout_millis("deadlineMs", bounds::MAX_LONG_MS)?,
                artifact_path: artifact_path(&reader)?,
                request_id: super::kernel::request_id(&reader)?,
                uri_roots: super::options::request_uri_roots(&reader)?,
            };
            let on_event = reader.callback::<FnArgs<(u32, Value)>>("onEvent")?;
            let live = LiveOutput::read(&reader)?;
            Ok::<_, KernelError>((request, on_event, live, cancellation))
        })();
        let (mut request, on_event, live, cancellation) = match parsed {
            Ok(parsed) => parsed,
            Err(err) => return rejected(env, err),
        };
        let (abort, cancellation) = cancellation.split();
        request.abort = abort;
        request.on_output = live.sender();
        let source_len = request.cells.iter().map(|c| c.code.len()).sum();
        // Admitted now, so calls on one session run in the order JavaScript made them.
        let admission = match self.inner.admit(request) {
            Ok(admission) => admission,
            Err(err) => return rejected(env, err),
        };
        env.spawn_future_with_callback(
            super::eager(source_len, async move {
                let mut sink = EventSink::new(on_event);
                let result = admission
                    .run(|index, event| sink.push((index as u32, event.into_json()).into()))
                    .await;
                let on_event_error = sink.finish().await;
                let on_output_error = live.finish().await;
                Ok(result.map(|r| {
                    with_on_output_error(with_on_event_error(r, on_event_error), on_output_error)
                }))
            }),
            move |env, result| {
                cancellation.release(env);
                result
                    .map(EvalResult::from)
                    .map_err(|err| js_error(env, &err))
            },
        )
    }

    /// Disposes every kernel whose last owner this was. Idempotent; bounded by the budget
    /// even when a cell is stuck.
    #[napi(
        ts_args_type = "ownerId: string, options?: DisposeOptions | undefined | null",
        ts_return_type = "Promise<void>"
    )]
    pub fn dispose_owner<'env>(
        &self,
        env: &'env Env,
        owner_id: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, ()>> {
        let pool = self.inner.clone();
        let parsed = args::check(
            env,
            sig::KERNEL_POOL_DISPOSE_OWNER,
            &[Some(owner_id), options],
        )
        .and_then(|()| {
            let owner_id: String = convert("ownerId", owner_id)?;
            Ok((
                owner_id,
                budget(convert_optional("options", options)?, &pool)?,
            ))
        });
        let (owner_id, budget) = match parsed {
            Ok(parsed) => parsed,
            Err(err) => return rejected(env, err),
        };
        promise(env, async move {
            pool.dispose_owner(&owner_id, budget).await;
            Ok(())
        })
    }

    /// Disposes every kernel and refuses new work; for the host's signal handlers.
    #[napi(
        ts_args_type = "options?: DisposeOptions | undefined | null",
        ts_return_type = "Promise<void>"
    )]
    pub fn dispose_all<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, ()>> {
        let pool = self.inner.clone();
        let budget = args::check(env, sig::KERNEL_POOL_DISPOSE_ALL, &[options])
            .and_then(|()| budget(convert_optional("options", options)?, &pool));
        let disposal = match budget {
            Ok(budget) => pool.dispose_all(budget),
            Err(err) => return rejected(env, err),
        };
        promise(env, async move {
            disposal.await;
            Ok(())
        })
    }

    /// Takes work again after `disposeAll()`: new calls get fresh kernels. Without it a
    /// disposed pool refuses work (`ERR_POOL_DISPOSED`). Call it once `disposeAll()` has
    /// resolved (before that it throws `ERR_POOL_DISPOSED`); on a pool that was not
    /// disposed it does nothing.
    #[napi]
    pub fn reopen(&self, env: Env) -> Result<()> {
        let pool = self.inner.clone();
        napi::bindgen_prelude::within_runtime_if_available(move || pool.reopen())
            .map_err(|err| js_error(&env, &err))
    }

    /// The `artifactsDir` the pool was made with: where `pykernel/tool` keeps the
    /// originals of images it sized for the model.
    #[napi(getter)]
    pub fn artifacts_dir(&self) -> Option<String> {
        self.inner
            .artifacts_dir()
            .map(|dir| dir.display().to_string())
    }

    /// Pids of the spare kernels kept ready for new sessions (see `prewarm`).
    #[napi(getter)]
    pub fn spares(&self) -> Vec<u32> {
        self.inner.spare_pids()
    }

    #[napi(getter)]
    pub fn sessions(&self) -> Vec<SessionInfo> {
        self.inner
            .sessions()
            .into_iter()
            .map(|s| SessionInfo {
                key: s.key,
                pid: s.pid,
                owners: s.owners,
                busy: s.busy,
                last_used: s
                    .last_used
                    .duration_since(UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_millis() as f64),
                execution_count: s.execution_count,
                launcher: s.launcher,
            })
            .collect()
    }
}
