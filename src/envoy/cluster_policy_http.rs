//! The HTTP a cluster speaks upstream: istiod's choice of version (`setUpstreamProtocol`,
//! `applyH2Upgrade`, `setUseDownstreamProtocol`) and the connection pool's HTTP options, as Envoy's
//! `HttpProtocolOptions`. A part of [`super`]'s mapping, kept apart because it is one concept.

use envoy_types::pb::envoy::{
    config::core::v3::{Http1ProtocolOptions, Http2ProtocolOptions},
    extensions::upstreams::http::v3::{
        HttpProtocolOptions,
        http_protocol_options::{
            ExplicitHttpConfig, UpstreamProtocolOptions, UseDownstreamHttpConfig,
            explicit_http_config::ProtocolConfig,
        },
    },
};

use super::*;

pub(super) fn http1_options() -> HttpProtocolOptions {
    HttpProtocolOptions {
        upstream_protocol_options: Some(UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
            protocol_config: Some(ProtocolConfig::HttpProtocolOptions(
                Http1ProtocolOptions::default(),
            )),
        })),
        ..Default::default()
    }
}

/// The HTTP version an Envoy cluster speaks upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamProtocol {
    /// HTTP/1.1, Envoy's default (explicit only when other HTTP options are sent).
    Http1,
    /// HTTP/2, which gRPC needs; the mTLS ALPN offers `h2` too.
    Http2,
    /// The downstream request's.
    Downstream,
}

/// istiod's `setUpstreamProtocol`, `applyH2Upgrade` and `setUseDownstreamProtocol`, in that order:
/// `useClientProtocol` wins, then an HTTP2/gRPC port, then a sidecar's port of no declared protocol
/// (sniffed, so either version may come), then `h2UpgradePolicy: UPGRADE`. MeshConfig
/// `h2UpgradePolicy` is not read: istiod's default, `DO_NOT_UPGRADE`. gRPC clients always speak HTTP/2
/// and read none of this.
pub fn upstream_protocol(
    pool: Option<&ConnectionPoolSettings>,
    protocol: Protocol,
    client: Client,
) -> UpstreamProtocol {
    let http = pool.and_then(|p| p.http.as_ref());
    if http.is_some_and(|h| h.use_client_protocol == Some(true)) {
        UpstreamProtocol::Downstream
    } else if protocol.is_http2() {
        UpstreamProtocol::Http2
    } else if client == Client::Sidecar && protocol == Protocol::Unknown {
        UpstreamProtocol::Downstream
    } else if http.is_some_and(|h| h.h2_upgrade_policy == Some(H2UpgradePolicy::Upgrade)) {
        UpstreamProtocol::Http2
    } else {
        UpstreamProtocol::Http1
    }
}

/// Idle timeout, requests per connection, connection lifetime, streams per connection and the
/// `upstream` protocol → Envoy's `HttpProtocolOptions` (as istiod's `applyConnectionPool` and
/// `clusterWrapper.build`: explicit HTTP/1.1 when only common options are set; on every port, as
/// istiod, though only HTTP ports read them).
pub(super) fn protocol_options(
    http_settings: Option<&crate::istio::destination_rule::HttpSettings>,
    tcp: Option<&crate::istio::destination_rule::TcpSettings>,
    client: Client,
    http: bool,
    upstream: UpstreamProtocol,
    notes: &mut Vec<FieldNote>,
) -> Option<HttpProtocolOptions> {
    let idle = http_settings
        .and_then(|h| h.idle_timeout)
        .or_else(|| tcp.and_then(|t| t.idle_timeout));
    let per_connection = http_settings
        .and_then(|h| h.max_requests_per_connection)
        .filter(|&v| v > 0);
    let lifetime = tcp.and_then(|t| t.max_connection_duration);
    let downstream = http_settings.is_some_and(|h| h.use_client_protocol == Some(true));
    let streams = http_settings
        .and_then(|h| h.max_concurrent_streams)
        .filter(|&v| v > 0);
    let fields = [
        (
            "connectionPool.http.idleTimeout",
            http_settings.is_some_and(|h| h.idle_timeout.is_some()),
        ),
        (
            "connectionPool.tcp.idleTimeout",
            tcp.is_some_and(|t| t.idle_timeout.is_some()),
        ),
        (
            "connectionPool.http.maxRequestsPerConnection",
            per_connection.is_some(),
        ),
        ("connectionPool.tcp.maxConnectionDuration", lifetime.is_some()),
        ("connectionPool.http.useClientProtocol", downstream),
        ("connectionPool.http.maxConcurrentStreams", streams.is_some()),
    ];
    let why = match (client, http) {
        (Client::Grpc, _) => Some("gRPC does not read Envoy's upstream HTTP protocol options"),
        // Sent all the same, as istiod does; Envoy's TCP proxy does not read them.
        (_, false) => Some("not an HTTP port"),
        _ => None,
    };
    for (field, _) in fields.into_iter().filter(|(_, set)| *set) {
        notes.push(match why {
            Some(why) => ignored(field, why),
            // Streams per connection are an HTTP/2 option.
            None if field == "connectionPool.http.maxConcurrentStreams"
                && upstream != UpstreamProtocol::Http2 =>
            {
                ignored(field, "applies to HTTP/2 upstreams only (as istiod)")
            }
            None => applies(field),
        });
    }
    // istiod sets the common options, even empty, when any of these is set.
    let common = idle.is_some() || per_connection.is_some() || lifetime.is_some() || streams.is_some();
    if !client.envoy() || (!common && upstream == UpstreamProtocol::Http1) {
        return None;
    }
    let common = common.then(|| envoy_types::pb::envoy::config::core::v3::HttpProtocolOptions {
        idle_timeout: idle.map(pb_duration),
        max_connection_duration: lifetime.map(pb_duration),
        max_requests_per_connection: per_connection.map(|v| u32v(v.unsigned_abs())),
        ..Default::default()
    });
    let mut options = http1_options();
    options.common_http_protocol_options = common;
    match upstream {
        UpstreamProtocol::Http1 => {}
        UpstreamProtocol::Http2 => {
            options.upstream_protocol_options =
                Some(UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
                    protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(Http2ProtocolOptions {
                        max_concurrent_streams: streams.map(|v| u32v(v.unsigned_abs())),
                        ..Default::default()
                    })),
                }));
        }
        UpstreamProtocol::Downstream => {
            options.upstream_protocol_options = Some(UpstreamProtocolOptions::UseDownstreamProtocolConfig(
                UseDownstreamHttpConfig {
                    http_protocol_options: Some(Http1ProtocolOptions::default()),
                    http2_protocol_options: Some(Http2ProtocolOptions::default()),
                    ..Default::default()
                },
            ));
        }
    }
    Some(options)
}
