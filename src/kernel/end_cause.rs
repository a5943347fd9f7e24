//! Why a kernel ended, when the host (not the kernel's own code) ended it: set once,
//! where the cause happens, and read by the death report. The first cause to be set is
//! the one told: a kernel killed for its process count and then shut down by the host
//! was killed for its process count.

use std::sync::OnceLock;
use std::time::Duration;

use crate::process::exit::ExitInfo;
use crate::wire::frame_reader::MAX_FRAME_BYTES;

/// What ended a kernel on the host's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum EndCause {
    /// It ran more than `limit` processes at once (its `maxProcesses`).
    ProcessLimit { limit: usize },
    /// It sent a protocol frame over [`MAX_FRAME_BYTES`].
    OversizedFrame,
    /// A launched kernel's link stayed silent past its timeout.
    LinkLost { launcher: String, timeout: Duration },
    /// A kept link dropped and no new one could be brought within its grace.
    LinkNotResumed {
        launcher: String,
        grace: Duration,
        reason: String,
    },
    /// A stopped cell ignored the interrupt, so the kernel was killed.
    InterruptIgnored,
    /// The host shut it down (`shutdown`, a pool's disposal).
    ShutDownByHost,
    /// It closed its protocol pipe and stopped answering, so it was killed.
    Silenced,
}

/// The one cause a kernel ended by, once something ended it.
#[derive(Debug, Default)]
pub(super) struct Ending(OnceLock<EndCause>);

impl Ending {
    /// Records `cause` unless an earlier one was recorded.
    pub(super) fn set(&self, cause: EndCause) {
        let _ = self.0.set(cause);
    }

    pub(super) fn cause(&self) -> Option<&EndCause> {
        self.0.get()
    }
}

impl EndCause {
    /// What the cell's `KernelDied` error says of it; `exit` is how the process ended.
    pub(super) fn told(&self, exit: &ExitInfo) -> String {
        match self {
            EndCause::ProcessLimit { limit } => format!(
                "the kernel ran more than {limit} processes at once (its maxProcesses limit; threads do not count) and was killed with all of them"
            ),
            EndCause::OversizedFrame => format!(
                "the kernel sent a protocol frame over {} MiB (not allowed); it was killed",
                MAX_FRAME_BYTES >> 20
            ),
            EndCause::LinkLost { launcher, timeout } => format!(
                "the link to the kernel was lost: nothing came back through `{launcher}` for over {} ms, heartbeats included; the launcher was killed, and the far side ends the kernel when its link closes",
                timeout.as_millis()
            ),
            EndCause::LinkNotResumed {
                launcher,
                grace,
                reason,
            } => format!(
                "the link to the kernel was lost and not resumed: {reason} (through `{launcher}`, reattach grace {} ms); the far side ends the kernel once its grace is over",
                grace.as_millis()
            ),
            EndCause::InterruptIgnored => {
                "the kernel did not respond to the interrupt and was killed".to_string()
            }
            EndCause::ShutDownByHost => {
                format!("the kernel was shut down by the host while the cell ran ({exit})")
            }
            EndCause::Silenced => {
                "the kernel closed its protocol pipe and stopped answering; it was killed"
                    .to_string()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_cause_set_is_the_one_told() {
        let ending = Ending::default();
        assert_eq!(ending.cause(), None);
        ending.set(EndCause::ProcessLimit { limit: 8 });
        ending.set(EndCause::ShutDownByHost);
        assert_eq!(ending.cause(), Some(&EndCause::ProcessLimit { limit: 8 }));
        let exit = ExitInfo {
            code: None,
            signal: Some(9),
        };
        assert!(ending
            .cause()
            .unwrap()
            .told(&exit)
            .contains("more than 8 processes"));
    }
}
