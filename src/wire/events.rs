//! What one cell produced: the streamed [`KernelEvent`]s and the [`ExecuteOutcome`] they
//! add up to. Built from runner frames; knows nothing about processes or JavaScript.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::wire::protocol::{DoneStatus, RunnerFrame};

/// The `ename` of the error a cell ends with when its kernel died under it.
pub const KERNEL_DIED: &str = "KernelDied";

#[derive(Debug, Clone, PartialEq)]
pub enum KernelEvent {
    Stdout(String),
    Stderr(String),
    /// Output of a request that had ended (a thread or a child of an earlier cell still
    /// writing), delivered with the running one and never part of its own output:
    /// `{type: 'stdout' | 'stderr', text, late: true}`.
    Late {
        stderr: bool,
        text: String,
    },
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
            KernelEvent::Late { stderr, text } => object(
                if stderr { "stderr" } else { "stdout" },
                vec![("text", Value::String(text)), ("late", Value::Bool(true))],
            ),
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

impl KernelEvent {
    /// An event in its JavaScript shape (what [`KernelEvent::into_json`] makes), read
    /// tolerantly: absent optional fields take their defaults.
    pub fn from_json(value: &Value) -> std::result::Result<KernelEvent, String> {
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let text = || {
            value
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("a '{kind}' event needs a string `text`"))
        };
        let flag = |name: &str| value.get(name).and_then(Value::as_bool).unwrap_or(false);
        let bundle = || value.get("bundle").cloned().unwrap_or(Value::Null);
        Ok(match kind {
            "stdout" | "stderr" if flag("late") => KernelEvent::Late {
                stderr: kind == "stderr",
                text: text()?,
            },
            "stdout" => KernelEvent::Stdout(text()?),
            "stderr" => KernelEvent::Stderr(text()?),
            "display" => KernelEvent::Display {
                bundle: bundle(),
                display_id: value
                    .get("displayId")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                update: flag("update"),
            },
            "result" => KernelEvent::Result(bundle()),
            "status" => KernelEvent::Status {
                op: value
                    .get("op")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                data: value
                    .get("data")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
            },
            "clear" => KernelEvent::Clear { wait: flag("wait") },
            "error" => KernelEvent::Error(ErrorInfo {
                ename: value.get("ename").and_then(Value::as_str).unwrap_or_default().into(),
                evalue: value.get("evalue").and_then(Value::as_str).unwrap_or_default().into(),
                traceback: value
                    .get("traceback")
                    .and_then(Value::as_array)
                    .map(|lines| lines.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default(),
            }),
            other => {
                return Err(format!(
                    "`type` must be one of stdout, stderr, display, result, status, clear, error; got {other:?}"
                ))
            }
        })
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
    /// The request never reached the kernel (its pipe was already broken): nothing of the
    /// cell ran, so running it elsewhere cannot run it twice.
    pub not_started: bool,
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
    /// Displays streamed as events but not kept, past [`KEPT_DISPLAYS`] or
    /// [`KEPT_DISPLAY_BYTES`], and their size as JSON.
    pub displays_dropped: u64,
    pub display_bytes_dropped: u64,
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
        if self.displays_dropped > 0 {
            let notice = format!("[pykernel: {}]", self.displays_notice());
            self.displays.push(json!({ "text/plain": notice }));
        }
    }

    /// What the result left out of the cell's displays (when it left any out).
    pub fn displays_notice(&self) -> String {
        let shown = self.displays.len() as u64 + self.displays_dropped;
        format!(
            "the cell displayed {shown} outputs; this result keeps the first {} (at most {KEPT_DISPLAYS} or {} MiB a cell), and the other {} ({:.1} MiB) were streamed to onEvent only",
            self.displays.len(),
            KEPT_DISPLAY_BYTES >> 20,
            self.displays_dropped,
            self.display_bytes_dropped as f64 / (1 << 20) as f64,
        )
    }
}

/// The most displays one cell's result keeps, and their most bytes as JSON. Past either,
/// displays still stream as events and the result says how many it left out: a cell that
/// shows 3000 images must not cost the host 3000 images' memory. 64 MiB is the frame
/// limit, so a display of the largest image the host accepts is kept.
pub const KEPT_DISPLAYS: usize = 100;
pub const KEPT_DISPLAY_BYTES: usize = crate::wire::frame_reader::MAX_FRAME_BYTES;

/// Decides which of a cell's displays are kept: the first ones, within [`KEPT_DISPLAYS`]
/// and [`KEPT_DISPLAY_BYTES`]. Once one is left out so is every later one, so what is kept
/// is what the cell showed first, with no gaps.
///
/// An update of a display (`update_display`, a handle's `update`) replaces the kept
/// displays with its id, as a notebook does, instead of counting as one more.
#[derive(Debug, Clone, Default)]
pub struct DisplayBudget {
    kept: usize,
    kept_bytes: usize,
    full: bool,
    /// Per kept display id: how many kept displays show it and their size together (an
    /// update replaces each of them, so it costs that many times its own size).
    ids: HashMap<String, (usize, usize)>,
}

/// What to do with a display, by [`DisplayBudget::admit_display`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Keep it, after the others.
    Keep,
    /// Replace the kept displays with its id.
    Replace,
    /// Leave it out, and count it.
    Drop,
    /// An update of a display this cell did not keep: nothing to change.
    Ignore,
}

impl DisplayBudget {
    /// Whether a new display of `bytes` (see [`json_size`]) is kept.
    pub fn admit(&mut self, bytes: usize) -> bool {
        self.full = self.full
            || self.kept >= KEPT_DISPLAYS
            || self.kept_bytes.saturating_add(bytes) > KEPT_DISPLAY_BYTES;
        if !self.full {
            self.kept += 1;
            self.kept_bytes += bytes;
        }
        !self.full
    }

    /// What to do with a display frame of `bytes`.
    pub fn admit_display(&mut self, id: Option<&str>, update: bool, bytes: usize) -> Admission {
        match (id, update) {
            (Some(id), true) => {
                let Some(&(shown, shown_bytes)) = self.ids.get(id) else {
                    return Admission::Ignore;
                };
                let replaced = bytes.saturating_mul(shown);
                let total = (self.kept_bytes - shown_bytes).saturating_add(replaced);
                if total > KEPT_DISPLAY_BYTES {
                    return Admission::Drop;
                }
                self.kept_bytes = total;
                self.ids.insert(id.to_string(), (shown, replaced));
                Admission::Replace
            }
            _ => {
                if !self.admit(bytes) {
                    return Admission::Drop;
                }
                if let Some(id) = id {
                    let (shown, shown_bytes) = self.ids.get(id).copied().unwrap_or_default();
                    self.ids
                        .insert(id.to_string(), (shown + 1, shown_bytes + bytes));
                }
                Admission::Keep
            }
        }
    }
}

/// About how many bytes `value` takes as JSON (strings unescaped): what keeping it costs.
pub fn json_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(json_size).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(key, value)| key.len() + 4 + json_size(value))
                .sum::<usize>()
        }
    }
}

/// Turns a request's frames into events and folds them into an outcome.
pub struct Collector {
    status_mime: String,
    max_captured_bytes: usize,
    stdout_full: bool,
    stderr_full: bool,
    displays: DisplayBudget,
    /// Where the kept displays of each display id are in `outcome.displays`.
    display_at: HashMap<String, Vec<usize>>,
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
            displays: DisplayBudget::default(),
            display_at: HashMap::new(),
            outcome: ExecuteOutcome::default(),
            done: false,
        }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// A status event from the host itself (not from the runner), kept with the cell's own;
    /// returns the event to stream.
    pub fn host_status(&mut self, status: StatusEvent) -> KernelEvent {
        self.outcome.statuses.push(status.clone());
        KernelEvent::Status {
            op: status.op,
            data: status.data,
        }
    }

    /// Applies one frame; returns the event it stands for, if any.
    pub fn apply(&mut self, frame: RunnerFrame) -> Option<KernelEvent> {
        let out = &mut self.outcome;
        match frame {
            RunnerFrame::Stdout {
                data, late: true, ..
            } => Some(KernelEvent::Late {
                stderr: false,
                text: data,
            }),
            RunnerFrame::Stderr {
                data, late: true, ..
            } => Some(KernelEvent::Late {
                stderr: true,
                text: data,
            }),
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
                let size = json_size(&bundle);
                match self
                    .displays
                    .admit_display(display_id.as_deref(), update, size)
                {
                    Admission::Keep => {
                        if let Some(id) = &display_id {
                            let at = out.displays.len();
                            self.display_at.entry(id.clone()).or_default().push(at);
                        }
                        out.displays.push(bundle.clone());
                    }
                    Admission::Replace => {
                        let id = display_id.as_deref().unwrap_or_default();
                        for &at in self.display_at.get(id).into_iter().flatten() {
                            out.displays[at] = bundle.clone();
                        }
                    }
                    Admission::Drop => {
                        out.displays_dropped += 1;
                        out.display_bytes_dropped += size as u64;
                    }
                    Admission::Ignore => {}
                }
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
            | RunnerFrame::Preloaded { .. }
            | RunnerFrame::Completeness { .. }
            | RunnerFrame::KernelExit { .. }
            | RunnerFrame::Heartbeat
            | RunnerFrame::FarPayload { .. }
            | RunnerFrame::FarBytecode { .. }
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
    use crate::wire::protocol::decode;

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
    fn an_update_replaces_its_display_in_place_and_costs_no_slot() {
        let mut c = Collector::new(MIME, None);
        let display = |text: &str, id: Option<&str>, update: bool| RunnerFrame::Display {
            id: Some("r".into()),
            bundle: json!({ "text/plain": text }),
            display_id: id.map(str::to_string),
            update,
        };
        c.apply(display("first", None, false));
        c.apply(display("0%", Some("bar"), false));
        for i in 1..=(KEPT_DISPLAYS * 3) {
            c.apply(display(&format!("{i}%"), Some("bar"), true));
        }
        c.apply(display("ghost", Some("never-shown"), true));
        c.apply(display("last", None, false));
        let o = c.outcome;
        let texts: Vec<&str> = o
            .displays
            .iter()
            .map(|d| d["text/plain"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["first", "300%", "last"]);
        assert_eq!(o.displays_dropped, 0);
    }

    /// A display shown 100 times under one id, then updated with a big bundle, must not
    /// keep 100 copies of it past the byte budget.
    #[test]
    fn an_update_costs_its_size_once_per_display_it_replaces() {
        let mut budget = DisplayBudget::default();
        for _ in 0..KEPT_DISPLAYS {
            assert_eq!(budget.admit_display(Some("x"), false, 10), Admission::Keep);
        }
        let big = KEPT_DISPLAY_BYTES / 10;
        assert_eq!(budget.admit_display(Some("x"), true, big), Admission::Drop);
        let fits = KEPT_DISPLAY_BYTES / KEPT_DISPLAYS;
        assert_eq!(
            budget.admit_display(Some("x"), true, fits),
            Admission::Replace
        );
        assert_eq!(
            budget.admit_display(Some("x"), true, 10),
            Admission::Replace
        );
        assert_eq!(budget.kept_bytes, 10 * KEPT_DISPLAYS);
    }

    #[test]
    fn captured_output_is_capped_at_a_char_boundary() {
        let mut c = Collector::new(MIME, Some(5));
        for data in ["abc", "dé", "fgh"] {
            c.apply(RunnerFrame::Stdout {
                id: None,
                data: data.into(),
                late: false,
            });
        }
        assert_eq!(c.outcome.stdout, "abcd");
    }

    #[test]
    fn late_output_is_an_event_of_its_own_and_not_the_cells() {
        let mut c = Collector::new(MIME, None);
        let late = decode(br#"{"type":"stdout","id":"r","data":"tick","late":true}"#).unwrap();
        let event = c.apply(late).unwrap();
        assert_eq!(
            event.into_json(),
            json!({"type": "stdout", "text": "tick", "late": true})
        );
        c.apply(decode(br#"{"type":"stdout","id":"r","data":"own"}"#).unwrap());
        assert_eq!(c.outcome.stdout, "own");
    }

    fn display(bundle: Value) -> RunnerFrame {
        RunnerFrame::Display {
            id: None,
            bundle,
            display_id: None,
            update: false,
        }
    }

    #[test]
    fn a_cell_keeps_its_first_displays_and_says_how_many_it_left_out() {
        let mut c = Collector::new(MIME, None);
        for i in 0..KEPT_DISPLAYS + 50 {
            let event = c.apply(display(json!({ "text/plain": i.to_string() })));
            assert!(event.is_some(), "every display is still an event");
        }
        // A status is not a display: never counted, never left out.
        c.apply(display(json!({ MIME: { "op": "cd" } })));
        let mut o = c.outcome;
        assert_eq!(o.displays.len(), KEPT_DISPLAYS);
        assert_eq!(o.displays[KEPT_DISPLAYS - 1]["text/plain"], "99");
        assert_eq!(o.displays_dropped, 50);
        assert_eq!(o.statuses.len(), 1);
        o.note_dropped();
        assert_eq!(o.displays.len(), KEPT_DISPLAYS + 1);
        let notice = o.displays.last().unwrap()["text/plain"].as_str().unwrap();
        assert!(
            notice.starts_with("[pykernel: the cell displayed 150 outputs; this result keeps the first 100 (at most 100 or 64 MiB a cell), and the other 50 ("),
            "{notice}"
        );
    }

    #[test]
    fn displays_are_kept_up_to_a_size_and_none_after_the_first_left_out() {
        let image = |mib: usize| display(json!({ "image/png": "A".repeat(mib << 20) }));
        let mut c = Collector::new(MIME, None);
        c.apply(image(30));
        c.apply(image(30));
        c.apply(image(10)); // 70 MiB in all: past the limit
        c.apply(display(json!({ "text/plain": "small" })));
        assert_eq!(c.outcome.displays.len(), 2);
        assert_eq!(c.outcome.displays_dropped, 2);
        assert!(c.outcome.display_bytes_dropped > 10 << 20);
        // One display as large as the frame limit allows is kept.
        let mut c = Collector::new(MIME, None);
        c.apply(display(
            json!({ "image/png": "A".repeat(KEPT_DISPLAY_BYTES - 100) }),
        ));
        assert_eq!(c.outcome.displays.len(), 1);
    }

    #[test]
    fn json_size_is_about_the_encoded_length() {
        let v = json!({"image/png": "abcd", "n": [1, 2.5, null, true], "text/plain": "x"});
        let encoded = serde_json::to_vec(&v).unwrap().len();
        let size = json_size(&v);
        assert!(
            size >= encoded && size <= 2 * encoded,
            "{size} vs {encoded}"
        );
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
