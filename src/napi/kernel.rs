//! The `Kernel` class: one Python process.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, UnknownReturnValue};
use napi_derive::napi;
use serde_json::Value;

use super::cancel::{watch_signal, AbortListener, EventSink};
use super::{cwd_or_current, js_error, promise};
use crate::error::KernelError;
use crate::events::ExecuteOutcome;
use crate::kernel::{
    AbortHandle, ExecuteRequest, Kernel, KernelConfig, DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_STARTUP_TIMEOUT,
};

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

pub(super) type EventCallback = ThreadsafeFunction<Value, UnknownReturnValue, Value, Status, false>;

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
        // The place in line is taken now, so calls run in the order JavaScript made them.
        let place = kernel.queue();
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
                    .execute_in_turn(place, request, abort, |event| sink.push(event))
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
        max_captured_bytes: None,
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
