//! Where a pool's kernels run: the launcher of a session that names none (docs/launchers.md).
//!
//! A request may name its own launcher. Otherwise the pool places the session, once, when
//! its first kernel starts: over `launchers` in turn (round-robin) or on the one running
//! the fewest of the pool's kernels (least-loaded), or where the host's `launcherFor`
//! says. The pool keeps the choice for the session's life, so a reset or a restart after
//! a crash runs on the same launcher.
//!
//! Least-loaded counts kernels, not sessions: every kernel of the pool started through a
//! launcher holds a [`Load`] on it until it is gone, and a choice takes its own at once,
//! so sessions placed at the same moment see each other and spread out.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{KernelError, Result};
use crate::start::launcher::Launcher;

/// Who a session is, as the host's `launcherFor` is told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRef {
    pub session_id: Option<String>,
    pub session_file: Option<String>,
    /// The request's `ownerId`, when it gave one.
    pub owner_id: Option<String>,
}

/// What the host's `launcherFor` answered: an argv prefix, or `None` for the pool's
/// default; `Err` says in words what went wrong (it threw, or returned no argv).
pub type HostAnswer = std::result::Result<Option<Vec<String>>, String>;

/// The host's choice of launcher for a session.
pub trait LauncherFor: Send + Sync {
    fn launcher_for(&self, session: SessionRef)
        -> Pin<Box<dyn Future<Output = HostAnswer> + Send>>;
}

/// How a session is placed over a list of launchers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Each new session on the next launcher of the list.
    RoundRobin,
    /// On the launcher with the fewest of the pool's kernels; ties go to the earlier one.
    LeastLoaded,
}

/// Where sessions that name no launcher run, when not on the pool's default.
#[derive(Clone)]
pub enum Placement {
    Launchers {
        launchers: Vec<Launcher>,
        order: Order,
    },
    Host(Arc<dyn LauncherFor>),
}

/// Decides where sessions run.
pub struct Placer {
    placement: Option<Placement>,
    /// `kernel.launcher`, or `None` for here.
    default: Option<Launcher>,
    /// How the words after a launcher the host returns are passed (`launcherShell`).
    shell: Option<bool>,
    next: AtomicUsize,
    loads: Arc<Loads>,
}

impl Placer {
    pub fn new(
        placement: Option<Placement>,
        default: Option<Launcher>,
        shell: Option<bool>,
    ) -> Self {
        Self {
            placement,
            default,
            shell,
            next: AtomicUsize::new(0),
            loads: Arc::default(),
        }
    }

    /// Whether sessions that name no launcher are placed (else they run on the default).
    pub fn places(&self) -> bool {
        self.placement.is_some()
    }

    /// The kernels of the pool counted on each launcher.
    pub fn loads(&self) -> &Arc<Loads> {
        &self.loads
    }

    /// Where the session runs: its launcher (`None`: here), and for a least-loaded choice
    /// the count it took, to be held by the kernel started there. A `launcherFor` that
    /// throws or returns no argv is `ERR_INVALID_ARG` naming it.
    pub async fn place(&self, session: SessionRef) -> Result<(Option<Launcher>, Option<Load>)> {
        match &self.placement {
            None => Ok((self.default.clone(), None)),
            Some(Placement::Launchers { launchers, order }) => Ok(match order {
                Order::RoundRobin => {
                    let turn = self.next.fetch_add(1, Ordering::Relaxed);
                    (Some(launchers[turn % launchers.len()].clone()), None)
                }
                Order::LeastLoaded => {
                    let (launcher, load) = self.loads.least(launchers);
                    (Some(launcher), Some(load))
                }
            }),
            Some(Placement::Host(host)) => {
                let refused = |reason: String| KernelError::InvalidArgument {
                    name: "launcherFor",
                    reason,
                };
                match host.launcher_for(session).await.map_err(refused)? {
                    None => Ok((self.default.clone(), None)),
                    Some(argv) => match Launcher::new(argv, self.shell) {
                        Ok(launcher) => Ok((Some(launcher), None)),
                        Err(KernelError::InvalidArgument { reason, .. }) => {
                            Err(refused(format!("returned an unusable launcher: {reason}")))
                        }
                        Err(other) => Err(other),
                    },
                }
            }
        }
    }
}

/// How many of the pool's kernels run through each launcher.
#[derive(Default)]
pub struct Loads {
    counts: Mutex<HashMap<Launcher, usize>>,
}

/// One kernel counted on its launcher, until dropped.
pub struct Load {
    loads: Arc<Loads>,
    launcher: Launcher,
}

impl Loads {
    /// Counts one more kernel on `launcher`.
    pub fn count(self: &Arc<Self>, launcher: &Launcher) -> Load {
        *self
            .counts
            .lock()
            .unwrap()
            .entry(launcher.clone())
            .or_default() += 1;
        Load {
            loads: self.clone(),
            launcher: launcher.clone(),
        }
    }

    /// The launcher of `launchers` running the fewest kernels (the earliest of those),
    /// counted at once so that the next choice sees it.
    fn least(self: &Arc<Self>, launchers: &[Launcher]) -> (Launcher, Load) {
        let mut counts = self.counts.lock().unwrap();
        let launcher = launchers
            .iter()
            .min_by_key(|l| counts.get(*l).copied().unwrap_or(0))
            .expect("a placement list is never empty")
            .clone();
        *counts.entry(launcher.clone()).or_default() += 1;
        let load = Load {
            loads: self.clone(),
            launcher: launcher.clone(),
        };
        (launcher, load)
    }

    /// How many kernels run through `launcher`.
    pub fn of(&self, launcher: &Launcher) -> usize {
        self.counts
            .lock()
            .unwrap()
            .get(launcher)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        let mut counts = self.loads.counts.lock().unwrap();
        if let Some(n) = counts.get_mut(&self.launcher) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.launcher);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launcher(word: &str) -> Launcher {
        Launcher::new(vec!["env".into(), word.into()], None).unwrap()
    }

    fn run<T>(fut: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(fut)
    }

    #[test]
    fn round_robin_goes_around_the_list() {
        let (a, b) = (launcher("A=1"), launcher("B=1"));
        let placer = Placer::new(
            Some(Placement::Launchers {
                launchers: vec![a.clone(), b.clone()],
                order: Order::RoundRobin,
            }),
            None,
            None,
        );
        let placed: Vec<_> = (0..4)
            .map(|_| run(placer.place(SessionRef::default())).unwrap().0.unwrap())
            .collect();
        assert_eq!(placed, [a.clone(), b.clone(), a, b]);
    }

    #[test]
    fn least_loaded_counts_live_kernels_and_its_own_choices() {
        let (a, b) = (launcher("A=1"), launcher("B=1"));
        let placer = Placer::new(
            Some(Placement::Launchers {
                launchers: vec![a.clone(), b.clone()],
                order: Order::LeastLoaded,
            }),
            None,
            None,
        );
        let place = || run(placer.place(SessionRef::default())).unwrap();
        let (first, first_load) = place();
        let (second, _second_load) = place();
        assert_eq!((first, second), (Some(a.clone()), Some(b.clone())));
        // A kernel started through b outside the list's choices counts too.
        let _other = placer.loads().count(&b);
        let (third, _third_load) = place();
        assert_eq!(third, Some(a.clone()));
        assert_eq!((placer.loads().of(&a), placer.loads().of(&b)), (2, 2));
        drop(first_load);
        assert_eq!(placer.loads().of(&a), 1);
        // Ties go to the earlier launcher of the list.
        let (fourth, _fourth_load) = place();
        assert_eq!(fourth, Some(a));
    }

    struct Answer(HostAnswer);

    impl LauncherFor for Answer {
        fn launcher_for(
            &self,
            _session: SessionRef,
        ) -> Pin<Box<dyn Future<Output = HostAnswer> + Send>> {
            let answer = self.0.clone();
            Box::pin(async move { answer })
        }
    }

    #[test]
    fn the_hosts_answer_is_checked_and_none_is_the_default() {
        let default = launcher("D=1");
        let host = |answer: HostAnswer| {
            Placer::new(
                Some(Placement::Host(Arc::new(Answer(answer)))),
                Some(default.clone()),
                None,
            )
        };
        let place = |placer: Placer| run(placer.place(SessionRef::default())).map(|p| p.0);
        assert_eq!(place(host(Ok(None))).unwrap(), Some(default.clone()));
        assert_eq!(
            place(host(Ok(Some(vec!["env".into(), "X=1".into()])))).unwrap(),
            Some(launcher("X=1"))
        );
        let err = place(host(Ok(Some(vec![])))).unwrap_err();
        assert_eq!(err.code(), "ERR_INVALID_ARG");
        assert!(err.to_string().starts_with("invalid argument `launcherFor`: returned an unusable launcher: must name a program"), "{err}");
        let err = place(host(Err("threw: no route".into()))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid argument `launcherFor`: threw: no route"
        );
    }
}
