//! The session key-value store (docs/python.md#prelude-helpers-the-host-bridge-and-the-kv-store), shared by JavaScript (`KvStore`) and Python
//! (`kv` in the prelude): one JSON file `{"version":1,"values":{...}}` per session under
//! `<artifactsDir>/kernel-store/`.
//!
//! Every change happens under an exclusive `flock` on `<file>.lock` (Python's `fcntl.flock`
//! takes the same lock) and lands by rename, so concurrent writers of different keys both
//! land and a reader never sees half a file. A file of an unknown version or that does not
//! parse is refused, never overwritten: it may hold someone's data.
//!
//! artifactsDir is often in a shared place (`/tmp/artifacts`), so before every use it and
//! `kernel-store/` must be real directories of ours that nobody else can write (created
//! 0700 when missing, see `safe_fs`), and the store, its lock and the temporary file are
//! never opened through a symlink: another local user cannot read the store, plant values
//! in it, or aim our writes at a file of their choosing.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::store::safe_fs::{self, Fault, Refusal};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub const MAX_KEY_CHARS: usize = 256;
pub const MAX_VALUE_BYTES: usize = 256 * 1024;
pub const MAX_STORE_BYTES: usize = 4 * 1024 * 1024;
/// How long a change waits for another writer's lock before `ERR_KV_BUSY`.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(2000);
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
    #[error("the kv store {path} stayed locked for {waited_ms} ms (a cell holding its lock?); nothing was read or written. Try again.")]
    Busy { path: PathBuf, waited_ms: u64 },
    #[error(transparent)]
    ArtifactsDir(#[from] Refusal),
}

impl KvError {
    pub fn code(&self) -> &'static str {
        match self {
            KvError::BadKey { .. } => "ERR_KV_KEY",
            KvError::ValueTooLarge { .. } | KvError::StoreFull { .. } => "ERR_KV_LIMIT",
            KvError::Unreadable { .. } => "ERR_KV_CORRUPT",
            KvError::Io { .. } => "ERR_IO",
            KvError::ArtifactsDir(_) => "ERR_ARTIFACTS_DIR",
            KvError::Busy { .. } => "ERR_KV_BUSY",
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

/// Makes `artifacts_dir` and its `kernel-store/` ready for a store (created 0700 when
/// missing), or says why they are not safe to use.
pub fn prepare_store_dir(artifacts_dir: &Path) -> std::result::Result<(), Refusal> {
    safe_fs::ensure_private_dir("artifactsDir", artifacts_dir)?;
    safe_fs::ensure_private_dir(
        "the kv store directory",
        &artifacts_dir.join("kernel-store"),
    )
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
    artifacts_dir: PathBuf,
    path: PathBuf,
}

impl KvStore {
    /// The store of `session_id` under `artifacts_dir`; refused at once when the directory
    /// is not safe to use (every operation checks it again).
    pub fn open(artifacts_dir: &Path, prefix: &str, session_id: &str) -> Result<Self> {
        prepare_store_dir(artifacts_dir)?;
        Ok(Self {
            artifacts_dir: artifacts_dir.to_path_buf(),
            path: store_path(artifacts_dir, prefix, session_id),
        })
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

    /// A symlink where a file of the store should be is refused, naming it.
    fn open_error(&self, what: &'static str, path: PathBuf, err: std::io::Error) -> KvError {
        if safe_fs::is_symlink_refusal(&err) {
            KvError::ArtifactsDir(Refusal {
                what,
                path,
                fault: Fault::Symlink,
            })
        } else {
            self.io(err)
        }
    }

    fn lock(&self) -> Result<Flock<fs::File>> {
        // Checked on every use: the directory may have been removed and made again by
        // someone else since the store was opened.
        prepare_store_dir(&self.artifacts_dir)?;
        let mut lock_path = self.path.clone().into_os_string();
        lock_path.push(".lock");
        let lock_path = PathBuf::from(lock_path);
        let file = safe_fs::open_nofollow(
            &lock_path,
            fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true),
        )
        .map_err(|e| self.open_error("the kv store lock", lock_path.clone(), e))?;
        // The host calls this on its JavaScript thread, and a cell can hold the lock as
        // long as it likes: wait a bounded time, never forever.
        let started = std::time::Instant::now();
        let mut file = file;
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(lock),
                Err((back, nix::errno::Errno::EWOULDBLOCK)) => {
                    if started.elapsed() >= LOCK_WAIT {
                        return Err(KvError::Busy {
                            path: self.path.clone(),
                            waited_ms: started.elapsed().as_millis() as u64,
                        });
                    }
                    file = back;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err((_, errno)) => return Err(self.io(errno)),
            }
        }
    }

    fn read(&self) -> Result<Map<String, Value>> {
        let opened = safe_fs::open_nofollow(&self.path, fs::OpenOptions::new().read(true));
        let mut file = match opened {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
            Err(e) => return Err(self.open_error("the kv store", self.path.clone(), e)),
        };
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| self.io(e))?;
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
        // tempfile creates with O_EXCL (never through a symlink) and mode 0600.
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| self.io(e))?;
        tmp.write_all(&bytes).map_err(|e| self.io(e))?;
        safe_fs::check_rename_target("the kv store", &self.path)?;
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
        let kv = KvStore::open(&dir.path().join("artifacts"), "pykernel", "session-1").unwrap();
        (dir, kv)
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
        // The documented limits, spelled out: a value of 256 KiB less its quotes fits.
        assert!(kv.set("edge", json!("v".repeat(256 * 1024 - 2))).is_ok());
        assert!(kv.delete("edge").unwrap());
        let chunk = "y".repeat(200 * 1024);
        let mut stored = 0;
        for i in 0..30 {
            if let Err(e) = kv.set(&format!("k{i}"), json!(chunk)) {
                assert!(matches!(e, KvError::StoreFull { .. }));
                break;
            }
            stored += 1;
        }
        // 20 values of 200 KiB (and their keys) fit in 4 MiB; the 21st does not.
        assert_eq!(stored, 20);
        assert!(fs::metadata(kv.path()).unwrap().len() as usize <= 4 * 1024 * 1024);
    }

    #[test]
    fn a_store_of_exactly_4_mib_is_allowed_and_one_byte_more_is_not() {
        let (_dir, kv) = store();
        for i in 0..16 {
            kv.set(&format!("f{i}"), json!("z".repeat(250 * 1024)))
                .unwrap();
        }
        kv.set("last", json!("")).unwrap();
        let size = fs::metadata(kv.path()).unwrap().len() as usize;
        let room = 4 * 1024 * 1024 - size;
        kv.set("last", json!("w".repeat(room))).unwrap();
        assert_eq!(
            fs::metadata(kv.path()).unwrap().len() as usize,
            4 * 1024 * 1024
        );
        let over = kv.set("last", json!("w".repeat(room + 1))).unwrap_err();
        assert!(matches!(over, KvError::StoreFull { size } if size == 4 * 1024 * 1024 + 1));
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
        let dir = kv.artifacts_dir.clone();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let kv = KvStore::open(&dir, "pykernel", "session-1").unwrap();
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
    #[test]
    fn a_loose_or_symlinked_artifacts_dir_is_refused_and_nothing_is_written_there() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let loose = base.path().join("artifacts");
        fs::create_dir(&loose).unwrap();
        fs::set_permissions(&loose, fs::Permissions::from_mode(0o777)).unwrap();
        let err = KvStore::open(&loose, "pykernel", "s").err().unwrap();
        assert_eq!(err.code(), "ERR_ARTIFACTS_DIR");
        assert!(
            err.to_string().starts_with(&format!(
                "artifactsDir {} is writable by group or others (mode 777)",
                loose.display()
            )),
            "{err}"
        );
        assert_eq!(fs::read_dir(&loose).unwrap().count(), 0);

        // A store opened while the directory was fine refuses it once it is loosened.
        let fine = base.path().join("fine");
        let kv = KvStore::open(&fine, "pykernel", "s").unwrap();
        let attacker = base.path().join("attacker");
        fs::create_dir(&attacker).unwrap();
        fs::remove_dir(fine.join("kernel-store")).unwrap();
        std::os::unix::fs::symlink(&attacker, fine.join("kernel-store")).unwrap();
        let err = kv.set("k", serde_json::json!("secret")).unwrap_err();
        assert_eq!(err.code(), "ERR_ARTIFACTS_DIR");
        assert!(err.to_string().contains("the kv store directory"), "{err}");
        assert_eq!(fs::read_dir(&attacker).unwrap().count(), 0);
    }

    #[test]
    fn a_symlinked_lock_or_store_is_never_followed() {
        let (dir, kv) = store();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let lock = PathBuf::from(format!("{}.lock", kv.path().display()));
        std::os::unix::fs::symlink(&victim, &lock).unwrap();
        let err = kv.set("k", json!(1)).unwrap_err();
        assert_eq!(err.code(), "ERR_ARTIFACTS_DIR");
        assert_eq!(
            err.to_string(),
            format!("the kv store lock {} is a symbolic link (never followed): remove it or choose another artifactsDir", lock.display())
        );
        fs::remove_file(&lock).unwrap();

        // A store planted as a link to a victim holding a valid store is neither read nor
        // replaced through.
        fs::write(&victim, r#"{"version":1,"values":{"stolen":1}}"#).unwrap();
        std::os::unix::fs::symlink(&victim, kv.path()).unwrap();
        for err in [
            kv.set("k", json!(1)).unwrap_err(),
            kv.get("stolen").unwrap_err(),
        ] {
            assert_eq!(err.code(), "ERR_ARTIFACTS_DIR");
            assert!(err.to_string().starts_with("the kv store "), "{err}");
        }
        assert_eq!(
            fs::read_to_string(&victim).unwrap(),
            r#"{"version":1,"values":{"stolen":1}}"#
        );
        assert!(fs::symlink_metadata(kv.path())
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
