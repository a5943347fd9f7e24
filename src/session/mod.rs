//! Sessions: which kernel a request runs on, and the life of those kernels.
//!
//! `session` mode keeps one kernel per key (session id | session file | cwd, plus the real
//! cwd, the interpreter and the launcher the request named). A session that names no
//! launcher runs on the pool's default (`kernel.launcher`, or here), or where the pool
//! places it when its first kernel starts (see `placement.rs`), for the rest of its life.
//! Calls on one session take turns in call order (`kernel::fifo`); calls on different
//! sessions run at once. Idle sessions are evicted, and a heartbeat replaces kernels that
//! died or stopped answering while idle. A kernel that dies under a cell is replaced for
//! the next call, and that cell is not run again (it may have had effects); a request
//! whose first cell never reached a dead kernel runs in a fresh one. The result always
//! says when state was lost.
//! `per-call` mode starts a kernel per request and shuts it down after. A request may ask
//! for the other mode than its pool's (`PoolRequest::mode`): a `per-call` request in a
//! `session` pool runs in a kernel of its own and leaves its session alone; a `session`
//! request in a `per-call` pool gets a session as in a `session` pool.
//!
//! The pool's cap (`maxSessions` in a `session` pool, `maxConcurrent` in a `per-call` one,
//! or none: `'unlimited'`) counts kernel processes, spares and the kernels of requests of
//! either mode included: each holds a slot (`slots.rs`) until it is gone. A kernel that needs
//! room and finds none ends a spare, else the least recently used idle session, else
//! waits for a session to go idle, up to `acquire_timeout`. Room is only sought once the
//! interpreter resolved, so a request that cannot start ends nobody's kernel; a session
//! that never had a kernel is forgotten when its call ends.
//!
//! The kernel of a session is only changed by whoever holds the session's turn (a call,
//! or the heartbeat when the session is idle) or by disposal and eviction, which take it
//! away (eviction only from a session nobody is in line for) and shut it down.
//!
//! Which file owns what, from the bottom up (no file names one above it):
//! - `config.rs`: the pool's settings and mode, a request, the reading of its timeouts.
//! - `slots.rs`: the cap, one slot per kernel process.
//! - `pooled.rs`: what the pool needs of a kernel, and what starts one (`PooledKernel`,
//!   `KernelStarter`), for the real kernel; the pool is generic over it, so its logic is
//!   unit-tested over a stand-in (`fake.rs`, in tests only).
//! - `placement.rs`: where sessions that name no launcher run.
//! - `site.rs`: where one session's kernels run, placed or not yet.
//! - `key.rs`: the key of a request's session, from real paths.
//! - `live.rs`: a kernel process of the pool and its room: started in a slot, ended.
//! - `state.rs`: one session's state, and what `sessions` reports of it.
//! - `inner.rs`: the pool's shared state and bookkeeping (the session for a key,
//!   evictions remembered, disposal of a session, ending kernels).
//! - `room.rs`: finding room for a kernel (a spare, a free slot, an eviction, a bounded
//!   wait), and keeping spares ready.
//! - `run.rs`: running an admitted request: turns, starting and restarting the session's
//!   kernel, resets, the request's deadline.
//! - `per_call.rs`: a `per-call` request's own kernels.
//! - `per_calls.rs`: the `per-call` requests running now, which disposal stops.
//! - `request_end.rs`: a request ended short of its cells (aborted before its kernel was
//!   ready, a reset's kernel that did not start), and starts bounded by its deadline.
//! - `maintain.rs`: idle eviction, the heartbeat, retries of unconfirmed shutdowns.
//! - `pool.rs`: the pool itself: admission, `sessions`, disposal and `reopen`.

pub mod config;
#[cfg(test)]
mod fake;
mod inner;
pub mod key;
mod live;
mod maintain;
mod per_call;
mod per_calls;
pub mod placement;
pub mod pool;
pub mod pooled;
mod request_end;
mod room;
mod run;
mod site;
pub mod slots;
mod state;
