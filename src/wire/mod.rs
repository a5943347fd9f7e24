//! The wire between host and runner: the frames both sides write, reading them off a
//! pipe, and the events a cell's frames become. No processes, no I/O of its own beyond
//! the reader it is given (`docs/protocol.md` is the contract).

pub mod events;
pub mod frame_reader;
pub mod protocol;
pub mod zygote;
