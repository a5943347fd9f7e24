//! What a launched kernel's far side says of its cache, as the frame reader takes it from
//! the link: whether it needs the runner sent (`farPayload`, first on the link), and the
//! hash of the bytecode it compiled (`farBytecode`), kept for the next start.

use tokio::sync::watch;

use crate::start::far_cache;
use crate::start::launcher::Launcher;

/// What the far side's bootstrap said first: whether it needs the runner sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum FarHello {
    #[default]
    Waiting,
    /// Its cache did not have the runner (or had it altered): the host sends it.
    Need,
    /// Its cache had the runner, checked: nothing is sent.
    Cached,
    /// The link ended first (no Python there, a refused login).
    Closed,
}

/// The far side's own frames about its cache, as the frame reader takes them.
pub(super) struct FarReports {
    pub(super) launcher: Launcher,
    pub(super) interpreter: String,
    /// This link's secret (see [`far_cache::nonce`]), sent once the far side said hello.
    pub(super) nonce: String,
    pub(super) hello: watch::Sender<FarHello>,
}

impl FarReports {
    pub(super) fn new(launcher: Launcher, interpreter: String) -> Self {
        Self {
            launcher,
            interpreter,
            nonce: far_cache::nonce(),
            hello: watch::Sender::default(),
        }
    }

    /// The bootstrap's `farPayload`: only the first counts (it comes before the kernel
    /// exists; a later one is a cell's). Whether it was taken.
    pub(super) fn said_hello(&self, need: bool) -> bool {
        self.hello.send_if_modified(|hello| {
            if *hello != FarHello::Waiting {
                return false;
            }
            *hello = if need {
                FarHello::Need
            } else {
                FarHello::Cached
            };
            true
        })
    }

    /// The link ended: a start still waiting for the hello stops waiting.
    pub(super) fn closed(&self) {
        self.hello.send_if_modified(|hello| {
            let waiting = *hello == FarHello::Waiting;
            if waiting {
                *hello = FarHello::Closed;
            }
            waiting
        });
    }

    /// A `farBytecode` frame: kept for the next start when it carries this link's nonce
    /// (the supervisor's; a cell never saw the nonce). Whether it was kept.
    pub(super) fn compiled(&self, sha256: &str, nonce: &str) -> bool {
        nonce == self.nonce && far_cache::remember(&self.launcher, &self.interpreter, sha256)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reports(word: &str) -> FarReports {
        let launcher = Launcher::new(vec!["env".into(), word.into()], None).unwrap();
        FarReports::new(launcher, "python3".into())
    }

    #[test]
    fn only_the_first_hello_counts_and_a_closed_link_ends_the_wait() {
        let far = reports("FAR_SIDE=hello");
        let seen = far.hello.subscribe();
        assert!(far.said_hello(false));
        assert_eq!(*seen.borrow(), FarHello::Cached);
        // A cell's forged hello, asking for the runner, changes nothing.
        assert!(!far.said_hello(true));
        far.closed();
        assert_eq!(*seen.borrow(), FarHello::Cached);

        let silent = reports("FAR_SIDE=silent");
        silent.closed();
        assert_eq!(*silent.hello.borrow(), FarHello::Closed);
        assert!(!silent.said_hello(true), "a hello after the end");
    }

    #[test]
    fn a_bytecode_hash_is_vouched_for_only_with_the_links_nonce() {
        let far = reports("FAR_SIDE=nonce");
        let other = reports("FAR_SIDE=nonce");
        assert_ne!(far.nonce, other.nonce, "each link has its own");
        let sha = "0f".repeat(32);
        // A cell's frame: it never saw the nonce (nor another link's).
        assert!(!far.compiled(&sha, ""));
        assert!(!far.compiled(&sha, &other.nonce));
        assert_eq!(far_cache::vouched(&far.launcher, "python3"), None);
        assert!(!far.compiled("not a hash", &far.nonce));
        assert!(far.compiled(&sha, &far.nonce));
        assert_eq!(far_cache::vouched(&far.launcher, "python3"), Some(sha));
    }
}
