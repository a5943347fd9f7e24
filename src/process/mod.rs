//! A kernel's processes as the operating system sees them: how a process ended, reaping
//! it and its group, the cap on how many it may run, and the pids cgroup behind that cap.
//! Nothing here knows the wire or a session.

pub mod confined;
pub mod exit;
pub mod limit;
pub mod pids_cgroup;
pub mod reaper;
