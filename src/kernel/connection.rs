//! The connection to a started runner: the writer every host frame goes through, the
//! reader that routes each runner frame to its request (and counts the rest), the
//! stderr drain, and the pipes they run over.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::end_cause::{EndCause, Ending};
use super::far_reports::FarReports;
use crate::error::{KernelError, Result};
use crate::process::exit::ExitInfo;
use crate::process::reaper::KernelProcess;
use crate::wire::events::{Collector, KernelEvent};
use crate::wire::frame_reader::{FrameReader, Next, MAX_FRAME_BYTES};
use crate::wire::protocol::{decode_line, HostFrame, RunnerFrame};

pub(super) const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// Frames a request may have waiting before the reader stops reading the runner's pipe.
pub(super) const ROUTE_BACKLOG: usize = 64;

pub(super) type Routes = Arc<Mutex<Router>>;

/// Which request each incoming frame goes to. Once the runner's stdout has ended it is
/// closed: a route asked for after that ends at once, so nobody waits on a dead kernel.
#[derive(Default)]
pub(super) struct Router {
    pub(super) routes: HashMap<String, mpsc::Sender<RunnerFrame>>,
    pub(super) closed: bool,
}

/// Frames of request `id` arrive on the returned receiver until the guard is dropped.
/// Folds into `event` (stdout or stderr text) the frames of the same stream already waiting
/// behind it, so text that queued up while the consumer was slow (an async `onEvent`
/// setting the pace, then a stopped cell's backlog) is delivered in few events instead of
/// one per frame; nothing is dropped and the order is kept. Returns the first waiting
/// frame that does not fold, to be handled next.
pub(super) fn fold_waiting_text(
    collector: &mut Collector,
    rx: &mut mpsc::Receiver<RunnerFrame>,
    event: &mut KernelEvent,
) -> Option<RunnerFrame> {
    /// Bounds one event: a backlog folds in pieces of about this many bytes.
    const MAX_FOLDED_BYTES: usize = 1 << 20;
    loop {
        let stdout = match event {
            KernelEvent::Stdout(text) | KernelEvent::Stderr(text)
                if text.len() < MAX_FOLDED_BYTES =>
            {
                matches!(event, KernelEvent::Stdout(_))
            }
            _ => return None,
        };
        let next = rx.try_recv().ok()?;
        let same_stream = match &next {
            RunnerFrame::Stdout { late: false, .. } => stdout,
            RunnerFrame::Stderr { late: false, .. } => !stdout,
            _ => false,
        };
        if !same_stream {
            return Some(next);
        }
        // A non-late stream frame gives its own stream's text (or nothing, when it is not
        // this request's), so nothing else can come back here.
        if let (
            Some(KernelEvent::Stdout(more) | KernelEvent::Stderr(more)),
            KernelEvent::Stdout(text) | KernelEvent::Stderr(text),
        ) = (collector.apply(next), &mut *event)
        {
            text.push_str(&more);
        }
    }
}

pub(super) fn open_route<'a>(
    routes: &'a Routes,
    id: &'a str,
) -> (mpsc::Receiver<RunnerFrame>, RouteGuard<'a>) {
    let (tx, rx) = mpsc::channel(ROUTE_BACKLOG);
    let mut router = routes.lock().unwrap();
    if !router.closed {
        router.routes.insert(id.to_string(), tx);
    }
    (rx, RouteGuard { routes, id })
}

/// The runner's stdin; every host frame goes through here, one whole line at a time.
pub(super) struct FrameWriter {
    pub(super) stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pub(super) pid: u32,
    pub(super) trace: bool,
}

impl FrameWriter {
    /// Encoded only once the writer is ours: frames waiting for a slow pipe (replies to
    /// many bridge calls) wait as their values, not each as a second, encoded copy.
    pub(super) async fn send(&self, frame: &HostFrame) -> std::io::Result<()> {
        let mut stdin = self.stdin.lock().await;
        let line = frame.encode();
        if self.trace {
            eprint!(
                "[pykernel {}] -> {}",
                self.pid,
                String::from_utf8_lossy(&line)
            );
        }
        write_line(&mut stdin, &line).await
    }

    /// Bytes as they are: a frame's line, or the runner sent ahead of a launched
    /// kernel's protocol.
    pub(super) async fn send_bytes(&self, bytes: &[u8]) -> std::io::Result<()> {
        write_line(&mut *self.stdin.lock().await, bytes).await
    }

    /// EOF on the runner's protocol stdin: the runner's other exit signal.
    pub(super) async fn close(&self) {
        self.stdin.lock().await.take();
    }
}

async fn write_line(stdin: &mut Option<ChildStdin>, bytes: &[u8]) -> std::io::Result<()> {
    let pipe = stdin
        .as_mut()
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
    pipe.write_all(bytes).await?;
    pipe.flush().await
}

/// The pipes of a started kernel process, as tokio's.
pub(super) struct Pipes {
    pub(super) stdin: Option<ChildStdin>,
    pub(super) stdout: ChildStdout,
    pub(super) stderr: tokio::process::ChildStderr,
}

/// A spawned process's pipes, before they are handed to tokio.
pub(super) struct StdPipes(
    pub(super) Option<std::process::ChildStdin>,
    pub(super) Option<std::process::ChildStdout>,
    pub(super) Option<std::process::ChildStderr>,
);

impl Pipes {
    pub(super) fn take(child: &mut std::process::Child) -> StdPipes {
        StdPipes(child.stdin.take(), child.stdout.take(), child.stderr.take())
    }
}

impl StdPipes {
    /// Kills the process when a pipe cannot be used: nobody could talk to it.
    pub(super) fn open(self, process: &KernelProcess) -> Result<Pipes> {
        let StdPipes(stdin, stdout, stderr) = self;
        let pipes = (|| {
            Ok::<_, std::io::Error>(Pipes {
                stdin: stdin.map(ChildStdin::from_std).transpose()?,
                stdout: ChildStdout::from_std(stdout.expect("stdout is piped"))?,
                stderr: tokio::process::ChildStderr::from_std(stderr.expect("stderr is piped"))?,
            })
        })();
        pipes.map_err(|e| {
            process.signal_group(Signal::SIGKILL);
            KernelError::io("connecting to the kernel's pipes", e)
        })
    }
}

/// Marks a request as the one in flight while it is alive.
pub(super) struct RunningGuard<'a>(&'a Mutex<Option<String>>);

impl<'a> RunningGuard<'a> {
    pub(super) fn set(slot: &'a Mutex<Option<String>>, id: &str) -> Self {
        *slot.lock().unwrap() = Some(id.to_string());
        RunningGuard(slot)
    }
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = None;
    }
}

pub(super) struct RouteGuard<'a> {
    pub(super) routes: &'a Routes,
    pub(super) id: &'a str,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        self.routes.lock().unwrap().routes.remove(self.id);
    }
}

/// How long a control frame (interrupt, exit) may wait for a pipe the kernel does not read
/// before the host goes on with signals.
pub(super) const FRAME_WRITE_WAIT: Duration = Duration::from_millis(200);

/// Room for a quarter megabyte in the runner's output pipe (Linux; 64 KiB otherwise): a
/// big frame then crosses in a few writes, each waking this side once, not hundreds.
pub(super) fn widen_pipe(stdout: &ChildStdout) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsFd;
        let _ = nix::fcntl::fcntl(
            stdout.as_fd(),
            nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_BYTES),
        );
    }
    #[cfg(not(target_os = "linux"))]
    let _ = stdout;
}

pub(super) const PIPE_BYTES: i32 = 256 * 1024;

/// What the frame reader learnt about the runner's protocol stream.
#[derive(Default)]
pub(super) struct StreamReport {
    /// A launched kernel's far side's reports about its cache.
    pub(super) far: Option<FarReports>,
    /// A launched kernel's link; `None` for a local kernel, whose reader keeps no clock.
    pub(super) link: Option<LinkClock>,
    /// Lines that reached no request: frames for an unknown or finished request id (a
    /// forgery, or output of a thread that outlived its cell) or for none, and lines that
    /// are not frames.
    pub(super) dropped_frames: AtomicU64,
    /// A launched kernel's end, as the far side's supervisor reported it.
    pub(super) far_exit: Mutex<Option<ExitInfo>>,
}

/// When a launched kernel's link last carried a line, for the link watch.
pub(super) struct LinkClock {
    pub(super) since: Instant,
    /// Milliseconds after `since` of the last line (or of [`LinkClock::heard`]).
    pub(super) last_line_ms: AtomicU64,
    /// The reader is waiting for a request to take a frame: the host, not the link, is slow.
    pub(super) delivering: AtomicBool,
}

impl LinkClock {
    pub(super) fn new() -> Self {
        Self {
            since: Instant::now(),
            last_line_ms: AtomicU64::new(0),
            delivering: AtomicBool::new(false),
        }
    }

    pub(super) fn heard(&self) {
        let now = self.since.elapsed().as_millis() as u64;
        self.last_line_ms.store(now, Ordering::Relaxed);
    }

    /// How long the link has said nothing while the host was ready to listen.
    pub(super) fn silent_for(&self) -> Duration {
        if self.delivering.load(Ordering::SeqCst) {
            return Duration::ZERO;
        }
        let last = Duration::from_millis(self.last_line_ms.load(Ordering::Relaxed));
        self.since.elapsed().saturating_sub(last)
    }
}

/// Reads protocol lines and hands each frame to the request it belongs to; the rest are
/// dropped and counted. A line over [`MAX_FRAME_BYTES`] ends the kernel: reading on would
/// mean holding it, or guessing where the next frame starts in a stream that something in
/// the kernel is flooding. Ends at EOF, which closes every route: that is how a waiting
/// request learns the kernel is gone.
pub(super) async fn read_frames(
    stdout: ChildStdout,
    routes: Routes,
    report: Arc<StreamReport>,
    ending: Arc<Ending>,
    process: Arc<KernelProcess>,
    trace: bool,
) {
    let reader = BufReader::with_capacity(PIPE_BYTES as usize, stdout);
    let mut frames = FrameReader::new(reader, MAX_FRAME_BYTES);
    loop {
        let text = match frames.next_line().await {
            Next::Line(text) => text,
            Next::End => break,
            Next::TooLong => {
                tracing::warn!(
                    pid = process.pid(),
                    "the kernel sent a protocol frame over {} MiB; killing it",
                    MAX_FRAME_BYTES >> 20
                );
                // Set before the routes close, so the request sees why it ended.
                ending.set(EndCause::OversizedFrame);
                process.signal_group(Signal::SIGKILL);
                break;
            }
        };
        if trace {
            eprintln!("[pykernel] <- {}", String::from_utf8_lossy(text));
        }
        if let Some(link) = &report.link {
            link.heard();
        }
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let delivered = match (decode_line(text), &report.link) {
            // The supervisor's frames; from a local kernel they are forgeries, dropped.
            (Ok(RunnerFrame::Heartbeat), Some(_)) => true,
            (Ok(RunnerFrame::FarPayload { need }), Some(_)) => {
                report.far.as_ref().is_some_and(|far| far.said_hello(need))
            }
            (Ok(RunnerFrame::FarBytecode { sha256, nonce }), Some(_)) => report
                .far
                .as_ref()
                .is_some_and(|far| far.compiled(&sha256, &nonce)),
            (Ok(RunnerFrame::KernelExit { code, signal }), Some(_)) => {
                // The last one counts: the supervisor's comes after all the kernel sent.
                *report.far_exit.lock().unwrap() = Some(ExitInfo { code, signal });
                true
            }
            (Ok(frame), Some(link)) => {
                link.delivering.store(true, Ordering::SeqCst);
                let delivered = deliver(&routes, frame).await;
                link.delivering.store(false, Ordering::SeqCst);
                delivered
            }
            (Ok(frame), None) => deliver(&routes, frame).await,
            (Err(err), _) => {
                tracing::warn!("{err}");
                if trace {
                    eprintln!("[pykernel] {err}");
                }
                false
            }
        };
        if !delivered {
            report.dropped_frames.fetch_add(1, Ordering::Relaxed);
        }
    }
    if let Some(far) = &report.far {
        far.closed();
    }
    let mut router = routes.lock().unwrap();
    router.closed = true;
    router.routes.clear();
}

/// Hands `frame` to its request; false when no live request has its id.
pub(super) async fn deliver(routes: &Routes, frame: RunnerFrame) -> bool {
    let Some(id) = frame.request_id() else {
        return false;
    };
    let route = routes.lock().unwrap().routes.get(id).cloned();
    match route {
        // Waits while the request is behind (its events are slow to deliver): the
        // runner then blocks on its pipe, and nothing piles up in between.
        Some(route) => route.send(frame).await.is_ok(),
        None => false,
    }
}

pub(super) async fn drain_stderr(
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<u8>>>,
    closed: watch::Sender<bool>,
    trace: bool,
) {
    let mut buf = vec![0u8; 8192];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if trace {
                    eprint!("{}", String::from_utf8_lossy(&buf[..n]));
                }
                let mut tail = tail.lock().unwrap();
                tail.extend(&buf[..n]);
                let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
                tail.drain(..excess);
            }
        }
    }
    let _ = closed.send(true);
}
