//! Cancellation across the JavaScript boundary: an AbortSignal as an [`AbortHandle`].

use std::sync::Arc;

use napi::bindgen_prelude::*;

use crate::kernel::AbortHandle;

/// `EventTarget.addEventListener` / `removeEventListener` for the `abort` event.
type ListenerMethod<'env> =
    Function<'env, FnArgs<(&'env str, Function<'env, (), ()>)>, Unknown<'env>>;

/// The `abort` listener added to a caller's AbortSignal, removed when the cell ends so a
/// signal reused for many cells does not collect listeners.
pub(super) struct AbortListener {
    signal: ObjectRef<false>,
    listener: FunctionRef<(), ()>,
}

impl AbortListener {
    pub(super) fn remove(self, env: &Env) {
        let removed = (|| -> Result<()> {
            let signal = self.signal.get_value(env)?;
            let listener = self.listener.borrow_back(env)?;
            let remove: ListenerMethod = signal.get_named_property("removeEventListener")?;
            remove.apply(signal, ("abort", listener).into())?;
            Ok(())
        })();
        if let Err(err) = removed {
            tracing::debug!("could not remove the abort listener: {err}");
        }
        let _ = self.signal.unref(env);
    }
}

/// Connects an AbortSignal to an [`AbortHandle`]; an already aborted signal aborts at once.
pub(super) fn watch_signal(
    env: &Env,
    signal: &Object,
) -> Result<(Arc<AbortHandle>, Option<AbortListener>)> {
    let handle = AbortHandle::new();
    if signal.get::<bool>("aborted")?.unwrap_or(false) {
        handle.abort();
        return Ok((handle, None));
    }
    let on_abort = handle.clone();
    let callback = env.create_function_from_closure("onAbort", move |_| {
        on_abort.abort();
        Ok(())
    })?;
    let add: ListenerMethod = signal.get_named_property("addEventListener")?;
    add.apply(signal, ("abort", callback).into())?;
    let listener = AbortListener {
        signal: signal.create_ref()?,
        listener: callback.create_ref()?,
    };
    Ok((handle, Some(listener)))
}
