//! The east-west gateway's AUTO_PASSTHROUGH listener and the sidecar's HTTP connection manager, in
//! istiod's shape.

use super::*;
use crate::{
    envoy::static_mesh::{StaticMesh, proxy, service},
    model::Protocol,
    traffic::tests::config,
};

/// Each chain's (SNI, ALPNs, cluster it proxies to).
fn chains(l: &Listener) -> Vec<(String, Vec<String>, String)> {
    use prost::Message;
    l.filter_chains
        .iter()
        .map(|c| {
            let m = c.filter_chain_match.clone().unwrap_or_default();
            let Some(filter::ConfigType::TypedConfig(any)) = c.filters[0].config_type.clone() else {
                panic!("typed tcp proxy");
            };
            let tcp = TcpProxy::decode(any.value.as_slice()).expect("tcp proxy");
            let Some(tcp_proxy::ClusterSpecifier::Cluster(cluster)) = tcp.cluster_specifier else {
                panic!("a cluster");
            };
            (m.server_names.join(","), m.application_protocols, cluster)
        })
        .collect()
}

#[test]
fn east_west_chains_cover_every_subset_with_istio_alpns() {
    let mut external = service("api", "ext", &[("https", 443, Protocol::Https)]);
    external.mesh_external = true;
    let m = StaticMesh::new(1)
        .with(service("ratings", "shop", &[("http", 9080, Protocol::Http)]), vec![])
        .with(service("dns", "shop", &[("udp", 53, Protocol::Udp)]), vec![])
        .with(external, vec![])
        .with_config([config(
            "DestinationRule",
            "shop",
            "ratings",
            "1",
            "host: ratings\nsubsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]\n",
        )]);
    let mut gw = proxy(ProxyKind::Router, "istio-system");
    gw.network = Some("network1".into());
    gw.requested_network_view = vec!["network1".into()];
    let alpns: Vec<String> = ISTIO_MTLS_ALPNS.map(str::to_owned).to_vec();
    let want: Vec<(String, Vec<String>, String)> = [
        "outbound_.9080_._.ratings.shop.svc.cluster.local",
        "outbound_.9080_.v1_.ratings.shop.svc.cluster.local",
        "outbound_.9080_.v2_.ratings.shop.svc.cluster.local",
    ]
    .map(|sni| (sni.to_owned(), alpns.clone(), sni.to_owned()))
    .to_vec();
    assert_eq!(
        chains(&east_west_listener(&m, &gw)),
        want,
        "UDP and mesh-external services get none"
    );
}

/// The HCM of a listener: the sidecar's first filter, gRPC's API listener.
fn hcm(l: &Listener) -> HttpConnectionManager {
    use prost::Message;
    let any = match &l.api_listener {
        Some(api) => api.api_listener.clone().expect("api listener"),
        None => match l.filter_chains[0].filters[0].config_type.clone() {
            Some(filter::ConfigType::TypedConfig(any)) => any,
            _ => panic!("typed hcm"),
        },
    };
    HttpConnectionManager::decode(any.value.as_slice()).expect("hcm")
}

#[test]
fn sidecar_hcm_has_no_stream_idle_timeout_takes_websockets_and_waits_for_routes() {
    let m = StaticMesh::new(1).with(service("web", "shop", &[("http", 80, Protocol::Http)]), vec![]);
    let sidecar = proxy(ProxyKind::Sidecar, "shop");
    let l = sidecar_listener(&m, &sidecar, "0.0.0.0_80", OutboundMode::AllowAny).expect("listener");
    let got = hcm(&l);
    assert_eq!(
        got.stream_idle_timeout,
        Some(Duration::default()),
        "0s, as istiod"
    );
    assert_eq!(
        got.upgrade_configs
            .iter()
            .map(|u| u.upgrade_type.as_str())
            .collect::<Vec<_>>(),
        ["websocket"]
    );
    let rds_wait = |h: &HttpConnectionManager| match &h.route_specifier {
        Some(RouteSpecifier::Rds(r)) => r.config_source.as_ref().and_then(|s| s.initial_fetch_timeout),
        _ => panic!("RDS"),
    };
    assert_eq!(
        rds_wait(&got),
        Some(Duration::default()),
        "RDS waits for its routes, as istiod"
    );
    // istiod's gRPC generator sets none of them; gRPC reads neither of the first two.
    let grpc = grpc_listener(
        &m,
        &proxy(ProxyKind::Grpc, "shop"),
        "web.shop.svc.cluster.local:80",
    )
    .expect("listener");
    let got = hcm(&grpc);
    assert_eq!(got.stream_idle_timeout, None);
    assert!(got.upgrade_configs.is_empty());
    assert_eq!(rds_wait(&got), None);
}
