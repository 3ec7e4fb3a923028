//! ADS on the wire: responses written straight from the shared encoded resources, requests read
//! without a lasting buffer.
//!
//! Owns: the protobuf layout of `DiscoveryResponse` and `DeltaDiscoveryResponse` as gRPC messages whose
//! resources are the cache's own `Bytes` (a [`Frame`]; a message under [`INLINE_BELOW`] is one buffer),
//! the HTTP body that streams them, and the request decoder ([`Requests`]). A response to 1,000 sidecars thus costs 1,000 small headers, not
//! 1,000 copies of every resource, and between messages a stream keeps no encode or decode buffer
//! (tonic's both grow to the largest message and stay: ≈ 50 KiB a sidecar for its decode buffer, whose
//! largest request is the 1,000-name EDS subscription). Does NOT: decide what goes in a response (the
//! protocol state machines do).

use std::{
    future::Future,
    marker::PhantomData,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll, ready},
};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::HeaderMap;
use parking_lot::Mutex;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};
use tonic::Status;

use super::{Resource, XdsType};

/// Shared parts smaller than this are copied next to their field header instead of going out as
/// their own HTTP/2 DATA frame (9 bytes of framing each, and a poll of the body).
const COPY_BELOW: usize = 1024;

/// Messages up to this size (with the gRPC prefix) are written whole into one buffer: one DATA frame
/// and one pass through the HTTP/2 send path per push, for a copy of a few KiB (a push of one changed
/// assignment is ≈ 2–5 KiB). Larger ones (initial config) keep referencing the shared resources.
const INLINE_BELOW: usize = 16 << 10;

/// gRPC message prefix: compression flag and big-endian length.
const PREFIX: usize = 5;

/// One length-prefixed gRPC message, as a chain of buffers: small copied headers interleaved with the
/// shared encoded resources.
#[derive(Debug, Default)]
pub(crate) struct Frame {
    parts: Vec<Bytes>,
    /// Protobuf length (without the gRPC prefix).
    len: usize,
}

impl Frame {
    /// Encoded protobuf length of the message.
    pub(crate) fn message_len(&self) -> usize {
        self.len
    }

    /// Decodes the message back (tests check the wire layout against prost's).
    #[cfg(test)]
    pub(crate) fn decode<M: prost::Message + Default>(&self) -> M {
        let bytes: Vec<u8> = self.parts.iter().flat_map(|p| p.iter().copied()).collect();
        assert_eq!(bytes[0], 0, "uncompressed");
        let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        assert_eq!((len, bytes.len()), (self.len, self.len + PREFIX), "prefix length");
        M::decode(&bytes[PREFIX..]).expect("valid protobuf")
    }
}

/// A `DiscoveryResponse` (SotW) carrying `resources`.
pub(crate) fn sotw_response(ty: XdsType, version: &str, nonce: &str, resources: &[&Resource]) -> Frame {
    let len = string_len(1, version)
        + resources
            .iter()
            .map(|r| nested_len(2, r.any().len()))
            .sum::<usize>()
        + string_len(4, ty.url())
        + string_len(5, nonce);
    // Every small field before the shared bytes (protobuf fields may come in any order), so a one-resource
    // push is two HTTP/2 DATA frames, not three.
    let mut w = Writer::new(len);
    w.string(1, version);
    w.string(4, ty.url());
    w.string(5, nonce);
    for r in resources {
        w.nested(2, r.any().len());
        w.shared(r.any());
    }
    w.finish()
}

/// A `DeltaDiscoveryResponse` carrying `resources` (each with its version) and `removed` names.
pub(crate) fn delta_response(
    ty: XdsType,
    version: &str,
    nonce: &str,
    resources: &[&Resource],
    removed: &[impl AsRef<str>],
) -> Frame {
    // `discovery.v3.Resource`: version = 1, resource = 2, name = 3.
    let inner =
        |r: &Resource| nested_len(1, VERSION_LEN) + nested_len(2, r.any().len()) + string_len(3, &r.name);
    let len = string_len(1, version)
        + resources.iter().map(|r| nested_len(2, inner(r))).sum::<usize>()
        + string_len(4, ty.url())
        + string_len(5, nonce)
        + removed
            .iter()
            .map(|n| nested_len(6, n.as_ref().len()))
            .sum::<usize>();
    // Small fields first, as in `sotw_response`; in each `Resource`, the name before the shared bytes.
    let mut w = Writer::new(len);
    w.string(1, version);
    w.string(4, ty.url());
    w.string(5, nonce);
    for r in resources {
        w.nested(2, inner(r));
        w.nested(1, VERSION_LEN);
        w.buf.put_slice(&version_hex(r.version));
        w.string(3, &r.name);
        w.nested(2, r.any().len());
        w.shared(r.any());
    }
    for name in removed {
        // Repeated strings are written even when empty.
        w.nested(6, name.as_ref().len());
        w.buf.put_slice(name.as_ref().as_bytes());
    }
    w.finish()
}

/// Length of a resource version as sent in delta `Resource.version`.
const VERSION_LEN: usize = 16;

/// A resource version as sent in delta `Resource.version`: 16 lowercase hex digits (no allocation:
/// it is written for every resource of every delta response).
pub(crate) fn version_hex(version: u64) -> [u8; VERSION_LEN] {
    let mut out = [0; VERSION_LEN];
    for (i, digit) in out.iter_mut().enumerate() {
        *digit = b"0123456789abcdef"[((version >> (60 - 4 * i)) & 0xf) as usize];
    }
    out
}

/// Parses what [`version_hex`] wrote (a client's `initial_resource_versions`); `None` for anything
/// else, which then matches no resource.
pub(crate) fn parse_version_hex(s: &str) -> Option<u64> {
    let canonical = s.len() == VERSION_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    canonical.then(|| u64::from_str_radix(s, 16).ok()).flatten()
}

/// Length of a length-delimited field of `len` bytes.
fn nested_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// Length of a singular proto3 string field (omitted when empty, as prost does).
fn string_len(tag: u32, s: &str) -> usize {
    if s.is_empty() { 0 } else { nested_len(tag, s.len()) }
}

/// Writes one message: small pieces into a buffer, large shared ones as their own parts (a small
/// message entirely into the buffer).
struct Writer {
    parts: Vec<Bytes>,
    buf: BytesMut,
    len: usize,
    /// The whole message goes into `buf` ([`INLINE_BELOW`]).
    inline: bool,
}

impl Writer {
    fn new(len: usize) -> Self {
        let inline = PREFIX + len <= INLINE_BELOW;
        let mut buf = BytesMut::with_capacity(if inline { PREFIX + len } else { PREFIX + 64 });
        buf.put_u8(0);
        // Larger than 4 GiB cannot happen: the caller's response cap (64 MiB) applies first, and a
        // saturated length is rejected by any client as a protocol error rather than misread.
        buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
        Self {
            parts: Vec::new(),
            buf,
            len,
            inline,
        }
    }

    fn nested(&mut self, tag: u32, len: usize) {
        encode_key(tag, WireType::LengthDelimited, &mut self.buf);
        encode_varint(len as u64, &mut self.buf);
    }

    fn string(&mut self, tag: u32, s: &str) {
        if !s.is_empty() {
            self.nested(tag, s.len());
            self.buf.put_slice(s.as_bytes());
        }
    }

    fn shared(&mut self, bytes: &Bytes) {
        if self.inline || bytes.len() < COPY_BELOW {
            self.buf.put_slice(bytes);
        } else {
            self.flush();
            self.parts.push(bytes.clone());
        }
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.parts.push(self.buf.split().freeze());
        }
    }

    fn finish(mut self) -> Frame {
        self.flush();
        Frame {
            parts: self.parts,
            len: self.len,
        }
    }
}

/// Where a stream hands its next message to its [`ResponseBody`]: one slot, no channel. The body polls
/// the stream only while the slot is empty and takes what it finds there after each poll, so a `send`
/// into a full slot needs no waker: the body empties the slot and polls the stream again when hyper
/// next asks for data. Only a [`ResponseBody`] may poll a future that sends here.
#[derive(Clone, Default)]
pub(crate) struct Outbox(Arc<Mutex<Option<Result<Frame, Status>>>>);

impl Outbox {
    /// Hands `item` to the body: at once if the slot is empty, else once the body took the one before.
    pub(crate) async fn send(&self, item: Result<Frame, Status>) {
        let mut item = Some(item);
        std::future::poll_fn(|_| {
            let mut slot = self.0.lock();
            if slot.is_some() {
                return Poll::Pending;
            }
            *slot = item.take();
            Poll::Ready(())
        })
        .await
    }

    fn take(&self) -> Option<Result<Frame, Status>> {
        self.0.lock().take()
    }

    fn is_empty(&self) -> bool {
        self.0.lock().is_none()
    }
}

/// The stream behind a [`ResponseBody`]: its whole life as one future.
type Run = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The response body of one ADS stream, and the stream itself: hyper's per-stream task polls it for
/// data, which polls the stream's future (reading requests, following snapshots) until it hands over
/// a message, then yields that message's parts, and the final status as trailers. No task of its own
/// and no channel: the stream's wakers are hyper's stream task's, which polls the body whenever it
/// has room to send and on every wake-up (hyper 1's `PipeToSendStream`), so requests are read while
/// nothing is sent; a body hyper drops (the client reset the stream, the connection ended) drops the
/// stream with it.
pub(crate) struct ResponseBody {
    /// `None` once the stream ended.
    run: Option<Run>,
    out: Outbox,
    current: std::vec::IntoIter<Bytes>,
    done: bool,
}

impl ResponseBody {
    /// The body of the stream `run` builds around the outbox it is given.
    pub(crate) fn new<F>(run: impl FnOnce(Outbox) -> F) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let out = Outbox::default();
        Self {
            run: Some(Box::pin(run(out.clone()))),
            out,
            current: Vec::new().into_iter(),
            done: false,
        }
    }
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        loop {
            if let Some(part) = this.current.next() {
                return Poll::Ready(Some(Ok(http_body::Frame::data(part))));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let status = match this.out.take() {
                Some(Ok(frame)) => {
                    this.current = frame.parts.into_iter();
                    continue;
                }
                Some(Err(status)) => status,
                None => match &mut this.run {
                    Some(run) => {
                        if run.as_mut().poll(cx).is_ready() {
                            this.run = None;
                        } else if this.out.is_empty() {
                            // Waiting with nothing handed over: on wakers it registered itself.
                            return Poll::Pending;
                        }
                        continue;
                    }
                    // The stream ended without an error: the client closed its side.
                    None => Status::ok(""),
                },
            };
            this.done = true;
            this.run = None;
            return Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers(&status)))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.current.len() == 0
    }
}

/// `grpc-status` / `grpc-message` for `status` (an unencodable status becomes `INTERNAL`).
fn trailers(status: &Status) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Err(e) = status.add_header(&mut headers) {
        headers.clear();
        headers.insert(Status::GRPC_STATUS, (tonic::Code::Internal as i32).into());
        tracing::warn!(error = %e, "final stream status could not be encoded");
    }
    headers
}

/// The request messages of one stream, decoded from its HTTP body. The buffer holds only a partly
/// received message and is let go whenever a message ends at a frame's end (the usual case), so an
/// idle stream holds none.
pub(crate) struct Requests<B, M> {
    body: B,
    buf: BytesMut,
    /// Largest message accepted.
    max: usize,
    done: bool,
    message: PhantomData<fn() -> M>,
}

impl<B, M> Requests<B, M> {
    pub(crate) fn new(body: B, max: usize) -> Self {
        Self {
            body,
            buf: BytesMut::new(),
            max,
            done: false,
            message: PhantomData,
        }
    }
}

impl<B, M: prost::Message + Default> Requests<B, M> {
    /// The next whole message in the buffer, if there is one.
    fn decode(&mut self) -> Result<Option<M>, Status> {
        if self.buf.len() < PREFIX {
            return Ok(None);
        }
        if self.buf[0] != 0 {
            return Err(Status::internal(
                "compressed request message, but meshd negotiates no compression",
            ));
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > self.max {
            // Refused on the prefix, before anything is allocated for it (tonic's code and wording).
            return Err(Status::out_of_range(format!(
                "Error, decoded message length too large: found {len} bytes, the limit is: {} bytes",
                self.max
            )));
        }
        if self.buf.len() < PREFIX + len {
            self.buf.reserve(PREFIX + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(PREFIX);
        let message = M::decode(self.buf.split_to(len).freeze())
            .map_err(|e| Status::internal(format!("invalid request message: {e}")));
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
        }
        message.map(Some)
    }
}

impl<B, M> futures::Stream for Requests<B, M>
where
    B: http_body::Body<Data = Bytes, Error = Status> + Unpin,
    M: prost::Message + Default,
{
    type Item = Result<M, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match this.decode() {
                Ok(Some(message)) => return Poll::Ready(Some(Ok(message))),
                Ok(None) => {}
                Err(status) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(status)));
                }
            }
            match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        this.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(status)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(status)));
                }
                None => {
                    this.done = true;
                    if !this.buf.is_empty() {
                        return Poll::Ready(Some(Err(Status::internal(
                            "the request stream ended inside a message",
                        ))));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, DiscoveryResponse};
    use http_body_util::BodyExt;

    use super::*;

    fn res(name: &str, size: usize, version: u64) -> Resource {
        Resource::with_version(XdsType::Endpoint, name.into(), vec![7; size], version)
    }

    #[test]
    fn sotw_layout_is_protobuf_and_shares_large_resources() {
        let (small, large) = (res("a", 10, 1), res("b", INLINE_BELOW, 2));
        let f = sotw_response(XdsType::Endpoint, "v1", "3", &[&small, &large]);
        let r: DiscoveryResponse = f.decode();
        assert_eq!(
            (r.version_info.as_str(), r.type_url.as_str(), r.nonce.as_str()),
            ("v1", XdsType::Endpoint.url(), "3")
        );
        assert_eq!(r.resources.len(), 2);
        assert_eq!(r.resources[1].value, vec![7; INLINE_BELOW]);
        assert_eq!(r.resources[0].type_url, XdsType::Endpoint.url());
        assert!(
            f.parts.iter().any(|p| p.as_ptr() == large.any().as_ptr()),
            "the large resource is not copied"
        );
        let one = sotw_response(XdsType::Endpoint, "v1", "3", &[&large]);
        assert_eq!(one.parts.len(), 2, "headers, then the shared resource");
        // A small message is one buffer: one DATA frame.
        let push = sotw_response(XdsType::Endpoint, "v1", "3", &[&res("c", 5000, 3)]);
        assert_eq!(push.parts.len(), 1);
        let r: DiscoveryResponse = push.decode();
        assert_eq!(r.resources[0].value, vec![7; 5000]);
        let empty: DiscoveryResponse = sotw_response(XdsType::Cluster, "", "1", &[]).decode();
        assert_eq!((empty.resources.len(), empty.nonce.as_str()), (0, "1"));
    }

    #[test]
    fn delta_layout_is_protobuf() {
        let (a, b) = (res("a", 3000, 0xabc), res("", 1, 2));
        let r: DeltaDiscoveryResponse =
            delta_response(XdsType::Cluster, "7", "9", &[&a, &b], &["gone", ""]).decode();
        assert_eq!(r.resources.len(), 2);
        assert_eq!(
            (r.resources[0].name.as_str(), r.resources[0].version.as_str()),
            ("a", "0000000000000abc")
        );
        assert_eq!(r.resources[0].resource.as_ref().unwrap().value, vec![7; 3000]);
        assert_eq!(r.resources[1].name, "");
        assert_eq!(r.removed_resources, ["gone", ""]);
        assert_eq!((r.system_version_info.as_str(), r.nonce.as_str()), ("7", "9"));
    }

    #[test]
    fn versions_round_trip_and_foreign_ones_match_nothing() {
        let hex = version_hex(u64::MAX - 3);
        assert_eq!(
            std::str::from_utf8(&hex).unwrap(),
            format!("{:016x}", u64::MAX - 3)
        );
        assert_eq!(
            parse_version_hex(std::str::from_utf8(&hex).unwrap()),
            Some(u64::MAX - 3)
        );
        assert_eq!(parse_version_hex("v1"), None);
        assert_eq!(parse_version_hex("000000000000000g"), None);
        assert_eq!(
            parse_version_hex("+00000000000000a"),
            None,
            "only what meshd writes"
        );
        assert_eq!(parse_version_hex("000000000000000A"), None);
    }

    #[tokio::test]
    async fn body_streams_frames_then_status_trailers() {
        let a = res("a", 2000, 1);
        let frame = sotw_response(XdsType::Endpoint, "1", "1", &[&a]);
        let expected = 2 * (frame.message_len() + PREFIX);
        let second = sotw_response(XdsType::Endpoint, "1", "2", &[&a]);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let body = ResponseBody::new(|out| async move {
            // Two messages in one poll: the second waits for the body to take the first.
            out.send(Ok(frame)).await;
            out.send(Ok(second)).await;
            // Then a wait on a waker of its own, woken from another task.
            let _ = rx.await;
            out.send(Err(Status::unavailable("bye"))).await;
        });
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let _ = tx.send(());
        });
        let collected = tokio::time::timeout(std::time::Duration::from_secs(5), body.collect())
            .await
            .expect("the wake-up reached the body")
            .unwrap();
        let trailers = collected.trailers().cloned().expect("trailers");
        assert_eq!(collected.to_bytes().len(), expected);
        let status = Status::from_header_map(&trailers).expect("status");
        assert_eq!(
            (status.code(), status.message()),
            (tonic::Code::Unavailable, "bye")
        );
        let ok = ResponseBody::new(|_| async {}).collect().await.unwrap();
        let status = Status::from_header_map(ok.trailers().expect("trailers")).expect("status");
        assert_eq!(status.code(), tonic::Code::Ok, "a stream that just ends says OK");
    }

    #[tokio::test]
    async fn a_dropped_body_drops_its_stream() {
        struct Guard(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Guard {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let guard = Guard(dropped.clone());
        let mut body = ResponseBody::new(|_| async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        let polled = http_body::Body::poll_frame(
            Pin::new(&mut body),
            &mut Context::from_waker(std::task::Waker::noop()),
        );
        assert!(polled.is_pending(), "a stream waiting on nothing yields nothing");
        assert!(!dropped.load(std::sync::atomic::Ordering::Relaxed));
        drop(body);
        assert!(
            dropped.load(std::sync::atomic::Ordering::Relaxed),
            "the stream's state went with it"
        );
    }

    type Req = envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;

    /// gRPC-framed `msgs`, cut into `chunks` of the given sizes (the rest in one last chunk).
    fn body(
        bytes: Vec<u8>,
        cuts: &[usize],
    ) -> impl http_body::Body<Data = Bytes, Error = Status> + Unpin + use<> {
        let mut chunks = Vec::new();
        let mut rest = Bytes::from(bytes);
        for &n in cuts {
            chunks.push(rest.split_to(n.min(rest.len())));
        }
        chunks.push(rest);
        http_body_util::StreamBody::new(futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, Status>(http_body::Frame::data(c))),
        ))
    }

    fn framed(msg: &impl prost::Message) -> Vec<u8> {
        let mut out = vec![0];
        out.extend((msg.encoded_len() as u32).to_be_bytes());
        msg.encode(&mut out).unwrap();
        out
    }

    fn req(names: usize) -> Req {
        Req {
            type_url: XdsType::Endpoint.url().into(),
            resource_names_subscribe: (0..names).map(|i| format!("outbound|80||svc-{i}")).collect(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn requests_split_anywhere_decode_whole_and_leave_no_buffer() {
        use futures::StreamExt;
        let (big, small) = (req(2000), req(1));
        let mut bytes = framed(&big);
        bytes.extend(framed(&small));
        let big_len = framed(&big).len();
        // Cut inside the prefix, inside the body, and exactly at the message boundary.
        let mut r = Requests::<_, Req>::new(body(bytes, &[3, 4, 1000, big_len - 1007]), 4 << 20);
        assert_eq!(r.next().await.unwrap().unwrap(), big);
        assert_eq!(r.buf.capacity(), 0, "the large request's buffer is let go");
        assert_eq!(r.next().await.unwrap().unwrap(), small);
        assert!(r.next().await.is_none());
    }

    #[tokio::test]
    async fn bad_requests_end_the_stream_with_a_status_naming_the_problem() {
        use futures::StreamExt;
        let over = {
            let mut b = vec![0];
            b.extend(u32::MAX.to_be_bytes());
            b
        };
        let compressed = {
            let mut b = framed(&req(1));
            b[0] = 1;
            b
        };
        let truncated = framed(&req(3))[..20].to_vec();
        let garbage = vec![0, 0, 0, 0, 3, 0xff, 0xff, 0xff];
        for (bytes, code, says) in [
            (over, tonic::Code::OutOfRange, "too large"),
            (compressed, tonic::Code::Internal, "compressed"),
            (truncated, tonic::Code::Internal, "ended inside a message"),
            (garbage, tonic::Code::Internal, "invalid request message"),
        ] {
            let mut r = Requests::<_, Req>::new(body(bytes, &[]), 4 << 20);
            let err = r.next().await.unwrap().unwrap_err();
            assert_eq!(err.code(), code, "{}", err.message());
            assert!(err.message().contains(says), "{}", err.message());
            assert!(r.next().await.is_none(), "nothing after the error");
        }
    }
}
