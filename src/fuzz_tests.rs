//! Property tests over untrusted input (issues 8 and 14), run by `cargo test --lib`.
//! The frame reader and decoder, the output sanitizer/truncation/clamp and image sizing
//! must never panic and must keep their promises for any input. Bounded case counts keep
//! `cargo test` quick; `npm run fuzz` runs the same properties with `PROPTEST_CASES` cases
//! each (release build). Proptest records a failing input under `proptest-regressions/`,
//! committed so it is re-run.

use proptest::prelude::*;

use crate::output::{
    chart_card, clamp_line, escape_cell_lines, sanitize, truncate_output, CellLines, OutputLimits,
    Sanitizer, MAX_CARD_CHARS,
};
use crate::wire::frame_reader::{Fed, LineBuffer};
use crate::wire::protocol::{decode, decode_line, RunnerFrame};

/// `cases` for `cargo test`, or `PROPTEST_CASES` when set (as `npm run fuzz` does).
fn config_with(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn config() -> ProptestConfig {
    config_with(500)
}

/// A piece of terminal output, with the text the sanitizer must keep of it.
#[derive(Clone, Debug)]
struct Piece {
    bytes: String,
    kept: String,
}

/// Printable text: letters, digits and punctuation, wide and zero-width characters, and
/// bytes a sequence could mistake for its own (`[`, `]`, `\\`, digits, `;`).
fn printable() -> impl Strategy<Value = String> {
    "([ -~]|日|é|😀|\u{200b}|\u{301}){0,24}"
}

/// Printable text, well-formed escape sequences (kept: nothing), unterminated ones ended by
/// their newline (kept: the newline), and newlines.
fn terminal_piece() -> impl Strategy<Value = Piece> {
    let payload = "[ -~]{0,40}";
    let intro = prop_oneof![
        Just("\x1b]"),
        Just("\x1bP"),
        Just("\x1bX"),
        Just("\x1b^"),
        Just("\x1b_")
    ];
    prop_oneof![
        4 => printable().prop_map(|text| Piece { bytes: text.clone(), kept: text }),
        1 => Just(Piece { bytes: "\n".into(), kept: "\n".into() }),
        1 => "\x1b\\[[0-9;:]{0,12}[ -/]{0,2}[@-~]".prop_map(|seq| Piece { bytes: seq, kept: String::new() }),
        1 => "\x1b\\][0-9]{0,3};[ -~]{0,40}(\x07|\x1b\\\\)".prop_map(|seq| Piece { bytes: seq, kept: String::new() }),
        1 => (intro.clone(), payload).prop_map(|(intro, payload)| Piece {
            bytes: format!("{intro}{payload}\x1b\\"),
            kept: String::new(),
        }),
        1 => "\x1b[ -/]{0,2}[0-9A-Oa-z]".prop_map(|seq| Piece { bytes: seq, kept: String::new() }),
        // Unterminated: ends at its newline, which stays.
        2 => prop_oneof![
            (intro, "[ -~]{0,40}").prop_map(|(intro, payload)| format!("{intro}{payload}")),
            "\x1b\\[[0-9;:]{0,12}",
            "\x1b[ -/]{0,2}",
        ]
        .prop_map(|seq| Piece { bytes: format!("{seq}\n"), kept: "\n".into() }),
    ]
}

/// Splits `text` at the given fractions, on character boundaries.
fn chunks(text: &str, cuts: &[f64]) -> Vec<String> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|f| {
            let mut i = (f * text.len() as f64) as usize;
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            i
        })
        .collect();
    points.sort_unstable();
    points.push(text.len());
    let mut start = 0;
    points
        .into_iter()
        .map(|end| {
            let chunk = text[start..end].to_string();
            start = end;
            chunk
        })
        .collect()
}

/// Bytes that look like frames now and then: JSON fragments, escapes, control bytes.
fn frame_like() -> impl Strategy<Value = Vec<u8>> {
    let pieces = prop_oneof![
        Just(br#"{"type":"#.to_vec()),
        Just(br#""done""#.to_vec()),
        Just(br#""stdout","data":"#.to_vec()),
        Just(br#","id":"r1""#.to_vec()),
        Just(b"\\ud800".to_vec()),
        Just(b"}".to_vec()),
        Just(b"\xff\xfe".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(pieces, 0..12).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn decode_never_panics(line in frame_like()) {
        let _ = decode(&line);
    }

    #[test]
    fn decode_never_panics_on_any_bytes(line in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode(&line);
    }

    #[test]
    fn sanitized_text_has_no_controls(text in "(\\PC|[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}]|\\x1b\\[[0-9;]{0,6}[A-Za-z]|\\r\\n?)*") {
        let out = sanitize(&text);
        prop_assert!(out.chars().all(|c| c == '\n' || c == '\t' || !c.is_control()), "{out:?}");
    }

    #[test]
    fn truncation_keeps_its_bounds(
        // Lines of one repeated char: cheap to generate, and the sizes are what matter.
        lines in proptest::collection::vec((0usize..1200, prop_oneof![Just('a'), Just(' '), Just('é')]), 0..60),
    ) {
        let lines: Vec<String> = lines.iter().map(|&(n, c)| c.to_string().repeat(n)).collect();
        let text = lines.join("\n");
        // Small head and tail so the generated text is cut often.
        let limits = OutputLimits { line_bytes: 768, head_bytes: 2048, tail_bytes: 4096 };
        let t = truncate_output(&text, &limits, None);
        prop_assert!(t.text.len() <= 2048 + 4096 + 64 + 8 * 2, "{} bytes", t.text.len());
        for line in t.text.lines() {
            prop_assert!(line.len() <= 768 + '…'.len_utf8() || line.starts_with("[…"));
        }
        prop_assert_eq!(t.total_bytes as usize, text.len());
    }

    #[test]
    fn clamped_lines_fit(line in "\\PC{0,300}", max in 10usize..120) {
        let out = clamp_line(&line, max);
        prop_assert!(crate::output::visible_width(&out) <= max.max(40));
    }
}

proptest! {
    #![proptest_config(config_with(300))]

    /// Seen once broken: every printable character outside a well-formed sequence survives, in
    /// order, however the stream is chunked; nothing else does.
    #[test]
    fn sanitizer_keeps_all_text_outside_well_formed_sequences(
        pieces in proptest::collection::vec(terminal_piece(), 0..40),
        cuts in proptest::collection::vec(0.0f64..1.0, 0..6),
    ) {
        let input: String = pieces.iter().map(|p| p.bytes.as_str()).collect();
        let expected: String = pieces.iter().map(|p| p.kept.as_str()).collect();
        prop_assert_eq!(&sanitize(&input), &expected);
        let mut sanitizer = Sanitizer::new();
        let mut out = String::new();
        for chunk in chunks(&input, &cuts) {
            sanitizer.push(&chunk, &mut out);
        }
        sanitizer.finish(&mut out);
        prop_assert_eq!(out, expected);
    }

    /// An unterminated string sequence without a newline hides at most 4096 bytes.
    #[test]
    fn sanitizer_bounds_an_unterminated_sequence(
        intro in prop_oneof![Just("\x1b]"), Just("\x1bP"), Just("\x1b_")],
        hidden in 4000usize..4200,
        after in printable(),
    ) {
        let bound = crate::output::escapes::MAX_STRING_SEQUENCE_BYTES;
        let input = format!("{intro}{}{after}", "h".repeat(hidden));
        let expected = if hidden >= bound {
            format!("{}{after}", "h".repeat(hidden - bound))
        } else {
            // The payload runs on into `after`, and is cut at a character boundary.
            let k = (bound - hidden..=after.len())
                .find(|&k| after.is_char_boundary(k))
                .unwrap_or(after.len());
            after[k..].to_string()
        };
        prop_assert_eq!(sanitize(&input), expected);
    }

    /// Bounded in columns and bytes; what is kept is the line itself or a prefix of it
    /// followed by the marker.
    #[test]
    fn clamp_is_bounded_and_keeps_a_prefix(
        pieces in proptest::collection::vec(terminal_piece(), 0..30),
        flood in 0usize..3000,
        max in 0usize..200,
    ) {
        let line: String = pieces
            .iter()
            .map(|p| p.bytes.replace('\n', " "))
            .chain(std::iter::once("\u{200b}".repeat(flood)))
            .collect();
        let out = clamp_line(&line, max);
        let width = crate::output::visible_width(&out);
        prop_assert!(width <= max, "{} columns", width);
        prop_assert!(out.len() <= 16 * max + 64, "{} bytes for {} columns", out.len(), max);
        if max == 0 {
            prop_assert_eq!(out.as_str(), "");
        } else if out != line {
            let cut = out.rfind('…').unwrap();
            let kept = out[..cut].strip_suffix("\x1b[0m").unwrap_or(&out[..cut]);
            prop_assert!(line.starts_with(kept));
            prop_assert!(out[cut..] == *"…" || out[cut..].ends_with(" visible columns omitted]"));
        }
    }

    /// No cell line comes out starting as a host line does (`[` and a letter or `…`, the
    /// closing line, a placeholder, behind invisible characters or not); each line is the cell's own or
    /// it behind one `\`; and chunks give what the whole text gives.
    #[test]
    fn escaped_cell_lines_never_look_like_the_hosts(
        lines in proptest::collection::vec(
            "(\u{200b}|\u{feff}){0,2}(\\[|\\[…|\\[a|\\(no output\\)|\\(displayed |Command exited with code |Comm|\\(| |x|\\\\)?([ -~]|é){0,12}",
            0..12,
        ),
        cuts in proptest::collection::vec(0.0f64..1.0, 0..6),
    ) {
        let text = lines.join("\n");
        let out = escape_cell_lines(&text);
        let visible = |l: &str| l.trim_start_matches(['\u{200b}', '\u{feff}']).to_string();
        for line in out.split('\n') {
            let v = visible(line);
            prop_assert!(
                !(v.strip_prefix('[').and_then(|r| r.chars().next()).is_some_and(|c| c.is_alphabetic() || c == '…')
                    || v.starts_with("Command exited with code")
                    || v.starts_with("(no output)") || v.starts_with("(displayed ")),
                "{:?}", line
            );
        }
        let kept: Vec<&str> = out.split('\n').collect();
        let given: Vec<&str> = text.split('\n').collect();
        prop_assert_eq!(kept.len(), given.len());
        for (k, g) in kept.iter().zip(&given) {
            prop_assert!(k == g || k.strip_prefix('\\') == Some(g), "{:?} from {:?}", k, g);
        }
        let mut streamed = String::new();
        let mut escaper = CellLines::default();
        for chunk in chunks(&text, &cuts) {
            escaper.push_cell(&chunk, &mut streamed);
        }
        escaper.finish(&mut streamed);
        prop_assert_eq!(streamed, out);
    }

    /// Text within the limits comes back whole; any text comes back bounded.
    #[test]
    fn truncation_is_bounded_and_lossless_when_small(
        text in "(\\PC|\n){0,1000}",
    ) {
        let limits = OutputLimits { line_bytes: 200, head_bytes: 512, tail_bytes: 1024 };
        let t = truncate_output(&text, &limits, None);
        prop_assert!(t.text.len() <= 512 + 1024 + 64 + 8 * 2, "{} bytes", t.text.len());
        if text.len() <= 512 && text.lines().all(|l| l.len() <= 200) {
            prop_assert_eq!(t.text, text);
        }
    }
}

/// What the line reader must give for `input`: its lines (the last without a newline, if
/// any bytes follow the last newline), up to the first longer than `limit`, and whether
/// there was such a line.
fn expected_lines(input: &[u8], limit: usize) -> (Vec<Vec<u8>>, bool) {
    let mut lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|last| last.is_empty()) {
        lines.pop();
    }
    let mut kept = Vec::new();
    for line in lines {
        if line.len() > limit {
            return (kept, true);
        }
        kept.push(line.to_vec());
    }
    (kept, false)
}

/// Feeds `input` to a [`LineBuffer`] as a reader would, offering `reads[i]` bytes at a
/// time; checks at every step that the buffer never holds more than `limit`.
fn split_lines(input: &[u8], reads: &[usize], limit: usize, kept: usize) -> (Vec<Vec<u8>>, bool) {
    let mut buffer = LineBuffer::keeping(limit, kept);
    let mut lines = Vec::new();
    let (mut at, mut read) = (0, 0);
    while at < input.len() {
        let size = reads[read % reads.len()];
        read += 1;
        let mut available = &input[at..input.len().min(at + size)];
        while !available.is_empty() {
            match buffer.feed(available) {
                Fed::TooLong => return (lines, true),
                Fed::Took { bytes, complete } => {
                    assert!(bytes > 0 && bytes <= available.len());
                    assert!(
                        buffer.capacity() <= limit,
                        "holds {} > {limit}",
                        buffer.capacity()
                    );
                    at += bytes;
                    available = &available[bytes..];
                    if complete {
                        lines.push(buffer.line().to_vec());
                        buffer.clear();
                    }
                }
            }
        }
    }
    if !buffer.is_empty() {
        lines.push(buffer.line().to_vec());
    }
    (lines, false)
}

/// Bytes with newlines now and then, and runs long enough to pass a small limit.
fn lines_input() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..16),
        2 => Just(b"\n".to_vec()),
        1 => (1usize..200).prop_map(|n| vec![b'x'; n]),
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|p| p.concat())
}

/// A runner frame as the runner writes it, with the frame it decodes to. None contains
/// `{"type":` after its start: JSON escapes the quotes of any such text in a string.
fn runner_frame() -> impl Strategy<Value = (String, RunnerFrame)> {
    let id = "[a-z0-9-]{1,12}";
    let text = "\\PC{0,40}";
    prop_oneof![
        (id, text).prop_map(|(id, data)| (
            format!(
                r#"{{"type":"stdout","id":{},"data":{}}}"#,
                json(&id),
                json(&data)
            ),
            RunnerFrame::Stdout {
                id: Some(id),
                data,
                late: false
            },
        )),
        (id, text).prop_map(|(id, data)| (
            format!(
                r#"{{"type":"result","id":{},"bundle":{{"text/plain":{}}}}}"#,
                json(&id),
                json(&data)
            ),
            RunnerFrame::Result {
                id: Some(id),
                bundle: serde_json::json!({ "text/plain": data })
            },
        )),
        (id, 0u32..1000).prop_map(|(id, count)| (
            format!(
                r#"{{"type":"done","id":{},"status":"ok","executionCount":{count}}}"#,
                json(&id)
            ),
            RunnerFrame::Done {
                id: Some(id),
                status: crate::wire::protocol::DoneStatus::Ok,
                execution_count: count,
                cancelled: false,
                stdin_requested: false,
            },
        )),
    ]
}

fn json(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// Stray bytes a cell might write to the protocol pipe without a newline: anything but a
/// newline, with frame starts and fragments mixed in.
fn junk() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        3 => proptest::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..12),
        1 => Just(br#"{"type":"#.to_vec()),
        1 => Just(br#"{"type":"done","id":"r"#.to_vec()),
        1 => Just(b"\xff\xfe}".to_vec()),
    ];
    proptest::collection::vec(piece, 0..6).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn decode_line_never_panics(line in frame_like()) {
        let _ = decode_line(&line);
    }

    #[test]
    fn decode_line_never_panics_on_any_bytes(line in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_line(&line);
    }

    /// The line buffer gives exactly the input's lines, up to the first over the limit,
    /// however the bytes arrive, and never holds more than the limit.
    #[test]
    fn line_buffer_splits_exactly_and_stays_bounded(
        input in lines_input(),
        reads in proptest::collection::vec(1usize..64, 1..8),
        limit in 1usize..256,
        kept in 0usize..16,
    ) {
        prop_assert_eq!(split_lines(&input, &reads, limit, kept), expected_lines(&input, limit));
    }

    /// A frame behind stray bytes on its line is recovered; a frame alone is decoded as is.
    #[test]
    fn a_frame_behind_junk_is_recovered((line, frame) in runner_frame(), junk in junk()) {
        prop_assert_eq!(decode_line(line.as_bytes()), Ok(frame.clone()));
        let mut dirty = junk;
        dirty.extend_from_slice(line.as_bytes());
        prop_assert_eq!(decode_line(&dirty), Ok(frame));
    }
}

proptest! {
    // Each case starts a tokio runtime: fewer cases, still well under a second.
    #![proptest_config(config_with(150))]

    /// Through the async reader, as the kernel reads: every frame of a stream of junk +
    /// frame lines comes back in order, and a line over the limit stops the stream after
    /// the frames before it, whatever the read size.
    #[test]
    fn the_reader_recovers_every_frame_and_stops_at_the_limit(
        segments in proptest::collection::vec((junk(), runner_frame()), 0..8),
        oversized_at in proptest::option::of(0usize..8),
        read_size in 1usize..300,
    ) {
        let limit = 512;
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        let mut stopped = false;
        for (i, (junk, (line, frame))) in segments.into_iter().enumerate() {
            if oversized_at == Some(i) {
                stream.extend(std::iter::repeat_n(b'z', limit + 1));
                stream.push(b'\n');
                stopped = true;
            }
            stream.extend_from_slice(&junk);
            stream.extend_from_slice(line.as_bytes());
            stream.push(b'\n');
            if !stopped && junk.len() + line.len() <= limit {
                expected.push(frame);
            } else {
                stopped = true;
            }
        }
        let (lines, too_long) = crate::wire::frame_reader::read_all(&stream, read_size, limit);
        prop_assert_eq!(too_long, stopped);
        let frames: Vec<RunnerFrame> = lines.iter().map(|l| decode_line(l).unwrap()).collect();
        prop_assert_eq!(frames, expected);
    }
}

// Inputs of hundreds of KB: few cases (`npm run fuzz` runs more).
proptest! {
    #![proptest_config(config_with(24))]

    #[test]
    fn truncation_with_the_default_limits_keeps_its_bounds(
        // Up to ~400 KB in lines mostly under the 768-byte clamp, so the head and tail cut
        // (not the clamp) decide the size: well past the default 20 KiB head + 50 KiB tail.
        lines in proptest::collection::vec((0usize..1000, prop_oneof![Just('a'), Just(' '), Just('é')]), 0..2000),
    ) {
        let lines: Vec<String> = lines.iter().map(|&(n, c)| c.to_string().repeat(n)).collect();
        let text = lines.join("\n");
        let t = truncate_output(&text, &OutputLimits::default(), None);
        // The documented numbers (docs/api.md), spelled out: a change of the defaults must fail here.
        prop_assert!(t.text.len() <= 20 * 1024 + 50 * 1024 + 64 + 8 * 2, "{} bytes", t.text.len());
        for line in t.text.lines() {
            prop_assert!(line.len() <= 768 + '…'.len_utf8() || line.starts_with("[…"));
        }
        prop_assert_eq!(t.total_bytes as usize, text.len());
        if text.len() <= 20 * 1024 && lines.iter().all(|l| l.len() <= 768) {
            prop_assert_eq!(&t.text, &text, "text within the limits comes back whole");
        }
    }
}

/// Any JSON, shaped like a chart often enough to reach every kind's code: the schema's
/// keys and types, numbers of every size, and text with line breaks, brackets, controls.
fn chart_like() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    const KEYS: [&str; 24] = [
        "type",
        "title",
        "elements",
        "label",
        "points",
        "count",
        "downsampled",
        "group",
        "value",
        "bottom",
        "bin_edges",
        "counts",
        "fraction",
        "angle",
        "median",
        "min",
        "max",
        "outliers",
        "x_limits",
        "y_label",
        "legend",
        "reference_lines",
        "orientation",
        "shape",
    ];
    const TYPES: [&str; 10] = [
        "line",
        "scatter",
        "bar",
        "pie",
        "box_and_whisker",
        "histogram",
        "mixed",
        "superchart",
        "unknown",
        "horizontal",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|n| serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)),
        proptest::sample::select(&TYPES[..]).prop_map(Value::from),
        "(\\PC|\n|\r|\u{2028}|\\[|\x1b){0,90}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 256, 12, |inner| {
        let key = prop_oneof![
            3 => proptest::sample::select(&KEYS[..]).prop_map(str::to_string),
            1 => "[a-z_]{0,8}",
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..12).prop_map(Value::Array),
            proptest::collection::btree_map(key, inner, 0..10)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(config())]

    /// Any JSON gives a card: at most MAX_CARD_CHARS, its first line the host's and no
    /// other line one a cell line could be mistaken for (nothing in it is escaped).
    #[test]
    fn a_chart_card_is_bounded_and_its_lines_are_its_own(chart in chart_like()) {
        let card = chart_card(&chart);
        prop_assert!(card.chars().count() <= MAX_CARD_CHARS, "{} chars: {}", card.chars().count(), card);
        prop_assert!(card.starts_with("[chart") && card.ends_with('\n'), "{:?}", card);
        let rest = &card[card.find('\n').unwrap() + 1..];
        prop_assert_eq!(escape_cell_lines(rest), rest);
        prop_assert!(!rest.contains('\r') && !rest.contains('\u{2028}'), "{:?}", rest);
    }
}

/// A small PNG and a JPEG for the image property: 40x30, a gradient.
fn small_images() -> [(String, Vec<u8>); 2] {
    let image = image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(40, 30, |x, y| {
        image::Rgb([(x * 6) as u8, (y * 8) as u8, 128])
    }));
    let encoded = |format| {
        let mut out = Vec::new();
        image
            .write_to(&mut std::io::Cursor::new(&mut out), format)
            .unwrap();
        out
    };
    [
        ("image/png".to_string(), encoded(image::ImageFormat::Png)),
        ("image/jpeg".to_string(), encoded(image::ImageFormat::Jpeg)),
    ]
}

proptest! {
    #![proptest_config(config_with(64))]

    /// A damaged image (bytes changed, cut, or extended) is sized or left out with a
    /// reason, never a panic; what is sent is within the budget.
    #[test]
    fn damaged_images_are_sized_or_left_out(
        which in 0usize..2,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in proptest::option::of(any::<usize>()),
        tail in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        use base64::Engine;
        let [png, jpeg] = small_images();
        let (mime, mut bytes) = if which == 0 { png } else { jpeg };
        for (at, byte) in flips {
            let at = at % bytes.len();
            bytes[at] = byte;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        bytes.extend_from_slice(&tail);
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let budget = crate::output::ResultBudget {
            image: crate::output::ImageBudget { max_edge: 16, max_bytes: 1 << 20 },
            max_total_bytes: 1 << 20,
            ..Default::default()
        };
        let fitted = crate::output::fit_images(&[(mime, data)], budget, None);
        let image = &fitted[0];
        match image.status {
            crate::output::FitStatus::Omitted => prop_assert!(image.reason.is_some()),
            _ => {
                let size = image.size.unwrap();
                prop_assert!(size.width.max(size.height) <= 16);
            }
        }
    }
}
