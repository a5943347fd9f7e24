//! `read()` and `write()` of a `scheme://` path beneath its [`Root`], for a cell.
//!
//! The path after `scheme://` is relative to the root and taken literally (no
//! percent-decoding): no absolute path, no `..` component, no NUL; every open goes through
//! [`beneath`](super::beneath) from the root's descriptor, so no symlink leads out either.
//! Only regular files are read or written, and only ones with a single link (a hard link
//! planted in the root would otherwise hand the host's file to the cell). Reads and writes
//! are at most [`MAX_BYTES`]. Files are created 0600 and directories 0700: the root holds
//! what the host's user keeps for the agent, and nobody else needs to read it.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::{Mode, SFlag};

use super::beneath::{self, Resolution};
use super::uri_roots::{give, owner_for_new, Root, DIR_MODE};

/// The most a read returns or a write takes, in bytes: a reply or a call travels as one
/// JSON frame (64 MiB at most, and a string's escapes can take six bytes for one).
pub const MAX_BYTES: usize = 8 << 20;

const FILE_MODE: u32 = 0o600;

/// The longest path after `scheme://`, in bytes, and the most components it may have:
/// refused before any system call, so a cell cannot make the host walk (or echo back)
/// more than a real path would be (`PATH_MAX` is 4096 on Linux).
pub const MAX_PATH_BYTES: usize = 4096;
pub const MAX_DEPTH: usize = 64;

/// The most a read passes over to reach its `offset` line: past it the read is refused,
/// so a far offset into a huge (or sparse) file cannot keep a host thread reading.
const MAX_SKIP_BYTES: u64 = 256 << 20;

/// Why a read or write was refused, as the exception the cell raises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// `FileNotFoundError`, `PermissionError`, `IsADirectoryError`, `ValueError` or `OSError`.
    pub exception: &'static str,
    pub message: String,
}

impl Refused {
    fn new(exception: &'static str, message: String) -> Self {
        Self { exception, message }
    }
}

/// The components of `rest` (what follows `scheme://`), refused when they could name
/// anything but a file beneath the root.
fn parts<'a>(uri: &str, rest: &'a str) -> Result<Vec<&'a str>, Refused> {
    let invalid = |why: &str| {
        Refused::new(
            "ValueError",
            format!("{uri}: {why}; name a file beneath the root, as in local://notes/today.md"),
        )
    };
    if rest.len() > MAX_PATH_BYTES {
        // Not echoed whole: the cell has it, and it may be megabytes.
        let start: String = uri.chars().take(64).collect();
        return Err(Refused::new(
            "ValueError",
            format!(
                "{start}...: the path is {} bytes, more than the {MAX_PATH_BYTES} a path may have: use a shorter one",
                rest.len()
            ),
        ));
    }
    if rest.starts_with('/') {
        return Err(invalid("an absolute path is not allowed"));
    }
    if rest.contains('\0') {
        return Err(invalid("the path contains NUL"));
    }
    let parts: Vec<&str> = rest
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.contains(&"..") {
        return Err(invalid("'..' is not allowed"));
    }
    if parts.is_empty() || rest.ends_with('/') {
        return Err(invalid("it names no file"));
    }
    if parts.len() > MAX_DEPTH {
        return Err(invalid(&format!(
            "the path has {} components, more than the {MAX_DEPTH} it may have",
            parts.len()
        )));
    }
    Ok(parts)
}

/// An error of an open or a read beneath the root, worded for the cell: by its uri, never
/// by the host's path (where the host keeps the root is not the cell's to know).
fn refusal(uri: &str, root: &Root, err: io::Error) -> Refused {
    let errno = err.raw_os_error().map(Errno::from_raw);
    match errno {
        // Held open, a removed root is never made again by its path (another directory,
        // or a symlink, may have taken that name).
        Some(Errno::ENOENT) if root.is_removed() => Refused::new(
            "FileNotFoundError",
            format!("{uri}: its root was removed after the host set it: the host makes it again by setting uriRoots again (a new kernel, or the request's own uriRoots)"),
        ),
        Some(Errno::ENOENT) => Refused::new("FileNotFoundError", format!("{uri}: no such file")),
        Some(Errno::EXDEV) | Some(Errno::ELOOP) => Refused::new(
            "PermissionError",
            match beneath::resolution() {
                Resolution::Beneath => format!(
                    "{uri}: the path leads out of its root (through a symbolic link): refused"
                ),
                Resolution::NoSymlinks => format!(
                    "{uri}: the path goes through a symbolic link, which is not followed beneath the root on this system: refused"
                ),
            },
        ),
        Some(Errno::ENOTDIR) => Refused::new(
            "NotADirectoryError",
            format!("{uri}: a part of the path is not a directory"),
        ),
        Some(Errno::EISDIR) => {
            Refused::new("IsADirectoryError", format!("{uri}: is a directory"))
        }
        Some(Errno::EACCES) | Some(Errno::EPERM) | Some(Errno::EROFS) => {
            Refused::new("PermissionError", format!("{uri}: {err}"))
        }
        _ => Refused::new("OSError", format!("{uri}: {err}")),
    }
}

/// The file's metadata, refused unless it is a regular file with one link.
fn check_file(uri: &str, file: &std::fs::File) -> Result<(), Refused> {
    use std::os::unix::fs::MetadataExt;
    let meta = file
        .metadata()
        .map_err(|e| Refused::new("OSError", format!("{uri}: {e}")))?;
    check_kind(uri, kind_of(meta.mode() as _), meta.nlink())
}

/// A file of `kind` (its type bits) and `nlink` links, refused unless it is a regular
/// file with one link.
fn check_kind(uri: &str, kind: SFlag, nlink: u64) -> Result<(), Refused> {
    if kind == SFlag::S_IFDIR {
        return Err(Refused::new(
            "IsADirectoryError",
            format!("{uri}: is a directory"),
        ));
    }
    if kind != SFlag::S_IFREG {
        return Err(Refused::new(
            "PermissionError",
            format!("{uri}: not a regular file (a FIFO, socket or device is never opened)"),
        ));
    }
    if nlink > 1 {
        return Err(Refused::new(
            "PermissionError",
            format!(
                "{uri}: the file has {nlink} hard links, and only a file with one is read or written (a link could be another file of the host's): copy it instead"
            ),
        ));
    }
    Ok(())
}

/// The file type bits of a `st_mode`.
fn kind_of(mode: nix::libc::mode_t) -> SFlag {
    SFlag::from_bits_truncate(mode) & SFlag::S_IFMT
}

/// Back to blocking IO, once the open (`O_NONBLOCK`, so a FIFO never holds it) is done.
fn blocking(file: &std::fs::File) -> io::Result<()> {
    let flags = nix::fcntl::fcntl(file.as_fd(), nix::fcntl::FcntlArg::F_GETFL)?;
    let flags = OFlag::from_bits_truncate(flags) - OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(file.as_fd(), nix::fcntl::FcntlArg::F_SETFL(flags))?;
    Ok(())
}

/// The text of `uri` (`rest` beneath `root`), or of its lines `first` (1-based) onwards,
/// at most `limit` of them, each with its `\n`; undecodable bytes replaced.
pub fn read(
    root: &Root,
    uri: &str,
    rest: &str,
    first: u64,
    limit: Option<u64>,
) -> Result<String, Refused> {
    read_within(root, uri, rest, first, limit, MAX_SKIP_BYTES)
}

/// [`read`], passing over at most `max_skip` bytes to reach line `first`.
fn read_within(
    root: &Root,
    uri: &str,
    rest: &str,
    first: u64,
    limit: Option<u64>,
    max_skip: u64,
) -> Result<String, Refused> {
    let parts = parts(uri, rest)?;
    let fail = |e| refusal(uri, root, e);
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let fd = beneath::open_beneath(root.fd(), &parts, flags, Mode::empty()).map_err(fail)?;
    let file = std::fs::File::from(fd);
    check_file(uri, &file)?;
    blocking(&file).map_err(fail)?;
    let mut reader = BufReader::new(file);
    // Lines passed over are never kept (`skip_until` holds one buffer at a time), and
    // at most `max_skip` bytes of them are read.
    let mut skipped = 0u64;
    for _ in 1..first.max(1) {
        let room = max_skip.saturating_sub(skipped).saturating_add(1);
        let passed = (&mut reader).take(room).skip_until(b'\n').map_err(fail)? as u64;
        skipped = skipped.saturating_add(passed);
        if skipped > max_skip {
            return Err(Refused::new(
                "ValueError",
                format!(
                    "{uri}: line {first} is more than {} MiB into the file, further than read() goes to find a line: read a smaller file, or split this one",
                    max_skip >> 20
                ),
            ));
        }
        if passed == 0 {
            return Ok(String::new());
        }
    }
    let mut bytes = Vec::new();
    let mut lines = 0u64;
    while limit.is_none_or(|limit| lines < limit) {
        let room = (MAX_BYTES + 1 - bytes.len()) as u64;
        if (&mut reader)
            .take(room)
            .read_until(b'\n', &mut bytes)
            .map_err(fail)?
            == 0
        {
            break;
        }
        if bytes.len() > MAX_BYTES {
            return Err(Refused::new(
                "ValueError",
                format!(
                    "{uri}: more than {} MiB to read, and read() returns at most that at once: read it in parts with offset and limit (lines)",
                    MAX_BYTES >> 20
                ),
            ));
        }
        lines += 1;
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Writes `content` to `uri` (`rest` beneath `root`), replacing the file, making it and
/// its parent directories where missing.
///
/// Atomically: the content goes to a new file beside the target (`O_EXCL`, 0600), which
/// is then renamed over it, so a reader sees the old file or the new one, never half of
/// one; a write that fails leaves no temporary file behind. An existing target must
/// still be one `write` may replace (a regular file with one link, not a symbolic link),
/// and keeps its permission bits (and, for a host run as root, its owner); a new file
/// gets 0600 and, for a host run as root in another user's root, that user as owner.
pub fn write(root: &Root, uri: &str, rest: &str, content: &[u8]) -> Result<(), Refused> {
    let parts = parts(uri, rest)?;
    if content.len() > MAX_BYTES {
        return Err(too_large_to_write(uri, content.len()));
    }
    let fail = |e| refusal(uri, root, e);
    let (name, dirs) = parts.split_last().expect("parts() names a file");
    let owner = owner_for_new(root.fd()).map_err(fail)?;
    let dir_mode = Mode::from_bits_truncate(DIR_MODE as _);
    let dir = beneath::make_dirs_beneath(root.fd(), dirs, dir_mode, owner).map_err(fail)?;
    let (temp_name, temp) = create_temp(dir.as_fd()).map_err(fail)?;
    let replaced = (|| {
        let mut file = std::fs::File::from(temp);
        file.write_all(content).map_err(fail)?;
        // Checked last, just before the rename: what the rename replaces is a name, never
        // written through, so a target swapped after this check is replaced, not written.
        match existing_target(uri, dir.as_fd(), name, fail)? {
            Some(st) => {
                let mode = Mode::from_bits_truncate((st.st_mode & 0o777) as _);
                nix::sys::stat::fchmod(file.as_fd(), mode).map_err(|e| fail(e.into()))?;
                if nix::unistd::geteuid().is_root() {
                    give(file.as_fd(), Some((st.st_uid, st.st_gid))).map_err(fail)?;
                }
            }
            None => give(file.as_fd(), owner).map_err(fail)?,
        }
        nix::fcntl::renameat(dir.as_fd(), temp_name.as_str(), dir.as_fd(), *name)
            .map_err(|e| fail(e.into()))
    })();
    if replaced.is_err() {
        let _ = nix::unistd::unlinkat(
            dir.as_fd(),
            temp_name.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    replaced
}

/// The stat of the file `name` in `dir` a write would replace (`None` when there is
/// none), refused unless `write` may replace it: a regular file with one link. A symbolic
/// link is refused too: the rename would replace the link itself, not write the file it
/// names.
fn existing_target(
    uri: &str,
    dir: BorrowedFd<'_>,
    name: &str,
    fail: impl Fn(io::Error) -> Refused,
) -> Result<Option<nix::sys::stat::FileStat>, Refused> {
    let st = match nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(fail(e.into())),
    };
    if kind_of(st.st_mode) == SFlag::S_IFLNK {
        return Err(Refused::new(
            "PermissionError",
            format!("{uri}: is a symbolic link, and write() replaces a file, never writing through a link: write to the file it names"),
        ));
    }
    check_kind(uri, kind_of(st.st_mode), st.st_nlink as u64)?;
    Ok(Some(st))
}

/// A new file for the content, in `dir` beside the target: `O_EXCL` under a random
/// name, so it is never one a cell planted.
fn create_temp(dir: BorrowedFd<'_>) -> io::Result<(String, OwnedFd)> {
    use std::hash::{BuildHasher, Hasher};
    let mut tries = 0;
    loop {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.write_u32(tries);
        let name = format!(".pykernel-write-{:016x}", hasher.finish());
        match nix::fcntl::openat(
            dir,
            name.as_str(),
            OFlag::O_WRONLY
                | OFlag::O_CREAT
                | OFlag::O_EXCL
                | OFlag::O_NOFOLLOW
                | OFlag::O_NOCTTY
                | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(FILE_MODE as _),
        ) {
            Ok(fd) => return Ok((name, fd)),
            Err(Errno::EEXIST) if tries < 16 => tries += 1,
            Err(e) => return Err(e.into()),
        }
    }
}

pub fn too_large_to_write(uri: &str, len: usize) -> Refused {
    Refused::new(
        "ValueError",
        format!(
            "{uri}: {len} bytes is more than write() takes at once ({} MiB): write the file in parts to several files, or save it to a local path",
            MAX_BYTES >> 20
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, MetadataExt};

    /// A root as the option gives it.
    fn pin(path: &std::path::Path) -> Root {
        let roots =
            super::super::uri_roots::UriRoots::new([("local".into(), path.to_path_buf())]).unwrap();
        roots.find("local://x").unwrap().0.clone()
    }

    #[test]
    fn paths_that_could_leave_the_root_are_refused() {
        for (rest, why) in [
            ("/etc/passwd", "absolute"),
            ("../x", "'..'"),
            ("a/../../x", "'..'"),
            ("", "names no file"),
            ("a/", "names no file"),
            ("./", "names no file"),
            ("a\0b", "NUL"),
        ] {
            let err = parts("local://x", rest).unwrap_err();
            assert_eq!(err.exception, "ValueError");
            assert!(err.message.contains(why), "{rest:?}: {}", err.message);
        }
        assert_eq!(parts("u", "a//./b.txt").unwrap(), ["a", "b.txt"]);
    }

    #[test]
    fn a_write_makes_its_directories_and_reads_back_by_lines() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("root");
        let root = pin(&dir);
        write(&root, "local://a/b/c.txt", "a/b/c.txt", b"1\n2\n3\n4").unwrap();
        let path = dir.join("a/b/c.txt");
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, FILE_MODE);
        assert_eq!(
            fs::metadata(dir.join("a")).unwrap().mode() & 0o777,
            DIR_MODE
        );
        let read = |first, limit| read(&root, "local://a/b/c.txt", "a/b/c.txt", first, limit);
        assert_eq!(read(1, None).unwrap(), "1\n2\n3\n4");
        assert_eq!(read(2, Some(2)).unwrap(), "2\n3\n");
        assert_eq!(read(4, None).unwrap(), "4");
        assert_eq!(read(9, None).unwrap(), "");
        // A shorter write replaces it all.
        write(&root, "local://a/b/c.txt", "a/b/c.txt", b"x").unwrap();
        assert_eq!(read(1, None).unwrap(), "x");
        let missing = self::read(&root, "local://nope", "nope", 1, None).unwrap_err();
        assert_eq!(missing.exception, "FileNotFoundError");
        let dir = self::read(&root, "local://a", "a", 1, None).unwrap_err();
        assert_eq!(dir.exception, "IsADirectoryError");
    }

    #[test]
    fn symlinks_out_fifos_hard_links_and_big_files_are_refused() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("root");
        fs::create_dir(&dir).unwrap();
        let root = pin(&dir);
        let outside = base.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("secret"), "s").unwrap();
        symlink(&outside, dir.join("out")).unwrap();
        symlink(outside.join("secret"), dir.join("secret")).unwrap();
        for (uri, rest) in [
            ("local://out/secret", "out/secret"),
            ("local://secret", "secret"),
        ] {
            let err = read(&root, uri, rest, 1, None).unwrap_err();
            assert_eq!(err.exception, "PermissionError", "{uri}: {}", err.message);
            let err = write(&root, uri, rest, b"pwned").unwrap_err();
            assert_eq!(err.exception, "PermissionError", "{uri}: {}", err.message);
            // The cell is told by its uri; where the host keeps the root is not its to know.
            assert!(err.message.starts_with(uri), "{}", err.message);
            assert!(
                !err.message.contains(base.path().to_str().unwrap()),
                "{}",
                err.message
            );
        }
        let err = write(&root, "local://out/new/x", "out/new/x", b"pwned").unwrap_err();
        assert_eq!(err.exception, "PermissionError", "{}", err.message);
        assert_eq!(fs::read_to_string(outside.join("secret")).unwrap(), "s");
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);

        nix::unistd::mkfifo(&dir.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = read(&root, "local://fifo", "fifo", 1, None).unwrap_err();
        assert!(
            err.message.contains("not a regular file"),
            "{}",
            err.message
        );

        fs::hard_link(outside.join("secret"), dir.join("linked")).unwrap();
        let err = read(&root, "local://linked", "linked", 1, None).unwrap_err();
        assert!(err.message.contains("2 hard links"), "{}", err.message);
        let err = write(&root, "local://linked", "linked", b"pwned").unwrap_err();
        assert!(err.message.contains("2 hard links"), "{}", err.message);
        assert_eq!(fs::read_to_string(outside.join("secret")).unwrap(), "s");

        fs::write(dir.join("big"), vec![b'x'; MAX_BYTES + 1]).unwrap();
        let err = read(&root, "local://big", "big", 1, None).unwrap_err();
        assert!(err.message.contains("offset and limit"), "{}", err.message);
        fs::write(dir.join("big"), vec![b'x'; MAX_BYTES]).unwrap();
        assert_eq!(
            read(&root, "local://big", "big", 1, None).unwrap().len(),
            MAX_BYTES
        );
        let err = write(&root, "local://w", "w", &vec![0; MAX_BYTES + 1]).unwrap_err();
        assert_eq!(err.exception, "ValueError");
    }
}

#[cfg(test)]
mod write_tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
    use std::path::Path;

    fn pin(path: &Path) -> Root {
        let roots =
            super::super::uri_roots::UriRoots::new([("local".into(), path.to_path_buf())]).unwrap();
        roots.find("local://x").unwrap().0.clone()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    /// Two writers replace one file with contents of different lengths while two readers
    /// read it: every read is one whole content or the other.
    #[test]
    fn concurrent_writes_and_reads_of_one_uri_never_see_a_torn_file() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let base = tempfile::tempdir().unwrap();
        let root = pin(&base.path().join("root"));
        let (long, short) = ("a".repeat(512 << 10), "b".repeat(128 << 10));
        write(&root, "local://f", "f", long.as_bytes()).unwrap();
        let writing = AtomicBool::new(true);
        let (torn, reads) = std::thread::scope(|s| {
            let writers: Vec<_> = (0..2)
                .map(|w| {
                    let (root, long, short) = (&root, &long, &short);
                    s.spawn(move || {
                        for i in 0..150 {
                            let content = if (i + w) % 2 == 0 { long } else { short };
                            write(root, "local://f", "f", content.as_bytes()).unwrap();
                        }
                    })
                })
                .collect();
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let (root, long, short, writing) = (&root, &long, &short, &writing);
                    s.spawn(move || {
                        let (mut torn, mut reads) = (Vec::new(), 0);
                        while writing.load(Ordering::Relaxed) {
                            let text = read(root, "local://f", "f", 1, None).unwrap();
                            if text != *long && text != *short {
                                torn.push((text.len(), text.chars().next()));
                            }
                            reads += 1;
                        }
                        (torn, reads)
                    })
                })
                .collect();
            for writer in writers {
                writer.join().unwrap();
            }
            writing.store(false, Ordering::Relaxed);
            readers.into_iter().map(|r| r.join().unwrap()).fold(
                (Vec::new(), 0),
                |(mut all, n), (torn, reads)| {
                    all.extend(torn);
                    (all, n + reads)
                },
            )
        });
        assert!(reads > 0);
        assert!(
            torn.is_empty(),
            "{} of {reads} reads torn: {torn:?}",
            torn.len()
        );
        assert_eq!(names(root.path()), ["f"], "no temporary file left");
    }

    #[test]
    fn a_refused_write_leaves_no_temporary_file_and_the_target_as_it_was() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("root");
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(base.path().join("outside"), "theirs").unwrap();
        fs::hard_link(base.path().join("outside"), dir.join("linked")).unwrap();
        fs::write(dir.join("inside"), "in").unwrap();
        symlink("inside", dir.join("near")).unwrap();
        let root = pin(&dir);
        for (name, exception, why) in [
            ("linked", "PermissionError", "2 hard links"),
            ("sub", "IsADirectoryError", "is a directory"),
            ("near", "PermissionError", "symbolic link"),
        ] {
            let err = write(&root, &format!("local://{name}"), name, b"new").unwrap_err();
            assert_eq!(err.exception, exception, "{name}: {}", err.message);
            assert!(err.message.contains(why), "{name}: {}", err.message);
        }
        assert_eq!(names(&dir), ["inside", "linked", "near", "sub"]);
        assert_eq!(
            fs::read_to_string(base.path().join("outside")).unwrap(),
            "theirs"
        );
        assert_eq!(fs::read_to_string(dir.join("inside")).unwrap(), "in");
        assert!(fs::symlink_metadata(dir.join("near")).unwrap().is_symlink());
    }

    #[test]
    fn a_replaced_file_keeps_its_permission_bits_and_a_new_one_is_0600() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("root");
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("shared"), "old").unwrap();
        fs::set_permissions(dir.join("shared"), fs::Permissions::from_mode(0o640)).unwrap();
        let root = pin(&dir);
        write(&root, "local://shared", "shared", b"new").unwrap();
        write(&root, "local://fresh", "fresh", b"new").unwrap();
        let mode = |name| fs::metadata(dir.join(name)).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode("shared"), mode("fresh")), (0o640, FILE_MODE));
        assert_eq!(fs::read_to_string(dir.join("shared")).unwrap(), "new");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_root_host_gives_what_it_makes_in_another_users_root_to_that_user() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("root");
        fs::create_dir(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        let root = pin(&dir);
        write(&root, "local://a/b/c.txt", "a/b/c.txt", b"x").unwrap();
        for made in ["a", "a/b", "a/b/c.txt"] {
            let meta = fs::metadata(dir.join(made)).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{made}");
        }
    }
}

#[cfg(test)]
mod bounds_tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    fn pin(path: &Path) -> Root {
        let roots =
            super::super::uri_roots::UriRoots::new([("local".into(), path.to_path_buf())]).unwrap();
        roots.find("local://x").unwrap().0.clone()
    }

    #[test]
    fn a_path_too_long_or_too_deep_is_refused_before_any_system_call() {
        // A root that is not there: a refusal that reached a system call would say so.
        let long = "a".repeat(MAX_PATH_BYTES + 1);
        let uri = format!("local://{long}");
        let err = parts(&uri, &long).unwrap_err();
        assert_eq!(err.exception, "ValueError");
        assert!(err.message.contains("4097 bytes"), "{}", err.message);
        assert!(err.message.len() < 300, "the path is not echoed whole");
        let deep = vec!["d"; MAX_DEPTH + 1].join("/");
        let err = parts("local://deep", &deep).unwrap_err();
        assert!(err.message.contains("65 components"), "{}", err.message);
        assert_eq!(
            parts("u", &vec!["d"; MAX_DEPTH].join("/")).unwrap().len(),
            MAX_DEPTH
        );
        assert!(parts("u", &"a".repeat(MAX_PATH_BYTES)).is_ok());
    }

    #[test]
    fn an_offset_past_the_skip_bound_is_refused_and_huge_numbers_do_not_overflow() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("root");
        fs::create_dir(&dir).unwrap();
        let root = pin(&dir);
        // 4 KiB without a newline, then two lines.
        let mut content = vec![b'x'; 4096];
        content.extend_from_slice(b"\nsecond\nthird\n");
        fs::write(dir.join("f"), &content).unwrap();
        let err = read_within(&root, "local://f", "f", 2, None, 1024).unwrap_err();
        assert_eq!(err.exception, "ValueError");
        assert!(err.message.contains("line 2"), "{}", err.message);
        assert_eq!(
            read_within(&root, "local://f", "f", 2, Some(1), 8192).unwrap(),
            "second\n"
        );
        // The largest numbers a cell can send: no overflow, just the end of the file.
        assert_eq!(
            read(&root, "local://f", "f", u64::MAX, Some(u64::MAX)).unwrap(),
            ""
        );
        assert_eq!(
            read(&root, "local://f", "f", 3, Some(u64::MAX)).unwrap(),
            "third\n"
        );
    }
}
