//! The registry view, table-driven: ServiceEntries and WorkloadEntries (JSON, as the API server gives
//! them) in, one line per service and per endpoint out.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::{
    config::MeshNetworks,
    istio::{Config, ObjectMeta, Source, Spec},
    model::Protocol,
    registry::network::NetworkResolver,
};

pub(super) fn ctx() -> Context {
    Context {
        cluster: "cluster1".into(),
        trust_domain: "cluster.local".into(),
        networks: NetworkResolver::new(&MeshNetworks::default(), &"cluster1".into()),
    }
}

/// `(kind, namespace/name, created, labels, spec)` → a Config.
fn object(kind: &str, name: &str, created: &str, labels: Value, spec: Value) -> Config {
    let (namespace, name) = name.split_once('/').unwrap();
    let meta = ObjectMeta {
        namespace: namespace.into(),
        name: name.into(),
        labels: serde_json::from_value(labels).unwrap(),
        annotations: Default::default(),
        revision: "1".into(),
        creation_timestamp: Some(created.to_owned()),
        source: Source::Cluster("cluster1".into()),
    };
    let spec = match kind {
        "se" => Spec::ServiceEntry(Arc::new(serde_json::from_value(spec).unwrap())),
        "we" => Spec::WorkloadEntry(Arc::new(serde_json::from_value(spec).unwrap())),
        _ => unreachable!("{kind}"),
    };
    Config { meta, spec }
}

pub(super) fn se(name: &str, created: &str, spec: Value) -> Config {
    object("se", name, created, json!({}), spec)
}

pub(super) fn we(name: &str, labels: Value, spec: Value) -> Config {
    object("we", name, "2024-01-01T00:00:00Z", labels, spec)
}

/// The resolution's name (as registryz writes it) and the names a DNS one resolves:
/// `Dns[a.example https=443 z=r/z w=2]`.
fn resolution(r: &crate::model::Resolution) -> String {
    let name = serde_json::to_string(r).unwrap_or_default().replace('"', "");
    let targets: Vec<String> = r
        .dns_targets()
        .iter()
        .map(|t| {
            let ports: Vec<String> = t
                .ports
                .iter()
                .map(|p| format!("{}={}", p.service_port_name, p.port))
                .collect();
            let zone = format!("{}/{}", t.locality.region, t.locality.zone);
            format!("{} {} z={} w={}", t.address, ports.join(","), zone, t.weight)
        })
        .collect();
    if targets.is_empty() {
        name
    } else {
        format!("{name}[{}]", targets.join("; "))
    }
}

pub(super) fn lines(b: &Built) -> Vec<String> {
    let mut out: Vec<String> = b
        .services
        .iter()
        .map(|s| {
            let ports: Vec<String> = s
                .ports
                .iter()
                .map(|p| format!("{}:{}:{:?}:{:?}", p.name, p.port, p.protocol, p.target_port))
                .collect();
            format!(
                "svc {} ns={} {} ext={} vips={:?} export={:?} ports=[{}] from={:?}",
                s.hostname,
                s.namespace,
                resolution(&s.resolution),
                s.mesh_external,
                s.cluster_vips
                    .values()
                    .flatten()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
                s.export_to,
                ports.join(","),
                s.origin,
            )
        })
        .collect();
    for (key, eps) in &b.endpoints {
        for e in eps.iter() {
            let ports: Vec<String> = e
                .ports
                .iter()
                .map(|p| format!("{}={}", p.service_port_name, p.port))
                .collect();
            out.push(format!(
                "ep {} {} [{}] net={} w={} tls={:?} {:?} {}",
                key.hostname,
                e.address,
                ports.join(","),
                e.network().as_deref().unwrap_or("-"),
                e.weight,
                e.tls_mode,
                e.kind,
                e.workload.as_deref().unwrap_or("-"),
            ));
        }
    }
    for (what, why) in &b.ignored {
        out.push(format!("ignored {what}: {why}"));
    }
    out
}

#[test]
fn service_entries_convert_like_istiod() {
    let t0 = "2024-01-01T00:00:00Z";
    let t1 = "2024-01-02T00:00:00Z";
    let cases: Vec<(&str, Vec<Config>, Vec<&str>)> = vec![
        (
            "external API: DNS, MESH_EXTERNAL, no endpoints (the host is resolved by the proxy)",
            vec![se(
                "sample/api",
                t0,
                json!({"hosts": ["api.example.com"], "location": "MESH_EXTERNAL",
                "resolution": "DNS", "ports": [{"number": 443, "name": "https", "protocol": "HTTPS"}]}),
            )],
            vec![
                r#"svc api.example.com ns=sample Dns[api.example.com https=443 z=/ w=1] ext=true vips=[] export=Default ports=[https:443:Https:None] from=ServiceEntry { namespace: "sample", names: ["api"] }"#,
            ],
        ),
        (
            "DNS endpoints: names are resolved by the proxy (their port, else targetPort), IPs are endpoints, sockets dropped",
            vec![se(
                "sample/api",
                t0,
                json!({"hosts": ["api.example.com"], "resolution": "DNS",
                "ports": [{"number": 443, "name": "https", "protocol": "HTTPS", "targetPort": 8443}],
                "endpoints": [{"address": "us.api.example.com", "locality": "us/us-1", "weight": 3},
                    {"address": "eu.api.example.com", "ports": {"https": 9443}},
                    {"address": "192.0.2.1"}, {"address": "unix:///sock"}]}),
            )],
            vec![
                r#"svc api.example.com ns=sample Dns[us.api.example.com https=8443 z=us/us-1 w=3; eu.api.example.com https=9443 z=/ w=1] ext=true vips=[] export=Default ports=[https:443:Https:Some(Number(8443))] from=ServiceEntry { namespace: "sample", names: ["api"] }"#,
                "ep api.example.com 192.0.2.1 [https=8443] net=- w=1 tls=Disabled ServiceEntry api-2",
            ],
        ),
        (
            "two DNS_ROUND_ROBIN entries of one host merge their names once each",
            vec![
                se(
                    "ns/a",
                    t0,
                    json!({"hosts": ["x.example"], "resolution": "DNS_ROUND_ROBIN", "ports": [{"number": 80, "name": "http"}]}),
                ),
                se(
                    "ns/b",
                    t1,
                    json!({"hosts": ["x.example"], "resolution": "DNS_ROUND_ROBIN", "ports": [{"number": 80, "name": "http"}],
                    "endpoints": [{"address": "x1.example"}]}),
                ),
                se(
                    "ns/c",
                    t1,
                    json!({"hosts": ["x.example"], "resolution": "DNS_ROUND_ROBIN", "ports": [{"number": 80, "name": "http"}]}),
                ),
            ],
            vec![
                r#"svc x.example ns=ns DnsRoundRobin[x.example http=80 z=/ w=1; x1.example http=80 z=/ w=1] ext=true vips=[] export=Default ports=[http:80:Unknown:None] from=ServiceEntry { namespace: "ns", names: ["a", "b", "c"] }"#,
            ],
        ),
        (
            "STATIC inline endpoints, addresses (a /32 is an IP, wider CIDRs are not VIPs), targetPort, exportTo",
            vec![se(
                "ns/db",
                t0,
                json!({"hosts": ["db.internal", "db2.internal"], "addresses": ["240.0.0.1", "10.5.0.0/16", "240.0.0.2/32"],
                "location": "MESH_INTERNAL", "resolution": "STATIC", "exportTo": ["."],
                "ports": [{"number": 5432, "name": "tcp-pg", "protocol": "TCP", "targetPort": 15432}, {"number": 80, "name": "http"}],
                "endpoints": [{"address": "10.9.0.1", "ports": {"http": 8080}}, {"address": "10.9.0.2", "serviceAccount": "db", "network": "n2"}]}),
            )],
            vec![
                r#"svc db.internal ns=ns ClientSideLb ext=false vips=["240.0.0.1", "240.0.0.2"] export=Namespaces({"ns"}) ports=[tcp-pg:5432:Tcp:Some(Number(15432)),http:80:Unknown:None] from=ServiceEntry { namespace: "ns", names: ["db"] }"#,
                r#"svc db2.internal ns=ns ClientSideLb ext=false vips=["240.0.0.1", "240.0.0.2"] export=Namespaces({"ns"}) ports=[tcp-pg:5432:Tcp:Some(Number(15432)),http:80:Unknown:None] from=ServiceEntry { namespace: "ns", names: ["db"] }"#,
                "ep db.internal 10.9.0.1 [tcp-pg=15432,http=8080] net=- w=1 tls=Disabled ServiceEntry db-0",
                "ep db.internal 10.9.0.2 [tcp-pg=15432,http=80] net=n2 w=1 tls=Istio ServiceEntry db-1",
                "ep db2.internal 10.9.0.1 [tcp-pg=15432,http=8080] net=- w=1 tls=Disabled ServiceEntry db-0",
                "ep db2.internal 10.9.0.2 [tcp-pg=15432,http=80] net=n2 w=1 tls=Istio ServiceEntry db-1",
            ],
        ),
        (
            "workloadSelector picks WorkloadEntries of its own namespace only; NONE is passthrough",
            vec![
                se(
                    "ns/vms",
                    t0,
                    json!({"hosts": ["vm.svc.example"], "location": "MESH_INTERNAL", "resolution": "NONE",
                    "ports": [{"number": 9080, "name": "http", "protocol": "HTTP"}], "workloadSelector": {"labels": {"app": "vm"}}}),
                ),
                we(
                    "ns/vm-b",
                    json!({}),
                    json!({"address": "10.8.0.2", "labels": {"app": "vm"}, "network": "network2", "weight": 4, "serviceAccount": "vm"}),
                ),
                we(
                    "ns/vm-a",
                    json!({"app": "vm"}),
                    json!({"address": "10.8.0.1", "ports": {"http": 8080}}),
                ),
                we(
                    "ns/other",
                    json!({"app": "other"}),
                    json!({"address": "10.8.0.3"}),
                ),
                we(
                    "elsewhere/vm",
                    json!({"app": "vm"}),
                    json!({"address": "10.8.0.4"}),
                ),
            ],
            vec![
                r#"svc vm.svc.example ns=ns Passthrough ext=false vips=[] export=Default ports=[http:9080:Http:None] from=ServiceEntry { namespace: "ns", names: ["vms"] }"#,
                "ep vm.svc.example 10.8.0.1 [http=8080] net=- w=1 tls=Disabled WorkloadEntry vm-a",
                "ep vm.svc.example 10.8.0.2 [http=9080] net=network2 w=4 tls=Istio WorkloadEntry vm-b",
            ],
        ),
        (
            "two ServiceEntries of one host and namespace: ports and endpoints merge, the oldest first",
            vec![
                se(
                    "ns/newer",
                    t1,
                    json!({"hosts": ["m.example"], "resolution": "STATIC", "ports": [{"number": 80, "name": "http"}, {"number": 81, "name": "http2"}],
                    "endpoints": [{"address": "10.7.0.2"}]}),
                ),
                se(
                    "ns/older",
                    t0,
                    json!({"hosts": ["m.example"], "resolution": "STATIC", "ports": [{"number": 80, "name": "http"}],
                    "endpoints": [{"address": "10.7.0.1"}]}),
                ),
            ],
            vec![
                r#"svc m.example ns=ns ClientSideLb ext=true vips=[] export=Default ports=[http:80:Unknown:None,http2:81:Unknown:None] from=ServiceEntry { namespace: "ns", names: ["older", "newer"] }"#,
                "ep m.example 10.7.0.1 [http=80] net=- w=1 tls=Disabled ServiceEntry older-0",
                "ep m.example 10.7.0.2 [http=80,http2=81] net=- w=1 tls=Disabled ServiceEntry newer-0",
            ],
        ),
        (
            "a later ServiceEntry with another resolution is left out of the host; other namespaces are other services",
            vec![
                se(
                    "ns/a",
                    t0,
                    json!({"hosts": ["x.example"], "resolution": "STATIC", "ports": [{"number": 80, "name": "http"}]}),
                ),
                se(
                    "ns/b",
                    t1,
                    json!({"hosts": ["x.example"], "resolution": "DNS", "ports": [{"number": 80, "name": "http"}]}),
                ),
                se(
                    "other/c",
                    t1,
                    json!({"hosts": ["x.example"], "resolution": "DNS", "ports": [{"number": 80, "name": "http"}]}),
                ),
            ],
            vec![
                r#"svc x.example ns=ns ClientSideLb ext=true vips=[] export=Default ports=[http:80:Unknown:None] from=ServiceEntry { namespace: "ns", names: ["a"] }"#,
                r#"svc x.example ns=other Dns[x.example http=80 z=/ w=1] ext=true vips=[] export=Default ports=[http:80:Unknown:None] from=ServiceEntry { namespace: "other", names: ["c"] }"#,
                "ignored ServiceEntry ns/b host x.example: an older ServiceEntry declares this host with another resolution, labels, selector or exportTo",
            ],
        ),
    ];
    for (name, configs, want) in cases {
        let got = lines(&build(&configs, &[], &[], &ctx()));
        assert_eq!(got, want, "{name}");
    }
}

fn selecting(name: &str, selector: Value, ports: Vec<ServicePort>) -> Selecting {
    Selecting {
        key: ServiceKey::new(format!("{name}.sample.svc.cluster.local"), "sample"),
        selector: Arc::new(serde_json::from_value(selector).unwrap()),
        ports,
    }
}

fn port(name: &str, number: u16, target: Option<TargetPort>) -> ServicePort {
    ServicePort {
        name: name.into(),
        port: number,
        protocol: Protocol::Http,
        target_port: target,
    }
}

#[test]
fn kubernetes_services_get_the_workload_entries_they_select() {
    let configs = vec![
        we(
            "sample/hello-vm",
            json!({"app": "helloworld"}),
            json!({"address": "10.202.0.5", "network": "network2",
            "locality": "eu-west1/eu-west1-a", "weight": 2, "serviceAccount": "helloworld", "ports": {"web": 5001}}),
        ),
        we(
            "sample/other",
            json!({"app": "other"}),
            json!({"address": "10.202.0.6"}),
        ),
        // A ServiceEntry of the Kubernetes host adds no endpoints: the Kubernetes Service wins the host.
        se(
            "sample/squat",
            "2024-01-01T00:00:00Z",
            json!({"hosts": ["helloworld.sample.svc.cluster.local"], "resolution": "STATIC",
            "ports": [{"number": 5000, "name": "http"}], "endpoints": [{"address": "10.6.6.6"}]}),
        ),
    ];
    let kube = [
        selecting(
            "helloworld",
            json!({"app": "helloworld"}),
            vec![port("http", 5000, Some(TargetPort::Number(5000)))],
        ),
        selecting(
            "named",
            json!({"app": "helloworld"}),
            vec![port("http", 80, Some(TargetPort::Name("web".into())))],
        ),
        selecting(
            "unnamed",
            json!({"app": "helloworld"}),
            vec![port("http", 80, Some(TargetPort::Name("nope".into())))],
        ),
    ];
    let got = lines(&build(&configs, &kube, &[], &ctx()));
    assert_eq!(
        got,
        [
            r#"svc helloworld.sample.svc.cluster.local ns=sample ClientSideLb ext=true vips=[] export=Default ports=[http:5000:Unknown:None] from=ServiceEntry { namespace: "sample", names: ["squat"] }"#,
            "ep helloworld.sample.svc.cluster.local 10.202.0.5 [http=5000] net=network2 w=2 tls=Istio WorkloadEntry hello-vm",
            "ep named.sample.svc.cluster.local 10.202.0.5 [http=5001] net=network2 w=2 tls=Istio WorkloadEntry hello-vm",
        ]
    );
}
