//! HTML -> basic Markdown, for bundles whose only text is `text/html`.
//!
//! `htmd` (html5ever-based, turndown-like) does the walking and the inline and block
//! elements. Tables get our own handler: htmd's drops the row-header `<th>` cells of a
//! body row and turns tables without `<th>` into loose paragraphs, and pandas DataFrames
//! (row headers in `<tbody>`, a `<style>` next to the table) are the most common HTML a
//! cell produces.

use std::rc::Rc;
use std::sync::OnceLock;

use htmd::element_handler::{HandlerResult, Handlers};
use htmd::options::{BulletListMarker, Options};
use htmd::{Element, HtmlToMarkdown, Node};
use markup5ever_rcdom::NodeData;
use unicode_width::UnicodeWidthStr;

/// Converts an HTML fragment or document. The result is trimmed and, when not empty,
/// ends with one `\n`: `<p><strong>Hello</strong></p>` -> `**Hello**\n`.
pub fn html_to_markdown(html: &str) -> String {
    let markdown = match converter().convert(html) {
        Ok(markdown) => markdown,
        // html5ever recovers from any malformed input; this is an I/O error in name only.
        Err(_) => html.to_string(),
    };
    let trimmed = markdown.trim();
    if trimmed.is_empty() {
        String::new()
    } else {
        format!("{trimmed}\n")
    }
}

fn converter() -> &'static HtmlToMarkdown {
    static CONVERTER: OnceLock<HtmlToMarkdown> = OnceLock::new();
    CONVERTER.get_or_init(|| {
        HtmlToMarkdown::builder()
            .options(Options {
                bullet_list_marker: BulletListMarker::Dash,
                ul_bullet_spacing: 1,
                ol_number_spacing: 1,
                ..Options::default()
            })
            .skip_tags(vec!["script", "style", "head", "noscript", "template"])
            .add_handler(vec!["table"], table_handler)
            .build()
    })
}

fn tag_name(node: &Node) -> Option<&str> {
    match &node.data {
        NodeData::Element { name, .. } => Some(&name.local),
        _ => None,
    }
}

struct Row {
    cells: Vec<String>,
    in_thead: bool,
    all_th: bool,
}

fn table_handler(handlers: &dyn Handlers, element: Element) -> Option<HandlerResult> {
    let mut rows = Vec::new();
    let mut caption = String::new();
    collect_rows(handlers, element.node, false, &mut rows, &mut caption);
    let columns = rows.iter().map(|row| row.cells.len()).max().unwrap_or(0);
    if columns == 0 {
        let content = handlers.walk_children(element.node).content;
        let content = content.trim();
        return (!content.is_empty()).then(|| format!("\n\n{content}\n\n").into());
    }

    // A Markdown table needs a header row: the first row when it is one (in <thead>, or
    // all <th>), an empty one otherwise rather than promoting data to a header.
    let has_header = rows[0].in_thead || rows[0].all_th;
    let header = if has_header {
        rows.remove(0).cells
    } else {
        Vec::new()
    };

    let mut widths = vec![3; columns];
    for cells in std::iter::once(&header).chain(rows.iter().map(|row| &row.cells)) {
        for (width, cell) in widths.iter_mut().zip(cells) {
            *width = (*width).max(cell.width());
        }
    }

    let mut out = String::from("\n\n");
    if !caption.is_empty() {
        out.push_str(&caption);
        out.push_str("\n\n");
    }
    push_row(&mut out, &header, &widths);
    out.push('|');
    for width in &widths {
        out.push_str(&format!(" {} |", "-".repeat(*width)));
    }
    out.push('\n');
    for row in &rows {
        push_row(&mut out, &row.cells, &widths);
    }
    out.push('\n');
    Some(out.into())
}

fn collect_rows(
    handlers: &dyn Handlers,
    node: &Rc<Node>,
    in_thead: bool,
    rows: &mut Vec<Row>,
    caption: &mut String,
) {
    for child in node.children.borrow().iter() {
        match tag_name(child) {
            Some("thead") => collect_rows(handlers, child, true, rows, caption),
            Some("tbody" | "tfoot") => collect_rows(handlers, child, false, rows, caption),
            Some("tr") => rows.push(read_row(handlers, child, in_thead)),
            Some("caption") => *caption = cell_text(&handlers.walk_children(child).content),
            _ => {}
        }
    }
}

fn read_row(handlers: &dyn Handlers, tr: &Rc<Node>, in_thead: bool) -> Row {
    let mut cells = Vec::new();
    let mut all_th = true;
    for cell in tr.children.borrow().iter() {
        let tag = tag_name(cell);
        if !matches!(tag, Some("td" | "th")) {
            continue;
        }
        all_th &= tag == Some("th");
        cells.push(cell_text(&handlers.walk_children(cell).content));
        // Keep later cells under their columns.
        for _ in 1..colspan(cell) {
            cells.push(String::new());
        }
    }
    Row {
        all_th: all_th && !cells.is_empty(),
        cells,
        in_thead,
    }
}

fn colspan(cell: &Node) -> usize {
    let NodeData::Element { attrs, .. } = &cell.data else {
        return 1;
    };
    let attrs = attrs.borrow();
    attrs
        .iter()
        .find(|attr| &*attr.name.local == "colspan")
        .and_then(|attr| attr.value.trim().parse::<usize>().ok())
        .map_or(1, |span| span.clamp(1, 1000))
}

/// One line of cell text: whitespace runs (newlines included) become one space, and `|`
/// is escaped so it cannot split the cell.
fn cell_text(content: &str) -> String {
    let mut out = String::with_capacity(content.len());
    for word in content.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        for c in word.chars() {
            if c == '|' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out
}

fn push_row(out: &mut String, cells: &[String], widths: &[usize]) {
    out.push('|');
    for (i, width) in widths.iter().enumerate() {
        let cell = cells.get(i).map_or("", String::as_str);
        out.push(' ');
        out.push_str(cell);
        out.push_str(&" ".repeat(width.saturating_sub(cell.width())));
        out.push_str(" |");
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bold_paragraph() {
        assert_eq!(
            html_to_markdown("<p><strong>Hello</strong></p>"),
            "**Hello**\n"
        );
    }

    #[test]
    fn inline_and_block_elements() {
        let html = "<h2>Title</h2><p>a <em>b</em> <a href=\"https://x.org\">link</a> \
                    <code>c()</code></p><pre><code>x = 1\ny = 2</code></pre>\
                    <ul><li>one</li><li>two</li></ul><ol><li>first</li><li>second</li></ol>";
        assert_eq!(
            html_to_markdown(html),
            "## Title\n\na *b* [link](https://x.org) `c()`\n\n```\nx = 1\ny = 2\n```\n\n\
             - one\n- two\n\n1. first\n2. second\n"
        );
    }

    #[test]
    fn scripts_and_styles_are_dropped() {
        let html = "<style>p{color:red}</style><script>alert(1)</script><p>kept</p>";
        assert_eq!(html_to_markdown(html), "kept\n");
    }

    #[test]
    fn pandas_dataframe_table() {
        let html = r#"<div>
<style scoped>
    .dataframe tbody tr th:only-of-type { vertical-align: middle; }
</style>
<table border="1" class="dataframe">
  <thead>
    <tr style="text-align: right;">
      <th></th>
      <th>name</th>
      <th>score</th>
    </tr>
  </thead>
  <tbody>
    <tr>
      <th>0</th>
      <td>Ada</td>
      <td>1.5</td>
    </tr>
    <tr>
      <th>1</th>
      <td>a|b</td>
      <td>22.25</td>
    </tr>
  </tbody>
</table>
<p>2 rows × 2 columns</p>
</div>"#;
        assert_eq!(
            html_to_markdown(html),
            "|     | name | score |\n\
             | --- | ---- | ----- |\n\
             | 0   | Ada  | 1.5   |\n\
             | 1   | a\\|b | 22.25 |\n\n\
             2 rows × 2 columns\n"
        );
    }

    #[test]
    fn table_without_header_gets_an_empty_one() {
        let html = "<table><tr><td>a</td><td colspan=\"2\">b</td></tr><tr><td>1</td><td>2</td><td>3</td></tr></table>";
        assert_eq!(
            html_to_markdown(html),
            "|     |     |     |\n| --- | --- | --- |\n| a   | b   |     |\n| 1   | 2   | 3   |\n"
        );
    }

    #[test]
    fn table_with_th_first_row_and_inline_markup_in_cells() {
        let html = "<table><tr><th>k</th><th>v</th></tr><tr><td><b>x</b></td><td>line\none</td></tr></table>";
        assert_eq!(
            html_to_markdown(html),
            "| k     | v        |\n| ----- | -------- |\n| **x** | line one |\n"
        );
    }

    #[test]
    fn text_around_a_table_keeps_one_blank_line_each_side_and_a_caption_comes_first() {
        let table = "<table><tr><th>k</th></tr><tr><td>1</td></tr></table>";
        let grid = "| k   |\n| --- |\n| 1   |\n";
        assert_eq!(
            html_to_markdown(&format!("<p>before</p>{table}<p>after</p>")),
            format!("before\n\n{grid}\nafter\n")
        );
        let captioned = table.replace("<tr>", "<caption>Scores</caption><tr>");
        assert_eq!(
            html_to_markdown(&format!("<p>before</p>{captioned}")),
            format!("before\n\nScores\n\n{grid}")
        );
    }

    #[test]
    fn a_cell_spanning_columns_keeps_later_cells_under_their_own() {
        let html = "<table><tr><th>a</th><th>b</th><th>c</th></tr>\
                    <tr><td colspan=\" 2 \">wide</td><td>3</td></tr>\
                    <tr><td colspan=\"x\">1</td><td>2</td></tr></table>";
        assert_eq!(
            html_to_markdown(html),
            "| a    | b   | c   |\n| ---- | --- | --- |\n| wide |     | 3   |\n| 1    | 2   |     |\n"
        );
    }

    #[test]
    fn a_table_without_cells_leaves_its_text_or_nothing() {
        assert_eq!(
            html_to_markdown("<p>a</p><table></table><p>b</p>"),
            "a\n\nb\n"
        );
        assert_eq!(
            html_to_markdown("<p>a</p><table><caption>only a caption</caption></table><p>b</p>"),
            "a\n\nonly a caption\n\nb\n"
        );
    }

    #[test]
    fn empty_html_gives_empty_text() {
        assert_eq!(html_to_markdown("<div>  </div>"), "");
    }
}
