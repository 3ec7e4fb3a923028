//! The direct writer against prost: every assignment's bytes decode to exactly the message prost
//! would have been given (the reference below is how meshd built it before the writer).

use std::{net::IpAddr, sync::Arc};

use envoy_types::pb::{
    envoy::config::{
        core::v3::{Locality as PbLocality, Metadata},
        endpoint::v3::{
            ClusterLoadAssignment, Endpoint as PbEndpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
        },
    },
    google::protobuf::UInt32Value,
};
use prost::Message;

use super::*;
use crate::{
    envoy::eds::{socket, strings},
    model::{Locality, NetworkId},
};

/// The `ClusterLoadAssignment` as a prost message, field by field.
fn reference(a: &Assignment) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: a.cluster.to_string(),
        endpoints: a
            .localities
            .iter()
            .map(|g| LocalityLbEndpoints {
                locality: Some(PbLocality {
                    region: g.locality.region.to_string(),
                    zone: g.locality.zone.to_string(),
                    sub_zone: g.locality.subzone.to_string(),
                }),
                lb_endpoints: g.endpoints.iter().map(reference_lb).collect(),
                load_balancing_weight: Some(UInt32Value { value: g.weight }),
                priority: g.priority,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn reference_lb(t: &LbTarget) -> LbEndpoint {
    // istiod's `AppendLbEndpointMetadata`, as the prost form meshd sent before the writer.
    let istio = (ISTIO.to_owned(), strings(&[("workload", &t.workload_meta)]));
    let filter_metadata = match t.tls_mode {
        TlsMode::Istio => [(TSM.to_owned(), strings(&[("tlsMode", "istio")])), istio].into(),
        TlsMode::Disabled => [istio].into(),
    };
    LbEndpoint {
        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(PbEndpoint {
            address: Some(socket(t.address, t.port)),
            ..Default::default()
        })),
        health_status: health(t.health) as i32,
        metadata: Some(Metadata {
            filter_metadata,
            ..Default::default()
        }),
        load_balancing_weight: Some(UInt32Value { value: t.weight }),
    }
}

fn encode(a: &Assignment) -> Vec<u8> {
    let e = Encoded::new(a);
    let mut buf = Vec::new();
    e.write(&mut buf);
    assert_eq!(buf.len(), e.len(), "declared length");
    buf
}

fn check(what: &str, a: &Assignment) {
    let want = reference(a);
    let bytes = encode(a);
    let got = ClusterLoadAssignment::decode(&bytes[..]).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(got, want, "{what}");
    // Same length as prost's (map order aside, the same fields with the same sizes).
    assert_eq!(bytes.len(), want.encoded_len(), "{what}: length");
}

fn target(ip: &str, port: u16) -> LbTarget {
    LbTarget {
        address: ip.parse().unwrap(),
        port,
        health: Health::Healthy,
        weight: 1,
        tls_mode: TlsMode::Istio,
        workload_meta: "echo-v1;sample;echo;v1;cluster-1".into(),
        network: Some("network-1".into()),
        cluster: "cluster-1".into(),
    }
}

fn locality(region: &str, zone: &str, subzone: &str) -> Locality {
    Locality {
        region: region.into(),
        zone: zone.into(),
        subzone: subzone.into(),
    }
}

fn group(locality: Locality, priority: u32, endpoints: Vec<LbTarget>) -> LocalityGroup {
    LocalityGroup {
        locality,
        priority,
        weight: endpoints.iter().map(|e| e.weight).sum(),
        endpoints,
    }
}

fn assignment(cluster: &str, localities: Vec<LocalityGroup>) -> Assignment {
    Assignment {
        cluster: cluster.into(),
        localities,
    }
}

#[test]
fn table_decodes_to_the_reference() {
    let name = "outbound|80|v1|echo.default.svc.cluster.local";
    let gateway = LbTarget {
        workload_meta: "".into(),
        weight: 6,
        ..target("192.168.0.1", 15443)
    };
    let plain = LbTarget {
        tls_mode: TlsMode::Disabled,
        workload_meta: "".into(),
        network: None,
        cluster: "".into(),
        ..target("10.0.0.9", 0)
    };
    let healths = [Health::Healthy, Health::Unhealthy, Health::Draining]
        .into_iter()
        .enumerate()
        .map(|(i, health)| LbTarget {
            health,
            ..target(&format!("10.0.0.{i}"), 8080)
        })
        .collect();
    let long = "x".repeat(300);
    let many: Vec<LbTarget> = (0..500u32)
        .map(|i| LbTarget {
            weight: i * 1000,
            ..target(
                &IpAddr::from((0xa000_0000u32 + i).to_be_bytes()).to_string(),
                9080,
            )
        })
        .collect();
    let cases: Vec<(&str, Assignment)> = vec![
        ("empty", assignment(name, vec![])),
        (
            "no name",
            assignment(
                "",
                vec![group(Locality::default(), 0, vec![target("10.0.0.1", 80)])],
            ),
        ),
        (
            "every health",
            assignment(name, vec![group(locality("r", "z", "s"), 0, healths)]),
        ),
        (
            "localities and priorities",
            assignment(
                name,
                vec![
                    group(locality("r1", "", ""), 0, vec![target("10.0.0.1", 80)]),
                    group(locality("r1", "z", ""), 1, vec![target("10.0.0.2", 80)]),
                    group(
                        locality("", "", "s"),
                        2,
                        vec![target("10.0.0.3", 80), gateway.clone()],
                    ),
                    group(locality("r2", "z2", "s2"), 300, vec![gateway]),
                ],
            ),
        ),
        (
            "plaintext, no workload, network or cluster",
            assignment(name, vec![group(locality("r", "", ""), 0, vec![plain])]),
        ),
        (
            "IPv6",
            assignment(
                name,
                [
                    "::1",
                    "fd00::10:0:0:1",
                    "2001:db8:85a3::8a2e:370:7334",
                    "::ffff:10.0.0.1",
                    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
                ]
                .iter()
                .map(|ip| group(locality("r", ip, ""), 0, vec![target(ip, 65535)]))
                .collect(),
            ),
        ),
        (
            "zero and huge weights",
            assignment(
                name,
                vec![LocalityGroup {
                    weight: 0,
                    ..group(
                        Locality::default(),
                        u32::MAX,
                        vec![
                            LbTarget {
                                weight: 0,
                                ..target("0.0.0.0", 1)
                            },
                            LbTarget {
                                weight: u32::MAX,
                                ..target("255.255.255.255", 65535)
                            },
                        ],
                    )
                }],
            ),
        ),
        (
            "long strings (multi-byte lengths)",
            assignment(
                &long,
                vec![group(
                    locality(&long, &long, &long),
                    0,
                    vec![LbTarget {
                        workload_meta: long.as_str().into(),
                        network: Some(NetworkId::from(long.as_str())),
                        cluster: long.as_str().into(),
                        ..target("10.1.2.3", 80)
                    }],
                )],
            ),
        ),
        (
            "500 endpoints (3-byte group length)",
            assignment(name, vec![group(locality("r", "z", ""), 0, many)]),
        ),
    ];
    for (what, a) in &cases {
        check(what, a);
    }
}

#[test]
fn addresses_are_spelled_as_display() {
    for ip in [
        "0.0.0.0",
        "1.2.3.4",
        "10.20.30.40",
        "100.200.255.9",
        "255.255.255.255",
        "::",
        "::1",
        "fe80::1:2",
    ] {
        let ip: IpAddr = ip.parse().unwrap();
        assert_eq!(Ip::new(ip).as_str(), ip.to_string());
    }
    for n in (0..=u32::MAX).step_by(65_521) {
        let ip = IpAddr::from(n.to_be_bytes());
        assert_eq!(Ip::new(ip).as_str(), ip.to_string());
    }
}

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn word(&mut self) -> Arc<str> {
        let len = [0, 1, 5, 20, 130][self.below(5) as usize];
        (0..len)
            .map(|_| char::from(b'a' + self.below(26) as u8))
            .collect::<String>()
            .into()
    }

    fn target(&mut self) -> LbTarget {
        let address = if self.below(4) == 0 {
            IpAddr::from(u128::from(self.next()).to_be_bytes())
        } else {
            IpAddr::from((self.next() as u32).to_be_bytes())
        };
        LbTarget {
            address,
            port: self.next() as u16,
            health: [Health::Healthy, Health::Unhealthy, Health::Draining][self.below(3) as usize],
            weight: [0, 1, 127, 128, u32::MAX][self.below(5) as usize],
            tls_mode: if self.below(2) == 0 {
                TlsMode::Istio
            } else {
                TlsMode::Disabled
            },
            workload_meta: if self.below(2) == 0 {
                self.word()
            } else {
                "".into()
            },
            network: (self.below(2) == 0).then(|| NetworkId::from(&*self.word())),
            cluster: (&*self.word()).into(),
        }
    }
}

#[test]
fn generated_assignments_decode_to_the_reference() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..300 {
        let localities = (0..rng.below(4))
            .map(|_| LocalityGroup {
                locality: Locality {
                    region: rng.word(),
                    zone: rng.word(),
                    subzone: rng.word(),
                },
                priority: [0, 1, 200][rng.below(3) as usize],
                weight: rng.next() as u32,
                endpoints: (0..rng.below(6)).map(|_| rng.target()).collect(),
            })
            .collect();
        check(
            &format!("case {i}"),
            &Assignment {
                cluster: rng.word(),
                localities,
            },
        );
    }
}
