//! Istio's meshNetworks (`mesh/v1alpha1/network.proto`): which endpoints belong to which network, and
//! the gateways that reach each network. Parsed strictly: a field meshd does not know is an error, as
//! in istiod, because a misspelt gateway silently breaks cross-network traffic.

use std::collections::BTreeMap;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::ParseError;

/// `MeshNetworks`: network name → its definition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeshNetworks {
    /// The networks, keyed by network name.
    #[serde(default)]
    pub networks: BTreeMap<String, Network>,
}

/// One network: how to recognise its endpoints, and its gateways.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Endpoint selectors (first match wins across networks).
    #[serde(default)]
    pub endpoints: Vec<NetworkEndpoints>,
    /// Gateways through which other networks reach this one.
    #[serde(default)]
    pub gateways: Vec<Gateway>,
}

/// `NetworkEndpoints`: exactly one of `fromCidr` or `fromRegistry`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawEndpoints", into = "RawEndpoints")]
pub enum NetworkEndpoints {
    /// Endpoints whose address is in this range.
    FromCidr(IpNet),
    /// Every endpoint of this registry (cluster ID).
    FromRegistry(String),
}

/// `IstioNetworkGateway`: a gateway address (or a registry service) and its port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawGateway", into = "RawGateway")]
pub struct Gateway {
    /// Where the gateway is.
    pub target: GatewayTarget,
    /// The gateway's mTLS port (15443 by convention).
    pub port: u16,
    /// Locality label; accepted, as istiod does, but not used for routing.
    pub locality: String,
}

/// How a gateway is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayTarget {
    /// A Service in the registry named by the network's `fromRegistry`, e.g.
    /// `istio-eastwestgateway.istio-system.svc.cluster.local`; its external addresses are used.
    RegistryServiceName(String),
    /// A fixed IP address or DNS name.
    Address(String),
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawEndpoints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from_cidr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from_registry: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawGateway {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    registry_service_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    address: Option<String>,
    port: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    locality: String,
}

impl TryFrom<RawEndpoints> for NetworkEndpoints {
    type Error = String;

    fn try_from(raw: RawEndpoints) -> Result<Self, String> {
        match (raw.from_cidr, raw.from_registry) {
            (Some(cidr), None) => cidr
                .trim()
                .parse::<IpNet>()
                .map(NetworkEndpoints::FromCidr)
                .map_err(|e| format!("fromCidr {cidr:?} is not a valid CIDR ({e})")),
            (None, Some(reg)) if reg.trim().is_empty() => Err("fromRegistry must not be empty".into()),
            (None, Some(reg)) => Ok(NetworkEndpoints::FromRegistry(reg)),
            (Some(_), Some(_)) => Err("set exactly one of fromCidr or fromRegistry, not both".into()),
            (None, None) => Err("set exactly one of fromCidr or fromRegistry".into()),
        }
    }
}

impl From<NetworkEndpoints> for RawEndpoints {
    fn from(e: NetworkEndpoints) -> Self {
        match e {
            NetworkEndpoints::FromCidr(c) => RawEndpoints {
                from_cidr: Some(c.to_string()),
                from_registry: None,
            },
            NetworkEndpoints::FromRegistry(r) => RawEndpoints {
                from_cidr: None,
                from_registry: Some(r),
            },
        }
    }
}

impl TryFrom<RawGateway> for Gateway {
    type Error = String;

    fn try_from(raw: RawGateway) -> Result<Self, String> {
        let port = u16::try_from(raw.port)
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("port {} is not in 1-65535", raw.port))?;
        let target = match (raw.registry_service_name, raw.address) {
            (Some(name), None) => {
                if !is_dns_name(&name) {
                    return Err(format!("registryServiceName {name:?} is not a service hostname"));
                }
                GatewayTarget::RegistryServiceName(name)
            }
            (None, Some(addr)) => {
                if addr.parse::<std::net::IpAddr>().is_err() && !is_dns_name(&addr) {
                    return Err(format!(
                        "address {addr:?} is neither an IP address nor a DNS name"
                    ));
                }
                GatewayTarget::Address(addr)
            }
            (Some(_), Some(_)) => {
                return Err("set exactly one of registryServiceName or address, not both".into());
            }
            (None, None) => return Err("set exactly one of registryServiceName or address".into()),
        };
        Ok(Gateway {
            target,
            port,
            locality: raw.locality,
        })
    }
}

impl From<Gateway> for RawGateway {
    fn from(g: Gateway) -> Self {
        let (registry_service_name, address) = match g.target {
            GatewayTarget::RegistryServiceName(n) => (Some(n), None),
            GatewayTarget::Address(a) => (None, Some(a)),
        };
        RawGateway {
            registry_service_name,
            address,
            port: g.port.into(),
            locality: g.locality,
        }
    }
}

/// RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens, ≤ 253 chars.
fn is_dns_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

impl MeshNetworks {
    /// Parses meshNetworks YAML (the `meshNetworks` key of the `istio` ConfigMap).
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let nets: Self = super::parse_yaml(text, |_| {})?;
        if let Some(name) = nets.networks.keys().find(|n| n.trim().is_empty()) {
            return Err(ParseError {
                field: format!("networks.{name:?}"),
                message: "network name must not be empty".into(),
                line: None,
                column: None,
            });
        }
        Ok(nets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"
networks:
  network1:
    endpoints:
    - fromRegistry: cluster1
    gateways:
    - registryServiceName: istio-eastwestgateway.istio-system.svc.cluster.local
      port: 15443
  vm-net:
    endpoints:
    - fromCidr: 192.168.100.0/22
    - fromCidr: "2001:db8::/64"
    gateways:
    - address: 203.0.113.10
      port: 15443
      locality: us-east-1a
    - address: gw.example.com
      port: 443
"#;

    #[test]
    fn every_field_of_the_schema_parses() {
        let nets = MeshNetworks::parse(FULL).expect("parses");
        let n1 = &nets.networks["network1"];
        assert_eq!(n1.endpoints, [NetworkEndpoints::FromRegistry("cluster1".into())]);
        assert_eq!(
            n1.gateways,
            [Gateway {
                target: GatewayTarget::RegistryServiceName(
                    "istio-eastwestgateway.istio-system.svc.cluster.local".into()
                ),
                port: 15443,
                locality: String::new(),
            }]
        );
        let vm = &nets.networks["vm-net"];
        assert_eq!(
            vm.endpoints,
            [
                NetworkEndpoints::FromCidr("192.168.100.0/22".parse().unwrap()),
                NetworkEndpoints::FromCidr("2001:db8::/64".parse().unwrap()),
            ]
        );
        assert_eq!(
            vm.gateways[0].target,
            GatewayTarget::Address("203.0.113.10".into())
        );
        assert_eq!(vm.gateways[0].locality, "us-east-1a");
        assert_eq!(
            vm.gateways[1].target,
            GatewayTarget::Address("gw.example.com".into())
        );
        assert_eq!(vm.gateways[1].port, 443);
    }

    #[test]
    fn serialises_back_to_the_same_schema() {
        let nets = MeshNetworks::parse(FULL).unwrap();
        let yaml = serde_yaml::to_string(&nets).unwrap();
        assert_eq!(MeshNetworks::parse(&yaml).unwrap(), nets);
    }

    #[test]
    fn empty_documents_mean_no_networks() {
        assert_eq!(MeshNetworks::parse("").unwrap(), MeshNetworks::default());
        assert_eq!(
            MeshNetworks::parse("networks: {}").unwrap(),
            MeshNetworks::default()
        );
        let nets = MeshNetworks::parse("networks:\n  n1: {}\n").unwrap();
        assert_eq!(nets.networks["n1"], Network::default());
    }

    #[test]
    fn bad_input_names_field_and_line() {
        // (yaml, field path, message fragment, line)
        let cases: &[(&str, &str, &str, Option<usize>)] = &[
            (
                "networks:\n  n1:\n    endpoints:\n    - fromCidr: 10.0.0.0/33\n",
                "networks.n1.endpoints[0]",
                "not a valid CIDR",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    endpoints:\n    - fromCidr: banana\n",
                "networks.n1.endpoints[0]",
                "\"banana\" is not a valid CIDR",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    endpoints:\n    - fromCidr: 10.0.0.0/8\n      fromRegistry: c1\n",
                "networks.n1.endpoints[0]",
                "not both",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    endpoints:\n    - {}\n",
                "networks.n1.endpoints[0]",
                "exactly one of fromCidr",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    endpoints:\n    - fromRegistry: ''\n",
                "networks.n1.endpoints[0]",
                "must not be empty",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    endpoints:\n    - fromCluster: c1\n",
                "networks.n1.endpoints[0].fromCluster",
                "unknown field `fromCluster`",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    gateways:\n    - dns: gw.example.com\n      port: 15443\n",
                "networks.n1.gateways[0].dns",
                "unknown field `dns`",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    gateways:\n    - address: [1, 2]\n      port: 15443\n",
                "networks.n1.gateways[0].address",
                "invalid type: sequence",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    gateways:\n    - address: 1.2.3.4\n      port: 70000\n",
                "networks.n1.gateways[0]",
                "port 70000 is not in 1-65535",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    gateways:\n    - address: 1.2.3.4\n      port: 0\n",
                "networks.n1.gateways[0]",
                "port 0",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    gateways:\n    - address: 1.2.3.4\n",
                "networks.n1.gateways[0]",
                "missing field `port`",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    gateways:\n    - address: 'not a host!'\n      port: 1\n",
                "networks.n1.gateways[0]",
                "neither an IP",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    gateways:\n    - registryServiceName: gw.ns.svc\n      address: 1.2.3.4\n      port: 1\n",
                "networks.n1.gateways[0]",
                "not both",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    gateways:\n    - port: 15443\n",
                "networks.n1.gateways[0]",
                "exactly one of registryServiceName",
                Some(4),
            ),
            (
                "networks:\n  n1:\n    gateway: []\n",
                "networks.n1.gateway",
                "unknown field `gateway`",
                Some(3),
            ),
            ("network: {}\n", "network", "unknown field `network`", Some(1)),
            (
                "networks:\n  n1: 'unclosed\n",
                "networks.n1",
                "found unexpected end of stream",
                Some(3),
            ),
            ("networks: 5\n", "networks", "invalid type: integer", Some(1)),
        ];
        for (yaml, field, msg, line) in cases {
            let err = MeshNetworks::parse(yaml).expect_err(yaml);
            assert_eq!(err.field.trim_matches('.'), *field, "{yaml}: {err}");
            assert!(err.message.contains(msg), "{yaml}: {err}");
            if line.is_some() {
                assert_eq!(err.line, *line, "{yaml}: {err}");
            }
        }
    }
}
