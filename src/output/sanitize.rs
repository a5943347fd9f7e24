//! Terminal output -> plain text: what a person would have seen, minus the styling.
//!
//! Escape sequences are recognised by `vte` (alacritty's parser, built without `std` so an
//! unterminated OSC string cannot grow its buffer past 1 KiB), through
//! [`BoundedParser`](super::escapes::BoundedParser). The parser keeps its state between
//! calls, so a sequence, a `\r\n` or a multi-byte character split across two chunks of a
//! stream is handled exactly as if it had arrived in one piece.
//!
//! Rules:
//! - CSI, OSC (BEL- or ST-terminated), DCS, SOS/PM/APC and other ESC sequences are dropped,
//!   as are C0 and C1 controls other than `\t` and `\n`, and DEL.
//! - Unlike a terminal, an unterminated sequence never swallows later lines: a newline ends
//!   any sequence in progress (the newline is kept), and a string sequence (`ESC ]`,
//!   `ESC P`, `ESC X`, `ESC ^`, `ESC _`) is cancelled once its payload reaches
//!   [`MAX_STRING_SEQUENCE_BYTES`](super::escapes::MAX_STRING_SEQUENCE_BYTES) (4096) bytes;
//!   the text after that point is kept.
//! - `\r\n` is a newline. A `\r` followed by more text on the same line starts the line
//!   over: only the text after the last `\r` survives (`10%\r20%\r100%\n` -> `100%\n`). A
//!   `\r` right before a newline or the end of input changes nothing.
//! - The line being built is held back until its newline, since a later `\r` may still
//!   erase it. To keep memory bounded it is released once it reaches [`MAX_HELD_LINE_BYTES`];
//!   a `\r` after that only erases what came after the release.
//! - U+FFFD (what lossy UTF-16 conversion leaves of a lone surrogate) is ordinary text.

use vte::{Params, Perform};

use super::escapes::BoundedParser;

/// How much of an unfinished line is held back in case a `\r` rewrites it.
pub const MAX_HELD_LINE_BYTES: usize = 64 * 1024;

/// Sanitizes a whole text at once. Same rules as [`Sanitizer`].
pub fn sanitize(text: &str) -> String {
    let mut sanitizer = Sanitizer::new();
    let mut out = String::with_capacity(text.len());
    sanitizer.push(text, &mut out);
    sanitizer.finish(&mut out);
    out
}

/// Incremental sanitizer for a stream of chunks.
///
/// `push` appends to `out` only text that is final: everything up to the last newline, plus
/// the released part of an over-long line. `finish` appends what is still held back.
pub struct Sanitizer {
    parser: BoundedParser,
    line: HeldLine,
}

#[derive(Default)]
struct HeldLine {
    text: String,
    /// A `\r` was seen; the next printed character starts the line over.
    carriage_return: bool,
}

impl Default for Sanitizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Sanitizer {
    pub fn new() -> Self {
        Sanitizer {
            parser: BoundedParser::new(),
            line: HeldLine::default(),
        }
    }

    pub fn push(&mut self, chunk: &str, out: &mut String) {
        let mut performer = LinePerformer {
            line: &mut self.line,
            out,
        };
        self.parser.advance(&mut performer, chunk.as_bytes());
    }

    /// The unfinished line as it stands now, not released: a later `\r` may still
    /// rewrite it. (An escape sequence still open is not part of it.)
    pub fn held(&self) -> &str {
        &self.line.text
    }

    /// Releases the held line. An escape sequence still open at this point is dropped.
    pub fn finish(&mut self, out: &mut String) {
        out.push_str(&self.line.text);
        self.line = HeldLine::default();
        self.parser = BoundedParser::new();
    }
}

struct LinePerformer<'a> {
    line: &'a mut HeldLine,
    out: &'a mut String,
}

impl LinePerformer<'_> {
    #[inline]
    fn put(&mut self, c: char) {
        if self.line.carriage_return {
            self.line.carriage_return = false;
            self.line.text.clear();
        }
        self.line.text.push(c);
        if self.line.text.len() >= MAX_HELD_LINE_BYTES {
            self.out.push_str(&self.line.text);
            self.line.text.clear();
        }
    }
}

impl Perform for LinePerformer<'_> {
    #[inline]
    fn print(&mut self, c: char) {
        // vte hands C0/C1 controls to `execute`, but DEL reaches `print`.
        if c != '\u{7f}' {
            self.put(c);
        }
    }

    #[inline]
    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' => {
                self.line.carriage_return = false;
                self.out.push_str(&self.line.text);
                self.out.push('\n');
                self.line.text.clear();
            }
            b'\r' => self.line.carriage_return = true,
            b'\t' => self.put('\t'),
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, _: &Params, _: &[u8], _: bool, _: char) {}
    fn esc_dispatch(&mut self, _: &[u8], _: bool, _: u8) {}
    fn osc_dispatch(&mut self, _: &[&[u8]], _: bool) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unfinished_line_is_held_back_up_to_64_kib() {
        // The documented bound, spelled out: 60 KiB is held (a `\r` can still erase it) ...
        let mut sanitizer = Sanitizer::new();
        let mut out = String::new();
        sanitizer.push(&"a".repeat(60 * 1024), &mut out);
        assert!(out.is_empty(), "released {} bytes early", out.len());
        sanitizer.push("\rb", &mut out);
        sanitizer.finish(&mut out);
        assert_eq!(out, "b", "the carriage return rewrote the held line");
        // ... and past 64 KiB the line is released.
        let mut sanitizer = Sanitizer::new();
        let mut out = String::new();
        sanitizer.push(&"a".repeat(70 * 1024), &mut out);
        assert!(out.len() >= 64 * 1024, "released {} bytes", out.len());
    }

    fn sanitize_chunks(chunks: &[&str]) -> String {
        let mut sanitizer = Sanitizer::new();
        let mut out = String::new();
        for chunk in chunks {
            sanitizer.push(chunk, &mut out);
        }
        sanitizer.finish(&mut out);
        out
    }

    #[test]
    fn strips_ansi_colours_and_cursor_movement() {
        let text = "\x1b[1;31mred\x1b[0m plain \x1b[38;2;1;2;3mrgb\x1b[39m\x1b[2K\x1b[1A\n";
        assert_eq!(sanitize(text), "red plain rgb\n");
    }

    #[test]
    fn strips_osc_with_bel_and_st_and_other_escapes() {
        let text = "\x1b]0;title\x07a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b\x1b(Bc\x1bPq#0\x1b\\d\x1b_apc\x1b\\e";
        assert_eq!(sanitize(text), "alinkbcde");
    }

    #[test]
    fn drops_controls_but_keeps_tab_newline_and_replacement_char() {
        let text = "a\x00b\x07c\x08d\x1be\u{7f}f\u{85}g\u{9b}h\ti\u{fffd}\n";
        // `ESC e` is a complete (unknown) escape sequence, so the `e` goes with it.
        assert_eq!(sanitize(text), "abcdfgh\ti\u{fffd}\n");
    }

    #[test]
    fn crlf_becomes_lf() {
        assert_eq!(sanitize("a\r\nb\r\n"), "a\nb\n");
        assert_eq!(sanitize("a\r\r\nb"), "a\nb");
    }

    #[test]
    fn carriage_return_keeps_the_final_state_of_a_line() {
        assert_eq!(sanitize("10%\r20%\r100%\ndone\n"), "100%\ndone\n");
        // Shorter final segment: we keep just that segment, not terminal leftovers.
        assert_eq!(sanitize("progress 100%\rok\n"), "ok\n");
        // A trailing \r erases nothing.
        assert_eq!(sanitize("abc\r"), "abc");
        // tqdm style, with an erase-line sequence after the \r.
        assert_eq!(
            sanitize("\r  0%|     |\r\x1b[2K 50%|##   |\r100%|#####|\n"),
            "100%|#####|\n"
        );
    }

    #[test]
    fn state_carries_across_chunk_boundaries() {
        assert_eq!(
            sanitize_chunks(&["a\x1b[3", "1mred\x1b", "[0m\n"]),
            "ared\n"
        );
        assert_eq!(sanitize_chunks(&["a\r", "\nb"]), "a\nb");
        assert_eq!(sanitize_chunks(&["10%\r", "20%\r", "100%\n"]), "100%\n");
        assert_eq!(sanitize_chunks(&["\x1b]0;ti", "tle\x1b", "\\x"]), "x");
    }

    #[test]
    fn push_releases_only_final_text() {
        let mut sanitizer = Sanitizer::new();
        let mut out = String::new();
        sanitizer.push("one\ntw", &mut out);
        assert_eq!(out, "one\n");
        sanitizer.push("o\r", &mut out);
        assert_eq!(out, "one\n");
        sanitizer.finish(&mut out);
        assert_eq!(out, "one\ntwo");
    }

    #[test]
    fn long_line_is_released_in_bounded_pieces() {
        let mut sanitizer = Sanitizer::new();
        let mut out = String::new();
        let long = "x".repeat(MAX_HELD_LINE_BYTES + 10);
        sanitizer.push(&long, &mut out);
        assert_eq!(out.len(), MAX_HELD_LINE_BYTES);
        // The \r only rewrites what came after the release.
        sanitizer.push("\ry\n", &mut out);
        assert_eq!(out.len(), MAX_HELD_LINE_BYTES + 2);
        assert!(out.ends_with("xy\n"));
    }

    #[test]
    fn unterminated_sequences_end_at_the_newline() {
        // Seen once: a stray OSC hid the traceback that followed.
        for intro in ["\x1b]8;;", "\x1bP", "\x1b_", "\x1b^", "\x1bX"] {
            let text = format!("{intro}\nTraceback (most recent call last):\nValueError: x\n");
            assert_eq!(
                sanitize(&text),
                "\nTraceback (most recent call last):\nValueError: x\n",
                "{intro:?}"
            );
            assert_eq!(
                sanitize_chunks(&["before ", intro, "same line", "\nafter"]),
                "before \nafter",
                "{intro:?}"
            );
        }
    }

    #[test]
    fn unterminated_sequence_without_newline_ends_after_the_bound() {
        let payload = "p".repeat(crate::output::escapes::MAX_STRING_SEQUENCE_BYTES);
        assert_eq!(sanitize(&format!("a\x1b]{payload}tail")), "atail");
        // A terminated one just under the bound is dropped whole.
        let payload = &payload[1..];
        assert_eq!(sanitize(&format!("a\x1b]{payload}\x07tail")), "atail");
    }

    #[test]
    fn is_idempotent() {
        let once = sanitize("\x1b[31ma\r\nb\rc\x00\td\n");
        assert_eq!(sanitize(&once), once);
    }

    #[test]
    fn throughput_on_plain_text() {
        // Debug builds are much slower than release; this only guards against
        // accidental quadratic behaviour. Run with `--release -- --ignored` to measure.
        let line = "the quick brown fox jumps over the lazy dog 0123456789 ~!@#$%^&*()\n";
        let text = line.repeat(2 * 1024 * 1024 / line.len());
        let started = std::time::Instant::now();
        let out = sanitize(&text);
        assert_eq!(out.len(), text.len());
        assert!(started.elapsed().as_secs_f64() < 2.0);
    }
}
