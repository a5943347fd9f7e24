//! Delivering a request's values to a JavaScript callback (`onEvent`), in order and with
//! backpressure, whether the callback is synchronous or returns a Promise.
//!
//! The callback is wrapped in [`DELIVER_IN_ORDER`] (plain JavaScript): a value is handed to
//! it only once the Promise returned for the value before has settled, so an async
//! consumer (awaiting a UI write) sees its values one at a time and in order. Values that
//! arrive meanwhile wait in the wrapper. Every value counts as in flight from the moment
//! it is sent until its callback returned (synchronous) or its Promise settled, and at
//! most [`EVENT_QUEUE`] are in flight: past that, sending the next one waits, so the
//! kernel is slowed to the consumer's pace; its output is never dropped, and never held
//! without bound. A synchronous callback pays one extra JavaScript call per value.
//!
//! A throw, or a rejected Promise, neither fails the request nor stops later values; the
//! first one's message is kept for the result.
//!
//! # Plugging in another callback
//!
//! For a callback `onX(value)` of a request (`T` is its argument: a value, or `FnArgs` for
//! several):
//!
//! 1. read it with `OptionReader::callback::<T>("onX")` (checks it is a function, builds
//!    the wrapper);
//! 2. make an [`EventSink::new`] of it inside the request's future, and `push` each value
//!    from the closure that receives them (values of one sink stay in order; two sinks
//!    are independent of each other);
//! 3. `finish().await` the sink before the result settles: the request then never
//!    resolves before the callback's last Promise; a message it returns goes into the
//!    result, e.g. as [`handler_threw_notice`]`("onX", message)`.
//!
//! A Promise that never settles holds its request: the cell stalls once
//! [`EVENT_QUEUE`] values are waiting, and the result waits for it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};
use serde_json::Value;

use crate::eval::executor;

/// How many values may be in flight (sent, and their callback not yet returned or its
/// Promise not yet settled). Past it, sending the next one waits: a cell printing a
/// gigabyte is slowed to the pace of `onEvent` instead of piling its output up in the
/// host's memory.
const EVENT_QUEUE: usize = 64;

/// How often a send waiting for room checks that JavaScript is still there to make it.
const ENVIRONMENT_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// Wraps a callback so that each value is handed to it only after the Promise its
/// previous value returned (if any) settled. `deliver(...)` returns `true` when the
/// callback ran and returned a non-thenable without throwing; otherwise it calls
/// `settled(message?)` exactly once for that value, now or later (`message` is set when
/// the callback threw or its Promise rejected). Plain JavaScript, like the bridge's
/// wrapper, so a hostile return (a thenable whose `then` throws, or that calls back
/// twice) is handled by the language's own rules.
const DELIVER_IN_ORDER: &str = r#"(function deliverInOrder(handler, settled) {
  const describe = (e) => {
    try { return e instanceof Error ? String(e.message) : String(e) } catch { return 'an unprintable value' }
  }
  const DONE = 0, REPORTED = 1, PENDING = 2
  const waiting = []
  let busy = false
  function call(args) {
    let returned, then
    try {
      returned = Reflect.apply(handler, undefined, args)
      if ((typeof returned !== 'object' || returned === null) && typeof returned !== 'function') return DONE
      then = returned.then
      if (typeof then !== 'function') return DONE
    } catch (e) {
      settled(describe(e))
      return REPORTED
    }
    busy = true
    let once = false
    const after = (message) => {
      if (once) return
      once = true
      busy = false
      settled(message)
      while (!busy && waiting.length > 0) {
        if (call(waiting.shift()) === DONE) settled(undefined)
      }
    }
    try {
      Reflect.apply(then, returned, [() => after(undefined), (e) => after(describe(e))])
    } catch (e) {
      after(describe(e))
    }
    return PENDING
  }
  return function deliver() {
    if (busy) {
      waiting.push(Array.prototype.slice.call(arguments))
      return false
    }
    return call(arguments) === DONE
  }
})"#;

/// A JavaScript callback taking `T` (a value, or `FnArgs` for several arguments), wrapped
/// for in-order delivery; made by [`callback`].
pub(super) struct Callback<T: 'static + JsValuesTupleIntoVec> {
    deliver: ThreadsafeFunction<T, bool, T, Status, false, false, EVENT_QUEUE>,
    handled: Arc<Handled>,
}

type Factory<'env, T> = Function<
    'env,
    FnArgs<(
        Function<'env, T, UnknownReturnValue>,
        Function<'env, Option<String>, ()>,
    )>,
    Function<'env, T, bool>,
>;

/// Wraps a JavaScript function for [`EventSink`].
pub(super) fn callback<T: 'static + JsValuesTupleIntoVec>(
    env: &Env,
    f: Function<T, UnknownReturnValue>,
) -> Result<Callback<T>> {
    let handled = Arc::new(Handled::default());
    let on_settled = handled.clone();
    let settled =
        env.create_function_from_closure::<Option<String>, (), _>("settled", move |ctx| {
            on_settled.one(ctx.get::<Option<String>>(0)?);
            Ok(())
        })?;
    let factory: Factory<T> = env.run_script(DELIVER_IN_ORDER)?;
    let deliver = factory
        .call((f, settled).into())?
        .build_threadsafe_function::<T>()
        .callee_handled::<false>()
        .max_queue_size::<EVENT_QUEUE>()
        .build()?;
    Ok(Callback { deliver, handled })
}

/// What JavaScript has done with the values sent so far.
#[derive(Default)]
struct Handled {
    count: AtomicU64,
    /// Wakes [`EventSink::finish`].
    notify: tokio::sync::Notify,
    /// Wakes a [`EventSink::push`] waiting for room; signalled only while `waiting`.
    room: Condvar,
    room_lock: Mutex<()>,
    waiting: AtomicBool,
    /// The message of the callback's first throw or rejection.
    first_throw: OnceLock<String>,
}

impl Handled {
    /// One more value handled; `thrown` is the message if its callback threw or rejected.
    fn one(&self, thrown: Option<String>) {
        if let Some(message) = thrown {
            let message = match message.as_str() {
                "" => "(no message)".to_string(),
                _ => message,
            };
            let _ = self.first_throw.set(message);
        }
        self.count.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
        // Taking the lock orders this wake-up after the waiter's check of `count`, so it
        // cannot be lost; a synchronous callback with nobody waiting skips both.
        if self.waiting.load(Ordering::SeqCst) {
            drop(self.room_lock.lock());
            self.room.notify_all();
        }
    }

    /// Blocks until at least `count` values have been handled, or `gone()` says
    /// JavaScript never will (its environment is being torn down: a worker ending).
    fn wait_for(&self, count: u64, gone: impl Fn() -> bool) {
        let mut guard = self.room_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.waiting.store(true, Ordering::SeqCst);
        while self.count.load(Ordering::SeqCst) < count && !gone() {
            guard = self
                .room
                .wait_timeout(guard, ENVIRONMENT_CHECK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        self.waiting.store(false, Ordering::SeqCst);
    }
}

/// Delivers one request's values to its callback as they come, and knows when JavaScript
/// has handled them all: `finish` waits for the last one, so the request's promise never
/// resolves before its callbacks (and their Promises). See the module's documentation.
pub(super) struct EventSink<T: 'static + JsValuesTupleIntoVec> {
    callback: Option<Callback<T>>,
    sent: u64,
}

impl<T: 'static + JsValuesTupleIntoVec> EventSink<T> {
    pub(super) fn new(callback: Option<Callback<T>>) -> Self {
        Self { callback, sent: 0 }
    }

    pub(super) fn push(&mut self, value: T) {
        let Some(callback) = &self.callback else {
            return;
        };
        let handled = &callback.handled;
        // With EVENT_QUEUE values in flight, wait for JavaScript to handle one. The
        // runtime has one worker, so the wait is moved off it: other kernels' frames and
        // timers go on meanwhile.
        if self.sent - handled.count.load(Ordering::SeqCst) >= EVENT_QUEUE as u64 {
            let room_at = self.sent + 1 - EVENT_QUEUE as u64;
            let deliver = &callback.deliver;
            tokio::task::block_in_place(|| handled.wait_for(room_at, || deliver.aborted()));
        }
        let on_return = handled.clone();
        // Fewer than EVENT_QUEUE values in flight means the queue has room, so this does
        // not block.
        let status = callback.deliver.call_with_return_value(
            value,
            ThreadsafeFunctionCallMode::Blocking,
            move |returned, _| {
                match returned {
                    Ok(true) => on_return.one(None),
                    // The wrapper calls `settled` for this value.
                    Ok(false) => {}
                    // The wrapper itself threw (it catches the callback's throws, so only
                    // something like a stack overflow): the value is done. The throw
                    // arrives here already cleared; returning `Ok` keeps it from being
                    // rethrown as a fatal exception.
                    Err(thrown) => on_return.one(Some(thrown.reason.clone())),
                }
                Ok(())
            },
        );
        if status == Status::Ok {
            self.sent += 1;
        }
    }

    /// Waits until every value has been handled (every Promise settled); the message of
    /// the callback's first throw or rejection, if any.
    pub(super) async fn finish(self) -> Option<String> {
        let callback = self.callback?;
        let handled = &callback.handled;
        loop {
            let notified = handled.notify.notified();
            if handled.count.load(Ordering::SeqCst) >= self.sent {
                break;
            }
            notified.await;
        }
        handled.first_throw.get().cloned()
    }
}

/// The notice in an `EvalResult` for a callback (`onEvent`) that threw or rejected.
pub(super) fn handler_threw_notice(name: &str, message: &str) -> String {
    format!("{name} threw: {message}; later events were still delivered")
}

/// A host callback behind one of the settling wrappers (`settle`: JavaScript source of a
/// function that takes the callback and returns one whose every outcome is a Promise of
/// a JSON string), callable from any thread. Weak: it never keeps the event loop alive.
pub(super) type SettledCallback =
    ThreadsafeFunction<Value, Promise<String>, Value, Status, false, true>;

pub(super) fn settled_callback(
    env: &Env,
    callback: &FunctionRef<Value, Unknown<'static>>,
    settle: &str,
) -> Result<Arc<SettledCallback>> {
    let callback = callback.borrow_back(env)?;
    if callback.to_unknown().get_type()? != ValueType::Function {
        return Err(Error::new(Status::InvalidArg, "must be a function"));
    }
    let settle: Function<Function<Value, Unknown>, Function<Value, Promise<String>>> =
        env.run_script(settle)?;
    let settled = settle
        .call(callback)?
        .build_threadsafe_function::<Value>()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?;
    Ok(Arc::new(settled))
}

/// An `EvalResult` that also says that `onEvent` threw, if it did.
pub(super) fn with_on_event_error(
    mut result: executor::EvalResult,
    on_event_error: Option<String>,
) -> executor::EvalResult {
    if let Some(message) = on_event_error {
        result.add_notice(handler_threw_notice("onEvent", &message));
    }
    result
}
