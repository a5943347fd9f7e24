//! The runner's calls that the host answers itself: the session's kv store (a cell never
//! opens the store's files), and `read()`/`write()` of the schemes `uriRoots` maps to
//! directories of the host's.

use std::path::PathBuf;

use serde_json::Value;

use crate::store::uri_files::{too_large_to_write, Refused, MAX_BYTES};
use crate::store::uri_roots::UriRoots;

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

/// The bridge calls of the prelude's `read()` and `write()` of a `scheme://` path. The
/// host answers them from a `uriRoots` root when the scheme has one; an unmapped read is
/// passed to `onCall` as the `read` call it always was, and an unmapped write refused.
/// Never passed on under these names: a host tool named `read` or `write` (`tool.write(...)`)
/// keeps its own calls.
pub(super) const READ_CALL: &str = "__pykernel.read";
pub(super) const WRITE_CALL: &str = "__pykernel.write";

/// A `__pykernel.read` call: `{path, offset?, limit?}` (offset 1-based, in lines).
pub(super) struct UriRead {
    pub(super) path: String,
    pub(super) first: u64,
    pub(super) limit: Option<u64>,
}

impl UriRead {
    pub(super) fn parse(args: &Value) -> std::result::Result<Self, String> {
        let path = args
            .get("path")
            .and_then(Value::as_str)
            .ok_or("read needs a path")?;
        let number = |key| match args.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or(format!("read's {key} must be a whole number, got {v}")),
        };
        Ok(Self {
            path: path.to_string(),
            first: number("offset")?.unwrap_or(1).max(1),
            limit: number("limit")?,
        })
    }

    /// The `read` call a host's `onCall` gets for it: the line range appended to the path
    /// as `:<first>-[<last>]`, as the prelude has always sent it.
    pub(super) fn host_call(&self) -> Value {
        let mut path = self.path.clone();
        if self.first > 1 || self.limit.is_some() {
            let last = self.limit.map_or(String::new(), |n| {
                // Saturating: both numbers are the cell's, up to u64::MAX.
                self.first.saturating_add(n.max(1) - 1).to_string()
            });
            path.push_str(&format!(":{}-{last}", self.first));
        }
        serde_json::json!({ "path": path })
    }

    /// The answer from `root` (blocking IO): `{text}`, or `{refused}`.
    pub(super) fn answer(&self, roots: &UriRoots) -> Option<Value> {
        let (root, rest) = roots.find(&self.path)?;
        Some(
            match crate::store::uri_files::read(root, &self.path, rest, self.first, self.limit) {
                Ok(text) => serde_json::json!({ "text": text }),
                Err(refused) => refusal(refused),
            },
        )
    }
}

/// A `__pykernel.write` call, `{path, content, encoding: "utf-8" | "base64"}`, answered
/// from its root (blocking IO): `{path (the uri, never the host's path), bytes}`, or
/// `{refused}`.
pub(super) fn uri_write(roots: &UriRoots, args: &Value) -> std::result::Result<Value, String> {
    let path = args
        .get("path")
        .and_then(Value::as_str)
        .ok_or("write needs a path")?;
    let content = args
        .get("content")
        .and_then(Value::as_str)
        .ok_or("write needs its content as a string")?;
    let Some((root, rest)) = roots.find(path) else {
        let scheme = path.split_once("://").map_or(path, |(s, _)| s);
        let mapped = match roots.schemes() {
            s if s.is_empty() => "none is mapped".to_string(),
            s => format!("mapped: {}", s.join(", ")),
        };
        return Ok(refusal(Refused {
            exception: "ValueError",
            message: format!(
                "write() takes a local path (or file://), or a scheme the host maps to a directory ({mapped}), not {path:?}: the host maps '{scheme}' with the option uriRoots: {{ {scheme}: '/abs/dir' }} (on the kernel, or per request)"
            ),
        }));
    };
    // Before decoding, so a cell's oversized content is never copied or decoded.
    let encoding = args.get("encoding").and_then(Value::as_str);
    let most = match encoding {
        Some("base64") => base64_len(MAX_BYTES),
        _ => MAX_BYTES,
    };
    if content.len() > most {
        let decoded = match encoding {
            Some("base64") => content.len() / 4 * 3,
            _ => content.len(),
        };
        return Ok(refusal(too_large_to_write(path, decoded)));
    }
    let bytes = match encoding {
        Some("base64") => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(content)
                .map_err(|e| format!("write's content is not base64: {e}"))?
        }
        Some("utf-8") | None => content.as_bytes().to_vec(),
        Some(other) => {
            return Err(format!(
                "write's encoding must be utf-8 or base64, not {other:?}"
            ))
        }
    };
    Ok(
        match crate::store::uri_files::write(root, path, rest, &bytes) {
            Ok(()) => serde_json::json!({
                "path": path,
                "bytes": bytes.len(),
            }),
            Err(refused) => refusal(refused),
        },
    )
}

/// The length of `bytes` bytes in padded base64.
fn base64_len(bytes: usize) -> usize {
    bytes.div_ceil(3) * 4
}

fn refusal(refused: Refused) -> Value {
    serde_json::json!({"refused": {"exception": refused.exception, "message": refused.message}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unmapped_read_reaches_the_host_as_it_always_did() {
        let read = |args| UriRead::parse(&args).unwrap().host_call();
        assert_eq!(
            read(json!({"path": "mcp://s/r"})),
            json!({"path": "mcp://s/r"})
        );
        assert_eq!(
            read(json!({"path": "mcp://s/r", "offset": 3, "limit": 2})),
            json!({"path": "mcp://s/r:3-4"})
        );
        assert_eq!(
            read(json!({"path": "mcp://s/r", "offset": 3})),
            json!({"path": "mcp://s/r:3-"})
        );
        assert_eq!(
            read(json!({"path": "mcp://s/r", "offset": 1, "limit": 5})),
            json!({"path": "mcp://s/r:1-5"})
        );
        assert!(UriRead::parse(&json!({"path": "x://", "offset": "2"})).is_err());
        // The largest numbers a cell can send: saturated, not overflowed.
        let max = u64::MAX;
        assert_eq!(
            read(json!({"path": "mcp://s/r", "offset": max, "limit": max})),
            json!({"path": format!("mcp://s/r:{max}-{max}")})
        );
        assert!(UriRead::answer(
            &UriRead::parse(&json!({"path": "x://a"})).unwrap(),
            &UriRoots::default()
        )
        .is_none());
    }

    #[test]
    fn a_write_round_trips_text_and_bytes_and_an_unmapped_scheme_names_the_option() {
        let dir = tempfile::tempdir().unwrap();
        let roots = UriRoots::new([("local".to_string(), dir.path().to_path_buf())]).unwrap();
        let answer = uri_write(
            &roots,
            &json!({"path": "local://t.txt", "content": "é\n", "encoding": "utf-8"}),
        )
        .unwrap();
        assert_eq!(answer["bytes"], 3);
        assert_eq!(
            answer["path"], "local://t.txt",
            "the uri, not the host's path"
        );
        let answer = uri_write(
            &roots,
            &json!({"path": "local://b.bin", "content": "AP8=", "encoding": "base64"}),
        )
        .unwrap();
        assert_eq!(answer["bytes"], 2);
        assert_eq!(std::fs::read(dir.path().join("b.bin")).unwrap(), [0u8, 255]);
        let read = UriRead::parse(&json!({"path": "local://t.txt"})).unwrap();
        assert_eq!(read.answer(&roots).unwrap(), json!({"text": "é\n"}));
        // No answer or refusal names the host's directory.
        std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap();
        let host_dir = dir.path().to_str().unwrap();
        for answer in [
            uri_write(&roots, &json!({"path": "local://etc/x", "content": "x"})).unwrap(),
            UriRead::parse(&json!({"path": "local://etc/passwd"}))
                .unwrap()
                .answer(&roots)
                .unwrap(),
            UriRead::parse(&json!({"path": "local://nope/x"}))
                .unwrap()
                .answer(&roots)
                .unwrap(),
        ] {
            let text = answer.to_string();
            assert!(answer.get("refused").is_some(), "{text}");
            assert!(!text.contains(host_dir), "{text}");
        }

        // Too long is refused on its encoded length, before decoding: content that is not
        // even base64 is refused as too large, never decoded.
        let huge = "!".repeat(base64_len(MAX_BYTES) + 4);
        let answer = uri_write(
            &roots,
            &json!({"path": "local://big", "content": huge, "encoding": "base64"}),
        )
        .unwrap();
        assert_eq!(answer["refused"]["exception"], "ValueError", "{answer}");
        assert!(
            answer.to_string().contains("more than write() takes"),
            "{answer}"
        );
        use base64::Engine;
        let exact = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_BYTES]);
        assert_eq!(exact.len(), base64_len(MAX_BYTES));
        let answer = uri_write(
            &roots,
            &json!({"path": "local://big", "content": exact, "encoding": "base64"}),
        )
        .unwrap();
        assert_eq!(answer["bytes"], MAX_BYTES, "{answer}");

        let answer = uri_write(&roots, &json!({"path": "skill://x", "content": ""})).unwrap();
        assert_eq!(answer["refused"]["exception"], "ValueError");
        let message = answer["refused"]["message"].as_str().unwrap();
        assert!(
            message.contains("uriRoots: { skill: '/abs/dir' }")
                && message.contains("mapped: local"),
            "{message}"
        );
    }
}
