//! The runner's calls that the host answers itself: the session's kv store (a cell never
//! opens the store's files).

use std::path::PathBuf;

use serde_json::Value;

/// Where a session's kv store is kept on the host.
#[derive(Clone)]
pub(super) struct KvHome {
    pub(super) artifacts_dir: PathBuf,
    pub(super) prefix: String,
    pub(super) session_id: String,
}

/// The bridge call by which a kernel's `kv` reaches the host's store (every kernel with a
/// store: a cell never opens the store's files). Answered here, never passed to the
/// host's `onCall`.
pub(super) const KV_CALL: &str = "__pykernel.kv";

/// One `kv` operation on the host's store: `{op: get|set|delete|list, key?, value?}`.
/// The store's own refusals come back as `{refused: {code, message}}`, so the cell
/// raises what it would for them (a limit is a `ValueError`); `Err` is for a call that
/// makes no sense.
pub(super) fn kv_call(home: &KvHome, args: &Value) -> std::result::Result<Value, String> {
    let key = || args.get("key").and_then(Value::as_str).unwrap_or_default();
    let answer =
        crate::store::kv::KvStore::open(&home.artifacts_dir, &home.prefix, &home.session_id)
            .and_then(|store| match args.get("op").and_then(Value::as_str) {
                Some("get") => store.get(key()).map(|v| {
                    // Absent and null differ: a missing key comes back as no `value` at all.
                    let mut found = serde_json::Map::new();
                    if let Some(v) = v {
                        found.insert("value".into(), v);
                    }
                    Some(Value::Object(found))
                }),
                Some("set") => store
                    .set(key(), args.get("value").cloned().unwrap_or(Value::Null))
                    .map(|()| Some(Value::Null)),
                Some("delete") => store.delete(key()).map(|gone| Some(Value::Bool(gone))),
                Some("list") => store
                    .list()
                    .map(|keys| Some(Value::Array(keys.into_iter().map(Value::String).collect()))),
                _ => Ok(None),
            });
    match answer {
        Ok(Some(value)) => Ok(value),
        Ok(None) => Err(format!("unknown kv operation {:?}", args.get("op"))),
        Err(e) => Ok(serde_json::json!({"refused": {"code": e.code(), "message": e.to_string()}})),
    }
}
