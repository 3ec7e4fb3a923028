use std::collections::BTreeMap;

use super::*;
use crate::{config::MeshNetworks, model::Protocol, xds::generator::static_mesh::service};

/// A gateway-shaped Service in `cluster`: `ports`, external addresses, labels, node ports.
fn svc(
    name: &str,
    cluster: &str,
    ports: &[u16],
    external: &[&str],
    labels: &[(&str, &str)],
    node_ports: &[(u16, u16)],
) -> Service {
    let port_defs: Vec<(&str, u16, Protocol)> = ports.iter().map(|p| ("tls", *p, Protocol::Tls)).collect();
    let mut s = service(name, "istio-system", &port_defs);
    let c = ClusterId::from(cluster);
    let addrs: Vec<ExternalAddress> = external
        .iter()
        .map(|a| match a.parse() {
            Ok(ip) => ExternalAddress::Ip(ip),
            Err(_) => ExternalAddress::Hostname((*a).into()),
        })
        .collect();
    if !addrs.is_empty() {
        s.external_addresses.insert(c.clone(), addrs);
    }
    if !node_ports.is_empty() {
        s.node_ports.insert(c, node_ports.iter().copied().collect());
    }
    s.labels = Arc::new(labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect());
    s
}

fn line(c: &Candidate) -> String {
    let addr = match &c.address {
        ExternalAddress::Ip(ip) => ip.to_string(),
        ExternalAddress::Hostname(h) => h.to_string(),
    };
    format!(
        "{} {} {addr}:{}",
        c.network,
        c.cluster.as_deref().unwrap_or("-"),
        c.port
    )
}

#[test]
fn every_source_in_one_sorted_set() {
    let networks = MeshNetworks::parse(
        "networks:
  vm-net:
    endpoints: [{fromCidr: 192.168.0.0/16}]
    gateways: [{address: 203.0.113.10, port: 15443}, {address: gw.vm.example, port: 443}]
  net-r:
    endpoints: [{fromRegistry: c3}]
    gateways: [{registryServiceName: gw.istio-system.svc.cluster.local, port: 15443}]
",
    )
    .unwrap();
    let net = |n| [(LABEL_NETWORK, n)];
    let services = [
        // Labelled, LB IP and an externalIP: two gateways.
        (
            "c1",
            svc(
                "eastwest",
                "c1",
                &[15021, 15443],
                &["192.0.2.10", "192.0.2.11"],
                &net("network1"),
                &[],
            ),
        ),
        // Same Service in another cluster, another network, an LB host name.
        (
            "c2",
            svc(
                "eastwest",
                "c2",
                &[15443],
                &["lb.c2.example"],
                &net("network2"),
                &[],
            ),
        ),
        // gatewayPort label, exposed.
        (
            "c2",
            svc(
                "alt",
                "c2",
                &[443],
                &["198.51.100.1"],
                &[(LABEL_NETWORK, "network2"), (LABEL_GATEWAY_PORT, "443")],
                &[],
            ),
        ),
        // NodePort: the gateway port maps to the node port.
        (
            "c4",
            svc(
                "np",
                "c4",
                &[15443],
                &["203.0.113.41"],
                &net("network4"),
                &[(15443, 31443)],
            ),
        ),
        // registryServiceName, in its fromRegistry cluster only.
        ("c3", svc("gw", "c3", &[15443], &["198.51.100.30"], &[], &[])),
        ("c1", svc("gw", "c1", &[15443], &["192.0.2.99"], &[], &[])),
        // Unlabelled: not a gateway.
        ("c1", svc("plain", "c1", &[15443], &["192.0.2.50"], &[], &[])),
    ];
    let ids: Vec<(ClusterId, Service)> = services.into_iter().map(|(c, s)| (c.into(), s)).collect();
    let found = discover(&networks, ids.iter().map(|(c, s)| (c, s)));
    let lines: Vec<String> = found.candidates.iter().map(line).collect();
    assert_eq!(
        lines,
        [
            "net-r c3 198.51.100.30:15443",
            "network1 c1 192.0.2.10:15443",
            "network1 c1 192.0.2.11:15443",
            "network2 c2 198.51.100.1:443",
            "network2 c2 lb.c2.example:15443",
            "network4 c4 203.0.113.41:31443",
            "vm-net - 203.0.113.10:15443",
            "vm-net - gw.vm.example:443",
        ]
    );
    assert!(found.ignored.is_empty(), "{:?}", found.ignored);
    assert_eq!(
        hostnames(&found.candidates).into_iter().collect::<Vec<_>>(),
        [Arc::from("gw.vm.example"), Arc::from("lb.c2.example")]
    );
}

#[test]
fn a_labelled_service_must_expose_its_gateway_port() {
    let cases = [
        (
            vec![(LABEL_NETWORK, "n")],
            vec![15021],
            "the Service does not expose gateway port 15443",
        ),
        (
            vec![(LABEL_NETWORK, "n"), (LABEL_GATEWAY_PORT, "8443")],
            vec![15443],
            "the Service does not expose gateway port 8443",
        ),
        (
            vec![(LABEL_NETWORK, "n"), (LABEL_GATEWAY_PORT, "tls")],
            vec![15443],
            "label networking.istio.io/gatewayPort=\"tls\" is not a port number",
        ),
    ];
    for (labels, ports, reason) in cases {
        let s = svc("gw", "c1", &ports, &["192.0.2.1"], &labels, &[]);
        let c = ClusterId::from("c1");
        let found = discover(&MeshNetworks::default(), [(&c, &s)]);
        assert!(found.candidates.is_empty());
        assert_eq!(found.ignored[0].reason, reason);
    }
}

#[test]
fn resolve_expands_names_and_drops_unresolved_ones() {
    let cand = |addr: ExternalAddress| Candidate {
        network: "n".into(),
        cluster: Some("c".into()),
        address: addr,
        port: 15443,
    };
    let candidates = [
        cand(ExternalAddress::Ip("192.0.2.1".parse().unwrap())),
        cand(ExternalAddress::Hostname("a.example".into())),
        cand(ExternalAddress::Hostname("b.example".into())),
    ];
    let dns: BTreeMap<Arc<str>, Vec<IpAddr>> = [(
        "a.example".into(),
        vec!["192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap()],
    )]
    .into();
    let gws = resolve(&candidates, &dns);
    let got: Vec<(String, Option<&str>)> = gws
        .iter()
        .map(|g| (g.address.to_string(), g.hostname.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("192.0.2.1".into(), None),
            ("192.0.2.1".into(), Some("a.example")),
            ("192.0.2.2".into(), Some("a.example")),
        ]
    );
}
