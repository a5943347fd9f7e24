//! Reading option objects that carry functions and signals (which `#[napi(object)]`
//! structs cannot hold), and the ranges of numeric options. Their types were checked with
//! the call's arguments (`args.rs`); a value out of range is an `ERR_INVALID_ARG` naming
//! the option and what it accepts.
//!
//! Numeric options are read as `f64` and checked here: typed `u32`, napi would wrap -1 to
//! 4,294,967,295 and truncate 1.5, so the check could not see the value the caller gave.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::UnknownReturnValue;

use super::cancel::{watch_signal, AbortListener};
use super::delivery::{callback, Callback};
use crate::error::KernelError;
use crate::kernel::AbortHandle;

type Parsed<T> = std::result::Result<T, KernelError>;

pub(super) struct OptionReader<'a, 'env> {
    env: &'env Env,
    obj: Option<&'a Object<'env>>,
}

/// An AbortSignal connected to an [`AbortHandle`]; `release` removes the listener again.
#[derive(Default)]
pub(super) struct Cancellation {
    pub abort: Option<Arc<AbortHandle>>,
    listener: Option<AbortListener>,
}

impl Cancellation {
    /// Call on the JavaScript thread once the work is over.
    pub fn release(self, env: &Env) {
        if let Some(listener) = self.listener {
            listener.remove(env);
        }
    }

    /// The part that travels with the work (the listener stays on the JS thread).
    pub fn split(self) -> (Option<Arc<AbortHandle>>, Cancellation) {
        (
            self.abort,
            Cancellation {
                abort: None,
                listener: self.listener,
            },
        )
    }
}

fn invalid(name: &'static str, reason: impl Into<String>) -> KernelError {
    KernelError::InvalidArgument {
        name,
        reason: reason.into(),
    }
}

/// Upper bounds, chosen so that a mistaken value fails at once instead of hanging the host.
pub(super) mod bounds {
    /// One shutdown step's grace, a disposal budget.
    pub const MAX_GRACE_MS: u64 = 3_600_000;
    /// Start-up timeout, heartbeat interval and timeout.
    pub const MAX_WAIT_MS: u64 = 3_600_000;
    /// A cell's timeout and a session's idle timeout: 7 days.
    pub const MAX_LONG_MS: u64 = 7 * 24 * 3_600_000;
    pub const MAX_PREWARM: u64 = 64;
    pub const MAX_SESSIONS: u64 = 1024;
    /// The runner starts with 4 threads, and the pids limit counts threads.
    pub const MIN_PROCESSES: u64 = 4;
    /// Linux's largest `pid_max`.
    pub const MAX_PROCESSES: u64 = 4_194_304;
    /// Below this Python does not start.
    pub const MIN_MEMORY_BYTES: u64 = 32 << 20;
    /// 2^53 - 1: the largest integer a JavaScript number holds exactly.
    pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;
    pub const MAX_COLUMNS: u64 = 1_000_000;
    pub const MAX_LINES: u64 = 1_000_000;
}

/// An `envPrefix` option, or the default; refused when it could not begin a variable name.
pub(super) fn env_prefix(value: Option<String>) -> Parsed<String> {
    let prefix = value.unwrap_or_else(|| crate::start::env::DEFAULT_ENV_PREFIX.to_string());
    match crate::start::env::env_prefix_fault(&prefix) {
        Some(reason) => Err(invalid("envPrefix", reason)),
        None => Ok(prefix),
    }
}

/// A `defaultAgent` option: unset stays unset (the runner's own default, `"deep"`).
pub(super) fn default_agent(value: Option<String>) -> Parsed<Option<String>> {
    match value
        .as_deref()
        .and_then(crate::kernel::default_agent_fault)
    {
        Some(reason) => Err(invalid("defaultAgent", reason)),
        None => Ok(value),
    }
}

/// A `uriRoots` option: scheme names to host directories (a relative one taken from the
/// host's working directory), each checked.
pub(super) fn uri_roots(
    value: Option<std::collections::HashMap<String, String>>,
) -> Parsed<Option<crate::store::uri_roots::UriRoots>> {
    value
        .map(|roots| {
            let roots = roots
                .into_iter()
                .map(|(scheme, root)| (scheme, super::host_path(root)));
            crate::store::uri_roots::UriRoots::new(roots)
                .map_err(|reason| invalid("uriRoots", reason))
        })
        .transpose()
}

/// The `uriRoots` of a request's options object.
pub(super) fn request_uri_roots(
    reader: &OptionReader,
) -> Parsed<Option<crate::store::uri_roots::UriRoots>> {
    uri_roots(reader.get("uriRoots", "an object of scheme names to directories")?)
}

/// A `statusMime` option, or the default; refused when it is not a MIME type.
pub(super) fn status_mime(value: Option<String>) -> Parsed<String> {
    let mime = value.unwrap_or_else(|| crate::kernel::DEFAULT_STATUS_MIME.to_string());
    match crate::output::status_mime_fault(&mime) {
        Some(reason) => Err(invalid("statusMime", reason)),
        None => Ok(mime),
    }
}

/// An integer in `min..=max`.
pub(super) fn integer_in(name: &'static str, value: f64, min: u64, max: u64) -> Parsed<u64> {
    if value.fract() == 0.0 && value >= min as f64 && value <= max as f64 {
        Ok(value as u64)
    } else {
        Err(invalid(
            name,
            format!("must be an integer from {min} to {max}, got {value}"),
        ))
    }
}

/// A number of milliseconds in `min..=max` (fractions allowed).
pub(super) fn millis_in(name: &'static str, value: f64, min: u64, max: u64) -> Parsed<Duration> {
    if value >= min as f64 && value <= max as f64 {
        Ok(Duration::from_micros((value * 1000.0) as u64))
    } else {
        Err(invalid(
            name,
            format!("must be a number of milliseconds from {min} to {max}, got {value}"),
        ))
    }
}

/// An optional integer option, checked when present.
pub(super) fn optional_integer(
    name: &'static str,
    value: Option<f64>,
    range: (u64, u64),
) -> Parsed<Option<u64>> {
    value
        .map(|v| integer_in(name, v, range.0, range.1))
        .transpose()
}

/// An optional milliseconds option, or `default`.
pub(super) fn optional_millis(
    name: &'static str,
    value: Option<f64>,
    range: (u64, u64),
    default: Duration,
) -> Parsed<Duration> {
    value.map_or(Ok(default), |v| millis_in(name, v, range.0, range.1))
}

impl<'a, 'env> OptionReader<'a, 'env> {
    pub fn new(env: &'env Env, obj: Option<&'a Object<'env>>) -> Self {
        Self { env, obj }
    }

    /// The option `name`; `undefined` and `null` are none. Its type was checked with the
    /// call's arguments (`args::check`), so `expected` names it only should that be
    /// skipped.
    pub fn get<T: FromNapiValue>(&self, name: &'static str, expected: &str) -> Parsed<Option<T>> {
        match self.obj {
            Some(obj) => obj
                .get::<Option<T>>(name)
                .map(Option::flatten)
                .map_err(|_| invalid(name, format!("must be {expected}"))),
            None => Ok(None),
        }
    }

    /// A number of milliseconds from 0 to `max`.
    pub fn millis(&self, name: &'static str, max: u64) -> Parsed<Option<Duration>> {
        self.get::<f64>(name, "a number")?
            .map(|ms| millis_in(name, ms, 0, max))
            .transpose()
    }

    /// A function option; `undefined` or `null` is none. Checked here: a threadsafe
    /// function made of anything else is refused by Node but ends a Bun host.
    pub fn callback<T: 'static + JsValuesTupleIntoVec>(
        &self,
        name: &'static str,
    ) -> Parsed<Option<Callback<T>>> {
        let Some(value) = self.get::<Unknown>(name, "a function")? else {
            return Ok(None);
        };
        match value.get_type() {
            Ok(ValueType::Null) => Ok(None),
            Ok(ValueType::Function) => {
                // SAFETY: a function, checked above.
                let f = unsafe { value.cast::<Function<T, UnknownReturnValue>>() }
                    .map_err(|e| invalid(name, e.reason.clone()))?;
                callback(self.env, f)
                    .map(Some)
                    .map_err(|e| invalid(name, e.reason.clone()))
            }
            _ => Err(invalid(name, "must be a function")),
        }
    }

    /// A timeout in milliseconds from 0 to `max`, where 0 is none: as the pool's
    /// `timeoutSeconds: 0`, not a cell stopped as it starts.
    pub fn timeout_millis(&self, name: &'static str, max: u64) -> Parsed<Option<Duration>> {
        Ok(self.millis(name, max)?.filter(|t| !t.is_zero()))
    }

    /// The `signal` option.
    pub fn signal(&self) -> Parsed<Cancellation> {
        let Some(signal) = self.get::<Object>("signal", "an AbortSignal")? else {
            return Ok(Cancellation::default());
        };
        let (abort, listener) =
            watch_signal(self.env, &signal).map_err(|e| invalid("signal", e.reason.clone()))?;
        Ok(Cancellation {
            abort: Some(abort),
            listener,
        })
    }
}

/// The `preload` option: dotted module names (`pkg.sub`), each part an identifier.
pub(super) fn preload_modules(
    names: Option<Vec<String>>,
) -> std::result::Result<Vec<String>, KernelError> {
    let names = names.unwrap_or_default();
    let invalid = |reason: String| KernelError::InvalidArgument {
        name: "preload",
        reason,
    };
    if names.len() > 64 {
        return Err(invalid(format!(
            "names at most 64 modules, got {}",
            names.len()
        )));
    }
    for name in &names {
        let identifier = |part: &str| {
            let mut chars = part.chars();
            chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
                && chars.all(|c| c == '_' || c.is_alphanumeric())
        };
        if !name.split('.').all(identifier) {
            return Err(invalid(format!(
                "{name:?} is not a module name (dotted identifiers, e.g. 'matplotlib.pyplot')"
            )));
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_reject_negative_nan_fractions_and_out_of_range() {
        assert_eq!(integer_in("prewarm", 3.0, 0, 64).unwrap(), 3);
        for bad in [-1.0, f64::NAN, 1.5, 65.0, f64::INFINITY, 4_294_967_295.0] {
            let err = integer_in("prewarm", bad, 0, 64).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid argument `prewarm`: must be an integer from 0 to 64, got {bad}")
            );
        }
    }

    #[test]
    fn millis_reject_negative_nan_and_out_of_range() {
        assert_eq!(
            millis_in("graceMs", 1.5, 0, 10).unwrap(),
            Duration::from_micros(1500)
        );
        for bad in [-1.0, f64::NAN, 11.0, f64::INFINITY] {
            let err = millis_in("graceMs", bad, 0, 10).unwrap_err();
            assert!(err.to_string().contains("from 0 to 10"), "{err}");
        }
    }
}
