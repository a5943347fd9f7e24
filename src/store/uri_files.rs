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
use std::os::fd::AsFd;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use super::beneath::{self, Resolution};
use super::uri_roots::{Root, DIR_MODE};

/// The most a read returns or a write takes, in bytes: a reply or a call travels as one
/// JSON frame (64 MiB at most, and a string's escapes can take six bytes for one).
pub const MAX_BYTES: usize = 8 << 20;

const FILE_MODE: u32 = 0o600;

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
    if meta.is_dir() {
        return Err(Refused::new(
            "IsADirectoryError",
            format!("{uri}: is a directory"),
        ));
    }
    if !meta.is_file() {
        return Err(Refused::new(
            "PermissionError",
            format!("{uri}: not a regular file (a FIFO, socket or device is never opened)"),
        ));
    }
    if meta.nlink() > 1 {
        return Err(Refused::new(
            "PermissionError",
            format!(
                "{uri}: the file has {} hard links, and only a file with one is read or written (a link could be another file of the host's): copy it instead",
                meta.nlink()
            ),
        ));
    }
    Ok(())
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
    let parts = parts(uri, rest)?;
    let fail = |e| refusal(uri, root, e);
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let fd = beneath::open_beneath(root.fd(), &parts, flags, Mode::empty()).map_err(fail)?;
    let file = std::fs::File::from(fd);
    check_file(uri, &file)?;
    blocking(&file).map_err(fail)?;
    let mut reader = BufReader::new(file);
    for _ in 1..first.max(1) {
        if reader.skip_until(b'\n').map_err(fail)? == 0 {
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
pub fn write(root: &Root, uri: &str, rest: &str, content: &[u8]) -> Result<(), Refused> {
    let parts = parts(uri, rest)?;
    if content.len() > MAX_BYTES {
        return Err(too_large_to_write(uri, content.len()));
    }
    let fail = |e| refusal(uri, root, e);
    let dirs = &parts[..parts.len() - 1];
    let dir_mode = Mode::from_bits_truncate(DIR_MODE as _);
    beneath::make_dirs_beneath(root.fd(), dirs, dir_mode).map_err(fail)?;
    // Not O_TRUNC: the file is emptied only once it is known to be ours to write.
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let fd = beneath::open_beneath(
        root.fd(),
        &parts,
        flags,
        Mode::from_bits_truncate(FILE_MODE as _),
    )
    .map_err(fail)?;
    let mut file = std::fs::File::from(fd);
    check_file(uri, &file)?;
    blocking(&file).map_err(fail)?;
    file.set_len(0).map_err(fail)?;
    file.write_all(content).map_err(fail)?;
    Ok(())
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
