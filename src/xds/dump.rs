//! `/debug/config_dump` in the shape of Envoy's admin `ConfigDump` (as istiod serves it), rendered as
//! proto3 JSON, so people and Istio tooling read what a proxy holds without decoding protobuf.
//!
//! Owns: turning the encoded resources a client holds ([`super::held`]) into that JSON. The resources
//! are placed into the dump as the very bytes sent on the stream, so the dump cannot disagree with xDS.
//! Does NOT: find the proxy or decide who may look (see [`super::debug`]).
//!
//! How: the dump is built from `envoy-types`' admin messages, encoded, and decoded again as a
//! `prost-reflect` dynamic message whose serde implementation is the canonical proto3 JSON mapping,
//! `Any` expanded as `{"@type": …, <fields>}`. The descriptors come from `build.rs`, which compiles the
//! `.proto` files `envoy-types` ships (the sources of the Rust types meshd encodes with) with protox, a
//! pure-Rust compiler. prost-reflect and protox are maintained together and track prost; the
//! alternative, pbjson, would need a second generated copy of every Envoy type.

use std::sync::{Arc, LazyLock};

use envoy_types::pb::{
    envoy::admin::v3::{
        ClustersConfigDump, ConfigDump, EndpointsConfigDump, ListenersConfigDump, RoutesConfigDump,
        clusters_config_dump::DynamicCluster,
        endpoints_config_dump::DynamicEndpointConfig,
        listeners_config_dump::{DynamicListener, DynamicListenerState},
        routes_config_dump::DynamicRouteConfig,
    },
    google::protobuf::Any,
};
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, SerializeOptions};

use crate::envoy::{Resource, XdsType, any};

/// The Envoy descriptors `build.rs` compiled.
static ENVOY: LazyLock<Result<DescriptorPool, prost_reflect::DescriptorError>> =
    LazyLock::new(|| DescriptorPool::decode(&include_bytes!(concat!(env!("OUT_DIR"), "/envoy.bin"))[..]));

/// Why a dump could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum DumpError {
    /// The descriptor set `build.rs` wrote does not decode (a broken build).
    #[error("the built-in Envoy descriptors do not decode: {0}")]
    Descriptors(String),
    /// The descriptor set lacks `envoy.admin.v3.ConfigDump` (a broken build).
    #[error("the built-in Envoy descriptors lack envoy.admin.v3.ConfigDump")]
    NoConfigDump,
    /// The dump does not decode against the descriptors.
    #[error("decoding the config dump: {0}")]
    Decode(#[from] prost::DecodeError),
    /// A resource could not be written as JSON; typically an `Any` of a type `build.rs` does not
    /// compile (add its `.proto` to `ENVOY_ROOTS`).
    #[error("writing the config dump as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// What a proxy holds of one type.
#[derive(Debug, Clone, Copy)]
pub struct Section<'a> {
    /// The type.
    pub ty: XdsType,
    /// The version of the last response of this type (the dump's `version_info`).
    pub version: &'a str,
    /// The resources, in name order.
    pub resources: &'a [Arc<Resource>],
}

/// The dump as Envoy's admin `ConfigDump`: clusters, listeners, routes, endpoints (each section
/// present, empty when nothing of the type is held), as pretty proto3 JSON with proto field names
/// (`dynamic_active_clusters`, `version_info`), as Envoy's `/config_dump` prints. Each resource's
/// `version_info` is its own version (meshd's content hash, as sent in delta responses); meshd
/// does not record when each resource was sent, so `last_updated` is absent.
pub fn render(sections: &[Section<'_>]) -> Result<String, DumpError> {
    let dump = config_dump(sections);
    let desc = ENVOY
        .as_ref()
        .map_err(|e| DumpError::Descriptors(e.to_string()))?
        .get_message_by_name("envoy.admin.v3.ConfigDump")
        .ok_or(DumpError::NoConfigDump)?;
    let msg = DynamicMessage::decode(desc, dump.encode_to_vec().as_slice())?;
    let mut out = Vec::new();
    let mut json = serde_json::Serializer::pretty(&mut out);
    msg.serialize_with_options(&mut json, &SerializeOptions::new().use_proto_field_name(true))?;
    out.push(b'\n');
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The typed dump; each resource is an `Any` around the bytes the proxy was sent.
fn config_dump(sections: &[Section<'_>]) -> ConfigDump {
    let of = |ty: XdsType| sections.iter().find(|s| s.ty == ty);
    let resources = |ty: XdsType| of(ty).map(|s| s.resources).unwrap_or_default();
    let version = |ty: XdsType| of(ty).map(|s| s.version.to_owned()).unwrap_or_default();
    let sent = |r: &Resource, ty: XdsType| Any {
        type_url: ty.url().to_owned(),
        value: r.value().to_vec(),
    };
    let clusters = ClustersConfigDump {
        version_info: version(XdsType::Cluster),
        dynamic_active_clusters: resources(XdsType::Cluster)
            .iter()
            .map(|r| DynamicCluster {
                version_info: r.version_string(),
                cluster: Some(sent(r, XdsType::Cluster)),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let listeners = ListenersConfigDump {
        version_info: version(XdsType::Listener),
        dynamic_listeners: resources(XdsType::Listener)
            .iter()
            .map(|r| DynamicListener {
                name: r.name.to_string(),
                active_state: Some(DynamicListenerState {
                    version_info: r.version_string(),
                    listener: Some(sent(r, XdsType::Listener)),
                    last_updated: None,
                }),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let routes = RoutesConfigDump {
        dynamic_route_configs: resources(XdsType::Route)
            .iter()
            .map(|r| DynamicRouteConfig {
                version_info: r.version_string(),
                route_config: Some(sent(r, XdsType::Route)),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let endpoints = EndpointsConfigDump {
        dynamic_endpoint_configs: resources(XdsType::Endpoint)
            .iter()
            .map(|r| DynamicEndpointConfig {
                version_info: r.version_string(),
                endpoint_config: Some(sent(r, XdsType::Endpoint)),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    ConfigDump {
        configs: vec![any(&clusters), any(&listeners), any(&routes), any(&endpoints)],
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::BTreeSet, net::IpAddr};

    use serde_json::Value;

    use super::*;
    use crate::{
        envoy::{
            AllEndpoints, Context, NetworkView, ProxyKind, StaticMesh, scope_of,
            static_mesh::{endpoint, proxy, service},
        },
        model::{Protocol, TlsMode},
        xds::{Subscription, cache::ResourceCache, generate::generate},
    };

    /// echo (mTLS endpoints, HTTP) and db (plaintext, TCP).
    fn mesh() -> StaticMesh {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let mut echo = endpoint(ip("10.0.0.1"), &[("http", 8080)], "c1");
        echo.tls_mode = TlsMode::Istio;
        echo.info_mut().service_account = Some("spiffe://cluster.local/ns/default/sa/echo".into());
        let mut db_svc = service("db", "default", &[("tcp", 5432, Protocol::Tcp)]);
        db_svc.cluster_vips.insert("c1".into(), vec![ip("10.96.0.20")]);
        StaticMesh::new(1)
            .with(
                service("echo", "default", &[("http", 80, Protocol::Http)]),
                vec![echo],
            )
            .with(db_svc, vec![endpoint(ip("10.0.0.2"), &[("tcp", 5432)], "c1")])
    }

    /// What a proxy of `kind` subscribed to everything would hold, dumped and parsed back.
    fn dump(kind: ProxyKind) -> Value {
        let (m, p, cache) = (mesh(), proxy(kind, "default"), ResourceCache::new(100, None));
        let ctx = Context {
            mesh: &m,
            proxy: &p,
            view: &NetworkView::default(),
            endpoints: &AllEndpoints,
            scope: &scope_of(&m, &p),
        };
        let wildcard = Subscription {
            wildcard: true,
            names: Default::default(),
        };
        let clusters = generate(&ctx, &cache, XdsType::Cluster, &wildcard, None);
        let listeners = generate(&ctx, &cache, XdsType::Listener, &wildcard, None);
        let named = |names: BTreeSet<Arc<str>>| Subscription {
            wildcard: false,
            names: Arc::new(names),
        };
        let endpoints = generate(
            &ctx,
            &cache,
            XdsType::Endpoint,
            &named(clusters.iter().map(|r| r.name.clone()).collect()),
            None,
        );
        let routes = generate(
            &ctx,
            &cache,
            XdsType::Route,
            &named(["80".into(), "outbound|80||echo.default.svc.cluster.local".into()].into()),
            None,
        );
        let sections = [
            (XdsType::Cluster, &clusters),
            (XdsType::Endpoint, &endpoints),
            (XdsType::Listener, &listeners),
            (XdsType::Route, &routes),
        ]
        .map(|(ty, resources)| Section {
            ty,
            version: "7",
            resources,
        });
        serde_json::from_str(&render(&sections).unwrap()).unwrap()
    }

    fn section<'a>(dump: &'a Value, kind: &str) -> &'a Value {
        let url = format!("type.googleapis.com/envoy.admin.v3.{kind}");
        dump["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["@type"] == url.as_str())
            .unwrap_or_else(|| panic!("no {kind} in {dump:#}"))
    }

    #[test]
    fn sidecar_dump_is_envoy_shaped_proto3_json() {
        let d = dump(ProxyKind::Sidecar);
        let types: Vec<&str> = d["configs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["@type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "ClustersConfigDump",
                "ListenersConfigDump",
                "RoutesConfigDump",
                "EndpointsConfigDump"
            ]
            .map(|k| format!("type.googleapis.com/envoy.admin.v3.{k}"))
        );

        let clusters = section(&d, "ClustersConfigDump");
        assert_eq!(clusters["version_info"], "7");
        let active = clusters["dynamic_active_clusters"].as_array().unwrap();
        let names: Vec<&str> = active
            .iter()
            .map(|c| c["cluster"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "BlackHoleCluster",
                "InboundPassthroughCluster",
                "PassthroughCluster",
                "outbound|5432||db.default.svc.cluster.local",
                "outbound|80||echo.default.svc.cluster.local"
            ]
        );
        assert!(
            active
                .iter()
                .all(|c| c["version_info"].as_str().unwrap().len() == 16)
        );
        let echo = &active[4]["cluster"];
        assert_eq!(echo["@type"], XdsType::Cluster.url());
        assert_eq!(echo["type"], "EDS", "enums by name");
        assert_eq!(
            echo["connect_timeout"], "10s",
            "well-known types in their JSON form"
        );
        // The TLS transport socket, expanded in clear text.
        let tls = &echo["transport_socket_matches"][0]["transport_socket"];
        assert_eq!(tls["name"], "envoy.transport_sockets.tls");
        let ctx = &tls["typed_config"];
        assert_eq!(
            ctx["@type"],
            "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
        );
        assert_eq!(ctx["sni"], "outbound_.80_._.echo.default.svc.cluster.local");
        assert!(
            ctx.to_string()
                .contains("spiffe://cluster.local/ns/default/sa/echo"),
            "secure naming in clear: {ctx:#}"
        );

        let eps = section(&d, "EndpointsConfigDump")["dynamic_endpoint_configs"]
            .as_array()
            .unwrap();
        let addresses: Vec<(&str, &str, u64)> = eps
            .iter()
            .flat_map(|e| {
                let cla = &e["endpoint_config"];
                let name = cla["cluster_name"].as_str().unwrap();
                cla["endpoints"][0]["lb_endpoints"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(move |lb| {
                        let a = &lb["endpoint"]["address"]["socket_address"];
                        (
                            name,
                            a["address"].as_str().unwrap(),
                            a["port_value"].as_u64().unwrap(),
                        )
                    })
            })
            .collect();
        assert_eq!(
            addresses,
            [
                ("outbound|5432||db.default.svc.cluster.local", "10.0.0.2", 5432),
                ("outbound|80||echo.default.svc.cluster.local", "10.0.0.1", 8080)
            ]
        );

        let listeners = section(&d, "ListenersConfigDump")["dynamic_listeners"]
            .as_array()
            .unwrap();
        assert!(!listeners.is_empty());
        for l in listeners {
            assert_eq!(l["name"], l["active_state"]["listener"]["name"], "{l:#}");
        }
        let routes = section(&d, "RoutesConfigDump")["dynamic_route_configs"]
            .as_array()
            .unwrap();
        assert_eq!(routes[0]["route_config"]["name"], "80", "{routes:#?}");
    }

    #[test]
    fn every_proxy_kind_renders_and_nothing_held_is_four_empty_sections() {
        for kind in [ProxyKind::Grpc, ProxyKind::Sidecar, ProxyKind::Router] {
            let d = dump(kind);
            assert_eq!(d["configs"].as_array().unwrap().len(), 4, "{kind:?}");
        }
        let grpc = dump(ProxyKind::Grpc);
        let route = &section(&grpc, "RoutesConfigDump")["dynamic_route_configs"][0]["route_config"];
        assert_eq!(route["name"], "outbound|80||echo.default.svc.cluster.local");
        let empty: Value = serde_json::from_str(&render(&[]).unwrap()).unwrap();
        let sections: Vec<&Value> = empty["configs"].as_array().unwrap().iter().collect();
        assert_eq!(sections.len(), 4);
        assert!(
            sections.iter().all(|s| s.as_object().unwrap().len() == 1),
            "{empty:#}"
        );
    }
}
