//! The three ways a kernel's process is made: spawned by the host, forked from a zygote
//! that imported the kernel's `preload`, or launched elsewhere. Each returns the started
//! process; the connection is opened over it afterwards (`Kernel::connect`).

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

#[cfg(target_os = "linux")]
use super::config::PRELOAD_WAIT;
use super::config::{KernelConfig, StartMode, DEFAULT_SHUTDOWN_GRACE};
use super::connection::Pipes;
#[cfg(target_os = "linux")]
use super::connection::StdPipes;
use super::end_cause::{EndCause, Ending};
use super::prepare::{check_variables, ipc_trace, Prepared};
use crate::error::{KernelError, Result};
use crate::process::exit::ExitInfo;
use crate::process::limit::Census;
use crate::process::pids_cgroup::PidsCgroup;
use crate::process::reaper::KernelProcess;
use crate::sandbox::allow_list::AllowList;
use crate::sandbox::{Isolation, Reach, SandboxConfig};
use crate::start::command::{build_command, LaunchSpec};
use crate::start::env::EnvFilter;
use crate::start::host_dir::HostDir;
use crate::start::launcher::Launcher;
use crate::start::python::{self, Resolved};
use crate::start::session_dir::SessionDir;
use crate::wire::protocol::SandboxPolicy;

/// A kernel's process, started, before the connection is opened over it.
pub(super) struct Started {
    pub(super) process: Arc<KernelProcess>,
    pub(super) exit: watch::Receiver<Option<ExitInfo>>,
    pub(super) pipes: Pipes,
    /// What ended the kernel, when the host did; the process limit's watcher holds it too.
    pub(super) ending: Arc<Ending>,
    pub(super) start_mode: StartMode,
    /// Modules the process started with imported (a zygote's `preload`, less failures).
    pub(super) preloaded: Vec<String>,
}

/// What a kernel is made of: its started process and what the host knows of it.
pub(super) struct Parts {
    pub(super) started: Started,
    pub(super) trace: bool,
    pub(super) isolation: Isolation,
    /// Removed once the kernel is reaped.
    pub(super) private_tmp: Option<HostDir>,
    /// Its session's directory, held until the kernel is reaped.
    pub(super) session_dir: Option<Arc<SessionDir>>,
    /// With an allow list: its proxy's list and the listener in its namespace.
    pub(super) egress: Option<(AllowList, std::net::TcpListener)>,
    /// What of the host the kernel's view shows.
    pub(super) reach: Reach,
    /// What its sandbox confines, told to the runner at init; none without a sandbox.
    pub(super) policy: Option<SandboxPolicy>,
    pub(super) resolved: Resolved,
    pub(super) prelude: PathBuf,
    /// The launcher, for a kernel started through one.
    pub(super) far: Option<Launcher>,
    /// Its kept link, when it has one (`reattach`).
    pub(super) far_link: Option<Arc<super::far_link::FarLink>>,
}

impl Parts {
    /// A local kernel: what was prepared for it, and its process.
    pub(super) fn local(
        prepared: Prepared,
        started: Started,
        egress: Option<(AllowList, std::net::TcpListener)>,
    ) -> Parts {
        Parts {
            egress,
            started,
            trace: prepared.trace,
            isolation: prepared.isolation,
            private_tmp: prepared.private_tmp,
            session_dir: prepared.session_dir,
            reach: prepared.sandbox.reach().clone(),
            policy: prepared.sandbox.policy().cloned(),
            resolved: prepared.resolved,
            prelude: prepared.files.prelude,
            far: None,
            far_link: None,
        }
    }
}

/// Spawns a fresh interpreter running the runner, under the prepared sandbox, with the
/// process limit's watcher when `config` has one.
pub(super) fn spawn(config: &KernelConfig, prepared: &Prepared) -> Result<Started> {
    let Prepared {
        resolved,
        files,
        base_env,
        env,
        bytecode,
        sandbox,
        ..
    } = prepared;
    // In a PID namespace the kernel's init is one more process of its own.
    let max_processes = config
        .max_processes
        .map(|n| n + usize::from(sandbox.spawns_through_launcher()));
    let cgroup = max_processes.and_then(|n| PidsCgroup::create(n, base_env));
    let mut command = build_command(&LaunchSpec {
        python: &resolved.path,
        runner: &files.runner,
        cwd: &config.cwd,
        env,
        memory_limit_bytes: config.memory_limit_bytes,
        cgroup: cgroup.as_ref(),
        sandbox,
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
        // The cause names the limit the caller asked for, without the namespace's init.
        let asked = config.max_processes.unwrap_or(limit);
        let told = ending.clone();
        tokio::spawn(crate::process::limit::watch_processes(
            process.clone(),
            census,
            limit,
            exit.clone(),
            move || told.set(EndCause::ProcessLimit { limit: asked }),
        ));
    }
    Ok(Started {
        process,
        exit,
        pipes,
        ending,
        start_mode: StartMode::Spawn,
        preloaded: Vec::new(),
    })
}

/// A kernel forked from the zygote for `config`'s settings, when `config` has a
/// `preload` and nothing the zygote cannot give (a process limit, Python < 3.9);
/// `None` (the caller spawns one) when there is no zygote or it failed.
#[cfg(target_os = "linux")]
pub(super) async fn fork(config: &KernelConfig, prepared: &Prepared) -> Result<Option<Started>> {
    use crate::start::zygote::{ForkRequest, ZygoteKey, ZygoteStart};
    let Prepared {
        resolved,
        files,
        env,
        sandbox,
        ..
    } = prepared;
    // A session that installed something may have replaced what the zygote imported
    // from the environment: its kernels import from their own view of it.
    let installed = config.session_dir.as_ref().is_some_and(|d| !d.is_empty());
    let forkable = !config.preload.is_empty()
        && config.zygote
        && config.max_processes.is_none()
        && !installed
        && python::version_at_least(&resolved.version, (3, 9));
    if !forkable {
        return Ok(None);
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
        let Some(zygote) =
            crate::start::zygote::for_kernel(start.clone(), config.startup_timeout).await
        else {
            return Ok(None);
        };
        let request = ForkRequest {
            env,
            cwd: &config.cwd,
            memory_limit_bytes: config.memory_limit_bytes,
            landlock: sandbox.landlock_fd(),
            sandbox: sandbox.for_forked_kernel(),
            proxy: sandbox.proxy_channel_fd(),
        };
        match zygote.fork(request, config.startup_timeout).await {
            Ok(forked) => {
                let pipes = StdPipes(Some(forked.stdin), Some(forked.stdout), Some(forked.stderr))
                    .open(&forked.process)?;
                return Ok(Some(Started {
                    process: forked.process,
                    exit: forked.exit,
                    pipes,
                    ending: Arc::default(),
                    start_mode: StartMode::Zygote,
                    preloaded: zygote.imported(),
                }));
            }
            Err(e) if zygote.is_dead() => {
                tracing::info!("the zygote had ended ({e}); trying a new one");
            }
            Err(e) => {
                tracing::warn!("this kernel is spawned, not forked: {e}");
                return Ok(None);
            }
        }
    }
    Ok(None)
}

/// A kernel started through `launcher`: the far side's Python is not resolved or probed
/// here, and the runner travels over the pipe (see `start/launcher.rs`).
pub(super) fn launch(config: &KernelConfig, launcher: &Launcher) -> Result<Parts> {
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
    let vouched = crate::start::far_cache::vouched(launcher, &interpreter);
    let mut command = launcher.command(
        &interpreter,
        config.memory_limit_bytes,
        DEFAULT_SHUTDOWN_GRACE,
        vouched.as_deref(),
        config.reattach,
        &env,
    );
    let mut child = command.spawn().map_err(|e| KernelError::Launcher {
        launcher: launcher.describe(),
        reason: e.to_string(),
    })?;
    let pid = child.id();
    let pipes = Pipes::take(&mut child);
    drop(child); // reaped by the watcher below
    let ending = Arc::<Ending>::default();
    let (process, exit, pipes, far_link) = match config.reattach {
        None => {
            let (process, exit) = KernelProcess::watch(pid, false);
            let pipes = pipes.open(&process)?;
            (process, exit, pipes, None)
        }
        Some(grace) => {
            let spec = super::far_link::LinkSpec {
                launcher: launcher.clone(),
                interpreter: interpreter.clone(),
                env,
                grace,
            };
            let kept = super::far_link::FarLink::start(spec, pid, pipes, ending.clone(), trace)?;
            (kept.process, kept.exit, kept.pipes, Some(kept.link))
        }
    };
    Ok(Parts {
        started: Started {
            process,
            exit,
            pipes,
            ending,
            start_mode: StartMode::Launcher,
            preloaded: Vec::new(),
        },
        trace,
        isolation: Isolation {
            mode: "launcher".into(),
            ..Isolation::default()
        },
        private_tmp: None,
        session_dir: None,
        egress: None,
        reach: Reach::default(),
        policy: None,
        resolved: Resolved {
            path: PathBuf::from(&interpreter),
            version: String::new(),
            source: python::Source::Explicit,
            venv: None,
        },
        // Relative: the runner's directory on the far side is its own.
        prelude: PathBuf::from("prelude.py"),
        far: Some(launcher.clone()),
        far_link,
    })
}
