//! DestinationRules against the registry of every cluster: a host that is no service (IST0174), a
//! subset that selects none of the service's endpoints in any cluster (IST0173), TLS disabled
//! towards workloads a STRICT PeerAuthentication covers (IST0113); and TLS that verifies no server
//! certificate (IST0128, IST0129).

use std::collections::BTreeSet;

use super::{Code, Input, Message, Service, clusters_text, hosts};
use crate::{
    istio::{
        Config, Spec,
        destination_rule::{ClientTlsSettings, DestinationRule, TlsMode},
        peer_authentication::MtlsMode,
    },
    traffic::{PaIndex, hosts::resolve},
};

fn rules(input: &Input) -> impl Iterator<Item = (&Config, &DestinationRule)> {
    input.each(|s| match s {
        Spec::DestinationRule(d) => Some(d),
        _ => None,
    })
}

/// `destinationrule.SubsetSelectPodAnalyzer`: the host is a service (IST0174) and every subset selects
/// one of its endpoints in some cluster (IST0173).
pub(super) fn hosts_and_subsets(input: &Input, out: &mut Vec<Message>) {
    for (c, dr) in rules(input) {
        match service(input, c, dr) {
            Some(service) => subsets(c, dr, service, out),
            None => out.push(Message::new(
                Code::UnknownDestinationRuleHost,
                &c.object_ref(),
                format!(
                    "The host {} defined in the DestinationRule does not match any services in the mesh \
                     (in any cluster).",
                    dr.host
                ),
            )),
        }
    }
}

/// `destinationrule.CaCertificateAnalyzer`: SIMPLE or MUTUAL TLS that verifies no server certificate
/// (no `caCertificates`, and no `credentialName` on a rule with a `workloadSelector`, where the
/// gateway's secret brings the CA), at the rule's level (IST0128) or a port's (IST0129).
pub(super) fn ca_certificates(input: &Input, out: &mut Vec<Message>) {
    for (c, dr) in rules(input) {
        let Some(policy) = &dr.traffic_policy else {
            continue;
        };
        let unverified = |tls: &ClientTlsSettings| {
            matches!(tls.mode, TlsMode::Simple | TlsMode::Mutual)
                && tls.ca_certificates.is_empty()
                && (dr.workload_selector.is_none() || tls.credential_name.is_empty())
        };
        let mode = |tls: &ClientTlsSettings| match tls.mode {
            TlsMode::Simple => "SIMPLE",
            _ => "MUTUAL",
        };
        let name = format!("{}/{}", c.meta.namespace, c.meta.name);
        if let Some(tls) = policy.tls.as_ref().filter(|t| unverified(t)) {
            out.push(Message::new(
                Code::NoServerCertificateVerificationDestinationLevel,
                &c.object_ref(),
                format!(
                    "DestinationRule {name} in namespace {} has TLS mode set to {} but no caCertificates \
                     are set to validate server identity for host: {}",
                    c.meta.namespace,
                    mode(tls),
                    dr.host
                ),
            ));
        }
        for p in &policy.port_level_settings {
            if let Some(tls) = p.tls.as_ref().filter(|t| unverified(t)) {
                out.push(Message::new(
                    Code::NoServerCertificateVerificationPortLevel,
                    &c.object_ref(),
                    format!(
                        "DestinationRule {name} in namespace {} has TLS mode set to {} but no \
                         caCertificates are set to validate server identity for host: {} at port {}",
                        c.meta.namespace,
                        mode(tls),
                        dr.host,
                        p.port.as_ref().map_or(0, |p| p.number)
                    ),
                ));
            }
        }
    }
}

/// IST0113: rules that turn TLS off towards workloads a STRICT PeerAuthentication covers.
pub(super) fn mtls_conflicts(input: &Input, out: &mut Vec<Message>) {
    let pas = PaIndex::build(input.configs.iter(), &input.settings);
    for (c, dr) in rules(input) {
        if let Some(service) = service(input, c, dr) {
            mtls(&pas, c, dr, service, out);
        }
    }
}

/// The service the rule is for; a wildcard host names the services under it (the first is enough).
fn service<'a>(input: &'a Input, c: &Config, dr: &DestinationRule) -> Option<&'a Service> {
    let ns = &*c.meta.namespace;
    hosts::lookup(input, ns, &dr.export_to, &dr.host).or_else(|| {
        let suffix = resolve(&dr.host, ns, &input.settings.domain_suffix);
        let suffix = suffix.strip_prefix('*')?;
        input
            .services
            .iter()
            .find(|s| s.hostname.ends_with(suffix) && s.visibility.visible_in(ns))
    })
}

fn subsets(c: &Config, dr: &DestinationRule, service: &Service, out: &mut Vec<Message>) {
    for subset in &dr.subsets {
        if service.endpoints.iter().any(|w| w.selected_by(&subset.labels)) {
            continue;
        }
        let with_endpoints: BTreeSet<String> = service.endpoints.iter().map(|w| w.cluster.clone()).collect();
        out.push(Message::new(
            Code::DestinationRuleSubsetNotSelectPods,
            &c.object_ref(),
            format!(
                "The Subset {} defined in the DestinationRule does not select any pods. Which may lead to \
                 503 UH (NoHealthyUpstream). None of the {} endpoints of {} (clusters with endpoints: {}) \
                 has the labels {}.",
                subset.name,
                service.endpoints.len(),
                service.hostname,
                clusters_text(&with_endpoints),
                labels_text(&subset.labels)
            ),
        ));
    }
}

/// IST0113: the rule turns TLS off for the service, whose workloads only accept mTLS.
fn mtls(pas: &PaIndex, c: &Config, dr: &DestinationRule, service: &Service, out: &mut Vec<Message>) {
    let disabled = dr
        .traffic_policy
        .as_ref()
        .and_then(|p| p.tls.as_ref())
        .is_some_and(|t| t.mode == TlsMode::Disable);
    if !disabled {
        return;
    }
    let strict = service.endpoints.iter().find_map(|w| {
        let m = pas.mode(&w.namespace, &w.labels, 0);
        (m.mode == MtlsMode::Strict).then_some((w, m.from))
    });
    if let Some((w, Some(pa))) = strict {
        out.push(Message::new(
            Code::MtlsPolicyConflict,
            &c.object_ref(),
            format!(
                "A DestinationRule and Policy are in conflict with regards to mTLS for host {}. The \
                 DestinationRule \"{}/{}\" specifies that mTLS must be false but the Policy object \
                 \"{}/{}\" specifies STRICT (workload {} in cluster {}).",
                service.hostname, c.meta.namespace, c.meta.name, pa.namespace, pa.name, w.name, w.cluster
            ),
        ));
    }
}

/// `a=1,b=2`, as Kubernetes prints a selector.
pub(super) fn labels_text(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
