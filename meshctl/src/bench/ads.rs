//! The load tool's own view of ADS responses: only the fields a bench client reads, with names and
//! resource bodies as [`Bytes`] slices of tonic's receive buffer, so a response is decoded without
//! copying or allocating per resource; and the two ADS calls that return them with their frame size.
//!
//! Owns: the response messages, the codec and the calls. Does NOT: interpret resources (see
//! [`super::client`] and [`super::names`]); requests stay envoy-types messages.

use std::marker::PhantomData;

use bytes::{Buf, Bytes};
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use http::uri::PathAndQuery;
use prost::Message;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{
    GrpcMethod, Status, Streaming,
    client::Grpc,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    transport::Channel,
};

const SERVICE: &str = "envoy.service.discovery.v3.AggregatedDiscoveryService";

/// `google.protobuf.Any` without its type URL (every resource of a response has the response's).
#[derive(Clone, PartialEq, Message)]
pub(super) struct RawAny {
    #[prost(bytes = "bytes", tag = "2")]
    pub(super) value: Bytes,
}

/// `DiscoveryResponse`: version, resources, type and nonce (canary and control plane skipped).
#[derive(Clone, PartialEq, Message)]
pub(super) struct SotwResponse {
    #[prost(string, tag = "1")]
    pub(super) version_info: String,
    #[prost(message, repeated, tag = "2")]
    pub(super) resources: Vec<RawAny>,
    #[prost(string, tag = "4")]
    pub(super) type_url: String,
    #[prost(string, tag = "5")]
    pub(super) nonce: String,
}

/// `DeltaDiscoveryResponse`: what the client reads (the removals by name, not by `ResourceName`).
#[derive(Clone, PartialEq, Message)]
pub(super) struct DeltaResponse {
    #[prost(string, tag = "1")]
    pub(super) system_version_info: String,
    #[prost(message, repeated, tag = "2")]
    pub(super) resources: Vec<RawResource>,
    #[prost(string, tag = "4")]
    pub(super) type_url: String,
    #[prost(string, tag = "5")]
    pub(super) nonce: String,
    #[prost(string, repeated, tag = "6")]
    pub(super) removed_resources: Vec<String>,
}

/// `Resource`: its name (a `string` on the wire, kept as bytes: see [`utf8`]), version (kept for a
/// reconnect's `initial_resource_versions`) and body.
#[derive(Clone, PartialEq, Message)]
pub(super) struct RawResource {
    #[prost(bytes = "bytes", tag = "3")]
    pub(super) name: Bytes,
    #[prost(bytes = "bytes", tag = "1")]
    pub(super) version: Bytes,
    #[prost(message, optional, tag = "2")]
    pub(super) resource: Option<RawAny>,
}

/// The name of an encoded `Cluster` or `ClusterLoadAssignment` (both carry it as field 1), as a slice
/// of `body`; empty if the body does not decode.
pub(super) fn resource_name(body: &Bytes) -> Bytes {
    #[derive(Clone, PartialEq, Message)]
    struct Named {
        #[prost(bytes = "bytes", tag = "1")]
        name: Bytes,
    }
    Named::decode(body.clone()).map(|n| n.name).unwrap_or_default()
}

/// A name read as bytes, checked as protobuf checks a `string` (`None`: not UTF-8).
pub(super) fn utf8(name: &Bytes) -> Option<&str> {
    std::str::from_utf8(name).ok()
}

/// A decoded response and the size of its encoded message (the gRPC frame without its 5-byte header).
pub(super) struct Framed<M> {
    pub(super) len: usize,
    pub(super) message: M,
}

/// Requests encoded by prost; responses decoded as `Resp` from tonic's buffer (so `bytes` fields are
/// slices of it), with their length.
struct AdsCodec<Req, Resp>(PhantomData<fn() -> (Req, Resp)>);

impl<Req, Resp> Codec for AdsCodec<Req, Resp>
where
    Req: Message + Send + 'static,
    Resp: Message + Default + Send + 'static,
{
    type Encode = Req;
    type Decode = Framed<Resp>;
    type Encoder = RequestEncoder<Req>;
    type Decoder = ResponseDecoder<Resp>;

    fn encoder(&mut self) -> Self::Encoder {
        RequestEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        ResponseDecoder(PhantomData)
    }
}

struct RequestEncoder<Req>(PhantomData<fn(Req)>);

impl<Req: Message> Encoder for RequestEncoder<Req> {
    type Item = Req;
    type Error = Status;

    fn encode(&mut self, item: Req, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("encoding a request: {e}")))
    }
}

struct ResponseDecoder<Resp>(PhantomData<fn() -> Resp>);

impl<Resp: Message + Default> Decoder for ResponseDecoder<Resp> {
    type Item = Framed<Resp>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Framed<Resp>>, Status> {
        let len = src.remaining();
        let message = Resp::decode(src).map_err(|e| Status::internal(format!("decoding a response: {e}")))?;
        Ok(Some(Framed { len, message }))
    }
}

/// Opens `DeltaAggregatedResources` on `channel`, sending `requests`.
pub(super) async fn delta(
    channel: Channel,
    requests: ReceiverStream<DeltaDiscoveryRequest>,
) -> Result<Streaming<Framed<DeltaResponse>>, Status> {
    open(channel, requests, "DeltaAggregatedResources").await
}

/// Opens `StreamAggregatedResources` on `channel`, sending `requests`.
pub(super) async fn sotw(
    channel: Channel,
    requests: ReceiverStream<DiscoveryRequest>,
) -> Result<Streaming<Framed<SotwResponse>>, Status> {
    open(channel, requests, "StreamAggregatedResources").await
}

async fn open<Req, Resp>(
    channel: Channel,
    requests: ReceiverStream<Req>,
    method: &'static str,
) -> Result<Streaming<Framed<Resp>>, Status>
where
    Req: Message + Send + 'static,
    Resp: Message + Default + Send + 'static,
{
    let mut grpc = Grpc::new(channel).max_decoding_message_size(usize::MAX);
    grpc.ready()
        .await
        .map_err(|e| Status::unknown(format!("service was not ready: {e}")))?;
    let path = PathAndQuery::try_from(format!("/{SERVICE}/{method}"))
        .map_err(|e| Status::internal(e.to_string()))?;
    let mut request = tonic::Request::new(requests);
    request.extensions_mut().insert(GrpcMethod::new(SERVICE, method));
    let codec = AdsCodec::<Req, Resp>(PhantomData);
    Ok(grpc.streaming(request, path, codec).await?.into_inner())
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::{
        envoy::service::discovery::v3::{DeltaDiscoveryResponse, DiscoveryResponse, Resource},
        google::protobuf::Any,
    };

    use super::*;
    use crate::bench::names::tests::{assignment, cluster};

    fn any(type_url: &str, value: Vec<u8>) -> Any {
        Any {
            type_url: type_url.into(),
            value,
        }
    }

    /// Decoding from the receive buffer as tonic does: through `Buf::copy_to_bytes`.
    fn decode<M: Message + Default>(encoded: Vec<u8>) -> M {
        M::decode(Bytes::from(encoded)).expect("decodes")
    }

    #[test]
    fn delta_responses_decode_to_the_same_names_and_bodies() {
        let bodies = [
            assignment("web", &[[10, 0, 0, 1]]),
            assignment("outbound|80||api.bench.svc.cluster.local", &[]),
        ];
        let full = DeltaDiscoveryResponse {
            system_version_info: "v7".into(),
            type_url: meshd::xds::ENDPOINT_TYPE.into(),
            nonce: "n1".into(),
            removed_resources: vec!["gone".into()],
            resources: vec![
                Resource {
                    name: "web".into(),
                    version: "3".into(),
                    aliases: vec!["alias".into()],
                    resource: Some(any(meshd::xds::ENDPOINT_TYPE, bodies[0].clone())),
                    ..Default::default()
                },
                Resource {
                    name: "outbound|80||api.bench.svc.cluster.local".into(),
                    resource: Some(any(meshd::xds::ENDPOINT_TYPE, bodies[1].clone())),
                    ..Default::default()
                },
                Resource {
                    name: "no-body".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let got: DeltaResponse = decode(full.encode_to_vec());
        assert_eq!(got.system_version_info, "v7");
        assert_eq!(got.type_url, meshd::xds::ENDPOINT_TYPE);
        assert_eq!(got.nonce, "n1");
        assert_eq!(got.removed_resources, ["gone"]);
        let names: Vec<_> = got.resources.iter().map(|r| utf8(&r.name)).collect();
        assert_eq!(
            names,
            [
                Some("web"),
                Some("outbound|80||api.bench.svc.cluster.local"),
                Some("no-body")
            ]
        );
        let got_bodies: Vec<_> = got
            .resources
            .iter()
            .map(|r| r.resource.as_ref().map(|a| a.value.to_vec()))
            .collect();
        assert_eq!(
            got_bodies,
            [Some(bodies[0].clone()), Some(bodies[1].clone()), None]
        );
    }

    #[test]
    fn sotw_responses_decode_to_the_same_names_and_bodies() {
        let bodies = [
            cluster("outbound|80||web.bench.svc.cluster.local", None, None),
            cluster("api", None, Some("api-eds")),
        ];
        let full = DiscoveryResponse {
            version_info: "v2".into(),
            canary: true,
            type_url: meshd::xds::CLUSTER_TYPE.into(),
            nonce: "n9".into(),
            resources: bodies
                .iter()
                .map(|b| any(meshd::xds::CLUSTER_TYPE, b.clone()))
                .collect(),
            ..Default::default()
        };
        let got: SotwResponse = decode(full.encode_to_vec());
        assert_eq!(
            (
                got.version_info.as_str(),
                got.type_url.as_str(),
                got.nonce.as_str()
            ),
            ("v2", meshd::xds::CLUSTER_TYPE, "n9")
        );
        let got: Vec<_> = got
            .resources
            .iter()
            .map(|a| {
                (
                    utf8(&resource_name(&a.value)).map(str::to_owned),
                    a.value.to_vec(),
                )
            })
            .collect();
        let want: Vec<_> = ["outbound|80||web.bench.svc.cluster.local", "api"]
            .into_iter()
            .zip(bodies)
            .map(|(n, b)| (Some(n.to_owned()), b))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn names_that_are_not_utf8_are_refused() {
        assert_eq!(utf8(&Bytes::from_static(b"\xff\xfe")), None);
        assert_eq!(resource_name(&Bytes::from_static(b"\x0a")), Bytes::new());
    }

    #[test]
    fn bodies_are_slices_of_the_buffer() {
        let full = DiscoveryResponse {
            resources: vec![any("t", vec![7; 64])],
            ..Default::default()
        };
        let buffer = Bytes::from(full.encode_to_vec());
        let got = SotwResponse::decode(buffer.clone()).expect("decodes");
        let body = got.resources[0].value.as_ptr_range();
        let whole = buffer.as_ptr_range();
        assert!(whole.start <= body.start && body.end <= whole.end, "no copy");
    }
}
