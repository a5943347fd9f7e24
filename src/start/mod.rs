//! Everything that comes before a kernel's first frame: which Python, which environment,
//! the runner's files and their bytecode, the private tmp, and the three ways to start
//! the process (spawned, forked from a zygote, launched on another host).

pub mod bytecode;
pub mod command;
pub mod env;
pub mod far_cache;
pub mod host_dir;
pub mod launcher;
pub mod python;
pub mod runner_files;
pub mod session_dir;
#[cfg(target_os = "linux")]
pub mod zygote;
#[cfg(target_os = "linux")]
pub mod zygote_imports;
