//! The chart's values as the card writes them: labels made safe, numbers made short, and
//! tolerant reading of what may not fit the schema.

use serde_json::{Map, Value};

use super::MAX_LABEL_CHARS;

pub(super) static EMPTY: std::sync::LazyLock<Map<String, Value>> =
    std::sync::LazyLock::new(Map::new);

/// The most elements of one chart a card reads: the runner never sends more (its caps:
/// 1,000 bars, slices or boxes, 64 series), and a chart a cell made itself may hold
/// millions, which the card must not spend the host's time on.
pub(super) const MAX_CARD_ELEMENTS: usize = 1000;

/// The most charts of a superchart or a mixed chart a card reads (the runner's cap).
pub(super) const MAX_SUB_CHARTS: usize = 64;

/// A chart's elements, at most [`MAX_CARD_ELEMENTS`] of them.
pub(super) fn elements(chart: &Map<String, Value>) -> &[Value] {
    let items = array(chart.get("elements"));
    &items[..items.len().min(MAX_CARD_ELEMENTS)]
}

/// A superchart's or a mixed chart's charts, at most [`MAX_SUB_CHARTS`] of them.
pub(super) fn sub_charts(chart: &Map<String, Value>) -> &[Value] {
    let items = elements(chart);
    &items[..items.len().min(MAX_SUB_CHARTS)]
}

pub(super) fn array(value: Option<&Value>) -> &[Value] {
    match value {
        Some(Value::Array(items)) => items,
        _ => &[],
    }
}

/// A point's x and y.
pub(super) fn pair(point: &Value) -> (Option<&Value>, Option<&Value>) {
    let items = array(Some(point));
    (items.first(), items.get(1))
}

pub(super) fn number(value: Option<&Value>) -> Option<f64> {
    value.and_then(Value::as_f64).filter(|n| n.is_finite())
}

/// A count: a whole number from 0 up.
pub(super) fn count(value: Option<&Value>) -> Option<u64> {
    let value = value?;
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| n as u64)
    })
}

pub(super) fn flag(chart: &Map<String, Value>, key: &str) -> bool {
    chart.get(key).and_then(Value::as_bool) == Some(true)
}

pub(super) fn str_field<'a>(chart: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    chart.get(key).and_then(Value::as_str)
}

/// A title or label as the card shows it; none for a missing or blank one.
pub(super) fn label(value: Option<&Value>) -> Option<String> {
    let text = match value? {
        Value::String(text) => clean(text),
        Value::Number(n) => n.as_f64().map(num)?,
        Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

/// A number as the card shows it, or a string (an ISO date) as it is.
pub(super) fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::Number(_) => number(Some(value)).map(num),
        Value::String(_) => label(Some(value)),
        _ => None,
    }
}

pub(super) fn tag_text(tag: Option<&str>) -> String {
    tag.map_or(String::new(), |tag| format!(" ({tag})"))
}

pub(super) fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 {
        one
    } else {
        many
    }
}

pub(super) fn min(values: &[f64]) -> Option<f64> {
    values.iter().copied().reduce(f64::min)
}

pub(super) fn max(values: &[f64]) -> Option<f64> {
    values.iter().copied().reduce(f64::max)
}

/// Text from the chart as one line of at most [`MAX_LABEL_CHARS`]: controls, line and
/// paragraph separators and bidi controls become spaces, runs of spaces one space, and
/// the ends are trimmed, so it can neither break the card's lines nor reorder them.
pub(super) fn clean(text: &str) -> String {
    let mut out = String::new();
    let mut chars = 0;
    let mut space = false;
    for c in text.chars() {
        let c = if c.is_control() || is_breaking_format(c) {
            ' '
        } else {
            c
        };
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        let needed = if space { 2 } else { 1 };
        if chars + needed > MAX_LABEL_CHARS {
            // Room for the `…` that says it was cut.
            while chars >= MAX_LABEL_CHARS {
                out.pop();
                chars -= 1;
            }
            out.push('…');
            return out;
        }
        if space {
            out.push(' ');
            chars += 1;
            space = false;
        }
        out.push(c);
        chars += 1;
    }
    out
}

/// Separators a reader may break a line at, and the controls that reorder text.
fn is_breaking_format(c: char) -> bool {
    matches!(
        c,
        '\u{2028}' | '\u{2029}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{061C}'
    )
}

/// At most 4 significant digits, no trailing zeros: `0.1235`, `1235`, `12350`, `1.235e7`,
/// `-2.449e-16`.
pub(super) fn num(n: f64) -> String {
    if n == 0.0 || !n.is_finite() {
        return "0".into();
    }
    let exponent = n.abs().log10().floor() as i32;
    if (-4..7).contains(&exponent) {
        let decimals = (3 - exponent).max(0) as usize;
        let rounded = if exponent > 3 {
            let step = 10f64.powi(exponent - 3);
            (n / step).round() * step
        } else {
            n
        };
        trim_zeros(format!("{rounded:.decimals$}"))
    } else {
        let text = format!("{n:.3e}");
        match text.split_once('e') {
            Some((mantissa, exp)) => format!("{}e{exp}", trim_zeros(mantissa.to_string())),
            None => text,
        }
    }
}

fn trim_zeros(mut text: String) -> String {
    if text.contains('.') {
        while text.ends_with('0') {
            text.pop();
        }
        if text.ends_with('.') {
            text.pop();
        }
    }
    if text == "-0" {
        text = "0".into();
    }
    text
}
