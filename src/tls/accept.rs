//! Accepting TLS connections for tonic: a stream of completed handshakes with a handshake timeout,
//! caps on concurrent handshakes and connections, and errors logged, never fatal to the accept loop
//! (tonic 0.12.2's accept loop died on a TLS error: RUSTSEC-2024-0376).

use std::{
    io,
    net::SocketAddr,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use futures::{Stream, StreamExt, stream::FuturesUnordered};
use rustls::ServerConfig;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore, mpsc},
};
use tokio_rustls::{TlsAcceptor, server::TlsStream};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;
use tracing::{debug, info, warn};

use crate::drain::Tasks;

/// Bounds on the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct AcceptLimits {
    /// A client that has not finished its handshake by then is dropped.
    pub handshake_timeout: Duration,
    /// Handshakes in progress at once; beyond it, new connections wait in the listen backlog.
    pub max_handshakes: usize,
    /// Open connections at once; beyond it, new connections wait in the listen backlog.
    pub max_connections: usize,
}

impl Default for AcceptLimits {
    fn default() -> Self {
        Self {
            handshake_timeout: Duration::from_secs(10),
            // Silent clients hold a slot until the timeout; the cap must be far above what a burst of
            // them can fill, or legitimate clients queue behind them (each pending handshake costs a
            // few KiB, so 4096 bounds this at tens of MiB).
            max_handshakes: 4096,
            max_connections: 10_000,
        }
    }
}

/// A completed TLS connection. It holds one of the [`AcceptLimits::max_connections`] slots until
/// dropped. Its tonic connect info is the inner stream's, so `Request::peer_certs()` works.
pub struct SecureConn {
    inner: TlsStream<TcpStream>,
    _slot: OwnedSemaphorePermit,
}

impl SecureConn {
    /// The TLS stream (peer certificates, ALPN, socket addresses).
    pub fn get_ref(&self) -> &TlsStream<TcpStream> {
        &self.inner
    }
}

impl Connected for SecureConn {
    type ConnectInfo = <TlsStream<TcpStream> as Connected>::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

impl AsyncRead for SecureConn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for SecureConn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Accepts on `listener` and yields completed TLS connections, for
/// `tonic::transport::Server::serve_with_incoming_shutdown`. The accept loop is a task of `tasks`
/// and ends (ending the stream) at shutdown.
pub fn incoming(
    listener: TcpListener,
    config: Arc<ServerConfig>,
    limits: AcceptLimits,
    tasks: &Tasks,
) -> impl Stream<Item = Result<SecureConn, io::Error>> + Send + 'static {
    let (tx, rx) = mpsc::channel(limits.max_handshakes.max(1));
    let acceptor = TlsAcceptor::from(config);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let stop = tasks.cancelled();
    tasks.spawn("secure-grpc-accept", async move {
        tokio::pin!(stop);
        let mut handshakes = FuturesUnordered::new();
        loop {
            let room = handshakes.len() < limits.max_handshakes;
            tokio::select! {
                _ = &mut stop => return,
                (accepted, slot) = accept(&listener, &slots), if room => match accepted {
                    Ok((tcp, peer)) => {
                        // Small gRPC frames (ACKs) should not wait for Nagle.
                        let _ = tcp.set_nodelay(true);
                        let acceptor = acceptor.clone();
                        handshakes.push(async move {
                            let done = tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await;
                            (peer, done, slot)
                        });
                    }
                    Err(e) => {
                        // E.g. EMFILE: back off briefly rather than spin.
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                Some((peer, done, slot)) = handshakes.next(), if !handshakes.is_empty() => match done {
                    Ok(Ok(inner)) => {
                        debug!(%peer, "TLS connection established");
                        if tx.send(Ok(SecureConn { inner, _slot: slot })).await.is_err() {
                            return;
                        }
                    }
                    Ok(Err(e)) => info!(%peer, error = %e, "TLS handshake failed"),
                    Err(_) => info!(%peer, timeout = %humantime::format_duration(limits.handshake_timeout), "TLS handshake timed out"),
                },
            }
        }
    });
    ReceiverStream::new(rx)
}

/// Waits for a connection slot, then for a connection. Cancel-safe.
async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> (io::Result<(TcpStream, SocketAddr)>, OwnedSemaphorePermit) {
    let slot = match slots.clone().acquire_owned().await {
        Ok(slot) => slot,
        // The semaphore is never closed.
        Err(_) => std::future::pending().await,
    };
    (listener.accept().await, slot)
}
