//! What every start function gets: the task spawner ([`drain`](crate::drain)) and the readiness
//! tracker ([`readiness`](crate::readiness)). Does NOT: order or run start functions (`app::Server`).

use crate::{drain::Tasks, readiness::Ready};

/// The start context, shared by every component. Cheap to clone.
#[derive(Clone, Debug)]
pub struct StartContext {
    /// Spawns named, traced, drained tasks.
    pub tasks: Tasks,
    /// Register a guard here to hold readiness until initial work is done.
    pub ready: Ready,
}
