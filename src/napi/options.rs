//! Reading option objects that carry functions and signals (which `#[napi(object)]`
//! structs cannot hold). A wrong type is an `ERR_INVALID_ARG` naming the option.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::UnknownReturnValue;

use super::cancel::{callback, watch_signal, AbortListener, Callback};
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

impl<'a, 'env> OptionReader<'a, 'env> {
    pub fn new(env: &'env Env, obj: Option<&'a Object<'env>>) -> Self {
        Self { env, obj }
    }

    pub fn get<T: FromNapiValue + ValidateNapiValue>(
        &self,
        name: &'static str,
        expected: &str,
    ) -> Parsed<Option<T>> {
        match self.obj {
            Some(obj) => obj
                .get::<T>(name)
                .map_err(|_| invalid(name, format!("must be {expected}"))),
            None => Ok(None),
        }
    }

    /// A non-negative number of milliseconds.
    pub fn millis(&self, name: &'static str) -> Parsed<Option<Duration>> {
        match self.get::<f64>(name, "a number")? {
            Some(ms) if ms.is_finite() && ms >= 0.0 => Ok(Some(Duration::from_millis(ms as u64))),
            Some(ms) => Err(invalid(
                name,
                format!("must be a non-negative number of milliseconds, got {ms}"),
            )),
            None => Ok(None),
        }
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
                callback(f)
                    .map(Some)
                    .map_err(|e| invalid(name, e.reason.clone()))
            }
            _ => Err(invalid(name, "must be a function")),
        }
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
