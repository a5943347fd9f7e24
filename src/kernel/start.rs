//! Starting a kernel, in three steps with a value between each: preparing it
//! (`prepare.rs`: a `Prepared`), making its process (`spawn.rs`: spawned, forked or
//! launched, a `Started`), and opening the connection over that process (`connect`);
//! then the `init` handshake, and the start bounded by an abort or a deadline.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, timeout, Instant};

use super::config::{AbortHandle, KernelConfig, PRELOAD_WAIT};
use super::connection::{
    drain_stderr, open_route, read_frames, widen_pipe, FrameWriter, LinkClock, Pipes, Routes,
    StreamReport,
};
use super::far_reports::{FarHello, FarReports};
use super::far_side::{signal_far_side, watch_link, FarSide};
use super::host_calls::KvHome;
use super::prepare;
use super::spawn::{self, Parts, Started};
use super::Kernel;
use crate::error::{KernelError, Result};
use crate::kernel::fifo::Fifo;
use crate::sandbox::allow_list::AllowList;
use crate::sandbox::egress_proxy::{self, Denied};
use crate::start::launcher::PAYLOAD;
use crate::start::python::Resolved;
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
        prepare::resolve(config).await
    }

    /// Starts the Python process, which then waits for [`Kernel::initialize`]. Most of a
    /// kernel's start-up is here, so a pool can keep a spawned spare ready.
    pub async fn spawn(config: &KernelConfig) -> Result<Arc<Kernel>> {
        let parts = match &config.launcher {
            Some(launcher) => spawn::launch(config, launcher)?,
            None => {
                let mut prepared = prepare::prepare(config).await?;
                #[cfg(target_os = "linux")]
                let forked = spawn::fork(config, &prepared).await?;
                #[cfg(not(target_os = "linux"))]
                let forked = None;
                let started = match forked {
                    Some(started) => started,
                    None => spawn::spawn(config, &prepared)?,
                };
                // Sent by the kernel's set-up before it ran anything of its own.
                let egress = prepared.sandbox.take_egress().transpose().map_err(|e| {
                    started
                        .process
                        .signal_group(nix::sys::signal::Signal::SIGKILL);
                    KernelError::Sandbox {
                        reason: format!("starting the kernel's proxy: {e}"),
                    }
                })?;
                Parts::local(prepared, started, egress)
            }
        };
        Ok(Kernel::connect(config, parts))
    }

    /// A launched kernel's runner, sent ahead of the protocol by its first `initialize`
    /// (where an abort or a deadline of the start can cut it short) when the far side
    /// asks for it, then the link's nonce; from then on its link is watched. A far side
    /// that is not there (no Python, a refused login) closes the link or never answers;
    /// the init that follows then reports its stderr.
    pub(super) async fn ship_runner(&self, config: &KernelConfig) {
        let Some(far) = &self.far else { return };
        if far.shipped.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(reports) = &self.stream_report.far {
            let mut hello = reports.hello.subscribe();
            let said = timeout(
                config.startup_timeout,
                hello.wait_for(|h| *h != FarHello::Waiting),
            )
            .await
            .ok()
            .and_then(|said| said.ok().map(|h| *h));
            let token = far.link.as_ref().map(|link| link.first_token());
            let bytes = first_bytes(said, &reports.nonce, token);
            if !bytes.is_empty() {
                let _ = timeout(config.startup_timeout, self.writer.send_bytes(&bytes)).await;
            }
        }
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
            far.link.clone(),
        ));
    }

    /// The kernel object over a started process: the connection (its reader, stderr
    /// drain and writer) opened over the process's pipes.
    pub(super) fn connect(config: &KernelConfig, parts: Parts) -> Arc<Kernel> {
        let Parts {
            started:
                Started {
                    process,
                    exit,
                    pipes,
                    ending,
                    start_mode,
                    preloaded,
                },
            trace,
            isolation,
            private_tmp,
            session_dir,
            egress,
            reach,
            policy,
            resolved,
            prelude,
            far,
            far_link,
        } = parts;
        let pid = process.pid();
        let tmp_removed = private_tmp.map(|tmp| tmp.remove_when_reaped(exit.clone()));
        // The kernel's own hold on its session's directory ends when it is reaped (the
        // session holds it for its later kernels); the object keeps only a reference its
        // owner can claim while the kernel lives (a pool's spare).
        let denials = egress.map(|(allow, listener)| serve_proxy(allow, listener, exit.clone()));
        let session_dir_ref = session_dir.as_ref().map(Arc::downgrade);
        if let Some(session_dir) = session_dir {
            let mut reaped = exit.clone();
            tokio::spawn(async move {
                let _ = reaped.wait_for(Option::is_some).await;
                let _ = tokio::task::spawn_blocking(move || drop(session_dir)).await;
            });
        }
        let Pipes {
            stdin,
            stdout,
            stderr,
        } = pipes;
        widen_pipe(&stdout);
        let routes: Routes = Arc::default();
        let stream_report = Arc::new(StreamReport {
            link: far.is_some().then(LinkClock::new),
            far: far.as_ref().map(|launcher| {
                FarReports::new(launcher.clone(), resolved.path.display().to_string())
            }),
            ..StreamReport::default()
        });
        if let (Some(link), Some(reports)) = (&far_link, &stream_report.far) {
            link.set_nonce(&reports.nonce);
        }
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
                link: far_link,
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
            uri_roots: config.uri_roots.clone(),
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
            call_limits: super::call_limits::CallLimits::new(),
            session_id: config.session_id.clone(),
            ending,
            stream_report,
            far,
            kv_home: Mutex::new(None),
            tmp_removed,
            session_dir: session_dir_ref,
            denials,
            reach,
            policy,
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
            default_agent: config.default_agent.clone(),
            sandbox: self.policy.clone(),
        }
    }
}

/// What the host sends a far side after its hello: the runner when it asked for it, then
/// the link's nonce; nothing when it never said hello (the link closed, or the wait ran
/// out), as the init that follows finds out. `token`: a kept link's first token.
fn first_bytes(said: Option<FarHello>, nonce: &str, token: Option<String>) -> Vec<u8> {
    let mut bytes = Vec::new();
    match said {
        Some(FarHello::Need) => bytes.extend_from_slice(&PAYLOAD.bytes),
        Some(FarHello::Cached) => {}
        Some(FarHello::Waiting | FarHello::Closed) | None => return bytes,
    }
    bytes.extend(
        HostFrame::FarNonce {
            nonce: nonce.to_string(),
            token,
        }
        .encode(),
    );
    bytes
}

/// Serves a kernel's proxy on the listener its set-up sent, until the kernel is reaped;
/// returns where its refusals arrive (each cell reports those made while it ran).
fn serve_proxy(
    allow: AllowList,
    listener: std::net::TcpListener,
    mut reaped: watch::Receiver<Option<crate::process::exit::ExitInfo>>,
) -> tokio::sync::Mutex<mpsc::UnboundedReceiver<Denied>> {
    let (told, denials) = mpsc::unbounded_channel();
    let on_denied = Arc::new(move |denied: Denied| {
        let _ = told.send(denied);
    });
    match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => {
            let proxy = tokio::spawn(egress_proxy::serve(listener, Arc::new(allow), on_denied));
            tokio::spawn(async move {
                let _ = reaped.wait_for(Option::is_some).await;
                proxy.abort();
            });
        }
        // Nothing listens then: the kernel's clients are refused at once, never hang.
        Err(e) => tracing::warn!("the kernel's proxy cannot be served: {e}"),
    }
    tokio::sync::Mutex::new(denials)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runner_goes_only_to_a_far_side_that_asked_and_the_nonce_to_any_that_said_hello() {
        let nonce_line = HostFrame::FarNonce {
            nonce: "n1".into(),
            token: None,
        }
        .encode();
        let mut asked = PAYLOAD.bytes.clone();
        asked.extend_from_slice(&nonce_line);
        assert_eq!(first_bytes(Some(FarHello::Need), "n1", None), asked);
        assert_eq!(first_bytes(Some(FarHello::Cached), "n1", None), nonce_line);
        for silent in [Some(FarHello::Closed), Some(FarHello::Waiting), None] {
            assert!(first_bytes(silent, "n1", Some("t".into())).is_empty());
        }
        assert_eq!(
            String::from_utf8(nonce_line).unwrap(),
            "{\"type\":\"farNonce\",\"nonce\":\"n1\"}\n"
        );
        assert_eq!(
            String::from_utf8(first_bytes(Some(FarHello::Cached), "n1", Some("t1".into())))
                .unwrap(),
            "{\"type\":\"farNonce\",\"nonce\":\"n1\",\"token\":\"t1\"}\n"
        );
    }
}
