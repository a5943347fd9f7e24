//! Starting a kernel: resolving its Python, spawning it (or forking it from a zygote,
//! or launching it elsewhere), assembling the connection over the process, and the
//! `init` handshake.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, timeout, Instant};

use super::config::{AbortHandle, KernelConfig, StartMode, DEFAULT_SHUTDOWN_GRACE, PRELOAD_WAIT};
use super::connection::{
    drain_stderr, open_route, read_frames, widen_pipe, FrameWriter, LinkClock, Pipes, Routes,
    StdPipes, StreamReport,
};
use super::end_cause::{EndCause, Ending};
use super::far_side::{signal_far_side, watch_link, FarSide};
use super::host_calls::KvHome;
use super::Kernel;
use crate::error::{KernelError, Result};
use crate::kernel::fifo::Fifo;
use crate::process::exit::ExitInfo;
use crate::process::limit::Census;
use crate::process::pids_cgroup::PidsCgroup;
use crate::process::reaper::KernelProcess;
use crate::sandbox::{Isolation, Plan, Reach, SandboxConfig, Target};
use crate::start::command::{build_command, LaunchSpec};
use crate::start::env::EnvFilter;
use crate::start::launcher::{Launcher, PAYLOAD};
use crate::start::private_tmp::PrivateTmp;
use crate::start::python::{self, ResolveOptions, Resolved};
use crate::start::runner_files;
use crate::wire::protocol::{HostFrame, RunnerFrame};

pub(super) const INIT_ID: &str = "init";

impl Kernel {
    /// Resolves Python, spawns the runner and waits for it to be ready.
    pub async fn start(config: KernelConfig) -> Result<Arc<Kernel>> {
        config.prepare_artifacts_dir()?;
        let kernel = Kernel::spawn(&config).await?;
        kernel.initialize(&config).await?;
        kernel.import_preload(&config).await?;
        Ok(kernel)
    }

    /// [`Kernel::start`], given up when `abort` fires (`ERR_ABORTED`) or `deadline`, which
    /// covers all of the start, passes (`ERR_KERNEL_START_TIMEOUT`). A process already
    /// spawned is killed and reaped before the error returns.
    pub async fn start_bounded(
        config: KernelConfig,
        abort: Option<Arc<AbortHandle>>,
        deadline: Option<Duration>,
    ) -> Result<Arc<Kernel>> {
        let deadline_at = deadline.map(|d| Instant::now() + d);
        let given_up = || async {
            tokio::select! {
                biased;
                _ = async {
                    match &abort {
                        Some(abort) => abort.aborted().await,
                        None => std::future::pending().await,
                    }
                } => KernelError::StartAborted,
                _ = async {
                    match deadline_at {
                        Some(at) => sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                } => KernelError::StartDeadline {
                    deadline_ms: deadline.unwrap_or_default().as_millis() as u64,
                },
            }
        };
        let mut config = config;
        if let Some(deadline) = deadline {
            // Bounds the steps of the start that run processes of their own (the bytecode
            // compile) by the deadline too.
            config.startup_timeout = config.startup_timeout.min(deadline);
        }
        config.prepare_artifacts_dir()?;
        let spawning = Kernel::spawn(&config);
        tokio::pin!(spawning);
        let kernel = tokio::select! {
            biased;
            why = given_up() => {
                // The spawn is let finish (its steps are bounded by the start-up timeout):
                // dropped, it could leave its compile step's process running.
                if let Ok(kernel) = spawning.await {
                    kernel.kill_group(Signal::SIGKILL);
                    kernel.wait_for_exit(Duration::from_secs(2)).await;
                }
                return Err(why);
            }
            kernel = &mut spawning => kernel?,
        };
        tokio::select! {
            biased;
            why = given_up() => {
                kernel.kill_group(Signal::SIGKILL);
                kernel.wait_for_exit(Duration::from_secs(2)).await;
                Err(why)
            }
            ready = async {
                kernel.initialize(&config).await?;
                kernel.import_preload(&config).await
            } => ready.map(|()| kernel),
        }
    }

    /// What of `config.preload` the kernel was not forked with: all of it for a spawned
    /// kernel, the modules its zygote could not import for a forked one (a module in the
    /// kernel's cwd is not on the zygote's path). A module that fails is logged; a
    /// kernel that dies or hangs on its imports fails the start.
    pub async fn import_preload(&self, config: &KernelConfig) -> Result<()> {
        let missing = self.not_preloaded(&config.preload);
        if missing.is_empty() {
            return Ok(());
        }
        match self.preload(&missing, PRELOAD_WAIT).await {
            Ok(errors) => {
                for (module, error) in errors {
                    tracing::warn!(module = %module, "the kernel could not preload it: {error}");
                }
                Ok(())
            }
            Err(e) => {
                self.kill_group(Signal::SIGKILL);
                Err(e)
            }
        }
    }

    /// The interpreter `config` would run, as [`Kernel::spawn`] resolves it.
    pub async fn resolve(config: &KernelConfig) -> Result<Resolved> {
        let resolve_opts = ResolveOptions {
            cwd: config.cwd.clone(),
            interpreter: config.interpreter.clone(),
            base_env: config.base_env_or_host(),
            env_prefix: config.env_prefix.clone(),
            sandboxed: !config.sandbox.is_off(),
        };
        tokio::task::spawn_blocking(move || python::resolve(&resolve_opts).map(|(r, _)| r))
            .await
            .map_err(|e| KernelError::io("resolving Python", std::io::Error::other(e)))?
    }

    /// Starts the Python process, which then waits for [`Kernel::initialize`]. Most of a
    /// kernel's start-up is here, so a pool can keep a spawned spare ready.
    pub async fn spawn(config: &KernelConfig) -> Result<Arc<Kernel>> {
        if let Some(launcher) = &config.launcher {
            return Kernel::spawn_launched(config, launcher).await;
        }
        python::check_cwd(&config.cwd)?;
        let base_env = config.base_env_or_host();
        let resolved = Kernel::resolve(config).await?;
        let runner_dir = config
            .runner_dir
            .clone()
            .unwrap_or_else(runner_files::default_base_dir);
        let files = tokio::task::spawn_blocking(move || runner_files::materialize(&runner_dir))
            .await
            .map_err(|e| KernelError::io("writing the runner", std::io::Error::other(e)))??;

        let mut env = EnvFilter::new(&config.env_prefix).filter(&base_env);
        python::apply_to_env(&resolved, &mut env);
        env.extend(config.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        // Only the host makes a zygote (a runner given this would wait for fork requests).
        env.remove("PYKERNEL_ZYGOTE");
        if config.memory_limit_bytes.is_some() {
            // RLIMIT_AS counts address space, and glibc reserves a 64 MiB malloc arena per
            // thread: an idle kernel would take ~300 MiB of the limit before a cell runs.
            env.entry("MALLOC_ARENA_MAX".into())
                .or_insert_with(|| "2".into());
        }
        check_variables(&env, config)?;
        let trace = ipc_trace(&base_env, config);

        let bytecode = crate::start::bytecode::for_interpreter(
            &resolved.path,
            &files,
            &env,
            &config.sandbox,
            config.startup_timeout,
        );
        if let Some(bundle) = &bytecode {
            env.insert(
                crate::start::bytecode::ENV_VAR.into(),
                format!("fd:{}", bundle.fd()),
            );
        }
        let private_tmp = if config.sandbox.is_off() {
            None
        } else {
            Some(
                tokio::task::spawn_blocking(PrivateTmp::create)
                    .await
                    .map_err(|e| {
                        KernelError::io("making the kernel's private tmp", std::io::Error::other(e))
                    })?
                    .map_err(|e| KernelError::io("making the kernel's private tmp", e))?,
            )
        };
        let (sandbox, isolation) = {
            let target = Target {
                runner_base: Some(&files.base),
                private_tmp: private_tmp.as_ref().map(|d| d.path()),
                keep: kept_for_kernel(&resolved, &env),
                hide: config.artifacts_dir.iter().cloned().collect(),
                memory_limit_bytes: config.memory_limit_bytes,
                ..Target::new(&config.cwd)
            };
            Plan::prepare(&config.sandbox, &target)?
        };
        if let Some(tmp) = &private_tmp {
            let inside = sandbox.tmp_inside(tmp.path()).display().to_string();
            for key in ["TMPDIR", "TMP", "TEMP"] {
                env.insert(key.into(), inside.clone());
            }
        }

        #[cfg(target_os = "linux")]
        let private_tmp = match Kernel::fork_from_zygote(config, &resolved, &files, &env, &sandbox)
            .await
        {
            Some((forked, preloaded)) => {
                let pipes = StdPipes(Some(forked.stdin), Some(forked.stdout), Some(forked.stderr))
                    .open(&forked.process)?;
                return Ok(Kernel::assemble(
                    config,
                    Parts {
                        process: forked.process,
                        exit: forked.exit,
                        pipes,
                        trace,
                        isolation,
                        private_tmp,
                        reach: sandbox.reach().clone(),
                        resolved,
                        prelude: files.prelude,
                        ending: Arc::default(),
                        far: None,
                        start_mode: StartMode::Zygote,
                        preloaded,
                    },
                ));
            }
            None => private_tmp,
        };

        // In a PID namespace the kernel's init is one more process of its own.
        let max_processes = config
            .max_processes
            .map(|n| n + usize::from(sandbox.spawns_through_launcher()));
        let cgroup = max_processes.and_then(|n| PidsCgroup::create(n, &base_env));
        let mut command = build_command(&LaunchSpec {
            python: &resolved.path,
            runner: &files.runner,
            cwd: &config.cwd,
            env: &env,
            memory_limit_bytes: config.memory_limit_bytes,
            cgroup: cgroup.as_ref(),
            sandbox: &sandbox,
            inherit: bytecode.as_ref().map(|b| b.fd()),
        });
        sandbox
            .set_command(&command)
            .map_err(|e| KernelError::io("preparing the kernel's command", e))?;
        let mut child = command.spawn().map_err(|e| {
            KernelError::PythonInvalid {
                path: resolved.path.display().to_string(),
                reason: if sandbox.spawns_through_launcher() {
                    format!("cannot start it in its sandbox: {e} (`sandbox: 'off'` tells whether the sandbox is the cause)")
                } else {
                    format!("cannot start it: {e}")
                },
            }
        })?;
        let pid = sandbox
            .kernel_pid(child.id())
            .map_err(|e| KernelError::PythonInvalid {
                path: resolved.path.display().to_string(),
                reason: format!("cannot start it in its sandbox: {e}"),
            })?;
        let pipes = Pipes::take(&mut child);
        if sandbox.spawns_through_launcher() {
            // The launcher exits as soon as it has made the kernel; it is reaped off the
            // start's path (tearing down its copy of the host's memory takes a while).
            std::thread::spawn(move || child.wait());
        }
        drop(command);
        let (process, exit) = KernelProcess::watch(pid, sandbox.spawns_through_launcher());
        let pipes = pipes.open(&process)?;
        let ending = Arc::new(Ending::default());
        if let Some(limit) = max_processes {
            let census = match cgroup {
                Some(cgroup) => {
                    Census::Cgroup(cgroup, sandbox.spawns_through_launcher().then_some(pid))
                }
                None if sandbox.spawns_through_launcher() => Census::Namespace(pid),
                None => Census::Session(pid),
            };
            // The watcher owns the cgroup from here and removes it once the kernel is
            // reaped, whoever ends the kernel and whenever this object is dropped.
            tokio::spawn(crate::process::limit::watch_processes(
                process.clone(),
                census,
                limit,
                exit.clone(),
                {
                    let (ending, limit) = (ending.clone(), config.max_processes.unwrap_or(limit));
                    move || ending.set(EndCause::ProcessLimit { limit })
                },
            ));
        }
        Ok(Kernel::assemble(
            config,
            Parts {
                process,
                exit,
                pipes,
                trace,
                isolation,
                private_tmp,
                reach: sandbox.reach().clone(),
                resolved,
                prelude: files.prelude,
                ending,
                far: None,
                start_mode: StartMode::Spawn,
                preloaded: Vec::new(),
            },
        ))
    }

    /// A kernel forked from the zygote for `config`'s settings, when `config` has a
    /// `preload` and nothing the zygote cannot give (a process limit, Python < 3.9);
    /// `None` (the caller spawns one) when there is no zygote or it failed.
    #[cfg(target_os = "linux")]
    pub(super) async fn fork_from_zygote(
        config: &KernelConfig,
        resolved: &Resolved,
        files: &runner_files::RunnerFiles,
        env: &BTreeMap<String, String>,
        sandbox: &Plan,
    ) -> Option<(crate::start::zygote::Forked, Vec<String>)> {
        use crate::start::zygote::{ForkRequest, ZygoteKey, ZygoteStart};
        let forkable = !config.preload.is_empty()
            && config.zygote
            && config.max_processes.is_none()
            && python::version_at_least(&resolved.version, (3, 9));
        if !forkable {
            return None;
        }
        let start = ZygoteStart {
            key: ZygoteKey::new(
                &resolved.path,
                &files.runner,
                env,
                &config.sandbox,
                &config.preload,
            ),
            runner_base: files.base.clone(),
            wait: PRELOAD_WAIT,
        };
        // Once more when the zygote turns out to have died (killed, out of memory): the
        // registry then starts a new one.
        for _ in 0..2 {
            let zygote =
                crate::start::zygote::for_kernel(start.clone(), config.startup_timeout).await?;
            let request = ForkRequest {
                env,
                cwd: &config.cwd,
                memory_limit_bytes: config.memory_limit_bytes,
                landlock: sandbox.landlock_fd(),
                sandbox: sandbox.for_forked_kernel(),
            };
            match zygote.fork(request, config.startup_timeout).await {
                Ok(forked) => return Some((forked, zygote.imported())),
                Err(e) if zygote.is_dead() => {
                    tracing::info!("the zygote had ended ({e}); trying a new one");
                }
                Err(e) => {
                    tracing::warn!("this kernel is spawned, not forked: {e}");
                    return None;
                }
            }
        }
        None
    }

    /// [`Kernel::spawn`] through `config.launcher`: the far side's Python is not resolved
    /// or probed here, and the runner travels over the pipe (see `launcher.rs`).
    pub(super) async fn spawn_launched(
        config: &KernelConfig,
        launcher: &Launcher,
    ) -> Result<Arc<Kernel>> {
        if config.max_processes.is_some() {
            return Err(KernelError::InvalidArgument {
                name: "maxProcesses",
                reason: "cannot be counted through a launcher; limit processes where the kernel runs (docker run --pids-limit, a pod's pids limit)".into(),
            });
        }
        if !config.sandbox.is_off() && config.sandbox != SandboxConfig::default() {
            return Err(KernelError::InvalidArgument {
                name: "sandbox",
                reason: "applies to local kernels only; a launched kernel is isolated by what runs it (the container, the remote host, bwrap)".into(),
            });
        }
        let base_env = config.base_env_or_host();
        // The launcher runs here with the kernel's filtered variables (a local launcher
        // hands them on to the kernel, and its environ stays readable to the kernel as
        // its parent's). Only ssh gets the agent's socket: it authenticates with it, runs
        // nothing of the kernel's here, and the far side's supervisor drops a forwarded
        // one.
        let mut env = EnvFilter::new(&config.env_prefix).filter(&base_env);
        if let Some(sock) = base_env.get("SSH_AUTH_SOCK").filter(|_| launcher.is_ssh()) {
            env.insert("SSH_AUTH_SOCK".into(), sock.clone());
        }
        check_variables(&env, config)?;
        let trace = ipc_trace(&base_env, config);
        let interpreter = config
            .interpreter
            .clone()
            .unwrap_or_else(|| "python3".into());
        let mut command = launcher.command(
            &interpreter,
            config.memory_limit_bytes,
            DEFAULT_SHUTDOWN_GRACE,
            &env,
        );
        let mut child = command.spawn().map_err(|e| KernelError::Launcher {
            launcher: launcher.describe(),
            reason: e.to_string(),
        })?;
        let pid = child.id();
        let pipes = Pipes::take(&mut child);
        drop(child); // reaped by the watcher below
        let (process, exit) = KernelProcess::watch(pid, false);
        let pipes = pipes.open(&process)?;
        let kernel = Kernel::assemble(
            config,
            Parts {
                process,
                exit,
                pipes,
                trace,
                isolation: Isolation {
                    mode: "launcher".into(),
                    enforced: Vec::new(),
                    missing: Vec::new(),
                },
                private_tmp: None,
                reach: Reach::default(),
                resolved: Resolved {
                    path: PathBuf::from(&interpreter),
                    version: String::new(),
                    source: python::Source::Explicit,
                    venv: None,
                },
                // Relative: the runner's directory on the far side is its own.
                prelude: PathBuf::from("prelude.py"),
                ending: Arc::default(),
                far: Some(launcher.clone()),
                start_mode: StartMode::Launcher,
                preloaded: Vec::new(),
            },
        );
        Ok(kernel)
    }

    /// A launched kernel's runner, sent ahead of the protocol by its first `initialize`
    /// (where an abort or a deadline of the start can cut it short), and from then on its
    /// link watched. A far side that is not there (no Python, a refused login) stops
    /// reading; the init that follows then reports its stderr.
    pub(super) async fn ship_runner(&self, config: &KernelConfig) {
        let Some(far) = &self.far else { return };
        if far.shipped.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = timeout(
            config.startup_timeout,
            self.writer.send_bytes(&PAYLOAD.bytes),
        )
        .await;
        // The link is judged from now: connecting and sending the runner took their time.
        if let Some(link) = &self.stream_report.link {
            link.heard();
        }
        tokio::spawn(watch_link(
            self.writer.clone(),
            self.stream_report.clone(),
            self.ending.clone(),
            far.launcher.describe(),
            self.process.clone(),
            self.exit.clone(),
            far.link_timeout,
        ));
    }

    /// The kernel object over a started process: its reader, stderr drain and writer.
    pub(super) fn assemble(config: &KernelConfig, parts: Parts) -> Arc<Kernel> {
        let Parts {
            process,
            exit,
            pipes,
            trace,
            isolation,
            private_tmp,
            reach,
            resolved,
            prelude,
            ending,
            far,
            start_mode,
            preloaded,
        } = parts;
        let pid = process.pid();
        let tmp_removed = private_tmp.map(|tmp| tmp.remove_when_reaped(exit.clone()));
        let Pipes {
            stdin,
            stdout,
            stderr,
        } = pipes;
        widen_pipe(&stdout);
        let routes: Routes = Arc::default();
        let stream_report = Arc::new(StreamReport {
            link: far.is_some().then(LinkClock::new),
            ..StreamReport::default()
        });
        tokio::spawn(read_frames(
            stdout,
            routes.clone(),
            stream_report.clone(),
            ending.clone(),
            process.clone(),
            trace,
        ));
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let (stderr_closed_tx, stderr_closed) = watch::channel(false);
        tokio::spawn(drain_stderr(
            stderr,
            stderr_tail.clone(),
            stderr_closed_tx,
            trace,
        ));
        let writer = Arc::new(FrameWriter {
            stdin: tokio::sync::Mutex::new(stdin),
            pid,
            trace,
        });
        let link_timeout = config.link_timeout;
        let far = far.map(|launcher| {
            let (signals, rx) = mpsc::unbounded_channel();
            tokio::spawn(signal_far_side(
                rx,
                writer.clone(),
                process.clone(),
                exit.clone(),
            ));
            FarSide {
                launcher,
                link_timeout,
                signals,
                ready: std::sync::OnceLock::new(),
                shipped: AtomicBool::new(false),
            }
        });
        Arc::new(Kernel {
            pid,
            process,
            isolation,
            isolation_reported: AtomicBool::new(false),
            resolved,
            prelude,
            status_mime: config.status_mime.clone(),
            include_figure_text: config.include_figure_text,
            artifacts_dir: config.artifacts_dir.clone(),
            writer,
            routes,
            exit,
            stderr_tail,
            stderr_closed,
            queue: Fifo::new(),
            execution_count: AtomicU32::new(0),
            next_id: AtomicU64::new(1),
            running: Mutex::new(None),
            initialized: Mutex::new(None),
            bridge: config.bridge.clone(),
            session_id: config.session_id.clone(),
            ending,
            stream_report,
            far,
            kv_home: Mutex::new(None),
            tmp_removed,
            reach,
            start_mode,
            preloaded,
        })
    }

    /// Sends `init` (cwd, variables, prelude, kv store) and waits for `ready`, bounded by
    /// the start-up timeout; on failure the process is killed and the error says why.
    /// A kernel may be initialized again (a pool's spare, readied with the pool's
    /// defaults, then claimed by a session with another cwd or kv store): the runner
    /// then makes a fresh namespace and runs the prelude again.
    pub async fn initialize(&self, config: &KernelConfig) -> Result<()> {
        self.ship_runner(config).await;
        let (mut init_rx, init_route) = open_route(&self.routes, INIT_ID);
        let init = self.init_frame(config);
        let encoded = init.encode();
        // A failed write means the runner is already gone; the wait below reports why.
        let _ = self.send(&init).await;
        let ready = timeout(config.startup_timeout, async {
            while let Some(frame) = init_rx.recv().await {
                if let RunnerFrame::Ready {
                    python, executable, ..
                } = frame
                {
                    if let Some(far) = &self.far {
                        let _ = far.ready.set((executable, python));
                    }
                    return true;
                }
            }
            false
        })
        .await;
        drop(init_route);
        match ready {
            Ok(true) => {
                tracing::info!(pid = self.pid, interpreter = %self.interpreter(), "kernel started");
                *self.initialized.lock().unwrap() = Some(encoded);
                *self.kv_home.lock().unwrap() = match (&config.artifacts_dir, &config.session_id) {
                    (Some(dir), Some(session)) => Some(KvHome {
                        artifacts_dir: dir.clone(),
                        prefix: crate::store::kv::file_prefix(&config.env_prefix),
                        session_id: session.clone(),
                    }),
                    _ => None,
                };
                Ok(())
            }
            Ok(false) => {
                let exit = self.wait_for_exit(Duration::from_secs(2)).await;
                if exit.is_none() {
                    self.kill_group(Signal::SIGKILL);
                }
                Err(KernelError::StartFailed {
                    exit: exit.map_or("closed its protocol pipe".into(), |e| e.to_string()),
                    interpreter: self.interpreter().to_string(),
                    stderr: self.stderr_tail().await,
                })
            }
            Err(_) => {
                self.kill_group(Signal::SIGKILL);
                self.wait_for_exit(Duration::from_secs(2)).await;
                Err(KernelError::StartTimeout {
                    timeout_ms: config.startup_timeout.as_millis() as u64,
                    interpreter: self.interpreter().to_string(),
                    stderr: self.stderr_tail().await,
                })
            }
        }
    }

    /// Whether the kernel was last initialized exactly as `config` would initialize it.
    pub fn initialized_for(&self, config: &KernelConfig) -> bool {
        let wanted = self.init_frame(config).encode();
        self.initialized.lock().unwrap().as_ref() == Some(&wanted)
    }

    pub(super) fn init_frame(&self, config: &KernelConfig) -> HostFrame {
        HostFrame::Init {
            id: INIT_ID.to_string(),
            cwd: config.cwd.display().to_string(),
            env: config.env.clone().into_iter().collect(),
            status_mime: config.status_mime.clone(),
            prelude: Some(self.prelude.display().to_string()),
            env_prefix: config.env_prefix.clone(),
            kv_path: if self.far.is_some() {
                None
            } else {
                config.kv_path().map(|p| p.display().to_string())
            },
            // Every kernel's store is kept by the host: a cell never opens the store's
            // files (nothing it may write is needed, and no other session's store is in
            // its view).
            kv_via_host: config.kv_path().is_some(),
        }
    }
}

/// `<PREFIX>PYTHON_IPC_TRACE=1` in the host's environment: every frame goes to stderr.
pub(super) fn ipc_trace(base_env: &HashMap<String, String>, config: &KernelConfig) -> bool {
    base_env
        .get(&format!("{}PYTHON_IPC_TRACE", config.env_prefix))
        .is_some_and(|v| v == "1")
}

/// Host directories a kernel needs where they are, whatever its view covers: its
/// interpreter's installation (a venv made under /tmp) and its `PYTHONPATH`.
pub(super) fn kept_for_kernel(resolved: &Resolved, env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let mut keep: Vec<PathBuf> = resolved.venv.iter().cloned().collect();
    // <prefix>/bin/python: the prefix holds its standard library.
    keep.extend(
        resolved
            .path
            .parent()
            .and_then(|bin| bin.parent())
            .map(PathBuf::from),
    );
    if let Some(path) = env.get("PYTHONPATH") {
        keep.extend(std::env::split_paths(path).filter(|p| p.is_absolute()));
    }
    keep.retain(|p| p.is_absolute() && p != std::path::Path::new("/"));
    keep
}

/// Refuses a variable no process can be given.
pub(super) fn check_variables(env: &BTreeMap<String, String>, config: &KernelConfig) -> Result<()> {
    let bad = |k: &String, v: &String| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0');
    let found = env.iter().chain(&config.env).find(|(k, v)| bad(k, v));
    match found {
        Some((key, _)) => Err(KernelError::InvalidArgument {
            name: if config.env.contains_key(key) { "env" } else { "baseEnv" },
            reason: format!(
                "variable '{}' cannot be given to a process: a name must be non-empty, without '=' or NUL; a value without NUL",
                key.replace('\0', "\\0")
            ),
        }),
        None => Ok(()),
    }
}

/// What [`Kernel::assemble`] is made of.
pub(super) struct Parts {
    pub(super) process: Arc<KernelProcess>,
    pub(super) exit: watch::Receiver<Option<ExitInfo>>,
    pub(super) pipes: Pipes,
    pub(super) trace: bool,
    pub(super) isolation: Isolation,
    /// Removed once the kernel is reaped.
    pub(super) private_tmp: Option<PrivateTmp>,
    /// What of the host the kernel's view shows.
    pub(super) reach: Reach,
    pub(super) resolved: Resolved,
    pub(super) prelude: PathBuf,
    /// What ended the kernel, when the host did; the process limit's watcher holds it too.
    pub(super) ending: Arc<Ending>,
    /// The launcher, for a kernel started through one.
    pub(super) far: Option<Launcher>,
    pub(super) start_mode: StartMode,
    /// Modules the process started with imported (a zygote's `preload`, less failures).
    pub(super) preloaded: Vec<String>,
}
