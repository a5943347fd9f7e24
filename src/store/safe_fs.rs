//! Directories and files that only we may write: artifactsDir, its kv store, the output
//! artifacts (and, with its own repair policy, the runner directory).
//!
//! Why: these paths often sit in shared places such as `/tmp`, where another local user can
//! make a path first: a directory they own (they read and plant files in it), one loose
//! enough for anyone to write, or a symlink that sends our writes to a file of their
//! choosing. So a directory is used only when it is a real directory (a symlink is never
//! followed), owned by us and not writable by group or others; a missing one is created
//! 0700 by us. Files are opened with `O_NOFOLLOW` and created 0600. A refusal names the
//! path, what is wrong and what to do; it is never repaired behind the caller's back,
//! because the directory may be someone else's.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// What is wrong with a path we were going to keep private data in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    Symlink,
    NotADirectory,
    NotAFile,
    Owner {
        owner: u32,
        us: u32,
    },
    /// Writable by group or others: anyone could plant or replace entries.
    Writable {
        mode: u32,
    },
    /// A file with more than one name: another may be a file of ours elsewhere, which a
    /// write through this one would change.
    Links {
        count: u64,
    },
    /// It could not be created, inspected or opened.
    Io(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Symlink => write!(f, "is a symbolic link (never followed)"),
            Fault::NotADirectory => write!(f, "exists and is not a directory"),
            Fault::NotAFile => write!(f, "exists and is not a regular file"),
            Fault::Owner { owner, us } => {
                write!(f, "is owned by uid {owner}, not by us (uid {us})")
            }
            Fault::Writable { mode } => {
                write!(
                    f,
                    "is writable by group or others (mode {:o})",
                    mode & 0o7777
                )
            }
            Fault::Links { count } => write!(
                f,
                "has {count} hard links (another name may be a file of ours elsewhere, which writing here would change)"
            ),
            Fault::Io(reason) => write!(f, "cannot be used: {reason}"),
        }
    }
}

/// A path refused for private data, as the caller's error carries it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {} {fault}: {}", path.display(), self.advice())]
pub struct Refusal {
    /// What the path is for, as the user knows it: "artifactsDir", "the kv store lock", ...
    pub what: &'static str,
    pub path: PathBuf,
    pub fault: Fault,
}

impl Refusal {
    fn advice(&self) -> String {
        // The option the caller set: an artifactPath's file or directory, else artifactsDir.
        let option = if self.what.starts_with("artifactPath") {
            "artifactPath"
        } else {
            "artifactsDir"
        };
        match self.fault {
            Fault::Writable { .. } => {
                format!("make it private (chmod 700) or choose another {option}")
            }
            Fault::Io(_) => format!("choose another {option}"),
            _ => format!("remove it or choose another {option}"),
        }
    }
}

/// The uid our files are created with (the effective one).
pub fn our_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Inspects `dir` without following a symlink: `Ok(None)` when it is a real directory,
/// ours and not writable by group or others. An `Err` is from `lstat` (e.g. not found).
pub fn inspect_dir(dir: &Path) -> io::Result<Option<Fault>> {
    Ok(dir_fault(&fs::symlink_metadata(dir)?))
}

/// What makes a directory with `meta` (from `lstat` or `fstat`) unfit for private data.
fn dir_fault(meta: &fs::Metadata) -> Option<Fault> {
    let us = our_uid();
    if meta.file_type().is_symlink() {
        Some(Fault::Symlink)
    } else if !meta.is_dir() {
        Some(Fault::NotADirectory)
    } else if meta.uid() != us {
        Some(Fault::Owner {
            owner: meta.uid(),
            us,
        })
    } else if meta.mode() & 0o022 != 0 {
        Some(Fault::Writable { mode: meta.mode() })
    } else {
        None
    }
}

/// `dir`, opened (a symlink in its place is not followed) and checked as [`inspect_dir`]
/// checks a path, on the directory actually opened: one swapped in after an earlier
/// check is seen. Names are then opened relative to it, so the directory checked is the
/// one written in.
pub fn open_private_dir(dir: &Path) -> Result<OwnedFd, Fault> {
    let fd = nix::fcntl::open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| match errno {
        Errno::ELOOP => Fault::Symlink,
        Errno::ENOTDIR => Fault::NotADirectory,
        errno => Fault::Io(io::Error::from(errno).to_string()),
    })?;
    let meta = File::from(fd.try_clone().map_err(|e| Fault::Io(e.to_string()))?)
        .metadata()
        .map_err(|e| Fault::Io(e.to_string()))?;
    match dir_fault(&meta) {
        Some(fault) => Err(fault),
        None => Ok(fd),
    }
}

/// `name` in the directory `dir`, opened to be written from its start: created 0600 when
/// missing, else a regular file of ours with one link, emptied and made 0600.
///
/// Why not `O_TRUNC`: the open would empty whatever is there before it could be checked,
/// so a hard link planted under the name (to a file of ours elsewhere) would lose that
/// file's content. The file is emptied only once it is known to be ours alone. The open
/// does not wait (`O_NONBLOCK`: a FIFO with no reader fails with `ENXIO`, one with a
/// reader is refused as not a file) and follows no symlink.
pub fn replace_file_at(dir: BorrowedFd<'_>, name: &OsStr) -> Result<File, Fault> {
    let io_fault = |e: io::Error| Fault::Io(e.to_string());
    let flags = OFlag::O_WRONLY
        | OFlag::O_CREAT
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let fd =
        nix::fcntl::openat(dir, name, flags, Mode::from_bits_truncate(0o600)).map_err(|errno| {
            match errno {
                Errno::ELOOP => Fault::Symlink,
                // A FIFO with no reader, a socket or a device: not a file either way.
                Errno::ENXIO | Errno::EISDIR | Errno::ENODEV => Fault::NotAFile,
                errno => Fault::Io(io::Error::from(errno).to_string()),
            }
        })?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(io_fault)?;
    if !meta.is_file() {
        return Err(Fault::NotAFile);
    }
    if meta.uid() != our_uid() {
        return Err(Fault::Owner {
            owner: meta.uid(),
            us: our_uid(),
        });
    }
    if meta.nlink() != 1 {
        return Err(Fault::Links {
            count: meta.nlink(),
        });
    }
    // Back to blocking writes, as for any regular file.
    let flags = nix::fcntl::fcntl(file.as_fd(), nix::fcntl::FcntlArg::F_GETFL)
        .map_err(|e| io_fault(e.into()))?;
    let flags = OFlag::from_bits_truncate(flags) - OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(file.as_fd(), nix::fcntl::FcntlArg::F_SETFL(flags))
        .map_err(|e| io_fault(e.into()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(io_fault)?;
    }
    file.set_len(0).map_err(io_fault)?;
    Ok(file)
}

/// `dir`, ready for private data: created 0700 (with any missing parents, also 0700) when
/// it does not exist, else checked with [`inspect_dir`] and refused when unsafe.
pub fn ensure_private_dir(what: &'static str, dir: &Path) -> Result<(), Refusal> {
    let refuse = |fault| Refusal {
        what,
        path: dir.to_path_buf(),
        fault,
    };
    match inspect_dir(dir) {
        Ok(None) => return Ok(()),
        Ok(Some(fault)) => return Err(refuse(fault)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(refuse(Fault::Io(e.to_string()))),
    }
    match fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        // Created by us, or by a racing creator: inspect what is there now either way.
        Ok(()) => match inspect_dir(dir) {
            Ok(None) => Ok(()),
            Ok(Some(fault)) => Err(refuse(fault)),
            Err(e) => Err(refuse(Fault::Io(e.to_string()))),
        },
        Err(e) => Err(refuse(Fault::Io(e.to_string()))),
    }
}

/// Opens `path` without following a symlink in its last component; a file it creates is
/// 0600. A symlink there fails with ELOOP, see [`is_symlink_refusal`].
pub fn open_nofollow(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    options
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .mode(0o600)
        .open(path)
}

/// [`open_nofollow`] for a regular file only: a FIFO or a device planted under the name
/// would block the open (or every read) for ever, so the open does not wait
/// (`O_NONBLOCK`) and anything but a regular file is refused (`InvalidInput`).
pub fn open_regular_nofollow(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    let file = options
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
        .mode(0o600)
        .open(path)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    // Back to blocking reads and writes, as for any regular file.
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is open for as long as `file` lives; F_GETFL/F_SETFL only change flags.
    unsafe {
        let flags = nix::libc::fcntl(fd, nix::libc::F_GETFL);
        if flags < 0 || nix::libc::fcntl(fd, nix::libc::F_SETFL, flags & !nix::libc::O_NONBLOCK) < 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(file)
}

/// Whether an open with `O_NOFOLLOW` failed because the path is a symlink.
pub fn is_symlink_refusal(err: &io::Error) -> bool {
    err.raw_os_error() == Some(nix::libc::ELOOP)
}

/// A rename may replace `path` only when nothing is there or it is a regular file of ours:
/// never a directory, a symlink or someone else's file.
pub fn check_rename_target(what: &'static str, path: &Path) -> Result<(), Refusal> {
    let refuse = |fault| Refusal {
        what,
        path: path.to_path_buf(),
        fault,
    };
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(refuse(Fault::Io(e.to_string()))),
        Ok(meta) if meta.file_type().is_symlink() => Err(refuse(Fault::Symlink)),
        Ok(meta) if !meta.is_file() => Err(refuse(Fault::NotAFile)),
        Ok(meta) if meta.uid() != our_uid() => Err(refuse(Fault::Owner {
            owner: meta.uid(),
            us: our_uid(),
        })),
        Ok(_) => Ok(()),
    }
}

/// Removes `dir` and everything beneath it, never following a symlink. A directory of
/// ours that cannot be listed or emptied (overlayfs leaves its scratch directory with no
/// permissions) is given them back first; what still cannot be removed is left.
pub fn remove_tree(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            open_up(dir);
            fs::remove_dir_all(dir)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Makes every directory of ours beneath `dir` (itself included) ours to list and empty.
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() || meta.uid() != our_uid() {
        return;
    }
    if meta.permissions().mode() & 0o700 != 0o700 {
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    }
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        open_up(&entry.path());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_tree_with_a_directory_nobody_may_list_is_removed() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("layers");
        let scratch = root.join("work/work");
        fs::create_dir_all(&scratch).unwrap();
        fs::write(scratch.join("file"), "x").unwrap();
        std::os::unix::fs::symlink("/", root.join("link")).unwrap();
        fs::set_permissions(&scratch, fs::Permissions::from_mode(0o0)).unwrap();
        remove_tree(&root).unwrap();
        assert!(!root.exists());
        assert!(Path::new("/").exists());
        remove_tree(&root).unwrap();
    }

    #[test]
    fn a_missing_directory_is_created_private_with_its_parents() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("a/b/artifacts");
        ensure_private_dir("artifactsDir", &dir).unwrap();
        for d in [base.path().join("a"), base.path().join("a/b"), dir] {
            assert_eq!(fs::metadata(&d).unwrap().mode() & 0o777, 0o700, "{d:?}");
        }
    }

    #[test]
    fn symlinked_loose_and_foreign_directories_are_refused_untouched() {
        let base = tempfile::tempdir().unwrap();
        let target = base.path().join("attacker");
        fs::create_dir(&target).unwrap();
        let link = base.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = ensure_private_dir("artifactsDir", &link).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "artifactsDir {} is a symbolic link (never followed): remove it or choose another artifactsDir",
                link.display()
            )
        );

        let loose = base.path().join("loose");
        fs::create_dir(&loose).unwrap();
        fs::set_permissions(&loose, fs::Permissions::from_mode(0o777)).unwrap();
        let err = ensure_private_dir("artifactsDir", &loose).unwrap_err();
        assert_eq!(err.fault, Fault::Writable { mode: 0o40777 });
        assert!(err.to_string().ends_with("is writable by group or others (mode 777): make it private (chmod 700) or choose another artifactsDir"), "{err}");
        assert_eq!(
            fs::metadata(&loose).unwrap().mode() & 0o777,
            0o777,
            "not repaired"
        );

        let file = base.path().join("file");
        fs::write(&file, "x").unwrap();
        let err = ensure_private_dir("artifactsDir", &file).unwrap_err();
        assert_eq!(err.fault, Fault::NotADirectory);

        if our_uid() == 0 {
            let foreign = base.path().join("foreign");
            fs::create_dir(&foreign).unwrap();
            fs::set_permissions(&foreign, fs::Permissions::from_mode(0o700)).unwrap();
            std::os::unix::fs::chown(&foreign, Some(65534), None).unwrap();
            let err = ensure_private_dir("artifactsDir", &foreign).unwrap_err();
            assert!(
                err.to_string().ends_with(
                    "is owned by uid 65534, not by us (uid 0): remove it or choose another artifactsDir"
                ),
                "{err}"
            );
        }
        assert_eq!(fs::read_dir(&target).unwrap().count(), 0);
    }

    #[test]
    fn open_nofollow_refuses_a_symlink_and_leaves_its_target_alone() {
        let base = tempfile::tempdir().unwrap();
        let victim = base.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let link = base.path().join("store.lock");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let err = open_nofollow(&link, OpenOptions::new().write(true).create(true)).unwrap_err();
        assert!(is_symlink_refusal(&err), "{err}");
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        // A dangling link is not created through either.
        let dangling = base.path().join("dangling");
        std::os::unix::fs::symlink(base.path().join("created-by-link"), &dangling).unwrap();
        let err =
            open_nofollow(&dangling, OpenOptions::new().write(true).create(true)).unwrap_err();
        assert!(is_symlink_refusal(&err), "{err}");
        assert!(!base.path().join("created-by-link").exists());

        let fresh = base.path().join("fresh");
        open_nofollow(&fresh, OpenOptions::new().write(true).create(true)).unwrap();
        assert_eq!(fs::metadata(&fresh).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            check_rename_target("the kv store", &link)
                .unwrap_err()
                .fault,
            Fault::Symlink
        );
        check_rename_target("the kv store", &fresh).unwrap();
    }
}
