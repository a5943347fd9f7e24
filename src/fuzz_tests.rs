//! Property tests over untrusted input (issue 8's fuzzing), run by `cargo test --lib`.
//! The frame decoder and the output sanitizer/truncation must never panic and must keep
//! their promises for any input. Bounded case counts keep `cargo test` quick; proptest
//! records a failing input under `proptest-regressions/`, committed so it is re-run.

use proptest::prelude::*;

use crate::output::{clamp_line, sanitize, truncate_output, OutputLimits};
use crate::protocol::decode;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 500,
        ..ProptestConfig::default()
    }
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
        lines in proptest::collection::vec("[a-z ]{0,1200}", 0..60),
    ) {
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
