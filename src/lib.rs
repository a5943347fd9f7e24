//! pykernel: run Python for AI coding agents. This file only declares the layers;
//! `docs/architecture.md` says what each folder owns and which may use which.

pub mod error;
pub mod eval;
pub mod kernel;
mod napi;
pub mod output;
pub mod process;
pub mod sandbox;
pub mod session;
pub mod start;
pub mod store;
pub mod wire;

#[cfg(test)]
mod fuzz_tests;
