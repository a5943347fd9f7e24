//! A chart as data (docs/charts.md) -> its card: a few lines that tell a model that
//! cannot see the figure what it shows (docs/charts.md#the-chart-card).
//!
//! ```text
//! [chart: line "Plot of sin(x) and cos(x)"]
//! x: Time (s), datetime, 2023-09-01T00:00:00 to 2023-09-01T00:01:39
//! y: Amplitude (Hz), linear, -1.1 to 1.1
//! 2 series, 200 points:
//! - sin(x): 100 points, y from -1 to 1, last -2.449e-16
//! - cos(x): 100 points, y from -1 to 1, last 1
//! ```
//!
//! The first line is the host's (`[` and a letter, see `host_lines`); every other line
//! starts with words of the card's own (`x: `, `- `, `reference line: `), never with text
//! of the chart's. Titles and labels come from the cell, so each is made one line of at
//! most [`MAX_LABEL_CHARS`] (controls and line breaks become spaces): none can end a
//! line, start one, or make the card long. The card is at most [`MAX_CARD_CHARS`]
//! characters: past that whole element lines are left out, and a line says how many.
//! Any JSON gives a card, never a panic; what does not fit the schema is left out.

mod bodies;
mod words;

use std::collections::HashSet;

use serde_json::{Map, Value};

use bodies::{body, Body};
use words::{
    array, clean, count, elements, label, num, number, pair, plural, str_field, sub_charts,
    value_text,
};

/// The most characters a card has, its line breaks included.
pub const MAX_CARD_CHARS: usize = 600;
/// The most characters of one title, label or category in a card.
pub const MAX_LABEL_CHARS: usize = 60;
/// Bar categories named per series, from the highest.
const TOP_BARS: usize = 3;
/// Reference lines named; the rest are counted.
const MAX_REFERENCE_LINES: usize = 3;
/// The most characters of the line that sums up the elements (a mixed chart's names
/// every kind's).
const MAX_SUMMARY_CHARS: usize = 200;
/// The most characters of a superchart's second line for one of its axes.
const MAX_DETAIL_CHARS: usize = 160;

/// The card of `chart`, each line ending with `\n`.
pub fn chart_card(chart: &Value) -> String {
    let empty = Map::new();
    let chart = chart.as_object().unwrap_or(&empty);
    let kind = Kind::of(chart);
    let mut card = Card::default();
    if kind == Kind::Superchart {
        let charts: Vec<&Map<String, Value>> = sub_charts(chart)
            .iter()
            .filter_map(|c| c.as_object())
            .collect();
        card.head
            .push(header(&format!("{} axes", charts.len()), chart));
        card.noun = "axes";
        card.items = charts.iter().map(|sub| sub_chart_lines(sub)).collect();
    } else {
        card.head.push(header(kind.name(), chart));
        if kind.has_axes() {
            let (x, y) = spans(chart, kind);
            card.head.extend(axis_line("x", chart, x));
            card.head.extend(axis_line("y", chart, y));
        }
        if let Some(shape) = chart.get("shape").and_then(shape_text) {
            card.head.push(format!("shape: {shape}"));
        }
        let body = body(chart, kind, None);
        card.extras.extend(reference_lines(chart));
        card.extras.extend(legend_line(chart, &body.labels));
        let colon = if body.items.is_empty() { "" } else { ":" };
        card.summary = body
            .summary
            .map(|summary| format!("{}{colon}", clip(&summary, MAX_SUMMARY_CHARS)));
        card.noun = body.noun;
        card.items = body.items;
    }
    if let Some(dropped) = count(chart.get("elements_dropped")).filter(|&n| n > 0) {
        let noun = if kind == Kind::Superchart {
            "axes"
        } else {
            kind.noun_for(dropped)
        };
        card.tail
            .push(format!("and {dropped} more {noun} left out"));
    }
    card.fit()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Line,
    Scatter,
    Bar,
    Pie,
    Box,
    Histogram,
    Mixed,
    Superchart,
    Unknown,
}

impl Kind {
    fn of(chart: &Map<String, Value>) -> Kind {
        match chart.get("type").and_then(Value::as_str).unwrap_or("") {
            "line" => Kind::Line,
            "scatter" => Kind::Scatter,
            "bar" => Kind::Bar,
            "pie" => Kind::Pie,
            "box_and_whisker" => Kind::Box,
            "histogram" => Kind::Histogram,
            "mixed" => Kind::Mixed,
            "superchart" => Kind::Superchart,
            _ => Kind::Unknown,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Line => "line",
            Kind::Scatter => "scatter",
            Kind::Bar => "bar",
            Kind::Pie => "pie",
            Kind::Box => "box_and_whisker",
            Kind::Histogram => "histogram",
            Kind::Mixed => "mixed",
            Kind::Superchart => "superchart",
            Kind::Unknown => "unknown",
        }
    }

    fn has_axes(self) -> bool {
        !matches!(self, Kind::Pie | Kind::Superchart)
    }

    fn noun_for(self, n: u64) -> &'static str {
        match self {
            Kind::Bar => plural(n as usize, "bar", "bars"),
            Kind::Pie => plural(n as usize, "slice", "slices"),
            Kind::Box => plural(n as usize, "box", "boxes"),
            Kind::Histogram => plural(n as usize, "dataset", "datasets"),
            Kind::Unknown => plural(n as usize, "element", "elements"),
            _ => "series",
        }
    }
}

/// The card's lines, in order: `head` (the first line, the axes), `extras` (reference
/// lines, the legend), the `summary` of the items, as many `items` (each one or two lines)
/// as fit, then `tail`. Should the others not fit with the summary and the tail, extras
/// go first, then head lines, from the last (never the first: it says what this is).
#[derive(Default)]
struct Card {
    head: Vec<String>,
    extras: Vec<String>,
    summary: Option<String>,
    items: Vec<String>,
    /// What an item is, for the line that counts those left out.
    noun: &'static str,
    tail: Vec<String>,
}

impl Card {
    fn fit(mut self) -> String {
        let chars = |lines: &[String]| lines.iter().map(|l| l.chars().count() + 1).sum::<usize>();
        let more = |left_out: usize| format!("… {left_out} more {}", self.noun);
        // Room for the line that counts the element lines left out, should all be.
        let reserve = match self.items.len() {
            0 => 0,
            n => more(n).chars().count() + 1,
        };
        let summary: Vec<String> = self.summary.into_iter().collect();
        let fixed = |head: &[String], extras: &[String]| {
            chars(head) + chars(extras) + chars(&summary) + chars(&self.tail)
        };
        while !self.extras.is_empty() && fixed(&self.head, &self.extras) + reserve > MAX_CARD_CHARS
        {
            self.extras.pop();
        }
        while self.head.len() > 1 && fixed(&self.head, &self.extras) + reserve > MAX_CARD_CHARS {
            self.head.pop();
        }
        let fixed = fixed(&self.head, &self.extras);
        let all = chars(&self.items);
        let mut kept = self.items.len();
        if fixed + all > MAX_CARD_CHARS {
            let mut used = fixed;
            kept = 0;
            for (i, item) in self.items.iter().enumerate() {
                let count_line = more(self.items.len() - i - 1);
                let room = MAX_CARD_CHARS.saturating_sub(count_line.chars().count() + 1);
                let cost = item.chars().count() + 1;
                if used + cost > room {
                    break;
                }
                used += cost;
                kept = i + 1;
            }
        }
        let left_out = self.items.len() - kept;
        let mut lines = self.head;
        lines.extend(self.extras);
        lines.extend(summary);
        lines.extend(self.items.into_iter().take(kept));
        if left_out > 0 {
            lines.push(more(left_out));
        }
        lines.extend(self.tail);
        let mut card = String::new();
        for line in lines {
            card.push_str(&line);
            card.push('\n');
        }
        if card.chars().count() > MAX_CARD_CHARS {
            // Only a head line alone over the cap (it cannot be, by the caps above).
            card = card.chars().take(MAX_CARD_CHARS - 2).collect();
            card.push_str("…\n");
        }
        card
    }
}

/// `text` cut to `max` characters, ending `…` when cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut clipped: String = text.chars().take(max - 1).collect();
    clipped.push('…');
    clipped
}

/// `[chart: line "Title"]`.
fn header(what: &str, chart: &Map<String, Value>) -> String {
    match label(chart.get("title")) {
        Some(title) => format!("[chart: {what} \"{title}\"]"),
        None => format!("[chart: {what}]"),
    }
}

/// One axes of a superchart: `- line "Title" (x: Time (s), y: Amplitude): 2 series, 200
/// points`, then, indented, its elements in short.
fn sub_chart_lines(sub: &Map<String, Value>) -> String {
    let kind = Kind::of(sub);
    let mut first = format!("- {}", kind.name());
    if let Some(title) = label(sub.get("title")) {
        first.push_str(&format!(" \"{title}\""));
    }
    if kind.has_axes() && kind != Kind::Superchart {
        let axis =
            |name: &str| label(sub.get(&format!("{name}_label"))).map(|l| format!("{name}: {l}"));
        let named: Vec<String> = [axis("x"), axis("y")].into_iter().flatten().collect();
        if !named.is_empty() {
            first.push_str(&format!(" ({})", named.join(", ")));
        }
    }
    let body = if kind == Kind::Superchart {
        Body::default()
    } else {
        body(sub, kind, None)
    };
    if let Some(summary) = &body.summary {
        first.push_str(&format!(": {summary}"));
    }
    if let Some(shape) = sub.get("shape").and_then(shape_text) {
        first.push_str(&format!(", shape {shape}"));
    }
    // Its elements in short, as many whole ones as fit.
    let mut detail = String::new();
    for (i, item) in body.items.iter().enumerate() {
        let item = item.strip_prefix("- ").unwrap_or(item);
        let sep = if i == 0 { "  " } else { "; " };
        if detail.chars().count() + sep.len() + item.chars().count() > MAX_DETAIL_CHARS {
            detail.push_str("; …");
            break;
        }
        detail.push_str(sep);
        detail.push_str(item);
    }
    if detail.is_empty() {
        first
    } else {
        format!("{first}\n{detail}")
    }
}

/// `x: Time (s), datetime, 0 to 10`: the label, the scale, and the limits (else the
/// range of the data); on a categorical axis how many categories (its limits, such as
/// -0.59 to 3.59, say nothing to a reader). Nothing when none is known.
fn axis_line(axis: &str, chart: &Map<String, Value>, data: Span) -> Option<String> {
    let name = label(chart.get(&format!("{axis}_label")));
    let scale = label(chart.get(&format!("{axis}_scale")));
    let limits = array(chart.get(&format!("{axis}_limits")));
    let categorical = scale.as_deref() == Some("categorical") && !data.words.is_empty();
    let range = match limits {
        _ if categorical => data.text(scale.as_deref()),
        [low, high] => match (value_text(low), value_text(high)) {
            (Some(low), Some(high)) => Some(format!("{low} to {high}")),
            _ => data.text(scale.as_deref()),
        },
        _ => data.text(scale.as_deref()),
    };
    if name.is_none() && scale.is_none() && range.is_none() {
        return None;
    }
    let mut line = format!("{axis}: {}", name.unwrap_or_else(|| "unlabelled".into()));
    for part in [scale, range].into_iter().flatten() {
        line.push_str(", ");
        line.push_str(&part);
    }
    Some(line)
}

/// The values drawn along one axis: numbers, or words (categories, ISO dates).
#[derive(Default)]
struct Span<'a> {
    low: Option<f64>,
    high: Option<f64>,
    first_word: Option<&'a str>,
    last_word: Option<&'a str>,
    words: HashSet<&'a str>,
}

impl<'a> Span<'a> {
    fn add(&mut self, value: Option<&'a Value>) {
        match value {
            Some(Value::String(word)) => {
                if self.first_word.is_none_or(|first| word.as_str() < first) {
                    self.first_word = Some(word);
                }
                if self.last_word.is_none_or(|last| word.as_str() > last) {
                    self.last_word = Some(word);
                }
                self.words.insert(word);
            }
            other => {
                if let Some(n) = number(other) {
                    self.add_number(n);
                }
            }
        }
    }

    fn add_number(&mut self, n: f64) {
        self.low = Some(self.low.map_or(n, |low| low.min(n)));
        self.high = Some(self.high.map_or(n, |high| high.max(n)));
    }

    /// Numbers as their range; on a date axis, the first and last date; else how many
    /// categories.
    fn text(&self, scale: Option<&str>) -> Option<String> {
        if let (Some(low), Some(high)) = (self.low, self.high) {
            return Some(format!("{} to {}", num(low), num(high)));
        }
        match (self.first_word, self.last_word) {
            (Some(first), Some(last)) if scale == Some("datetime") => {
                Some(format!("{} to {}", clean(first), clean(last)))
            }
            _ if !self.words.is_empty() => Some(format!(
                "{} {}",
                self.words.len(),
                plural(self.words.len(), "category", "categories")
            )),
            _ => None,
        }
    }
}

/// What the x and y axes of a chart show, from its elements (a mixed chart's from its
/// sub-charts').
fn spans(chart: &Map<String, Value>, kind: Kind) -> (Span<'_>, Span<'_>) {
    let mut x = Span::default();
    let mut y = Span::default();
    if kind == Kind::Mixed {
        for sub in sub_charts(chart).iter().filter_map(Value::as_object) {
            let kind = Kind::of(sub);
            if !matches!(kind, Kind::Mixed | Kind::Superchart) {
                add_spans(sub, kind, &mut x, &mut y);
            }
        }
    } else {
        add_spans(chart, kind, &mut x, &mut y);
    }
    (x, y)
}

fn add_spans<'a>(chart: &'a Map<String, Value>, kind: Kind, x: &mut Span<'a>, y: &mut Span<'a>) {
    let horizontal = str_field(chart, "orientation") == Some("horizontal");
    for element in elements(chart).iter().filter_map(Value::as_object) {
        match kind {
            Kind::Line | Kind::Scatter => {
                for point in array(element.get("points")) {
                    let (px, py) = pair(point);
                    x.add(px);
                    y.add(py);
                }
            }
            Kind::Bar => {
                // E2B's rule: x names the categories, y the values, whichever way.
                x.add(element.get("label"));
                let bottom = number(element.get("bottom"));
                if let Some(value) = number(element.get("value")) {
                    y.add_number(value + bottom.unwrap_or(0.0));
                    y.add_number(bottom.unwrap_or(0.0).min(value));
                }
            }
            Kind::Box => {
                x.add(element.get("label"));
                for key in ["min", "max"] {
                    y.add(element.get(key));
                }
                for outlier in array(element.get("outliers")) {
                    y.add(Some(outlier));
                }
            }
            Kind::Histogram => {
                let (bins, heights) = if horizontal {
                    (&mut *y, &mut *x)
                } else {
                    (&mut *x, &mut *y)
                };
                for edge in array(element.get("bin_edges")) {
                    bins.add(Some(edge));
                }
                heights.add_number(0.0);
                for height in array(element.get("counts")) {
                    heights.add(Some(height));
                }
            }
            _ => {}
        }
    }
}

fn reference_lines(chart: &Map<String, Value>) -> Vec<String> {
    let all = array(chart.get("reference_lines"));
    let mut lines: Vec<String> = all
        .iter()
        .take(MAX_REFERENCE_LINES)
        .filter_map(Value::as_object)
        .filter_map(|line| {
            let axis = match str_field(line, "orientation") {
                Some("vertical") => "x",
                _ => "y",
            };
            let value = line.get("value").and_then(value_text)?;
            Some(match label(line.get("label")) {
                Some(name) => format!("reference line: {axis} = {value} \"{name}\""),
                None => format!("reference line: {axis} = {value}"),
            })
        })
        .collect();
    if all.len() > MAX_REFERENCE_LINES {
        lines.push(format!(
            "and {} more reference lines",
            all.len() - MAX_REFERENCE_LINES
        ));
    }
    lines
}

/// The legend, when it names what the element lines do not.
fn legend_line(chart: &Map<String, Value>, named: &HashSet<String>) -> Option<String> {
    let entries: Vec<String> = array(chart.get("legend"))
        .iter()
        .filter_map(|entry| label(Some(entry)))
        .collect();
    if entries.iter().all(|entry| named.contains(entry)) {
        return None;
    }
    let mut line = String::from("legend:");
    for (i, entry) in entries.iter().enumerate() {
        if line.chars().count() + entry.chars().count() > 2 * MAX_LABEL_CHARS {
            line.push_str(&format!(" and {} more", entries.len() - i));
            break;
        }
        line.push_str(if i == 0 { " " } else { ", " });
        line.push_str(entry);
    }
    Some(line)
}

/// A heatmap's `shape` (`[rows, columns]`) as `10 x 20`, or a word as it is.
fn shape_text(shape: &Value) -> Option<String> {
    match shape {
        Value::Array(sizes) if !sizes.is_empty() && sizes.len() <= 4 => sizes
            .iter()
            .map(|n| number(Some(n)).map(num))
            .collect::<Option<Vec<_>>>()
            .map(|sizes| sizes.join(" x ")),
        Value::String(_) => label(Some(shape)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
