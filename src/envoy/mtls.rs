//! Whether a client sends an endpoint Istio mTLS that the endpoint takes: istiod's
//! `pilot/pkg/xds/endpoints/mtls_checker.go` (`checkMtlsEnabled`) combined with the endpoint's own
//! `tlsMode`, which is what istiod's EDS metadata ends up saying.
//!
//! EDS sends `tlsMode: istio` only for such endpoints (the sidecar's transport-socket match then picks
//! plaintext for the others), and split horizon sends only such endpoints through a gateway, which
//! routes by the mTLS SNI. Owns: the rule and its reason for `meshctl explain`. Does NOT: build TLS
//! contexts (CDS).

use serde::Serialize;

use crate::{
    istio::{ObjectRef, destination_rule::TlsMode as DrTlsMode, peer_authentication::MtlsMode},
    model::{Endpoint, ServicePort, TlsMode},
    traffic::{Index, MergedRule, PeerMode},
};

/// The mTLS rule for the endpoints of one cluster.
#[derive(Debug, Clone, Copy)]
pub struct MtlsCheck<'a> {
    traffic: &'a Index,
    namespace: &'a str,
    port: &'a ServicePort,
    /// The cluster's DestinationRule `tls.mode` (after port and subset merge) and the rule.
    dr: Option<(DrTlsMode, &'a MergedRule)>,
}

/// The decision for one endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MtlsDecision {
    /// The client sends it Istio mTLS and it takes it.
    pub enabled: bool,
    /// What decided.
    pub why: MtlsWhy,
}

/// What decided an endpoint's mTLS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "by")]
pub enum MtlsWhy {
    /// No sidecar (`security.istio.io/tlsMode` is not `istio`): it cannot terminate Istio mTLS.
    NoSidecar,
    /// The DestinationRule's `tls.mode` for this cluster (only ISTIO_MUTUAL is Istio mTLS).
    DestinationRule {
        /// The mode.
        mode: DrTlsMode,
        /// The rule's objects.
        from: Vec<ObjectRef>,
    },
    /// Auto-mTLS: the workload's PeerAuthentication mode (DISABLE means plaintext).
    PeerAuthentication {
        /// The mode (PERMISSIVE when nothing applies).
        mode: MtlsMode,
        /// The deciding object.
        #[serde(skip_serializing_if = "Option::is_none")]
        from: Option<ObjectRef>,
    },
}

impl<'a> MtlsCheck<'a> {
    /// The rule for `port` of a service in `namespace`, with the cluster's DestinationRule and its
    /// effective `tls` mode.
    pub fn new(
        traffic: &'a Index,
        namespace: &'a str,
        port: &'a ServicePort,
        dr: Option<(DrTlsMode, &'a MergedRule)>,
    ) -> Self {
        Self {
            traffic,
            namespace,
            port,
            dr,
        }
    }

    /// The decision for `ep`, with its reason (`meshctl explain`).
    pub fn decide(&self, ep: &Endpoint) -> MtlsDecision {
        let enabled = self.enabled(ep);
        let why = match self.rule(ep) {
            Rule::NoSidecar => MtlsWhy::NoSidecar,
            Rule::Dr(mode, rule) => MtlsWhy::DestinationRule {
                mode,
                from: rule.from.clone(),
            },
            Rule::Pa(pm) => MtlsWhy::PeerAuthentication {
                mode: pm.mode,
                from: pm.from,
            },
        };
        MtlsDecision { enabled, why }
    }

    /// Just the decision (the EDS path).
    pub fn enabled(&self, ep: &Endpoint) -> bool {
        match self.rule(ep) {
            Rule::NoSidecar => false,
            Rule::Dr(mode, _) => mode == DrTlsMode::IstioMutual,
            Rule::Pa(pm) => pm.mode != MtlsMode::Disable,
        }
    }

    /// istiod's order: no sidecar, then the DestinationRule's mode, then PeerAuthentication at the
    /// workload's target port.
    fn rule(&self, ep: &Endpoint) -> Rule<'a> {
        if ep.tls_mode != TlsMode::Istio {
            return Rule::NoSidecar;
        }
        if let Some((mode, rule)) = self.dr {
            return Rule::Dr(mode, rule);
        }
        let port = ep.port(&self.port.name).unwrap_or(self.port.port);
        Rule::Pa(self.traffic.peer_mode(self.namespace, ep.labels(), port))
    }
}

/// Which rule decides, in istiod's order.
enum Rule<'a> {
    NoSidecar,
    Dr(DrTlsMode, &'a MergedRule),
    Pa(PeerMode),
}
