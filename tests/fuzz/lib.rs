//! The target bodies, shared with the stable loop in `tests/torture_fuzz.rs`.
#[path = "targets.rs"]
mod targets;
pub use targets::*;
mod stream;
pub use stream::discovery_stream;
