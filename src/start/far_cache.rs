//! What this host process knows of the far sides' caches: the sha256 of the runner's
//! bytecode each far side compiled, which the host then passes at the next start through
//! the same launcher and interpreter (see `runner/pykernel_far.py`).
//!
//! The far side keeps the runner and its bytecode in a cache of the far user's, where a
//! cell (the same user) can rewrite them. The runner is checked against the payload's
//! hash, which the host knows; the bytecode's hash only the far side's compile can tell,
//! so the host keeps what the compile said, in this process's memory only (a file of the
//! host's could be one a local launcher's cell can write), and the far side runs cached
//! bytecode only when it has the hash the host passed. A host process's first start
//! through a launcher thus has its far side compile once.

use std::collections::HashMap;
use std::sync::Mutex;

use super::launcher::{Launcher, PAYLOAD};

/// One far side, as far as the host can tell: how it is reached, which interpreter runs
/// there, and which runner it was sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    launcher: Launcher,
    interpreter: String,
    payload: String,
}

impl Key {
    fn new(launcher: &Launcher, interpreter: &str) -> Self {
        Self {
            launcher: launcher.clone(),
            interpreter: interpreter.to_string(),
            payload: PAYLOAD.sha256.clone(),
        }
    }
}

/// Bounds what an application that makes ever new launchers (one per container) keeps.
const MAX_KEPT: usize = 1024;

static VOUCHED: Mutex<Option<HashMap<Key, String>>> = Mutex::new(None);

/// The bytecode hash a far side reported for `launcher` and `interpreter`, if any.
pub fn vouched(launcher: &Launcher, interpreter: &str) -> Option<String> {
    VOUCHED
        .lock()
        .unwrap()
        .as_ref()?
        .get(&Key::new(launcher, interpreter))
        .cloned()
}

/// Keeps `sha256` (64 lowercase hex digits, else it is ignored) as the bytecode hash for
/// `launcher` and `interpreter`; whether it was kept.
pub fn remember(launcher: &Launcher, interpreter: &str, sha256: &str) -> bool {
    if !is_sha256(sha256) {
        return false;
    }
    let mut vouched = VOUCHED.lock().unwrap();
    let vouched = vouched.get_or_insert_with(HashMap::new);
    if vouched.len() >= MAX_KEPT {
        vouched.clear();
    }
    vouched.insert(Key::new(launcher, interpreter), sha256.to_string());
    true
}

fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A fresh secret for one link (32 hex digits): the far side's supervisor reads it from
/// the link after its kernel exists, so no kernel holds it, and echoes it in its
/// `farBytecode` frame, which a cell therefore cannot forge.
pub fn nonce() -> String {
    let mut bytes = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .is_err()
    {
        // No urandom: unpredictable enough to a cell that cannot see this process.
        use sha2::{Digest, Sha256};
        let seed = format!(
            "{:?} {} {:p}",
            std::time::SystemTime::now(),
            std::process::id(),
            &bytes
        );
        bytes.copy_from_slice(&Sha256::digest(seed.as_bytes())[..16]);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launcher(word: &str) -> Launcher {
        Launcher::new(vec!["env".into(), word.into()], None).unwrap()
    }

    #[test]
    fn a_hash_is_kept_per_launcher_and_interpreter_and_only_if_it_is_one() {
        let (a, b) = (launcher("A=far-cache-1"), launcher("B=far-cache-1"));
        let good = "ab".repeat(32);
        assert_eq!(vouched(&a, "python3"), None);
        assert!(remember(&a, "python3", &good));
        assert_eq!(vouched(&a, "python3"), Some(good.clone()));
        assert_eq!(vouched(&a, "/usr/bin/python3"), None, "another interpreter");
        assert_eq!(vouched(&b, "python3"), None, "another launcher");
        let shell = Launcher::new(a.argv.clone(), Some(true)).unwrap();
        assert_eq!(
            vouched(&shell, "python3"),
            None,
            "the same words through a shell"
        );
        // Anything but a sha256 in lowercase hex is refused and changes nothing.
        for bad in [
            "",
            "x",
            &"AB".repeat(32),
            &"ab".repeat(33),
            &format!("{} ", "a".repeat(63)),
        ] {
            assert!(!remember(&a, "python3", bad), "{bad:?}");
        }
        assert_eq!(vouched(&a, "python3"), Some(good));
        let newer = "cd".repeat(32);
        assert!(remember(&a, "python3", &newer));
        assert_eq!(vouched(&a, "python3"), Some(newer));
    }

    #[test]
    fn nonces_are_fresh_hex() {
        let (x, y) = (nonce(), nonce());
        assert_eq!(x.len(), 32);
        assert!(x.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(x, y);
    }
}
