//! What one cell produced: the streamed [`KernelEvent`]s and the [`ExecuteOutcome`] they
//! add up to. Built from runner frames; knows nothing about processes or JavaScript.

use serde_json::{json, Map, Value};

use crate::protocol::{DoneStatus, RunnerFrame};

#[derive(Debug, Clone, PartialEq)]
pub enum KernelEvent {
    Stdout(String),
    Stderr(String),
    Display {
        bundle: Value,
        display_id: Option<String>,
        update: bool,
    },
    Result(Value),
    Status {
        op: String,
        data: Map<String, Value>,
    },
    Clear {
        wait: bool,
    },
    Error(ErrorInfo),
}

impl KernelEvent {
    /// The JavaScript shape (`KernelEvent` in index.d.ts).
    /// The event as `onEvent` receives it. Consumes the event: a 20 MB print is moved into
    /// the JSON value, not copied.
    pub fn into_json(self) -> Value {
        // Built by hand: `json!` serializes its values by reference, which would copy them.
        let object = |kind: &str, fields: Vec<(&str, Value)>| {
            let mut map = Map::with_capacity(fields.len() + 1);
            map.insert("type".into(), Value::String(kind.into()));
            for (key, value) in fields {
                map.insert(key.into(), value);
            }
            Value::Object(map)
        };
        match self {
            KernelEvent::Stdout(text) => object("stdout", vec![("text", Value::String(text))]),
            KernelEvent::Stderr(text) => object("stderr", vec![("text", Value::String(text))]),
            KernelEvent::Display {
                bundle,
                display_id,
                update,
            } => {
                let mut fields = vec![("bundle", bundle)];
                if let Some(id) = display_id {
                    fields.push(("displayId", Value::String(id)));
                }
                if update {
                    fields.push(("update", Value::Bool(true)));
                }
                object("display", fields)
            }
            KernelEvent::Result(bundle) => object("result", vec![("bundle", bundle)]),
            KernelEvent::Status { op, data } => object(
                "status",
                vec![("op", Value::String(op)), ("data", Value::Object(data))],
            ),
            KernelEvent::Clear { wait } => object("clear", vec![("wait", Value::Bool(wait))]),
            KernelEvent::Error(e) => json!({
                "type": "error", "ename": e.ename, "evalue": e.evalue, "traceback": e.traceback
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ErrorInfo {
    pub ename: String,
    pub evalue: String,
    pub traceback: Vec<String>,
}

/// A status event as it is kept in the outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusEvent {
    pub op: String,
    pub data: Map<String, Value>,
}

/// The finished result of one cell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecuteOutcome {
    pub ok: bool,
    pub execution_count: u32,
    pub cancelled: bool,
    pub timed_out: bool,
    pub kernel_died: bool,
    /// The host ended the kernel (it ignored an interrupt, or broke its process limit).
    pub kernel_killed: bool,
    pub stdin_requested: bool,
    pub stdout: String,
    pub stderr: String,
    pub displays: Vec<Value>,
    pub statuses: Vec<StatusEvent>,
    pub result: Option<Value>,
    pub error: Option<ErrorInfo>,
    /// Bytes of stdout / stderr streamed as events but not kept, past the capture cap.
    pub stdout_dropped: u64,
    pub stderr_dropped: u64,
}

impl ExecuteOutcome {
    /// Says at the end of stdout / stderr how much was streamed but not kept, so a
    /// result past the capture cap is cut visibly, never lost or silently short.
    pub fn note_dropped(&mut self) {
        for (buf, dropped, stream) in [
            (&mut self.stdout, self.stdout_dropped, "stdout"),
            (&mut self.stderr, self.stderr_dropped, "stderr"),
        ] {
            if dropped > 0 {
                if !buf.ends_with('\n') {
                    buf.push('\n');
                }
                buf.push_str(&format!(
                    "[pykernel: {dropped} more bytes of {stream} were streamed to onEvent but not kept in this result]\n"
                ));
            }
        }
    }
}

/// Turns a request's frames into events and folds them into an outcome.
pub struct Collector {
    status_mime: String,
    max_captured_bytes: usize,
    stdout_full: bool,
    stderr_full: bool,
    pub outcome: ExecuteOutcome,
    done: bool,
}

impl Collector {
    pub fn new(status_mime: &str, max_captured_bytes: Option<usize>) -> Self {
        Self {
            status_mime: status_mime.to_string(),
            max_captured_bytes: max_captured_bytes.unwrap_or(usize::MAX),
            stdout_full: false,
            stderr_full: false,
            outcome: ExecuteOutcome::default(),
            done: false,
        }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Applies one frame; returns the event it stands for, if any.
    pub fn apply(&mut self, frame: RunnerFrame) -> Option<KernelEvent> {
        let out = &mut self.outcome;
        match frame {
            RunnerFrame::Stdout { data, .. } => {
                out.stdout_dropped += push_capped(
                    &mut out.stdout,
                    &mut self.stdout_full,
                    &data,
                    self.max_captured_bytes,
                );
                Some(KernelEvent::Stdout(data))
            }
            RunnerFrame::Stderr { data, .. } => {
                out.stderr_dropped += push_capped(
                    &mut out.stderr,
                    &mut self.stderr_full,
                    &data,
                    self.max_captured_bytes,
                );
                Some(KernelEvent::Stderr(data))
            }
            RunnerFrame::Display {
                bundle,
                display_id,
                update,
                ..
            } => {
                if let Some(status) = status_of(&bundle, &self.status_mime) {
                    out.statuses.push(status.clone());
                    return Some(KernelEvent::Status {
                        op: status.op,
                        data: status.data,
                    });
                }
                out.displays.push(bundle.clone());
                Some(KernelEvent::Display {
                    bundle,
                    display_id,
                    update,
                })
            }
            RunnerFrame::Result { bundle, .. } => {
                out.result = Some(bundle.clone());
                Some(KernelEvent::Result(bundle))
            }
            RunnerFrame::Clear { wait, .. } => Some(KernelEvent::Clear { wait }),
            RunnerFrame::Error {
                ename,
                evalue,
                traceback,
                ..
            } => {
                let info = ErrorInfo {
                    ename,
                    evalue,
                    traceback,
                };
                out.error = Some(info.clone());
                Some(KernelEvent::Error(info))
            }
            RunnerFrame::Done {
                status,
                execution_count,
                cancelled,
                stdin_requested,
                ..
            } => {
                out.ok = status == DoneStatus::Ok;
                out.execution_count = execution_count;
                out.cancelled |= cancelled;
                out.stdin_requested = stdin_requested;
                self.done = true;
                None
            }
            RunnerFrame::Ready { .. }
            | RunnerFrame::Started { .. }
            | RunnerFrame::Call { .. }
            | RunnerFrame::Pong { .. }
            | RunnerFrame::Unknown => None,
        }
    }
}

/// Appends as much of `text` as fits in `cap` bytes, cut at a character boundary.
/// Once a stream was cut, nothing more is appended, so the kept text is a true prefix.
/// Keeps `text` while `buf` has room under `cap`; returns how many bytes were not kept.
fn push_capped(buf: &mut String, full: &mut bool, text: &str, cap: usize) -> u64 {
    if *full {
        return text.len() as u64;
    }
    let room = cap.saturating_sub(buf.len());
    if text.len() <= room {
        buf.push_str(text);
        0
    } else {
        let mut end = room;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        buf.push_str(&text[..end]);
        *full = true;
        (text.len() - end) as u64
    }
}

/// A display bundle whose only content is the status MIME is a status event.
fn status_of(bundle: &Value, status_mime: &str) -> Option<StatusEvent> {
    let map = bundle.as_object()?;
    let Some(Value::Object(payload)) = map.get(status_mime) else {
        return None;
    };
    let mut data = payload.clone();
    let op = match data.remove("op") {
        Some(Value::String(op)) => op,
        _ => String::new(),
    };
    Some(StatusEvent { op, data })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::decode;

    const MIME: &str = "application/x-pykernel-status";

    #[test]
    fn folds_frames_into_an_outcome() {
        let mut c = Collector::new(MIME, None);
        for line in [
            r#"{"type":"stdout","id":"r","data":"a"}"#,
            r#"{"type":"stdout","id":"r","data":"b\n"}"#,
            r#"{"type":"display","id":"r","bundle":{"text/plain":"5"}}"#,
            r#"{"type":"display","id":"r","bundle":{"application/x-pykernel-status":{"op":"cd","path":"/tmp"}}}"#,
            r#"{"type":"result","id":"r","bundle":{"text/plain":"2"}}"#,
        ] {
            assert!(c.apply(decode(line.as_bytes()).unwrap()).is_some());
        }
        assert!(!c.is_done());
        c.apply(decode(br#"{"type":"done","id":"r","status":"ok","executionCount":1}"#).unwrap());
        assert!(c.is_done());
        let o = c.outcome;
        assert!(o.ok);
        assert_eq!(o.stdout, "ab\n");
        assert_eq!(o.displays.len(), 1);
        assert_eq!(o.statuses[0].op, "cd");
        assert_eq!(o.statuses[0].data["path"], "/tmp");
        assert_eq!(o.result.unwrap()["text/plain"], "2");
    }

    #[test]
    fn captured_output_is_capped_at_a_char_boundary() {
        let mut c = Collector::new(MIME, Some(5));
        for data in ["abc", "dé", "fgh"] {
            c.apply(RunnerFrame::Stdout {
                id: None,
                data: data.into(),
            });
        }
        assert_eq!(c.outcome.stdout, "abcd");
    }

    #[test]
    fn events_have_the_javascript_shape() {
        let e = KernelEvent::Display {
            bundle: json!({"text/plain": "x"}),
            display_id: Some("p".into()),
            update: true,
        };
        assert_eq!(
            e.into_json(),
            json!({"type":"display","bundle":{"text/plain":"x"},"displayId":"p","update":true})
        );
        assert_eq!(
            KernelEvent::Stdout("hi".into()).into_json(),
            json!({"type":"stdout","text":"hi"})
        );
    }
}
