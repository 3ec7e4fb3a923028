//! Fault injection: refuse or hang connections, fail every request, drop or silence watches, compact
//! history.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};
use std::time::Duration;

use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::error::Error;
use super::store::Store;

/// How the simulated cluster misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultMode {
    #[default]
    None,
    /// Every API request answers with this HTTP status (429 adds `Retry-After`).
    Error { status: u16 },
    /// Requests are accepted and never answered (until the mode changes).
    Hang,
    /// Open connections are cut and new ones reset; the port stays bound so the cluster can come back.
    Refuse,
}

/// The live fault switches, shared by the listener, the request path and the watch streams.
pub struct Faults {
    /// Shared with the timers that end a fault set `forSeconds`.
    mode: Arc<watch::Sender<FaultMode>>,
    /// Cancelled (and replaced) to drop every open watch.
    watches: Mutex<CancellationToken>,
    /// Cancelled (and replaced) to silence every open watch: a blackholed connection.
    silenced: Mutex<CancellationToken>,
    /// Cancelled (and replaced) to cut every open connection when entering refuse mode.
    connections: Mutex<CancellationToken>,
    /// API requests answered with an injected error so far: how hard clients retry during a storm.
    failed: AtomicU64,
}

/// The JSON body of `POST /sandbox/v1/faults`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FaultRequest {
    mode: Option<String>,
    status: Option<u16>,
    #[serde(default)]
    compact: bool,
    #[serde(default)]
    drop_watches: bool,
    /// Every open watch goes silent, as behind a network blackhole: no more events or bookmarks, never
    /// ended by the server; only the client can give up on it. New watches work normally.
    #[serde(default)]
    silence_watches: bool,
    /// Ends the fault (back to `none`) after this long, unless the mode was changed meanwhile: the way
    /// to simulate a restart, since a refusing server cannot be reached to switch refuse mode off.
    for_seconds: Option<f64>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            mode: Arc::new(watch::channel(FaultMode::None).0),
            watches: Mutex::new(CancellationToken::new()),
            silenced: Mutex::new(CancellationToken::new()),
            connections: Mutex::new(CancellationToken::new()),
            failed: AtomicU64::new(0),
        }
    }
}

impl Faults {
    pub fn set(&self, mode: FaultMode) {
        if mode == FaultMode::Refuse {
            std::mem::take(&mut *self.connections.lock()).cancel();
        }
        self.mode.send_replace(mode);
    }

    pub fn mode(&self) -> FaultMode {
        *self.mode.borrow()
    }

    /// Ends every open watch stream (clients see the connection's response end and re-watch).
    pub fn drop_watches(&self) {
        std::mem::take(&mut *self.watches.lock()).cancel();
    }

    pub(crate) fn watch_token(&self) -> CancellationToken {
        self.watches.lock().clone()
    }

    pub(crate) fn silence_token(&self) -> CancellationToken {
        self.silenced.lock().clone()
    }

    pub(crate) fn connection_token(&self) -> CancellationToken {
        self.connections.lock().clone()
    }

    /// Resolves once the cluster is no longer in hang mode.
    pub(crate) async fn wait_while_hanging(&self) {
        let mut rx = self.mode.subscribe();
        // Err only when the sender is gone, i.e. the server is shutting down.
        let _ = rx.wait_for(|m| *m != FaultMode::Hang).await;
    }

    /// The injected failure for an API request, if any.
    pub(crate) fn failure(&self) -> Option<Error> {
        match self.mode() {
            FaultMode::Error { status } => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                Some(Error::Injected(status))
            }
            _ => None,
        }
    }

    /// Applies a `/sandbox/v1/faults` request body and reports the resulting state.
    pub(crate) fn handle_request(&self, store: &Store, body: Value) -> Result<Value, Error> {
        let req: FaultRequest = serde_json::from_value(body)
            .map_err(|e| Error::BadRequest(format!("invalid fault request: {e}")))?;
        let mode = match (req.mode.as_deref(), req.status) {
            (None, _) => None,
            (Some("none"), _) => Some(FaultMode::None),
            (Some("hang"), _) => Some(FaultMode::Hang),
            (Some("refuse"), _) => Some(FaultMode::Refuse),
            (Some("error"), status) => match status.unwrap_or(500) {
                s @ 400..=599 => Some(FaultMode::Error { status: s }),
                s => {
                    return Err(Error::BadRequest(format!(
                        "fault status {s} is not an HTTP error code"
                    )));
                }
            },
            (Some(other), _) => {
                return Err(Error::BadRequest(format!(
                    "unknown fault mode {other:?}: want none, error, hang or refuse"
                )));
            }
        };
        if req.compact {
            store.compact();
        }
        if req.drop_watches {
            self.drop_watches();
        }
        if req.silence_watches {
            std::mem::take(&mut *self.silenced.lock()).cancel();
        }
        if let Some(mode) = mode {
            self.set(mode);
            if let Some(secs) = req.for_seconds {
                let secs = Duration::try_from_secs_f64(secs)
                    .map_err(|e| Error::BadRequest(format!("invalid forSeconds: {e}")))?;
                self.revert_after(mode, secs);
            }
        }
        Ok(self.describe())
    }

    /// Switches back to no fault after `after`, if `mode` is still the one in force then.
    fn revert_after(&self, mode: FaultMode, after: Duration) {
        let sender = self.mode.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            sender.send_if_modified(|m| {
                let revert = *m == mode;
                if revert {
                    *m = FaultMode::None;
                }
                revert
            });
        });
    }

    pub(crate) fn describe(&self) -> Value {
        let mut state = match self.mode() {
            FaultMode::None => json!({"mode": "none"}),
            FaultMode::Error { status } => json!({"mode": "error", "status": status}),
            FaultMode::Hang => json!({"mode": "hang"}),
            FaultMode::Refuse => json!({"mode": "refuse"}),
        };
        state["failedRequests"] = self.failed.load(Ordering::Relaxed).into();
        state
    }
}
