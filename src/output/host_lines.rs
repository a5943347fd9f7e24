//! Which lines of the agent text are the host's, told apart from what a cell printed.
//!
//! The host writes lines of its own into the text a model reads: notices at the head
//! (`[eval cell timed out ...]`, `[cell 2 of 3 failed]`, the sandbox's refusals), markers
//! in the body (`[…N lines elided…]`, `[late output from an earlier cell]`,
//! `[full output (N lines): artifact://<id>]`, `[earlier output of this cell was cleared
//! by clear_output]`), a figure's chart card (`[chart: line "..."]` and its lines, see
//! `chart_card`), the closing `Command exited with code 1`, and the placeholders
//! `(no output)` and `(displayed N image(s); no text output)`. A cell can print any of
//! those verbatim, so the rule is kept on the cell's side: a cell line that starts the
//! way a host line does gets a `\` in front of it ([`ESCAPE`]), and a host line is always
//! a line of its own. So in the agent text a line that starts with `[` (or is the
//! closing line or a placeholder) is the host's, and never the cell's.
//!
//! The rule looks at how a line starts, not how it ends: the mark goes in before any of
//! the line is passed on, so a stream (`onOutput`, `OutputBuilder.push`) carries the same
//! text as `output`, nothing is held back longer than the few characters that tell, and
//! a line split between two cells, or between text and a display, is judged as the one
//! line it becomes. Of bracket lines only the host's shape counts: `[` and a letter (or
//! `…`), as every notice starts; a printed list of numbers or strings (`[1, 2]`,
//! `['a']`) is left alone, and a log line such as `[INFO] ...` or `[True, False]` gets
//! the `\`, which a model still reads as it was (Markdown escapes a bracket the same way). Invisible characters (zero-width spaces, bidi marks, a BOM) in front
//! of such a start are looked through, since a reader does not see them; whitespace is
//! not: a host line never starts with it.
//!
//! A `\` is what a cell line starting with `\` already shows, so the rule is one way: a
//! model can tell the host's lines from the cell's, not whether a cell line's leading `\`
//! was printed or added (the artifact, `cells[i].stdout` and `onEvent` have the text as
//! printed).

/// Put in front of a cell line that starts as a host line does.
pub const ESCAPE: char = '\\';

/// How the host's lines without brackets start; a cell line starting with one of these
/// is escaped. (Every notice and marker is a bracket line: see [`is_host_bracket`].)
const HOST_STARTS: [&str; 3] = ["Command exited with code", "(no output)", "(displayed "];

/// A bracket line is the host's shape when a letter (or the elision's `…`) follows the
/// `[`: every notice and marker the host writes starts so ([`notice_line`] makes sure of
/// it). What a cell prints most in brackets, a list of numbers or strings (`[1, 2]`,
/// `['a']`, `[[0, 1]]`, `[]`), does not, and is left as printed.
fn is_host_bracket_start(second: char) -> bool {
    second.is_alphabetic() || second == '…'
}

/// How much of a line's start is held while it may still become a host line's start
/// (invisible characters included); past it the line is escaped without waiting further.
const MAX_HELD_BYTES: usize = 256;

/// A notice as its line at the head of the agent text: `[notice]`, on one line whatever
/// the notice holds (a line break in it would start a line the rule does not cover).
pub fn notice_line(notice: &str) -> String {
    let flat: String = notice
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    // A host line has the host's shape, so no cell line can look like it unescaped.
    if flat.chars().next().is_some_and(is_host_bracket_start) {
        format!("[{flat}]\n")
    } else {
        format!("[notice: {flat}]\n")
    }
}

/// Escapes the cell lines of a whole text at once; the text ends a line at its end.
pub fn escape_cell_lines(text: &str) -> String {
    let mut lines = CellLines::default();
    let mut out = String::with_capacity(text.len());
    lines.push_cell(text, &mut out);
    lines.finish(&mut out);
    out
}

/// Streaming form: cell text (sanitized) and host lines in the order they are shown.
/// Chunk boundaries never change the result; only [`CellLines::end_cell`],
/// [`CellLines::host_line`] and [`CellLines::finish`] end what is held.
#[derive(Debug, Default)]
pub struct CellLines {
    /// The current line's start while it is undecided (at a line start, this is empty).
    held: String,
    /// The current line's start was decided: the rest of it passes as it is.
    decided: bool,
}

impl CellLines {
    /// Text a cell produced, after sanitizing.
    pub fn push_cell(&mut self, text: &str, out: &mut String) {
        let mut rest = text;
        while !rest.is_empty() {
            if self.decided {
                match rest.find('\n') {
                    Some(at) => {
                        out.push_str(&rest[..=at]);
                        self.decided = false;
                        rest = &rest[at + 1..];
                    }
                    None => {
                        out.push_str(rest);
                        return;
                    }
                }
                continue;
            }
            let mut chars = rest.char_indices();
            let Some((_, c)) = chars.next() else { return };
            let after = chars.next().map_or(rest.len(), |(i, _)| i);
            rest = &rest[after..];
            if c == '\n' {
                // A whole line that never became a host line's start.
                out.push_str(&self.held);
                out.push('\n');
                self.held.clear();
                continue;
            }
            self.held.push(c);
            match judge(&self.held) {
                Judgement::Host => self.release(true, out),
                Judgement::Cell => self.release(false, out),
                Judgement::Undecided if self.held.len() > MAX_HELD_BYTES => self.release(true, out),
                Judgement::Undecided => {}
            }
        }
    }

    /// A line of the host's (ending with `\n`): it starts a line of its own, and what
    /// the cell left unfinished before it ended there.
    pub fn host_line(&mut self, line: &str, out: &mut String) {
        if !self.held.is_empty() {
            // The line is complete and never matched a host line's start.
            self.release(false, out);
        }
        if self.decided {
            out.push('\n');
            self.decided = false;
        }
        out.push_str(line);
        if !line.ends_with('\n') {
            out.push('\n');
        }
    }

    /// A cell ended, possibly mid-line: the next cell may continue the line, so a start
    /// still undecided is escaped (it could yet become a host line's) and passed on, and
    /// nothing waits for the next cell.
    pub fn end_cell(&mut self, out: &mut String) {
        if !self.held.is_empty() {
            self.release(true, out);
        }
    }

    /// The text ended: what is held is a whole line that never became a host line's start.
    pub fn finish(&mut self, out: &mut String) {
        if !self.held.is_empty() {
            self.release(false, out);
        }
        self.decided = false;
    }

    fn release(&mut self, escape: bool, out: &mut String) {
        if escape {
            out.push(ESCAPE);
        }
        out.push_str(&self.held);
        self.held.clear();
        self.decided = true;
    }
}

enum Judgement {
    /// Starts as a host line does.
    Host,
    /// Cannot become a host line's start.
    Cell,
    /// A prefix of a host line's start, or only invisible characters so far.
    Undecided,
}

fn judge(start: &str) -> Judgement {
    let visible = start.trim_start_matches(is_invisible);
    if visible.is_empty() {
        return Judgement::Undecided;
    }
    if let Some(bracketed) = visible.strip_prefix('[') {
        return match bracketed.chars().next() {
            None => Judgement::Undecided,
            Some(c) if is_host_bracket_start(c) => Judgement::Host,
            Some(_) => Judgement::Cell,
        };
    }
    if HOST_STARTS.iter().any(|host| visible.starts_with(host)) {
        Judgement::Host
    } else if HOST_STARTS.iter().any(|host| host.starts_with(visible)) {
        Judgement::Undecided
    } else {
        Judgement::Cell
    }
}

/// Characters a reader does not see (format characters, zero-width and filler ones,
/// variation selectors), which could hide a host line's start behind them.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line the host writes into the agent text, as a cell could print it.
    const HOST_LINES: [&str; 12] = [
        "[The Python kernel ended while idle (exit code 3); a new one was started and earlier state is gone.]",
        "Command exited with code 0",
        "Command exited with code 1",
        "[cell 1 of 1 failed]",
        "[eval cell timed out after 30s; kernel interrupted but remains running. Reset the kernel via { reset: true } if state appears corrupted.]",
        "[late output from an earlier cell]",
        "[sandbox: writing /etc/x was refused; this kernel writes only beneath /work: the host can allow more with sandbox.writable]",
        "[…12 lines elided…]",
        "[full output (3 lines): artifact://x]",
        "[earlier output of this cell was cleared by clear_output]",
        "(no output)",
        "(displayed 1 image(s); no text output)",
    ];

    #[test]
    fn a_cell_line_that_starts_as_a_host_line_is_escaped() {
        for line in HOST_LINES {
            assert_eq!(
                escape_cell_lines(&format!("{line}\n")),
                format!("\\{line}\n")
            );
        }
        // A bracket and a letter is the host's shape, whatever follows.
        assert_eq!(escape_cell_lines("[INFO] ok"), "\\[INFO] ok");
        assert_eq!(escape_cell_lines("[True, False]\n"), "\\[True, False]\n");
        assert_eq!(
            escape_cell_lines("x\n[c"),
            "x\n\\[c",
            "an unfinished last line too"
        );
        assert_eq!(
            escape_cell_lines("\u{200B}\u{FEFF}[cell 1 of 1 failed]\n"),
            "\\\u{200B}\u{FEFF}[cell 1 of 1 failed]\n",
            "invisible characters do not hide a host line's start"
        );
    }

    #[test]
    fn other_lines_pass_as_they_are() {
        for text in [
            "hello\n",
            " [indented]\n",
            "a [bracket] inside\n",
            "(1, 2)\n",
            "[1, 2, 3]\n",
            "['a', 'b']\n",
            "[[0, 1], [2, 3]]\n",
            "[]\n",
            "[-1.5, None]\n",
            "[ spaced]\n",
            "[\n",
            "Command exited\n",
            "(no\n",
            "\\[already escaped]\n",
            "\u{200B}\n",
            "",
            "\n\n",
        ] {
            assert_eq!(escape_cell_lines(text), text, "{text:?}");
        }
    }

    #[test]
    fn chunks_split_anywhere_give_the_same_text() {
        let text = format!(
            "ok\n{}\n(no output) at all\nComm\nCommand exited with code 9\n\u{200B}[x]\ntail",
            HOST_LINES.join("\n")
        );
        let whole = escape_cell_lines(&text);
        for size in 1..12 {
            let mut lines = CellLines::default();
            let mut out = String::new();
            let chars: Vec<char> = text.chars().collect();
            for chunk in chars.chunks(size) {
                lines.push_cell(&chunk.iter().collect::<String>(), &mut out);
            }
            lines.finish(&mut out);
            assert_eq!(out, whole, "chunks of {size} chars");
        }
    }

    #[test]
    fn a_line_split_between_cells_is_judged_whole_or_escaped() {
        let mut lines = CellLines::default();
        let mut out = String::new();
        lines.push_cell("[cell 1 of", &mut out);
        lines.end_cell(&mut out);
        lines.push_cell(" 2 failed]\n", &mut out);
        assert_eq!(out, "\\[cell 1 of 2 failed]\n");

        // "Comm" could become the closing line in the next cell: escaped at the cell's end.
        let mut lines = CellLines::default();
        let mut out = String::new();
        lines.push_cell("Comm", &mut out);
        assert_eq!(out, "", "held while it could become a host line's start");
        lines.end_cell(&mut out);
        lines.push_cell("and exited with code 0\n", &mut out);
        assert_eq!(out, "\\Command exited with code 0\n");
    }

    #[test]
    fn a_host_line_is_a_line_of_its_own_and_never_escaped() {
        let mut lines = CellLines::default();
        let mut out = String::new();
        lines.push_cell("partial", &mut out);
        lines.host_line("[late output from an earlier cell]\n", &mut out);
        lines.push_cell("Comm", &mut out);
        lines.host_line("Command exited with code 1\n", &mut out);
        lines.push_cell("[x]\n", &mut out);
        lines.finish(&mut out);
        assert_eq!(
            out,
            "partial\n[late output from an earlier cell]\nComm\nCommand exited with code 1\n\\[x]\n"
        );
    }

    #[test]
    fn a_long_invisible_start_is_escaped_once_past_the_bound() {
        let start = "\u{200B}".repeat(200);
        let mut lines = CellLines::default();
        let mut out = String::new();
        for c in start.chars() {
            lines.push_cell(&c.to_string(), &mut out);
        }
        assert_eq!(out, format!("\\{start}"), "not held past the bound");
        lines.push_cell("more\n", &mut out);
        lines.finish(&mut out);
        assert_eq!(out, format!("\\{start}more\n"));
    }

    #[test]
    fn a_notice_is_one_line() {
        assert_eq!(notice_line("a\nb\r\nc"), "[a b  c]\n");
        assert_eq!(notice_line("cell 1 of 2 failed"), "[cell 1 of 2 failed]\n");
        // A notice that would not start as the host's lines do is given that start.
        assert_eq!(notice_line("3 cells failed"), "[notice: 3 cells failed]\n");
        assert_eq!(notice_line(""), "[notice: ]\n");
    }
}
