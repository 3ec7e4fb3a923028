//! The target bodies, shared with the stable loop in `tests/integration/torture_fuzz.rs`.
#[path = "targets.rs"]
mod targets;
pub use targets::*;
mod stream;
pub use stream::discovery_stream;
