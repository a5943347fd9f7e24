//! The session key-value store (SPEC 12), shared by JavaScript (`KvStore`) and Python
//! (`kv` in the prelude): one JSON file `{"version":1,"values":{...}}` per session under
//! `<artifactsDir>/kernel-store/`.
//!
//! Every change happens under an exclusive `flock` on `<file>.lock` (Python's `fcntl.flock`
//! takes the same lock) and lands by rename, so concurrent writers of different keys both
//! land and a reader never sees half a file. A file of an unknown version or that does not
//! parse is refused, never overwritten: it may hold someone's data.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub const MAX_KEY_CHARS: usize = 256;
pub const MAX_VALUE_BYTES: usize = 256 * 1024;
pub const MAX_STORE_BYTES: usize = 4 * 1024 * 1024;
const VERSION: u64 = 1;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KvError {
    #[error("invalid kv key {key:?}: {reason}")]
    BadKey { key: String, reason: &'static str },
    #[error("kv value for {key:?} is {size} bytes encoded; the limit is {MAX_VALUE_BYTES} bytes (256 KiB). Store less, or write a file and keep its path.")]
    ValueTooLarge { key: String, size: usize },
    #[error("the kv store would grow to {size} bytes; the limit is {MAX_STORE_BYTES} bytes (4 MiB). Delete keys you no longer need.")]
    StoreFull { size: usize },
    #[error("the kv store {path} is not a version-{VERSION} store ({reason}); it was left untouched. Move it aside to start a new one.")]
    Unreadable { path: PathBuf, reason: String },
    #[error("kv store {path}: {reason}")]
    Io { path: PathBuf, reason: String },
}

impl KvError {
    pub fn code(&self) -> &'static str {
        match self {
            KvError::BadKey { .. } => "ERR_KV_KEY",
            KvError::ValueTooLarge { .. } | KvError::StoreFull { .. } => "ERR_KV_LIMIT",
            KvError::Unreadable { .. } => "ERR_KV_CORRUPT",
            KvError::Io { .. } => "ERR_IO",
        }
    }
}

type Result<T> = std::result::Result<T, KvError>;

/// Where a session's store lives: `<dir>/kernel-store/<prefix>_<sha256(sessionId)>.json`.
pub fn store_path(artifacts_dir: &Path, prefix: &str, session_id: &str) -> PathBuf {
    let digest: String = Sha256::digest(session_id.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    artifacts_dir
        .join("kernel-store")
        .join(format!("{prefix}_{digest}.json"))
}

/// The file name prefix for an env prefix: `PYKERNEL_` -> `pykernel`.
pub fn file_prefix(env_prefix: &str) -> String {
    let trimmed = env_prefix.trim_end_matches('_').to_ascii_lowercase();
    if trimmed.is_empty() {
        "kv".into()
    } else {
        trimmed
    }
}

pub fn check_key(key: &str) -> Result<()> {
    let bad = |reason| {
        Err(KvError::BadKey {
            key: key.chars().take(80).collect(),
            reason,
        })
    };
    let chars = key.chars().count();
    if chars == 0 {
        return bad("keys are 1 to 256 characters");
    }
    if chars > MAX_KEY_CHARS {
        return bad("keys are 1 to 256 characters");
    }
    if key.contains(['/', '\\', '\0']) {
        return bad("keys may not contain '/', '\\' or NUL");
    }
    Ok(())
}

pub struct KvStore {
    path: PathBuf,
}

impl KvStore {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn get(&self, key: &str) -> Result<Option<Value>> {
        check_key(key)?;
        let _lock = self.lock()?;
        Ok(self.read()?.remove(key))
    }

    pub fn list(&self) -> Result<Vec<String>> {
        let _lock = self.lock()?;
        let mut keys: Vec<_> = self.read()?.keys().cloned().collect();
        keys.sort();
        Ok(keys)
    }

    pub fn set(&self, key: &str, value: Value) -> Result<()> {
        check_key(key)?;
        let size = serde_json::to_vec(&value)
            .map(|v| v.len())
            .unwrap_or(usize::MAX);
        if size > MAX_VALUE_BYTES {
            return Err(KvError::ValueTooLarge {
                key: key.to_string(),
                size,
            });
        }
        let _lock = self.lock()?;
        let mut values = self.read()?;
        values.insert(key.to_string(), value);
        self.write(values)
    }

    /// Whether the key was there.
    pub fn delete(&self, key: &str) -> Result<bool> {
        check_key(key)?;
        let _lock = self.lock()?;
        let mut values = self.read()?;
        let had = values.remove(key).is_some();
        if had {
            self.write(values)?;
        }
        Ok(had)
    }

    fn io(&self, err: impl std::fmt::Display) -> KvError {
        KvError::Io {
            path: self.path.clone(),
            reason: err.to_string(),
        }
    }

    fn lock(&self) -> Result<Flock<fs::File>> {
        let dir = self.path.parent().expect("the store path has a directory");
        fs::create_dir_all(dir).map_err(|e| self.io(e))?;
        let mut lock_path = self.path.clone().into_os_string();
        lock_path.push(".lock");
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(lock_path)
            .map_err(|e| self.io(e))?;
        Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| self.io(errno))
    }

    fn read(&self) -> Result<Map<String, Value>> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
            Err(e) => return Err(self.io(e)),
        };
        let unreadable = |reason: String| KvError::Unreadable {
            path: self.path.clone(),
            reason,
        };
        let doc: Value = serde_json::from_slice(&bytes)
            .map_err(|e| unreadable(format!("it is not valid JSON: {e}")))?;
        match doc.get("version").and_then(Value::as_u64) {
            Some(VERSION) => {}
            Some(other) => return Err(unreadable(format!("it says version {other}"))),
            None => return Err(unreadable("it has no version".into())),
        }
        match doc {
            Value::Object(mut map) => match map.remove("values") {
                Some(Value::Object(values)) => Ok(values),
                _ => Err(unreadable("its \"values\" is not an object".into())),
            },
            _ => Err(unreadable("it is not an object".into())),
        }
    }

    fn write(&self, values: Map<String, Value>) -> Result<()> {
        let doc = serde_json::json!({ "version": VERSION, "values": values });
        let bytes = serde_json::to_vec(&doc).map_err(|e| self.io(e))?;
        if bytes.len() > MAX_STORE_BYTES {
            return Err(KvError::StoreFull { size: bytes.len() });
        }
        let dir = self.path.parent().expect("the store path has a directory");
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| self.io(e))?;
        tmp.write_all(&bytes).map_err(|e| self.io(e))?;
        tmp.persist(&self.path).map_err(|e| self.io(e.error))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store() -> (tempfile::TempDir, KvStore) {
        let dir = tempfile::tempdir().unwrap();
        let path = store_path(dir.path(), "pykernel", "session-1");
        (dir, KvStore::new(path))
    }

    #[test]
    fn round_trip_list_delete() {
        let (_dir, kv) = store();
        assert_eq!(kv.get("a").unwrap(), None);
        kv.set("a", json!({"n": [1, 2]})).unwrap();
        kv.set("b", json!("text")).unwrap();
        assert_eq!(kv.get("a").unwrap(), Some(json!({"n": [1, 2]})));
        assert_eq!(kv.list().unwrap(), vec!["a", "b"]);
        assert!(kv.delete("a").unwrap());
        assert!(!kv.delete("a").unwrap());
        let doc: Value = serde_json::from_slice(&fs::read(kv.path()).unwrap()).unwrap();
        assert_eq!(doc, json!({"version": 1, "values": {"b": "text"}}));
    }

    #[test]
    fn the_path_hashes_the_session_id() {
        let p = store_path(Path::new("/a"), "pykernel", "s");
        assert_eq!(
            p,
            Path::new("/a/kernel-store/pykernel_043a718774c572bd8a25adbeb1bfcd5c0256ae11cecf9f9c3f925d0e52beaf89.json")
        );
        assert_eq!(file_prefix("PYKERNEL_"), "pykernel");
    }

    #[test]
    fn keys_and_sizes_are_checked() {
        let (_dir, kv) = store();
        for key in ["", "a/b", "a\\b", "a\0b"] {
            assert_eq!(kv.set(key, json!(1)).unwrap_err().code(), "ERR_KV_KEY");
        }
        assert!(check_key(&"k".repeat(256)).is_ok());
        assert!(check_key(&"k".repeat(257)).is_err());
        let big = "x".repeat(300 * 1024);
        assert_eq!(
            kv.set("big", json!(big)).unwrap_err().code(),
            "ERR_KV_LIMIT"
        );
        let chunk = "y".repeat(200 * 1024);
        let mut hit_limit = false;
        for i in 0..30 {
            if let Err(e) = kv.set(&format!("k{i}"), json!(chunk)) {
                assert!(matches!(e, KvError::StoreFull { .. }));
                hit_limit = true;
                break;
            }
        }
        assert!(hit_limit);
        assert!(fs::metadata(kv.path()).unwrap().len() as usize <= MAX_STORE_BYTES);
    }

    #[test]
    fn corrupt_and_unknown_versions_are_refused_and_kept() {
        let (_dir, kv) = store();
        fs::create_dir_all(kv.path().parent().unwrap()).unwrap();
        for content in ["{not json", r#"{"version":2,"values":{}}"#, r#"[1]"#] {
            fs::write(kv.path(), content).unwrap();
            let err = kv.set("a", json!(1)).unwrap_err();
            assert_eq!(err.code(), "ERR_KV_CORRUPT", "{content}");
            assert!(err.to_string().contains("left untouched"));
            assert_eq!(fs::read_to_string(kv.path()).unwrap(), content);
        }
    }

    #[test]
    fn concurrent_writers_of_different_keys_all_land() {
        let (_dir, kv) = store();
        let path = kv.path().to_path_buf();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let kv = KvStore::new(path);
                    for i in 0..50 {
                        kv.set(&format!("t{t}-{i}"), json!(i)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(kv.list().unwrap().len(), 200);
    }
}
