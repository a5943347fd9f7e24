//! Cutting output down to what an agent should read, in bounded memory.
//!
//! The rules, applied to the sanitized text (see `sanitize`):
//! - A line longer than `line_bytes` (not counting its `\n`) is cut at a char boundary and
//!   ends with `…`, the whole at most `line_bytes` bytes.
//! - The head is the longest run of (capped) lines from the start that fits in
//!   `head_bytes`; the tail is the longest run of the remaining lines, from the end, that
//!   fits in `tail_bytes`. Lines in neither are replaced by one line `[…N lines elided…]`.
//!   Lines are never split between head, marker and tail.
//! - Totals (`total_bytes`, `total_lines`) describe the full sanitized text. A final line
//!   without `\n` counts as a line; an empty text has 0 lines.
//! - When anything is cut and an [`ArtifactSink`] is given, the full sanitized text is
//!   kept in a file (see `artifact`).
//!
//! [`truncate_output`] is [`OutputAccumulator`] fed with a single chunk, so the one-shot
//! and the streaming forms give identical results for the same text.

use std::collections::VecDeque;
use std::path::PathBuf;

use super::artifact::{ArtifactSink, ArtifactWriter};
use super::sanitize::Sanitizer;

/// The cut points (docs/agents.md#the-output-rules-for-any-tool-outputbuilder: 768 B per line, 20 KiB head, 50 KiB tail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    pub line_bytes: usize,
    pub head_bytes: usize,
    pub tail_bytes: usize,
}

impl Default for OutputLimits {
    fn default() -> Self {
        OutputLimits {
            line_bytes: 768,
            head_bytes: 20 * 1024,
            tail_bytes: 50 * 1024,
        }
    }
}

/// The agent's view of an output, and what it was cut from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncated {
    pub text: String,
    /// Bytes of the full sanitized text.
    pub total_bytes: u64,
    /// Lines of the full sanitized text.
    pub total_lines: u64,
    /// True when a line was capped or lines were elided.
    pub truncated: bool,
    /// The file holding the full sanitized text; only when truncated and a sink was given.
    pub artifact_path: Option<PathBuf>,
    /// Why the artifact could not be kept, when it should have been.
    pub artifact_error: Option<String>,
}

const ELLIPSIS: &str = "…";

/// How much raw input is sanitized at a time, so the sanitizer's output buffer stays small
/// even when one `push` carries a gigabyte.
const SLICE_BYTES: usize = 64 * 1024;

/// Sanitizes and truncates `text` (raw or already sanitized) in one go.
pub fn truncate_output(
    text: &str,
    limits: &OutputLimits,
    artifact: Option<ArtifactSink>,
) -> Truncated {
    let mut accumulator = OutputAccumulator::new(*limits, artifact);
    accumulator.push(text);
    accumulator.finish()
}

/// Streaming form of [`truncate_output`]: raw chunks in, bounded memory (head, tail ring,
/// one capped line, and the held-back artifact text until truncation is certain).
pub struct OutputAccumulator {
    limits: OutputLimits,
    sanitizer: Sanitizer,
    sanitized: String,
    artifact: ArtifactWriter,

    total_bytes: u64,
    total_lines: u64,
    /// The current line, capped at `line_bytes` bytes; `line_len` is its full length.
    line: String,
    line_len: u64,
    line_overflowed: bool,
    any_line_capped: bool,

    head: String,
    head_lines: u64,
    head_closed: bool,
    tail: TailRing,
}

impl OutputAccumulator {
    pub fn new(limits: OutputLimits, artifact: Option<ArtifactSink>) -> Self {
        OutputAccumulator {
            limits,
            sanitizer: Sanitizer::new(),
            sanitized: String::new(),
            artifact: ArtifactWriter::new(artifact),
            total_bytes: 0,
            total_lines: 0,
            line: String::new(),
            line_len: 0,
            line_overflowed: false,
            any_line_capped: false,
            head: String::new(),
            head_lines: 0,
            head_closed: false,
            tail: TailRing::new(limits.tail_bytes),
        }
    }

    /// Takes the next raw chunk of output.
    pub fn push(&mut self, chunk: &str) {
        let mut rest = chunk;
        while !rest.is_empty() {
            // Chars are at most 4 bytes, so a cut below a 64 KiB slice always makes progress.
            let cut = if rest.len() <= SLICE_BYTES {
                rest.len()
            } else {
                char_floor(rest, SLICE_BYTES)
            };
            let (slice, after) = rest.split_at(cut);
            let mut sanitized = std::mem::take(&mut self.sanitized);
            self.sanitizer.push(slice, &mut sanitized);
            self.take_sanitized(&sanitized);
            sanitized.clear();
            self.sanitized = sanitized;
            rest = after;
        }
    }

    /// Takes text that is sanitized already (the sanitizer would leave it as it is, at
    /// the cost of parsing it again).
    pub fn push_sanitized(&mut self, text: &str) {
        self.take_sanitized(text);
    }

    pub fn finish(mut self) -> Truncated {
        let mut sanitized = std::mem::take(&mut self.sanitized);
        self.sanitizer.finish(&mut sanitized);
        self.take_sanitized(&sanitized);
        if self.line_len > 0 {
            self.end_line(false);
        }

        let elided = self.total_lines - self.head_lines - self.tail.lines.len() as u64;
        let truncated = elided > 0 || self.any_line_capped;
        let tail = self.tail.as_str();
        let mut text = String::with_capacity(self.head.len() + tail.len() + 40);
        text.push_str(&self.head);
        if elided > 0 {
            text.push_str(&format!("[…{elided} lines elided…]\n"));
        }
        text.push_str(tail);

        let artifact = self.artifact.finish();
        Truncated {
            text,
            total_bytes: self.total_bytes,
            total_lines: self.total_lines,
            truncated,
            artifact_path: artifact.path,
            artifact_error: artifact.error,
        }
    }

    fn take_sanitized(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.total_bytes += text.len() as u64;
        self.artifact.write(text);
        for piece in text.split_inclusive('\n') {
            match piece.strip_suffix('\n') {
                Some(content) => {
                    self.extend_line(content);
                    self.end_line(true);
                }
                None => self.extend_line(piece),
            }
        }
    }

    fn extend_line(&mut self, content: &str) {
        self.line_len += content.len() as u64;
        if self.line_overflowed {
            return;
        }
        let room = self.limits.line_bytes - self.line.len();
        if content.len() <= room {
            self.line.push_str(content);
            return;
        }
        // Over the cap: keep what fits with the ellipsis, and say so now, so the artifact
        // starts receiving text before the rest of a huge line streams past.
        self.line_overflowed = true;
        self.line.push_str(&content[..char_floor(content, room)]);
        let keep = self.limits.line_bytes.saturating_sub(ELLIPSIS.len());
        let keep = char_floor(&self.line, keep);
        self.line.truncate(keep);
        self.line.push_str(ELLIPSIS);
        if !self.any_line_capped {
            self.any_line_capped = true;
            self.artifact.commit();
        }
    }

    fn end_line(&mut self, newline: bool) {
        self.total_lines += 1;
        if newline {
            self.line.push('\n');
        }
        if !self.head_closed && self.head.len() + self.line.len() <= self.limits.head_bytes {
            self.head.push_str(&self.line);
            self.head_lines += 1;
        } else {
            self.head_closed = true;
            if self.tail.push(&self.line) {
                self.artifact.commit();
            }
        }
        self.line.clear();
        self.line_len = 0;
        self.line_overflowed = false;
    }
}

/// The last lines that fit in `capacity` bytes, in one buffer so a billion short lines
/// cost no allocation each. Dropped lines are released from the front lazily.
struct TailRing {
    capacity: usize,
    buf: String,
    start: usize,
    lines: VecDeque<usize>,
}

impl TailRing {
    fn new(capacity: usize) -> Self {
        TailRing {
            capacity,
            buf: String::new(),
            start: 0,
            lines: VecDeque::new(),
        }
    }

    /// Adds a line; returns true when older lines had to be dropped.
    fn push(&mut self, line: &str) -> bool {
        self.buf.push_str(line);
        self.lines.push_back(line.len());
        let mut dropped = false;
        while self.buf.len() - self.start > self.capacity {
            let Some(len) = self.lines.pop_front() else {
                break;
            };
            self.start += len;
            dropped = true;
        }
        if self.start > self.capacity.max(4096) {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        dropped
    }

    fn as_str(&self) -> &str {
        &self.buf[self.start..]
    }
}

/// The largest char boundary of `s` at or below `index`.
pub(crate) fn char_floor(s: &str, index: usize) -> usize {
    if index >= s.len() {
        return s.len();
    }
    let mut i = index;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> OutputLimits {
        OutputLimits::default()
    }

    #[test]
    fn a_line_that_arrives_in_pieces_is_capped_as_a_whole() {
        // Sanitized text reaches the line as it comes (raw text is held to its newline).
        let mut acc = OutputAccumulator::new(limits(), None);
        acc.push_sanitized(&"a".repeat(500));
        acc.push_sanitized(&"b".repeat(300));
        acc.push_sanitized("\nnext\n");
        let t = acc.finish();
        let first = t.text.lines().next().unwrap();
        assert_eq!(
            first,
            format!("{}{}…", "a".repeat(500), "b".repeat(765 - 500))
        );
        assert_eq!(first.len(), 768);
    }

    fn only_file(dir: &std::path::Path) -> PathBuf {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(entries.len(), 1, "{entries:?}");
        entries.pop().unwrap()
    }

    #[test]
    fn small_output_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let out = truncate_output("a\nb\n", &limits(), Some(ArtifactSink::in_dir(dir.path())));
        assert_eq!(out.text, "a\nb\n");
        assert_eq!((out.total_bytes, out.total_lines), (4, 2));
        assert!(!out.truncated);
        assert_eq!(out.artifact_path, None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn line_counting() {
        let count = |text: &str| truncate_output(text, &limits(), None).total_lines;
        assert_eq!(count(""), 0);
        assert_eq!(count("a"), 1);
        assert_eq!(count("a\n"), 1);
        assert_eq!(count("a\nb"), 2);
        assert_eq!(count("\n\n"), 2);
    }

    #[test]
    fn totals_count_the_sanitized_text() {
        let out = truncate_output("\x1b[31mred\x1b[0m\r\n", &limits(), None);
        assert_eq!(out.text, "red\n");
        assert_eq!((out.total_bytes, out.total_lines), (4, 1));
    }

    #[test]
    fn long_line_is_capped_at_768_bytes_on_a_char_boundary() {
        let exact = "x".repeat(768);
        let out = truncate_output(&exact, &limits(), None);
        assert_eq!(out.text, exact);
        assert!(!out.truncated);

        // 'é' is 2 bytes: 383 of them = 766 bytes, the cut at 765 falls mid-char.
        let text = format!("{}\nnext\n", "é".repeat(400));
        let out = truncate_output(&text, &limits(), None);
        let first = out.text.lines().next().unwrap();
        assert_eq!(first, format!("{}…", "é".repeat(382)));
        assert!(first.len() <= 768);
        assert!(out.text.ends_with("…\nnext\n"));
        assert!(out.truncated);
        assert_eq!(out.total_bytes, text.len() as u64);
    }

    #[test]
    fn many_lines_keep_head_and_tail_and_artifact_holds_everything() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..200_000).map(|i| format!("line {i}\n")).collect();
        let out = truncate_output(&text, &limits(), Some(ArtifactSink::in_dir(dir.path())));
        assert!(out.text.len() < 75 * 1024, "{}", out.text.len());
        assert!(out.truncated);
        assert_eq!(out.total_lines, 200_000);
        assert_eq!(out.total_bytes, text.len() as u64);
        assert!(out.text.starts_with("line 0\nline 1\n"));
        assert!(out.text.ends_with("line 199999\n"));

        let head_lines = out.text.split("[…").next().unwrap().lines().count() as u64;
        let tail_lines = out
            .text
            .rsplit("lines elided…]\n")
            .next()
            .unwrap()
            .lines()
            .count() as u64;
        let elided = 200_000 - head_lines - tail_lines;
        assert!(out.text.contains(&format!("\n[…{elided} lines elided…]\n")));

        let path = out.artifact_path.unwrap();
        assert_eq!(path.parent().unwrap(), dir.path());
        assert_eq!(std::fs::read_to_string(path).unwrap(), text);
    }

    #[test]
    fn head_and_tail_sizes_respect_the_limits() {
        let text: String = (0..20_000).map(|i| format!("{i:09}\n")).collect();
        let out = truncate_output(&text, &limits(), None);
        let (head, rest) = out.text.split_once("[…").unwrap();
        let tail = rest.split_once("…]\n").unwrap().1;
        assert!(head.len() <= 20 * 1024 && head.len() > 20 * 1024 - 10);
        assert!(tail.len() <= 50 * 1024 && tail.len() > 50 * 1024 - 10);
    }

    #[test]
    fn five_mb_single_line_is_capped_but_complete_in_artifact() {
        let dir = tempfile::tempdir().unwrap();
        let text = "ab".repeat(5 * 512 * 1024);
        let out = truncate_output(&text, &limits(), Some(ArtifactSink::in_dir(dir.path())));
        assert_eq!(out.text, format!("{}…", &text[..765]));
        assert_eq!((out.total_bytes, out.total_lines), (5 * 1024 * 1024, 1));
        assert!(out.truncated);
        let saved = std::fs::read_to_string(out.artifact_path.unwrap()).unwrap();
        assert_eq!(saved, text);
    }

    #[test]
    fn streaming_matches_one_shot_whatever_the_chunking() {
        let mut text = String::new();
        for i in 0..10_000 {
            text.push_str(&format!(
                "\x1b[3{}mrow {i}\x1b[0m {}\r\n",
                i % 8,
                "é".repeat(i % 50)
            ));
            if i % 1000 == 0 {
                text.push_str("10%\r50%\r100%\n");
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let one_shot = truncate_output(&text, &limits(), None);
        for chunk_size in [1usize, 7, 4096, 1 << 20] {
            let sub = dir.path().join(chunk_size.to_string());
            let mut acc = OutputAccumulator::new(limits(), Some(ArtifactSink::in_dir(&sub)));
            let mut rest = text.as_str();
            while !rest.is_empty() {
                let next_char = rest.chars().next().map_or(0, char::len_utf8);
                let (chunk, after) = rest.split_at(char_floor(rest, chunk_size).max(next_char));
                acc.push(chunk);
                rest = after;
            }
            let streamed = acc.finish();
            assert_eq!(streamed.text, one_shot.text, "chunk size {chunk_size}");
            assert_eq!(streamed.total_bytes, one_shot.total_bytes);
            assert_eq!(streamed.total_lines, one_shot.total_lines);
            let saved = std::fs::read_to_string(only_file(&sub)).unwrap();
            assert_eq!(saved.len() as u64, one_shot.total_bytes);
            assert_eq!(saved, super::super::sanitize::sanitize(&text));
        }
    }

    #[test]
    fn artifact_is_written_while_streaming() {
        let dir = tempfile::tempdir().unwrap();
        let mut acc = OutputAccumulator::new(limits(), Some(ArtifactSink::in_dir(dir.path())));
        let line = format!("{}\n", "z".repeat(99));
        for _ in 0..20_000 {
            acc.push(&line);
        }
        // 2 MB pushed; the file exists and holds (nearly) all of it before finish().
        let on_disk = std::fs::metadata(only_file(dir.path())).unwrap().len();
        assert!(on_disk > 1_900_000, "{on_disk}");
        let out = acc.finish();
        assert_eq!(
            std::fs::metadata(out.artifact_path.unwrap()).unwrap().len(),
            2_000_000
        );
    }

    #[test]
    fn final_line_without_newline_stays_without_newline() {
        let text: String = (0..20_000).map(|i| format!("{i}\n")).collect::<String>() + "end";
        let out = truncate_output(&text, &limits(), None);
        assert!(out.text.ends_with("19999\nend"));
        assert_eq!(out.total_lines, 20_001);
    }
}
