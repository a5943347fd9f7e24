//! Short views of long output for TUIs.
//!
//! Lines are split on `\n`; a trailing `\n` does not start an extra empty line. Previews
//! are joined with `\n` and have no trailing newline. Markers agree with their count
//! (`… 1 more line`, `… 2 more lines`); `lines?` matches both.

use std::collections::VecDeque;

/// Lines a streaming preview keeps.
pub const STREAMING_PREVIEW_LINES: usize = 100;

/// The most recent lines of a stream: at most `max_lines` lines of output, preceded by
/// `… N earlier lines dropped while streaming` once any were dropped (so at most
/// `max_lines + 1` lines in all). The unfinished last line is shown and counts.
#[derive(Debug, Clone)]
pub struct StreamingPreview {
    max_lines: usize,
    lines: VecDeque<String>,
    partial: String,
    dropped: u64,
}

impl Default for StreamingPreview {
    fn default() -> Self {
        Self::new(STREAMING_PREVIEW_LINES)
    }
}

impl StreamingPreview {
    pub fn new(max_lines: usize) -> Self {
        StreamingPreview {
            max_lines,
            lines: VecDeque::new(),
            partial: String::new(),
            dropped: 0,
        }
    }

    /// Takes a chunk of text; a line may span chunks.
    pub fn push(&mut self, chunk: &str) {
        let mut pieces = chunk.split('\n');
        if let Some(first) = pieces.next() {
            self.partial.push_str(first);
        }
        for piece in pieces {
            let line = std::mem::replace(&mut self.partial, piece.to_string());
            self.push_complete(line);
        }
    }

    /// Takes one whole line (any `\n` inside it splits it further).
    pub fn push_line(&mut self, line: &str) {
        self.push(line);
        self.push("\n");
    }

    pub fn render(&self) -> String {
        let mut visible: Vec<&str> = self.lines.iter().map(String::as_str).collect();
        if !self.partial.is_empty() {
            visible.push(&self.partial);
        }
        let extra = visible.len().saturating_sub(self.max_lines);
        let dropped = self.dropped + extra as u64;
        let mut out = String::new();
        if dropped > 0 {
            out.push_str(&format!(
                "… {dropped} earlier {} dropped while streaming",
                lines_word(dropped as usize)
            ));
            if extra < visible.len() {
                out.push('\n');
            }
        }
        out.push_str(&visible[extra..].join("\n"));
        out
    }

    fn push_complete(&mut self, line: String) {
        self.lines.push_back(line);
        if self.lines.len() > self.max_lines {
            self.lines.pop_front();
            self.dropped += 1;
        }
    }
}

/// A streaming preview of a whole text at once.
pub fn streaming_preview(text: &str, max_lines: usize) -> String {
    let mut preview = StreamingPreview::new(max_lines);
    preview.push(text);
    preview.render()
}

/// How much a collapsed preview shows (10 lines for a tool, 20 interactive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreviewMode {
    #[default]
    Tool,
    Interactive,
}

impl PreviewMode {
    pub fn lines(self) -> usize {
        match self {
            PreviewMode::Tool => 10,
            PreviewMode::Interactive => 20,
        }
    }
}

/// The first lines of `text`, followed by `… N more lines` when there are more.
pub fn collapsed_preview(text: &str, mode: PreviewMode) -> String {
    let limit = mode.lines();
    let body = text.strip_suffix('\n').unwrap_or(text);
    if body.is_empty() {
        return String::new();
    }
    let mut lines = body.split('\n');
    let shown: Vec<&str> = lines.by_ref().take(limit).collect();
    let more = lines.count();
    let mut out = shown.join("\n");
    if more > 0 {
        out.push_str(&format!("\n… {more} more {}", lines_word(more)));
    }
    out
}

fn lines_word(count: usize) -> &'static str {
    if count == 1 {
        "line"
    } else {
        "lines"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("{i}\n")).collect()
    }

    #[test]
    fn streaming_keeps_the_last_lines_with_a_marker() {
        let out = streaming_preview(&numbered(250), STREAMING_PREVIEW_LINES);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 101);
        assert_eq!(lines[0], "… 150 earlier lines dropped while streaming");
        assert_eq!(lines[1], "151");
        assert_eq!(lines[100], "250");
    }

    #[test]
    fn streaming_without_drops_has_no_marker() {
        assert_eq!(streaming_preview(&numbered(100), 100).lines().count(), 100);
        assert_eq!(streaming_preview("a\nb", 100), "a\nb");
        assert_eq!(streaming_preview("", 100), "");
    }

    #[test]
    fn a_preview_of_no_lines_is_the_marker_alone() {
        assert_eq!(
            streaming_preview("a\nb", 0),
            "… 2 earlier lines dropped while streaming"
        );
    }

    #[test]
    fn streaming_handles_lines_split_across_chunks_and_the_partial_line() {
        let mut preview = StreamingPreview::new(2);
        preview.push("one\ntw");
        preview.push("o\nthr");
        assert_eq!(
            preview.render(),
            "… 1 earlier line dropped while streaming\ntwo\nthr"
        );
        preview.push("ee\n");
        assert_eq!(
            preview.render(),
            "… 1 earlier line dropped while streaming\ntwo\nthree"
        );
        preview.push_line("four");
        assert_eq!(
            preview.render(),
            "… 2 earlier lines dropped while streaming\nthree\nfour"
        );
    }

    #[test]
    fn collapsed_tool_and_interactive() {
        let text = numbered(25);
        let tool = collapsed_preview(&text, PreviewMode::Tool);
        assert_eq!(tool, format!("{}… 15 more lines", numbered(10)));
        let interactive = collapsed_preview(&text, PreviewMode::Interactive);
        assert_eq!(interactive, format!("{}… 5 more lines", numbered(20)));
    }

    #[test]
    fn collapsed_short_text_is_whole() {
        assert_eq!(
            collapsed_preview(&numbered(10), PreviewMode::Tool),
            numbered(10).trim_end()
        );
        assert_eq!(collapsed_preview("", PreviewMode::Tool), "");
        assert_eq!(collapsed_preview("x\n\n", PreviewMode::Tool), "x\n");
        assert_eq!(
            collapsed_preview(&numbered(11), PreviewMode::Tool),
            format!("{}… 1 more line", numbered(10))
        );
    }
}
