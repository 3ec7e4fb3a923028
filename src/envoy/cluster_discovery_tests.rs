//! The discovery type and inline endpoints of a cluster per resolution and proxy kind, through
//! [`super::super::cds::cluster`] (what CDS sends).

use std::sync::Arc;

use envoy_types::pb::envoy::{
    config::{
        cluster::v3::{
            Cluster,
            cluster::{ClusterDiscoveryType, DiscoveryType, DnsLookupFamily, LbPolicy},
        },
        core::v3::address,
        endpoint::v3::lb_endpoint::HostIdentifier,
    },
    extensions::transport_sockets::tls::v3::UpstreamTlsContext,
};
use prost::Message;

use crate::{
    envoy::{
        ProxyKind, StaticMesh, cds,
        static_mesh::{endpoint, proxy, service},
    },
    model::{DnsTarget, EndpointPort, Locality, Origin, Protocol, Resolution, Service},
    traffic::tests::config,
};

const HOST: &str = "api.example.com";

fn target(address: &str, port: u16, zone: &str, weight: u32) -> DnsTarget {
    DnsTarget {
        address: address.into(),
        ports: Arc::new([EndpointPort {
            service_port_name: "https".into(),
            port,
        }]),
        locality: Locality {
            region: if zone.is_empty() { "" } else { "r" }.into(),
            zone: zone.into(),
            subzone: "".into(),
        },
        weight,
    }
}

/// `api.example.com:443` from a ServiceEntry in `ns` with `resolution`.
fn external(resolution: Resolution) -> Service {
    let mut s = service("x", "ns", &[("https", 443, Protocol::Https)]);
    s.hostname = HOST.into();
    s.name = HOST.into();
    s.resolution = resolution;
    s.mesh_external = true;
    s.origin = Origin::ServiceEntry {
        namespace: "ns".into(),
        names: vec!["api".into()],
    };
    s
}

/// What a test reads of a cluster: its type, load balancer, DNS fields and endpoints.
#[allow(deprecated)] // istiod's DNS fields
fn summary(c: &Cluster) -> String {
    let ty = match c.cluster_discovery_type {
        Some(ClusterDiscoveryType::Type(t)) => {
            DiscoveryType::try_from(t).map_or("?".into(), |t| t.as_str_name().to_owned())
        }
        _ => "none".into(),
    };
    let lb = LbPolicy::try_from(c.lb_policy).map_or("?", |l| l.as_str_name());
    let mut out = format!("{ty} lb={lb} eds={}", c.eds_cluster_config.is_some());
    if c.respect_dns_ttl {
        let family = DnsLookupFamily::try_from(c.dns_lookup_family).map_or("?", |f| f.as_str_name());
        let refresh = c.dns_refresh_rate.as_ref().map_or(0, |d| d.seconds);
        out += &format!(" family={family} refresh={refresh}s");
    }
    if let Some(a) = &c.load_assignment {
        let groups: Vec<String> = a
            .endpoints
            .iter()
            .map(|g| {
                let eps: Vec<String> = g
                    .lb_endpoints
                    .iter()
                    .filter_map(|e| match &e.host_identifier {
                        Some(HostIdentifier::Endpoint(ep)) => match ep.address.as_ref()?.address.as_ref()? {
                            address::Address::SocketAddress(s) => {
                                Some(format!("{}:{:?}", s.address, s.port_specifier))
                            }
                            _ => None,
                        },
                        _ => None,
                    })
                    .map(|s| s.replace("Some(PortValue(", "").replace("))", ""))
                    .collect();
                let zone = g.locality.as_ref().map_or("", |l| l.zone.as_str());
                format!("[{zone}]{}", eps.join(","))
            })
            .collect();
        out += &format!(" endpoints={}", groups.join(" "));
    }
    out
}

fn built(m: &StaticMesh, kind: ProxyKind, name: &str) -> Option<Cluster> {
    let mut p = proxy(kind, "ns");
    p.ips = vec!["10.1.0.5".parse().unwrap()];
    cds::cluster(m, &p, name).map(|b| b.cluster)
}

/// What a case says, the service and its endpoints, the proxy kind, and the cluster's [`summary`]
/// (`None`: not built).
type Case = (
    &'static str,
    Service,
    Vec<crate::model::Endpoint>,
    ProxyKind,
    Option<&'static str>,
);

#[test]
fn discovery_follows_resolution_and_proxy_kind() {
    let name = format!("outbound|443||{HOST}");
    let ip_ep = || {
        let mut e = endpoint("192.0.2.7".parse().unwrap(), &[("https", 8443)], "c1");
        e.placement_mut().locality = Locality {
            region: "r".into(),
            zone: "z1".into(),
            subzone: "".into(),
        };
        e
    };
    let dns = |targets: Vec<DnsTarget>| Resolution::Dns(targets.into());
    let cases: Vec<Case> = vec![
        (
            "DNS without endpoints: the host itself, resolved by Envoy, inline",
            external(dns(vec![target(HOST, 443, "", 1)])),
            vec![],
            ProxyKind::Sidecar,
            Some(
                "STRICT_DNS lb=LEAST_REQUEST eds=false family=V4_ONLY refresh=60s endpoints=[]api.example.com:443",
            ),
        ),
        (
            "DNS on a gateway: the same cluster",
            external(dns(vec![target(HOST, 443, "", 1)])),
            vec![],
            ProxyKind::Router,
            Some(
                "STRICT_DNS lb=LEAST_REQUEST eds=false family=V4_ONLY refresh=60s endpoints=[]api.example.com:443",
            ),
        ),
        (
            "DNS endpoints by name and by IP, grouped by locality (the IP as EDS would send it)",
            external(dns(vec![
                target("a.example.net", 8443, "z1", 2),
                target("b.example.net", 9443, "z2", 1),
            ])),
            vec![ip_ep()],
            ProxyKind::Sidecar,
            Some(
                "STRICT_DNS lb=LEAST_REQUEST eds=false family=V4_ONLY refresh=60s endpoints=[z1]192.0.2.7:8443,a.example.net:8443 [z2]b.example.net:9443",
            ),
        ),
        (
            "DNS_ROUND_ROBIN: LOGICAL_DNS with its one endpoint",
            external(Resolution::DnsRoundRobin(vec![target(HOST, 443, "", 1)].into())),
            vec![],
            ProxyKind::Sidecar,
            Some(
                "LOGICAL_DNS lb=LEAST_REQUEST eds=false family=V4_ONLY refresh=60s endpoints=[]api.example.com:443",
            ),
        ),
        (
            "DNS with no name and no endpoint: no cluster (istiod builds none)",
            external(dns(vec![])),
            vec![],
            ProxyKind::Sidecar,
            None,
        ),
        (
            "proxyless gRPC gets EDS whatever the resolution (istiod's gRPC generator)",
            external(dns(vec![target(HOST, 443, "", 1)])),
            vec![],
            ProxyKind::Grpc,
            Some("EDS lb=ROUND_ROBIN eds=true"),
        ),
        (
            "NONE / headless on a sidecar: the original destination",
            external(Resolution::Passthrough),
            vec![ip_ep()],
            ProxyKind::Sidecar,
            Some("ORIGINAL_DST lb=CLUSTER_PROVIDED eds=false"),
        ),
        (
            "NONE / headless on a gateway: EDS (its client dialled the gateway)",
            external(Resolution::Passthrough),
            vec![ip_ep()],
            ProxyKind::Router,
            Some("EDS lb=LEAST_REQUEST eds=true"),
        ),
        (
            "STATIC stays EDS",
            external(Resolution::ClientSideLb),
            vec![ip_ep()],
            ProxyKind::Sidecar,
            Some("EDS lb=LEAST_REQUEST eds=true"),
        ),
        (
            "ExternalName: the external name on the service port",
            {
                let mut s = external(Resolution::Alias("db.example.org".into()));
                s.origin = Origin::Kubernetes;
                s
            },
            vec![],
            ProxyKind::Sidecar,
            Some(
                "STRICT_DNS lb=LEAST_REQUEST eds=false family=V4_ONLY refresh=60s endpoints=[]db.example.org:443",
            ),
        ),
    ];
    for (what, svc, eps, kind, want) in cases {
        let m = StaticMesh::new(1).with(svc, eps);
        let got = built(&m, kind, &name).map(|c| summary(&c));
        assert_eq!(got.as_deref(), want, "{what}");
    }
}

#[test]
fn lookup_family_follows_the_proxy_addresses() {
    let m = StaticMesh::new(1).with(
        external(Resolution::Dns(vec![target(HOST, 443, "", 1)].into())),
        vec![],
    );
    let name = format!("outbound|443||{HOST}");
    for (ips, want) in [
        (vec!["10.0.0.1"], DnsLookupFamily::V4Only),
        (vec!["fd00::1"], DnsLookupFamily::V6Only),
        (vec!["10.0.0.1", "fd00::1"], DnsLookupFamily::All),
        (vec![], DnsLookupFamily::All),
    ] {
        let mut p = proxy(ProxyKind::Sidecar, "ns");
        p.ips = ips.iter().map(|i| i.parse().unwrap()).collect();
        let c = cds::cluster(&m, &p, &name).unwrap().cluster;
        assert_eq!(c.dns_lookup_family, want as i32, "{ips:?}");
    }
}

/// TLS origination to an external host: a DestinationRule `tls: SIMPLE` puts an upstream TLS context
/// with its SNI and SANs and the system roots on the DNS cluster; a remote cluster's sidecar gets the
/// same cluster (istio#60343: istiod 1.30 drops DNS ServiceEntries there).
#[test]
fn tls_origination_on_a_dns_cluster_in_every_cluster() {
    let dr = config(
        "DestinationRule",
        "ns",
        "api",
        "1",
        "host: api.example.com\ntrafficPolicy: {tls: {mode: SIMPLE, sni: api.example.com, subjectAltNames: [api.example.com]}}",
    );
    let m = StaticMesh::new(1)
        .with(
            external(Resolution::Dns(vec![target(HOST, 443, "", 1)].into())),
            vec![],
        )
        .with_config([dr]);
    let name = format!("outbound|443||{HOST}");
    for cluster_id in [None, Some("cluster2")] {
        let mut p = proxy(ProxyKind::Sidecar, "ns");
        p.cluster_id = cluster_id.map(Into::into);
        let c = cds::cluster(&m, &p, &name).unwrap().cluster;
        assert!(
            summary(&c).starts_with("STRICT_DNS"),
            "{cluster_id:?}: {}",
            summary(&c)
        );
        let socket = c.transport_socket.expect("TLS origination socket");
        let Some(envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(any)) =
            socket.config_type
        else {
            panic!("no typed config");
        };
        let tls = UpstreamTlsContext::decode(any.value.as_slice()).unwrap();
        assert_eq!(tls.sni, "api.example.com");
        let text = format!("{tls:?}");
        assert!(text.contains("file-root:system"), "{text}");
        assert!(text.contains("Exact(\"api.example.com\")"), "{text}");
    }
}
