//! ServiceEntries: ports that need addresses, istioctl's `serviceentry.ProtocolAddressesAnalyzer`
//! (IST0134: a TCP or protocol-less port without `addresses` is one listener for every such
//! ServiceEntry on that port, unless the proxies allocate addresses themselves), and one host and
//! port declared with different protocols where the same namespaces see them, istioctl's
//! `serviceentry.ConflictingServiceEntryProtocolAnalyzer` (IST0177).

use std::collections::{BTreeMap, BTreeSet};

use super::{Code, Input, Message};
use crate::istio::{Config, ObjectRef, ServiceEntry, Spec};

fn entries(input: &Input) -> impl Iterator<Item = (&Config, &ServiceEntry)> {
    input.each(|s| match s {
        Spec::ServiceEntry(s) => Some(s),
        _ => None,
    })
}

/// A port's protocol as one ServiceEntry declares it.
type Declared = (String, ObjectRef);

/// IST0177: each ServiceEntry once, for the first host and port it conflicts on.
pub(super) fn protocol_conflicts(input: &Input, out: &mut Vec<Message>) {
    // (scope, host, port) → (protocol, object); scope `*` for exported everywhere.
    let mut index: BTreeMap<(String, &str, u32), Vec<Declared>> = BTreeMap::new();
    for (c, se) in entries(input) {
        let ns = &*c.meta.namespace;
        let scopes: BTreeSet<String> = if se.export_to.is_empty() || se.export_to.iter().any(|e| e == "*") {
            ["*".to_owned()].into()
        } else {
            se.export_to
                .iter()
                .map(|e| if e == "." { ns.to_owned() } else { e.clone() })
                .collect()
        };
        for scope in scopes {
            for host in &se.hosts {
                for port in &se.ports {
                    index
                        .entry((scope.clone(), host.as_str(), port.number))
                        .or_default()
                        .push((port.protocol.to_ascii_uppercase(), c.object_ref()));
                }
            }
        }
    }
    let mut reported = BTreeSet::new();
    for ((scope, host, port), entries) in &index {
        let mut entries = entries.clone();
        if scope != "*" {
            entries.extend(
                index
                    .get(&("*".to_owned(), *host, *port))
                    .cloned()
                    .unwrap_or_default(),
            );
        }
        let protocols: BTreeSet<&str> = entries.iter().map(|(p, _)| p.as_str()).collect();
        if protocols.len() < 2 {
            continue;
        }
        let names: BTreeSet<String> = entries
            .iter()
            .map(|(_, o)| format!("{}/{}", o.namespace, o.name))
            .collect();
        let names: Vec<String> = names.into_iter().collect();
        let protocols: Vec<&str> = protocols.into_iter().collect();
        for (_, object) in &entries {
            if reported.insert(object.clone()) {
                out.push(Message::new(
                    Code::ConflictingServiceEntryProtocol,
                    object,
                    format!(
                        "Multiple ServiceEntries ({}) define the same host {host:?} and port {port} with \
                         conflicting protocols ({}).",
                        names.join(", "),
                        protocols.join(", ")
                    ),
                ));
            }
        }
    }
}

/// IST0134.
pub(super) fn addresses(input: &Input, out: &mut Vec<Message>) {
    if input.dns_auto_allocate {
        return;
    }
    for (c, se) in entries(input) {
        if !se.addresses.is_empty() {
            continue;
        }
        for port in se
            .ports
            .iter()
            .filter(|p| p.protocol.is_empty() || p.protocol.eq_ignore_ascii_case("TCP"))
        {
            out.push(Message::new(
                Code::ServiceEntryAddressesRequired,
                &c.object_ref(),
                format!(
                    "ServiceEntry addresses are required for this protocol (port {} {}).",
                    port.number,
                    if port.protocol.is_empty() {
                        "without a protocol"
                    } else {
                        "TCP"
                    }
                ),
            ));
        }
    }
}
