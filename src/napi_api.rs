//! The JavaScript surface. Only argument conversion and delegation live here: every
//! behaviour is in the napi-free modules, where Rust unit tests reach it.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};
use napi_derive::napi;
use serde_json::Value;

use crate::env::DEFAULT_ENV_PREFIX;
use crate::error::KernelError;
use crate::events::{ExecuteOutcome, KernelEvent};
use crate::kernel::{
    AbortHandle, ExecuteRequest, Kernel, KernelConfig, DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_STARTUP_TIMEOUT,
};
use crate::runtime::{self, ResolveOptions};

/// A JavaScript `Error` whose `code` is the stable code of `err`.
pub(crate) fn js_error(env: &Env, err: &KernelError) -> Error {
    let build = || -> Result<Error> {
        let mut obj = env.create_error(Error::new(Status::GenericFailure, err.to_string()))?;
        obj.set_named_property("code", err.code())?;
        Ok(Error::from(obj.to_unknown()))
    };
    build().unwrap_or_else(|e| e)
}

/// Runs `fut` on the runtime and settles the promise with its value, or with a coded
/// `Error`.
fn promise<'env, T, F>(env: &'env Env, fut: F) -> Result<PromiseRaw<'env, T>>
where
    T: 'static + Send + ToNapiValue,
    F: 'static + Send + std::future::Future<Output = std::result::Result<T, KernelError>>,
{
    env.spawn_future_with_callback(async move { Ok(fut.await) }, |env, result| {
        result.map_err(|err| js_error(env, &err))
    })
}

fn cwd_or_current(cwd: Option<String>) -> PathBuf {
    cwd.map(PathBuf::from)
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")))
}

#[napi(object)]
#[derive(Default)]
pub struct KernelOptions {
    /// Working directory; must exist and be a directory. @default process.cwd()
    pub cwd: Option<String>,
    /// The environment to filter (SPEC 9). @default process.env
    pub base_env: Option<HashMap<String, String>>,
    /// Host-managed variables, added after filtering.
    pub env: Option<HashMap<String, String>>,
    /// An explicit Python executable; skips discovery.
    pub interpreter: Option<String>,
    /// @default "PYKERNEL_"
    pub env_prefix: Option<String>,
    /// @default "application/x-pykernel-status"
    pub status_mime: Option<String>,
    /// @default 10000
    pub startup_timeout_ms: Option<u32>,
    /// RLIMIT_AS for the kernel process, in bytes.
    pub memory_limit_bytes: Option<f64>,
}

impl KernelOptions {
    fn into_config(self) -> std::result::Result<KernelConfig, KernelError> {
        let mut config = KernelConfig::new(cwd_or_current(self.cwd));
        config.base_env = self.base_env;
        config.env = self.env.unwrap_or_default();
        config.interpreter = self.interpreter;
        if let Some(prefix) = self.env_prefix {
            config.env_prefix = prefix;
        }
        if let Some(mime) = self.status_mime {
            config.status_mime = mime;
        }
        config.startup_timeout = self
            .startup_timeout_ms
            .map_or(DEFAULT_STARTUP_TIMEOUT, |ms| {
                Duration::from_millis(ms.into())
            });
        if let Some(limit) = self.memory_limit_bytes {
            if !(limit.is_finite() && limit > 0.0) {
                return Err(KernelError::InvalidArgument {
                    name: "memoryLimitBytes",
                    reason: format!("must be a positive number of bytes, got {limit}"),
                });
            }
            config.memory_limit_bytes = Some(limit as u64);
        }
        Ok(config)
    }
}

#[napi(object)]
pub struct ErrorInfo {
    pub ename: String,
    pub evalue: String,
    pub traceback: Vec<String>,
}

#[napi(object)]
pub struct StatusInfo {
    pub op: String,
    pub data: Value,
}

#[napi(object)]
pub struct ExecuteResult {
    #[napi(ts_type = "'ok' | 'error'")]
    pub status: String,
    pub execution_count: u32,
    pub cancelled: bool,
    pub timed_out: bool,
    pub kernel_died: bool,
    pub stdin_requested: bool,
    pub stdout: String,
    pub stderr: String,
    #[napi(ts_type = "MimeBundle[]")]
    pub displays: Vec<Value>,
    /// Status events (`_emit_status`), in order.
    pub statuses: Vec<StatusInfo>,
    #[napi(ts_type = "MimeBundle")]
    pub result: Option<Value>,
    pub error: Option<ErrorInfo>,
}

impl From<ExecuteOutcome> for ExecuteResult {
    fn from(o: ExecuteOutcome) -> Self {
        ExecuteResult {
            status: if o.ok { "ok" } else { "error" }.to_string(),
            execution_count: o.execution_count,
            cancelled: o.cancelled,
            timed_out: o.timed_out,
            kernel_died: o.kernel_died,
            stdin_requested: o.stdin_requested,
            stdout: o.stdout,
            stderr: o.stderr,
            displays: o.displays,
            statuses: o
                .statuses
                .into_iter()
                .map(|s| StatusInfo {
                    op: s.op,
                    data: Value::Object(s.data),
                })
                .collect(),
            result: o.result,
            error: o.error.map(|e| ErrorInfo {
                ename: e.ename,
                evalue: e.evalue,
                traceback: e.traceback,
            }),
        }
    }
}

#[napi(object)]
pub struct ShutdownResult {
    /// The process is gone (reaped).
    pub confirmed: bool,
    pub exit_code: Option<i32>,
    /// The name of the signal that ended it, e.g. "SIGKILL".
    pub signal: Option<String>,
}

#[napi(object)]
pub struct ShutdownOptions {
    /// Wait for each step (exit, SIGTERM, SIGKILL). @default 1000
    pub grace_ms: Option<u32>,
}

type EventCallback = ThreadsafeFunction<Value, UnknownReturnValue, Value, Status, false>;

/// One Python process.
#[napi(js_name = "Kernel")]
pub struct JsKernel {
    inner: Arc<Kernel>,
}

#[napi]
impl JsKernel {
    /// Starts a kernel: resolves Python, spawns the runner, waits until it is ready.
    #[napi(ts_return_type = "Promise<Kernel>")]
    pub fn start<'env>(
        env: &'env Env,
        options: Option<KernelOptions>,
    ) -> Result<PromiseRaw<'env, JsKernel>> {
        let config = options.unwrap_or_default().into_config();
        promise(env, async move {
            let inner = Kernel::start(config?).await?;
            Ok(JsKernel { inner })
        })
    }

    #[napi(getter)]
    pub fn pid(&self) -> u32 {
        self.inner.pid()
    }

    #[napi(getter)]
    pub fn alive(&self) -> bool {
        self.inner.alive()
    }

    /// The resolved real executable (`sys.executable`).
    #[napi(getter)]
    pub fn interpreter(&self) -> String {
        self.inner.interpreter().to_string()
    }

    #[napi(getter)]
    pub fn execution_count(&self) -> u32 {
        self.inner.execution_count()
    }

    /// Runs one cell. Events stream to `onEvent` in order; all of them have been delivered
    /// when the promise resolves.
    #[napi(
        ts_args_type = "code: string, options?: ExecuteOptions",
        ts_return_type = "Promise<ExecuteResult>"
    )]
    pub fn execute<'env>(
        &self,
        env: &'env Env,
        code: String,
        options: Option<Object<'env>>,
    ) -> Result<PromiseRaw<'env, ExecuteResult>> {
        let parsed = match options {
            Some(obj) => match parse_execute_options(env, &obj, code) {
                Ok(parsed) => parsed,
                Err(err) => return promise(env, async move { Err(err) }),
            },
            None => ParsedExecute {
                request: ExecuteRequest {
                    code,
                    store_history: true,
                    ..Default::default()
                },
                abort: None,
                on_event: None,
                listener: None,
            },
        };
        let kernel = self.inner.clone();
        let ParsedExecute {
            request,
            abort,
            on_event,
            listener,
        } = parsed;
        env.spawn_future_with_callback(
            async move {
                let mut sink = EventSink::new(on_event);
                let outcome = kernel
                    .execute(request, abort, |event| sink.push(event))
                    .await;
                sink.finish().await;
                Ok(outcome)
            },
            move |env, outcome| {
                if let Some(listener) = listener {
                    listener.remove(env);
                }
                outcome
                    .map(ExecuteResult::from)
                    .map_err(|err| js_error(env, &err))
            },
        )
    }

    /// SIGINT to the kernel's process group (the cell and its shell children).
    #[napi]
    pub fn interrupt(&self) {
        self.inner.interrupt();
    }

    /// exit -> grace -> SIGTERM -> grace -> SIGKILL; `confirmed` once the process is reaped.
    #[napi(ts_return_type = "Promise<ShutdownResult>")]
    pub fn shutdown<'env>(
        &self,
        env: &'env Env,
        options: Option<ShutdownOptions>,
    ) -> Result<PromiseRaw<'env, ShutdownResult>> {
        let grace = options
            .and_then(|o| o.grace_ms)
            .map_or(DEFAULT_SHUTDOWN_GRACE, |ms| {
                Duration::from_millis(ms.into())
            });
        let kernel = self.inner.clone();
        promise(env, async move {
            let outcome = kernel.shutdown(grace).await;
            Ok(ShutdownResult {
                confirmed: outcome.confirmed,
                exit_code: outcome.exit.and_then(|e| e.code),
                signal: outcome.exit.and_then(|e| e.signal).map(signal_name),
            })
        })
    }
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| sig.to_string())
}

struct ParsedExecute {
    request: ExecuteRequest,
    abort: Option<Arc<AbortHandle>>,
    on_event: Option<EventCallback>,
    listener: Option<AbortListener>,
}

/// The `abort` listener added to a caller's AbortSignal, removed when the cell ends so a
/// signal reused for many cells does not collect listeners.
struct AbortListener {
    signal: ObjectRef<false>,
    listener: FunctionRef<(), ()>,
}

impl AbortListener {
    fn remove(self, env: &Env) {
        let removed = (|| -> Result<()> {
            let signal = self.signal.get_value(env)?;
            let listener = self.listener.borrow_back(env)?;
            let remove: Function<FnArgs<(&str, Function<(), ()>)>, Unknown> =
                signal.get_named_property("removeEventListener")?;
            remove.apply(signal, ("abort", listener).into())?;
            Ok(())
        })();
        if let Err(err) = removed {
            tracing::debug!("could not remove the abort listener: {err}");
        }
        let _ = self.signal.unref(env);
    }
}

/// Reads `ExecuteOptions`. A wrong type is an `ERR_INVALID_ARG` naming the option.
fn parse_execute_options(
    env: &Env,
    obj: &Object,
    code: String,
) -> std::result::Result<ParsedExecute, KernelError> {
    fn option<T: FromNapiValue + ValidateNapiValue>(
        obj: &Object,
        name: &'static str,
        expected: &str,
    ) -> std::result::Result<Option<T>, KernelError> {
        obj.get::<T>(name)
            .map_err(|_| KernelError::InvalidArgument {
                name,
                reason: format!("must be {expected}"),
            })
    }
    let timeout = match option::<f64>(obj, "timeoutMs", "a number")? {
        Some(ms) if ms.is_finite() && ms >= 0.0 => Some(Duration::from_millis(ms as u64)),
        Some(ms) => {
            return Err(KernelError::InvalidArgument {
                name: "timeoutMs",
                reason: format!("must be a non-negative number of milliseconds, got {ms}"),
            })
        }
        None => None,
    };
    let env_changes =
        option::<HashMap<String, Option<String>>>(obj, "env", "an object of strings or nulls")?;
    let request = ExecuteRequest {
        code,
        silent: option(obj, "silent", "a boolean")?.unwrap_or(false),
        store_history: option(obj, "storeHistory", "a boolean")?.unwrap_or(true),
        cwd: option(obj, "cwd", "a string")?,
        env: env_changes.map(|m| m.into_iter().collect::<BTreeMap<_, _>>()),
        timeout,
    };
    let napi_failure = |name: &'static str| {
        move |e: Error| KernelError::InvalidArgument {
            name,
            reason: e.reason.clone(),
        }
    };
    let on_event =
        match option::<Function<Value, UnknownReturnValue>>(obj, "onEvent", "a function")? {
            Some(f) => Some(
                f.build_threadsafe_function::<Value>()
                    .callee_handled::<false>()
                    .build()
                    .map_err(napi_failure("onEvent"))?,
            ),
            None => None,
        };
    let mut abort = None;
    let mut listener = None;
    if let Some(signal) = option::<Object>(obj, "signal", "an AbortSignal")? {
        let (handle, added) = watch_signal(env, &signal).map_err(napi_failure("signal"))?;
        abort = Some(handle);
        listener = added;
    }
    Ok(ParsedExecute {
        request,
        abort,
        on_event,
        listener,
    })
}

/// Connects an AbortSignal to an [`AbortHandle`]; an already aborted signal aborts at once.
fn watch_signal(env: &Env, signal: &Object) -> Result<(Arc<AbortHandle>, Option<AbortListener>)> {
    let handle = AbortHandle::new();
    if signal.get::<bool>("aborted")?.unwrap_or(false) {
        handle.abort();
        return Ok((handle, None));
    }
    let on_abort = handle.clone();
    let callback = env.create_function_from_closure("onAbort", move |_| {
        on_abort.abort();
        Ok(())
    })?;
    let add: Function<FnArgs<(&str, Function<(), ()>)>, Unknown> =
        signal.get_named_property("addEventListener")?;
    add.apply(signal, ("abort", callback).into())?;
    let listener = AbortListener {
        signal: signal.create_ref()?,
        listener: callback.create_ref()?,
    };
    Ok((handle, Some(listener)))
}

/// Delivers events to `onEvent` in order. The last event is delivered with a call that
/// waits for JavaScript to run it: the queue is FIFO, so once it ran every earlier event
/// ran too, and the execute promise never resolves before its events.
struct EventSink {
    callback: Option<EventCallback>,
    pending: Option<Value>,
}

impl EventSink {
    fn new(callback: Option<EventCallback>) -> Self {
        Self {
            callback,
            pending: None,
        }
    }

    fn push(&mut self, event: KernelEvent) {
        let Some(callback) = &self.callback else {
            return;
        };
        if let Some(previous) = self.pending.replace(event.to_json()) {
            callback.call(previous, ThreadsafeFunctionCallMode::NonBlocking);
        }
    }

    async fn finish(mut self) {
        if let (Some(callback), Some(last)) = (self.callback.take(), self.pending.take()) {
            // A throwing onEvent must not fail the cell; its error is the caller's to see.
            let _ = callback.call_async(last).await;
        }
    }
}

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

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::result::Result<T, KernelError> + Send + 'static,
) -> std::result::Result<T, KernelError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| KernelError::io("background task", std::io::Error::other(e)))?
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
