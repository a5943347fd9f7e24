//! JavaScript surface of `output`: renderBundle, clampLine and the TUI previews.
//! Argument conversion and delegation only.

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::args::{self, convert, convert_optional};
use super::js_error;
use super::options::{bounds, optional_integer};
use super::signatures as sig;
use crate::error::KernelError;
use crate::output::{self, PreviewMode, StreamingPreview};

#[napi(object)]
pub struct RenderBundleOptions {
    /// The MIME type that carries status events. @default "application/x-pykernel-status"
    pub status_mime: Option<String>,
}

#[napi(object)]
pub struct RenderedImage {
    #[napi(ts_type = "'image/png' | 'image/jpeg'")]
    pub mime: String,
    /// Base64.
    pub data: String,
}

#[napi(object)]
pub struct RenderedBundle {
    /// `text/markdown` > `text/plain` > `text/html` as Markdown; empty when none.
    pub text: String,
    /// True when `text` came from `text/markdown` (HTML converted to Markdown is not).
    pub markdown: bool,
    /// The MIME type `text` came from; absent when the bundle has no text.
    #[napi(ts_type = "'text/markdown' | 'text/plain' | 'text/html'")]
    pub text_mime: Option<String>,
    pub images: Vec<RenderedImage>,
    /// The `application/json` value, when present.
    pub json: Option<Value>,
    /// The figure's chart as data (`application/vnd.pykernel.chart+json`, docs/charts.md),
    /// when present and an object.
    #[napi(ts_type = "Chart")]
    pub chart: Option<Value>,
    /// The chart's card: the lines `output` shows for the figure; empty without a chart.
    pub chart_card: String,
    /// The status-MIME value, when it is a status: an object with a string `op`. A
    /// malformed one is left out (and is never text).
    pub status: Option<Value>,
}

/// Renders a MIME bundle (or a Jupyter `{ data: bundle }` envelope) for an agent.
#[napi(ts_args_type = "bundle: MimeBundle, options?: RenderBundleOptions")]
pub fn render_bundle(
    env: &Env,
    bundle: Unknown,
    options: Option<Unknown>,
) -> Result<RenderedBundle> {
    let parsed = args::check(env, sig::RENDER_BUNDLE, &[Some(bundle), options]).and_then(|()| {
        let options: Option<RenderBundleOptions> = convert_optional("options", options)?;
        Ok((
            convert::<Value>("bundle", bundle)?,
            super::options::status_mime(options.and_then(|options| options.status_mime))?,
        ))
    });
    let (bundle, status_mime) = parsed.map_err(|err| js_error(env, &err))?;
    let rendered = output::render_bundle(&bundle, &status_mime);
    Ok(RenderedBundle {
        text: rendered.text,
        markdown: rendered.markdown,
        text_mime: rendered.text_mime.map(str::to_string),
        images: rendered
            .images
            .into_iter()
            .map(|image| RenderedImage {
                mime: image.mime.to_string(),
                data: image.data,
            })
            .collect(),
        json: rendered.json,
        chart_card: rendered
            .chart
            .as_ref()
            .map(output::chart_card)
            .unwrap_or_default(),
        chart: rendered.chart,
        status: rendered.status,
    })
}

/// Clamps a line to `maxColumns` terminal columns (ANSI sequences count 0, wide characters
/// 2), ending `… [N visible columns omitted]` when cut; the marker fits inside the budget
/// (a budget too small for it ends in a bare `…`).
/// The result is also at most 16 bytes per column plus the marker, so zero-width
/// characters and escape sequences cannot make it long.
/// @param maxColumns an integer from 1 to 1,000,000. @default 4000
#[napi(ts_args_type = "line: string, maxColumns?: number | undefined | null")]
pub fn clamp_line(env: &Env, line: Unknown, max_columns: Option<Unknown>) -> Result<String> {
    let parsed = args::check(env, sig::CLAMP_LINE, &[Some(line), max_columns]).and_then(|()| {
        let max_columns = convert_optional("maxColumns", max_columns)?;
        Ok((
            convert::<String>("line", line)?,
            optional_integer("maxColumns", max_columns, (1, bounds::MAX_COLUMNS))?,
        ))
    });
    let (line, max_columns) = parsed.map_err(|err| js_error(env, &err))?;
    let max_columns = max_columns.map_or(output::DEFAULT_MAX_COLUMNS, |n| n as usize);
    Ok(output::clamp_line(&line, max_columns))
}

#[napi(object)]
pub struct StreamingPreviewOptions {
    /// An integer from 0 to 1,000,000. @default 100
    pub max_lines: Option<f64>,
}

/// The last `maxLines` lines of output (a text, or an array of lines), preceded by
/// `… N earlier lines dropped while streaming` when lines were dropped.
#[napi(ts_args_type = "text: string | string[], options?: StreamingPreviewOptions")]
pub fn streaming_preview(env: &Env, text: Unknown, options: Option<Unknown>) -> Result<String> {
    let parsed = args::check(env, sig::STREAMING_PREVIEW, &[Some(text), options]).and_then(|()| {
        let options: Option<StreamingPreviewOptions> = convert_optional("options", options)?;
        Ok((
            convert::<Either<String, Vec<String>>>("text", text)?,
            optional_integer(
                "maxLines",
                options.and_then(|options| options.max_lines),
                (0, bounds::MAX_LINES),
            )?,
        ))
    });
    let (text, max_lines) = parsed.map_err(|err| js_error(env, &err))?;
    let max_lines = max_lines.map_or(output::STREAMING_PREVIEW_LINES, |n| n as usize);
    Ok(match text {
        Either::A(text) => output::streaming_preview(&text, max_lines),
        Either::B(lines) => {
            let mut preview = StreamingPreview::new(max_lines);
            for line in &lines {
                preview.push_line(line);
            }
            preview.render()
        }
    })
}

#[napi(object)]
pub struct CollapsedPreviewOptions {
    /// 10 lines for `tool`, 20 for `interactive`. @default 'tool'
    #[napi(ts_type = "'tool' | 'interactive'")]
    pub mode: Option<String>,
}

/// The first 10 (tool) or 20 (interactive) lines of `text`, followed by `… N more lines`.
#[napi(ts_args_type = "text: string, options?: CollapsedPreviewOptions | undefined | null")]
pub fn collapsed_preview(env: &Env, text: Unknown, options: Option<Unknown>) -> Result<String> {
    let parsed = args::check(env, sig::COLLAPSED_PREVIEW, &[Some(text), options]).and_then(|()| {
        let options: Option<CollapsedPreviewOptions> = convert_optional("options", options)?;
        Ok((convert::<String>("text", text)?, options))
    });
    let (text, options) = parsed.map_err(|err| js_error(env, &err))?;
    let mode = match options.and_then(|options| options.mode).as_deref() {
        None | Some("tool") => PreviewMode::Tool,
        Some("interactive") => PreviewMode::Interactive,
        Some(other) => {
            let err = KernelError::InvalidArgument {
                name: "mode",
                reason: format!("expected 'tool' or 'interactive', got '{other}'"),
            };
            return Err(js_error(env, &err));
        }
    };
    Ok(output::collapsed_preview(&text, mode))
}
