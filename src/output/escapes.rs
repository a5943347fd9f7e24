//! `vte`'s parser with two bounds a terminal does not have, shared by the sanitizer and
//! `clamp` so both read escape sequences the same way.
//!
//! A terminal lets an unterminated string sequence (OSC `ESC ]`, DCS `ESC P`, SOS `ESC X`,
//! PM `ESC ^`, APC `ESC _`) swallow everything up to its terminator, which may never come:
//! a stray `print('\x1b]8;;')` would hide the traceback that follows. Here:
//! - a newline ends any escape sequence in progress (it is cancelled as by CAN, and the
//!   newline itself is kept);
//! - a string sequence whose payload reaches [`MAX_STRING_SEQUENCE_BYTES`] without its
//!   terminator is cancelled there, and what follows is text again.
//!
//! So a sequence is well-formed when it is terminated on its own line within that length;
//! anything else drops at most the sequence's own line, up to that length.
//!
//! The parser's state lives on across calls (a sequence split between two chunks parses as
//! one), and that state is bounded: vte keeps at most 1 KiB of an OSC, and the count here
//! stops at the bound above.

use vte::{Parser, Perform};

/// The longest string-sequence payload (bytes after `ESC ]` etc.) that may stay open.
pub const MAX_STRING_SEQUENCE_BYTES: usize = 4096;

/// CAN: cancels the sequence in progress; outside one it is a control we ignore.
const CANCEL: &[u8] = b"\x18";

#[derive(Default)]
pub struct BoundedParser {
    parser: Parser,
    /// The previous byte left us right after an ESC (as far as string sequences go).
    after_escape: bool,
    open_string: Option<OpenString>,
}

struct OpenString {
    /// OSC ends at BEL too; DCS at the 8-bit ST byte (vte's rule).
    kind: StringKind,
    payload_bytes: usize,
}

#[derive(PartialEq)]
enum StringKind {
    Osc,
    Dcs,
    SosPmApc,
}

impl BoundedParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `bytes` (whole UTF-8 characters, possibly cut anywhere else) to `performer`.
    pub fn advance<P: Perform>(&mut self, performer: &mut P, bytes: &[u8]) {
        let mut start = 0;
        for (i, &byte) in bytes.iter().enumerate() {
            if byte == b'\n' {
                self.parser.advance(performer, &bytes[start..i]);
                self.cancel(performer);
                start = i;
                continue;
            }
            if let Some(open) = &self.open_string {
                let char_start = byte & 0xc0 != 0x80;
                if open.payload_bytes >= MAX_STRING_SEQUENCE_BYTES && char_start {
                    self.parser.advance(performer, &bytes[start..i]);
                    self.cancel(performer);
                    start = i;
                } else {
                    self.track_in_string(byte);
                    continue;
                }
            }
            self.track_outside_string(byte);
        }
        self.parser.advance(performer, &bytes[start..]);
    }

    fn cancel<P: Perform>(&mut self, performer: &mut P) {
        self.parser.advance(performer, CANCEL);
        self.after_escape = false;
        self.open_string = None;
    }

    fn track_in_string(&mut self, byte: u8) {
        let Some(open) = &mut self.open_string else {
            return;
        };
        let ends = match byte {
            0x18 | 0x1a => true,
            0x1b => {
                self.after_escape = true;
                true
            }
            0x07 => open.kind == StringKind::Osc,
            0x9c => open.kind == StringKind::Dcs,
            _ => false,
        };
        if ends {
            self.open_string = None;
        } else {
            open.payload_bytes += 1;
        }
    }

    fn track_outside_string(&mut self, byte: u8) {
        if byte == 0x1b {
            self.after_escape = true;
            return;
        }
        if !self.after_escape {
            return;
        }
        let kind = match byte {
            b']' => StringKind::Osc,
            b'P' => StringKind::Dcs,
            b'X' | b'^' | b'_' => StringKind::SosPmApc,
            // vte stays in its escape state across C0 controls, DEL and non-ASCII bytes.
            0x18 | 0x1a | 0x20..=0x7e => {
                self.after_escape = false;
                return;
            }
            _ => return,
        };
        self.after_escape = false;
        self.open_string = Some(OpenString {
            kind,
            payload_bytes: 0,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vte::Params;

    #[derive(Default)]
    struct Printed(String);

    impl Perform for Printed {
        fn print(&mut self, c: char) {
            self.0.push(c);
        }
        fn execute(&mut self, byte: u8) {
            if byte == b'\n' {
                self.0.push('\n');
            }
        }
        fn csi_dispatch(&mut self, _: &Params, _: &[u8], _: bool, _: char) {}
    }

    fn printed(chunks: &[&str]) -> String {
        let mut parser = BoundedParser::new();
        let mut out = Printed::default();
        for chunk in chunks {
            parser.advance(&mut out, chunk.as_bytes());
        }
        out.0
    }

    #[test]
    fn newline_ends_every_unterminated_sequence() {
        for intro in ["\x1b]8;;", "\x1bPq", "\x1b_x", "\x1b^x", "\x1bXx"] {
            assert_eq!(printed(&[intro, "hidden\nshown"]), "\nshown", "{intro:?}");
        }
        // Other sequences end at any letter, so the newline must come first to matter.
        for intro in ["\x1b[12;", "\x1b[", "\x1b[1 ", "\x1b(", "\x1b"] {
            assert_eq!(printed(&[intro, "\nshown"]), "\nshown", "{intro:?}");
        }
    }

    #[test]
    fn terminated_sequences_still_hide_their_payload() {
        assert_eq!(printed(&["a\x1b]0;title\x07b\x1bPdata\x1b\\c"]), "abc");
        assert_eq!(printed(&["a\x1b]0;ti", "tle\x1b", "\\b"]), "ab");
    }

    #[test]
    fn long_unterminated_string_is_cut_at_the_bound() {
        let payload = "p".repeat(MAX_STRING_SEQUENCE_BYTES);
        assert_eq!(printed(&["\x1b]", &payload, "after"]), "after");
        // Split across chunks, the count carries over.
        let half = "p".repeat(MAX_STRING_SEQUENCE_BYTES / 2);
        assert_eq!(printed(&["\x1b_", &half, &half, "after"]), "after");
        // Never inside a multi-byte character.
        let odd = "p".repeat(MAX_STRING_SEQUENCE_BYTES - 1);
        assert_eq!(printed(&["\x1b]", &odd, "éafter"]), "after");
    }

    #[test]
    fn only_the_terminators_of_its_own_kind_end_a_string_for_the_bound() {
        let text = "z".repeat(5000);
        let rest = MAX_STRING_SEQUENCE_BYTES - "0;Ü".len();
        // An OSC does not end at 0x9c (here a byte of `Ü`), nor a DCS at BEL: both stay
        // bounded, and what follows the bound is text again.
        assert_eq!(printed(&["\x1b]0;Ü", &text]), "z".repeat(5000 - rest));
        assert_eq!(
            printed(&["\x1bP\x07", &text]),
            "z".repeat(5000 - (MAX_STRING_SEQUENCE_BYTES - 1))
        );
    }

    #[test]
    fn a_string_ended_by_st_starts_the_count_again_for_the_next_one() {
        // The first OSC ends at ST; the second is shorter than the bound, so it is hidden
        // whole, though both together are longer.
        let x = "x".repeat(4080);
        let q = "q".repeat(100);
        let line = format!("\x1b]0;t\x1b\\{x}\x1b]8;;{q}\x07after");
        assert_eq!(printed(&[&line]), format!("{x}after"));
    }

    #[test]
    fn string_sequence_within_the_bound_is_whole() {
        let payload = "p".repeat(MAX_STRING_SEQUENCE_BYTES - 1);
        assert_eq!(printed(&["\x1b]", &payload, "\x07after"]), "after");
    }
}
