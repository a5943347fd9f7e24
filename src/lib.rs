//! pykernel: run Python for AI coding agents. This file only declares modules; the napi
//! surface lives in `napi_api.rs` (kernel, interpreter, env) and `napi_output.rs`
//! (rendering helpers).

pub mod command;
pub mod env;
pub mod error;
pub mod events;
pub mod kernel;
mod napi_api;
mod napi_output;
pub mod output;
pub mod protocol;
pub mod runner_script;
pub mod runtime;
