//! SDS on the ADS stream: the hook through which gateways get their `credentialName` certificates.
//! The protocol treats `Secret` like any named type (subscriptions, versions, ACK/NACK); what a
//! resource holds and who may have it is the [`SecretSource`]'s (meshd's is `credentials`). Secrets
//! bypass the shared cache (they are per caller) and `/debug/config_dump` (they are secret).

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::watch;

use super::{Caller, Proxy, Resource};
use crate::envoy::Mesh;

/// What a stream asks the source for.
pub struct SecretRequest<'a> {
    /// The snapshot served (which Gateways reference which Secrets).
    pub mesh: &'a dyn Mesh,
    /// The proxy.
    pub proxy: &'a Proxy,
    /// The caller's verified namespace and service account; `None` on the plaintext port.
    pub identity: Option<(&'a str, &'a str)>,
    /// The resource names subscribed to.
    pub names: Vec<Arc<str>>,
}

/// Where SDS resources come from.
pub trait SecretSource: Send + Sync {
    /// Bumped whenever a secret the source serves changes: streams then re-send what changed.
    fn versions(&self) -> watch::Receiver<u64>;
    /// The resources of `req.names` the caller may have; the others are left out (and logged, by
    /// name only).
    fn secrets<'a>(&'a self, req: SecretRequest<'a>) -> BoxFuture<'a, Vec<Arc<Resource>>>;
}

impl Caller {
    /// The namespace and service account of the caller's first SPIFFE identity
    /// (`spiffe://<td>/ns/<ns>/sa/<sa>`): istiod's `VerifiedIdentity`.
    pub(crate) fn verified(&self) -> Option<(&str, &str)> {
        self.identities.iter().find_map(|id| {
            let (_, path) = id.strip_prefix("spiffe://")?.split_once('/')?;
            let mut parts = path.split('/');
            match (
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
                parts.next(),
            ) {
                (Some("ns"), Some(ns), Some("sa"), Some(sa), None) => Some((ns, sa)),
                _ => None,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verified_identity_is_the_first_spiffe_one() {
        let c = |ids: &[&str]| Caller {
            identities: ids.iter().map(|s| s.to_string()).collect(),
        };
        assert_eq!(c(&[]).verified(), None);
        assert_eq!(
            c(&["dns:x", "spiffe://cluster.local/ns/istio-system/sa/gw"]).verified(),
            Some(("istio-system", "gw"))
        );
        assert_eq!(c(&["spiffe://td/ns/a/sa/b/extra"]).verified(), None);
    }
}
