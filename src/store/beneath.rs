//! Opening a file beneath a directory so that no name can lead out of it: the files of a
//! `uriRoots` root, which the host reads and writes for a cell (`local://notes.md`).
//!
//! Why: the cell names the path, and it may also be able to write inside the root: plant a
//! symlink to `/etc`, swap a directory for a symlink between a check and an open. So a
//! path is never checked and then opened by name. Everything is opened relative to a
//! descriptor of the root: on Linux 5.6+ with `openat2(RESOLVE_BENEATH)`, where the kernel
//! itself refuses any step out of the root (`..`, an absolute symlink, a symlink leading
//! out; a symlink that stays inside is followed); elsewhere (older kernels, macOS) one
//! component at a time with `O_NOFOLLOW`, so no symlink is followed at all. Directories
//! are made with `mkdirat` on a descriptor already opened this way, one name at a time.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;

/// How a path beneath a root is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: symlinks that stay inside are
    /// followed.
    Beneath,
    /// One component at a time with `O_NOFOLLOW`: no symlink is followed.
    NoSymlinks,
}

const UNKNOWN: u8 = 0;
const HAS_OPENAT2: u8 = 1;
const NO_OPENAT2: u8 = 2;
static OPENAT2: AtomicU8 = AtomicU8::new(UNKNOWN);

/// How this machine resolves paths beneath a root (learnt at the first open).
pub fn resolution() -> Resolution {
    match OPENAT2.load(Ordering::Relaxed) {
        NO_OPENAT2 => Resolution::NoSymlinks,
        _ if cfg!(target_os = "linux") => Resolution::Beneath,
        _ => Resolution::NoSymlinks,
    }
}

/// The root itself, as a directory descriptor. The root is the host's own setting: the
/// path to it is followed, but not a symlink in its place (one a cell may have put there).
pub fn open_root(root: &Path) -> io::Result<OwnedFd> {
    Ok(nix::fcntl::open(
        root,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens `parts` (plain names: no `/`, `.`, `..` or empty one) beneath `root` with
/// `flags` (`mode` for a file it creates). A step out of the root fails with `EXDEV`
/// (through `openat2`) or `ELOOP` (a symlink, one component at a time).
pub fn open_beneath(
    root: BorrowedFd<'_>,
    parts: &[&str],
    flags: OFlag,
    mode: Mode,
) -> io::Result<OwnedFd> {
    #[cfg(target_os = "linux")]
    if OPENAT2.load(Ordering::Relaxed) != NO_OPENAT2 {
        use nix::fcntl::{openat2, OpenHow, ResolveFlag};
        let mut how = OpenHow::new()
            .flags(flags | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        if flags.contains(OFlag::O_CREAT) {
            how = how.mode(mode);
        }
        match openat2(root, parts.join("/").as_str(), how) {
            Err(err) if falls_back(err, || probe_openat2(root)) => {
                OPENAT2.store(NO_OPENAT2, Ordering::Relaxed)
            }
            done => {
                OPENAT2.store(HAS_OPENAT2, Ordering::Relaxed);
                return Ok(done?);
            }
        }
    }
    open_without_symlinks(root, parts, flags, mode)
}

/// Whether `openat2` failing with `err` means this process cannot use it at all (so the
/// walk of [`open_without_symlinks`] takes its place from now on), not that this one open
/// failed. `ENOSYS`: not in this kernel; `E2BIG`: an older `struct open_how`. `EPERM` is
/// what a container's seccomp profile answers for a call it does not allow, but also what
/// an open can fail with on its own (an immutable file opened for writing), so it counts
/// only when `probe` (an `openat2` that cannot fail on its own) fails the same way.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn falls_back(err: Errno, probe: impl FnOnce() -> Result<(), Errno>) -> bool {
    match err {
        Errno::ENOSYS | Errno::E2BIG => true,
        Errno::EPERM => matches!(probe(), Err(Errno::EPERM | Errno::ENOSYS)),
        _ => false,
    }
}

/// `openat2` of the root itself (`.`, `O_PATH`): refused only by a filter on the call.
#[cfg(target_os = "linux")]
fn probe_openat2(root: BorrowedFd<'_>) -> Result<(), Errno> {
    use nix::fcntl::{openat2, OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH);
    openat2(root, ".", how).map(drop)
}

/// [`open_beneath`] one component at a time, following no symlink.
pub fn open_without_symlinks(
    root: BorrowedFd<'_>,
    parts: &[&str],
    flags: OFlag,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let Some((last, dirs)) = parts.split_last() else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    let mut held: Option<OwnedFd> = None;
    for name in dirs {
        let at = held.as_ref().map_or(root, |fd| fd.as_fd());
        let next = openat(
            at,
            *name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            // A symlink where a directory was expected: said as one (`ELOOP`).
            Errno::ENOTDIR if is_symlink_at(at, name) => Errno::ELOOP,
            e => e,
        })?;
        held = Some(next);
    }
    let at = held.as_ref().map_or(root, |fd| fd.as_fd());
    Ok(openat(
        at,
        *last,
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        mode,
    )?)
}

fn is_symlink_at(dir: BorrowedFd<'_>, name: &str) -> bool {
    use nix::sys::stat::{fstatat, SFlag};
    fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
}

/// The directory `dirs` beneath `root`, made (mode `mode`) where missing, each one by
/// `mkdirat` on its parent's descriptor and opened again beneath the root; those made
/// here are given to `owner` (uid, gid) when one is named.
pub fn make_dirs_beneath(
    root: BorrowedFd<'_>,
    dirs: &[&str],
    mode: Mode,
    owner: Option<(u32, u32)>,
) -> io::Result<OwnedFd> {
    let directory = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
    let mut parent: Option<OwnedFd> = None;
    for depth in 1..=dirs.len() {
        let opened = match open_beneath(root, &dirs[..depth], directory, Mode::empty()) {
            Err(e) if e.raw_os_error() == Some(Errno::ENOENT as i32) => {
                let at = parent.as_ref().map_or(root, |fd| fd.as_fd());
                let made = match nix::sys::stat::mkdirat(at, dirs[depth - 1], mode) {
                    Ok(()) => true,
                    // Made meanwhile by another writer: opened below like any other.
                    Err(Errno::EEXIST) => false,
                    Err(e) => return Err(e.into()),
                };
                let opened = open_beneath(root, &dirs[..depth], directory, Mode::empty())?;
                if let (true, Some((uid, gid))) = (made, owner) {
                    nix::unistd::fchown(
                        opened.as_fd(),
                        Some(nix::unistd::Uid::from_raw(uid)),
                        Some(nix::unistd::Gid::from_raw(gid)),
                    )?;
                }
                opened
            }
            other => other?,
        };
        parent = Some(opened);
    }
    match parent {
        Some(fd) => Ok(fd),
        None => Ok(root.try_clone_to_owned()?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn errno(err: &io::Error) -> i32 {
        err.raw_os_error().unwrap_or_default()
    }

    #[test]
    fn no_symlink_leads_out_either_way() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        fs::create_dir_all(root.join("inside")).unwrap();
        fs::write(root.join("inside/file"), "in").unwrap();
        fs::write(base.path().join("secret"), "out").unwrap();
        symlink(base.path(), root.join("up")).unwrap();
        symlink("../secret", root.join("rel")).unwrap();
        symlink("inside/file", root.join("near")).unwrap();
        let fd = open_root(&root).unwrap();
        let read = OFlag::O_RDONLY;

        for parts in [&["up", "secret"][..], &["rel"]] {
            let err = open_beneath(fd.as_fd(), parts, read, Mode::empty()).unwrap_err();
            assert!(
                [libc_errno(Errno::EXDEV), libc_errno(Errno::ELOOP)].contains(&errno(&err)),
                "{parts:?}: {err}"
            );
            let err = open_without_symlinks(fd.as_fd(), parts, read, Mode::empty()).unwrap_err();
            assert!(
                [libc_errno(Errno::ELOOP), libc_errno(Errno::ENOTDIR)].contains(&errno(&err)),
                "{parts:?}: {err}"
            );
        }
        // A symlink that stays inside: followed by openat2 only.
        let opened = open_beneath(fd.as_fd(), &["near"], read, Mode::empty());
        match resolution() {
            Resolution::Beneath => assert!(opened.is_ok()),
            Resolution::NoSymlinks => assert!(opened.is_err()),
        }
        assert!(open_without_symlinks(fd.as_fd(), &["near"], read, Mode::empty()).is_err());
        open_without_symlinks(fd.as_fd(), &["inside", "file"], read, Mode::empty()).unwrap();
    }

    fn libc_errno(e: Errno) -> i32 {
        e as i32
    }

    #[test]
    fn openat2_refused_by_a_filter_falls_back_to_the_walk_and_a_files_own_eperm_does_not() {
        let never = || -> Result<(), Errno> { panic!("no probe needed") };
        assert!(falls_back(Errno::ENOSYS, never));
        assert!(falls_back(Errno::E2BIG, never));
        // A container's seccomp profile: every openat2 is EPERM, the probe too.
        assert!(falls_back(Errno::EPERM, || Err(Errno::EPERM)));
        assert!(falls_back(Errno::EPERM, || Err(Errno::ENOSYS)));
        // The file's own EPERM (immutable, opened for writing): openat2 itself works.
        assert!(!falls_back(Errno::EPERM, || Ok(())));
        for own in [Errno::ENOENT, Errno::EXDEV, Errno::ELOOP, Errno::EACCES] {
            assert!(!falls_back(own, never), "{own}");
        }
        // The probe itself answers on a real root.
        #[cfg(target_os = "linux")]
        {
            let base = tempfile::tempdir().unwrap();
            let fd = open_root(base.path()).unwrap();
            assert!(probe_openat2(fd.as_fd()).is_ok());
        }
    }

    #[test]
    fn missing_directories_are_made_beneath_the_root_and_a_planted_link_stops_them() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        fs::create_dir(&root).unwrap();
        let fd = open_root(&root).unwrap();
        make_dirs_beneath(
            fd.as_fd(),
            &["a", "b"],
            Mode::from_bits_truncate(0o700),
            None,
        )
        .unwrap();
        let made = fs::metadata(root.join("a/b")).unwrap();
        assert!(made.is_dir());
        assert_eq!(made.permissions().mode() & 0o777, 0o700);

        let outside = base.path().join("outside");
        fs::create_dir(&outside).unwrap();
        symlink(&outside, root.join("link")).unwrap();
        let err = make_dirs_beneath(
            fd.as_fd(),
            &["link", "c"],
            Mode::from_bits_truncate(0o700),
            None,
        )
        .unwrap_err();
        assert!(
            [libc_errno(Errno::EXDEV), libc_errno(Errno::ELOOP)].contains(&errno(&err)),
            "{err}"
        );
        assert_eq!(
            fs::read_dir(&outside).unwrap().count(),
            0,
            "nothing made outside"
        );

        // The root itself replaced by a symlink is not followed.
        let moved = base.path().join("moved");
        fs::rename(&root, &moved).unwrap();
        symlink(&outside, &root).unwrap();
        let err = open_root(&root).unwrap_err();
        assert!(
            [libc_errno(Errno::ENOTDIR), libc_errno(Errno::ELOOP)].contains(&errno(&err)),
            "{err}"
        );
    }
}
