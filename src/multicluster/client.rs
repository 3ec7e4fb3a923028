//! A remote cluster's Kubernetes client: kube's own stack (TLS and auth from the kubeconfig, base URI,
//! extra headers, kube's retry policy, its connect/read/write timeouts) with two differences, a rate
//! limit and HTTP/1 read buffers of a fixed size.
//!
//! Why the buffers: hyper grows a connection's read buffer to fit what one read returns, up to ≈ 400
//! KiB, and keeps it for the connection's life. Each watch lists first, and the watch then reuses the
//! pooled connection the list pages were read on, so every one of a remote's watches kept a buffer
//! the size of its largest page: ≈ 470 KiB per remote of live heap (heaptrack, docs/benchmarks.md
//! "Memory per remote"). With a fixed size a page is read in more, smaller reads instead.
//!
//! kube's request tracing layer (debug spans, and the error lines `telemetry::LIBRARY_DUPLICATES`
//! drops anyway) is left out; meshd reports its remotes' failures itself.

use std::time::Duration;

use hyper_util::{
    client::legacy::{Builder, connect::HttpConnector},
    rt::TokioExecutor,
};
use kube::client::{Body, ConfigExt, retry::RetryPolicy};
use tower::{BoxError, ServiceBuilder, limit::RateLimitLayer, retry::RetryLayer};

/// Bytes hyper reads at a time into a connection's buffer: one TLS record's worth of plaintext.
pub const READ_BUFFER: usize = 16 * 1024;

/// A kube client for `config` whose requests are rate-limited to `qps` per second, so relist storms
/// cannot flood a remote API server.
pub fn build(config: kube::Config, qps: u64) -> Result<kube::Client, kube::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut connector =
        hyper_timeout::TimeoutConnector::new(config.rustls_https_connector_with_connector(http)?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http: hyper_util::client::legacy::Client<_, Body> = Builder::new(TokioExecutor::new())
        .http1_read_buf_exact_size(READ_BUFFER)
        .build(connector);
    let service = ServiceBuilder::new()
        .layer(RateLimitLayer::new(qps.max(1), Duration::from_secs(1)))
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace))
}
