//! A kernel started through a launcher: its signals travel in band to the far side's
//! supervisor, and its link is heartbeated and cut when it goes silent.

use super::end_cause::{EndCause, Ending};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::{mpsc, watch};
use tokio::time::timeout;

use super::connection::{FrameWriter, LinkClock, StreamReport, FRAME_WRITE_WAIT};
use super::far_link::FarLink;
use crate::process::exit::ExitInfo;
use crate::process::reaper::KernelProcess;
use crate::start::launcher::Launcher;
use crate::wire::protocol::HostFrame;

/// A kernel started through a launcher: signals travel in band, to the far side's
/// supervisor.
pub(super) struct FarSide {
    pub(super) launcher: Launcher,
    /// See [`KernelConfig::link_timeout`].
    pub(super) link_timeout: Duration,
    pub(super) signals: mpsc::UnboundedSender<Signal>,
    /// The far side's `sys.executable` and version, from its `ready`.
    pub(super) ready: std::sync::OnceLock<(String, String)>,
    /// The runner was sent (see [`Kernel::ship_runner`]).
    pub(super) shipped: AtomicBool,
    /// Its kept link (`reattach`), which a drop does not end.
    pub(super) link: Option<Arc<FarLink>>,
}

/// Writes each signal asked for as a `signal` frame. SIGKILL ends the kernel whatever the
/// far side does: after a moment for the frame to act, the link is cut (stdin closed, the
/// launcher killed), and the supervisor there kills what is left when its stdin closes.
pub(super) async fn signal_far_side(
    mut signals: mpsc::UnboundedReceiver<Signal>,
    writer: Arc<FrameWriter>,
    process: Arc<KernelProcess>,
    mut exit: watch::Receiver<Option<ExitInfo>>,
) {
    while let Some(signal) = signals.recv().await {
        if exit.borrow().is_some() {
            continue;
        }
        let frame = HostFrame::Signal {
            signal: signal.as_str(),
        };
        let _ = timeout(FRAME_WRITE_WAIT, writer.send(&frame)).await;
        if signal == Signal::SIGKILL {
            let _ = timeout(LINK_CUT_WAIT, exit.wait_for(|e| e.is_some())).await;
            let _ = timeout(FRAME_WRITE_WAIT, writer.close()).await;
            process.signal_group(Signal::SIGKILL);
        }
    }
}

/// How long the far side gets to act on an in-band SIGKILL before its launcher is killed.
pub(super) const LINK_CUT_WAIT: Duration = Duration::from_millis(1_000);

/// Heartbeats a launched kernel's link, and cuts it when nothing came back for
/// `link_timeout`: a frozen launcher or a dead network would otherwise leave every call
/// waiting. Time the host itself spends not reading (a slow consumer holding the reader
/// back) does not count against the link. A kept link that goes silent is replaced
/// instead (`far_link.rs`), and is not judged while it is away.
#[allow(clippy::too_many_arguments)]
pub(super) async fn watch_link(
    writer: Arc<FrameWriter>,
    report: Arc<StreamReport>,
    ending: Arc<Ending>,
    launcher: String,
    process: Arc<KernelProcess>,
    mut exit: watch::Receiver<Option<ExitInfo>>,
    link_timeout: Duration,
    kept: Option<Arc<FarLink>>,
) {
    let every = (link_timeout / 4).max(Duration::from_millis(10));
    let mut generations = kept.as_ref().map(|link| link.generations());
    loop {
        tokio::select! {
            _ = exit.wait_for(|e| e.is_some()) => return,
            _ = tokio::time::sleep(every) => {}
        }
        if let (Some(link), Some(generations)) = (&kept, &mut generations) {
            if generations.has_changed().unwrap_or(false) {
                // A new link: judged from when it was taken.
                generations.borrow_and_update();
                if let Some(clock) = &report.link {
                    clock.heard();
                }
            }
            if !link.is_current() {
                continue;
            }
        }
        // Unbounded for a kept link: its relay holds what the link cannot take yet.
        let _ = timeout(FRAME_WRITE_WAIT, writer.send(&HostFrame::Heartbeat)).await;
        let silent = report
            .link
            .as_ref()
            .map_or(Duration::ZERO, LinkClock::silent_for);
        if let (Some(link), true) = (&kept, silent > link_timeout) {
            tracing::warn!(pid = process.pid(), "a kept link went silent; replacing it");
            link.silent();
            if let Some(clock) = &report.link {
                clock.heard();
            }
            continue;
        }
        if silent > link_timeout {
            tracing::warn!(pid = process.pid(), "the link to a launched kernel is lost");
            ending.set(EndCause::LinkLost {
                launcher,
                timeout: link_timeout,
            });
            let _ = timeout(FRAME_WRITE_WAIT, writer.close()).await;
            process.signal_group(Signal::SIGKILL);
            return;
        }
    }
}
