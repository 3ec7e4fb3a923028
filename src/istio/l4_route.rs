//! A VirtualService's `tcp` and `tls` routes, which meshd reads but does not act on: typed so
//! istiod's rules for them (`validateTCPRoute`, `validateTLSRoute`, `validateSniHost`) apply before
//! the VirtualService reports them as ignored.

use serde::{Deserialize, Serialize};

use super::{
    common::Labels,
    http_actions,
    validate::{self, Report},
    virtual_service::Destination,
};

/// Istio's `TCPRoute`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpRoute {
    /// Conditions, any of which selects the route.
    #[serde(rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<L4MatchAttributes>,
    /// Weighted destinations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<RouteDestination>,
}

/// Istio's `TLSRoute`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsRoute {
    /// Conditions, any of which selects the route; at least one.
    #[serde(rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<TlsMatchAttributes>,
    /// Weighted destinations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<RouteDestination>,
}

/// Istio's `L4MatchAttributes`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct L4MatchAttributes {
    /// Destination IPs or CIDRs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub destination_subnets: Vec<String>,
    /// Destination port.
    #[serde(skip_serializing_if = "is_zero")]
    pub port: u32,
    /// Source workload labels.
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub source_labels: Labels,
    /// Gateways the match applies to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// Source namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source_namespace: String,
}

/// Istio's `TLSMatchAttributes`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsMatchAttributes {
    /// SNI names matched; at least one, each within the VirtualService's hosts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sni_hosts: Vec<String>,
    /// Destination IPs or CIDRs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub destination_subnets: Vec<String>,
    /// Destination port.
    #[serde(skip_serializing_if = "is_zero")]
    pub port: u32,
    /// Source workload labels.
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub source_labels: Labels,
    /// Gateways the match applies to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// Source namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source_namespace: String,
}

/// Istio's `RouteDestination`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteDestination {
    /// Where traffic goes.
    pub destination: Destination,
    /// Relative weight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// istiod's `validateTCPRoute`.
pub(crate) fn tcp_route(route: &TcpRoute, f: &str, r: &mut Report) {
    for (i, m) in route.matches.iter().enumerate() {
        let mf = format!("{f}.match[{i}]");
        l4_match(
            &m.destination_subnets,
            m.port,
            &m.source_labels,
            &m.gateways,
            &mf,
            r,
        );
    }
    if route.route.is_empty() {
        r.error(format!("{f}.route"), "a TCP route needs a destination");
    }
    destinations(&route.route, f, r);
}

/// istiod's `validateTLSRoute`: SNI hosts within the VirtualService's `hosts` (`bound_to_gateway`
/// takes `*` as a host, as istiod's gateway rule does).
pub(crate) fn tls_route(route: &TlsRoute, hosts: &[String], bound_to_gateway: bool, f: &str, r: &mut Report) {
    if route.matches.is_empty() {
        r.error(format!("{f}.match"), "a TLS route needs at least one match");
    }
    for (i, m) in route.matches.iter().enumerate() {
        let mf = format!("{f}.match[{i}]");
        if m.sni_hosts.is_empty() {
            r.error(
                format!("{mf}.sniHosts"),
                "a TLS match needs at least one SNI host",
            );
        }
        for (j, sni) in m.sni_hosts.iter().enumerate() {
            let sf = format!("{mf}.sniHosts[{j}]");
            if sni.parse::<std::net::IpAddr>().is_ok() {
                r.warn(
                    &sf,
                    "an IP address as SNI goes against the SNI spec; most clients do not send it",
                );
                continue;
            }
            if bound_to_gateway && sni.starts_with("outbound_") {
                auto_generated_sni(sni, &sf, r);
            } else if !(bound_to_gateway && sni == "*") {
                validate::wildcard_domain(sni, &sf, r);
            }
            if !hosts.iter().any(|h| validate::host_subset_of(sni, h)) {
                r.error(
                    &sf,
                    format!("SNI host {sni:?} is not within any of the VirtualService's hosts"),
                );
            }
        }
        l4_match(
            &m.destination_subnets,
            m.port,
            &m.source_labels,
            &m.gateways,
            &mf,
            r,
        );
    }
    if route.route.is_empty() {
        r.error(format!("{f}.route"), "a TLS route needs a destination");
    }
    destinations(&route.route, f, r);
}

/// istiod's `ValidateWildcardDomainForVirtualServiceBoundToGateway` for an SNI host AUTO_PASSTHROUGH
/// generates (`outbound_.80_._.e2e.foobar.mesh`): split at `_`, the direction `outbound`, a port with a
/// digit, a hostname with a letter.
fn auto_generated_sni(sni: &str, f: &str, r: &mut Report) {
    const FORMAT: &str = "outbound_.<port>_._.<hostname>";
    if sni.len() > 255 {
        r.error(f, format!("domain name {sni:?} too long (max 255)"));
        return;
    }
    let parts: Vec<&str> = sni.split('_').collect();
    if parts.len() < 4 {
        r.error(
            f,
            format!("domain name {sni} invalid, should follow '{FORMAT}' format"),
        );
        return;
    }
    let port = parts[1].trim_matches('.');
    let hostname = parts[3].trim_matches('.');
    if !port.contains(|c: char| c.is_ascii_digit()) {
        r.error(
            f,
            format!("domain name {sni:?} invalid (label {port:?} invalid). should follow {FORMAT} format"),
        );
    } else if !hostname.contains(|c: char| c.is_ascii_alphabetic()) {
        r.error(
            f,
            format!(
                "domain name {sni:?} invalid (label {hostname:?} invalid). should follow {FORMAT} format"
            ),
        );
    }
}

fn l4_match(subnets: &[String], port: u32, labels: &Labels, gateways: &[String], f: &str, r: &mut Report) {
    for (i, s) in subnets.iter().enumerate() {
        validate::ip_or_cidr(s, &format!("{f}.destinationSubnets[{i}]"), r);
    }
    validate::port_if_set(port, &format!("{f}.port"), r);
    validate::labels(labels, &format!("{f}.sourceLabels"), r);
    validate::gateway_names(gateways, &format!("{f}.gateways"), r);
}

/// istiod's `validateRouteDestinations`.
fn destinations(dests: &[RouteDestination], f: &str, r: &mut Report) {
    let mut total = 0i64;
    for (i, d) in dests.iter().enumerate() {
        let df = format!("{f}.route[{i}]");
        http_actions::destination(&d.destination, &format!("{df}.destination"), r);
        let w = d.weight.unwrap_or(0);
        if w < 0 {
            r.error(format!("{df}.weight"), format!("weight {w} is negative"));
        }
        total += i64::from(w.max(0));
    }
    if dests.len() > 1 && total == 0 {
        r.error(
            format!("{f}.route"),
            "the weights of several destinations cannot all be 0",
        );
    }
}
