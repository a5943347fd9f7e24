//! A launched kernel's link kept across a drop (`reattach: { graceMs }`): when the
//! launcher's link ends (an ssh client killed, a pod's exec stream reset, a link gone
//! silent), the far side's supervisor keeps the kernel for `graceMs` and the host brings
//! a new link through the same launcher, running the attach bootstrap there
//! (`start/launcher.rs`), which hands its pipes to the supervisor.
//!
//! The connection above (`connection.rs`) never sees a link change: it reads and writes
//! local pipes, and this relay carries them over whichever link is current. Both ends
//! count the bytes of each direction from the link's first byte. Each side keeps what it
//! wrote until the other says it has it (`farAck`, every [`ACK_EVERY`] bytes and on each
//! heartbeat), so when a new link is taken, each resumes its stream at the count the
//! other names: nothing is lost, nothing arrives twice, and a line cut by the drop is
//! completed by the rest of it. What each side holds is bounded ([`HELD`]): past that a
//! side stops reading its own end (the kernel then blocks on its pipe, as a cell's
//! output does while the host does not read).
//!
//! Who may attach: the host sends a token of 32 random hex digits with its nonce (after
//! the kernel was forked, so no cell has it); each attach request brings the token and
//! names the next, so a token serves one link and a repeated one is refused. The
//! supervisor's reports (`farAttach`, where it listens; `farAck`) carry the nonce, so a
//! cell's forgery of them is passed on as any other line, and dropped by the reader.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout, Instant};

use super::connection::{Pipes, StdPipes};
use super::end_cause::{EndCause, Ending};
use crate::error::{KernelError, Result};
use crate::process::exit::ExitInfo;
use crate::process::reaper::KernelProcess;
use crate::start::far_cache;
use crate::start::launcher::Launcher;

/// What either direction holds for a link at most: written and not yet acknowledged,
/// plus not yet written.
pub(super) const HELD: usize = 4 << 20;
/// How many bytes of the far side's go by before the host says it has them.
const ACK_EVERY: u64 = 256 << 10;
/// How often the host says what it has, when something came since it last said.
const ACK_TICK: Duration = Duration::from_millis(500);
/// The longest one attempt at a new link may take to be answered.
const ATTEMPT_WAIT: Duration = Duration::from_secs(10);
/// The pause after a failed attempt, doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);
/// What starts each of the supervisor's lines this relay reads (and takes off the link).
const FAR_ACK: &[u8] = b"{\"type\":\"farAck\"";
const FAR_ATTACH: &[u8] = b"{\"type\":\"farAttach\"";
const KERNEL_EXIT: &[u8] = b"{\"type\":\"kernelExit\"";
/// A line of the supervisor's is short: a longer one is the kernel's, passed on.
const MAX_OWN_LINE: usize = 4096;

/// What the relay is told by the host's side and by its own pumps.
enum Control {
    /// Link `generation` dropped (its pipe ended, or it went silent).
    Dropped { generation: u64 },
    /// The host ends the kernel: no later link.
    End,
    /// Everything the host will send was written and the link's input closed.
    Closed,
}

/// A kept link, as the host's side sees it.
pub(super) struct FarLink {
    launcher: Launcher,
    interpreter: String,
    env: BTreeMap<String, String>,
    grace: Duration,
    /// The link's nonce (set by the connection once it has made one).
    nonce: OnceLock<String>,
    first_token: String,
    /// Where the far side's supervisor listens, in hex, once it said so.
    socket: Mutex<Option<String>>,
    control: mpsc::UnboundedSender<Control>,
    /// The current link's number: 0 for the launcher's, then one more per link taken.
    generation: watch::Sender<u64>,
    /// No link is current: the relay is bringing a new one.
    away: AtomicBool,
    /// The far side reported the kernel's end: the link's end that follows is final.
    kernel_ended: AtomicBool,
    /// Bytes read from the far side, all links together.
    received: AtomicU64,
    up: Mutex<Up>,
    /// Wakes the link writer (lines to write, a link to write them to) and the host pipe's
    /// reader (room again).
    up_changed: Notify,
}

/// The host's bytes on their way to the far side.
#[derive(Default)]
struct Up {
    /// Whole lines not yet written to the link.
    lines: Vec<u8>,
    /// The start of a line the host is still writing.
    partial: Vec<u8>,
    /// Written to the link, not yet acknowledged; the bytes before `acked`.
    unacked: Vec<u8>,
    acked: u64,
    /// Written to the link, all links together: `acked + unacked.len()`.
    sent: u64,
    /// The host closed its side: once `lines` are written, the link's input is closed.
    closing: bool,
}

impl Up {
    fn held(&self) -> usize {
        self.lines.len() + self.partial.len() + self.unacked.len()
    }

    /// The far side has our bytes up to `count`.
    fn acknowledged(&mut self, count: u64) {
        if self.acked <= count && count <= self.sent {
            self.unacked.drain(..(count - self.acked) as usize);
            self.acked = count;
        }
    }

    /// A new link resumes at `count`, what the far side received: what it did not get is
    /// written again. False when `count` is outside what we kept (nothing can resume).
    fn resume_at(&mut self, count: u64) -> bool {
        if !(self.acked <= count && count <= self.sent) {
            return false;
        }
        let mut lines = self.unacked.split_off((count - self.acked) as usize);
        lines.append(&mut self.lines);
        self.lines = lines;
        self.unacked.clear();
        self.acked = count;
        self.sent = count;
        true
    }
}

/// A launcher's process and its pipes, as the relay holds them.
struct Launched {
    process: Arc<KernelProcess>,
    exit: watch::Receiver<Option<ExitInfo>>,
}

/// A link taken: the launcher that carries it, and its pipes.
struct Link {
    launched: Launched,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: ChildStderr,
}

/// What the relay's tasks are handed when a link changes.
enum ToWriter {
    /// Stop writing to the current link; answer once it is let go.
    Release(oneshot::Sender<()>),
    Take(ChildStdin),
}

enum ToReader {
    Release(oneshot::Sender<()>),
    Take(BufReader<ChildStdout>, u64),
}

/// How later links are brought: the launcher and what it ran, for the attach bootstrap.
pub(super) struct LinkSpec {
    pub(super) launcher: Launcher,
    pub(super) interpreter: String,
    pub(super) env: BTreeMap<String, String>,
    pub(super) grace: Duration,
}

/// A kernel behind a kept link, as the connection takes it.
pub(super) struct Kept {
    pub(super) link: Arc<FarLink>,
    pub(super) process: Arc<KernelProcess>,
    pub(super) exit: watch::Receiver<Option<ExitInfo>>,
    pub(super) pipes: Pipes,
}

impl FarLink {
    /// The relay over the first launcher's `pipes` (its process `pid`): the kernel's
    /// process and pipes as the connection takes them. `ending` gets the cause when no
    /// later link could be taken.
    pub(super) fn start(
        spec: LinkSpec,
        pid: u32,
        pipes: StdPipes,
        ending: Arc<Ending>,
        trace: bool,
    ) -> Result<Kept> {
        let LinkSpec {
            launcher,
            interpreter,
            env,
            grace,
        } = spec;
        let (first_process, first_exit) = KernelProcess::watch(pid, false);
        let first = pipes.open(&first_process)?;
        let io = |e| KernelError::io("making the pipes of a kept link", e);
        let (up_read, host_up) = local_pipe().map_err(io)?;
        let (down_read, host_down) = local_pipe().map_err(io)?;
        let (errors_read, host_errors) = local_pipe().map_err(io)?;
        let (control, control_rx) = mpsc::unbounded_channel();
        let link = Arc::new(FarLink {
            launcher,
            interpreter,
            env,
            grace,
            nonce: OnceLock::new(),
            first_token: far_cache::nonce(),
            socket: Mutex::new(None),
            control: control.clone(),
            generation: watch::Sender::new(0),
            away: AtomicBool::new(false),
            kernel_ended: AtomicBool::new(false),
            received: AtomicU64::new(0),
            up: Mutex::default(),
            up_changed: Notify::new(),
        });
        let (exited_tx, exited) = std::sync::mpsc::channel();
        let signals = control.clone();
        let (process, exit) = KernelProcess::watch_linked(
            pid,
            Box::new(move |signal| {
                matches!(signal, Signal::SIGKILL | Signal::SIGTERM)
                    && signals.send(Control::End).is_ok()
            }),
            exited,
        );
        let host_pipes = Pipes {
            stdin: Some(ChildStdin::from_std(host_up.into()).map_err(io)?),
            stdout: ChildStdout::from_std(down_read.into()).map_err(io)?,
            stderr: ChildStderr::from_std(errors_read.into()).map_err(io)?,
        };
        let up_read = ChildStdout::from_std(up_read.into()).map_err(io)?;
        let host_down = ChildStdin::from_std(host_down.into()).map_err(io)?;
        let host_errors = Arc::new(tokio::sync::Mutex::new(
            ChildStdin::from_std(host_errors.into()).map_err(io)?,
        ));
        let Pipes {
            stdin,
            stdout,
            stderr,
        } = first;
        let stdin = stdin.expect("a launcher's stdin is piped");
        let (to_writer, writer_rx) = mpsc::unbounded_channel();
        let (to_reader, reader_rx) = mpsc::unbounded_channel();
        let (chunks, chunks_rx) = mpsc::channel(8);
        let tasks = vec![
            tokio::spawn(read_host(link.clone(), up_read)),
            tokio::spawn(write_link(link.clone(), stdin, writer_rx)),
        ];
        tokio::spawn(read_link(
            link.clone(),
            BufReader::new(stdout),
            reader_rx,
            chunks,
        ));
        tokio::spawn(forward_errors(stderr, host_errors.clone()));
        tokio::spawn(write_host(host_down, chunks_rx));
        let relay = Relay {
            link: link.clone(),
            current: Launched {
                process: first_process,
                exit: first_exit,
            },
            control: control_rx,
            to_writer,
            to_reader,
            host_errors,
            tasks,
            ending,
            trace,
            closed: false,
            next_token: None,
            token: link.first_token.clone(),
        };
        tokio::spawn(relay.run(exited_tx));
        Ok(Kept {
            link,
            process,
            exit,
            pipes: host_pipes,
        })
    }

    /// The token the host sends with its nonce: the first later link must bring it.
    pub(super) fn first_token(&self) -> String {
        self.first_token.clone()
    }

    /// The link's nonce, which the far side's reports carry.
    pub(super) fn set_nonce(&self, nonce: &str) {
        let _ = self.nonce.set(nonce.to_string());
    }

    /// The link went silent (see `far_side::watch_link`): it is replaced.
    pub(super) fn silent(&self) {
        let generation = *self.generation.borrow();
        let _ = self.control.send(Control::Dropped { generation });
    }

    /// Whether a link is current (not while a new one is being brought).
    pub(super) fn is_current(&self) -> bool {
        !self.away.load(Ordering::SeqCst)
    }

    /// Changes each time a new link is taken.
    pub(super) fn generations(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    fn say(&self, line: &[u8]) {
        self.up.lock().unwrap().lines.extend_from_slice(line);
        self.up_changed.notify_waiters();
    }

    /// Tells the far side what we have. Only once its supervisor runs (it said where it
    /// listens): before that, the bootstrap reads the runner from the same pipe.
    fn acknowledge_received(&self) {
        if self.socket.lock().unwrap().is_none() {
            return;
        }
        let count = self.received.load(Ordering::SeqCst);
        self.say(format!("{{\"type\":\"farAck\",\"received\":{count}}}\n").as_bytes());
    }

    /// One of the supervisor's lines this relay takes off the link: an acknowledgement or
    /// where it listens, with the link's nonce. Whether it was one (not passed on).
    fn take_own_line(&self, line: &[u8]) -> bool {
        let Some(nonce) = self.nonce.get() else {
            return false;
        };
        if !(line.starts_with(FAR_ACK) || line.starts_with(FAR_ATTACH)) {
            return false;
        }
        let Ok(frame) = serde_json::from_slice::<serde_json::Value>(line) else {
            return false;
        };
        if frame["nonce"].as_str() != Some(nonce.as_str()) {
            return false;
        }
        if let Some(count) = frame["received"].as_u64() {
            self.up.lock().unwrap().acknowledged(count);
            self.up_changed.notify_waiters();
        } else if let Some(path) = frame["path"].as_str() {
            if path.len() <= 8192 && path.bytes().all(|b| b.is_ascii_hexdigit()) {
                *self.socket.lock().unwrap() = Some(path.to_string());
            }
        }
        true
    }
}

/// A pipe of this process's own, both ends close-on-exec: (read, write).
fn local_pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    // `pipe2` is Linux's; elsewhere each end is marked after (no exec runs meanwhile in
    // this process that could inherit it: launchers are spawned with their fds closed).
    let (read, write) = nix::unistd::pipe()?;
    for end in [&read, &write] {
        nix::fcntl::fcntl(
            end,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )?;
    }
    Ok((read, write))
}

/// The host's frames, from its pipe into whole lines for the link writer.
async fn read_host(link: Arc<FarLink>, mut pipe: ChildStdout) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        loop {
            let room = link.up_changed.notified();
            if link.up.lock().unwrap().held() < HELD {
                break;
            }
            room.await;
        }
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => 0,
            Ok(n) => n,
        };
        let mut up = link.up.lock().unwrap();
        if n == 0 {
            up.closing = true;
            // The far side keeps the kernel through the close of a kept link's input
            // unless told it is the host's doing.
            up.lines.extend_from_slice(b"{\"type\":\"farClose\"}\n");
            drop(up);
            link.up_changed.notify_waiters();
            return;
        }
        up.partial.extend_from_slice(&buf[..n]);
        if let Some(end) = up.partial.iter().rposition(|&b| b == b'\n') {
            let rest = up.partial.split_off(end + 1);
            let whole = std::mem::replace(&mut up.partial, rest);
            up.lines.extend_from_slice(&whole);
        }
        drop(up);
        link.up_changed.notify_waiters();
    }
}

/// Writes the host's lines to the current link, keeping each until it is acknowledged.
async fn write_link(
    link: Arc<FarLink>,
    stdin: ChildStdin,
    mut orders: mpsc::UnboundedReceiver<ToWriter>,
) {
    let mut stdin = Some(stdin);
    loop {
        let changed = link.up_changed.notified();
        let (chunk, closing) = {
            let up = link.up.lock().unwrap();
            let end = up.lines.len().min(64 << 10);
            (up.lines[..end].to_vec(), up.closing)
        };
        if chunk.is_empty() && closing && stdin.is_some() {
            stdin = None;
            let _ = link.control.send(Control::Closed);
        }
        if chunk.is_empty() || stdin.is_none() {
            tokio::select! {
                _ = changed => continue,
                order = orders.recv() => match order {
                    None => return,
                    Some(ToWriter::Release(done)) => {
                        stdin = None;
                        let _ = done.send(());
                    }
                    Some(ToWriter::Take(pipe)) => stdin = Some(pipe),
                },
            }
            continue;
        }
        let pipe = stdin.as_mut().expect("checked above");
        // One write at a time, each counted as it lands: a write cut by the drop moved
        // exactly what the far side can have received.
        let event = tokio::select! {
            written = pipe.write(&chunk) => Ok(written),
            order = orders.recv() => Err(order),
        };
        match event {
            Ok(Ok(n)) if n > 0 => {
                let mut up = link.up.lock().unwrap();
                let moved: Vec<u8> = up.lines.drain(..n).collect();
                up.unacked.extend_from_slice(&moved);
                up.sent += n as u64;
            }
            // The link's input is gone; its output's end (or its silence) is what the
            // keeper acts on, once everything it carried was read.
            Ok(_) => stdin = None,
            Err(None) => return,
            Err(Some(ToWriter::Release(done))) => {
                stdin = None;
                let _ = done.send(());
            }
            Err(Some(ToWriter::Take(pipe))) => stdin = Some(pipe),
        }
    }
}

/// Reads the current link: counts every byte, takes the supervisor's own lines off it,
/// passes the rest on to the host in chunks, and says what it has every [`ACK_EVERY`].
async fn read_link(
    link: Arc<FarLink>,
    stdout: BufReader<ChildStdout>,
    mut orders: mpsc::UnboundedReceiver<ToReader>,
    chunks: mpsc::Sender<Vec<u8>>,
) {
    let mut stdout = Some(stdout);
    let mut generation = 0;
    let mut lines = LineSplitter::default();
    let mut pending: Option<Vec<u8>> = None;
    let mut acked = 0u64;
    let mut buf = vec![0u8; 256 << 10];
    loop {
        if let Some(chunk) = pending.take() {
            tokio::select! {
                permit = chunks.reserve() => match permit {
                    Ok(permit) => permit.send(chunk),
                    Err(_) => return,
                },
                order = orders.recv() => {
                    if order.is_none() {
                        // The relay is done: what was read still reaches the host.
                        let _ = chunks.send(chunk).await;
                        return;
                    }
                    pending = Some(chunk);
                    take_order(order, &mut stdout, &mut generation);
                }
            }
            continue;
        }
        let Some(pipe) = stdout.as_mut() else {
            if !take_order(orders.recv().await, &mut stdout, &mut generation) {
                return;
            }
            continue;
        };
        let n = tokio::select! {
            read = pipe.read(&mut buf) => read.unwrap_or(0),
            order = orders.recv() => {
                if !take_order(order, &mut stdout, &mut generation) {
                    return;
                }
                continue;
            }
        };
        if n == 0 {
            stdout = None;
            let _ = link.control.send(Control::Dropped { generation });
            continue;
        }
        let received = link.received.fetch_add(n as u64, Ordering::SeqCst) + n as u64;
        let passed = lines.split(&buf[..n], |line| {
            if line.starts_with(KERNEL_EXIT) {
                link.kernel_ended.store(true, Ordering::SeqCst);
            }
            link.take_own_line(line)
        });
        if received - acked >= ACK_EVERY {
            acked = received;
            link.acknowledge_received();
        }
        if !passed.is_empty() {
            pending = Some(passed);
        }
    }
}

/// Applies a link change to the reader; false when the relay is gone.
fn take_order(
    order: Option<ToReader>,
    stdout: &mut Option<BufReader<ChildStdout>>,
    generation: &mut u64,
) -> bool {
    match order {
        None => false,
        Some(ToReader::Release(done)) => {
            *stdout = None;
            let _ = done.send(());
            true
        }
        Some(ToReader::Take(pipe, number)) => {
            *stdout = Some(pipe);
            *generation = number;
            true
        }
    }
}

/// Finds the supervisor's lines in the far side's stream: a line that could be one is
/// held until its end (at most [`MAX_OWN_LINE`]); everything else passes at once.
#[derive(Default)]
struct LineSplitter {
    /// The start of the current line, held while it could be one of the supervisor's.
    held: Vec<u8>,
    /// The current line is passing through (it is not one of the supervisor's).
    passing: bool,
}

impl LineSplitter {
    /// What of `data` passes on; `own` sees each held line and says whether it is taken.
    fn split(&mut self, data: &[u8], mut own: impl FnMut(&[u8]) -> bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len());
        let mut rest = data;
        while !rest.is_empty() {
            let end = rest.iter().position(|&b| b == b'\n');
            let (piece, complete) = match end {
                Some(end) => (&rest[..=end], true),
                None => (rest, false),
            };
            rest = &rest[piece.len()..];
            if self.passing {
                out.extend_from_slice(piece);
                self.passing = !complete;
                continue;
            }
            self.held.extend_from_slice(piece);
            let could_be = self.held.len() <= MAX_OWN_LINE
                && [FAR_ACK, FAR_ATTACH, KERNEL_EXIT].iter().any(|prefix| {
                    let n = prefix.len().min(self.held.len());
                    self.held[..n] == prefix[..n]
                });
            if complete {
                if !(could_be && own(&self.held)) {
                    out.extend_from_slice(&self.held);
                }
                self.held.clear();
            } else if !could_be {
                out.extend_from_slice(&self.held);
                self.held.clear();
                self.passing = true;
            }
        }
        out
    }
}

/// The far side's bytes into the host's pipe, in order; ends (closing the pipe, which the
/// frame reader takes as the kernel's end) once the relay is done and all were written.
async fn write_host(mut pipe: ChildStdin, mut chunks: mpsc::Receiver<Vec<u8>>) {
    while let Some(chunk) = chunks.recv().await {
        if pipe.write_all(&chunk).await.is_err() {
            return;
        }
    }
}

/// A launcher's stderr into the host's one stderr pipe for the kernel.
async fn forward_errors(mut stderr: ChildStderr, host: Arc<tokio::sync::Mutex<ChildStdin>>) {
    let mut buf = vec![0u8; 8192];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if host.lock().await.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The relay's keeper: watches the current link, brings a new one when it drops, and
/// ends the kernel when none can be brought or the host ends it.
struct Relay {
    link: Arc<FarLink>,
    current: Launched,
    control: mpsc::UnboundedReceiver<Control>,
    to_writer: mpsc::UnboundedSender<ToWriter>,
    to_reader: mpsc::UnboundedSender<ToReader>,
    host_errors: Arc<tokio::sync::Mutex<ChildStdin>>,
    /// The pumps of the host's frames to the link, stopped at the end (the reader of the
    /// link ends once it passed on what it read).
    tasks: Vec<JoinHandle<()>>,
    ending: Arc<Ending>,
    trace: bool,
    /// The host closed its side: the link's end that follows is final.
    closed: bool,
    /// The token the next link must bring, and the one an attempt named after it whose
    /// answer never came (the far side may have taken it).
    token: String,
    next_token: Option<String>,
}

/// How bringing a new link ended.
enum Brought {
    Link(Link),
    /// No link: why, for the kernel's death report.
    Not(String),
    /// The host ended the kernel meanwhile.
    Ended,
}

impl Relay {
    async fn run(mut self, exited: std::sync::mpsc::Sender<ExitInfo>) {
        let mut tick = tokio::time::interval(ACK_TICK);
        let mut acked = 0u64;
        // When the current launcher ended and its output has not ended yet: a moment for
        // the reader to take what it wrote last (a child of it may hold the pipe).
        let mut launcher_gone: Option<Instant> = None;
        let failure = loop {
            let mut exit = self.current.exit.clone();
            let gone = launcher_gone.map(|at| at + Duration::from_secs(2));
            tokio::select! {
                order = self.control.recv() => match order {
                    None | Some(Control::End) => break None,
                    Some(Control::Closed) => self.closed = true,
                    Some(Control::Dropped { generation }) => {
                        if generation != *self.link.generation.borrow() {
                            continue;
                        }
                        launcher_gone = None;
                        if let Some(failure) = self.replace().await {
                            break failure;
                        }
                    }
                },
                _ = async { let _ = exit.wait_for(Option::is_some).await; }, if launcher_gone.is_none() => {
                    launcher_gone = Some(Instant::now());
                }
                _ = tokio::time::sleep_until(gone.unwrap_or_else(Instant::now)), if gone.is_some() => {
                    launcher_gone = None;
                    if let Some(failure) = self.replace().await {
                        break failure;
                    }
                }
                _ = tick.tick() => {
                    let received = self.link.received.load(Ordering::SeqCst);
                    if received != acked && self.link.is_current() {
                        acked = received;
                        self.link.acknowledge_received();
                    }
                }
            }
        };
        self.finish(failure, exited).await;
    }

    /// The current link dropped: bring a new one. `None` when one was taken; otherwise
    /// how the kernel ends (`Some(None)`: as the host or the far side ended it).
    async fn replace(&mut self) -> Option<Option<String>> {
        if self.closed || self.link.kernel_ended.load(Ordering::SeqCst) {
            return Some(None);
        }
        self.link.away.store(true, Ordering::SeqCst);
        tracing::info!(launcher = %self.link.launcher.describe(), "a kept link dropped; bringing a new one");
        // Let go of the dropped link: its launcher killed (a silent one may still run),
        // the pumps off its pipes, so the counts are final before we name them. The
        // launcher alone, not its group: a local one (a relay, `setpriv`) may have the far
        // side in its group, which must live on.
        self.current.process.signal_process(Signal::SIGKILL);
        let (done, released) = oneshot::channel();
        let _ = self.to_writer.send(ToWriter::Release(done));
        let _ = released.await;
        let (done, released) = oneshot::channel();
        let _ = self.to_reader.send(ToReader::Release(done));
        let _ = released.await;
        let brought = self.bring().await;
        match brought {
            Brought::Link(link) => {
                let generation = *self.link.generation.borrow() + 1;
                let _ = self.to_writer.send(ToWriter::Take(link.stdin));
                let _ = self.to_reader.send(ToReader::Take(link.stdout, generation));
                tokio::spawn(forward_errors(link.stderr, self.host_errors.clone()));
                self.current = link.launched;
                self.link.generation.send_replace(generation);
                self.link.away.store(false, Ordering::SeqCst);
                self.link.up_changed.notify_waiters();
                None
            }
            Brought::Not(why) => Some(Some(why)),
            Brought::Ended => Some(None),
        }
    }

    /// Attempts at a new link until one is taken, refused, or the grace is over.
    async fn bring(&mut self) -> Brought {
        let deadline = Instant::now() + self.link.grace;
        let Some(socket) = self.link.socket.lock().unwrap().clone() else {
            return Brought::Not(
                "it dropped before the far side said where a new link could reach it".into(),
            );
        };
        let mut pause = FIRST_PAUSE;
        let mut last = String::from("no attempt could be made");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Brought::Not(format!("no new link within the grace ({last})"));
            }
            let next = self.next_token.clone().unwrap_or_else(far_cache::nonce);
            // Not cut short by the host's orders: an attempt under way is let finish (or
            // time out), so no launcher it started is left behind.
            let outcome = self.attempt(&socket, &next, left.min(ATTEMPT_WAIT)).await;
            match outcome {
                Attempt::Taken(link) => {
                    self.token = next;
                    self.next_token = None;
                    return Brought::Link(link);
                }
                Attempt::Refused(reason) if reason == "token" && self.next_token.is_some() => {
                    // An earlier attempt was taken though its answer was lost: the far
                    // side now expects the token that attempt named.
                    self.token = self.next_token.take().expect("checked");
                    continue;
                }
                Attempt::Refused(reason) => {
                    return Brought::Not(match reason.as_str() {
                        "gone" => "the far side no longer holds the kernel (its grace ran out, or it ended)".into(),
                        "token" => "the far side refused the host's token".into(),
                        "range" => "the far side no longer holds what the host did not receive".into(),
                        other => format!("the far side refused the new link ({other})"),
                    });
                }
                Attempt::Unanswered(why) => {
                    // It may have been taken, with `next` as the token after it.
                    self.next_token = Some(next);
                    last = why;
                }
                Attempt::Failed(why) => last = why,
            }
            if self.trace {
                eprintln!("[pykernel] a new link failed: {last}");
            }
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::select! {
                _ = sleep(pause.min(left)) => {}
                order = self.control.recv() => match order {
                    None | Some(Control::End) => return Brought::Ended,
                    Some(Control::Closed) => { self.closed = true; return Brought::Ended }
                    Some(Control::Dropped { .. }) => {}
                },
            }
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    /// One attempt: the launcher runs the attach bootstrap, which is sent the request
    /// line; the far side answers first on the new link.
    async fn attempt(&self, socket: &str, next: &str, wait: Duration) -> Attempt {
        let link = &self.link;
        let mut command = link
            .launcher
            .attach_command(&link.interpreter, socket, &link.env);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => return Attempt::Failed(format!("the launcher did not start: {e}")),
        };
        let pid = child.id();
        let pipes = StdPipes(child.stdin.take(), child.stdout.take(), child.stderr.take());
        drop(child); // reaped by the watcher below
        let (process, exit) = KernelProcess::watch(pid, false);
        let Ok(Pipes {
            stdin,
            stdout,
            mut stderr,
        }) = pipes.open(&process)
        else {
            return Attempt::Failed("its pipes could not be used".into());
        };
        let mut stdin = stdin.expect("a launcher's stdin is piped");
        let mut stdout = BufReader::new(stdout);
        // In this order, which the supervisor reads it by (tokens are hex).
        let request = format!(
            "{{\"type\":\"farAttach\",\"token\":\"{}\",\"next\":\"{next}\",\"received\":{}}}",
            self.token,
            link.received.load(Ordering::SeqCst)
        );
        let answer = timeout(wait, async {
            stdin
                .write_all(format!("{request}\n").as_bytes())
                .await
                .map_err(|_| Attempt::Failed("the launcher closed its input".into()))?;
            stdin.flush().await.ok();
            let mut line = Vec::new();
            let read = (&mut stdout)
                .take(MAX_OWN_LINE as u64)
                .read_until(b'\n', &mut line)
                .await;
            match read {
                Ok(_) if line.ends_with(b"\n") => Ok(line),
                _ => Err(Attempt::Unanswered(
                    "the new link ended before the far side answered".into(),
                )),
            }
        })
        .await;
        let line = match answer {
            Ok(Ok(line)) => line,
            Ok(Err(failed)) => {
                process.signal_group(Signal::SIGKILL);
                return failed.adding(&last_words(&mut stderr).await);
            }
            Err(_) => {
                process.signal_group(Signal::SIGKILL);
                let failed =
                    Attempt::Unanswered(format!("no answer within {} ms", wait.as_millis()));
                return failed.adding(&last_words(&mut stderr).await);
            }
        };
        let frame: serde_json::Value = serde_json::from_slice(&line).unwrap_or_default();
        match (frame["type"].as_str(), frame["received"].as_u64()) {
            (Some("farAttached"), Some(count)) => {
                let resumed = link.up.lock().unwrap().resume_at(count);
                if !resumed {
                    process.signal_group(Signal::SIGKILL);
                    return Attempt::Refused("range".into());
                }
                Attempt::Taken(Link {
                    launched: Launched { process, exit },
                    stdin,
                    stdout,
                    stderr,
                })
            }
            (Some("farRefused"), _) => {
                process.signal_group(Signal::SIGKILL);
                Attempt::Refused(frame["reason"].as_str().unwrap_or("unsaid").to_string())
            }
            _ => {
                process.signal_group(Signal::SIGKILL);
                Attempt::Failed(format!(
                    "the new link's first line was not the far side's answer: {}",
                    String::from_utf8_lossy(&line[..line.len().min(200)]).trim_end()
                ))
            }
        }
    }

    /// The kernel is gone for good: `failure` says why when no new link could be brought.
    async fn finish(mut self, failure: Option<String>, exited: std::sync::mpsc::Sender<ExitInfo>) {
        self.link.away.store(true, Ordering::SeqCst);
        if let Some(reason) = &failure {
            self.ending.set(EndCause::LinkNotResumed {
                launcher: self.link.launcher.describe(),
                grace: self.link.grace,
                reason: reason.clone(),
            });
        } else if !self.closed && !self.link.kernel_ended.load(Ordering::SeqCst) {
            // The host ends it: tell the far side not to wait for a new link.
            self.link
                .say(b"{\"type\":\"signal\",\"signal\":\"SIGKILL\"}\n{\"type\":\"farClose\"}\n");
            let _ = timeout(Duration::from_millis(200), async {
                while !self.link.up.lock().unwrap().lines.is_empty() {
                    sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
        }
        if !self.closed {
            self.current.process.signal_group(Signal::SIGKILL);
        }
        let mut exit = self.current.exit.clone();
        let ended = timeout(Duration::from_secs(5), async {
            exit.wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|info| *info)
        })
        .await;
        let info = match ended {
            Ok(Some(info)) => info,
            _ => {
                self.current.process.signal_group(Signal::SIGKILL);
                ExitInfo {
                    code: None,
                    signal: Some(Signal::SIGKILL as i32),
                }
            }
        };
        // The reader passes on what it holds and ends, and with it the host's pipe; the
        // host's own frames go nowhere any more.
        drop(self.to_reader);
        for task in self.tasks.drain(..) {
            task.abort();
        }
        let _ = exited.send(info);
    }
}

/// The last line a failed attempt's launcher wrote on its stderr (ssh's "Connection
/// refused", a missing Python), for the kernel's death report; empty when none came.
async fn last_words(stderr: &mut ChildStderr) -> String {
    let mut said = Vec::new();
    let _ = timeout(
        Duration::from_millis(300),
        (&mut *stderr).take(8192).read_to_end(&mut said),
    )
    .await;
    let text = String::from_utf8_lossy(&said);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    line.trim().chars().take(300).collect()
}

/// How one attempt at a new link went.
enum Attempt {
    Taken(Link),
    /// The far side said no, and why (`token`, `gone`, `range`, `request`).
    Refused(String),
    /// The request went out and no answer came: the far side may have taken it.
    Unanswered(String),
    /// Nothing reached the far side.
    Failed(String),
}

impl Attempt {
    /// The attempt's failure, with what its launcher said.
    fn adding(self, said: &str) -> Attempt {
        if said.is_empty() {
            return self;
        }
        match self {
            Attempt::Unanswered(why) => Attempt::Unanswered(format!("{why}: {said}")),
            Attempt::Failed(why) => Attempt::Failed(format!("{why}: {said}")),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn splitter_output(chunks: &[&[u8]], taken: &mut Vec<Vec<u8>>) -> Vec<u8> {
        let mut lines = LineSplitter::default();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(lines.split(chunk, |line| {
                taken.push(line.to_vec());
                line.starts_with(FAR_ACK)
            }));
        }
        out
    }

    #[test]
    fn the_supervisors_lines_are_taken_off_whatever_the_chunks_and_the_rest_passes_in_order() {
        let stream: &[u8] = b"{\"type\":\"stdout\",\"text\":\"a\"}\n{\"type\":\"farAck\",\"received\":5}\n{\"type\":\"far\n{\"type\":\"kernelExit\",\"code\":0}\nplain";
        for cut in 1..stream.len() {
            let mut taken = Vec::new();
            let out = splitter_output(&[&stream[..cut], &stream[cut..]], &mut taken);
            assert_eq!(
                out,
                b"{\"type\":\"stdout\",\"text\":\"a\"}\n{\"type\":\"far\n{\"type\":\"kernelExit\",\"code\":0}\nplain",
                "cut at {cut}"
            );
            assert!(taken.iter().any(|l| l.starts_with(FAR_ACK)));
        }
    }

    #[test]
    fn a_long_line_that_starts_like_the_supervisors_passes_whole() {
        let mut line = b"{\"type\":\"farAck\",\"x\":\"".to_vec();
        line.extend(std::iter::repeat_n(b'y', MAX_OWN_LINE * 2));
        line.extend(b"\"}\n");
        let mut taken = Vec::new();
        let out = splitter_output(&[&line[..100], &line[100..]], &mut taken);
        assert_eq!(out, line);
        assert!(taken.is_empty());
    }

    #[test]
    fn a_new_link_resumes_with_what_the_far_side_did_not_receive() {
        let mut up = Up::default();
        up.lines.extend_from_slice(b"abcdef");
        let moved: Vec<u8> = up.lines.drain(..4).collect();
        up.unacked.extend(moved);
        up.sent = 4;
        up.acknowledged(1);
        assert_eq!((up.acked, up.unacked.as_slice()), (1, &b"bcd"[..]));
        assert!(!up.resume_at(0), "before what was acknowledged");
        assert!(!up.resume_at(5), "past what was sent");
        assert!(up.resume_at(2));
        assert_eq!(up.lines, b"cdef");
        assert_eq!((up.acked, up.sent), (2, 2));
        assert!(up.unacked.is_empty());
        up.acknowledged(9);
        assert_eq!(
            up.acked, 2,
            "an acknowledgement past what was sent changes nothing"
        );
    }
}
