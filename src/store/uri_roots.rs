//! Host-mapped URI schemes: `uriRoots: { local: '/abs/dir' }` makes `read("local://a/b.txt")`
//! and `write("local://a/b.txt", data)` in a cell files of that directory, read and
//! written by the host (the kernel's sandbox need not reach the directory). This file is
//! the option: scheme names checked, each root held open; [`uri_files`](super::uri_files)
//! reads and writes beneath one.
//!
//! Each root is opened once, when the option is read, and every later open goes beneath
//! that descriptor, never through the root's path again. Why: a cell that may write the
//! root's parent (the root inside the kernel's writable workspace, or beside a directory
//! it writes) could otherwise move an ancestor away and put a symlink in its place
//! (`mv data d2; ln -s /usr data`), and the host, reopening the path, would read and write
//! wherever the link leads. Held open, the root stays the directory the host named.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::errno::Errno;
use nix::sys::stat::Mode;

use super::beneath;

/// Schemes that already mean something: `artifact://` is the host's outputs, `file://` a
/// path of the kernel's own.
const RESERVED: &[&str] = &["artifact", "file"];
const MAX_SCHEME_CHARS: usize = 32;

/// Directories the host makes (the root, when missing, and those beneath it).
pub(super) const DIR_MODE: u32 = 0o700;

/// A root directory, held open since the option was read.
#[derive(Clone)]
pub struct Root {
    /// The path it had then: for the host's own messages, never opened again.
    path: PathBuf,
    fd: Arc<OwnedFd>,
    dev: u64,
    ino: u64,
}

impl Root {
    /// Opens `root` (absolute), taken as its real path now, so a symlink given as the
    /// root keeps meaning its target. A root that does not exist is made (0700, with its
    /// missing parents) beneath its nearest existing ancestor, one name at a time.
    fn pin(root: &Path) -> io::Result<Self> {
        let (path, fd) = match std::fs::canonicalize(root) {
            Ok(real) => {
                let fd = beneath::open_root(&real)?;
                (real, fd)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => make_root(root)?,
            Err(e) => return Err(e),
        };
        let stat = nix::sys::stat::fstat(fd.as_fd())?;
        Ok(Self {
            path,
            fd: Arc::new(fd),
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
        })
    }

    /// The descriptor every open beneath the root starts from.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Where the root was when the option was read (for the host, never for a cell).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the root directory has been removed since (nothing can be made in it).
    pub fn is_removed(&self) -> bool {
        nix::sys::stat::fstat(self.fd()).is_ok_and(|st| st.st_nlink == 0)
    }
}

/// The same directory, named the same way.
impl PartialEq for Root {
    fn eq(&self, other: &Self) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino) && self.path == other.path
    }
}

impl Eq for Root {}

impl fmt::Debug for Root {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Root").field(&self.path).finish()
    }
}

/// A missing root made beneath its nearest existing ancestor, opened once: the missing
/// names made as a write makes its directories ([`beneath::make_dirs_beneath`]), so no
/// name on the way is looked up twice. The new directories belong to the ancestor's
/// owner when the host runs as root (see [`owner_for_new`]).
fn make_root(root: &Path) -> io::Result<(PathBuf, OwnedFd)> {
    let not_plain = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "its missing part has a '..' or '.' component: name it without them",
        )
    };
    let mut missing = Vec::new();
    let mut at = root;
    let (base, fd) = loop {
        missing.push(at.file_name().ok_or_else(not_plain)?);
        at = at.parent().ok_or_else(not_plain)?;
        match std::fs::canonicalize(at) {
            Ok(real) => {
                let fd = beneath::open_root(&real)?;
                break (real, fd);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    };
    let names = missing
        .iter()
        .rev()
        .map(|name| name.to_str().filter(|n| *n != "." && *n != ".."))
        .collect::<Option<Vec<&str>>>()
        .ok_or_else(not_plain)?;
    let owner = owner_for_new(fd.as_fd())?;
    let mode = Mode::from_bits_truncate(DIR_MODE as _);
    let made = beneath::make_dirs_beneath(fd.as_fd(), &names, mode, owner)?;
    Ok((names.iter().fold(base, |path, name| path.join(name)), made))
}

/// Who what the host makes in `dir` should belong to: `dir`'s owner, when the host runs
/// as root and `dir` is another user's (so that user can still manage what the agent
/// keeps there); `None` otherwise (what the host makes is its own).
pub(super) fn owner_for_new(dir: BorrowedFd<'_>) -> io::Result<Option<(u32, u32)>> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let st = nix::sys::stat::fstat(dir)?;
    let ours = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    Ok((ours != (st.st_uid, st.st_gid)).then_some((st.st_uid, st.st_gid)))
}

/// `fd` (a file or directory the host has just made) given to `owner`.
pub(super) fn give(fd: BorrowedFd<'_>, owner: Option<(u32, u32)>) -> io::Result<()> {
    if let Some((uid, gid)) = owner {
        nix::unistd::fchown(
            fd,
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
        )?;
    }
    Ok(())
}

/// Scheme names and the host directories they map to, each held open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UriRoots(BTreeMap<String, Root>);

impl UriRoots {
    /// Checks every name (lowercase letters, digits, `+ - .`, starting with a letter, at
    /// most 32; not `artifact` or `file`) and root (absolute), and opens each root (made
    /// when missing, see [`Root::pin`]): a root that cannot be opened or made is refused
    /// now, not at a cell's first read.
    pub fn new(roots: impl IntoIterator<Item = (String, PathBuf)>) -> Result<Self, String> {
        let mut checked = BTreeMap::new();
        for (scheme, root) in roots {
            check_scheme(&scheme)?;
            if root.as_os_str().is_empty() || !root.is_absolute() {
                return Err(format!(
                    "the root of '{scheme}' must be an absolute directory, got {:?}",
                    root.display().to_string()
                ));
            }
            let pinned = Root::pin(&root).map_err(|e| {
                let why = match e.raw_os_error().map(Errno::from_raw) {
                    Some(Errno::ENOTDIR) => "it (or a part of its path) is not a directory".to_string(),
                    Some(Errno::ELOOP) => "it is a symbolic link that leads nowhere, or a loop of them".to_string(),
                    _ => e.to_string(),
                };
                format!(
                    "the root of '{scheme}', {:?}, could not be opened or made: {why}; name a directory the host's user may read and write (a missing one is made)",
                    root.display().to_string()
                )
            })?;
            checked.insert(scheme, pinned);
        }
        Ok(Self(checked))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// These roots, with `overrides` in place of any of the same scheme.
    pub fn with(&self, overrides: Option<&UriRoots>) -> UriRoots {
        let mut merged = self.0.clone();
        if let Some(overrides) = overrides {
            merged.extend(overrides.0.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        UriRoots(merged)
    }

    /// The root `uri`'s scheme maps to and the path after `scheme://`, when it has one.
    pub fn find<'a>(&self, uri: &'a str) -> Option<(&Root, &'a str)> {
        let (scheme, rest) = uri.split_once("://")?;
        let root = self.0.get(scheme)?;
        Some((root, rest))
    }

    /// The schemes mapped, for messages.
    pub fn schemes(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

fn check_scheme(scheme: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c);
    if !scheme.starts_with(|c: char| c.is_ascii_lowercase())
        || !scheme.chars().all(allowed)
        || scheme.len() > MAX_SCHEME_CHARS
    {
        return Err(format!(
            "scheme names are 1 to {MAX_SCHEME_CHARS} lowercase letters, digits, '+', '-' or '.', starting with a letter (as in local://), got {scheme:?}"
        ));
    }
    if RESERVED.contains(&scheme) {
        return Err(format!(
            "'{scheme}' cannot be mapped: {scheme}:// already has its meaning (artifact:// is the host's kept outputs, file:// the kernel's own files)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::uri_files::{read, write};
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn scheme_names_are_checked() {
        let roots = |name: &str| UriRoots::new([(name.to_string(), PathBuf::from("/tmp"))]);
        for good in ["local", "skill", "a1", "x+y.z-w"] {
            assert!(roots(good).is_ok(), "{good}");
        }
        for bad in ["", "Local", "1a", "a_b", "a/b", "a:", &"a".repeat(33)] {
            let err = roots(bad).unwrap_err();
            assert!(err.contains("lowercase"), "{bad}: {err}");
        }
        for reserved in ["artifact", "file"] {
            let err = roots(reserved).unwrap_err();
            assert!(err.contains("already has its meaning"), "{err}");
        }
        let err = UriRoots::new([("local".into(), PathBuf::from("rel/dir"))]).unwrap_err();
        assert!(err.contains("absolute"), "{err}");
    }

    #[test]
    fn a_request_root_takes_the_place_of_the_kernels_for_its_scheme_only() {
        let base = tempfile::tempdir().unwrap();
        let dir = |name: &str| base.path().join(name);
        let kernel = UriRoots::new([
            ("local".into(), dir("k-local")),
            ("skill".into(), dir("k-skill")),
        ])
        .unwrap();
        let request = UriRoots::new([("local".into(), dir("r-local"))]).unwrap();
        let merged = kernel.with(Some(&request));
        let found = |uri| merged.find(uri).map(|(root, rest)| (root.path(), rest));
        let real = |name| fs::canonicalize(dir(name)).unwrap();
        assert_eq!(found("local://a"), Some((real("r-local").as_path(), "a")));
        assert_eq!(found("skill://b"), Some((real("k-skill").as_path(), "b")));
        assert_eq!(found("mcp://c"), None);
        assert_eq!(kernel.with(None), kernel);
        assert_ne!(kernel, request);
    }

    #[test]
    fn a_missing_root_is_made_when_the_option_is_read_and_a_file_in_its_way_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("a/b/root");
        let roots = UriRoots::new([("local".into(), root.clone())]).unwrap();
        let meta = fs::metadata(&root).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o777, DIR_MODE);
        assert!(format!("{roots:?}").contains("a/b/root"), "{roots:?}");

        fs::write(base.path().join("file"), "x").unwrap();
        let err = UriRoots::new([("local".into(), base.path().join("file/sub"))]).unwrap_err();
        assert!(err.contains("not a directory"), "{err}");
        assert!(err.contains("name a directory"), "{err}");
        let err = UriRoots::new([("local".into(), base.path().join("file"))]).unwrap_err();
        assert!(err.contains("not a directory"), "{err}");
        let err = UriRoots::new([("local".into(), base.path().join("new/../x"))]).unwrap_err();
        assert!(err.contains("'..'"), "{err}");
    }

    /// The attack: a cell that may write the root's parent moves an ancestor of the root
    /// away and puts a symlink to another directory in its place.
    #[test]
    fn an_ancestor_swapped_for_a_symlink_leads_nowhere_the_root_is_held_open() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("data/root");
        fs::create_dir_all(&root).unwrap();
        let victim = base.path().join("victim");
        fs::create_dir_all(victim.join("root")).unwrap();
        fs::write(victim.join("root/keep"), "the victim's").unwrap();
        let roots = UriRoots::new([("local".into(), root.clone())]).unwrap();
        let (pinned, _) = roots.find("local://x").unwrap();

        fs::rename(base.path().join("data"), base.path().join("moved")).unwrap();
        symlink(&victim, base.path().join("data")).unwrap();

        write(pinned, "local://pwn.txt", "pwn.txt", b"pwned").unwrap();
        let err = read(pinned, "local://keep", "keep", 1, None).unwrap_err();
        assert_eq!(err.exception, "FileNotFoundError", "{}", err.message);
        let names: Vec<_> = fs::read_dir(victim.join("root"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["keep"], "nothing made in the victim");
        assert_eq!(
            fs::read_to_string(victim.join("root/keep")).unwrap(),
            "the victim's"
        );
        assert_eq!(
            fs::read_to_string(base.path().join("moved/root/pwn.txt")).unwrap(),
            "pwned",
            "the write landed in the root the host named, where it is now"
        );
    }

    #[test]
    fn a_root_removed_after_the_option_is_said_to_be() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        let roots = UriRoots::new([("local".into(), root.clone())]).unwrap();
        let (pinned, _) = roots.find("local://x").unwrap();
        fs::remove_dir(&root).unwrap();
        assert!(pinned.is_removed());
        let err = write(pinned, "local://a/x", "a/x", b"x").unwrap_err();
        assert!(err.message.contains("root was removed"), "{}", err.message);
        let err = read(pinned, "local://x", "x", 1, None).unwrap_err();
        assert!(err.message.contains("root was removed"), "{}", err.message);
        assert!(!root.exists(), "not made again by path");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_root_host_makes_the_missing_root_its_parents_owners() {
        use std::os::unix::fs::MetadataExt;
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let home = base.path().join("home");
        fs::create_dir(&home).unwrap();
        std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
        UriRoots::new([("local".into(), home.join("agent/data"))]).unwrap();
        for dir in ["agent", "agent/data"] {
            let meta = fs::metadata(home.join(dir)).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{dir}");
        }
    }
}
