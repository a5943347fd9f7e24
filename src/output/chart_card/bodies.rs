//! The element lines of each kind of chart, and the line that sums them up.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::words::{
    array, count, elements, flag, label, max, min, num, number, pair, plural, str_field,
    sub_charts, tag_text, EMPTY,
};
use super::{Kind, TOP_BARS};

/// What a body of elements says: a summary line (without its `:`), the element lines, and the labels it
/// named (so a legend that only repeats them is left out).
#[derive(Default)]
pub(super) struct Body {
    pub(super) summary: Option<String>,
    pub(super) items: Vec<String>,
    pub(super) noun: &'static str,
    pub(super) labels: HashSet<String>,
}

/// The body of a chart of `kind`; `tag` is put after each element's label (a mixed
/// chart's sub-chart kinds).
pub(super) fn body(chart: &Map<String, Value>, kind: Kind, tag: Option<&str>) -> Body {
    let elements = elements(chart);
    match kind {
        Kind::Line | Kind::Scatter => series_body(elements, tag),
        Kind::Bar => bar_body(chart, elements, tag),
        Kind::Histogram => histogram_body(chart, elements, tag),
        Kind::Pie => pie_body(elements),
        Kind::Box => box_body(chart, elements, tag),
        Kind::Mixed => mixed_body(sub_charts(chart)),
        Kind::Superchart | Kind::Unknown => Body {
            summary: (!elements.is_empty()).then(|| {
                format!(
                    "{} {}",
                    elements.len(),
                    plural(elements.len(), "element", "elements")
                )
            }),
            noun: "elements",
            ..Body::default()
        },
    }
}

fn series_body(elements: &[Value], tag: Option<&str>) -> Body {
    let mut body = Body {
        noun: "series",
        ..Body::default()
    };
    let mut total: u64 = 0;
    for (i, series) in elements.iter().enumerate() {
        let series = series.as_object().unwrap_or(&EMPTY);
        let points = array(series.get("points"));
        let n = count(series.get("count")).unwrap_or(points.len() as u64);
        total = total.saturating_add(n);
        let name = label(series.get("label")).unwrap_or_else(|| format!("Line {}", i + 1));
        body.labels.insert(name.clone());
        let mut line = format!(
            "- {name}{}: {n} {}",
            tag_text(tag),
            plural(n as usize, "point", "points")
        );
        if series.get("downsampled").and_then(Value::as_bool) == Some(true) {
            line.push_str(&format!(", downsampled to {}", points.len()));
        }
        let ys: Vec<f64> = points.iter().filter_map(|p| number(pair(p).1)).collect();
        if let (Some(low), Some(high)) = (min(&ys), max(&ys)) {
            line.push_str(&format!(", y from {} to {}", num(low), num(high)));
        }
        if let Some(last) = points.last().and_then(|p| number(pair(p).1)) {
            line.push_str(&format!(", last {}", num(last)));
        }
        if series.get("y_errors").is_some_and(Value::is_array) {
            line.push_str(", with error bars");
        }
        body.items.push(line);
    }
    let n = elements.len();
    body.summary = Some(format!(
        "{n} series, {total} {}",
        plural(total as usize, "point", "points")
    ));
    body
}

fn bar_body(chart: &Map<String, Value>, elements: &[Value], tag: Option<&str>) -> Body {
    let mut body = Body {
        noun: "series",
        ..Body::default()
    };
    // The series in order of first appearance, each with its bars (found by name).
    let mut groups: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    let mut group_at: HashMap<String, usize> = HashMap::new();
    for (i, bar) in elements.iter().enumerate() {
        let bar = bar.as_object().unwrap_or(&EMPTY);
        let group = label(bar.get("group")).unwrap_or_else(|| "bars".into());
        let name = label(bar.get("label")).unwrap_or_else(|| format!("#{}", i + 1));
        let Some(value) = number(bar.get("value")) else {
            continue;
        };
        match group_at.get(&group) {
            Some(&at) => groups[at].1.push((name, value)),
            None => {
                group_at.insert(group.clone(), groups.len());
                groups.push((group, vec![(name, value)]));
            }
        }
    }
    let mut traits = String::new();
    if str_field(chart, "orientation") == Some("horizontal") {
        traits.push_str(", horizontal");
    }
    if flag(chart, "stacked") {
        traits.push_str(", stacked");
    }
    if flag(chart, "grouped") {
        traits.push_str(", grouped");
    }
    let bars: usize = groups.iter().map(|(_, bars)| bars.len()).sum();
    body.summary = Some(format!(
        "{bars} {} in {} {}{traits}",
        plural(bars, "bar", "bars"),
        groups.len(),
        plural(groups.len(), "series", "series")
    ));
    for (group, mut bars) in groups {
        body.labels.insert(group.clone());
        bars.sort_by(|a, b| b.1.total_cmp(&a.1));
        let named = |(name, value): &(String, f64)| format!("{name} {}", num(*value));
        let top: Vec<String> = bars.iter().take(TOP_BARS).map(named).collect();
        let mut line = format!(
            "- {group}{}: {} {}, highest {}",
            tag_text(tag),
            bars.len(),
            plural(bars.len(), "bar", "bars"),
            top.join(", ")
        );
        if bars.len() > TOP_BARS {
            if let Some(lowest) = bars.last() {
                line.push_str(&format!("; lowest {}", named(lowest)));
            }
        }
        body.items.push(line);
    }
    body
}

fn histogram_body(chart: &Map<String, Value>, elements: &[Value], tag: Option<&str>) -> Body {
    let mut body = Body {
        noun: "datasets",
        ..Body::default()
    };
    let density = flag(chart, "density");
    let mut traits = String::new();
    if str_field(chart, "orientation") == Some("horizontal") {
        traits.push_str(", horizontal");
    }
    if flag(chart, "stacked") {
        traits.push_str(", stacked");
    }
    if density {
        traits.push_str(", density");
    }
    body.summary = Some(format!(
        "{} {}{traits}",
        elements.len(),
        plural(elements.len(), "dataset", "datasets")
    ));
    for (i, dataset) in elements.iter().enumerate() {
        let dataset = dataset.as_object().unwrap_or(&EMPTY);
        let name = label(dataset.get("label")).unwrap_or_else(|| format!("Dataset {}", i + 1));
        body.labels.insert(name.clone());
        let edges = array(dataset.get("bin_edges"));
        let counts = array(dataset.get("counts"));
        let bins = count(dataset.get("count")).unwrap_or(counts.len() as u64);
        let mut line = format!(
            "- {name}{}: {bins} {}",
            tag_text(tag),
            plural(bins as usize, "bin", "bins")
        );
        if let (Some(first), Some(last)) = (
            edges.first().and_then(|e| number(Some(e))),
            edges.last().and_then(|e| number(Some(e))),
        ) {
            line.push_str(&format!(" from {} to {}", num(first), num(last)));
        }
        let heights: Vec<f64> = counts.iter().filter_map(|c| number(Some(c))).collect();
        if !density && !heights.is_empty() {
            line.push_str(&format!(", total {}", num(heights.iter().sum())));
        }
        let peak = counts
            .iter()
            .enumerate()
            .filter_map(|(at, c)| number(Some(c)).map(|c| (at, c)))
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
        if let Some((at, height)) = peak {
            line.push_str(&format!(", peak {}", num(height)));
            let edge = |at: usize| edges.get(at).and_then(|e| number(Some(e)));
            if let (Some(low), Some(high)) = (edge(at), edge(at + 1)) {
                line.push_str(&format!(" in {} to {}", num(low), num(high)));
            }
        }
        body.items.push(line);
    }
    body
}

fn pie_body(elements: &[Value]) -> Body {
    let mut body = Body {
        noun: "slices",
        ..Body::default()
    };
    let slices: Vec<&Map<String, Value>> = elements.iter().filter_map(Value::as_object).collect();
    let values: Vec<Option<f64>> = slices.iter().map(|s| number(s.get("value"))).collect();
    let total: f64 = values.iter().flatten().filter(|v| **v > 0.0).sum();
    let mut rows: Vec<(String, Option<f64>, Option<f64>)> = slices
        .iter()
        .zip(&values)
        .enumerate()
        .map(|(i, (slice, value))| {
            let name = label(slice.get("label")).unwrap_or_else(|| format!("Slice {}", i + 1));
            let fraction = number(slice.get("fraction"))
                .or_else(|| value.filter(|_| total > 0.0).map(|v| v / total))
                .or_else(|| number(slice.get("angle")).map(|a| a / 360.0));
            (name, *value, fraction)
        })
        .collect();
    rows.sort_by(|a, b| {
        let key = |row: &(String, Option<f64>, Option<f64>)| row.2.or(row.1).unwrap_or(f64::MIN);
        key(b).total_cmp(&key(a))
    });
    body.summary = Some(format!(
        "{} {}",
        rows.len(),
        plural(rows.len(), "slice", "slices")
    ));
    for (name, value, fraction) in rows {
        body.labels.insert(name.clone());
        let line = match (value, fraction) {
            (Some(value), Some(fraction)) => {
                format!("- {name}: {} ({}%)", num(value), num(fraction * 100.0))
            }
            (None, Some(fraction)) => format!("- {name}: {}%", num(fraction * 100.0)),
            (Some(value), None) => format!("- {name}: {}", num(value)),
            (None, None) => format!("- {name}"),
        };
        body.items.push(line);
    }
    body
}

fn box_body(chart: &Map<String, Value>, elements: &[Value], tag: Option<&str>) -> Body {
    let mut body = Body {
        noun: "boxes",
        ..Body::default()
    };
    let traits = if str_field(chart, "orientation") == Some("horizontal") {
        ", horizontal"
    } else {
        ""
    };
    body.summary = Some(format!(
        "{} {}{traits}",
        elements.len(),
        plural(elements.len(), "box", "boxes")
    ));
    for (i, item) in elements.iter().enumerate() {
        let item = item.as_object().unwrap_or(&EMPTY);
        let name = label(item.get("label")).unwrap_or_else(|| format!("Box {}", i + 1));
        body.labels.insert(name.clone());
        let field = |key: &str| number(item.get(key)).map(num);
        let mut parts = Vec::new();
        if let Some(median) = field("median") {
            parts.push(format!("median {median}"));
        }
        if let (Some(q1), Some(q3)) = (field("first_quartile"), field("third_quartile")) {
            parts.push(format!("quartiles {q1} to {q3}"));
        }
        if let (Some(low), Some(high)) = (field("min"), field("max")) {
            parts.push(format!("whiskers {low} to {high}"));
        }
        let outliers = array(item.get("outliers")).len();
        parts.push(format!(
            "{outliers} {}",
            plural(outliers, "outlier", "outliers")
        ));
        body.items
            .push(format!("- {name}{}: {}", tag_text(tag), parts.join(", ")));
    }
    body
}

/// A mixed chart: the series of each of its sub-charts, each tagged with its kind.
fn mixed_body(elements: &[Value]) -> Body {
    let mut body = Body {
        noun: "series",
        ..Body::default()
    };
    let mut summaries = Vec::new();
    for sub in elements.iter().filter_map(Value::as_object) {
        let kind = Kind::of(sub);
        if matches!(kind, Kind::Mixed | Kind::Superchart) {
            continue; // not in the schema; and the card never goes deeper than one level
        }
        let part = body_of_sub(sub, kind);
        if let Some(summary) = part.summary {
            summaries.push(format!("{}: {}", kind.name(), summary));
        }
        body.items.extend(part.items);
        body.labels.extend(part.labels);
    }
    if !summaries.is_empty() {
        body.summary = Some(summaries.join("; "));
    }
    body
}

fn body_of_sub(sub: &Map<String, Value>, kind: Kind) -> Body {
    body(sub, kind, Some(kind.name()))
}
