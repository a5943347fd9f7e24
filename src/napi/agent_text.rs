//! JavaScript surface of the agent-text engine (`crate::eval::agent_text`): the `OutputBuilder`
//! class, `readArtifact`, and the agent-text options `evaluate` and the pool share
//! (`onOutput`, `artifactId`, `includeFigureText`). Conversion and delegation only.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::args::{self, convert, convert_optional};
use super::delivery::EventSink;
use super::options::{bounds, optional_integer, OptionReader};
use super::results::{ImageOutput, StatusInfo, TruncationInfo};
use super::signatures as sig;
use super::{coded_error, host_path, js_error, promise, rejected};
use crate::error::KernelError;
use crate::eval::agent_text::{AgentText, AgentTextOptions};
use crate::eval::executor;
use crate::eval::live::{OnOutput, DEFAULT_FLUSH_AFTER};
use crate::eval::run_end::RunEnd;
use crate::kernel::DEFAULT_STATUS_MIME;
use crate::output::{
    check_artifact_id, check_artifact_path, read_artifact, ArtifactSink, OutputLimits,
};
use crate::wire::events::KernelEvent;

type Parsed<T> = std::result::Result<T, KernelError>;

/// The longest `outputFlushMs`: a line held longer is no longer live.
const MAX_OUTPUT_FLUSH_MS: u64 = 60_000;

/// The `artifactId` option, checked: it names a file in artifactsDir.
pub(super) fn artifact_id(reader: &OptionReader) -> Parsed<Option<String>> {
    let id: Option<String> = reader.get("artifactId", "a string")?;
    id.map(|id| {
        check_artifact_id(&id)
            .map(|()| id)
            .map_err(|reason| KernelError::InvalidArgument {
                name: "artifactId",
                reason,
            })
    })
    .transpose()
}

/// The `artifactPath` option, checked (`output::check_artifact_path`): the exact file the
/// full output goes to. Not with `artifactId`, which names a file in artifactsDir.
pub(super) fn artifact_path(reader: &OptionReader) -> Parsed<Option<PathBuf>> {
    let path: Option<String> = reader.get("artifactPath", "a string")?;
    let id_too = reader.get::<String>("artifactId", "a string")?.is_some();
    checked_artifact_path(path, id_too)
}

fn checked_artifact_path(path: Option<String>, id_too: bool) -> Parsed<Option<PathBuf>> {
    let Some(path) = path.map(PathBuf::from) else {
        return Ok(None);
    };
    if id_too {
        return Err(KernelError::InvalidArgument {
            name: "artifactPath",
            reason:
                "names the full output's file itself: give `artifactPath` or `artifactId`, not both"
                    .into(),
        });
    }
    check_artifact_path(&path)?;
    Ok(Some(path))
}

/// `onOutput`'s sink: each chunk with its cell's index.
type ChunkSink = EventSink<FnArgs<(String, u32)>>;

/// `onOutput(chunk, cellIndex)`: the live agent text, delivered in order as `onEvent`
/// is; `finish` waits until JavaScript has run every chunk. With `outputFlushMs`, how
/// long an unfinished line waits, with no output, before it is sent.
pub(super) struct LiveOutput {
    sink: Arc<Mutex<ChunkSink>>,
    wanted: bool,
    flush_after: Option<Duration>,
}

impl LiveOutput {
    pub(super) fn read(reader: &OptionReader) -> Parsed<LiveOutput> {
        let callback = reader.callback::<FnArgs<(String, u32)>>("onOutput")?;
        let flush_after = match reader.millis("outputFlushMs", MAX_OUTPUT_FLUSH_MS)? {
            None => Some(DEFAULT_FLUSH_AFTER),
            Some(ms) => Some(ms).filter(|ms| !ms.is_zero()),
        };
        Ok(LiveOutput {
            wanted: callback.is_some(),
            sink: Arc::new(Mutex::new(EventSink::new(callback))),
            flush_after,
        })
    }

    /// What the engine calls with each chunk; `None` without `onOutput`.
    pub(super) fn sender(&self) -> Option<OnOutput> {
        let sink = self.sink.clone();
        self.wanted.then(|| OnOutput {
            send: Box::new(move |chunk, index| {
                sink.lock().unwrap().push((chunk, index as u32).into())
            }),
            flush_after: self.flush_after,
        })
    }

    /// Call once the engine is done (its sender dropped); what `onOutput` threw first.
    pub(super) async fn finish(self) -> Option<String> {
        let sink = Arc::try_unwrap(self.sink).ok()?.into_inner().ok()?;
        sink.finish().await
    }
}

/// The notice in an `EvalResult` for an `onOutput` that threw.
pub(super) fn on_output_notice(message: &str) -> String {
    format!("onOutput threw: {message}; later output was still delivered")
}

#[napi(object)]
pub struct OutputBuilderOptions {
    /// When the text is cut, the full sanitized text is written to `<artifactsDir>/<id>.txt`.
    pub artifacts_dir: Option<String>,
    /// The artifact's id: 1 to 128 of `A-Z a-z 0-9 . _ -`, not starting with `.`.
    /// @default a fresh `output-<millis>-<random>`
    pub artifact_id: Option<String>,
    /// The exact file the full text is written to when cut, in place of one in
    /// `artifactsDir`: an absolute path in an existing directory of ours that nobody
    /// else can write (else `ERR_ARTIFACTS_DIR`); a regular file there is replaced, a
    /// symlink refused. The output then ends with `[full output (N lines): <path>]`, and
    /// `truncated.artifactId` is absent. Not with `artifactId` (`ERR_INVALID_ARG`).
    pub artifact_path: Option<String>,
    /// A line longer than this is cut, ending with `…`; from 16 to 1,048,576. @default 768
    pub line_bytes: Option<f64>,
    /// The most bytes of whole lines kept from the start; up to 67,108,864. @default 20480
    pub head_bytes: Option<f64>,
    /// The most bytes of whole lines kept from the end; up to 67,108,864. @default 51200
    pub tail_bytes: Option<f64>,
    /// Keep the text/plain stand-in shown next to an image (matplotlib's
    /// `<Figure size 640x480 with 1 Axes>`). @default false
    pub include_figure_text: Option<bool>,
    /// The MIME type of status events in display bundles. @default "application/x-pykernel-status"
    pub status_mime: Option<String>,
}

/// How a run another executor made (a shell command, say) ended, for
/// `OutputBuilder.finish`: its text then ends as `evaluate`'s does for a cell that ended
/// so. Every field is optional; none is a run that ended normally.
#[napi(object)]
pub struct RunOutcome {
    /// The code it exited with: other than 0, the text ends with `Command exited with
    /// code N` (unless it timed out or was cancelled, as in `evaluate`). An integer of 32
    /// bits, or null for none.
    #[napi(ts_type = "number | null")]
    pub exit_code: Option<Either<f64, Null>>,
    /// It ran past its time and was stopped: `evaluate`'s timeout notice, stating
    /// `timeoutMs`. @default false
    pub timed_out: Option<bool>,
    /// The time it had, in milliseconds, from 0 to 604,800,000; needed with `timedOut`
    /// (unless `killed`).
    pub timeout_ms: Option<f64>,
    /// It was stopped on request (an abort): no notice, no closing line. @default false
    pub cancelled: Option<bool>,
    /// It did not stop when interrupted and was killed; only with `timedOut` (the notice
    /// then says so) or `cancelled`. @default false
    pub killed: Option<bool>,
    /// It asked for input on stdin: `evaluate`'s notice for that. @default false
    pub stdin_requested: Option<bool>,
}

impl RunOutcome {
    fn run_end(self) -> Parsed<RunEnd> {
        let exit_code = match self.exit_code {
            Some(Either::A(code)) => Some(code),
            Some(Either::B(Null)) | None => None,
        };
        let exit_code = exit_code
            .map(|code| {
                let whole =
                    code.fract() == 0.0 && code >= i32::MIN as f64 && code <= i32::MAX as f64;
                whole
                    .then_some(code as i32)
                    .ok_or_else(|| KernelError::InvalidArgument {
                        name: "exitCode",
                        reason: format!("must be an integer of 32 bits or null, got {code}"),
                    })
            })
            .transpose()?;
        let timeout = optional_integer("timeoutMs", self.timeout_ms, (0, bounds::MAX_LONG_MS))?
            .map(Duration::from_millis);
        let end = RunEnd {
            exit_code,
            timed_out: self.timed_out.unwrap_or(false),
            timeout,
            cancelled: self.cancelled.unwrap_or(false),
            killed: self.killed.unwrap_or(false),
            stdin_requested: self.stdin_requested.unwrap_or(false),
        };
        end.check()?;
        Ok(end)
    }
}

#[napi(object)]
pub struct BuiltOutput {
    /// What the agent reads, as `evaluate`'s `output`: the notices first (`[...]` lines:
    /// the run's outcome, a full output that could not be kept), then the sanitized,
    /// truncated text, ending with `[full output (N lines): artifact://<id>]` (or the
    /// `artifactPath`) when cut and kept, then `Command exited with code N` for a failed
    /// run; `(no output)` when empty. A pushed line that starts as the builder's own lines
    /// do (`[`, `Command exited with code`, `(no output)`, `(displayed `) gets a `\` in
    /// front, as in `evaluate`'s `output`.
    pub output: String,
    /// The notices at the head of `output`, without their brackets, as `evaluate`'s
    /// `annotations`.
    pub annotations: Vec<String>,
    pub truncated: Option<TruncationInfo>,
    pub images: Vec<ImageOutput>,
    #[napi(ts_type = "unknown[]")]
    pub json: Vec<Value>,
    /// The charts of the displays pushed, as data (docs/charts.md), in order; each one's
    /// card is in `output`, as in `evaluate`'s.
    #[napi(ts_type = "Chart[]")]
    pub charts: Vec<Value>,
    pub statuses: Vec<StatusInfo>,
}

/// The agent text of any stream, by the rules of `evaluate`'s `output`: sanitized
/// (ANSI, controls, `\r` rewrites), lines capped, head and tail kept with
/// `[…N lines elided…]` between, the full text in an artifact, images, JSON and charts aside.
/// Memory stays bounded whatever goes through it.
#[napi]
pub struct OutputBuilder {
    text: Option<AgentText>,
}

#[napi]
impl OutputBuilder {
    #[napi(
        constructor,
        ts_args_type = "options?: OutputBuilderOptions | undefined | null"
    )]
    pub fn new(env: Env, options: Option<Unknown>) -> Result<Self> {
        let built = (|| -> Parsed<AgentText> {
            args::check(&env, sig::NEW_OUTPUT_BUILDER, &[options])?;
            let options: Option<OutputBuilderOptions> = convert_optional("options", options)?;
            let Some(options) = options else {
                return Ok(AgentText::new(builder_options(
                    None,
                    None,
                    OutputLimits::default(),
                )));
            };
            let defaults = OutputLimits::default();
            const MAX_PART: u64 = 64 << 20;
            let limits = OutputLimits {
                line_bytes: optional_integer("lineBytes", options.line_bytes, (16, 1 << 20))?
                    .map_or(defaults.line_bytes, |n| n as usize),
                head_bytes: optional_integer("headBytes", options.head_bytes, (0, MAX_PART))?
                    .map_or(defaults.head_bytes, |n| n as usize),
                tail_bytes: optional_integer("tailBytes", options.tail_bytes, (0, MAX_PART))?
                    .map_or(defaults.tail_bytes, |n| n as usize),
            };
            if let Some(id) = &options.artifact_id {
                check_artifact_id(id).map_err(|reason| KernelError::InvalidArgument {
                    name: "artifactId",
                    reason,
                })?;
            }
            let path = checked_artifact_path(options.artifact_path, options.artifact_id.is_some())?;
            let artifact = match (path, options.artifacts_dir) {
                (Some(path), _) => Some(ArtifactSink::at_path(path)),
                (None, Some(dir)) => Some(match options.artifact_id {
                    Some(id) => ArtifactSink::named(host_path(dir), id),
                    None => ArtifactSink::in_dir(host_path(dir)),
                }),
                (None, None) => None,
            };
            let status_mime = super::options::status_mime(options.status_mime)?;
            let mut built = builder_options(artifact, Some(status_mime), limits);
            built.include_figure_text = options.include_figure_text.unwrap_or(false);
            Ok(AgentText::new(built))
        })();
        let text = built.map_err(|err| js_error(&env, &err))?;
        Ok(OutputBuilder { text: Some(text) })
    }

    /// Takes raw text (ANSI, `\r` and all); returns the sanitized text it completed, which
    /// may be empty: an unfinished line waits for its end (a later `\r` may rewrite it).
    #[napi(ts_args_type = "text: string")]
    pub fn push(&mut self, env: Env, text: Unknown) -> Result<String> {
        let text: String = args::check(&env, sig::OUTPUT_BUILDER_PUSH, &[Some(text)])
            .and_then(|()| convert("text", text))
            .map_err(|err| js_error(&env, &err))?;
        let builder = self.builder(&env)?;
        builder.push_text(&text);
        Ok(builder.take_live())
    }

    /// Takes a `KernelEvent` (as `onEvent` receives it); returns the sanitized text it added.
    #[napi(ts_args_type = "event: KernelEvent")]
    pub fn push_event(&mut self, env: Env, event: Unknown) -> Result<String> {
        let event: Value = args::check(&env, sig::OUTPUT_BUILDER_PUSH_EVENT, &[Some(event)])
            .and_then(|()| convert("event", event))
            .map_err(|err| js_error(&env, &err))?;
        let event = KernelEvent::from_json(&event).map_err(|reason| {
            js_error(
                &env,
                &KernelError::InvalidArgument {
                    name: "event",
                    reason,
                },
            )
        })?;
        let builder = self.builder(&env)?;
        builder.add(&event);
        Ok(builder.take_live())
    }

    /// Ends a cell: its held text (display updates, `clear_output`) becomes final, and the
    /// unfinished line is released. Returns the text it released.
    #[napi]
    pub fn end_cell(&mut self, env: Env) -> Result<String> {
        let builder = self.builder(&env)?;
        builder.end_cell();
        Ok(builder.take_live())
    }

    /// The agent text of everything pushed, ended as `evaluate` ends a cell's when given
    /// how the run ended (`outcome`): its notices at the head, in `evaluate`'s words and
    /// order, and its closing line. The builder takes nothing after it.
    #[napi(ts_args_type = "outcome?: RunOutcome | undefined | null")]
    pub fn finish(&mut self, env: Env, outcome: Option<Unknown>) -> Result<BuiltOutput> {
        let end = args::check(&env, sig::OUTPUT_BUILDER_FINISH, &[outcome])
            .and_then(|()| convert_optional::<RunOutcome>("outcome", outcome))
            .and_then(|outcome| outcome.map(RunOutcome::run_end).transpose())
            .map_err(|err| js_error(&env, &err))?
            .unwrap_or_default();
        self.builder(&env)?;
        let mut text = self.text.take().expect("checked above");
        if let Some(line) = end.closing_line() {
            text.push_closing_line(&line);
        }
        let mut annotations = end.notices();
        let (output, built) = executor::close_output(text, &mut annotations);
        Ok(BuiltOutput {
            output,
            annotations,
            truncated: built.truncated.map(|t| TruncationInfo {
                total_bytes: t.total_bytes as f64,
                total_lines: t.total_lines as f64,
                artifact_path: t.artifact_path.map(|p| p.display().to_string()),
                artifact_id: built.artifact_id,
                artifact_error: t.artifact_error,
            }),
            images: built
                .images
                .into_iter()
                .map(|i| ImageOutput {
                    mime: i.mime.to_string(),
                    data: i.data,
                })
                .collect(),
            json: built.json,
            charts: built.charts,
            statuses: built
                .statuses
                .into_iter()
                .map(|(op, data)| StatusInfo { op, data })
                .collect(),
        })
    }

    fn builder(&mut self, env: &Env) -> Result<&mut AgentText> {
        self.text.as_mut().ok_or_else(|| {
            coded_error(
                env,
                "ERR_INVALID_ARG",
                "this OutputBuilder is finished; make a new OutputBuilder for more output",
            )
        })
    }
}

fn builder_options(
    artifact: Option<ArtifactSink>,
    status_mime: Option<String>,
    limits: OutputLimits,
) -> AgentTextOptions {
    AgentTextOptions {
        limits,
        artifact,
        status_mime: status_mime.unwrap_or_else(|| DEFAULT_STATUS_MIME.to_string()),
        include_figure_text: false,
        live: true,
    }
}

#[napi(object)]
pub struct ReadArtifactOptions {
    /// The artifactsDir the output was cut under.
    pub artifacts_dir: String,
}

/// The full output an `artifact://<id>` reference names (with `:<first>-<last>`, those
/// lines, 1-based and inclusive; `:<first>-` to the end). `ERR_INVALID_ARG` for a
/// reference that is not one, or whose id could leave the directory;
/// `ERR_ARTIFACT_NOT_FOUND` when there is no such artifact.
#[napi(
    js_name = "readArtifact",
    ts_args_type = "uri: string, options: ReadArtifactOptions",
    ts_return_type = "Promise<string>"
)]
pub fn read_artifact_text<'env>(
    env: &'env Env,
    uri: Unknown<'env>,
    options: Unknown<'env>,
) -> Result<PromiseRaw<'env, String>> {
    let parsed = args::check(env, sig::READ_ARTIFACT, &[Some(uri), Some(options)]).and_then(|()| {
        let options: ReadArtifactOptions = convert("options", options)?;
        Ok((convert::<String>("uri", uri)?, options))
    });
    let (uri, options) = match parsed {
        Ok(parsed) => parsed,
        Err(err) => return rejected(env, err),
    };
    let dir: PathBuf = host_path(options.artifacts_dir);
    promise(env, async move {
        super::blocking(move || read_artifact(&dir, &uri)).await
    })
}

/// An `EvalResult` that also says that `onOutput` threw, if it did.
pub(super) fn with_on_output_error(
    mut result: executor::EvalResult,
    on_output_error: Option<String>,
) -> executor::EvalResult {
    if let Some(message) = on_output_error {
        result.add_notice(on_output_notice(&message));
    }
    result
}
