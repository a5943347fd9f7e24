//! The filesystem view's steps as system calls (see `view.rs` for what they make and
//! why): their strings made ready before the fork, applied by the kernel's init between
//! fork and exec with plain system calls and no allocation, or written as JSON for a
//! kernel the zygote forks, which applies them itself (`pykernel_runner/zygote.py`'s `_View`).

use std::ffi::CString;
use std::io;
use std::path::Path;

use nix::libc;

use super::view::Step;

/// The steps with their strings made ready for system calls (no allocation after fork).
pub struct Prepared {
    steps: Vec<Step>,
    c: Vec<CStep>,
}

enum CStep {
    MakePrivate,
    SetAttr {
        path: CString,
        recursive: bool,
        set: u64,
        clear: u64,
    },
    Bind {
        source: CString,
        target: CString,
    },
    Clone {
        slot: usize,
        source: CString,
    },
    Attach {
        slot: usize,
        target: CString,
    },
    Mount {
        fstype: CString,
        target: CString,
        flags: libc::c_ulong,
        data: CString,
    },
    Remount {
        target: CString,
        flags: libc::c_ulong,
    },
    MakeDir(CString),
    MakeFile(CString),
    Symlink {
        target: CString,
        link: CString,
    },
    ChangeDir(CString),
    BindReadOnly {
        path: CString,
        kept: libc::c_ulong,
    },
    Mask(CString),
}

fn c(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
/// The most copies a view holds at once (paths kept under `/tmp`, device nodes).
pub const MAX_SLOTS: usize = 64;

impl Prepared {
    pub fn new(steps: Vec<Step>) -> io::Result<Prepared> {
        let mut slots = 0;
        let c_steps = steps
            .iter()
            .map(|step| {
                Ok(match step {
                    Step::MakePrivate => CStep::MakePrivate,
                    Step::ReadOnlyTree(p) => CStep::SetAttr {
                        path: c(p)?,
                        recursive: true,
                        set: MOUNT_ATTR_RDONLY,
                        clear: 0,
                    },
                    Step::Writable(p) => CStep::SetAttr {
                        path: c(p)?,
                        recursive: false,
                        set: 0,
                        clear: MOUNT_ATTR_RDONLY,
                    },
                    Step::Bind { source, target } => CStep::Bind {
                        source: c(source)?,
                        target: c(target)?,
                    },
                    Step::Clone { slot, source } => {
                        slots = slots.max(slot + 1);
                        CStep::Clone {
                            slot: *slot,
                            source: c(source)?,
                        }
                    }
                    Step::Attach { slot, target } => CStep::Attach {
                        slot: *slot,
                        target: c(target)?,
                    },
                    Step::Mount {
                        fstype,
                        target,
                        flags,
                        data,
                    } => CStep::Mount {
                        fstype: CString::new(*fstype).unwrap(),
                        target: c(target)?,
                        flags: *flags,
                        data: CString::new(data.as_str()).unwrap(),
                    },
                    Step::Remount { target, flags } => CStep::Remount {
                        target: c(target)?,
                        flags: *flags,
                    },
                    Step::MakeDir(p) => CStep::MakeDir(c(p)?),
                    Step::MakeFile(p) => CStep::MakeFile(c(p)?),
                    Step::Symlink { target, link } => CStep::Symlink {
                        target: c(target)?,
                        link: c(link)?,
                    },
                    Step::ChangeDir(p) => CStep::ChangeDir(c(p)?),
                    Step::Mask(p) => CStep::Mask(c(p)?),
                    Step::BindReadOnly { path, kept } => CStep::BindReadOnly {
                        path: c(path)?,
                        kept: *kept,
                    },
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        if slots > MAX_SLOTS {
            return Err(io::Error::other(format!(
                "the view needs {slots} mount copies; at most {MAX_SLOTS} are kept"
            )));
        }
        Ok(Prepared { steps, c: c_steps })
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Applies every step; on failure, the index of the step that failed and its error.
    ///
    /// # Safety
    /// Between fork and exec (in the new mount namespace, as its user namespace's root):
    /// plain system calls over memory made before the fork.
    pub unsafe fn apply(&self) -> Result<(), (usize, io::Error)> {
        let mut fds = [-1 as libc::c_int; MAX_SLOTS];
        for (index, step) in self.c.iter().enumerate() {
            let result = match step {
                CStep::MakePrivate => check(libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                )),
                CStep::SetAttr {
                    path,
                    recursive,
                    set,
                    clear,
                } => set_attr(path, *recursive, *set, *clear),
                CStep::Bind { source, target } => bind(source, target),
                CStep::Clone { slot, source } => {
                    let fd = libc::syscall(
                        libc::SYS_open_tree,
                        libc::AT_FDCWD,
                        source.as_ptr(),
                        OPEN_TREE_CLONE
                            | libc::AT_RECURSIVE as libc::c_uint
                            | libc::O_CLOEXEC as libc::c_uint,
                    );
                    if fd >= 0 {
                        fds[*slot] = fd as libc::c_int;
                        Ok(())
                    } else {
                        Err(io::Error::last_os_error())
                    }
                }
                CStep::Attach { slot, target } => {
                    let r = libc::syscall(
                        libc::SYS_move_mount,
                        fds[*slot],
                        c"".as_ptr(),
                        libc::AT_FDCWD,
                        target.as_ptr(),
                        MOVE_MOUNT_F_EMPTY_PATH,
                    );
                    libc::close(fds[*slot]);
                    fds[*slot] = -1;
                    check(r as libc::c_int)
                }
                CStep::Mount {
                    fstype,
                    target,
                    flags,
                    data,
                } => check(libc::mount(
                    fstype.as_ptr(),
                    target.as_ptr(),
                    fstype.as_ptr(),
                    *flags,
                    data.as_ptr().cast(),
                )),
                CStep::Remount { target, flags } => check(libc::mount(
                    std::ptr::null(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REMOUNT | libc::MS_BIND | *flags,
                    std::ptr::null(),
                )),
                CStep::MakeDir(path) => check(libc::mkdir(path.as_ptr(), 0o755)),
                CStep::MakeFile(path) => {
                    let fd = libc::open(
                        path.as_ptr(),
                        libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                        0o644,
                    );
                    if fd >= 0 {
                        libc::close(fd);
                    }
                    check(fd)
                }
                CStep::Symlink { target, link } => {
                    check(libc::symlink(target.as_ptr(), link.as_ptr()))
                }
                CStep::ChangeDir(path) => check(libc::chdir(path.as_ptr())),
                CStep::Mask(path) => match check(libc::mount(
                    c"/dev/null".as_ptr(),
                    path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )) {
                    Err(e)
                        if matches!(
                            e.raw_os_error(),
                            Some(libc::ENOENT | libc::ENOTDIR | libc::EISDIR)
                        ) =>
                    {
                        Ok(())
                    }
                    other => other,
                },
                CStep::BindReadOnly { path, kept } => bind(path, path).and_then(|()| {
                    check(libc::mount(
                        std::ptr::null(),
                        path.as_ptr(),
                        std::ptr::null(),
                        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | *kept,
                        std::ptr::null(),
                    ))
                }),
            };
            if let Err(err) = result {
                for fd in fds.iter().filter(|fd| **fd >= 0) {
                    libc::close(*fd);
                }
                return Err((index, err));
            }
        }
        Ok(())
    }

    /// The steps as JSON, for a kernel that applies them itself (`pykernel_runner/zygote.py`):
    /// `[op, ...args]` each.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let s = |p: &Path| p.display().to_string();
        let list: Vec<serde_json::Value> = self
            .steps
            .iter()
            .map(|step| match step {
                Step::MakePrivate => json!(["private"]),
                Step::ReadOnlyTree(p) => json!(["read-only", s(p)]),
                Step::Writable(p) => json!(["writable", s(p)]),
                Step::Bind { source, target } => json!(["bind", s(source), s(target)]),
                Step::Clone { slot, source } => json!(["clone", slot, s(source)]),
                Step::Attach { slot, target } => json!(["attach", slot, s(target)]),
                Step::Mount {
                    fstype,
                    target,
                    flags,
                    data,
                } => json!(["mount-fs", fstype, s(target), flags, data]),
                Step::Remount { target, flags } => json!(["remount", s(target), flags]),
                Step::MakeDir(p) => json!(["mkdir", s(p)]),
                Step::MakeFile(p) => json!(["mkfile", s(p)]),
                Step::Symlink { target, link } => json!(["symlink", s(target), s(link)]),
                Step::ChangeDir(p) => json!(["chdir", s(p)]),
                Step::BindReadOnly { path, kept } => json!(["bind-read-only", s(path), kept]),
                Step::Mask(p) => json!(["mask", s(p)]),
            })
            .collect();
        serde_json::Value::Array(list)
    }
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `source` (with what is mounted beneath it) bound at `target`.
unsafe fn bind(source: &CString, target: &CString) -> io::Result<()> {
    check(libc::mount(
        source.as_ptr(),
        target.as_ptr(),
        std::ptr::null(),
        libc::MS_BIND | libc::MS_REC,
        std::ptr::null(),
    ))
}

unsafe fn set_attr(path: &CString, recursive: bool, set: u64, clear: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    let r = libc::syscall(
        libc::SYS_mount_setattr,
        libc::AT_FDCWD,
        path.as_ptr(),
        flags as libc::c_uint,
        &attr as *const MountAttr,
        std::mem::size_of::<MountAttr>(),
    );
    check(r as libc::c_int)
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::view::{steps, ViewSpec};

    #[test]
    fn every_step_serializes_for_a_forked_kernel() {
        let spec = ViewSpec {
            cwd: "/".into(),
            ..ViewSpec::default()
        };
        let steps = steps(&spec).unwrap().0;
        let n = steps.len();
        let prepared = Prepared::new(steps).unwrap();
        let json = prepared.to_json();
        assert_eq!(json.as_array().unwrap().len(), n);
        assert_eq!(json[0], serde_json::json!(["private"]));
    }
}
