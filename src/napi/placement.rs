//! The pool's placement options: `launchers` with `placement`, or the host's `launcherFor`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use serde_json::Value;

use super::delivery::{settled_callback, SettledCallback};
use crate::error::KernelError;
use crate::session::placement::{HostAnswer, LauncherFor, Order, Placement, SessionRef};
use crate::start::launcher::Launcher;

fn invalid(name: &'static str, reason: impl Into<String>) -> KernelError {
    KernelError::InvalidArgument {
        name,
        reason: reason.into(),
    }
}

/// The placement the options ask for, if any; `shell` is `kernel.launcherShell`.
pub(super) fn read_placement(
    env: &Env,
    launchers: Option<Vec<Vec<String>>>,
    placement: Option<String>,
    launcher_for: Option<FunctionRef<Value, Unknown<'static>>>,
    shell: Option<bool>,
) -> std::result::Result<Option<Placement>, KernelError> {
    let order = match placement.as_deref() {
        None | Some("round-robin") => Order::RoundRobin,
        Some("least-loaded") => Order::LeastLoaded,
        Some(other) => {
            return Err(invalid(
                "placement",
                format!("expected 'round-robin' or 'least-loaded', got '{other}'"),
            ))
        }
    };
    match (launchers, launcher_for) {
        (Some(_), Some(_)) => Err(invalid(
            "launcherFor",
            "give `launchers` or `launcherFor`, not both",
        )),
        (Some(list), None) => {
            if list.is_empty() {
                return Err(invalid(
                    "launchers",
                    "must hold at least one launcher (an argv prefix); leave it out to run every session on `kernel.launcher`, or here",
                ));
            }
            let launchers = list
                .into_iter()
                .enumerate()
                .map(|(i, argv)| {
                    Launcher::new(argv, shell).map_err(|err| match err {
                        KernelError::InvalidArgument { reason, .. } => {
                            invalid("launchers", format!("[{i}] {reason}"))
                        }
                        other => other,
                    })
                })
                .collect::<std::result::Result<_, _>>()?;
            Ok(Some(Placement::Launchers { launchers, order }))
        }
        (None, launcher_for) if placement.is_some() => Err(invalid(
            "placement",
            if launcher_for.is_some() {
                "applies to `launchers`; `launcherFor` decides by itself"
            } else {
                "applies to `launchers`, which is not given"
            },
        )),
        (None, None) => Ok(None),
        (None, Some(f)) => Ok(Some(Placement::Host(JsLauncherFor::shared(env, &f)?))),
    }
}

/// `launcherFor`, run on the JavaScript thread.
struct JsLauncherFor {
    /// Behind [`SETTLE_LAUNCHER_FOR`]. Weak: an idle pool must not keep the host's event
    /// loop alive.
    launcher_for: Arc<SettledCallback>,
}

/// Wraps `launcherFor` so that whatever it does settles one Promise: of `'null'` for
/// `undefined` or `null`, of the JSON of a fresh array for an array of strings; rejected
/// with `threw: <message>` for a throw or rejection, and with what it returned for
/// anything else. Plain JavaScript, as the bridge's wrapper, so a hostile value (a
/// throwing getter, a revoked Proxy) is settled by the language's own rules.
const SETTLE_LAUNCHER_FOR: &str = r#"(function settleLauncherFor(launcherFor) {
  const describe = (e) => {
    try { return e instanceof Error ? String(e.message) : String(e) } catch { return 'an unprintable value' }
  }
  const what = (v) => {
    try {
      if (Array.isArray(v)) return 'an array that is not all strings'
      return v === null ? 'null' : typeof v === 'object' ? 'an object' : `a ${typeof v}`
    } catch { return 'a value that cannot be read' }
  }
  return function placeSession(session) {
    return new Promise((resolve) => resolve(launcherFor(session))).then(
      (value) => {
        if (value === undefined || value === null) return 'null'
        let argv
        try {
          argv = Array.isArray(value) ? Array.from(value) : undefined
        } catch (e) {
          throw new Error(`returned an array that cannot be read: ${describe(e)}`)
        }
        if (argv === undefined || !argv.every((word) => typeof word === 'string')) {
          throw new Error(`returned ${what(value)}; it must return an argv prefix (an array of strings), or undefined or null for the pool's default`)
        }
        return JSON.stringify(argv)
      },
      (e) => { throw new Error(`threw: ${describe(e)}`) })
  }
})"#;

impl JsLauncherFor {
    fn shared(
        env: &Env,
        launcher_for: &FunctionRef<Value, Unknown<'static>>,
    ) -> std::result::Result<Arc<dyn LauncherFor>, KernelError> {
        let settled = settled_callback(env, launcher_for, SETTLE_LAUNCHER_FOR)
            .map_err(|e| invalid("launcherFor", e.reason.clone()))?;
        Ok(Arc::new(JsLauncherFor {
            launcher_for: settled,
        }))
    }
}

impl LauncherFor for JsLauncherFor {
    fn launcher_for(
        &self,
        session: SessionRef,
    ) -> Pin<Box<dyn Future<Output = HostAnswer> + Send>> {
        let mut key = serde_json::Map::new();
        // Left out when unknown, as the type declares them optional.
        for (field, value) in [
            ("sessionId", session.session_id),
            ("sessionFile", session.session_file),
            ("ownerId", session.owner_id),
        ] {
            if let Some(value) = value {
                key.insert(field.into(), Value::String(value));
            }
        }
        let launcher_for = self.launcher_for.clone();
        Box::pin(async move {
            let json = launcher_for
                .call_async_catch(Value::Object(key))
                .await
                .map_err(|e| e.reason.clone())?
                .await
                .map_err(|e| e.reason.clone())?;
            serde_json::from_str(&json)
                .map_err(|e| format!("returned a value that could not be read: {e}"))
        })
    }
}
