//! Clamping one line to a terminal width, for TUIs.
//!
//! Width rules: escape sequences (as `vte` parses them, the same definition the sanitizer
//! uses) are 0 columns; a printed char counts its `unicode-width` (East Asian Wide and
//! Fullwidth chars and most emoji 2, combining marks and ZWJ 0); a tab counts 1; other
//! controls count 0. Width is summed per char, so a ZWJ emoji sequence counts each of its
//! emoji.
//!
//! The marker counts toward the budget: a clamped line is at most `max_columns` wide,
//! marker included. The kept part is the longest prefix of whole chars whose width `K`
//! satisfies `K + width(marker(W - K)) <= max_columns`, where `W` is the line's width and
//! `marker(n)` is `… [n visible columns omitted]` (28 columns plus the digits of `n`).
//! Escape sequences and zero-width chars directly after the last kept char are kept; all
//! later ones are dropped. If an SGR sequence (colours) was kept, `ESC[0m` is inserted
//! before the marker so the marker is not styled. When `max_columns` is too small for the
//! marker even with nothing kept (under 29 to 35 columns, by the digits of `W`), the marker
//! is `…` alone (1 column) after the first `max_columns - 1` columns, so the result still
//! fits; a budget of 0 gives the empty string.
//!
//! Bytes are bounded too: a line longer than `16 * max_columns` bytes
//! ([`MAX_BYTES_PER_COLUMN`]) is cut as well, so a line of zero-width characters or escape
//! sequences cannot pass through whole. The kept part is then at most that many bytes,
//! ends where no escape sequence is open, and the marker may say `0 visible columns
//! omitted`. A clamped line is at most `16 * max_columns` bytes plus `ESC[0m` and the
//! marker (under 64 bytes). Escape sequences are read as the sanitizer reads them: a
//! string sequence left open for 4096 bytes ends there (see `escapes`).

use unicode_width::UnicodeWidthChar;
use vte::{Params, Perform};

use super::escapes::BoundedParser;

pub const DEFAULT_MAX_COLUMNS: usize = 4000;

/// Bytes of the line kept per column of budget: room for colours and combining marks,
/// while a line of zero-width characters or escape sequences stays bounded.
pub const MAX_BYTES_PER_COLUMN: usize = 16;

/// Clamps `line` to `max_columns` visible columns (see the module docs for the rules).
pub fn clamp_line(line: &str, max_columns: usize) -> String {
    let max_bytes = max_columns.saturating_mul(MAX_BYTES_PER_COLUMN);
    let total = visible_width(line);
    if total <= max_columns && line.len() <= max_bytes {
        return line.to_string();
    }

    if max_columns == 0 {
        return String::new();
    }
    // Too narrow for the counted marker even with nothing kept: the bare ellipsis still
    // says the line goes on, and the result stays inside the budget.
    let bare = marker_width(total) > max_columns;
    let marker_columns = |omitted: usize| if bare { 1 } else { marker_width(omitted) };

    let mut parser = BoundedParser::new();
    let mut scan = CharScan::default();
    // What is kept up to the last cut point, and what came since; a cut point is a place
    // where no escape sequence is open, so a clamped line never ends in half a sequence.
    let (mut kept, mut end, mut kept_sgr) = (0usize, 0usize, false);
    let (mut pending_width, mut pending_sgr) = (0usize, false);
    for (index, c) in line.char_indices() {
        let next = index + c.len_utf8();
        scan.fired = false;
        parser.advance(&mut scan, &line.as_bytes()[index..next]);
        if !scan.fired {
            scan.ground = false;
        }
        let width = scan.take_width();
        let columns = kept + pending_width + width;
        if columns + marker_columns(total - columns) > max_columns || next > max_bytes {
            break;
        }
        pending_width += width;
        pending_sgr |= std::mem::take(&mut scan.sgr);
        if scan.ground {
            kept += std::mem::take(&mut pending_width);
            kept_sgr |= std::mem::take(&mut pending_sgr);
            end = next;
        }
    }

    let omitted = total - kept;
    let mut out = String::with_capacity(end + 40);
    out.push_str(&line[..end]);
    if kept_sgr {
        out.push_str("\x1b[0m");
    }
    if bare {
        out.push('…');
    } else {
        out.push_str(&marker(omitted));
    }
    out
}

/// Width of `line` in terminal columns, by the rules of this module.
pub fn visible_width(line: &str) -> usize {
    let mut parser = BoundedParser::new();
    let mut scan = CharScan::default();
    parser.advance(&mut scan, line.as_bytes());
    scan.width
}

fn marker(omitted: usize) -> String {
    format!("… [{omitted} visible columns omitted]")
}

fn marker_width(omitted: usize) -> usize {
    let digits = omitted.checked_ilog10().map_or(1, |d| d as usize + 1);
    28 + digits
}

struct CharScan {
    width: usize,
    sgr: bool,
    /// Some callback ran for the current char (none runs inside a sequence).
    fired: bool,
    /// No escape sequence is open after the current char.
    ground: bool,
}

impl Default for CharScan {
    fn default() -> Self {
        CharScan {
            width: 0,
            sgr: false,
            fired: false,
            ground: true,
        }
    }
}

impl CharScan {
    fn take_width(&mut self) -> usize {
        std::mem::take(&mut self.width)
    }

    fn ended(&mut self, ground: bool) {
        self.fired = true;
        self.ground = ground;
    }
}

impl Perform for CharScan {
    fn print(&mut self, c: char) {
        self.ended(true);
        self.width += c.width().unwrap_or(0);
    }

    fn execute(&mut self, byte: u8) {
        self.fired = true;
        match byte {
            b'\t' => self.width += 1,
            // CAN and SUB cancel a sequence; other controls leave the state as it was.
            0x18 | 0x1a => self.ground = true,
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, _: &Params, _: &[u8], _: bool, action: char) {
        self.ended(true);
        if action == 'm' {
            self.sgr = true;
        }
    }

    fn esc_dispatch(&mut self, _: &[u8], _: bool, _: u8) {
        self.ended(true);
    }

    fn osc_dispatch(&mut self, _: &[&[u8]], bell_terminated: bool) {
        // Ended by ESC, the `\\` of the ST is still to come.
        self.ended(bell_terminated);
    }

    fn hook(&mut self, _: &Params, _: &[u8], _: bool, _: char) {
        self.ended(false);
    }

    fn put(&mut self, _: u8) {
        self.ended(false);
    }

    fn unhook(&mut self) {
        self.ended(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_may_fall_right_after_an_escape_or_a_cancelled_sequence() {
        // 32 columns hold `a` and the marker for the 100 columns of wide chars that follow;
        // what ends a sequence (ESC 7's final byte; CAN cancelling a CSI) is a cut point, so
        // the sequence is kept whole with the `a` before it.
        let wide = "中".repeat(50);
        for sequence in ["\x1b7", "\x1b[12\x18", "\x1b[12\x1a"] {
            let line = format!("a{sequence}{wide}");
            assert_eq!(
                clamp_line(&line, 32),
                format!("a{sequence}… [100 visible columns omitted]"),
                "{sequence:?}"
            );
        }
    }

    #[test]
    fn the_byte_bound_keeps_a_char_that_ends_exactly_on_it() {
        // Zero-width combining marks make bytes, not columns, the bound: 40 columns allow
        // 640 bytes, and "aa" + 319 marks end exactly there.
        let line = format!("aa{}{}", "\u{301}".repeat(330), "b".repeat(100));
        let out = clamp_line(&line, 40);
        assert_eq!(
            out,
            format!("{}… [100 visible columns omitted]", &line[..640])
        );
    }

    #[test]
    fn marker_width_matches_its_text() {
        for n in [1, 9, 10, 99, 100, 12345] {
            assert_eq!(marker_width(n), visible_width(&marker(n)), "{n}");
        }
    }

    #[test]
    fn short_lines_are_unchanged() {
        assert_eq!(clamp_line("hello", 5), "hello");
        assert_eq!(
            clamp_line("\x1b[31mhello\x1b[0m", 5),
            "\x1b[31mhello\x1b[0m"
        );
        assert_eq!(clamp_line("日本", 4), "日本");
    }

    #[test]
    fn ascii_line_is_cut_with_marker_inside_the_budget() {
        let line = "a".repeat(5000);
        let out = clamp_line(&line, 4000);
        // K + 28 + digits(5000 - K) <= 4000: K = 3968 leaves 1032 (4 digits): 3968+32 = 4000.
        assert_eq!(
            out,
            format!("{}… [1032 visible columns omitted]", "a".repeat(3968))
        );
        assert_eq!(visible_width(&out), 4000);
    }

    #[test]
    fn digits_shrinking_lets_one_more_column_in() {
        // W = 1040, max 1000: K = 969 gives 71 omitted (2 digits): 969 + 30 = 999; K = 970
        // gives 70 omitted: 970 + 30 = 1000.
        let out = clamp_line(&"b".repeat(1040), 1000);
        assert_eq!(
            out,
            format!("{}… [70 visible columns omitted]", "b".repeat(970))
        );
    }

    #[test]
    fn cjk_counts_two_columns() {
        let line = "日".repeat(100); // 200 columns
        let out = clamp_line(&line, 60);
        // K + 28 + digits(200 - K) <= 60 -> K <= 29, and even: K = 28, 172 omitted.
        assert_eq!(
            out,
            format!("{}… [172 visible columns omitted]", "日".repeat(14))
        );
        assert!(visible_width(&out) <= 60);
    }

    #[test]
    fn emoji_count_two_columns() {
        let line = format!("ab{}", "😀".repeat(50)); // 2 + 100 columns
        let out = clamp_line(&line, 50);
        // K + 28 + 2 <= 50 -> K <= 20: "ab" + 9 emoji = 20 columns, 82 omitted.
        assert_eq!(
            out,
            format!("ab{}… [82 visible columns omitted]", "😀".repeat(9))
        );
    }

    #[test]
    fn ansi_does_not_count_and_is_kept_up_to_the_cut() {
        let line = format!(
            "\x1b[1;32m{}\x1b[0m tail \x1b[31mred\x1b[0m",
            "g".repeat(40)
        );
        // Visible: 40 + 6 + 3 = 49 columns.
        let out = clamp_line(&line, 40);
        // K + 28 + 2 <= 40 -> K = 10; 39 omitted.
        assert_eq!(
            out,
            format!(
                "\x1b[1;32m{}\x1b[0m… [39 visible columns omitted]",
                "g".repeat(10)
            )
        );
    }

    #[test]
    fn sequences_right_after_the_last_kept_char_are_kept() {
        let line = format!("{}\x1b]8;;http://x\x07{}", "a".repeat(10), "b".repeat(40));
        let out = clamp_line(&line, 40);
        assert_eq!(
            out,
            format!(
                "{}\x1b]8;;http://x\x07… [40 visible columns omitted]",
                "a".repeat(10)
            )
        );
    }

    #[test]
    fn a_budget_too_small_for_the_marker_ends_in_a_bare_ellipsis() {
        // The counted marker would take 29 columns of a budget of 3 (or 20).
        assert_eq!(clamp_line("abcdef", 3), "ab…");
        let out = clamp_line(&"x".repeat(50), 20);
        assert_eq!(out, format!("{}…", "x".repeat(19)));
        assert_eq!(visible_width(&out), 20);
        assert_eq!(clamp_line("abcdef", 1), "…");
        assert_eq!(clamp_line("abcdef", 0), "");
        // 30 columns hold the marker for 50 omitted (30 wide) with nothing kept.
        assert_eq!(
            clamp_line(&"x".repeat(50), 30),
            "… [50 visible columns omitted]"
        );
    }

    #[test]
    fn zero_width_flood_is_bounded_in_bytes() {
        // Seen once: 10,000 zero-width chars in a line of few columns came back whole.
        let line = format!("abc{}defgh", "\u{200b}".repeat(10_000));
        assert_eq!(visible_width(&line), 8);
        let out = clamp_line(&line, 40);
        assert!(
            out.len() <= 40 * MAX_BYTES_PER_COLUMN + 64,
            "{} bytes",
            out.len()
        );
        assert!(visible_width(&out) <= 40);
        assert!(out.starts_with("abc\u{200b}"));
        assert!(out.ends_with("… [5 visible columns omitted]"), "{out:?}");
    }

    #[test]
    fn huge_escape_sequence_is_bounded_and_never_cut_in_half() {
        let params = "1;".repeat(5_000);
        let line = format!("ab\x1b[{params}mcd");
        let out = clamp_line(&line, 40);
        assert_eq!(out, "ab… [2 visible columns omitted]");
        let osc = "u".repeat(300);
        let line = format!("ab\x1b]8;;{osc}\x1b\\cd{}", "\u{301}".repeat(400));
        let out = clamp_line(&line, 40);
        assert!(
            out.len() <= 40 * MAX_BYTES_PER_COLUMN + 64,
            "{} bytes",
            out.len()
        );
        assert!(out.contains("\x1b\\"), "{out:?}");
    }

    #[test]
    fn combining_marks_and_tabs() {
        assert_eq!(visible_width("e\u{301}"), 1);
        assert_eq!(visible_width("a\tb"), 3);
        assert_eq!(visible_width("a\u{0}b\u{7f}"), 2);
    }
}
