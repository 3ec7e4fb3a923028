//! The TLS listener: accepts loopback connections, applies refuse mode, identifies client certificates and
//! serves HTTP/1.1 and HTTP/2 on each connection.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tracing::Instrument;

use super::Ctx;
use super::auth::{Authority, identity_from_cert};
use super::error::Error;
use super::faults::FaultMode;
use super::routes;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS with the simulator's serving certificate; client certificates signed by its CA are optional.
pub(crate) fn server_config(authority: &Authority) -> Result<Arc<ServerConfig>, Error> {
    let tls_err = |e: &dyn std::fmt::Display| Error::Startup(format!("TLS setup failed: {e}"));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut authority.ca_pem().as_bytes()) {
        roots
            .add(cert.map_err(|e| tls_err(&e))?)
            .map_err(|e| tls_err(&e))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| tls_err(&e))?;
    let (chain, key) = authority.serving_cert()?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(&e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| tls_err(&e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts until shutdown. In refuse mode connections are reset at once, keeping the port bound.
pub(crate) async fn accept_loop(listener: TcpListener, acceptor: TlsAcceptor, ctx: Arc<Ctx>) {
    loop {
        let accepted = tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        if ctx.faults.mode() == FaultMode::Refuse {
            // RST instead of FIN: the client sees a reset, like a dead server.
            let _ = tcp.set_zero_linger();
            continue;
        }
        let span = tracing::debug_span!("apiserver.connection", cluster = %ctx.cfg.cluster_name, %peer);
        tokio::spawn(serve_connection(tcp, acceptor.clone(), ctx.clone()).instrument(span));
    }
}

async fn serve_connection(tcp: TcpStream, acceptor: TlsAcceptor, ctx: Arc<Ctx>) {
    let cut = ctx.faults.connection_token();
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => return tracing::debug!(error = %e, "TLS handshake failed"),
        Err(_) => return tracing::debug!("TLS handshake timed out"),
    };
    let peer = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(|c| identity_from_cert(c));
    let peer = Arc::new(peer);
    let service_ctx = ctx.clone();
    let service = hyper::service::service_fn(move |req| {
        let (ctx, peer) = (service_ctx.clone(), peer.clone());
        async move { Ok::<_, Infallible>(routes::handle(ctx, peer.as_ref().as_ref(), req).await) }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    tokio::select! {
        res = builder.serve_connection(TokioIo::new(tls), service) => {
            if let Err(e) = res {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        }
        _ = ctx.shutdown.cancelled() => {}
        _ = cut.cancelled() => {}
    }
}
