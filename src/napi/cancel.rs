//! Cancellation and event delivery across the JavaScript boundary.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};

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

/// Delivers events to `onEvent` as they come, and knows when JavaScript has run them all:
/// each call reports back once the callback returned, and `finish` waits for the last
/// report, so the execute promise never resolves before its events. A throwing callback
/// neither fails the cell nor stops later events; `finish` returns the first throw's
/// message so the result can say so.
pub(super) struct EventSink<T: 'static + JsValuesTupleIntoVec> {
    callback: Option<Callback<T>>,
    sent: u64,
    delivered: Arc<Delivered>,
}

/// How many events may wait for the JavaScript thread. Past it, delivering the next one
/// waits: a cell printing a gigabyte is slowed to the pace of `onEvent` instead of piling
/// its output up in the host's memory.
const EVENT_QUEUE: usize = 64;

/// A JavaScript callback taking `T` (a value, or `FnArgs` for several arguments).
pub(super) type Callback<T> =
    ThreadsafeFunction<T, UnknownReturnValue, T, Status, false, false, EVENT_QUEUE>;

/// Makes a [`Callback`] of a JavaScript function.
pub(super) fn callback<T: 'static + JsValuesTupleIntoVec>(
    f: Function<T, UnknownReturnValue>,
) -> Result<Callback<T>> {
    f.build_threadsafe_function::<T>()
        .callee_handled::<false>()
        .max_queue_size::<EVENT_QUEUE>()
        .build()
}

#[derive(Default)]
struct Delivered {
    count: std::sync::atomic::AtomicU64,
    notify: tokio::sync::Notify,
    /// The message of the callback's first throw.
    first_throw: std::sync::OnceLock<String>,
}

impl<T: 'static + JsValuesTupleIntoVec> EventSink<T> {
    pub(super) fn new(callback: Option<Callback<T>>) -> Self {
        Self {
            callback,
            sent: 0,
            delivered: Arc::default(),
        }
    }

    pub(super) fn push(&mut self, value: T) {
        let Some(callback) = &self.callback else {
            return;
        };
        let delivered = self.delivered.clone();
        let call = move || {
            // The throw arrives here as `Err` (already cleared from the JavaScript
            // thread); returning `Ok` keeps it from being rethrown as a fatal exception.
            callback.call_with_return_value(
                value,
                ThreadsafeFunctionCallMode::Blocking,
                move |returned, _| {
                    if let Err(thrown) = returned {
                        let message = match thrown.reason.as_str() {
                            "" => "(no message)".to_string(),
                            reason => reason.to_string(),
                        };
                        let _ = delivered.first_throw.set(message);
                    }
                    delivered.count.fetch_add(1, Ordering::SeqCst);
                    delivered.notify.notify_waiters();
                    Ok(())
                },
            )
        };
        // Blocking: with the queue full this waits until JavaScript has taken events off
        // it. The runtime has one worker, so the wait is moved off it: other kernels'
        // frames and timers go on meanwhile. (Fewer than EVENT_QUEUE events not yet
        // returned from the callback means the queue has room and the call returns at once.)
        let in_flight = self.sent - self.delivered.count.load(Ordering::SeqCst);
        let status = if in_flight >= EVENT_QUEUE as u64 {
            tokio::task::block_in_place(call)
        } else {
            call()
        };
        if status == Status::Ok {
            self.sent += 1;
        }
    }

    /// Waits until every event has been delivered; the message of the callback's first
    /// throw, if it threw.
    pub(super) async fn finish(self) -> Option<String> {
        loop {
            let notified = self.delivered.notify.notified();
            if self.delivered.count.load(Ordering::SeqCst) >= self.sent {
                break;
            }
            notified.await;
        }
        self.delivered.first_throw.get().cloned()
    }
}

/// The notice in an `EvalResult` for an `onEvent` that threw.
pub(super) fn on_event_notice(message: &str) -> String {
    format!("onEvent threw: {message}; later events were still delivered")
}
