//! The JavaScript surface. Only argument conversion and delegation live here: every
//! behaviour is in the napi-free modules, where Rust unit tests reach it.
//!
//! - `kernel`: the `Kernel` class and its options.
//! - `results`: the result objects (`ExecuteResult`, `ShutdownResult`, the agent-ready
//!   `EvalResult`) that the `Kernel` class and the pool return.
//! - `cells`: the cells of an `evaluate` or pool `execute` (`EvalCell`).
//! - `cancel`: AbortSignal -> [`crate::kernel::AbortHandle`].
//! - `delivery`: values to `onEvent` (and any later per-request callback) in order, with
//!   backpressure, awaiting the Promises of async callbacks; host callbacks whose every
//!   outcome settles one Promise (`onCall`, `launcherFor`).
//! - `options`: reading option objects that hold functions and signals.
//! - `kv`: the `KvStore` class.
//! - `pool`: the `KernelPool` class.
//! - `placement`: the pool's `launchers`, `placement` and `launcherFor` options.
//! - `python`: `resolvePython`, `checkPythonKernelAvailability`, `filterEnv`.
//! - `output`: `renderBundle`, `clampLine` and the preview helpers.
//! - `agent_text`: the `OutputBuilder` class, `readArtifact`, and the agent-text options
//!   (`onOutput`, `artifactId`, `includeFigureText`) of `evaluate` and the pool.

// The exports are registered with Node, which unit-test builds do not see.
#![cfg_attr(test, allow(dead_code))]

mod agent_text;
mod cancel;
mod cells;
mod delivery;
mod kernel;
mod kv;
mod options;
mod output;
mod placement;
mod pool;
mod python;
mod results;
mod sandbox;

use std::collections::HashMap;
use std::path::PathBuf;

use napi::bindgen_prelude::*;

use crate::error::KernelError;

/// With `PYKERNEL_TRACE=1`, lifecycle events (start, execute, evict, restart, dispose)
/// are logged to stderr; off otherwise, at the cost of one variable lookup.
pub(crate) fn init_tracing() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("PYKERNEL_TRACE").is_some_and(|v| v == "1") {
            let _ = tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .with_target(false)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .try_init();
        }
    });
}

/// Once per process, on the first start: the kernels' private temporary directories are
/// removed when the host exits. Node runs C `atexit` handlers on `process.exit()`, Bun
/// does not; both emit `process`'s `exit` event, where napi's cleanup hooks do not run.
pub(crate) fn remove_private_tmps_on_exit(env: &Env) {
    static INSTALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if INSTALLED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    // Plain napi calls: `process.on('exit', hook)`, and a failure's exception cleared, so
    // a start never throws for it.
    let install = || -> Result<()> {
        use napi::sys;
        let raw = env.raw();
        let hook = env.create_function_from_closure::<(), (), _>("pykernelRemoveTmps", |_| {
            crate::start::host_dir::remove_all();
            Ok(())
        })?;
        // SAFETY: napi calls on this call's env, with values made in it just now.
        unsafe {
            let mut global = std::ptr::null_mut();
            let mut process = std::ptr::null_mut();
            let mut on = std::ptr::null_mut();
            let mut event = std::ptr::null_mut();
            let mut result = std::ptr::null_mut();
            let ok = |status: sys::napi_status| {
                if status == sys::Status::napi_ok {
                    Ok(())
                } else {
                    Err(Error::from_reason(format!("napi status {status}")))
                }
            };
            ok(sys::napi_get_global(raw, &mut global))?;
            ok(sys::napi_get_named_property(
                raw,
                global,
                c"process".as_ptr(),
                &mut process,
            ))?;
            ok(sys::napi_get_named_property(
                raw,
                process,
                c"on".as_ptr(),
                &mut on,
            ))?;
            ok(sys::napi_create_string_utf8(
                raw,
                c"exit".as_ptr(),
                4,
                &mut event,
            ))?;
            let argv = [event, hook.raw()];
            let called = ok(sys::napi_call_function(
                raw,
                process,
                on,
                2,
                argv.as_ptr(),
                &mut result,
            ));
            if called.is_err() {
                let mut thrown = std::ptr::null_mut();
                sys::napi_get_and_clear_last_exception(raw, &mut thrown);
            }
            called
        }
    };
    if let Err(e) = install() {
        tracing::debug!("no exit hook for the kernels' private tmp directories: {e}");
    }
}

/// A JavaScript `Error` whose `code` is the stable code of `err`.
pub(crate) fn js_error(env: &Env, err: &KernelError) -> Error {
    coded_error(env, err.code(), &err.to_string())
}

pub(crate) fn coded_error(env: &Env, code: &str, message: &str) -> Error {
    let build = || -> Result<Error> {
        let mut obj = env.create_error(Error::new(Status::GenericFailure, message))?;
        obj.set_named_property("code", code)?;
        Ok(Error::from(obj.to_unknown()))
    };
    build().unwrap_or_else(|e| e)
}

/// Runs `fut` on the runtime and settles the promise with its value, or with a coded
/// `Error`.
pub(crate) fn promise<'env, T, F>(env: &'env Env, fut: F) -> Result<PromiseRaw<'env, T>>
where
    T: 'static + Send + ToNapiValue,
    F: 'static + Send + std::future::Future<Output = std::result::Result<T, KernelError>>,
{
    env.spawn_future_with_callback(async move { Ok(fut.await) }, |env, result| {
        result.map_err(|err| js_error(env, &err))
    })
}

pub(crate) fn cwd_or_current(cwd: Option<String>) -> PathBuf {
    cwd.map(host_path)
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")))
}

/// An environment as JavaScript holds one (`process.env` is typed with `undefined`
/// values): the variables that have a value.
pub(crate) type JsEnv = HashMap<String, Option<String>>;

pub(crate) fn defined_vars(env: JsEnv) -> HashMap<String, String> {
    env.into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect()
}

/// A path given by the host, made absolute against the host's working directory. The
/// kernel changes directory itself, so a relative path handed to it would be resolved
/// against wherever it happens to be (`sub` became `sub/sub`).
pub(crate) fn host_path(path: String) -> PathBuf {
    std::path::absolute(&path).unwrap_or_else(|_| PathBuf::from(path))
}

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::result::Result<T, KernelError> + Send + 'static,
) -> std::result::Result<T, KernelError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| KernelError::io("background task", std::io::Error::other(e)))?
}

/// The addon's tokio runtime: one worker thread. A cell's round trip then wakes one
/// host thread for the runner's answer instead of handing frames between workers (on a
/// virtual machine every cross-thread wake-up costs tens of microseconds); blocking work
/// goes to `spawn_blocking`'s own threads as before.
#[napi_derive::module_init]
fn init_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("pykernel-io")
        .enable_all()
        .build()
        .expect("tokio runtime");
    let _ = RUNTIME.set(runtime.handle().clone());
    napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
}

/// The most cell source [`eager`] encodes on the JavaScript thread.
pub(crate) const EAGER_MAX_SOURCE: usize = 256 << 10;

static RUNTIME: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();

/// Runs `fut` on the calling JavaScript thread until it first waits, then lets the
/// runtime carry on with it. `fut` must not deliver events to JavaScript before that
/// first wait (a full `onEvent` queue would then wait for this very thread):
/// `Kernel::execute_holding` yields right after writing the request. A cell's request is then written to the kernel's pipe by
/// the call itself: the runner starts on it at once, while the runtime's worker wakes
/// up in parallel instead of in front of it. The first poll never blocks: everything
/// it can wait for (the kernel's turn, a pipe with no room, a reply) is a tokio future,
/// which registers and returns. Wakers registered during it are replaced when the
/// runtime polls the future again, and tokio's primitives keep what happened meanwhile.
///
/// Only for a request of at most [`EAGER_MAX_SOURCE`] bytes of source: encoding and writing
/// a 100 MB cell on the JavaScript thread held its event loop for a quarter of a second,
/// while the head start is worth microseconds; a larger one goes to the runtime at once.
pub(crate) fn eager<F>(
    source_len: usize,
    fut: F,
) -> impl std::future::Future<Output = F::Output> + Send + 'static
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let first = if source_len <= EAGER_MAX_SOURCE {
        first_poll(fut)
    } else {
        FirstPoll::Waiting(Box::pin(fut))
    };
    async move {
        match first {
            FirstPoll::Done(value) => value,
            FirstPoll::Waiting(fut) => fut.await,
        }
    }
}

/// [`eager`] for a task nobody awaits: what is left after its first wait runs on the
/// runtime (nothing is spawned when the first poll finished it).
pub(crate) fn spawn_eager<F>(fut: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    if let (FirstPoll::Waiting(rest), Some(handle)) = (first_poll(fut), RUNTIME.get()) {
        handle.spawn(rest);
    }
}

enum FirstPoll<F: std::future::Future> {
    Done(F::Output),
    Waiting(std::pin::Pin<Box<F>>),
}

fn first_poll<F: std::future::Future>(fut: F) -> FirstPoll<F> {
    let mut fut = Box::pin(fut);
    let Some(handle) = RUNTIME.get() else {
        return FirstPoll::Waiting(fut);
    };
    let _entered = handle.enter();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(value) => FirstPoll::Done(value),
        std::task::Poll::Pending => FirstPoll::Waiting(fut),
    }
}
