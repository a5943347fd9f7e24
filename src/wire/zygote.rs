//! The messages between the host and a zygote (`runner/pykernel_runner/zygote.py`): one JSON
//! object per datagram on a SEQPACKET socket, named by its `op`; file descriptors travel
//! beside a message as SCM_RIGHTS (a fork request's pipes and Landlock ruleset, a forked
//! kernel's pidfd).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the host asks of a zygote.
#[derive(Debug, Serialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum ToZygote<'a> {
    /// Fork a kernel. Its stdin, stdout and stderr go with it, and its Landlock ruleset
    /// when `landlock`.
    Fork {
        id: u64,
        env: &'a BTreeMap<String, String>,
        cwd: String,
        memory_limit: Option<u64>,
        /// `MALLOC_ARENA_MAX`, applied with `mallopt` (the kernel is never exec'd).
        arena_max: Option<u32>,
        landlock: bool,
        /// The sandbox the kernel sets up itself; `None` with the sandbox off.
        sandbox: Option<ForkedSandbox>,
    },
    /// Reap kernel `id`, which exited: only on the host's word, so its pid is never reused
    /// while the host may still signal it.
    Reap { id: u64 },
}

/// The part of a sandbox plan a forked kernel carries out itself, in its own namespaces
/// (see `sandbox::Plan::for_forked_kernel`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkedSandbox {
    /// The kernel keeps the host's network; `false`: a network namespace of its own.
    pub network: bool,
    /// With an allow list: the port its proxy's listener takes in its namespace (the
    /// listener goes to the host over the descriptor after the request's others).
    pub proxy_port: Option<u16>,
    /// Its view's mount steps, where it has a view.
    pub view: Option<Value>,
    /// The rights its view's own mounts get in its Landlock ruleset.
    pub landlock_view_access: u64,
    /// Those mounts (its `/dev/shm` and ptys, the overlay of its environment).
    pub view_writable: Vec<String>,
    /// Its seccomp programs, each as hex, installed in order.
    pub seccomp: Option<Vec<String>>,
    /// `keyctl`'s number on this architecture (the other calls the zygote makes have
    /// one number everywhere).
    pub keyctl: i64,
}

/// What a zygote tells the host.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum FromZygote {
    /// Its imports are done; it serves fork requests from now on.
    Ready {
        /// Modules that failed to import, with why.
        #[serde(default)]
        errors: BTreeMap<String, String>,
        #[serde(default)]
        threads: u64,
        #[serde(default)]
        python_threads: u64,
        /// Whether kernels get namespaces of their own.
        #[serde(default)]
        namespaces: bool,
        /// What its imports depend on: (path, mtime in ns, size).
        #[serde(default)]
        watch: Vec<(PathBuf, u64, u64)>,
    },
    /// Kernel `id` was forked; its pidfd goes with the message.
    Forked { id: u64 },
    /// Kernel `id` could not be forked.
    Failed {
        id: u64,
        #[serde(default)]
        error: Option<String>,
    },
    /// Kernel `id` exited (`status` is `None` when it could not be read).
    Exited { id: u64, status: Option<ExitStatus> },
}

/// How a forked kernel ended, as its zygote saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct ExitStatus {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_as_the_zygote_expects_them() {
        let env = BTreeMap::from([("A".to_string(), "1".to_string())]);
        let fork = ToZygote::Fork {
            id: 7,
            env: &env,
            cwd: "/w".into(),
            memory_limit: Some(1 << 30),
            arena_max: None,
            landlock: true,
            sandbox: Some(ForkedSandbox {
                network: false,
                proxy_port: None,
                view: None,
                landlock_view_access: 3,
                view_writable: vec!["/dev/shm".into()],
                seccomp: Some(vec!["00".into()]),
                keyctl: 250,
            }),
        };
        assert_eq!(
            serde_json::to_value(&fork).unwrap(),
            serde_json::json!({
                "op": "fork", "id": 7, "env": {"A": "1"}, "cwd": "/w",
                "memoryLimit": 1 << 30, "arenaMax": null, "landlock": true,
                "sandbox": {"network": false, "proxyPort": null, "view": null, "landlockViewAccess": 3, "viewWritable": ["/dev/shm"],
                            "seccomp": ["00"], "keyctl": 250},
            })
        );
        assert_eq!(
            serde_json::to_value(ToZygote::Reap { id: 3 }).unwrap(),
            serde_json::json!({"op": "reap", "id": 3})
        );
    }

    #[test]
    fn what_the_zygote_sends_is_read_and_nothing_else() {
        let ready: FromZygote = serde_json::from_str(
            r#"{"op": "ready", "errors": {"x": "ImportError: no"}, "watch": [["/p", 5, 6]],
                "threads": 1, "pythonThreads": 1, "namespaces": true}"#,
        )
        .unwrap();
        assert_eq!(
            ready,
            FromZygote::Ready {
                errors: BTreeMap::from([("x".into(), "ImportError: no".into())]),
                threads: 1,
                python_threads: 1,
                namespaces: true,
                watch: vec![(PathBuf::from("/p"), 5, 6)],
            }
        );
        let exited: FromZygote = serde_json::from_str(
            r#"{"op": "exited", "id": 4, "status": {"code": null, "signal": 9}}"#,
        )
        .unwrap();
        assert_eq!(
            exited,
            FromZygote::Exited {
                id: 4,
                status: Some(ExitStatus {
                    code: None,
                    signal: Some(9)
                })
            }
        );
        assert!(serde_json::from_str::<FromZygote>(r#"{"op": "forked"}"#).is_err());
        assert!(serde_json::from_str::<FromZygote>(r#"{"op": "teleport", "id": 1}"#).is_err());
    }
}
