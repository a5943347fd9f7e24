//! The `Kernel` class: one Python process.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::agent_text::{artifact_id, artifact_path, with_on_output_error, LiveOutput};

use super::args::{self, convert, convert_optional};
use super::cells::read_cells;
use super::cells::EvalCell;
use super::delivery::{
    settled_callback, with_on_event_error, Callback, EventSink, SettledCallback,
};
use super::options::{bounds, optional_integer, optional_millis, Cancellation, OptionReader};
use super::results::{EvalResult, ExecuteResult, ShutdownResult};
use super::sandbox::{sandbox_config, IsolationInfo, SandboxOptions};
use super::signatures as sig;
use super::{coded_error, cwd_or_current, js_error, promise, rejected};
use crate::error::KernelError;
use crate::eval::executor::{self, EvalOptions};
use crate::start::launcher::Launcher;

use crate::kernel::{
    check_request_id, Bridge, CallOrigin, Caller, ExecuteRequest, Kernel, KernelConfig,
    DEFAULT_LINK_TIMEOUT, DEFAULT_SHUTDOWN_GRACE, DEFAULT_STARTUP_TIMEOUT,
};

#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct KernelOptions {
    /// Working directory; must exist and be a directory. @default process.cwd()
    pub cwd: Option<String>,
    /// The environment to filter. @default process.env
    #[napi(ts_type = "Record<string, string | undefined>")]
    pub base_env: Option<super::JsEnv>,
    /// Host-managed variables, added after filtering.
    pub env: Option<HashMap<String, String>>,
    /// An explicit Python executable; skips discovery.
    pub interpreter: Option<String>,
    /// @default "PYKERNEL_"
    pub env_prefix: Option<String>,
    /// @default "application/x-pykernel-status"
    pub status_mime: Option<String>,
    /// `evaluate` (and the pool) keep the text/plain stand-in shown next to an image,
    /// matplotlib's `<Figure size 640x480 with 1 Axes>`, in `output`. @default false
    pub include_figure_text: Option<bool>,
    /// From 1 to 3,600,000. @default 10000
    pub startup_timeout_ms: Option<f64>,
    /// RLIMIT_AS for the kernel process, in bytes: an integer from 33,554,432 (32 MiB) to
    /// 2^53 - 1.
    pub memory_limit_bytes: Option<f64>,
    /// At most this many processes for the kernel and all it starts; past it the kernel is
    /// killed with them (a fork bomb ends the kernel, not the machine). An integer from 4
    /// (the runner's own threads count) to 4,194,304.
    pub max_processes: Option<f64>,
    /// Runs the kernel's bridge calls (`tool.x()`, `agent()`, ...). Its value, or what its
    /// Promise resolves to, is the reply as JSON (`undefined` is Python's `None`); a throw
    /// or rejection, or a reply JSON cannot hold, is a RuntimeError in the cell.
    #[napi(ts_type = "(call: BridgeCall) => unknown")]
    pub on_call: Option<FunctionRef<Value, Unknown<'static>>>,
    /// With `sessionId`, where the session's kv store lives (`<dir>/kernel-store/`).
    pub artifacts_dir: Option<String>,
    pub session_id: Option<String>,
    /// What the kernel may reach: on by default (its own process tree and /proc, no
    /// signals or ptrace to the host, read-only runner files); `'off'` for hosts that
    /// already sandbox.
    #[napi(ts_type = "'off' | SandboxOptions")]
    pub sandbox: Option<Either<String, SandboxOptions>>,
    /// Start the kernel somewhere else through this argv prefix, which must give a stdio
    /// pipe to the far side: `['docker', 'exec', '-i', 'box']`, `['kubectl', 'exec', '-i',
    /// 'pod', '--']`, `['ssh', '-T', 'host']`, `['bwrap', ...]`. pykernel appends
    /// `<interpreter or python3> -u -c <bootstrap> ...` and sends the runner over the pipe.
    /// `cwd` is then the far side's (its own start directory when unset), `interpreter` is
    /// looked up there, and the local sandbox does not apply.
    pub launcher: Option<Vec<String>>,
    /// Whether the far side runs the launcher's words through a shell, so they are quoted.
    /// @default true when the launcher's program is `ssh`
    pub launcher_shell: Option<bool>,
    /// A launched kernel whose link returns nothing, heartbeats included, for this long is
    /// taken for lost: its launcher is killed and its cell ends with a `KernelDied` error
    /// that says so. From 100 to 3,600,000. @default 10000
    pub link_timeout_ms: Option<f64>,
    /// Keep a launched kernel when its link drops (an ssh client killed, an exec stream
    /// reset, a link silent past `linkTimeoutMs`): the far side holds the kernel and its
    /// output (up to 4 MiB, then the kernel waits) for `graceMs`, while the host brings a
    /// new link through the same launcher; a cell that ran through the drop completes
    /// with its output whole and in order. Only the host that started the kernel can
    /// attach (a secret token, one per link). No new link within `graceMs` ends the
    /// kernel, and its cell's `KernelDied` error says so. Only with `launcher`.
    /// @default off
    pub reattach: Option<ReattachOptions>,
    /// Modules the kernel has imported before its first cell (e.g. `['pandas',
    /// 'matplotlib.pyplot']`), by the runner, outside the user's namespace (no name is
    /// defined). On Linux the kernel is forked from a zygote: a process of this
    /// interpreter, environment and sandbox that imported them once, so every such
    /// kernel starts in milliseconds with them loaded, sharing their memory
    /// copy-on-write (`startMode` says `'zygote'`). Otherwise (`zygote: false`,
    /// `maxProcesses`, a launcher, Python < 3.9, no zygote within `startupTimeoutMs`) the
    /// kernel is spawned and imports them before `start()` resolves. A module that fails
    /// to import is logged and skipped. Dotted module names, at most 64.
    pub preload: Option<Vec<String>>,
    /// Whether a kernel with `preload` may be forked from a zygote. @default true
    pub zygote: Option<bool>,
    /// The agent the prelude's `agent()` asks the host for when the cell names none (its
    /// bridge call's `args.agent`); a pool's `kernel.defaultAgent` is every session's.
    /// Non-empty, one line, at most 128 characters. @default "deep"
    pub default_agent: Option<String>,
    /// Schemes the host reads and writes for a cell, each mapped to a directory of the
    /// host's: with `{ local: '/abs/dir' }`, `read('local://a/b.txt')` and
    /// `write('local://a/b.txt', data)` are that directory's files, opened by the host
    /// beneath it (no absolute path, `..` or symbolic link leads out; at most 8 MiB at
    /// once; made 0600, directories 0700), whether or not the kernel's sandbox reaches it.
    /// Names are lowercase (`[a-z][a-z0-9+.-]*`), not `artifact` or `file`; a relative
    /// directory is taken from the host's working directory. A request's `uriRoots` take
    /// the place of these for their schemes.
    #[napi(ts_type = "Record<string, string>")]
    pub uri_roots: Option<HashMap<String, String>>,
}

/// How a launched kernel outlives a dropped link (`KernelOptions.reattach`).
#[napi(object, object_to_js = false)]
#[derive(Default)]
pub struct ReattachOptions {
    /// How long the far side keeps the kernel for a new link. From 100 to 3,600,000.
    pub grace_ms: f64,
}

impl KernelOptions {
    /// Call on the JavaScript thread: the bridge callback is bound to it here.
    pub(super) fn into_config(self, env: &Env) -> std::result::Result<KernelConfig, KernelError> {
        let launcher = self
            .launcher
            .map(|argv| Launcher::new(argv, self.launcher_shell))
            .transpose()?;
        // A launched kernel's cwd is the far side's: taken as given, none by default.
        let cwd = match (&launcher, self.cwd) {
            (Some(_), cwd) => PathBuf::from(cwd.unwrap_or_default()),
            (None, cwd) => cwd_or_current(cwd),
        };
        let mut config = KernelConfig::new(cwd);
        config.sandbox = sandbox_config(self.sandbox, &config.cwd)?;
        config.launcher = launcher;
        config.preload = super::options::preload_modules(self.preload)?;
        config.zygote = self.zygote.unwrap_or(true);
        config.default_agent = super::options::default_agent(self.default_agent)?;
        config.link_timeout = optional_millis(
            "linkTimeoutMs",
            self.link_timeout_ms,
            (100, bounds::MAX_WAIT_MS),
            DEFAULT_LINK_TIMEOUT,
        )?;
        config.reattach = self
            .reattach
            .map(|r| {
                super::options::millis_in("reattach.graceMs", r.grace_ms, 100, bounds::MAX_WAIT_MS)
            })
            .transpose()?;
        if let Some(on_call) = self.on_call {
            config.bridge = Some(JsBridge::shared(env, &on_call).map_err(|e| {
                KernelError::InvalidArgument {
                    name: "onCall",
                    reason: e.reason.clone(),
                }
            })?);
        }
        config.artifacts_dir = self.artifacts_dir.map(PathBuf::from);
        config.uri_roots = super::options::uri_roots(self.uri_roots)?.unwrap_or_default();
        config.max_processes = optional_integer(
            "maxProcesses",
            self.max_processes,
            (bounds::MIN_PROCESSES, bounds::MAX_PROCESSES),
        )?
        .map(|n| n as usize);
        config.session_id = self.session_id;
        config.base_env = self.base_env.map(super::defined_vars);
        config.env = self.env.unwrap_or_default();
        config.interpreter = self.interpreter;
        config.env_prefix = super::options::env_prefix(self.env_prefix)?;
        config.status_mime = super::options::status_mime(self.status_mime)?;
        config.include_figure_text = self.include_figure_text.unwrap_or(false);
        config.startup_timeout = optional_millis(
            "startupTimeoutMs",
            self.startup_timeout_ms,
            (1, bounds::MAX_WAIT_MS),
            DEFAULT_STARTUP_TIMEOUT,
        )?;
        config.memory_limit_bytes = optional_integer(
            "memoryLimitBytes",
            self.memory_limit_bytes,
            (bounds::MIN_MEMORY_BYTES, bounds::MAX_SAFE_INTEGER),
        )?;
        Ok(config)
    }
}

#[napi(object)]
pub struct ShutdownOptions {
    /// Wait for each step (exit, SIGTERM, SIGKILL), from 0 to 3,600,000. @default 1000
    pub grace_ms: Option<f64>,
}

/// One Python process.
#[napi(js_name = "Kernel")]
pub struct JsKernel {
    inner: Arc<Kernel>,
}

#[napi]
impl JsKernel {
    // Refused: a kernel's start is async. A line comment, so napi generates a bare
    // `constructor()` that `scripts/dts.js` replaces with a private one.
    #[napi(constructor)]
    pub fn new(env: Env) -> Result<Self> {
        Err(coded_error(
            &env,
            "ERR_INVALID_ARG",
            "Kernel has no constructor: use Kernel.start(options)",
        ))
    }

    /// Starts a kernel: resolves Python, spawns the runner, waits until it is ready.
    /// `signal` aborts the start (`ERR_ABORTED`), `deadlineMs` bounds all of it
    /// (`ERR_KERNEL_START_TIMEOUT`); either way no process of it is left.
    #[napi(
        ts_args_type = "options?: KernelStartOptions",
        ts_return_type = "Promise<Kernel>"
    )]
    pub fn start<'env>(
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, JsKernel>> {
        super::init_tracing();
        super::remove_private_tmps_on_exit(env);
        let object: Option<Object> = match args::check(env, sig::KERNEL_START, &[options])
            .and_then(|()| convert_optional("options", options))
        {
            Ok(object) => object,
            Err(err) => return rejected(env, err),
        };
        let reader = OptionReader::new(env, object.as_ref());
        let parsed = (|| {
            let kernel_options: Option<KernelOptions> = convert_optional("options", options)?;
            let config = kernel_options.unwrap_or_default().into_config(env)?;
            if config.reattach.is_some() && config.launcher.is_none() {
                return Err(KernelError::InvalidArgument {
                    name: "reattach",
                    reason: "keeps a launched kernel's link; give `launcher` too".into(),
                });
            }
            let deadline = reader.timeout_millis("deadlineMs", bounds::MAX_WAIT_MS)?;
            Ok::<_, KernelError>((config, deadline, reader.signal()?))
        })();
        let (config, deadline, cancellation) = match parsed {
            Ok(parsed) => parsed,
            Err(err) => return rejected(env, err),
        };
        let (abort, cancellation) = cancellation.split();
        env.spawn_future_with_callback(
            async move { Ok(Kernel::start_bounded(config, abort, deadline).await) },
            move |env, started| {
                cancellation.release(env);
                started
                    .map(|inner| JsKernel { inner })
                    .map_err(|err| js_error(env, &err))
            },
        )
    }

    #[napi(getter)]
    pub fn pid(&self) -> u32 {
        self.inner.pid()
    }

    /// How the kernel's process was made: `'spawn'` (a fresh interpreter), `'zygote'`
    /// (forked from a zygote that had imported its `preload`) or `'launcher'`.
    #[napi(getter, ts_return_type = "'spawn' | 'zygote' | 'launcher'")]
    pub fn start_mode(&self) -> String {
        self.inner.start_mode().as_str().to_string()
    }

    /// The protections this kernel runs under, and the defaults it lacks.
    #[napi(getter)]
    pub fn isolation(&self) -> IsolationInfo {
        self.inner.isolation().into()
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

    /// Lines from the kernel's protocol pipe that reached no request: frames for an
    /// unknown or finished request id (forged by code in the kernel, or output of a thread
    /// that outlived its cell) and lines that are not frames. They change nothing.
    #[napi(getter)]
    pub fn dropped_frames(&self) -> f64 {
        self.inner.dropped_frames() as f64
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
        code: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, ExecuteResult>> {
        let object: Option<Object> =
            match args::check(env, sig::KERNEL_EXECUTE, &[Some(code), options])
                .and_then(|()| convert_optional("options", options))
            {
                Ok(object) => object,
                Err(err) => return rejected(env, err),
            };
        let reader = OptionReader::new(env, object.as_ref());
        let parsed = convert("code", code)
            .and_then(|code| parse_execute_options(&reader, code))
            .and_then(|(mut request, on_event, cancellation)| {
                request.caller = bare_caller(&self.inner, request_id(&reader)?);
                Ok((request, on_event, cancellation))
            });
        let (request, on_event, cancellation) = match parsed {
            Ok(parsed) => parsed,
            Err(err) => return rejected(env, err),
        };
        let (abort, cancellation) = cancellation.split();
        let kernel = self.inner.clone();
        // The place in line is taken now, so calls run in the order JavaScript made them.
        let place = kernel.queue();
        let source_len = request.code.len();
        env.spawn_future_with_callback(
            super::eager(source_len, async move {
                let mut sink = EventSink::new(on_event);
                let outcome = kernel
                    .execute_in_turn(place, request, abort, |event| sink.push(event.into_json()))
                    .await;
                let on_event_error = sink.finish().await;
                Ok(outcome.map(|o| (o, on_event_error)))
            }),
            move |env, outcome| {
                cancellation.release(env);
                outcome
                    .map(|(mut o, on_event_error)| {
                        o.note_dropped();
                        ExecuteResult {
                            on_event_error,
                            ..ExecuteResult::from(o)
                        }
                    })
                    .map_err(|err| js_error(env, &err))
            },
        )
    }

    /// Runs cells in order (stopping at the first that fails) and returns the agent-ready
    /// result: sanitized, annotated, truncated `output`, plus images, JSON and statuses.
    #[napi(
        ts_args_type = "cells: EvalCell[], options?: EvaluateOptions",
        ts_return_type = "Promise<EvalResult>"
    )]
    pub fn evaluate<'env>(
        &self,
        env: &'env Env,
        cells: Unknown<'env>,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, EvalResult>> {
        let object: Option<Object> =
            match args::check(env, sig::KERNEL_EVALUATE, &[Some(cells), options])
                .and_then(|()| convert_optional("options", options))
            {
                Ok(object) => object,
                Err(err) => return rejected(env, err),
            };
        let reader = OptionReader::new(env, object.as_ref());
        let parsed = (|| {
            let cells: Vec<EvalCell> = convert("cells", cells)?;
            let artifacts_dir: Option<String> = reader.get("artifactsDir", "a string")?;
            let on_event = reader.callback::<FnArgs<(u32, Value)>>("onEvent")?;
            let live = LiveOutput::read(&reader)?;
            let (cells, notices) = read_cells(cells)?;
            if cells.iter().any(|c| c.reset) {
                return Err(KernelError::InvalidArgument {
                    name: "cells[].reset",
                    reason: "a Kernel cannot replace itself; `reset` applies to KernelPool.execute (start a new Kernel instead)".into(),
                });
            }
            let env_changes = reader
                .get::<HashMap<String, Option<String>>>("env", "an object of strings or nulls")?;
            let eval = EvalOptions {
                timeout: reader.timeout_millis("timeoutMs", bounds::MAX_LONG_MS)?,
                artifacts_dir: artifacts_dir.map(PathBuf::from),
                status_mime: self.inner.status_mime().to_string(),
                artifact_id: artifact_id(&reader)?,
                include_figure_text: reader
                    .get("includeFigureText", "a boolean")?
                    .unwrap_or(self.inner.include_figure_text()),
                on_output: live.sender(),
                annotations: notices,
                env: env_changes.map(|vars| vars.into_iter().collect()),
                artifact_path: artifact_path(&reader)?,
                cwd: request_cwd(&reader)?,
                caller: bare_caller(&self.inner, request_id(&reader)?),
                uri_roots: super::options::request_uri_roots(&reader)?,
                ..Default::default()
            };
            Ok::<_, KernelError>((cells, eval, on_event, live, reader.signal()?))
        })();
        let (cells, mut eval, on_event, live, cancellation) = match parsed {
            Ok(parsed) => parsed,
            Err(err) => return rejected(env, err),
        };
        let (abort, cancellation) = cancellation.split();
        eval.abort = abort;
        let kernel = self.inner.clone();
        let place = kernel.queue();
        let source_len = cells.iter().map(|c| c.code.len()).sum();
        env.spawn_future_with_callback(
            super::eager(source_len, async move {
                let mut sink = EventSink::new(on_event);
                let turn = place.turn().await;
                let result = executor::evaluate(&kernel, &turn, cells, eval, |index, event| {
                    sink.push((index as u32, event.into_json()).into())
                })
                .await;
                drop(turn);
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

    /// SIGINT to the kernel's process group (the cell and its shell children). A cell
    /// that is still being handed to the runner is stopped as it starts.
    #[napi]
    pub fn interrupt(&self) {
        let kernel = self.inner.clone();
        super::spawn_eager(async move { kernel.interrupt_running().await });
    }

    /// exit -> grace -> SIGTERM -> grace -> SIGKILL; `confirmed` once the process is reaped.
    #[napi(
        ts_args_type = "options?: ShutdownOptions | undefined | null",
        ts_return_type = "Promise<ShutdownResult>"
    )]
    pub fn shutdown<'env>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'env>>,
    ) -> Result<PromiseRaw<'env, ShutdownResult>> {
        let grace = args::check(env, sig::KERNEL_SHUTDOWN, &[options])
            .and_then(|()| convert_optional::<ShutdownOptions>("options", options))
            .and_then(|options| {
                optional_millis(
                    "graceMs",
                    options.and_then(|o| o.grace_ms),
                    (0, bounds::MAX_GRACE_MS),
                    DEFAULT_SHUTDOWN_GRACE,
                )
            });
        let grace = match grace {
            Ok(grace) => grace,
            Err(err) => return rejected(env, err),
        };
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

    /// Whether `code`, a REPL's lines so far joined by `\n`, is a cell to run, as Python's
    /// `codeop` tells `code.InteractiveConsole`, after the kernel's input rules (magics,
    /// `!cmd`, `obj?`): `'complete'`, `'incomplete'` (more lines: an open bracket or
    /// string, a block without its closing blank line, a `%%` cell's body) or
    /// `'invalid'` (run it anyway, so Python reports the error). Nothing runs. Called
    /// while a cell runs, it is answered after that cell, in call order.
    #[napi(
        ts_args_type = "code: string",
        ts_return_type = "Promise<'complete' | 'incomplete' | 'invalid'>"
    )]
    pub fn is_complete<'env>(
        &self,
        env: &'env Env,
        code: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, String>> {
        let code: String = match args::check(env, sig::KERNEL_IS_COMPLETE, &[Some(code)])
            .and_then(|()| convert("code", code))
        {
            Ok(code) => code,
            Err(err) => return rejected(env, err),
        };
        let kernel = self.inner.clone();
        let place = kernel.queue();
        promise(env, async move {
            let status = kernel.is_complete_in_turn(place, code).await?;
            Ok(status.as_str().to_string())
        })
    }
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| sig.to_string())
}

/// The host side of the bridge: a JavaScript `onCall` run on the JavaScript thread.
struct JsBridge {
    /// `onCall` behind [`SETTLE_ON_CALL`]. Weak: a kernel waiting for cells must not keep
    /// the host's event loop alive.
    on_call: Arc<SettledCallback>,
}

/// Wraps an `onCall` so that whatever it does settles one Promise of the reply's JSON
/// text: a synchronous throw or a rejection rejects with its message; a plain value or a
/// thenable is taken as `Promise.resolve` would; `undefined` is `null`; a reply that
/// `JSON.stringify` refuses (a cycle, a BigInt, a throwing `toJSON`) or drops (a function,
/// a symbol) rejects naming the call. Plain JavaScript, so each of these is settled by the
/// language's own rules rather than by a conversion that could throw inside the addon
/// (which would end the host process).
const SETTLE_ON_CALL: &str = r#"(function settleOnCall(onCall) {
  const describe = (e) => {
    try { return e instanceof Error ? String(e.message) : String(e) } catch { return 'an unprintable value' }
  }
  return function bridgeCall(call) {
    const name = call.name
    return new Promise((resolve) => resolve(onCall(call))).then(
      (value) => {
        if (value === undefined) return 'null'
        let json
        try { json = JSON.stringify(value) } catch (e) {
          throw new Error(`onCall's reply to '${name}' cannot become JSON: ${describe(e).split('\n')[0]}`)
        }
        if (json === undefined) throw new Error(`onCall's reply to '${name}' cannot become JSON: a ${typeof value}`)
        return json
      },
      (e) => { throw new Error(describe(e)) })
  }
})"#;

impl JsBridge {
    fn shared(
        env: &Env,
        on_call: &FunctionRef<Value, Unknown<'static>>,
    ) -> Result<Arc<dyn Bridge>> {
        Ok(Arc::new(JsBridge {
            on_call: settled_callback(env, on_call, SETTLE_ON_CALL)?,
        }))
    }
}

impl Bridge for JsBridge {
    fn call(
        &self,
        name: String,
        args: Value,
        origin: CallOrigin,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = std::result::Result<Value, String>> + Send>,
    > {
        let mut call = serde_json::json!({ "name": name, "args": args, "runId": origin.run_id });
        // Left out when unknown, as `BridgeCall` declares them optional.
        for (field, value) in [
            ("sessionId", origin.session_id),
            ("owner", origin.owner),
            ("requestId", origin.request_id),
        ] {
            if let Some(value) = value {
                call[field] = Value::String(value);
            }
        }
        let on_call = self.on_call.clone();
        Box::pin(async move {
            // `_catch`: should the wrapper itself ever throw, the cell gets the error
            // instead of the host ending.
            let json = on_call
                .call_async_catch(call)
                .await
                .map_err(|e| e.reason.clone())?
                .await
                .map_err(|e| e.reason.clone())?;
            serde_json::from_str(&json)
                .map_err(|e| format!("onCall's reply to '{name}' could not be read: {e}"))
        })
    }
}

/// Reads `ExecuteOptions`.
fn parse_execute_options(
    options: &OptionReader,
    code: String,
) -> std::result::Result<(ExecuteRequest, Option<Callback<Value>>, Cancellation), KernelError> {
    let env_changes =
        options.get::<HashMap<String, Option<String>>>("env", "an object of strings or nulls")?;
    let request = ExecuteRequest {
        code,
        silent: options.get("silent", "a boolean")?.unwrap_or(false),
        store_history: options.get("storeHistory", "a boolean")?.unwrap_or(true),
        cwd: request_cwd(options)?,
        env: env_changes.map(|m| m.into_iter().collect::<BTreeMap<_, _>>()),
        timeout: options.timeout_millis("timeoutMs", bounds::MAX_LONG_MS)?,
        max_captured_bytes: Some(captured_bytes(options)?),
        caller: None,
        uri_roots: super::options::request_uri_roots(options)?,
        // `execute` runs one cell, never again elsewhere: a death is its last event.
        hold_death: false,
    };
    Ok((request, options.callback("onEvent")?, options.signal()?))
}

/// A request's `cwd`, a relative one taken from the host's working directory.
fn request_cwd(options: &OptionReader) -> std::result::Result<Option<String>, KernelError> {
    Ok(options
        .get::<String>("cwd", "a string")?
        .map(|cwd| super::host_path(cwd).to_string_lossy().into_owned()))
}

/// The `requestId` option, checked: told to `onCall` with each bridge call of the request.
pub(super) fn request_id(
    options: &OptionReader,
) -> std::result::Result<Option<String>, KernelError> {
    let id: Option<String> = options.get("requestId", "a string")?;
    if let Some(id) = &id {
        check_request_id(id).map_err(|reason| KernelError::InvalidArgument {
            name: "requestId",
            reason,
        })?;
    }
    Ok(id)
}

/// Who a bare kernel's request runs for: the kernel's `sessionId`, with the request's id
/// when it has one (`None` keeps the kernel's default caller).
fn bare_caller(kernel: &Kernel, request_id: Option<String>) -> Option<Caller> {
    request_id.map(|id| Caller {
        session_id: kernel.session_id().map(str::to_string),
        owner: None,
        request_id: Some(id),
    })
}

/// The most of stdout (and of stderr) one `execute` result keeps: beyond it the text is
/// still streamed to `onEvent`, and the result says how much it left out. JavaScript
/// cannot hold a string past about 512 MiB; the default stays well under.
const DEFAULT_CAPTURED_BYTES: usize = 128 << 20;

fn captured_bytes(options: &OptionReader) -> std::result::Result<usize, KernelError> {
    let asked = options.get::<f64>("maxCapturedBytes", "a number")?;
    let range = (0, 2 * DEFAULT_CAPTURED_BYTES as u64);
    Ok(
        super::options::optional_integer("maxCapturedBytes", asked, range)?
            .map_or(DEFAULT_CAPTURED_BYTES, |n| n as usize),
    )
}
