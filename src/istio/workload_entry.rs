//! `WorkloadEntry` (networking.istio.io): a non-Kubernetes workload (a VM, a bare-metal host), also the
//! shape of a ServiceEntry's inline `endpoints` and a WorkloadGroup's `template`.

use std::{collections::BTreeMap, net::IpAddr};

use serde::{Deserialize, Serialize};

use super::{
    common::Labels,
    validate::{self, Report},
};

/// The prefix of a Unix domain socket address.
pub const UNIX_PREFIX: &str = "unix://";

/// Istio's `WorkloadEntry`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadEntry {
    /// IP address, DNS name (DNS ServiceEntries only) or `unix://` socket; empty for an endpoint only
    /// reachable through its network's gateway.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Port name (a ServiceEntry port's name) → the workload's port number.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub ports: BTreeMap<String, u32>,
    /// The workload's labels (selectors and subsets match them).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// The network the workload is on (split horizon: proxies elsewhere reach it via the gateway).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub network: String,
    /// `region/zone/subzone`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub locality: String,
    /// Load-balancing weight (0 = default).
    #[serde(skip_serializing_if = "is_zero")]
    pub weight: u32,
    /// Service account the workload runs as (its SPIFFE identity; implies mTLS).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub service_account: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl WorkloadEntry {
    /// Whether the address is a Unix domain socket.
    pub fn is_unix(&self) -> bool {
        self.address.starts_with(UNIX_PREFIX)
    }
}

/// istiod's `ValidateWorkloadEntry`, for an entry at `field` (`spec`, `spec.endpoints[2]`,
/// `spec.template`).
pub(crate) fn validate(we: &WorkloadEntry, field: &str, r: &mut Report) {
    let addr = &we.address;
    if addr.is_empty() {
        if we.network.is_empty() {
            r.error(
                format!("{field}.address"),
                "address is required unless network is set",
            );
        } else {
            r.warn(
                format!("{field}.address"),
                format!(
                    "no address: reachable only through network {:?}'s gateway",
                    we.network
                ),
            );
        }
    } else if let Some(path) = addr.strip_prefix(UNIX_PREFIX) {
        unix_path(path, &format!("{field}.address"), r);
        if !we.ports.is_empty() {
            r.error(format!("{field}.ports"), "a unix:// address takes no ports");
        }
    } else if addr.parse::<IpAddr>().is_err() && !validate::is_fqdn(addr) && !validate::is_dns1123_label(addr)
    {
        r.error(
            format!("{field}.address"),
            format!("{addr:?} is not an IP address, DNS name or unix:// path"),
        );
    }
    for (name, number) in &we.ports {
        validate::port_name(name, &format!("{field}.ports.{name}"), r);
        validate::port(*number, &format!("{field}.ports.{name}"), r);
    }
    validate::labels(&we.labels, &format!("{field}.labels"), r);
}

/// istiod's `ValidateUnixAddress`: an abstract socket (`@name`) or an absolute path to a file.
pub(crate) fn unix_path(path: &str, field: &str, r: &mut Report) {
    if path.is_empty() {
        r.error(field, "unix address needs a socket path");
    } else if !path.starts_with('@') {
        if !path.starts_with('/') {
            r.error(
                field,
                format!("{path:?}: a unix socket must be an absolute path or an abstract socket (@name)"),
            );
        } else if path.ends_with('/') {
            r.error(field, format!("{path:?}: a unix socket may not be a directory"));
        }
    }
}

/// A WorkloadEntry object's spec.
pub(crate) fn validate_object(we: &WorkloadEntry, r: &mut Report) {
    validate(we, "spec", r);
}
