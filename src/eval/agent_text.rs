//! The agent's text of a stream of kernel events or plain text: the one engine
//! behind `evaluate`'s and the pool's `output` and the `OutputBuilder` class.
//!
//! Text is sanitized as it comes (one streaming [`Sanitizer`], so a sequence or a `\r`
//! rewrite split across events is handled as one), then held per cell by [`Revisable`]
//! (display updates and `clear_output` revise it), then folded into one bounded
//! [`OutputAccumulator`] (line cap, head and tail, the artifact file with every byte).
//!
//! The live stream (`take_live`, when asked for) is the sanitized text as it enters the
//! revisable stage: a UI sees lines as they are printed, never raw escapes or `\r`
//! rewrites. Revisions are not in it: its concatenation is the body of `output` exactly
//! when nothing was cut, no display was updated and no `clear_output` ran; when the text
//! was cut it is the artifact's content under the same condition.
//!
//! An unfinished line (a progress bar, a counter printed without a newline) is held by
//! the sanitizer, since a `\r` may still rewrite it. [`AgentText::flush_live_line`] sends
//! it as it stands to the live stream only (the caller does so after a quiet interval);
//! what was sent stands. When the line goes on from there, only the rest is sent, and
//! the concatenation still holds; when a `\r` rewrote it into something that does not
//! begin with what was sent, its new state is sent again from its start, on a line of its
//! own, and the live stream then holds that earlier state too (a revision, as a display
//! update is).
//!
//! Both the live stream and the text bound for `output` pass through the rule on host
//! lines ([`CellLines`]): a cell line that starts as a host line does is escaped, and the
//! host's own lines (the late-output marker, a clear's notice, a figure's chart card, the
//! closing line) are lines of their own, unescaped. The marks the accumulator and [`AgentText::finish`]
//! add (`[…N lines elided…]`, `[full output ...]`) come after the rule, so stay as they are.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use serde_json::Value;

use crate::output::{
    artifact_uri, chart_card, render_bundle, sanitize, ArtifactSink, CellLines, Image,
    OutputAccumulator, OutputLimits, Piece, Revisable, Sanitizer, Truncated,
};
use crate::wire::events::{json_size, Admission, DisplayBudget, KernelEvent};

/// How the text is built.
#[derive(Debug, Clone, Default)]
pub struct AgentTextOptions {
    pub limits: OutputLimits,
    /// Where the full text goes when it is cut.
    pub artifact: Option<ArtifactSink>,
    pub status_mime: String,
    /// Keep the text/plain stand-in shown next to an image (matplotlib's
    /// `<Figure size 640x480 with 1 Axes>`); dropped by default.
    pub include_figure_text: bool,
    /// Keep the live stream for [`AgentText::take_live`].
    pub live: bool,
}

/// The built text: `body` is what follows the notices in `output`.
#[derive(Debug, Clone, Default)]
pub struct AgentTextResult {
    /// The sanitized, truncated text; when cut and kept, ending with the line that says
    /// where the full text is. A placeholder when there was no text.
    pub body: String,
    /// Some text was seen (the body is not a placeholder).
    pub has_text: bool,
    pub truncated: Option<Truncated>,
    /// The artifact's id, when the full text was kept.
    pub artifact_id: Option<String>,
    pub images: Vec<Image>,
    pub json: Vec<Value>,
    /// The charts of the displays kept (docs/charts.md), in order.
    pub charts: Vec<Value>,
    pub statuses: Vec<(String, Value)>,
}

pub struct AgentText {
    status_mime: String,
    include_figure_text: bool,
    sanitizer: Sanitizer,
    text: FinalText,
    /// Every image displayed so far, kept or not.
    images_shown: usize,
    images: Vec<Image>,
    json: Vec<Value>,
    charts: Vec<Value>,
    statuses: Vec<(String, Value)>,
    live: Option<LiveText>,
    /// Late output is being shown (its marker line is out, its end line is not).
    /// Across cells: a cell's late text may be the last before the next cell's own.
    in_late: bool,
    cell: CellState,
    /// The caller named the artifact's file by its path: the output names it so, and it
    /// has no `artifact://` id.
    artifact_by_path: bool,
}

/// The text bound for `output`: final pieces, the cell's lines escaped where they start
/// as a host line does, into the accumulator.
struct FinalText {
    lines: CellLines,
    accumulator: OutputAccumulator,
    /// Some text was seen (the body is not a placeholder).
    has_text: bool,
    /// Reused for what the rule passes on.
    buffer: String,
}

impl FinalText {
    fn take(&mut self, piece: Piece) {
        self.has_text = true;
        match piece {
            Piece::Cell(text) => self.lines.push_cell(text, &mut self.buffer),
            Piece::Host(line) => self.lines.host_line(line, &mut self.buffer),
        }
        self.pass_on();
    }

    fn end_cell(&mut self) {
        self.lines.end_cell(&mut self.buffer);
        self.pass_on();
    }

    fn finish(mut self) -> Truncated {
        self.lines.finish(&mut self.buffer);
        self.pass_on();
        self.accumulator.finish()
    }

    fn pass_on(&mut self) {
        if !self.buffer.is_empty() {
            self.accumulator.push_sanitized(&self.buffer);
            self.buffer.clear();
        }
    }
}

/// The live stream: the text as it enters the revisable stage, by the same rule.
#[derive(Default)]
struct LiveText {
    text: String,
    lines: CellLines,
    /// The sanitizer's unfinished line as [`AgentText::flush_live_line`] last sent it.
    sent_of_line: String,
    /// The unfinished line may have changed since it was last sent.
    line_pending: bool,
}

impl LiveText {
    /// The current line's state, `line`, into the stream, after what was sent of it.
    fn line_state(&mut self, line: &str) {
        match line.strip_prefix(self.sent_of_line.as_str()) {
            Some(rest) => self.lines.push_cell(rest, &mut self.text),
            None => {
                // Rewritten: what was sent stands, and the new state starts a line.
                self.lines.push_cell("\n", &mut self.text);
                self.lines.push_cell(line, &mut self.text);
            }
        }
    }
}

/// What is known of the current cell only.
#[derive(Default)]
struct CellState {
    displays: DisplayBudget,
    /// The cell's latest text, still open to display updates and `clear_output`.
    revisable: Revisable,
    /// Where the images, JSON and charts of each kept display id start.
    data_at: HashMap<String, Vec<DataAt>>,
}

/// Where a kept display's data is in `images`, `json` and `charts`.
#[derive(Clone)]
struct DataAt {
    images: Range<usize>,
    json: Range<usize>,
    charts: Range<usize>,
}

/// The line before output that arrived after its own cell had ended.
const LATE_MARKER: &str = "[late output from an earlier cell]\n";
/// The line after it, before text that is not late (the running cell's own output, an
/// error, a host line), so that text is not read as part of the late block.
const LATE_END_MARKER: &str = "[end of late output]\n";

impl AgentText {
    pub fn new(options: AgentTextOptions) -> Self {
        let artifact_by_path = options.artifact.as_ref().is_some_and(ArtifactSink::is_path);
        AgentText {
            artifact_by_path,
            status_mime: options.status_mime,
            include_figure_text: options.include_figure_text,
            sanitizer: Sanitizer::new(),
            text: FinalText {
                lines: CellLines::default(),
                accumulator: OutputAccumulator::new(options.limits, options.artifact),
                has_text: false,
                buffer: String::new(),
            },
            images_shown: 0,
            images: Vec::new(),
            json: Vec::new(),
            charts: Vec::new(),
            statuses: Vec::new(),
            live: options.live.then(LiveText::default),
            in_late: false,
            cell: CellState::default(),
        }
    }

    /// Folds one event of the current cell in.
    pub fn add(&mut self, event: &KernelEvent) {
        match event {
            KernelEvent::Stdout(text) | KernelEvent::Stderr(text) => {
                self.end_late();
                self.push_stream(text);
            }
            KernelEvent::Late { text, .. } => {
                if !self.in_late && !text.is_empty() {
                    self.in_late = true;
                    self.push_host_line(LATE_MARKER);
                }
                self.push_stream(text);
            }
            KernelEvent::Display {
                bundle,
                display_id,
                update,
            } => {
                let id = display_id.as_deref();
                let admission = self
                    .cell
                    .displays
                    .admit_display(id, *update, json_size(bundle));
                self.add_bundle(bundle, admission, id, *update);
            }
            KernelEvent::Result(bundle) => self.add_bundle(bundle, Admission::Keep, None, false),
            KernelEvent::Status { op, data } => {
                self.statuses
                    .push((op.clone(), Value::Object(data.clone())));
            }
            KernelEvent::Clear { wait } => {
                // An unfinished line is cleared too, so it must be in the revisable text.
                self.flush_line();
                let text = &mut self.text;
                self.cell
                    .revisable
                    .clear(*wait, &mut |piece| text.take(piece));
            }
            KernelEvent::Error(error) => {
                self.end_late();
                let traceback = error.traceback.concat();
                let text = if traceback.trim().is_empty() {
                    format!("{}: {}", error.ename, error.evalue)
                } else {
                    traceback
                };
                self.push_stream(&text);
                if !text.is_empty() && !text.ends_with('\n') {
                    self.push_stream("\n");
                }
            }
        }
    }

    /// Raw text of a stream (a shell command's stdout, say), as a cell's stdout.
    pub fn push_text(&mut self, text: &str) {
        self.end_late();
        self.push_stream(text);
    }

    /// Closes a late block with its end line, before text that is not late.
    fn end_late(&mut self) {
        if self.in_late {
            self.in_late = false;
            self.push_host_line(LATE_END_MARKER);
        }
    }

    /// The current cell ended: its text is final, and the next cell starts afresh.
    pub fn end_cell(&mut self) {
        self.flush_line();
        let text = &mut self.text;
        self.cell.revisable.finish(&mut |piece| text.take(piece));
        // A line left unfinished may go on in the next cell: decided here, alike in both.
        self.text.end_cell();
        if let Some(live) = &mut self.live {
            live.lines.end_cell(&mut live.text);
        }
        self.cell = CellState::default();
    }

    /// A line of the host's (such as `Command exited with code 1`), after every cell: on
    /// a line of its own, never escaped.
    pub fn push_closing_line(&mut self, line: &str) {
        self.end_late();
        self.end_cell();
        let line = sanitize(line);
        self.emit_live_host(&line);
        self.text.take(Piece::Host(&line));
    }

    /// A line of the host's within the current cell's text (the late-output marker): on a
    /// line of its own, in order with the cell's text, never escaped.
    fn push_host_line(&mut self, line: &str) {
        // The cell's unfinished line comes before it, as it is.
        self.flush_line();
        self.emit_live_host(line);
        let text = &mut self.text;
        self.cell
            .revisable
            .host_line(line, &mut |piece| text.take(piece));
    }

    /// The sanitized text that entered the agent text since the last call (empty unless
    /// the builder was made with `live`).
    pub fn take_live(&mut self) -> String {
        self.live
            .as_mut()
            .map(|live| std::mem::take(&mut live.text))
            .unwrap_or_default()
    }

    /// Sends the unfinished line as it stands to the live stream, and only there: a `\r`
    /// may still rewrite it in `output` (see the module's documentation).
    pub fn flush_live_line(&mut self) {
        let Some(live) = &mut self.live else { return };
        if !live.line_pending {
            return;
        }
        live.line_pending = false;
        let held = self.sanitizer.held();
        if held != live.sent_of_line {
            live.line_state(held);
            held.clone_into(&mut live.sent_of_line);
        }
    }

    /// The live stream is missing some of the unfinished line ([`AgentText::flush_live_line`]
    /// would send something).
    pub fn live_line_pending(&self) -> bool {
        self.live.as_ref().is_some_and(|live| live.line_pending)
    }

    /// Some text reached the agent text (or is held for it).
    pub fn has_text(&self) -> bool {
        self.text.has_text
    }

    pub fn finish(mut self) -> AgentTextResult {
        self.end_cell();
        let has_text = self.text.has_text;
        let truncated = self.text.finish();
        let mut body = if has_text {
            truncated.text.clone()
        } else if self.images_shown > 0 {
            format!("(displayed {} image(s); no text output)", self.images_shown)
        } else {
            "(no output)".to_string()
        };
        let artifact_id = match self.artifact_by_path {
            true => None,
            false => truncated.artifact_path.as_deref().and_then(artifact_id_of),
        };
        // Where the full text is: its `artifact://` reference, else the path it was given.
        let reference = match (&artifact_id, &truncated.artifact_path) {
            (Some(id), _) => Some(artifact_uri(id)),
            (None, Some(path)) if self.artifact_by_path => Some(path.display().to_string()),
            _ => None,
        };
        if let Some(reference) = reference {
            if !body.ends_with('\n') {
                body.push('\n');
            }
            let lines = truncated.total_lines;
            let noun = if lines == 1 { "line" } else { "lines" };
            body.push_str(&format!("[full output ({lines} {noun}): {reference}]\n"));
        }
        AgentTextResult {
            body,
            has_text,
            truncated: truncated.truncated.then_some(truncated),
            artifact_id,
            images: self.images,
            json: self.json,
            charts: self.charts,
            statuses: self.statuses,
        }
    }

    fn add_bundle(&mut self, bundle: &Value, admission: Admission, id: Option<&str>, update: bool) {
        let rendered = render_bundle(bundle, &self.status_mime);
        // A figure's chart is told as its card, lines of the host's (only the host writes
        // `[chart`: a cell's line that starts so is escaped).
        let card = rendered.chart.as_ref().map(chart_card).unwrap_or_default();
        // Next to an image or a chart, text/plain is only its stand-in (`<Figure ...>`).
        let figure = !rendered.images.is_empty() || rendered.chart.is_some();
        let text_is_fallback =
            figure && rendered.text_mime == Some("text/plain") && !self.include_figure_text;
        let mut line = if text_is_fallback {
            String::new()
        } else {
            sanitize(&rendered.text)
        };
        // Rendered values start on a line of their own and end one.
        if !line.is_empty() && !line.ends_with('\n') {
            line.push('\n');
        }
        if !line.is_empty() || !card.is_empty() {
            self.end_late();
            self.flush_line();
            if !card.is_empty() {
                self.emit_live_host(&card);
            }
            self.emit_live(&line);
        }
        let text = &mut self.text;
        self.cell
            .revisable
            .display_with_card(id, update, card, line, &mut |piece| text.take(piece));
        self.images_shown += rendered.images.len();
        match admission {
            Admission::Keep => {
                let after = |len: usize, added: usize| len..len + added;
                let at = DataAt {
                    images: after(self.images.len(), rendered.images.len()),
                    json: after(self.json.len(), usize::from(rendered.json.is_some())),
                    charts: after(self.charts.len(), usize::from(rendered.chart.is_some())),
                };
                if let Some(id) = id {
                    self.cell
                        .data_at
                        .entry(id.to_string())
                        .or_default()
                        .push(at);
                }
                self.images.extend(rendered.images);
                self.json.extend(rendered.json);
                self.charts.extend(rendered.chart);
            }
            Admission::Replace => {
                // The display's new state where its old one was: a display keeps its
                // number of images, JSON values and charts from one state to the next
                // (any more are left out; the slots of other displays are never taken).
                let places = self.cell.data_at.get(id.unwrap_or_default()).cloned();
                for at in places.into_iter().flatten() {
                    replace_from(&mut self.images, at.images, &rendered.images);
                    replace_from(&mut self.json, at.json, rendered.json.as_slice());
                    replace_from(&mut self.charts, at.charts, rendered.chart.as_slice());
                }
            }
            Admission::Drop | Admission::Ignore => {}
        }
    }

    /// Raw stream text through the sanitizer, into the cell's revisable text.
    fn push_stream(&mut self, raw: &str) {
        let mut clean = String::new();
        self.sanitizer.push(raw, &mut clean);
        self.take_clean(&clean);
        if let Some(live) = &mut self.live {
            live.line_pending |= !self.sanitizer.held().is_empty();
        }
    }

    /// The sanitizer's unfinished line, before text that is not part of its stream.
    fn flush_line(&mut self) {
        let mut clean = String::new();
        self.sanitizer.finish(&mut clean);
        self.take_clean(&clean);
    }

    fn take_clean(&mut self, clean: &str) {
        if clean.is_empty() {
            return;
        }
        // Released text starts with the unfinished line's final state: after what was
        // sent of it, and the next line starts unsent.
        if let Some(live) = &mut self.live {
            live.line_state(clean);
            live.sent_of_line.clear();
            live.line_pending = false;
        }
        let text = &mut self.text;
        self.cell
            .revisable
            .text(clean, &mut |piece| text.take(piece));
    }

    /// The cell's sanitized text into the live stream, by the rule on host lines.
    fn emit_live(&mut self, clean: &str) {
        if let Some(live) = &mut self.live {
            live.lines.push_cell(clean, &mut live.text);
        }
    }

    fn emit_live_host(&mut self, line: &str) {
        if let Some(live) = &mut self.live {
            live.lines.host_line(line, &mut live.text);
        }
    }
}

/// `new` in place of what `kept` holds in `at`, as far as either goes.
fn replace_from<T: Clone>(kept: &mut [T], at: Range<usize>, new: &[T]) {
    for (i, value) in at.zip(new) {
        if let Some(slot) = kept.get_mut(i) {
            *slot = value.clone();
        }
    }
}

/// The id of the artifact at `path` (`<dir>/<id>.txt`).
fn artifact_id_of(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    name.strip_suffix(".txt").map(str::to_string)
}

#[cfg(test)]
mod tests;
