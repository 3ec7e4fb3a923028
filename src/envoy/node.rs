//! The proxy behind a stream, parsed defensively from the `Node` of its first request.
//!
//! Owns: turning untrusted `node` / `node.metadata` (istiod's `NodeMetadata` JSON names) into a
//! [`Proxy`]. Every string and list is capped, a wrong JSON type is an error naming the field, and
//! nothing here panics. Does NOT: check the metadata against the caller's credentials
//! (`xds::shared::Caller::authorize` does that with the authenticator's result).

use std::{collections::BTreeMap, net::IpAddr, sync::Arc};

use envoy_types::pb::{
    envoy::config::core::v3::Node,
    google::protobuf::{Struct, Value, value::Kind},
};
use serde::Serialize;

use crate::model::{ClusterId, Locality, NetworkId};

/// Longest node id, metadata string, label key or label value accepted.
const MAX_STRING: usize = 1024;
/// Most labels, or networks in a view, accepted.
const MAX_ENTRIES: usize = 256;

/// What a stream's node is, for generators and debug.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Proxy {
    /// `node.id`, e.g. `sidecar~10.0.0.1~echo-7d8.default~default.svc.cluster.local`.
    pub id: Arc<str>,
    /// Which config shape it needs.
    pub kind: ProxyKind,
    /// `CLUSTER_ID`: the cluster the proxy runs in.
    pub cluster_id: Option<ClusterId>,
    /// `NETWORK`: the proxy's own network (split horizon).
    pub network: Option<NetworkId>,
    /// `REQUESTED_NETWORK_VIEW`: networks whose endpoints it wants to see (empty: its own rules).
    pub requested_network_view: Vec<NetworkId>,
    /// `NAMESPACE`, else the namespace in a `sidecar~ip~pod.ns~…` id.
    pub namespace: Option<Arc<str>>,
    /// `LABELS`.
    pub labels: BTreeMap<String, String>,
    /// `INSTANCE_IPS`, else the IP in a `sidecar~ip~…` id: the workload's addresses, which make it an
    /// endpoint of the services it serves (the sidecar's inbound side).
    pub ips: Vec<IpAddr>,
    /// `SERVICE_ACCOUNT`.
    pub service_account: Option<Arc<str>>,
    /// `ISTIO_VERSION`.
    pub istio_version: Option<Arc<str>>,
    /// `node.locality`.
    pub locality: Locality,
    /// `user_agent_name` and version, for debug.
    pub user_agent: String,
}

/// The generator family a proxy needs (istiod's `GENERATOR` metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyKind {
    /// Proxyless gRPC (`GENERATOR: grpc`): API listeners and gRPC-compatible resources only.
    Grpc,
    /// An Envoy sidecar (no `GENERATOR`): outbound listeners on ports.
    Sidecar,
    /// An Envoy gateway (`router~…` node id). One whose network view is exactly its own network is an
    /// east-west gateway and gets the AUTO_PASSTHROUGH listener on 15443.
    Router,
}

impl std::fmt::Display for ProxyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Grpc => "grpc",
            Self::Sidecar => "sidecar",
            Self::Router => "router",
        })
    }
}

/// Why a node is refused. Always names what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// The first request had no `node`, or an empty `node.id`.
    #[error("missing node information: the first request on a stream must carry node with a non-empty id")]
    MissingNode,
    /// A field is present but unusable.
    #[error("invalid node field {field}: {reason}")]
    Invalid {
        /// The field, as istiod spells it (`node.id`, `metadata.LABELS`, …).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> NodeError {
    NodeError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

impl Proxy {
    /// An east-west gateway: a router that asked to see exactly its own network (what
    /// `gen-eastwest-gateway.sh` sets), so it forwards only to local endpoints and never loops.
    pub fn is_east_west_gateway(&self) -> bool {
        match (&self.network, self.requested_network_view.as_slice()) {
            (Some(own), [only]) => self.kind == ProxyKind::Router && own == only,
            _ => false,
        }
    }

    /// Parses the node of a stream's first request.
    pub fn from_node(node: Option<&Node>) -> Result<Self, NodeError> {
        let node = node.ok_or(NodeError::MissingNode)?;
        if node.id.is_empty() {
            return Err(NodeError::MissingNode);
        }
        let id = capped("node.id", &node.id)?;
        let empty = Struct::default();
        let meta = Metadata(node.metadata.as_ref().unwrap_or(&empty));

        let kind = match meta.string("GENERATOR")?.as_deref() {
            None if id.starts_with("router~") => ProxyKind::Router,
            None => ProxyKind::Sidecar,
            Some("grpc") => ProxyKind::Grpc,
            Some(other) => {
                return Err(invalid(
                    "metadata.GENERATOR",
                    format!("unsupported generator {other:?} (meshd serves \"grpc\" or Envoy sidecars)"),
                ));
            }
        };
        let namespace = match meta.string("NAMESPACE")? {
            Some(ns) => Some(ns),
            None => namespace_from_id(&id),
        };
        let locality = node
            .locality
            .as_ref()
            .map(|l| -> Result<Locality, NodeError> {
                Ok(Locality {
                    region: capped("node.locality.region", &l.region)?,
                    zone: capped("node.locality.zone", &l.zone)?,
                    subzone: capped("node.locality.sub_zone", &l.sub_zone)?,
                })
            })
            .transpose()?
            .unwrap_or_default();
        let version = match &node.user_agent_version_type {
            Some(envoy_types::pb::envoy::config::core::v3::node::UserAgentVersionType::UserAgentVersion(
                v,
            )) => v.as_str(),
            _ => "",
        };
        let ips = meta.instance_ips()?.unwrap_or_else(|| ip_from_id(&id));
        Ok(Proxy {
            id,
            kind,
            cluster_id: meta.string("CLUSTER_ID")?.map(|s| ClusterId::from(&*s)),
            network: meta.string("NETWORK")?.map(|s| NetworkId::from(&*s)),
            requested_network_view: meta.network_view()?,
            namespace,
            labels: meta.labels()?,
            ips,
            service_account: meta.string("SERVICE_ACCOUNT")?,
            istio_version: meta.string("ISTIO_VERSION")?,
            locality,
            user_agent: truncate(&format!("{} {}", node.user_agent_name, version), MAX_STRING),
        })
    }
}

/// `sidecar~ip~pod.ns~ns.svc.cluster.local` → `ns` (istiod's fallback when `NAMESPACE` is unset).
fn namespace_from_id(id: &str) -> Option<Arc<str>> {
    let workload = id.split('~').nth(2)?;
    let (_, ns) = workload.rsplit_once('.')?;
    (!ns.is_empty()).then(|| ns.into())
}

/// `sidecar~10.0.0.1~pod.ns~…` → `[10.0.0.1]` (istiod's fallback when `INSTANCE_IPS` is unset); none
/// when that part is not an IP (proxyless clients often send other ids).
fn ip_from_id(id: &str) -> Vec<IpAddr> {
    id.split('~')
        .nth(1)
        .and_then(|ip| ip.parse().ok())
        .into_iter()
        .collect()
}

fn capped(field: &str, s: &str) -> Result<Arc<str>, NodeError> {
    if s.len() > MAX_STRING {
        return Err(invalid(field, format!("longer than {MAX_STRING} bytes")));
    }
    Ok(s.into())
}

fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].trim().to_owned()
}

fn kind_name(v: &Value) -> &'static str {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => "null",
        Some(Kind::NumberValue(_)) => "a number",
        Some(Kind::StringValue(_)) => "a string",
        Some(Kind::BoolValue(_)) => "a boolean",
        Some(Kind::StructValue(_)) => "an object",
        Some(Kind::ListValue(_)) => "a list",
    }
}

/// Typed, capped access to `node.metadata`.
struct Metadata<'a>(&'a Struct);

impl Metadata<'_> {
    /// A string field; absent, null and `""` are all `None`.
    fn string(&self, key: &str) -> Result<Option<Arc<str>>, NodeError> {
        let field = format!("metadata.{key}");
        match self.0.fields.get(key) {
            None => Ok(None),
            Some(v) => match &v.kind {
                None | Some(Kind::NullValue(_)) => Ok(None),
                Some(Kind::StringValue(s)) if s.is_empty() => Ok(None),
                Some(Kind::StringValue(s)) => capped(&field, s).map(Some),
                Some(_) => Err(invalid(field, format!("expected a string, got {}", kind_name(v)))),
            },
        }
    }

    /// `LABELS`: an object of strings.
    fn labels(&self) -> Result<BTreeMap<String, String>, NodeError> {
        let Some(v) = self.0.fields.get("LABELS") else {
            return Ok(BTreeMap::new());
        };
        let fields = match &v.kind {
            None | Some(Kind::NullValue(_)) => return Ok(BTreeMap::new()),
            Some(Kind::StructValue(s)) => &s.fields,
            Some(_) => {
                return Err(invalid(
                    "metadata.LABELS",
                    format!("expected an object of strings, got {}", kind_name(v)),
                ));
            }
        };
        if fields.len() > MAX_ENTRIES {
            return Err(invalid(
                "metadata.LABELS",
                format!("more than {MAX_ENTRIES} labels"),
            ));
        }
        let mut labels = BTreeMap::new();
        for (k, v) in fields {
            let field = format!("metadata.LABELS[{}]", truncate(k, 64));
            let Some(Kind::StringValue(s)) = &v.kind else {
                return Err(invalid(field, format!("expected a string, got {}", kind_name(v))));
            };
            capped(&field, k)?;
            capped(&field, s)?;
            labels.insert(k.clone(), s.clone());
        }
        Ok(labels)
    }

    /// `INSTANCE_IPS`: comma-separated IPs; `None` when unset. A malformed address is an error, as in
    /// istiod.
    fn instance_ips(&self) -> Result<Option<Vec<IpAddr>>, NodeError> {
        const FIELD: &str = "metadata.INSTANCE_IPS";
        let Some(list) = self.string("INSTANCE_IPS")? else {
            return Ok(None);
        };
        let mut ips = Vec::new();
        for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if ips.len() == MAX_ENTRIES {
                return Err(invalid(FIELD, format!("more than {MAX_ENTRIES} addresses")));
            }
            let ip = part
                .parse()
                .map_err(|_| invalid(FIELD, format!("{:?} is not an IP address", truncate(part, 64))))?;
            ips.push(ip);
        }
        Ok(Some(ips))
    }

    /// `REQUESTED_NETWORK_VIEW`: a comma-separated string (istiod's `StringList`) or a list of strings.
    fn network_view(&self) -> Result<Vec<NetworkId>, NodeError> {
        const FIELD: &str = "metadata.REQUESTED_NETWORK_VIEW";
        let Some(v) = self.0.fields.get("REQUESTED_NETWORK_VIEW") else {
            return Ok(Vec::new());
        };
        let names: Vec<&str> = match &v.kind {
            None | Some(Kind::NullValue(_)) => Vec::new(),
            Some(Kind::StringValue(s)) => {
                capped(FIELD, s)?;
                s.split(',').collect()
            }
            Some(Kind::ListValue(l)) => {
                if l.values.len() > MAX_ENTRIES {
                    return Err(invalid(FIELD, format!("more than {MAX_ENTRIES} networks")));
                }
                l.values
                    .iter()
                    .map(|v| match &v.kind {
                        Some(Kind::StringValue(s)) => capped(FIELD, s).map(|_| s.as_str()),
                        _ => Err(invalid(FIELD, format!("expected strings, got {}", kind_name(v)))),
                    })
                    .collect::<Result<_, _>>()?
            }
            Some(_) => {
                return Err(invalid(
                    FIELD,
                    format!(
                        "expected a comma-separated string or a list, got {}",
                        kind_name(v)
                    ),
                ));
            }
        };
        let mut view: Vec<NetworkId> = names
            .into_iter()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(NetworkId::from)
            .collect();
        view.sort();
        view.dedup();
        Ok(view)
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::{
        envoy::config::core::v3::Locality as PbLocality,
        google::protobuf::{ListValue, Value},
    };

    use super::*;

    fn s(v: &str) -> Value {
        Value {
            kind: Some(Kind::StringValue(v.into())),
        }
    }

    fn node(meta: Vec<(&str, Value)>) -> Node {
        Node {
            id: "sidecar~10.0.0.1~echo-1.default~default.svc.cluster.local".into(),
            metadata: Some(Struct {
                fields: meta.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn parses_istio_metadata() {
        let labels = Value {
            kind: Some(Kind::StructValue(Struct {
                fields: [("app".to_owned(), s("echo"))].into(),
            })),
        };
        let mut n = node(vec![
            ("GENERATOR", s("grpc")),
            ("CLUSTER_ID", s("cluster-1")),
            ("NETWORK", s("network-a")),
            ("REQUESTED_NETWORK_VIEW", s("network-b, network-a,,")),
            ("NAMESPACE", s("echo")),
            ("SERVICE_ACCOUNT", s("echo-sa")),
            ("ISTIO_VERSION", s("1.24.0")),
            ("LABELS", labels),
        ]);
        n.locality = Some(PbLocality {
            region: "r".into(),
            zone: "z".into(),
            sub_zone: String::new(),
        });
        let p = Proxy::from_node(Some(&n)).expect("valid");
        assert_eq!(p.kind, ProxyKind::Grpc);
        assert_eq!(p.cluster_id.as_deref(), Some("cluster-1"));
        assert_eq!(p.network.as_deref(), Some("network-a"));
        assert_eq!(
            p.requested_network_view
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>(),
            ["network-a", "network-b"]
        );
        assert_eq!(p.namespace.as_deref(), Some("echo"));
        assert_eq!(p.labels.get("app").map(String::as_str), Some("echo"));
        assert_eq!((&*p.locality.region, &*p.locality.zone), ("r", "z"));
        assert_eq!(p.ips, ["10.0.0.1".parse::<IpAddr>().unwrap()], "from the id");
    }

    #[test]
    fn instance_ips_win_over_the_id() {
        let p = Proxy::from_node(Some(&node(vec![("INSTANCE_IPS", s("10.1.0.7, fd00::7"))]))).expect("valid");
        let want: Vec<IpAddr> = vec!["10.1.0.7".parse().unwrap(), "fd00::7".parse().unwrap()];
        assert_eq!(p.ips, want);
        let mut n = node(vec![]);
        n.id = "sidecar~not-an-ip~x.default~default.svc.cluster.local".into();
        assert!(Proxy::from_node(Some(&n)).expect("valid").ips.is_empty());
    }

    #[test]
    fn defaults_to_sidecar_and_namespace_from_id() {
        let p = Proxy::from_node(Some(&node(vec![]))).expect("valid");
        assert_eq!(p.kind, ProxyKind::Sidecar);
        assert_eq!(p.namespace.as_deref(), Some("default"));
        assert!(p.requested_network_view.is_empty());
    }

    #[test]
    fn network_view_accepts_a_list() {
        let list = Value {
            kind: Some(Kind::ListValue(ListValue {
                values: vec![s("b"), s("a")],
            })),
        };
        let p = Proxy::from_node(Some(&node(vec![("REQUESTED_NETWORK_VIEW", list)]))).expect("valid");
        assert_eq!(
            p.requested_network_view,
            [NetworkId::from("a"), NetworkId::from("b")]
        );
    }

    /// Malformed metadata → an error naming the field; never a panic.
    #[test]
    fn malformed_metadata_names_the_field() {
        let num = Value {
            kind: Some(Kind::NumberValue(1.0)),
        };
        let deep = Value {
            kind: Some(Kind::StructValue(Struct {
                fields: [("a".to_owned(), num.clone())].into(),
            })),
        };
        let many_labels = Value {
            kind: Some(Kind::StructValue(Struct {
                fields: (0..300).map(|i| (format!("k{i}"), s("v"))).collect(),
            })),
        };
        let long = "x".repeat(MAX_STRING + 1);
        let bad_list = Value {
            kind: Some(Kind::ListValue(ListValue {
                values: vec![s("a"), num.clone()],
            })),
        };
        let cases: Vec<(&str, Value, &str)> = vec![
            ("CLUSTER_ID", num.clone(), "metadata.CLUSTER_ID"),
            ("NETWORK", deep.clone(), "metadata.NETWORK"),
            ("NAMESPACE", s(&long), "metadata.NAMESPACE"),
            ("GENERATOR", s("api"), "metadata.GENERATOR"),
            ("LABELS", s("app=echo"), "metadata.LABELS"),
            ("LABELS", deep, "metadata.LABELS[a]"),
            ("LABELS", many_labels, "metadata.LABELS"),
            (
                "REQUESTED_NETWORK_VIEW",
                num.clone(),
                "metadata.REQUESTED_NETWORK_VIEW",
            ),
            (
                "REQUESTED_NETWORK_VIEW",
                bad_list,
                "metadata.REQUESTED_NETWORK_VIEW",
            ),
            ("SERVICE_ACCOUNT", num.clone(), "metadata.SERVICE_ACCOUNT"),
            ("ISTIO_VERSION", num, "metadata.ISTIO_VERSION"),
            ("INSTANCE_IPS", s("10.0.0.1,nope"), "metadata.INSTANCE_IPS"),
        ];
        for (key, value, want) in cases {
            let err = Proxy::from_node(Some(&node(vec![(key, value)]))).expect_err(key);
            match &err {
                NodeError::Invalid { field, .. } => assert_eq!(field, want, "{key}: {err}"),
                other => panic!("{key}: unexpected {other:?}"),
            }
            assert!(err.to_string().contains(want), "{err}");
        }
    }

    #[test]
    fn missing_or_anonymous_node_is_refused() {
        assert_eq!(Proxy::from_node(None), Err(NodeError::MissingNode));
        let anonymous = Node::default();
        assert_eq!(Proxy::from_node(Some(&anonymous)), Err(NodeError::MissingNode));
        let mut long = node(vec![]);
        long.id = "x".repeat(MAX_STRING + 1);
        assert!(
            matches!(Proxy::from_node(Some(&long)), Err(NodeError::Invalid { field, .. }) if field == "node.id")
        );
    }
}
