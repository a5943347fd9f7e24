//! MIME bundle -> what the agent reads (docs/python.md#display-in-the-kernel).
//!
//! Text precedence: `text/markdown` > `text/plain` > `text/html` (converted to Markdown).
//! Captured alongside: `image/png` and `image/jpeg` (base64), `application/json`, the
//! chart of a figure ([`CHART_MIME`], docs/charts.md; an object, else ignored) and the
//! status MIME's value when it is a status (an object with a string `op`, else ignored: a
//! status MIME value is never text, well-formed or not). A bundle may be wrapped Jupyter-style as `{"data": {...}, "metadata": ...}`,
//! and any string value may be in Jupyter's multi-line form (an array of strings, joined
//! as is). Values of the wrong type are ignored, never an error. Text is returned as
//! given (not sanitized): the executor sanitizes what the agent reads, and a TUI may want
//! the colours.

use serde_json::{Map, Value};

use super::html::html_to_markdown;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// `image/png` or `image/jpeg`.
    pub mime: &'static str,
    /// Base64, with any line breaks removed.
    pub data: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rendered {
    /// Empty when the bundle has no text MIME type (e.g. status only).
    pub text: String,
    /// True when `text` came from `text/markdown` (HTML converted to Markdown is not: a
    /// host showing Markdown as such wants the cell's own).
    pub markdown: bool,
    /// The MIME type `text` came from; `None` when the bundle has no text.
    pub text_mime: Option<&'static str>,
    pub images: Vec<Image>,
    pub json: Option<Value>,
    /// The figure's chart as data ([`CHART_MIME`]), when it is a JSON object.
    pub chart: Option<Value>,
    /// The status MIME's value, when it is an object with a string `op`.
    pub status: Option<Value>,
}

/// The MIME type a figure's chart travels under in its display bundle (docs/charts.md).
pub const CHART_MIME: &str = "application/vnd.pykernel.chart+json";

const IMAGE_MIMES: [&str; 2] = ["image/png", "image/jpeg"];

/// Why `mime` cannot be a `statusMime`, if it cannot: it is a key of MIME bundles, so it
/// must read as one, `type/subtype` in RFC 6838's characters.
pub fn status_mime_fault(mime: &str) -> Option<String> {
    const MAX_LEN: usize = 255;
    let token = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let well_formed = mime
        .split_once('/')
        .is_some_and(|(kind, subtype)| token(kind) && token(subtype));
    if mime.len() > MAX_LEN {
        Some(format!(
            "must be at most {MAX_LEN} characters, got {}",
            mime.len()
        ))
    } else if !well_formed {
        Some(format!(
            "must be a MIME type 'type/subtype' (letters, digits and !#$&-^_.+ on each side, such as 'application/x-acme-status'), got {mime:?}"
        ))
    } else {
        None
    }
}

pub fn render_bundle(bundle: &Value, status_mime: &str) -> Rendered {
    let Some(bundle) = unwrap_envelope(bundle) else {
        return Rendered::default();
    };
    let mut rendered = Rendered::default();

    if let Some(text) = string_value(bundle, "text/markdown") {
        rendered.text = text;
        rendered.text_mime = Some("text/markdown");
        rendered.markdown = true;
    } else if let Some(text) = string_value(bundle, "text/plain") {
        rendered.text = text;
        rendered.text_mime = Some("text/plain");
    } else if let Some(html) = string_value(bundle, "text/html") {
        rendered.text = html_to_markdown(&html);
        rendered.text_mime = Some("text/html");
    }

    for mime in IMAGE_MIMES {
        if let Some(mut data) = string_value(bundle, mime) {
            data.retain(|c| !c.is_ascii_whitespace());
            if !data.is_empty() {
                rendered.images.push(Image { mime, data });
            }
        }
    }
    rendered.json = bundle.get("application/json").cloned();
    rendered.chart = bundle
        .get(CHART_MIME)
        .filter(|chart| chart.is_object())
        .cloned();
    rendered.status = bundle
        .get(status_mime)
        .filter(|status| status.get("op").is_some_and(Value::is_string))
        .cloned();
    rendered
}

/// The MIME map of a bundle: the object itself, or its `data` when it is a Jupyter-style
/// envelope (MIME keys always contain `/`, envelope keys never do).
fn unwrap_envelope(bundle: &Value) -> Option<&Map<String, Value>> {
    let map = bundle.as_object()?;
    if map.keys().any(|key| key.contains('/')) {
        return Some(map);
    }
    match map.get("data") {
        Some(Value::Object(data)) => Some(data),
        _ => Some(map),
    }
}

/// A string value, or the join of Jupyter's multi-line form (each element keeps its own
/// `\n`). Anything else is treated as absent.
fn string_value(bundle: &Map<String, Value>, mime: &str) -> Option<String> {
    match bundle.get(mime)? {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => parts
            .iter()
            .map(Value::as_str)
            .collect::<Option<Vec<&str>>>()
            .map(|parts| parts.concat()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_status_mime_must_read_as_a_mime_type() {
        assert_eq!(status_mime_fault("application/x-pykernel-status"), None);
        assert_eq!(status_mime_fault("application/vnd.acme+json"), None);
        for bad in ["", "status", "a/", "/b", "a/b/c", "a b/c", "a/b c", "ä/b"] {
            let fault = status_mime_fault(bad).unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(fault.contains("type/subtype"), "{fault}");
        }
        assert!(status_mime_fault(&format!("a/{}", "b".repeat(300))).is_some());
    }

    const STATUS: &str = "application/x-pykernel-status";

    #[test]
    fn markdown_wins_over_plain_and_html() {
        let r = render_bundle(
            &json!({"text/plain": "plain", "text/markdown": "# md", "text/html": "<b>h</b>"}),
            STATUS,
        );
        assert_eq!((r.text.as_str(), r.markdown), ("# md", true));
        assert_eq!(r.text_mime, Some("text/markdown"));
    }

    #[test]
    fn plain_wins_over_html() {
        let r = render_bundle(
            &json!({"text/plain": "plain", "text/html": "<b>h</b>"}),
            STATUS,
        );
        assert_eq!((r.text.as_str(), r.markdown), ("plain", false));
        assert_eq!(r.text_mime, Some("text/plain"));
    }

    #[test]
    fn html_alone_becomes_markdown_text_but_is_not_flagged_markdown() {
        let r = render_bundle(
            &json!({"text/html": "<p><strong>Hello</strong></p>"}),
            STATUS,
        );
        // The flag says the cell gave Markdown; this Markdown is the host's conversion.
        assert_eq!((r.text.as_str(), r.markdown), ("**Hello**\n", false));
        assert_eq!(r.text_mime, Some("text/html"));
        assert_eq!(
            render_bundle(&json!({"image/png": "iVBOR"}), STATUS).text_mime,
            None
        );
    }

    #[test]
    fn html_table_list_and_bold() {
        let html =
            "<table><thead><tr><th>a</th></tr></thead><tbody><tr><td>1</td></tr></tbody></table>\
                    <ul><li><b>x</b></li></ul>";
        let r = render_bundle(&json!({ "text/html": html }), STATUS);
        assert_eq!(r.text, "| a   |\n| --- |\n| 1   |\n\n- **x**\n");
    }

    #[test]
    fn png_and_plain_text() {
        let r = render_bundle(
            &json!({"image/png": "iVBORw0K\nGgo=\n", "text/plain": "<Figure size 640x480>"}),
            STATUS,
        );
        assert_eq!(r.text, "<Figure size 640x480>");
        assert_eq!(
            r.images,
            vec![Image {
                mime: "image/png",
                data: "iVBORw0KGgo=".into()
            }]
        );
    }

    #[test]
    fn jpeg_is_captured_too() {
        let r = render_bundle(&json!({"image/jpeg": "/9j/4AAQ"}), STATUS);
        assert_eq!(r.images[0].mime, "image/jpeg");
        assert_eq!(r.text, "");
    }

    #[test]
    fn json_and_plain_text() {
        let r = render_bundle(
            &json!({"application/json": {"a": [1, 2]}, "text/plain": "{'a': [1, 2]}"}),
            STATUS,
        );
        assert_eq!(r.text, "{'a': [1, 2]}");
        assert_eq!(r.json, Some(json!({"a": [1, 2]})));
    }

    #[test]
    fn a_chart_object_is_captured_and_anything_else_ignored() {
        let chart = json!({"type": "line", "title": "t", "elements": []});
        let r = render_bundle(
            &json!({"image/png": "iVBOR", "text/plain": "<Figure>", CHART_MIME: chart}),
            STATUS,
        );
        assert_eq!(r.chart, Some(chart));
        assert_eq!(r.images.len(), 1);
        for not_a_chart in [json!("line"), json!([1]), json!(null), json!(3)] {
            let r = render_bundle(&json!({ CHART_MIME: not_a_chart }), STATUS);
            assert_eq!(r.chart, None, "{not_a_chart}");
        }
        let r = render_bundle(&json!({"data": {CHART_MIME: {"type": "pie"}}}), STATUS);
        assert_eq!(
            r.chart,
            Some(json!({"type": "pie"})),
            "inside an envelope too"
        );
    }

    #[test]
    fn data_envelope_is_unwrapped() {
        let r = render_bundle(
            &json!({"data": {"text/plain": "hi", "application/json": [1]}, "metadata": {}}),
            STATUS,
        );
        assert_eq!(r.text, "hi");
        assert_eq!(r.json, Some(json!([1])));
    }

    #[test]
    fn multi_line_form_is_joined() {
        let r = render_bundle(&json!({"text/plain": ["line 1\n", "line 2"]}), STATUS);
        assert_eq!(r.text, "line 1\nline 2");
    }

    #[test]
    fn status_only_bundle_gives_no_text() {
        let r = render_bundle(&json!({ STATUS: {"op": "cd", "path": "/tmp"} }), STATUS);
        assert_eq!(r.text, "");
        assert!(!r.markdown);
        assert_eq!(r.status, Some(json!({"op": "cd", "path": "/tmp"})));
        // A custom status MIME is honoured; the default one is then ordinary data.
        let r = render_bundle(
            &json!({"application/x-acme-status": {"op": "x"}}),
            "application/x-acme-status",
        );
        assert_eq!(r.status, Some(json!({"op": "x"})));
    }

    #[test]
    fn a_status_is_an_object_with_a_string_op_and_never_text() {
        for malformed in [
            json!("cd"),
            json!(["op"]),
            json!(null),
            json!({}),
            json!({"path": "/tmp"}),
            json!({"op": 3}),
            json!({"op": null}),
        ] {
            let r = render_bundle(&json!({ STATUS: malformed.clone() }), STATUS);
            assert_eq!(r, Rendered::default(), "{malformed}");
        }
        let r = render_bundle(&json!({"data": {STATUS: {"op": ""}}}), STATUS);
        assert_eq!(r.status, Some(json!({"op": ""})), "an empty op is a string");
        let r = render_bundle(&json!({STATUS: {"op": 1}, "text/plain": "t"}), STATUS);
        assert_eq!((r.text.as_str(), r.status), ("t", None));
    }

    #[test]
    fn wrong_types_are_ignored() {
        let r = render_bundle(
            &json!({"text/markdown": 3, "text/plain": "p", "image/png": {}}),
            STATUS,
        );
        assert_eq!(r.text, "p");
        assert!(r.images.is_empty());
        assert_eq!(render_bundle(&json!("text"), STATUS), Rendered::default());
    }
}
