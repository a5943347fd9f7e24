//! The end of a cell's agent text that is still open to change, so the agent reads the
//! final state a notebook would show: a display updated 300 times (`update_display`, a
//! display handle's `update`) is one display, and `clear_output` removes what it clears.
//!
//! The agent text itself streams into a bounded accumulator that cannot take text back.
//! So a cell's latest text is held here first, as segments (plain text, or the text of a
//! display with its id), and passed on when the cell ends or when more than [`HOLD_BYTES`]
//! is held. Held text can still be revised; text already passed on is final: an update
//! of a display that was passed on is appended as the display's new state, and a clear
//! that cannot remove everything says so.
//!
//! Held text keeps which of it is the host's (a marker line, the clear's notice): what is
//! passed on says so ([`Piece`]), for the rule on host lines (`host_lines`).

use std::collections::HashSet;

/// The most text held back per cell; past it the held text is passed on.
pub const HOLD_BYTES: usize = 64 * 1024;

/// Said where a `clear_output` could not take back text already passed on.
pub const CLEARED_NOTICE: &str = "[earlier output of this cell was cleared by clear_output]\n";

enum Segment {
    Text(String),
    Display {
        id: Option<String>,
        /// Lines of the host's that stand for the display (a chart's card), before `text`.
        card: String,
        text: String,
    },
    /// A line of the host's.
    Host(String),
}

/// Text passed on, final: the cell's, or a line of the host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    Cell(&'a str),
    Host(&'a str),
}

/// One cell's revisable text; `out` receives what becomes final, in order.
#[derive(Default)]
pub struct Revisable {
    held: Vec<Segment>,
    held_bytes: usize,
    /// Some of this cell's text was passed on: a clear cannot take it back.
    passed_on: bool,
    /// `clear_output(wait=True)`: clear when the next output comes.
    clear_pending: bool,
    /// Display ids shown in this cell, held or passed on.
    seen_ids: HashSet<String>,
}

impl Revisable {
    /// A line of the host's, in order with the cell's text around it (cleared with it).
    pub fn host_line(&mut self, line: &str, out: &mut impl FnMut(Piece)) {
        self.before_new_output(out);
        self.held.push(Segment::Host(line.to_string()));
        self.grew(line.len(), out);
    }

    /// Stream text (stdout, stderr, a traceback).
    pub fn text(&mut self, text: &str, out: &mut impl FnMut(Piece)) {
        if text.is_empty() {
            return;
        }
        self.before_new_output(out);
        match self.held.last_mut() {
            Some(Segment::Text(last)) => last.push_str(text),
            _ => self.held.push(Segment::Text(text.to_string())),
        }
        self.grew(text.len(), out);
    }

    /// A display's text: a new display, or with `update` the new state of every display
    /// shown with `id`.
    pub fn display(
        &mut self,
        id: Option<&str>,
        update: bool,
        text: String,
        out: &mut impl FnMut(Piece),
    ) {
        self.display_with_card(id, update, String::new(), text, out);
    }

    /// A display's text with lines of the host's before it (`card`, whole lines), revised
    /// together by an update and cleared together.
    pub fn display_with_card(
        &mut self,
        id: Option<&str>,
        update: bool,
        card: String,
        text: String,
        out: &mut impl FnMut(Piece),
    ) {
        if let (true, Some(id)) = (update, id) {
            self.update(id, card, text, out);
            return;
        }
        self.before_new_output(out);
        if let Some(id) = id {
            self.seen_ids.insert(id.to_string());
        }
        let len = card.len() + text.len();
        self.held.push(Segment::Display {
            id: id.map(str::to_string),
            card,
            text,
        });
        self.grew(len, out);
    }

    /// `clear_output(wait)`.
    pub fn clear(&mut self, wait: bool, out: &mut impl FnMut(Piece)) {
        if wait {
            self.clear_pending = true;
        } else {
            self.clear_now(out);
        }
    }

    /// The cell ended: everything held is final.
    pub fn finish(&mut self, out: &mut impl FnMut(Piece)) {
        self.pass_on(out);
        *self = Revisable::default();
    }

    fn update(&mut self, id: &str, card: String, text: String, out: &mut impl FnMut(Piece)) {
        let mut found = false;
        let mut delta: isize = 0;
        for segment in &mut self.held {
            if let Segment::Display {
                id: Some(shown),
                card: old_card,
                text: old,
            } = segment
            {
                if shown == id {
                    delta +=
                        (card.len() + text.len()) as isize - (old_card.len() + old.len()) as isize;
                    old_card.clone_from(&card);
                    old.clone_from(&text);
                    found = true;
                }
            }
        }
        if found {
            self.held_bytes = self.held_bytes.saturating_add_signed(delta);
            self.grew(0, out);
        } else if self.seen_ids.contains(id) {
            // Its earlier state is final already: the new one follows, as a display.
            let len = card.len() + text.len();
            self.held.push(Segment::Display {
                id: Some(id.to_string()),
                card,
                text,
            });
            self.grew(len, out);
        }
        // An update of a display never shown in this cell shows nothing, as in Jupyter.
    }

    fn before_new_output(&mut self, out: &mut impl FnMut(Piece)) {
        if self.clear_pending {
            self.clear_pending = false;
            self.clear_now(out);
        }
    }

    fn clear_now(&mut self, out: &mut impl FnMut(Piece)) {
        self.held.clear();
        self.held_bytes = 0;
        if self.passed_on {
            out(Piece::Host(CLEARED_NOTICE));
            self.passed_on = false;
        }
    }

    fn grew(&mut self, added: usize, out: &mut impl FnMut(Piece)) {
        self.held_bytes += added;
        if self.held_bytes > HOLD_BYTES {
            self.pass_on(out);
        }
    }

    fn pass_on(&mut self, out: &mut impl FnMut(Piece)) {
        for segment in self.held.drain(..) {
            let pieces = match &segment {
                Segment::Text(text) => [Piece::Cell(text), Piece::Cell("")],
                Segment::Display { card, text, .. } => [Piece::Host(card), Piece::Cell(text)],
                Segment::Host(line) => [Piece::Host(line), Piece::Cell("")],
            };
            for piece in pieces {
                let (Piece::Cell(text) | Piece::Host(text)) = piece;
                if !text.is_empty() {
                    out(piece);
                    self.passed_on = true;
                }
            }
        }
        self.held_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(piece: Piece<'_>) -> &str {
        let (Piece::Cell(text) | Piece::Host(text)) = piece;
        text
    }

    fn run(steps: impl FnOnce(&mut Revisable, &mut dyn FnMut(Piece))) -> String {
        let mut text = String::new();
        let mut out = |p: Piece| text.push_str(text_of(p));
        let mut view = Revisable::default();
        steps(&mut view, &mut out);
        view.finish(&mut out);
        text
    }

    #[test]
    fn three_hundred_updates_of_one_display_leave_its_final_state() {
        let text = run(|v, out| {
            let mut out = |p: Piece| out(p);
            v.text("start\n", &mut out);
            v.display(Some("p"), false, "0%\n".into(), &mut out);
            for i in 1..=300 {
                v.display(Some("p"), true, format!("{i}%\n"), &mut out);
            }
            v.text("end\n", &mut out);
        });
        assert_eq!(text, "start\n300%\nend\n");
    }

    #[test]
    fn clear_output_removes_what_came_before_and_wait_clears_at_the_next_output() {
        let now = run(|v, out| {
            let mut out = |p: Piece| out(p);
            v.text("old\n", &mut out);
            v.clear(false, &mut out);
            v.text("new\n", &mut out);
        });
        assert_eq!(now, "new\n");
        let waiting = run(|v, out| {
            let mut out = |p: Piece| out(p);
            for i in 0..300 {
                v.clear(true, &mut out);
                v.text(&format!("step {i}\n"), &mut out);
            }
        });
        assert_eq!(waiting, "step 299\n");
        let trailing = run(|v, out| {
            let mut out = |p: Piece| out(p);
            v.text("kept\n", &mut out);
            v.clear(true, &mut out);
        });
        assert_eq!(
            trailing, "kept\n",
            "a clear that waits for output that never comes"
        );
    }

    #[test]
    fn held_text_is_bounded_and_what_was_passed_on_is_final() {
        let passed = std::cell::Cell::new(0usize);
        let mut texts = String::new();
        let mut out = |p: Piece| {
            let s = text_of(p);
            passed.set(passed.get() + s.len());
            texts.push_str(s);
        };
        let mut v = Revisable::default();
        v.display(Some("p"), false, "first\n".into(), &mut out);
        for _ in 0..100 {
            v.text(&"x".repeat(1000), &mut out);
            assert!(v.held_bytes <= HOLD_BYTES);
        }
        assert!(passed.get() > 0, "over the bound, held text is passed on");
        v.display(Some("p"), true, "second\n".into(), &mut out);
        v.clear(false, &mut out);
        v.finish(&mut out);
        assert!(texts.starts_with("first\n"));
        assert!(
            texts.ends_with(CLEARED_NOTICE),
            "{}",
            &texts[texts.len() - 80..]
        );
    }

    #[test]
    fn up_to_64_kib_is_held_and_an_update_counts_what_it_adds_or_takes_away() {
        let kib = |n: usize| "x".repeat(n * 1024);
        // Exactly HOLD_BYTES is still held: a clear takes it all back, silently.
        let held = run(|v, out| {
            let mut out = |p: Piece| out(p);
            v.text(&kib(64), &mut out);
            v.clear(false, &mut out);
        });
        assert_eq!(held, "");
        // A display updated from 1 byte to 70 KiB is over the bound: passed on, final.
        let grown = run(|v, out| {
            let mut out = |p: Piece| out(p);
            v.display(Some("p"), false, "a".into(), &mut out);
            v.display(Some("p"), true, kib(70), &mut out);
            v.clear(false, &mut out);
        });
        assert_eq!(grown, format!("{}{CLEARED_NOTICE}", kib(70)));
        // One updated from 60 KiB to 1 byte frees its room: 10 KiB more is still held.
        let shrunk = run(|v, out| {
            let mut out = |p: Piece| out(p);
            v.display(Some("p"), false, kib(60), &mut out);
            v.display(Some("p"), true, "b".into(), &mut out);
            v.text(&kib(10), &mut out);
            v.clear(false, &mut out);
        });
        assert_eq!(shrunk, "");
    }

    #[test]
    fn host_lines_and_the_clears_notice_are_passed_on_as_the_hosts() {
        let mut pieces: Vec<(bool, String)> = Vec::new();
        let mut out = |p: Piece| pieces.push((matches!(p, Piece::Host(_)), text_of(p).into()));
        let mut v = Revisable::default();
        v.text("a\n", &mut out);
        v.host_line("[marker]\n", &mut out);
        v.text(&"x".repeat(HOLD_BYTES), &mut out);
        v.clear(false, &mut out);
        v.text(CLEARED_NOTICE, &mut out);
        v.finish(&mut out);
        let hosts: Vec<&str> = pieces
            .iter()
            .filter(|p| p.0)
            .map(|p| p.1.as_str())
            .collect();
        assert_eq!(
            hosts,
            ["[marker]\n", CLEARED_NOTICE],
            "a cell's copy of the notice is the cell's"
        );
    }

    #[test]
    fn a_displays_card_is_the_hosts_and_is_revised_with_its_text() {
        let mut pieces: Vec<Piece<'static>> = Vec::new();
        let mut out = |p: Piece| {
            let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
            pieces.push(match p {
                Piece::Cell(t) => Piece::Cell(leak(t)),
                Piece::Host(t) => Piece::Host(leak(t)),
            })
        };
        let mut v = Revisable::default();
        v.display_with_card(Some("f"), false, "[chart: a]\n".into(), "".into(), &mut out);
        v.display_with_card(None, false, "[chart: b]\n".into(), "fig\n".into(), &mut out);
        v.display_with_card(Some("f"), true, "[chart: c]\n".into(), "".into(), &mut out);
        v.finish(&mut out);
        assert_eq!(
            pieces,
            [
                Piece::Host("[chart: c]\n"),
                Piece::Host("[chart: b]\n"),
                Piece::Cell("fig\n")
            ]
        );
    }

    #[test]
    fn an_update_of_a_display_never_shown_shows_nothing() {
        let text = run(|v, out| {
            let mut out = |p: Piece| out(p);
            v.display(Some("ghost"), true, "boo\n".into(), &mut out);
            v.display(None, false, "plain\n".into(), &mut out);
        });
        assert_eq!(text, "plain\n");
    }
}
