//! Output for the agent and for TUIs (docs/python.md#display-in-the-kernel, docs/api.md#live-output-artifacts-and-outputbuilder). Pure Rust: no napi, no tokio.
//!
//! Which file owns what:
//! - `sanitize`: terminal text -> plain text (ANSI, controls, `\r` rewrites), streaming.
//! - `truncate`: line cap, head/tail with an elision marker, totals; one streaming
//!   implementation ([`OutputAccumulator`]) behind the one-shot [`truncate_output`].
//! - `artifact`: the file that keeps the full output when the agent's copy is cut.
//! - `artifact_ref`: artifact ids, `artifact://` references, reading an artifact back.
//! - `render` and `html`: MIME bundle -> text, images, JSON, chart, status; HTML -> Markdown.
//! - `chart_card`: a chart as data -> its card, the few lines a model reads for a figure.
//! - `host_lines`: the host's lines told apart from a cell's (a cell line that starts as
//!   a host line does is escaped), and a notice as its line.
//! - `revisable`: a cell's latest agent text, still open to display updates and
//!   `clear_output`, before it reaches the accumulator.
//! - `image_fit`: one image within a budget of pixels and bytes (PNG, JPEG); `fitted_images`:
//!   a result's images within it and a total, the originals of those changed kept.
//! - `clamp`: one line -> at most N terminal columns.
//! - `escapes`: the escape-sequence parser both of those use, with its bounds.
//! - `preview`: streaming and collapsed previews.

mod artifact;
mod artifact_ref;
mod chart_card;
mod clamp;
pub(crate) mod escapes;
mod fitted_images;
mod host_lines;
mod html;
mod image_fit;
mod preview;
mod render;
mod revisable;
mod sanitize;
mod truncate;

pub use artifact::{check_artifact_path, ArtifactSink};
pub use artifact_ref::{
    artifact_read_call, artifact_uri, check_artifact_id, parse_artifact_uri, read_artifact,
    ArtifactRef, ARTIFACT_SCHEME,
};
pub use chart_card::{chart_card, MAX_CARD_CHARS};
pub use clamp::{clamp_line, visible_width, DEFAULT_MAX_COLUMNS};
pub use fitted_images::{
    fit_images, FitStatus, FittedImage, Original, ResultBudget, DEFAULT_MAX_TOTAL_BYTES,
};
pub use host_lines::{escape_cell_lines, notice_line, CellLines, ESCAPE as CELL_LINE_ESCAPE};
pub use html::html_to_markdown;
pub use image_fit::{ImageBudget, Size, DEFAULT_MAX_BYTES, DEFAULT_MAX_EDGE};
pub use preview::{
    collapsed_preview, streaming_preview, PreviewMode, StreamingPreview, STREAMING_PREVIEW_LINES,
};
pub use render::{render_bundle, status_mime_fault, Image, Rendered, CHART_MIME};
pub use revisable::{Piece, Revisable};
pub use sanitize::{sanitize, Sanitizer, MAX_HELD_LINE_BYTES};
pub use truncate::{truncate_output, OutputAccumulator, OutputLimits, Truncated};
