//! Sandbox refusals in the agent's text. The runner reports each distinct thing its sandbox
//! refused a cell as a status event (`{op: 'sandbox', data: {denied, path | host}}`,
//! `docs/protocol.md#sandbox-refusals`); here each becomes one notice line at the head of
//! `output` that says what was refused and how the host allows it, worded by the kernel's
//! [`SandboxPolicy`]. The events stay in `statuses` for a host to act on.

use std::collections::HashSet;
use std::path::Path;

use serde_json::{Map, Value};

use crate::wire::events::StatusEvent;
use crate::wire::protocol::{NetworkPolicy, SandboxPolicy};

/// The most refusal lines one request's text carries; the rest are counted in one more.
pub const MAX_REFUSAL_NOTICES: usize = 10;

/// The longest a refusal line may be (the brackets aside): a path or a host name that would
/// take it past is shortened in the middle.
const NOTICE_CHARS: usize = 250;

/// The most of a write's line its path takes: the rest says where writes go.
const NAME_CHARS: usize = 100;

/// One refusal, as a runner's status event reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A write (or a metadata change) outside the writable directories, or beneath a
    /// read-only one.
    Write { path: String },
    /// A read of a hidden path (it appears empty or missing).
    Read { path: String },
    /// A connection the kernel's network has no route for; `host` is `name:port` or
    /// `ip:port`.
    Connect { host: String },
    /// Refusals of the cell past the runner's cap, not reported one by one.
    More { count: u64 },
}

impl Refusal {
    /// The refusal a status event reports; `None` for any other event (the sandbox's
    /// `{mode, missing}` notice included).
    pub fn from_status(op: &str, data: &Map<String, Value>) -> Option<Refusal> {
        if op != "sandbox" {
            return None;
        }
        let text = |key: &str| data.get(key).and_then(Value::as_str).map(str::to_string);
        match data.get("denied").and_then(Value::as_str)? {
            "write" => Some(Refusal::Write {
                path: text("path")?,
            }),
            "read" => Some(Refusal::Read {
                path: text("path")?,
            }),
            "connect" => Some(Refusal::Connect {
                host: text("host")?,
            }),
            "more" => Some(Refusal::More {
                count: data.get("count").and_then(Value::as_u64)?,
            }),
            _ => None,
        }
    }
}

/// The notice for `refusal` (without its brackets): what was refused, why, and which
/// option of the host's would allow it. Within [`NOTICE_CHARS`] whatever the path; `None`
/// for [`Refusal::More`], which is counted instead.
pub fn refusal_notice(refusal: &Refusal, policy: Option<&SandboxPolicy>) -> Option<String> {
    let notice = match refusal {
        Refusal::Write { path } => {
            let path = clean(path);
            let head = format!(
                "sandbox: writing {} was refused; ",
                shorten(&path, NAME_CHARS)
            );
            let tail = ": the host can allow more with sandbox.writable";
            let room = room_beside(&[&head, tail]);
            let read_only = policy.and_then(|p| beneath_any(&path, &p.read_only));
            let rule = match (read_only, policy.and_then(|p| p.writable.as_deref())) {
                (Some(dir), _) => {
                    let words = " is read-only in this kernel";
                    let dir = shorten(&clean(dir), room.saturating_sub(words.len()));
                    format!("{dir}{words}")
                }
                (None, Some(dirs)) => {
                    let words = "this kernel writes only beneath ";
                    let room = room.saturating_sub(words.len());
                    // The kernel's own directories (its TMPDIR, caches, installs) are its
                    // business, not the model's: the workspace is named, they are not.
                    let own = " (and its own TMPDIR, caches and installs)";
                    let workspace = policy.map_or(0, |p| p.workspace).min(dirs.len());
                    match room.checked_sub(own.len()) {
                        Some(left) if workspace > 0 && left >= 12 => {
                            format!("{words}{}{own}", listed(&dirs[..workspace], left))
                        }
                        _ => format!("{words}{}", listed(dirs, room)),
                    }
                }
                (None, None) => "this kernel's sandbox keeps it read-only".to_string(),
            };
            format!("{head}{rule}{tail}")
        }
        Refusal::Read { path } => {
            let path = clean(path);
            let shown = policy
                .and_then(|p| beneath_any(&path, &p.hidden))
                .map_or(path.clone(), |entry| clean(entry));
            let (head, tail) = (
                "sandbox: ",
                " is hidden from this kernel; the host can show it by leaving it out of sandbox.hidden",
            );
            let shown = shorten(&shown, room_beside(&[head, tail]));
            format!("{head}{shown}{tail}")
        }
        Refusal::Connect { host } => {
            let why = match policy.map(|p| p.network) {
                Some(NetworkPolicy::Allow) => "this kernel reaches only the hosts of sandbox.network.allow through its HTTP(S) proxy; direct connections have no route: the host can add it to that list",
                Some(NetworkPolicy::Loopback) => "this kernel has no network (loopback only): the host can allow it with sandbox.network",
                Some(NetworkPolicy::Open) | None => "this kernel's network has no route for it: the host can allow it with sandbox.network",
            };
            let (head, tail) = (
                "sandbox: the connection to ",
                format!(" was refused; {why}"),
            );
            let host = shorten(&clean(host), room_beside(&[head, &tail]));
            format!("{head}{host}{tail}")
        }
        Refusal::More { .. } => return None,
    };
    Some(notice)
}

/// The refusal lines of one request: each distinct line once, at most
/// [`MAX_REFUSAL_NOTICES`], then one that counts the rest.
#[derive(Debug, Default)]
pub struct RefusalNotices {
    lines: Vec<String>,
    seen: HashSet<String>,
    /// Distinct refusals past the cap: their status events name them.
    past_cap: u64,
    /// Refusals the runner counted past its own cap and named in no event.
    unnamed: u64,
}

impl RefusalNotices {
    /// Adds the refusals among a cell's status events.
    pub fn add(&mut self, statuses: &[StatusEvent], policy: Option<&SandboxPolicy>) {
        for status in statuses {
            let Some(refusal) = Refusal::from_status(&status.op, &status.data) else {
                continue;
            };
            if let Refusal::More { count } = refusal {
                self.unnamed = self.unnamed.saturating_add(count);
                continue;
            }
            let Some(line) = refusal_notice(&refusal, policy) else {
                continue;
            };
            // Two files of one hidden directory make one line.
            if !self.seen.insert(line.clone()) {
                continue;
            }
            if self.lines.len() < MAX_REFUSAL_NOTICES {
                self.lines.push(line);
            } else {
                self.past_cap += 1;
            }
        }
    }

    /// The notices, in the order the refusals came, and the count of the rest.
    pub fn into_notices(self) -> Vec<String> {
        let mut notices = self.lines;
        let more = self.past_cap.saturating_add(self.unnamed);
        let noun = if more == 1 { "refusal" } else { "refusals" };
        match (self.past_cap, self.unnamed) {
            (0, 0) => {}
            (_, 0) => notices.push(format!(
                "sandbox: {more} more {noun}, see the status events"
            )),
            (0, _) => notices.push(format!(
                "sandbox: {more} more {noun} (a cell names at most {MAX_REFUSAL_NOTICES})"
            )),
            (named, unnamed) => notices.push(format!(
                "sandbox: {more} more {noun}: {named} in the status events, {unnamed} not named (a cell names at most {MAX_REFUSAL_NOTICES})"
            )),
        }
        notices
    }
}

/// The entry of `entries` that `path` is or is beneath.
fn beneath_any<'a>(path: &str, entries: &'a [String]) -> Option<&'a String> {
    entries
        .iter()
        .find(|entry| Path::new(path).starts_with(Path::new(entry.as_str())))
}

/// `dirs` as a list in words (`/a, /b and /c`) within `chars`: as many as fit whole, the
/// rest counted (`/a and 3 more`), the first shortened if even it does not fit.
fn listed(dirs: &[String], chars: usize) -> String {
    let dirs: Vec<String> = dirs.iter().map(|d| clean(d)).collect();
    let words = |some: &[String], rest: usize| match (some, rest) {
        ([only], 0) => only.clone(),
        (some, 0) => format!(
            "{} and {}",
            some[..some.len() - 1].join(", "),
            some[some.len() - 1]
        ),
        (some, rest) => format!("{} and {rest} more", some.join(", ")),
    };
    if dirs.is_empty() {
        return "no directory".to_string();
    }
    for shown in (1..=dirs.len()).rev() {
        let text = words(&dirs[..shown], dirs.len() - shown);
        if text.chars().count() <= chars {
            return text;
        }
    }
    let rest = dirs.len() - 1;
    let counted = if rest > 0 {
        format!(" and {rest} more")
    } else {
        String::new()
    };
    format!(
        "{}{counted}",
        shorten(&dirs[0], chars.saturating_sub(counted.len()))
    )
}

/// What is left of a notice for a path or host name beside `parts`, never under a few
/// characters (a name shortened to nothing says nothing).
fn room_beside(parts: &[&str]) -> usize {
    let taken: usize = parts.iter().map(|p| p.chars().count()).sum();
    NOTICE_CHARS.saturating_sub(taken).max(12)
}

/// `text` with its middle replaced by `…` when it is longer than `chars`.
fn shorten(text: &str, chars: usize) -> String {
    let count = text.chars().count();
    if count <= chars {
        return text.to_string();
    }
    let keep = chars.saturating_sub(1);
    let head: String = text.chars().take(keep / 2).collect();
    let tail: String = text.chars().skip(count - (keep - keep / 2)).collect();
    format!("{head}…{tail}")
}

/// A path or host name from the kernel on one line: control characters would break the
/// notice (a file name may hold a newline).
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(network: NetworkPolicy) -> SandboxPolicy {
        SandboxPolicy {
            writable: Some(vec!["/work/app".into(), "/tmp".into(), "/dev/shm".into()]),
            workspace: 1,
            read_only: vec!["/work/app/.git".into()],
            hidden: vec!["/root/.ssh".into(), "/var/artifacts".into()],
            network,
            allow: vec![],
        }
    }

    fn status(data: Value) -> StatusEvent {
        StatusEvent {
            op: "sandbox".into(),
            data: data.as_object().unwrap().clone(),
        }
    }

    fn notice(refusal: Refusal, network: NetworkPolicy) -> String {
        refusal_notice(&refusal, Some(&policy(network))).unwrap()
    }

    #[test]
    fn each_refusal_says_what_was_refused_and_how_the_host_allows_it() {
        let write = Refusal::Write {
            path: "/root/.bashrc".into(),
        };
        assert_eq!(
            notice(write.clone(), NetworkPolicy::Open),
            "sandbox: writing /root/.bashrc was refused; this kernel writes only beneath /work/app (and its own TMPDIR, caches and installs): the host can allow more with sandbox.writable"
        );
        // A policy that does not say which are the workspace names them all.
        let unsorted = SandboxPolicy {
            workspace: 0,
            ..policy(NetworkPolicy::Open)
        };
        assert_eq!(
            refusal_notice(&write, Some(&unsorted)).unwrap(),
            "sandbox: writing /root/.bashrc was refused; this kernel writes only beneath /work/app, /tmp and /dev/shm: the host can allow more with sandbox.writable"
        );
        let git = Refusal::Write {
            path: "/work/app/.git/config".into(),
        };
        assert_eq!(
            notice(git, NetworkPolicy::Open),
            "sandbox: writing /work/app/.git/config was refused; /work/app/.git is read-only in this kernel: the host can allow more with sandbox.writable"
        );
        let key = Refusal::Read {
            path: "/root/.ssh/id_ed25519".into(),
        };
        assert_eq!(
            notice(key, NetworkPolicy::Open),
            "sandbox: /root/.ssh is hidden from this kernel; the host can show it by leaving it out of sandbox.hidden"
        );
        let connect = || Refusal::Connect {
            host: "10.1.2.3:443".into(),
        };
        assert_eq!(
            notice(connect(), NetworkPolicy::Loopback),
            "sandbox: the connection to 10.1.2.3:443 was refused; this kernel has no network (loopback only): the host can allow it with sandbox.network"
        );
        assert_eq!(
            notice(connect(), NetworkPolicy::Allow),
            "sandbox: the connection to 10.1.2.3:443 was refused; this kernel reaches only the hosts of sandbox.network.allow through its HTTP(S) proxy; direct connections have no route: the host can add it to that list"
        );
        assert_eq!(refusal_notice(&Refusal::More { count: 3 }, None), None);
    }

    #[test]
    fn a_line_stays_short_and_on_one_line_whatever_the_kernel_sent() {
        let long = format!("/data/{}/file\nname", "deep/".repeat(200));
        let write = notice(Refusal::Write { path: long.clone() }, NetworkPolicy::Open);
        let read = notice(Refusal::Read { path: long.clone() }, NetworkPolicy::Open);
        let connect = notice(
            Refusal::Connect {
                host: format!("{}.example:443", "a".repeat(500)),
            },
            NetworkPolicy::Allow,
        );
        let mut many = policy(NetworkPolicy::Open);
        many.writable = Some((0..50).map(|i| format!("/srv/data/volume-{i}")).collect());
        many.workspace = 0;
        let listed = refusal_notice(
            &Refusal::Write {
                path: "/etc/x".into(),
            },
            Some(&many),
        )
        .unwrap();
        for line in [&write, &read, &connect, &listed] {
            assert!(
                line.chars().count() <= NOTICE_CHARS,
                "{} chars: {line}",
                line.chars().count()
            );
            assert!(!line.contains('\n'), "{line}");
        }
        assert!(write.starts_with("sandbox: writing /data/deep/"), "{write}");
        assert!(write.contains("…"), "{write}");
        assert!(write.contains("file?name was refused"), "{write}");
        assert!(
            listed.contains("/srv/data/volume-0, /srv/data/volume-1"),
            "{listed}"
        );
        assert!(
            listed.contains(" more: the host can allow more"),
            "{listed}"
        );
        assert!(connect.ends_with("add it to that list"), "{connect}");
        // The refused path comes first: a long list of writable directories gives way.
        let mut long = policy(NetworkPolicy::Open);
        long.writable = Some(vec![format!("/{}", "w".repeat(300)), "/tmp".into()]);
        long.workspace = 0;
        let path = format!("/var/tmp/{}/file", "p".repeat(70));
        let line = refusal_notice(&Refusal::Write { path: path.clone() }, Some(&long)).unwrap();
        assert!(line.chars().count() <= NOTICE_CHARS, "{line}");
        assert!(
            line.contains(&format!("writing {path} was refused")),
            "{line}"
        );
        assert!(line.contains("w…w"), "{line}");
        assert!(line.contains(" and 1 more: the host"), "{line}");
    }

    #[test]
    fn without_a_policy_the_line_still_names_the_refusal() {
        let write = refusal_notice(
            &Refusal::Write {
                path: "/etc/x".into(),
            },
            None,
        )
        .unwrap();
        assert!(
            write.starts_with("sandbox: writing /etc/x was refused; "),
            "{write}"
        );
        let read = refusal_notice(
            &Refusal::Read {
                path: "/secret/k".into(),
            },
            None,
        )
        .unwrap();
        assert!(read.starts_with("sandbox: /secret/k is hidden"), "{read}");
    }

    #[test]
    fn refusals_are_read_from_sandbox_status_events_only() {
        let data = |v: Value| v.as_object().unwrap().clone();
        assert_eq!(
            Refusal::from_status(
                "sandbox",
                &data(serde_json::json!({"denied": "write", "path": "/x"}))
            ),
            Some(Refusal::Write { path: "/x".into() })
        );
        assert_eq!(
            Refusal::from_status(
                "sandbox",
                &data(serde_json::json!({"denied": "connect", "host": "h:1"}))
            ),
            Some(Refusal::Connect { host: "h:1".into() })
        );
        assert_eq!(
            Refusal::from_status(
                "sandbox",
                &data(serde_json::json!({"denied": "more", "count": 4}))
            ),
            Some(Refusal::More { count: 4 })
        );
        for (op, v) in [
            (
                "sandbox",
                serde_json::json!({"mode": "landlock", "missing": ["x"]}),
            ),
            ("sandbox", serde_json::json!({"denied": "write"})),
            (
                "sandbox",
                serde_json::json!({"denied": "chmod", "path": "/x"}),
            ),
            ("pip", serde_json::json!({"denied": "write", "path": "/x"})),
        ] {
            assert_eq!(Refusal::from_status(op, &data(v)), None);
        }
    }

    #[test]
    fn a_request_carries_each_line_once_and_at_most_ten() {
        let policy = policy(NetworkPolicy::Loopback);
        let mut notices = RefusalNotices::default();
        let cell: Vec<StatusEvent> = [
            serde_json::json!({"denied": "read", "path": "/root/.ssh/id_rsa"}),
            serde_json::json!({"denied": "read", "path": "/root/.ssh/config"}),
            serde_json::json!({"denied": "write", "path": "/etc/a"}),
            serde_json::json!({"mode": "landlock", "missing": []}),
        ]
        .into_iter()
        .map(status)
        .collect();
        notices.add(&cell, Some(&policy));
        // The next cell refuses the same write again: it is not told twice.
        notices.add(&cell[2..3], Some(&policy));
        assert_eq!(notices.into_notices().len(), 2);

        let mut notices = RefusalNotices::default();
        let many: Vec<StatusEvent> = (0..13)
            .map(|i| status(serde_json::json!({"denied": "write", "path": format!("/etc/{i}")})))
            .collect();
        notices.add(&many, Some(&policy));
        let lines = notices.into_notices();
        assert_eq!(lines.len(), MAX_REFUSAL_NOTICES + 1);
        assert_eq!(lines[10], "sandbox: 3 more refusals, see the status events");

        let mut notices = RefusalNotices::default();
        notices.add(
            &[
                status(serde_json::json!({"denied": "write", "path": "/etc/a"})),
                status(serde_json::json!({"denied": "more", "count": 1})),
            ],
            Some(&policy),
        );
        assert_eq!(
            notices.into_notices()[1],
            "sandbox: 1 more refusal (a cell names at most 10)"
        );
    }
}
