//! Where a session's kernels run ([`Site`]): placed when it is admitted, or once the pool
//! has placed it, as its first kernel starts.

use std::path::PathBuf;

use crate::kernel::KernelConfig;
use crate::session::placement::SessionRef;

/// The settings a session's kernels start with (a per-call request's too): known when it
/// is admitted, or once the pool has placed it, as its first kernel starts.
#[derive(Clone)]
pub(super) enum Site {
    Placed(Box<KernelConfig>),
    Unplaced(Unplaced),
}

impl Site {
    /// The site of a session: its kernels know their session (the kv store, bridge calls).
    pub(super) fn for_session(self, session_id: String) -> Site {
        match self {
            Site::Placed(mut config) => {
                config.session_id = Some(session_id);
                Site::Placed(config)
            }
            Site::Unplaced(mut unplaced) => {
                unplaced.session_id = Some(session_id);
                Site::Unplaced(unplaced)
            }
        }
    }
}

/// A request the pool has yet to place: what it asked for, and who it is.
#[derive(Clone)]
pub(super) struct Unplaced {
    /// As the request gave it: whether it is a local path depends on the placement.
    pub(super) cwd: Option<PathBuf>,
    /// The request's, else the pool's.
    pub(super) interpreter: Option<String>,
    pub(super) session_id: Option<String>,
    pub(super) who: SessionRef,
}
