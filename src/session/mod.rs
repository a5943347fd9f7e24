//! Sessions: which kernel a request runs on, and the life of those kernels (the pool,
//! room for them, where they are placed).

pub mod placement;
pub mod pool;
pub mod slots;
