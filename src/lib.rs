//! pykernel: run Python for AI coding agents. This file only declares modules; the
//! JavaScript surface lives in `napi/`, everything with behaviour in the others.

pub mod agent_text;
pub mod backends;
pub mod bytecode;
pub mod command;
pub mod env;
pub mod error;
pub mod events;
pub mod executor;
pub mod fifo;
pub mod frame_reader;
pub mod kernel;
pub mod kv;
pub mod launcher;
mod napi;
pub mod output;
pub mod pids_cgroup;
pub mod placement;
pub mod pool;
pub mod private_tmp;
pub mod process_guard;
pub mod protocol;
pub mod reaper;
pub mod runner_script;
pub mod runtime;
pub mod safe_fs;
pub mod sandbox;
pub mod slots;
pub mod watchdog;
#[cfg(target_os = "linux")]
pub mod zygote;

#[cfg(test)]
mod fuzz_tests;
