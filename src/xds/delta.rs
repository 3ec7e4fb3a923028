//! The incremental (delta) protocol state machine for one stream.
//!
//! Owns: per-type subscriptions (changed by every request, even one with a stale nonce), what the
//! client has (seeded from `initial_resource_versions` on reconnect) and the `removed_resources`
//! decision. Pure, like [`super::sotw`]. Removals are only ever sent for LDS/CDS: for EDS/RDS Envoy
//! ignores or mishandles them (istio PR #60647, go-control-plane#488); their deletion is implied by the
//! parent cluster or listener going away.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;

use super::{
    Resource, XdsType,
    held::Held,
    protocol::{Decision, Exchange, Ignored, Mode, Nonces, Protocol, TypeStatus},
    sotw::MAX_NAMES,
    subscription::{Subscription, intern, intern_names},
    wire::{self, Frame},
};

/// Delta state of one stream.
#[derive(Debug, Default)]
pub(crate) struct Delta {
    watches: BTreeMap<XdsType, Watch>,
    nonces: Nonces,
    /// What the client was sent and still holds, per type.
    held: Held,
}

#[derive(Debug, Default)]
struct Watch {
    sub: Subscription,
    exchange: Exchange,
    /// What a reconnecting client says it holds (`initial_resource_versions`) that meshd has not sent
    /// on this stream yet: name → version (`None`: a version meshd did not write, which matches
    /// nothing). Each entry leaves when that name is sent or removed.
    claimed: BTreeMap<Arc<str>, Option<u64>>,
    /// The next request-driven answer must be sent even if empty (first request of the type).
    must_answer: bool,
}

impl Protocol for Delta {
    type Request = DeltaDiscoveryRequest;
    const SPLITS_LARGE_SETS: bool = true;

    fn type_url(req: &DeltaDiscoveryRequest) -> &str {
        &req.type_url
    }

    fn node(req: &DeltaDiscoveryRequest) -> Option<&envoy_types::pb::envoy::config::core::v3::Node> {
        req.node.as_ref()
    }

    fn on_request(&mut self, ty: XdsType, req: &DeltaDiscoveryRequest) -> Decision {
        let total = req.resource_names_subscribe.len()
            + req.resource_names_unsubscribe.len()
            + req.initial_resource_versions.len();
        if total > MAX_NAMES {
            return Decision::Ignore(Ignored::TooManyNames);
        }
        let first = !self.watches.contains_key(&ty);
        let w = self.watches.entry(ty).or_default();
        if first {
            // Legacy wildcard: a first request naming nothing subscribes to everything (LDS/CDS).
            w.sub.wildcard = ty.is_full_state() && req.resource_names_subscribe.is_empty();
            w.claimed = req
                .initial_resource_versions
                .iter()
                .map(|(name, v)| (intern(name), wire::parse_version_hex(v)))
                .collect();
            w.must_answer = true;
        }
        // Subscription changes are honoured whatever the nonce says (spec, delta section).
        let mut changed = first;
        let mut names_changed = false;
        for name in &req.resource_names_subscribe {
            if name == Subscription::WILDCARD {
                changed |= ty.is_full_state() && !w.sub.wildcard;
                w.sub.wildcard |= ty.is_full_state();
            } else if !w.sub.names.contains(name.as_str()) {
                Arc::make_mut(&mut w.sub.names).insert(intern(name));
                (changed, names_changed) = (true, true);
            }
        }
        for name in &req.resource_names_unsubscribe {
            if name == Subscription::WILDCARD {
                w.sub.wildcard = false;
            } else if w.sub.names.contains(name.as_str()) {
                Arc::make_mut(&mut w.sub.names).remove(name.as_str());
                names_changed = true;
                // The client dropped it; if wildcard still covers it, it must be sent again.
                w.claimed.remove(name.as_str());
                if let Some(h) = self.held.lock().get_mut(&ty) {
                    h.remove(name);
                }
                changed |= w.sub.wildcard;
            }
        }
        if names_changed {
            w.sub.names = intern_names(&w.sub.names);
        }
        let acks_latest = !req.response_nonce.is_empty() && w.exchange.is_latest(&req.response_nonce);
        if acks_latest {
            if let Some(err) = &req.error_detail {
                w.exchange.nacked(&req.response_nonce, err);
                if !changed {
                    return Decision::Nack;
                }
            } else {
                w.exchange.acked_latest(&req.response_nonce);
            }
        }
        Decision::subscribes_more(changed)
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
        let has = |name: &str| match held.version(name) {
            Some(v) => Some(Some(v)),
            None => w.claimed.get(name).copied(),
        };
        let send: Vec<&Arc<Resource>> = resources
            .iter()
            .filter(|r| has(&r.name) != Some(Some(r.version)))
            .collect();
        let mut removed = Vec::new();
        if ty.is_full_state() {
            let present: BTreeSet<&str> = resources.iter().map(|r| &*r.name).collect();
            // What the client holds but no longer exists (or is no longer subscribed) — including what
            // it reported in `initial_resource_versions` after a reconnect (istio#41494).
            removed.extend(
                held.names()
                    .chain(w.claimed.keys())
                    .filter(|n| !present.contains(&***n))
                    .cloned(),
            );
            if mode == Mode::Requested {
                // Named but absent: say so now instead of letting the client time out.
                removed.extend(
                    w.sub
                        .names
                        .iter()
                        .filter(|n| !present.contains(&***n) && has(n).is_none())
                        .cloned(),
                );
            }
        }
        let must_answer = std::mem::take(&mut w.must_answer) && mode == Mode::Requested;
        if send.is_empty() && removed.is_empty() && !must_answer {
            return None;
        }
        held.insert(send.iter().copied());
        for name in send.iter().map(|r| &r.name).chain(&removed) {
            w.claimed.remove(name);
        }
        for name in &removed {
            held.remove(name);
        }
        drop(all);
        let send: Vec<&Resource> = send.into_iter().map(|r| &**r).collect();
        let nonce = self.nonces.next();
        let frame = wire::delta_response(ty, version, &nonce, &send, &removed);
        w.exchange.sent(nonce, version);
        Some(frame)
    }

    fn status(&self) -> BTreeMap<XdsType, TypeStatus> {
        let held = self.held.lock();
        self.watches
            .iter()
            .map(|(ty, w)| {
                let count = held.get(ty).map_or(0, |h| h.len()) + w.claimed.len();
                (*ty, w.exchange.status(&w.sub, count))
            })
            .collect()
    }

    fn held(&self) -> &Held {
        &self.held
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::{envoy::service::discovery::v3::DeltaDiscoveryResponse, google::rpc};

    use super::*;

    /// A response, decoded from its wire form.
    fn respond(
        d: &mut Delta,
        ty: XdsType,
        resources: Vec<Arc<Resource>>,
        version: &str,
        mode: Mode,
    ) -> Option<DeltaDiscoveryResponse> {
        d.response(ty, &resources, version, mode).map(|f| f.decode())
    }

    const CDS: XdsType = XdsType::Cluster;
    const EDS: XdsType = XdsType::Endpoint;

    fn res(name: &str, version: u64) -> Arc<Resource> {
        Resource::empty(CDS, name, version)
    }

    fn req(ty: XdsType, sub: &[&str], unsub: &[&str], nonce: &str) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest {
            type_url: ty.url().into(),
            resource_names_subscribe: sub.iter().map(|s| s.to_string()).collect(),
            resource_names_unsubscribe: unsub.iter().map(|s| s.to_string()).collect(),
            response_nonce: nonce.into(),
            ..Default::default()
        }
    }

    fn names(r: &DeltaDiscoveryResponse) -> (Vec<&str>, Vec<&str>) {
        (
            r.resources.iter().map(|r| r.name.as_str()).collect(),
            r.removed_resources.iter().map(String::as_str).collect(),
        )
    }

    #[test]
    fn wildcard_first_request_gets_everything_even_if_empty() {
        let mut d = Delta::default();
        assert_eq!(d.on_request(CDS, &req(CDS, &[], &[], "")), Decision::Respond);
        let r = respond(&mut d, CDS, vec![], "1", Mode::Requested).expect("first answer even when empty");
        assert!(r.resources.is_empty());
        let r = respond(&mut d, CDS, vec![res("a", 1)], "2", Mode::Pushed).expect("new cluster");
        assert_eq!(names(&r), (vec!["a"], vec![]));
        assert_eq!(
            d.on_request(CDS, &req(CDS, &[], &[], &r.nonce)),
            Decision::Ignore(Ignored::Ack)
        );
        assert!(
            respond(&mut d, CDS, vec![res("a", 1)], "3", Mode::Pushed).is_none(),
            "unchanged"
        );
        let r = respond(&mut d, CDS, vec![], "4", Mode::Pushed).expect("deletion");
        assert_eq!(names(&r), (vec![], vec!["a"]));
    }

    #[test]
    fn reconnect_skips_unchanged_and_removes_deleted() {
        let mut d = Delta::default();
        let mut r = req(CDS, &[], &[], "");
        r.initial_resource_versions = [
            ("a".to_owned(), format!("{:016x}", 1)),
            ("gone".to_owned(), format!("{:016x}", 1)),
        ]
        .into();
        assert_eq!(d.on_request(CDS, &r), Decision::Respond);
        let resp = respond(&mut d, CDS, vec![res("a", 1), res("b", 1)], "1", Mode::Requested).unwrap();
        assert_eq!(names(&resp), (vec!["b"], vec!["gone"]));
    }

    #[test]
    fn named_subscriptions_and_unsubscribe() {
        let mut d = Delta::default();
        d.on_request(EDS, &req(EDS, &["a"], &[], ""));
        assert!(!d.subscription(EDS).unwrap().wildcard);
        let r = respond(&mut d, EDS, vec![res("a", 1)], "1", Mode::Requested).unwrap();
        // A stale nonce still changes the subscription.
        assert_eq!(
            d.on_request(EDS, &req(EDS, &["b"], &[], "stale")),
            Decision::Respond
        );
        assert_eq!(d.subscription(EDS).unwrap().names.len(), 2);
        let r2 = respond(&mut d, EDS, vec![res("a", 1), res("b", 1)], "1", Mode::Requested).unwrap();
        assert_eq!(names(&r2), (vec!["b"], vec![]), "a is unchanged, so not resent");
        assert_ne!(r.nonce, r2.nonce);
        assert_eq!(
            d.on_request(EDS, &req(EDS, &[], &["a", "b"], &r2.nonce)),
            Decision::Ignore(Ignored::Ack)
        );
        assert!(d.subscription(EDS).is_none());
    }

    #[test]
    fn eds_never_gets_removed_resources() {
        let mut d = Delta::default();
        d.on_request(EDS, &req(EDS, &["a", "missing"], &[], ""));
        let r = respond(&mut d, EDS, vec![res("a", 1)], "1", Mode::Requested).unwrap();
        assert_eq!(names(&r), (vec!["a"], vec![]));
        assert!(respond(&mut d, EDS, vec![], "2", Mode::Pushed).is_none());
    }

    #[test]
    fn named_cds_that_does_not_exist_is_reported_removed() {
        let mut d = Delta::default();
        d.on_request(CDS, &req(CDS, &["nope"], &[], ""));
        let r = respond(&mut d, CDS, vec![], "1", Mode::Requested).unwrap();
        assert_eq!(names(&r), (vec![], vec!["nope"]));
        // Appears later: pushed without a new request.
        let r = respond(&mut d, CDS, vec![res("nope", 1)], "2", Mode::Pushed).unwrap();
        assert_eq!(names(&r), (vec!["nope"], vec![]));
    }

    #[test]
    fn wildcard_plus_name_unsubscribing_the_name_resends_it() {
        let mut d = Delta::default();
        d.on_request(CDS, &req(CDS, &["*", "a"], &[], ""));
        let r = respond(&mut d, CDS, vec![res("a", 1)], "1", Mode::Requested).unwrap();
        assert_eq!(
            d.on_request(CDS, &req(CDS, &[], &["a"], &r.nonce)),
            Decision::Respond
        );
        let r = respond(&mut d, CDS, vec![res("a", 1)], "1", Mode::Requested).unwrap();
        assert_eq!(names(&r), (vec!["a"], vec![]));
    }

    #[test]
    fn nack_recorded_without_answer() {
        let mut d = Delta::default();
        d.on_request(CDS, &req(CDS, &[], &[], ""));
        let r = respond(&mut d, CDS, vec![res("a", 1)], "1", Mode::Requested).unwrap();
        let mut n = req(CDS, &[], &[], &r.nonce);
        n.error_detail = Some(rpc::Status {
            code: 14,
            message: "rejected".into(),
            ..Default::default()
        });
        assert_eq!(d.on_request(CDS, &n), Decision::Nack);
        assert_eq!(d.status()[&CDS].last_nack.as_ref().unwrap().code, 14);
        assert!(respond(&mut d, CDS, vec![res("a", 1)], "2", Mode::Pushed).is_none());
    }
}
