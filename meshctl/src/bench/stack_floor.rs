//! `meshctl bench-floor --stack`: the floor of the stack meshd serves ADS on (issue 34 §4). The same
//! bytes per change as [`super::floor`], but as one gRPC message per change on a long-lived streaming
//! call through tonic's server, hyper and h2 (meshd's settings: Nagle off, HTTP/2 keepalive 30 s), each
//! client acknowledging every message with a small message of its own, as an xDS client ACKs every
//! response. No xDS: the server's body hands out one shared buffer per change and drops what it reads.
//! meshd's figure minus this one is what meshd's own push path costs; this one minus the socket floor
//! is what gRPC over HTTP/2 costs per message.
//!
//! Two servers: [`Server::Tonic`] is meshd's (tonic's server on hyper on h2, hyper's task per HTTP/2
//! stream polling the body), [`Server::H2`] h2 alone, one task per connection polling the connection and
//! its streams (no hyper, no tonic): what remains of the stack if meshd served ADS on h2 itself.
//!
//! Owns: the server and client runtimes (threads named so the server's CPU can be told apart), the
//! change loop. Does NOT: decode anything (clients count bytes; every message has the same size).

use std::{
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde::Serialize;
use tokio::{net::TcpStream, sync::watch};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream, WatchStream};
use tonic::{Status, body::Body, server::NamedService};

use super::{Error, cost};

/// gRPC path of the floor's one method.
const SERVICE: &str = "meshctl.floor.Floor";
/// Bytes of each client's acknowledgement (an xDS ACK of one type: type URL, version, nonce).
const ACK_BYTES: usize = 96;
/// How long one change may take to reach and be acknowledged by every client.
const CHANGE_TIMEOUT: Duration = Duration::from_secs(60);
/// Prefix of the server runtime's thread names (the figure is their CPU).
const SERVER_THREADS: &str = "floor-server";

/// Which server the floor runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Server {
    /// tonic's server, as meshd's ADS ports.
    Tonic,
    /// The h2 crate alone, one task per connection.
    H2,
}

/// What the stack floor costs.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StackFloor {
    /// The server measured.
    pub server: Server,
    /// Streams (one HTTP/2 connection each, as each proxy has its own).
    pub streams: usize,
    /// Protobuf bytes per message (one message per stream per change).
    pub bytes: usize,
    /// Changes pushed.
    pub changes: usize,
    /// The server runtime's CPU over the changes, seconds.
    pub server_cpu_s: f64,
    /// The server's CPU per change per 1,000 streams, ms: the figure beside meshd's.
    pub ms_per_change_per_1k_streams: f64,
    /// Messages the clients received (all of them: `streams × changes`).
    pub received: u64,
    /// Acknowledgements the server read (all of them: `streams × changes`).
    pub acked: u64,
}

/// Counters the server and the clients share with the driver.
#[derive(Default)]
struct Counts {
    opened: AtomicUsize,
    received: AtomicU64,
    ack_bytes: AtomicU64,
}

/// Runs the stack floor on its own thread (it builds and drops runtimes, which a caller's runtime
/// forbids).
pub fn run(server: Server, args: &super::floor::Args) -> Result<StackFloor, Error> {
    let (streams, bytes, changes, between) = (args.streams, args.bytes, args.changes, args.between);
    std::thread::Builder::new()
        .name("stack-floor".into())
        .spawn(move || measure(server, streams, bytes, changes, between))
        .map_err(Error::loopback)?
        .join()
        .map_err(|_| Error::Floor("the stack floor's thread panicked".into()))?
}

fn timed_out(what: String) -> Error {
    Error::loopback(std::io::Error::new(std::io::ErrorKind::TimedOut, what))
}

fn measure(
    server: Server,
    streams: usize,
    bytes: usize,
    changes: usize,
    between: Duration,
) -> Result<StackFloor, Error> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runtime = |name: &'static str| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cores)
            .thread_name(name)
            .enable_all()
            .build()
            .map_err(Error::loopback)
    };
    let (server_rt, client_rt) = (runtime(SERVER_THREADS)?, runtime("floor-clients")?);
    let counts = Arc::new(Counts::default());
    let (changed, watch) = watch::channel(0u64);
    let listener = server_rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(Error::loopback)?;
    let addr = listener.local_addr().map_err(Error::loopback)?;
    let service = Floor {
        message: Bytes::from(message(bytes)),
        watch,
        counts: counts.clone(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = server_rt.spawn(serve(server, listener, service, stopped));
    let message_len = (bytes + 5) as u64;
    client_rt.block_on(async {
        for _ in 0..streams {
            let counts = counts.clone();
            let stream = client(addr, message_len, counts).await?;
            tokio::spawn(stream);
        }
        Ok::<_, Error>(())
    })?;
    wait_until(
        || counts.opened.load(Ordering::Relaxed) >= streams,
        "every stream opened",
    )?;
    let before = cost::threads_named(SERVER_THREADS);
    for change in 1..=changes as u64 {
        changed.send_replace(change);
        let want = change * streams as u64;
        wait_until(
            || {
                counts.received.load(Ordering::Relaxed) >= want
                    && counts.ack_bytes.load(Ordering::Relaxed) >= want * (ACK_BYTES as u64 + 5)
            },
            &format!("change {change} received and acknowledged by every client"),
        )?;
        std::thread::sleep(between);
    }
    let server_cpu_s = cost::threads_named(SERVER_THREADS) - before;
    let _ = stop.send(());
    drop(changed);
    let _ = server_rt.block_on(serving);
    client_rt.shutdown_background();
    server_rt.shutdown_background();
    Ok(StackFloor {
        server,
        streams,
        bytes,
        changes,
        server_cpu_s,
        ms_per_change_per_1k_streams: super::floor::per_change_per_1k_streams(server_cpu_s, changes, streams),
        received: counts.received.load(Ordering::Relaxed),
        acked: counts.ack_bytes.load(Ordering::Relaxed) / (ACK_BYTES as u64 + 5),
    })
}

/// Serves `service` on `listener` with `server` until `stopped`.
async fn serve(
    server: Server,
    listener: tokio::net::TcpListener,
    service: Floor,
    stopped: tokio::sync::oneshot::Receiver<()>,
) {
    match server {
        Server::Tonic => {
            let incoming = TcpListenerStream::new(listener).map(|conn| {
                conn.inspect(|tcp| {
                    let _ = tcp.set_nodelay(true);
                })
            });
            let _ = tonic::transport::Server::builder()
                .http2_keepalive_interval(Some(Duration::from_secs(30)))
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await;
        }
        Server::H2 => {
            tokio::pin!(stopped);
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    conn = listener.accept() => if let Ok((tcp, _)) = conn {
                        let _ = tcp.set_nodelay(true);
                        tokio::spawn(h2_connection(tcp, service.clone()));
                    },
                }
            }
        }
    }
}

/// One connection on h2 alone: the connection and all its streams polled by this one task.
async fn h2_connection(tcp: TcpStream, service: Floor) {
    let Ok(mut conn) = h2::server::handshake(tcp).await else {
        return;
    };
    let mut streams = futures::stream::FuturesUnordered::new();
    loop {
        tokio::select! {
            accepted = conn.accept() => {
                let Some(Ok((request, mut respond))) = accepted else { return };
                service.counts.opened.fetch_add(1, Ordering::Relaxed);
                let mut response = http::Response::new(());
                response
                    .headers_mut()
                    .insert(http::header::CONTENT_TYPE, tonic::metadata::GRPC_CONTENT_TYPE);
                let Ok(send) = respond.send_response(response, false) else { return };
                streams.push(h2_stream(request.into_body(), send, service.clone()));
            }
            _ = streams.next(), if !streams.is_empty() => {}
        }
    }
}

/// One stream on h2 alone: the shared message per change, the client's bytes read and released.
async fn h2_stream(mut requests: h2::RecvStream, mut send: h2::SendStream<Bytes>, service: Floor) {
    let mut changes = service.watch;
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() || send.send_data(service.message.clone(), false).is_err() {
                    return;
                }
            }
            data = requests.data() => {
                let Some(Ok(data)) = data else { return };
                service.counts.ack_bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                let _ = requests.flow_control().release_capacity(data.len());
            }
        }
    }
}

/// Polls `done` from the driver thread (whose CPU is not counted) until it holds.
fn wait_until(done: impl Fn() -> bool, what: &str) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + CHANGE_TIMEOUT;
    while !done() {
        if tokio::time::Instant::now() > deadline {
            return Err(timed_out(format!(
                "the stack floor: {what} within {CHANGE_TIMEOUT:?}"
            )));
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    Ok(())
}

/// A gRPC message of `bytes` protobuf bytes (their content does not matter: nobody decodes them).
fn message(bytes: usize) -> Vec<u8> {
    let mut m = BytesMut::with_capacity(bytes + 5);
    m.put_u8(0);
    m.put_u32(u32::try_from(bytes).unwrap_or(u32::MAX));
    m.put_bytes(b'x', bytes);
    m.to_vec()
}

/// One client: an HTTP/2 connection of its own, one streaming call, an ACK per message received.
async fn client(
    addr: SocketAddr,
    message_len: u64,
    counts: Arc<Counts>,
) -> Result<impl Future<Output = ()> + Send + 'static, Error> {
    let tcp = TcpStream::connect(addr).await.map_err(Error::loopback)?;
    tcp.set_nodelay(true).map_err(Error::loopback)?;
    let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
        .await
        .map_err(|e| Error::Floor(format!("the stack floor's HTTP/2 handshake: {e}")))?;
    tokio::spawn(conn);
    let (acks, ack_rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    let body = StreamBody::new(ReceiverStream::new(ack_rx).map(|b| Ok::<_, Infallible>(Frame::data(b))));
    let request = http::Request::post(format!("http://{addr}/{SERVICE}/Stream"))
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .body(body)
        .map_err(|e| Error::Floor(format!("the stack floor's request: {e}")))?;
    let ack = Bytes::from(message(ACK_BYTES));
    Ok(async move {
        let Ok(response) = sender.send_request(request).await else {
            return;
        };
        let mut body = response.into_body();
        let mut got = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            let Some(data) = frame.data_ref() else { continue };
            let before = got / message_len;
            got += data.len() as u64;
            for _ in before..got / message_len {
                counts.received.fetch_add(1, Ordering::Relaxed);
                if acks.send(ack.clone()).await.is_err() {
                    return;
                }
            }
        }
    })
}

/// The floor's gRPC service: every stream gets one message per change and reads what the client sends.
#[derive(Clone)]
struct Floor {
    message: Bytes,
    watch: watch::Receiver<u64>,
    counts: Arc<Counts>,
}

impl NamedService for Floor {
    const NAME: &'static str = SERVICE;
}

impl tower::Service<http::Request<Body>> for Floor {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        self.counts.opened.fetch_add(1, Ordering::Relaxed);
        let body = Pushes {
            changes: WatchStream::from_changes(self.watch.clone()),
            message: self.message.clone(),
            requests: Some(req.into_body()),
            counts: self.counts.clone(),
        };
        let mut response = http::Response::new(Body::new(body));
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, tonic::metadata::GRPC_CONTENT_TYPE);
        std::future::ready(Ok(response))
    }
}

/// A stream's response body: reads the client's messages (counting their bytes) and yields the shared
/// message once per change, the way meshd's stream is polled by hyper's task for its HTTP/2 stream.
struct Pushes {
    changes: WatchStream<u64>,
    message: Bytes,
    requests: Option<Body>,
    counts: Arc<Counts>,
}

impl http_body::Body for Pushes {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        while let Some(requests) = self.requests.as_mut() {
            match Pin::new(requests).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        self.counts
                            .ack_bytes
                            .fetch_add(data.len() as u64, Ordering::Relaxed);
                    }
                }
                Poll::Ready(_) => self.requests = None,
                Poll::Pending => break,
            }
        }
        match self.changes.poll_next_unpin(cx) {
            Poll::Ready(Some(_)) => Poll::Ready(Some(Ok(Frame::data(self.message.clone())))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_reaches_every_client_and_every_ack_the_server() {
        for server in [Server::Tonic, Server::H2] {
            let args = super::super::floor::Args {
                streams: 20,
                bytes: 1000,
                changes: 5,
                between: Duration::from_millis(5),
                stack: false,
            };
            let floor = run(server, &args).expect("loopback gRPC");
            assert_eq!((floor.server, floor.streams, floor.changes), (server, 20, 5));
            assert_eq!(
                floor.received,
                20 * 5,
                "{server:?}: one message per stream per change"
            );
            assert_eq!(floor.acked, 20 * 5, "{server:?}: one acknowledgement per message");
        }
    }

    #[test]
    fn the_server_threads_cpu_is_found() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(SERVER_THREADS)
            .build()
            .expect("runtime");
        rt.block_on(async {
            tokio::task::spawn(async {
                let until = tokio::time::Instant::now() + Duration::from_millis(100);
                while tokio::time::Instant::now() < until {
                    std::hint::spin_loop();
                }
            })
            .await
            .expect("spinning task");
        });
        assert!(
            cost::threads_named(SERVER_THREADS) > 0.0,
            "a busy server thread counts"
        );
    }
}
