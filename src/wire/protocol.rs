//! NDJSON frames between the host and `runner.py` (`docs/protocol.md` is the wire document).
//!
//! Read tolerantly, write strictly: every frame the runner may send decodes into
//! [`RunnerFrame`]; unknown frame types become [`RunnerFrame::Unknown`] instead of an
//! error, and a line that does not parse yields a [`DecodeError`] naming the frame type it
//! claimed to be. Nothing here panics on input. This module knows neither napi nor tokio.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A frame the host writes to the runner's stdin.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum HostFrame {
    Init {
        id: String,
        cwd: String,
        env: BTreeMap<String, String>,
        status_mime: String,
        prelude: Option<String>,
        env_prefix: String,
        /// The session's kv store file (`kv` in the prelude); absent without one.
        #[serde(skip_serializing_if = "Option::is_none")]
        kv_path: Option<String>,
        /// The store is the host's, reached through `__pykernel.kv` calls (a launched
        /// kernel cannot see the host's files).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        kv_via_host: bool,
        /// The agent `agent()` asks for when the cell names none; absent: the runner's
        /// own default, `"deep"`.
        #[serde(skip_serializing_if = "Option::is_none")]
        default_agent: Option<String>,
        /// What the kernel's sandbox confines, so the runner can name what it refuses;
        /// absent with the sandbox off and for a launched kernel.
        #[serde(skip_serializing_if = "Option::is_none")]
        sandbox: Option<SandboxPolicy>,
    },
    Execute {
        id: String,
        code: String,
        silent: bool,
        store_history: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        /// For this request only; `None` values unset the variable (`docs/protocol.md#execute`).
        #[serde(skip_serializing_if = "Option::is_none")]
        env: Option<BTreeMap<String, Option<String>>>,
    },
    Reply {
        call_id: String,
        ok: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    Ping {
        id: String,
    },
    /// Import these modules ahead, outside the user's namespace (a pool's spare, so a
    /// session that claims it finds them in `sys.modules`). Answered by `preloaded`.
    Preload {
        id: String,
        modules: Vec<String>,
    },
    /// Whether `code`, a REPL's lines so far, is a cell to run (as `codeop` answers
    /// `Lib/code.py`), after the runner's input rules. Answered by `completeness`.
    IsComplete {
        id: String,
        code: String,
    },
    /// Stop request `id`: sent before the SIGINT, so an interrupt that lands before the
    /// cell is running (and is ignored there) still reaches it when the cell starts.
    Interrupt {
        id: String,
    },
    Exit,
    /// A signal for the kernel's process group, delivered by the far side's supervisor
    /// (a launcher passes no signals on). `SIGINT`, `SIGTERM` or `SIGKILL`.
    Signal {
        signal: &'static str,
    },
    /// Echoed by the far side's supervisor: the link is alive.
    Heartbeat,
    /// To the far side's supervisor, first after the runner (or in its place): the
    /// secret its `farBytecode` frame must carry, which no kernel ever sees; with a kept
    /// link, also the token the first later link must bring (see `kernel/far_link.rs`).
    FarNonce {
        nonce: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        token: Option<String>,
    },
}

/// What a kernel's sandbox lets it reach (`docs/protocol.md#init`), with paths as the
/// kernel sees them: absolute and real. The runner checks what a cell did against it, to
/// name each refusal and what the host could allow; it enforces nothing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SandboxPolicy {
    /// The directories writes are confined to; `None`: writes are not confined.
    pub writable: Option<Vec<String>>,
    /// How many of `writable`, first, are the workspace and the directories the host
    /// listed (the rest are the kernel's own: its TMPDIR, `/dev/shm`, its session's caches
    /// and installs); the host's, for the wording of a refusal (0: name them all).
    #[serde(skip)]
    pub workspace: usize,
    /// Read-only although beneath a writable directory.
    pub read_only: Vec<String>,
    /// Directories or files that appear empty or unreadable.
    pub hidden: Vec<String>,
    pub network: NetworkPolicy,
    /// The host names the proxy admits, with [`NetworkPolicy::Allow`] only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

/// What a kernel's network reaches.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NetworkPolicy {
    /// The host's network.
    Open,
    /// Loopback only (`sandbox.network: false`).
    #[serde(rename = "none")]
    Loopback,
    /// HTTP(S) to the allowed host names through the host's proxy; no direct route.
    Allow,
}

impl HostFrame {
    /// One NDJSON line, newline included. Strings are escaped by serde_json, so a frame can
    /// never span two lines whatever the cell's source holds.
    pub fn encode(&self) -> Vec<u8> {
        // Serializing these plain data types cannot fail: keys are strings, no floats.
        let mut line = serde_json::to_vec(self).expect("host frames always serialize");
        line.push(b'\n');
        line
    }
}

/// A frame the runner writes to its protocol stdout.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum RunnerFrame {
    Ready {
        #[serde(default)]
        id: Option<String>,
        pid: u32,
        #[serde(default)]
        python: String,
        #[serde(default)]
        executable: String,
    },
    /// The cell has begun. Informational: the runner may write it together with the
    /// request's next frame, so it is no signal that an interrupt would now land.
    Started {
        id: Option<String>,
    },
    Stdout {
        id: Option<String>,
        #[serde(default)]
        data: String,
        /// Output of a request that had ended, delivered with this one.
        #[serde(default)]
        late: bool,
    },
    Stderr {
        id: Option<String>,
        #[serde(default)]
        data: String,
        #[serde(default)]
        late: bool,
    },
    Display {
        id: Option<String>,
        #[serde(default)]
        bundle: Value,
        #[serde(default)]
        display_id: Option<String>,
        #[serde(default)]
        update: bool,
    },
    Result {
        id: Option<String>,
        #[serde(default)]
        bundle: Value,
    },
    Clear {
        id: Option<String>,
        #[serde(default)]
        wait: bool,
    },
    Error {
        id: Option<String>,
        #[serde(default)]
        ename: String,
        #[serde(default)]
        evalue: String,
        #[serde(default)]
        traceback: Vec<String>,
    },
    /// From the far side's supervisor, last: how the kernel process ended there.
    KernelExit {
        #[serde(default)]
        code: Option<i32>,
        #[serde(default)]
        signal: Option<i32>,
    },
    /// The far side's supervisor echoing a heartbeat.
    Heartbeat,
    /// The far side's bootstrap, first on the link: whether the host must send the
    /// runner (`need`), or its cache had it.
    FarPayload {
        need: bool,
    },
    /// The far side's supervisor: the sha256 of the runner's bytecode it compiled and
    /// cached, with the host's nonce for the link.
    FarBytecode {
        sha256: String,
        nonce: String,
    },
    Call {
        id: Option<String>,
        call_id: String,
        name: String,
        #[serde(default)]
        args: Value,
    },
    Pong {
        id: Option<String>,
    },
    /// The `preload` is over; `errors` maps each module that failed to its exception.
    Preloaded {
        id: Option<String>,
        #[serde(default)]
        errors: BTreeMap<String, String>,
    },
    /// The answer to `isComplete`.
    Completeness {
        id: Option<String>,
        status: Completeness,
    },
    Done {
        id: Option<String>,
        #[serde(default)]
        status: DoneStatus,
        #[serde(default)]
        execution_count: u32,
        #[serde(default)]
        cancelled: bool,
        #[serde(default)]
        stdin_requested: bool,
    },
    /// A frame type this host does not know; newer runners may send more.
    #[serde(other)]
    Unknown,
}

/// Whether a REPL's lines are a cell to run (`isComplete`).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Completeness {
    /// Run it.
    Complete,
    /// More lines are needed: an open bracket or string, a block without its blank line.
    Incomplete,
    /// It cannot compile however it goes on; run it, so Python reports the error. A status
    /// this host does not know is taken for this one.
    #[serde(other)]
    Invalid,
}

impl Completeness {
    pub fn as_str(self) -> &'static str {
        match self {
            Completeness::Complete => "complete",
            Completeness::Incomplete => "incomplete",
            Completeness::Invalid => "invalid",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DoneStatus {
    #[default]
    Ok,
    Error,
}

impl RunnerFrame {
    /// The request this frame belongs to; `None` for output that no request owns.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            RunnerFrame::Ready { id, .. }
            | RunnerFrame::Started { id }
            | RunnerFrame::Stdout { id, .. }
            | RunnerFrame::Stderr { id, .. }
            | RunnerFrame::Display { id, .. }
            | RunnerFrame::Result { id, .. }
            | RunnerFrame::Clear { id, .. }
            | RunnerFrame::Error { id, .. }
            | RunnerFrame::Call { id, .. }
            | RunnerFrame::Pong { id }
            | RunnerFrame::Preloaded { id, .. }
            | RunnerFrame::Completeness { id, .. }
            | RunnerFrame::Done { id, .. } => id.as_deref(),
            RunnerFrame::KernelExit { .. }
            | RunnerFrame::Heartbeat
            | RunnerFrame::FarPayload { .. }
            | RunnerFrame::FarBytecode { .. }
            | RunnerFrame::Unknown => None,
        }
    }
}

/// A runner line that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot decode runner frame (type {frame_type}): {reason}")]
pub struct DecodeError {
    /// The `type` the line claimed, or `<none>` / `<not json>`.
    pub frame_type: String,
    pub reason: String,
}

/// Decodes one line (without its newline). Blank lines are the caller's to skip.
pub fn decode(line: &[u8]) -> Result<RunnerFrame, DecodeError> {
    serde_json::from_slice::<RunnerFrame>(line).map_err(|err| DecodeError {
        frame_type: claimed_type(line),
        reason: err.to_string(),
    })
}

/// The `type` a line that failed to decode claims, for the error. Read without building
/// the rest of the line: a 64 MiB line of `[0,0,...]` as a `Value` would take a gigabyte.
fn claimed_type(line: &[u8]) -> String {
    #[derive(Deserialize)]
    struct TypeOnly<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    match serde_json::from_slice::<TypeOnly>(line) {
        Ok(TypeOnly { kind: Some(kind) }) => kind.into_owned(),
        Ok(TypeOnly { kind: None }) => "<none>".to_string(),
        Err(err) if err.is_data() => {
            if line.trim_ascii_start().starts_with(b"{") {
                "<none>".to_string() // an object whose `type` is not a string
            } else {
                "<not an object>".to_string()
            }
        }
        Err(_) => "<not json>".to_string(),
    }
}

/// Decodes one line as [`decode`] does, or, when that fails, the frame that starts last in
/// it: a real frame may have stray bytes in front (something in the kernel wrote to the
/// protocol pipe without a newline). The error is the whole line's.
pub fn decode_line(line: &[u8]) -> Result<RunnerFrame, DecodeError> {
    decode(line).or_else(|err| resync(line).ok_or(err))
}

/// The frame that starts last in `line`, after other bytes, if it decodes.
pub fn resync(line: &[u8]) -> Option<RunnerFrame> {
    const FRAME_START: &[u8] = b"{\"type\":";
    let start = line
        .windows(FRAME_START.len())
        .rposition(|w| w == FRAME_START)?;
    (start > 0).then(|| decode(&line[start..]).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_after_stray_bytes_is_recovered() {
        let line =
            br#"garbage{"type":"x"{"type":"done","id":"r1-0a","status":"ok","executionCount":2}"#;
        assert!(decode(line).is_err());
        assert_eq!(resync(line).unwrap().request_id(), Some("r1-0a"));
        assert_eq!(decode_line(line).unwrap().request_id(), Some("r1-0a"));
        assert!(resync(br#"{"type":"done","id":"r1""#).is_none());
        assert!(resync(b"no frame here").is_none());
        assert_eq!(
            decode_line(b"no frame here").unwrap_err().frame_type,
            "<not json>"
        );
    }

    #[test]
    fn encodes_execute_with_camel_case_and_one_line() {
        let frame = HostFrame::Execute {
            id: "r1".into(),
            code: "print('a')\nprint('b')".into(),
            silent: false,
            store_history: true,
            cwd: None,
            env: Some(BTreeMap::from([("A".to_string(), None)])),
        };
        let line = String::from_utf8(frame.encode()).unwrap();
        assert_eq!(line.matches('\n').count(), 1);
        assert!(line.ends_with('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["type"], "execute");
        assert_eq!(v["storeHistory"], true);
        assert_eq!(v["env"]["A"], Value::Null);
        assert!(v.get("cwd").is_none());
    }

    #[test]
    fn a_sandbox_policy_is_sent_in_its_wire_shape() {
        let policy = SandboxPolicy {
            writable: Some(vec!["/work".into(), "/tmp".into()]),
            workspace: 0,
            read_only: vec!["/work/.git".into()],
            hidden: vec!["/root/.ssh".into()],
            network: NetworkPolicy::Loopback,
            allow: vec![],
        };
        let init = |sandbox| HostFrame::Init {
            id: "init".into(),
            cwd: "/work".into(),
            env: BTreeMap::new(),
            status_mime: "application/x-pykernel-status".into(),
            prelude: None,
            env_prefix: "PYKERNEL_".into(),
            kv_path: None,
            kv_via_host: false,
            default_agent: None,
            sandbox,
        };
        let v: Value = serde_json::from_slice(&init(Some(policy.clone())).encode()).unwrap();
        assert_eq!(
            v["sandbox"],
            serde_json::json!({
                "writable": ["/work", "/tmp"],
                "readOnly": ["/work/.git"],
                "hidden": ["/root/.ssh"],
                "network": "none",
            })
        );
        assert_eq!(
            serde_json::from_value::<SandboxPolicy>(v["sandbox"].clone()).unwrap(),
            policy
        );
        // Unconfined writes are said (null), never left out; no policy, no field.
        let open = SandboxPolicy {
            writable: None,
            workspace: 0,
            read_only: vec![],
            hidden: vec![],
            network: NetworkPolicy::Allow,
            allow: vec!["pypi.org".into(), "*.pythonhosted.org".into()],
        };
        let v = serde_json::to_value(&open).unwrap();
        assert_eq!(v["writable"], Value::Null);
        assert_eq!(v["network"], "allow");
        assert_eq!(
            v["allow"],
            serde_json::json!(["pypi.org", "*.pythonhosted.org"])
        );
        let v: Value = serde_json::from_slice(&init(None).encode()).unwrap();
        assert!(v.get("sandbox").is_none());
        assert_eq!(
            serde_json::to_value(NetworkPolicy::Open).unwrap(),
            Value::from("open")
        );
    }

    #[test]
    fn encodes_exit_and_reply() {
        assert_eq!(HostFrame::Exit.encode(), b"{\"type\":\"exit\"}\n");
        let reply = HostFrame::Reply {
            call_id: "c1".into(),
            ok: false,
            value: None,
            error: Some("nope".into()),
        };
        let v: Value = serde_json::from_slice(&reply.encode()).unwrap();
        assert_eq!(v["callId"], "c1");
        assert_eq!(v["error"], "nope");
    }

    #[test]
    fn decodes_every_runner_frame() {
        let done = decode(br#"{"type":"done","id":"r1","status":"error","executionCount":3,"cancelled":true,"stdinRequested":false}"#).unwrap();
        assert_eq!(
            done,
            RunnerFrame::Done {
                id: Some("r1".into()),
                status: DoneStatus::Error,
                execution_count: 3,
                cancelled: true,
                stdin_requested: false
            }
        );
        let display = decode(br#"{"type":"display","id":"r1","bundle":{"text/plain":"1"},"displayId":"p","update":true}"#).unwrap();
        assert!(
            matches!(display, RunnerFrame::Display { update: true, display_id: Some(ref d), .. } if d == "p")
        );
        let call =
            decode(br#"{"type":"call","id":"r1","callId":"c9","name":"read","args":{"path":"x"}}"#)
                .unwrap();
        assert_eq!(call.request_id(), Some("r1"));
        let orphan = decode(br#"{"type":"stdout","id":null,"data":"late"}"#).unwrap();
        assert_eq!(orphan.request_id(), None);
    }

    #[test]
    fn is_complete_and_its_answer() {
        let ask = HostFrame::IsComplete {
            id: "c1-0a".into(),
            code: "if x:\n".into(),
        };
        assert_eq!(
            String::from_utf8(ask.encode()).unwrap(),
            "{\"type\":\"isComplete\",\"id\":\"c1-0a\",\"code\":\"if x:\\n\"}\n"
        );
        for (status, expected) in [
            ("complete", Completeness::Complete),
            ("incomplete", Completeness::Incomplete),
            ("invalid", Completeness::Invalid),
            ("unknown", Completeness::Invalid),
        ] {
            let line = format!(r#"{{"type":"completeness","id":"c1-0a","status":"{status}"}}"#);
            let frame = decode(line.as_bytes()).unwrap();
            assert_eq!(frame.request_id(), Some("c1-0a"));
            assert!(
                matches!(frame, RunnerFrame::Completeness { status, .. } if status == expected),
                "{status}"
            );
            assert_eq!(
                expected.as_str(),
                if status == "unknown" {
                    "invalid"
                } else {
                    status
                }
            );
        }
        assert_eq!(
            decode(br#"{"type":"completeness","id":"c1"}"#)
                .unwrap_err()
                .frame_type,
            "completeness"
        );
    }

    #[test]
    fn unknown_types_are_tolerated() {
        assert_eq!(
            decode(br#"{"type":"telemetry","x":1}"#).unwrap(),
            RunnerFrame::Unknown
        );
    }

    #[test]
    fn errors_name_the_frame_type() {
        let err = decode(br#"{"type":"done","id":"r1","executionCount":"three"}"#).unwrap_err();
        assert_eq!(err.frame_type, "done");
        assert_eq!(decode(b"hello world").unwrap_err().frame_type, "<not json>");
        assert_eq!(decode(b"[1,2]").unwrap_err().frame_type, "<not an object>");
        assert_eq!(decode(br#"{"id":"x"}"#).unwrap_err().frame_type, "<none>");
        assert_eq!(decode(br#"{"type":5}"#).unwrap_err().frame_type, "<none>");
        // Invalid UTF-8 and lone surrogate escapes are errors, never panics.
        assert!(decode(b"{\"type\":\"stdout\",\"data\":\"\xff\"}").is_err());
        let _ = decode(br#"{"type":"stdout","id":"r","data":"\ud800"}"#);
    }
}
