//! Cells for an agent: running a list of cells on one kernel into one agent-ready result,
//! the agent's text of it, the sandbox's refusals in it, how a run of another executor
//! ended (for `OutputBuilder`), and which eval backends a host tool offers.

pub mod agent_text;
pub mod backends;
pub mod executor;
pub mod live;
pub mod refusals;
pub mod run_end;
