//! What every stream is given: the caller's identity, the limits, and the state shared by every stream
//! of every port (snapshot source, cache, split-horizon view, metrics, push permits).

use std::sync::{Arc, OnceLock};

use tokio::sync::Semaphore;

use super::{
    Error,
    cache::ResourceCache,
    metrics::Metrics,
    push::{RateLimiter, SnapshotSource, default_concurrency},
    secrets::SecretSource,
    status::{Connections, PushLog},
};
use crate::{
    drain::Tasks,
    envoy::{EndpointView, Proxy},
    readiness::Ready,
};

/// Who is on the other end of a stream, as the authenticator established it.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// SPIFFE identities (`spiffe://<td>/ns/<ns>/sa/<sa>`); empty for an unauthenticated plaintext
    /// caller, which may then claim any node identity (as on istiod's 15010).
    pub identities: Vec<String>,
}

impl Caller {
    /// istiod's `authorize`: an authenticated caller may only be a proxy in its own namespace and
    /// service account.
    pub(crate) fn authorize(&self, proxy: &Proxy) -> Result<(), Error> {
        if self.identities.is_empty() {
            return Ok(());
        }
        let ns = proxy.namespace.as_deref().unwrap_or("");
        let ok = self.identities.iter().any(|id| {
            let Some((_, path)) = id.strip_prefix("spiffe://").and_then(|r| r.split_once('/')) else {
                return false;
            };
            let mut parts = path.split('/');
            let (Some("ns"), Some(id_ns), Some("sa"), Some(id_sa)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return false;
            };
            id_ns == ns && proxy.service_account.as_deref().is_none_or(|sa| sa == id_sa)
        });
        if ok {
            return Ok(());
        }
        Err(Error::IdentityMismatch {
            claimed: format!("ns/{ns}/sa/{}", proxy.service_account.as_deref().unwrap_or("")),
            authenticated: self.identities.clone(),
        })
    }
}

/// Limits on what clients may cost.
#[derive(Debug, Clone)]
pub struct XdsLimits {
    /// Largest request accepted (istiod's `ISTIO_GPRC_MAXRECVMSGSIZE`, 4 MiB).
    pub max_request_bytes: usize,
    /// Largest response sent.
    pub max_response_bytes: usize,
    /// Streams pushed to at once (`PILOT_PUSH_THROTTLE`).
    pub push_concurrency: usize,
    /// New streams accepted per second (`PILOT_MAX_REQUESTS_PER_SECOND`), in bursts of up to one
    /// second's worth (at least one).
    pub new_streams_per_second: f64,
    /// Entries in the shared resource cache.
    pub cache_capacity: usize,
}

impl Default for XdsLimits {
    fn default() -> Self {
        Self {
            max_request_bytes: 4 << 20,
            max_response_bytes: 64 << 20,
            push_concurrency: default_concurrency(),
            new_streams_per_second: default_concurrency() as f64,
            cache_capacity: super::cache::DEFAULT_CAPACITY,
        }
    }
}

impl XdsLimits {
    /// These limits with `rate` new streams per second (`--max-new-streams-per-second`); 0 keeps the
    /// automatic default, as istiod's 0 does.
    pub fn with_new_stream_rate(self, rate: f64) -> Self {
        if rate > 0.0 {
            Self {
                new_streams_per_second: rate,
                ..self
            }
        } else {
            self
        }
    }
}

/// State shared by every stream of every port.
pub(crate) struct Shared {
    pub(crate) snapshots: Arc<dyn SnapshotSource>,
    pub(crate) cache: ResourceCache,
    pub(crate) endpoints: Arc<dyn EndpointView>,
    pub(crate) metrics: Metrics,
    pub(crate) connections: Connections,
    pub(crate) push_log: PushLog,
    pub(crate) permits: Arc<Semaphore>,
    pub(crate) tasks: Tasks,
    pub(crate) stream_limit: RateLimiter,
    pub(crate) limits: XdsLimits,
    /// Where SDS secrets come from, once set ([`super::AdsServer::serve_secrets`]); none: SDS answers
    /// nothing.
    pub(crate) secrets: OnceLock<Arc<dyn SecretSource>>,
    /// Once set ([`super::AdsServer::serve_when_ready`]), new streams are refused until meshd is ready,
    /// as istiod refuses them: a proxy served before the initial remotes synced gets partial config,
    /// then all of it again as they arrive.
    pub(crate) gate: OnceLock<Ready>,
}
