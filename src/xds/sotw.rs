//! The state-of-the-world protocol state machine for one stream (istiod's `ShouldRespond`).
//!
//! Owns: per-type subscriptions, nonces, versions and what was last sent, and the decision whether a
//! request or a push gets a response. Pure: no I/O, no clock, so every rule is a unit test. Does NOT:
//! generate resources (it is handed them) or read the stream.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;

use super::{
    Resource, XdsType,
    held::Held,
    protocol::{Decision, Exchange, Ignored, Mode, Nonces, Protocol, TypeStatus},
    subscription::{Subscription, intern, intern_names},
    wire::{self, Frame},
};

/// Most resource names one request may subscribe to; more is a client bug or an attack.
pub(crate) const MAX_NAMES: usize = 100_000;

/// SotW state of one stream.
#[derive(Debug, Default)]
pub(crate) struct Sotw {
    watches: BTreeMap<XdsType, Watch>,
    nonces: Nonces,
    /// What the client was last sent, per type.
    held: Held,
}

#[derive(Debug, Default)]
struct Watch {
    sub: Subscription,
    /// The legacy wildcard rule: an empty name list means wildcard only until the client has named
    /// something; afterwards it means "unsubscribe from everything".
    ever_named: bool,
    exchange: Exchange,
}

impl Protocol for Sotw {
    type Request = DiscoveryRequest;
    /// No: a SotW client acknowledges every response with its whole name list (≈ 60 KiB for a sidecar
    /// watching 1,000 clusters), so 150 parts of one EDS set are 150 such requests while meshd is still
    /// writing: a client with bounded buffers stops reading, and both sides wait forever. One response
    /// per type, as istiod sends.
    const SPLITS_LARGE_SETS: bool = false;

    fn type_url(req: &DiscoveryRequest) -> &str {
        &req.type_url
    }

    fn node(req: &DiscoveryRequest) -> Option<&envoy_types::pb::envoy::config::core::v3::Node> {
        req.node.as_ref()
    }

    fn on_request(&mut self, ty: XdsType, req: &DiscoveryRequest) -> Decision {
        if req.resource_names.len() > MAX_NAMES {
            return Decision::Ignore(Ignored::TooManyNames);
        }
        let nonce = &req.response_nonce;
        let Some(w) = self.watches.get_mut(&ty) else {
            // First request of this type on the stream, or a reconnect carrying an old nonce (even a
            // NACK of a previous stream's response): answer with the current state.
            let mut w = Watch::default();
            w.set_names(ty, &req.resource_names);
            self.watches.insert(ty, w);
            return Decision::Respond;
        };
        if nonce.is_empty() {
            // A new name set, or the client re-requesting from scratch.
            if let Some(before) = w.set_names(ty, &req.resource_names) {
                forget_dropped(&self.held, ty, &before, &w.sub);
            }
            return Decision::Respond;
        }
        if !w.exchange.is_latest(nonce) {
            return Decision::Ignore(Ignored::StaleNonce);
        }
        if let Some(err) = &req.error_detail {
            w.exchange.nacked(nonce, err);
            w.exchange.set_version_acked(&req.version_info);
            return Decision::Nack;
        }
        w.exchange.acked(nonce, &req.version_info);
        // Most ACKs repeat the subscription: nothing to rebuild.
        let Some(before) = w.set_names(ty, &req.resource_names) else {
            return Decision::Ignore(Ignored::Ack);
        };
        forget_dropped(&self.held, ty, &before, &w.sub);
        let added = if w.sub.wildcard {
            w.sub != before
        } else {
            w.sub.names.difference(&before.names).next().is_some() || (before.wildcard && !w.sub.wildcard)
        };
        Decision::subscribes_more(added)
    }

    fn subscription(&self, ty: XdsType) -> Option<&Subscription> {
        self.watches.get(&ty).map(|w| &w.sub).filter(|s| !s.is_empty())
    }

    fn response(
        &mut self,
        ty: XdsType,
        resources: &[Arc<Resource>],
        version: &str,
        mode: Mode,
    ) -> Option<Frame> {
        let w = self.watches.get_mut(&ty)?;
        let mut all = self.held.lock();
        let held = all.entry(ty).or_default();
        let unchanged = |r: &&Arc<Resource>| held.version(&r.name) == Some(r.version);
        let send: Vec<&Arc<Resource>> = match mode {
            Mode::Requested => resources.iter().collect(),
            // LDS/CDS: the whole set, when anything in it changed (including a deletion).
            Mode::Pushed if ty.is_full_state() => {
                if resources.len() == held.len() && resources.iter().all(|r| unchanged(&r)) {
                    return None;
                }
                resources.iter().collect()
            }
            // EDS/RDS: only what changed; a vanished child is deleted through its parent.
            Mode::Pushed => {
                let changed: Vec<_> = resources.iter().filter(|r| !unchanged(r)).collect();
                if changed.is_empty() {
                    return None;
                }
                changed
            }
        };
        if ty.is_full_state() {
            held.replace(resources);
        } else {
            held.insert(send.iter().copied());
        }
        drop(all);
        let send: Vec<&Resource> = send.into_iter().map(|r| &**r).collect();
        let nonce = self.nonces.next();
        let frame = wire::sotw_response(ty, version, &nonce, &send);
        w.exchange.sent(nonce, version);
        Some(frame)
    }

    fn status(&self) -> BTreeMap<XdsType, TypeStatus> {
        let held = self.held.lock();
        self.watches
            .iter()
            .map(|(ty, w)| {
                let count = held.get(ty).map_or(0, |h| h.len());
                (*ty, w.exchange.status(&w.sub, count))
            })
            .collect()
    }

    fn held(&self) -> &Held {
        &self.held
    }
}

impl Watch {
    /// Subscribes to exactly `names`; returns the previous subscription if it changed.
    fn set_names(&mut self, ty: XdsType, names: &[String]) -> Option<Subscription> {
        let star = names.iter().any(|n| n == Subscription::WILDCARD);
        let legacy_wildcard = names.is_empty() && !self.ever_named && ty.is_full_state();
        self.ever_named |= !names.is_empty();
        let wildcard = ty.is_full_state() && (star || legacy_wildcard);
        let named = names.len() - usize::from(star);
        let same = wildcard == self.sub.wildcard
            && named == self.sub.names.len()
            && names
                .iter()
                .all(|n| n == Subscription::WILDCARD || self.sub.names.contains(n.as_str()));
        if same {
            return None;
        }
        let mut set: BTreeSet<Arc<str>> = names.iter().map(|n| intern(n)).collect();
        set.remove(Subscription::WILDCARD);
        let names = intern_names(&set);
        Some(std::mem::replace(&mut self.sub, Subscription { wildcard, names }))
    }
}

/// EDS/RDS names the client dropped are forgotten at once, so a later re-subscription is answered in
/// full (LDS/CDS records are replaced by every response anyway).
fn forget_dropped(held: &Held, ty: XdsType, before: &Subscription, after: &Subscription) {
    if ty.is_full_state() || before.names.difference(&after.names).next().is_none() {
        return;
    }
    if let Some(h) = held.lock().get_mut(&ty) {
        h.retain(|name| after.names.contains(name));
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::{envoy::service::discovery::v3::DiscoveryResponse, google::rpc};

    use super::*;

    /// A response, decoded from its wire form.
    fn respond(
        s: &mut Sotw,
        ty: XdsType,
        resources: Vec<Arc<Resource>>,
        version: &str,
        mode: Mode,
    ) -> Option<DiscoveryResponse> {
        s.response(ty, &resources, version, mode).map(|f| f.decode())
    }

    fn res(name: &str, version: u64) -> Arc<Resource> {
        Resource::empty(XdsType::Cluster, name, version)
    }

    fn req(ty: XdsType, names: &[&str], version: &str, nonce: &str) -> DiscoveryRequest {
        DiscoveryRequest {
            type_url: ty.url().into(),
            resource_names: names.iter().map(|s| s.to_string()).collect(),
            version_info: version.into(),
            response_nonce: nonce.into(),
            ..Default::default()
        }
    }

    fn nack(ty: XdsType, nonce: &str) -> DiscoveryRequest {
        DiscoveryRequest {
            error_detail: Some(rpc::Status {
                code: 3,
                message: "bad cluster".into(),
                ..Default::default()
            }),
            ..req(ty, &["a"], "", nonce)
        }
    }

    const CDS: XdsType = XdsType::Cluster;
    const EDS: XdsType = XdsType::Endpoint;

    #[test]
    fn initial_request_then_ack_is_quiet() {
        let mut s = Sotw::default();
        assert_eq!(s.on_request(CDS, &req(CDS, &["a"], "", "")), Decision::Respond);
        let r = respond(&mut s, CDS, vec![res("a", 1)], "v1", Mode::Requested).expect("responds");
        assert_eq!(
            (r.version_info.as_str(), r.nonce.as_str(), r.resources.len()),
            ("v1", "1", 1)
        );
        assert_eq!(
            s.on_request(CDS, &req(CDS, &["a"], "v1", "1")),
            Decision::Ignore(Ignored::Ack)
        );
        // Nothing changed: a push is not answered.
        assert!(respond(&mut s, CDS, vec![res("a", 1)], "v2", Mode::Pushed).is_none());
    }

    #[test]
    fn stale_nonce_is_ignored_and_nonces_are_unique() {
        let mut s = Sotw::default();
        s.on_request(CDS, &req(CDS, &["a"], "", ""));
        let r1 = respond(&mut s, CDS, vec![res("a", 1)], "v1", Mode::Requested).unwrap();
        let r2 = respond(&mut s, CDS, vec![res("a", 2)], "v2", Mode::Pushed).unwrap();
        assert_ne!(r1.nonce, r2.nonce);
        // The client ACKs the first response after the second was sent: stale, even if it adds a name.
        assert_eq!(
            s.on_request(CDS, &req(CDS, &["a", "b"], "v1", &r1.nonce)),
            Decision::Ignore(Ignored::StaleNonce)
        );
        assert_eq!(
            s.on_request(CDS, &req(CDS, &["a", "b"], "v2", &r2.nonce)),
            Decision::Respond
        );
    }

    #[test]
    fn nack_is_recorded_and_not_answered() {
        let mut s = Sotw::default();
        s.on_request(CDS, &req(CDS, &["a"], "", ""));
        let r = respond(&mut s, CDS, vec![res("a", 1)], "v1", Mode::Requested).unwrap();
        assert_eq!(s.on_request(CDS, &nack(CDS, &r.nonce)), Decision::Nack);
        let st = &s.status()[&CDS];
        let n = st.last_nack.as_ref().expect("recorded");
        assert_eq!(
            (n.code, n.message.as_str(), n.version.as_str()),
            (3, "bad cluster", "v1")
        );
        // The same config is not pushed again; only a real change is.
        assert!(respond(&mut s, CDS, vec![res("a", 1)], "v2", Mode::Pushed).is_none());
        assert!(respond(&mut s, CDS, vec![res("a", 3)], "v3", Mode::Pushed).is_some());
        assert!(
            s.status()[&CDS].last_nack.is_some(),
            "a NACK stays visible until the next ACK"
        );
    }

    #[test]
    fn legacy_wildcard_only_before_names() {
        let mut s = Sotw::default();
        // The spec's 4 steps: unset → wildcard; {*, a}; {a}; unset = unsubscribe all.
        s.on_request(CDS, &req(CDS, &[], "", ""));
        assert!(s.subscription(CDS).unwrap().wildcard);
        let r = respond(&mut s, CDS, vec![res("a", 1)], "v1", Mode::Requested).unwrap();
        s.on_request(CDS, &req(CDS, &["*", "a"], "v1", &r.nonce));
        let sub = s.subscription(CDS).unwrap();
        assert!(sub.wildcard && sub.names.contains("a"));
        s.on_request(CDS, &req(CDS, &["a"], "v1", &r.nonce));
        assert!(!s.subscription(CDS).unwrap().wildcard);
        assert_eq!(
            s.on_request(CDS, &req(CDS, &[], "v1", &r.nonce)),
            Decision::Ignore(Ignored::Ack)
        );
        assert!(
            s.subscription(CDS).is_none(),
            "empty after names = unsubscribe all"
        );
        // EDS never has wildcard semantics.
        s.on_request(EDS, &req(EDS, &[], "", ""));
        assert!(s.subscription(EDS).is_none());
    }

    #[test]
    fn full_state_push_omits_deleted_and_eds_push_sends_only_changes() {
        let mut s = Sotw::default();
        s.on_request(CDS, &req(CDS, &[], "", ""));
        respond(&mut s, CDS, vec![res("a", 1), res("b", 1)], "v1", Mode::Requested).unwrap();
        let r = respond(&mut s, CDS, vec![res("a", 1)], "v2", Mode::Pushed).expect("deletion is a change");
        assert_eq!(r.resources.len(), 1);

        s.on_request(EDS, &req(EDS, &["a", "b"], "", ""));
        respond(&mut s, EDS, vec![res("a", 1), res("b", 1)], "v1", Mode::Requested).unwrap();
        let r = respond(&mut s, EDS, vec![res("a", 2), res("b", 1)], "v2", Mode::Pushed).unwrap();
        assert_eq!(r.resources.len(), 1, "only the changed assignment");
    }

    #[test]
    fn adding_names_responds_and_removing_does_not() {
        let mut s = Sotw::default();
        s.on_request(EDS, &req(EDS, &["a"], "", ""));
        let r = respond(&mut s, EDS, vec![res("a", 1)], "v1", Mode::Requested).unwrap();
        assert_eq!(
            s.on_request(EDS, &req(EDS, &["a", "b"], "v1", &r.nonce)),
            Decision::Respond
        );
        let r = respond(&mut s, EDS, vec![res("a", 1), res("b", 1)], "v1", Mode::Requested).unwrap();
        assert_eq!(
            s.on_request(EDS, &req(EDS, &["b"], "v1", &r.nonce)),
            Decision::Ignore(Ignored::Ack)
        );
        assert_eq!(s.subscription(EDS).unwrap().names.len(), 1);
    }

    #[test]
    fn reconnect_with_old_nonce_is_answered() {
        let mut s = Sotw::default();
        assert_eq!(
            s.on_request(EDS, &req(EDS, &["a"], "v9", "77")),
            Decision::Respond
        );
    }
}
