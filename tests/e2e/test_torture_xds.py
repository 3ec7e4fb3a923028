"""Torture list A and B (reliability-security.md §6): transport abuse, gRPC framing and the discovery
protocol state machine, driven by raw ADS clients (xds-protos) and plain sockets against meshd's real
ADS server (``xds-fixture``). Every test also checks that a bystander client is still served."""

from __future__ import annotations

import os
import queue
import socket
import threading
import time

import grpc
import pytest
from google.protobuf import struct_pb2

from xdsharness import CDS, ECHO_SA, EDS, LDS, Ads, Fixture, RawH2, decode, echo_service, grpc_node, sidecar_node

HOST = "echo.default.svc.cluster.local"
CLUSTER = f"outbound|7070||{HOST}"
ADS_METHOD = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"


@pytest.fixture
def fixture(tmp_path):
    f = Fixture(tmp_path, {"services": [echo_service([("127.0.0.1", 50051)])]})
    yield f
    assert f.proc.poll() is None, "the ADS server died"
    f.close()


SHED = grpc.StatusCode.RESOURCE_EXHAUSTED  # the new-stream limiter's answer ("retry with backoff")


def assert_served(fixture: Fixture) -> None:
    """A fresh well-behaved client (retrying when the new-stream limiter sheds it, as clients do)
    gets CDS within 3 s."""
    start = time.monotonic()
    while True:
        ads = Ads(fixture.addr)
        ads.send(CDS, node=grpc_node(), resource_names=[CLUSTER])
        try:
            assert list(decode(ads.recv(timeout=5))) == [CLUSTER]
            break
        except grpc.RpcError as e:
            assert e.code() == SHED and time.monotonic() - start < 3, e
            time.sleep(0.1)
        finally:
            ads.close()
    assert time.monotonic() - start < 3


def rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


# --- A. transport and framing -------------------------------------------------------------------


def test_a1_silent_and_garbage_connections_do_not_block_the_server(fixture):
    """#1 (plaintext port): 300 connections that never speak, plus HTTP/1.1 and garbage bytes, leave the
    server serving new clients; garbage connections are closed by the server."""
    host, port = fixture.addr.rsplit(":", 1)
    silent = [socket.create_connection((host, int(port))) for _ in range(300)]
    junk = socket.create_connection((host, int(port)))
    junk.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(range(256)) * 4)
    junk.settimeout(10)
    try:
        while junk.recv(4096):  # the server must close it (FIN or RST)
            pass
    except ConnectionResetError:
        pass
    assert_served(fixture)
    for s in silent:
        s.close()
    junk.close()


def test_a5_oversized_and_garbage_messages_fail_the_stream_only(fixture):
    """#5: a message of max+1 bytes (4 MiB + 1) is refused before decoding (tonic's status for an
    over-limit message is OUT_OF_RANGE; RESOURCE_EXHAUSTED accepted too); bytes that are not a
    DiscoveryRequest get INTERNAL/INVALID_ARGUMENT; neither affects other streams."""
    ch = grpc.insecure_channel(fixture.addr, options=[("grpc.max_send_message_length", 64 << 20)])
    call = ch.stream_stream(ADS_METHOD, request_serializer=None, response_deserializer=None)
    with pytest.raises(grpc.RpcError) as err:
        list(call(iter([b"\x0a" + b"\xff" * 5])))  # truncated varint length
    assert err.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT)
    with pytest.raises(grpc.RpcError) as err:
        list(call(iter([b"\x00" * ((4 << 20) + 1)])))
    assert err.value.code() in (grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert "too large" in err.value.details()
    ch.close()
    assert_served(fixture)


def stream_ended(h2: RawH2, data: bytes, sid: int) -> bool:
    """The server ended ``sid`` (trailers with END_STREAM, or RST_STREAM), or closed the connection."""
    return any(sid == s and (t == RawH2.RST_STREAM or (t == RawH2.HEADERS and f & 0x1))
               for t, f, s, _ in h2.frames(data)) or any(t == RawH2.GOAWAY for t, _, _, _ in h2.frames(data))


@pytest.mark.parametrize("case", ["length-0xffffffff", "unknown-encoding", "truncated-then-eof"])
def test_a5_lying_grpc_frames_end_the_stream_without_allocating(fixture, case):
    """#5: a length prefix of 0xFFFFFFFF, a compressed message with an unknown ``grpc-encoding``, and
    a truncated message followed by END_STREAM each end that stream promptly (status in trailers or
    RST_STREAM), without allocating the declared length; the server keeps serving."""
    before = rss_kib(fixture.proc.pid)
    h2 = RawH2(fixture.addr)
    extra = {"grpc-encoding": "snappy-9000"} if case == "unknown-encoding" else {}
    sid = h2.open(ADS_METHOD, **extra)
    if case == "length-0xffffffff":
        h2.send(RawH2.DATA, 0, sid, b"\x00\xff\xff\xff\xff" + b"\x0a" * 64)
    elif case == "unknown-encoding":
        h2.send(RawH2.DATA, 0, sid, b"\x01\x00\x00\x00\x04abcd")
    else:
        h2.send(RawH2.DATA, 0x1, sid, b"\x00\x00\x00\x10\x00abc")
    data = h2.read_until_closed(limit=5)
    assert stream_ended(h2, data, sid), f"stream {sid} not ended: {list(h2.frames(data))[:5]}"
    h2.close()
    assert rss_kib(fixture.proc.pid) - before < 32 * 1024
    assert_served(fixture)


@pytest.mark.parametrize("flood", ["rapid-reset", "continuation", "ping", "settings"])
def test_a4_http2_floods_are_bounded(fixture, flood):
    """#4: 20,000 HEADERS+RST_STREAM pairs (rapid reset), an endless CONTINUATION chain, and PING /
    SETTINGS floods on one connection: the server answers with GOAWAY or closes, or absorbs them, with
    bounded memory; other clients are served meanwhile."""
    before = rss_kib(fixture.proc.pid)
    h2 = RawH2(fixture.addr)
    try:
        if flood == "rapid-reset":
            for _ in range(20_000):
                sid = h2.open(ADS_METHOD)
                h2.send(RawH2.RST_STREAM, 0, sid, (8).to_bytes(4, "big"))
        elif flood == "continuation":
            sid = h2.open(ADS_METHOD, end_headers=False)
            chunk = RawH2.literal("x-junk", "y" * 100)
            for _ in range(200_000):
                h2.send(RawH2.CONTINUATION, 0, sid, chunk)
        elif flood == "ping":
            for i in range(50_000):
                h2.send(RawH2.PING, 0, 0, i.to_bytes(8, "big"))
        else:
            for _ in range(50_000):
                h2.send(RawH2.SETTINGS, 0, 0, b"")
    except (ConnectionError, TimeoutError):
        pass  # the server hung up: the expected outcome for the abusive ones
    assert_served(fixture)
    h2.close()
    assert rss_kib(fixture.proc.pid) - before < 64 * 1024


def test_a6_connect_disconnect_stampede_leaks_nothing(fixture):
    """#6: 10,000 stream open/close cycles as fast as possible (``MESHD_STAMPEDE_CYCLES``), half never
    sending a request: streams over the new-stream rate are shed at once with RESOURCE_EXHAUSTED (never
    hang), memory stays bounded, and a normal client is served right after."""
    before = rss_kib(fixture.proc.pid)
    ch = grpc.insecure_channel(fixture.addr)
    call = ch.stream_stream(ADS_METHOD, request_serializer=None, response_deserializer=None)
    request = _cds_request_bytes()
    outcomes = {"served": 0, "shed": 0}
    begun = time.monotonic()
    for i in range(int(os.environ.get("MESHD_STAMPEDE_CYCLES", "10000"))):
        it = call(iter([] if i % 2 else [request]), timeout=5)
        if i % 2 == 0:
            started = time.monotonic()
            try:
                next(it)
                outcomes["served"] += 1
            except grpc.RpcError as e:
                assert e.code() == SHED, e
                assert time.monotonic() - started < 1, "shedding must be fast"
                outcomes["shed"] += 1
        it.cancel()
    assert outcomes["served"] >= 20 and outcomes["shed"] > 0, outcomes
    ch.close()
    assert_served(fixture)
    grown = rss_kib(fixture.proc.pid) - before
    print(f"stampede: {outcomes}, {time.monotonic() - begun:.1f}s, RSS +{grown // 1024} MiB")
    assert grown < 64 * 1024, "RSS grew by more than 64 MiB"


def _cds_request_bytes() -> bytes:
    from envoy.service.discovery.v3 import discovery_pb2

    r = discovery_pb2.DiscoveryRequest(type_url=CDS, resource_names=[CLUSTER])
    r.node.CopyFrom(grpc_node())
    return r.SerializeToString()


# --- B. discovery protocol --------------------------------------------------------------------


@pytest.mark.parametrize("node_id", [None, ""])
def test_b7_first_request_without_node_is_invalid_argument(fixture, node_id):
    """#7: no node / empty node.id on the first request → INVALID_ARGUMENT; nothing registered."""
    ads = Ads(fixture.addr)
    ads.send(CDS, node=None if node_id is None else grpc_node(node_id=node_id), resource_names=[CLUSTER])
    assert ads.error().code() == grpc.StatusCode.INVALID_ARGUMENT
    ads.close()
    assert_served(fixture)


@pytest.mark.parametrize("case", ["wrong-type", "huge-string", "deep-struct", "too-many-labels"])
def test_b8_hostile_node_metadata_is_invalid_argument(fixture, case):
    """#8: wrong JSON types, a 1 MiB string, a deeply nested Struct and 10,000 labels are rejected with
    INVALID_ARGUMENT — the deep Struct already by the protobuf decoder's recursion limit (INTERNAL) — with
    no panic and no stack overflow; the server keeps serving."""
    node = grpc_node()
    if case == "wrong-type":
        node.metadata.fields["LABELS"].number_value = 3
    elif case == "huge-string":
        node.metadata.fields["NAMESPACE"].string_value = "x" * (1 << 20)
    elif case == "deep-struct":
        inner = struct_pb2.Value(string_value="x")
        for _ in range(90):  # just under protobuf's recursion limit on the encoding side
            outer = struct_pb2.Value()
            outer.struct_value.fields["a"].CopyFrom(inner)
            inner = outer
        node.metadata.fields["LABELS"].CopyFrom(inner)
    else:
        node.metadata.fields["LABELS"].struct_value.update({f"k{i}": "v" for i in range(10_000)})
    ads = Ads(fixture.addr)
    ads.send(CDS, node=node, resource_names=[CLUSTER])
    err = ads.error()
    if case == "deep-struct":
        assert err.code() == grpc.StatusCode.INTERNAL and "recursion limit" in err.details(), err
    else:
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err
    ads.close()
    assert_served(fixture)


def test_b9_unknown_type_urls_get_no_response_and_state_stays_bounded(fixture):
    """#9: 10,000 distinct unknown type URLs on one stream get no response (or a stream error);
    the stream, if kept, still answers CDS."""
    ads = Ads(fixture.addr)
    ads.send(CDS, node=grpc_node(), resource_names=[CLUSTER])
    ads.ack(ads.recv(), [CLUSTER])
    for i in range(10_000):
        ads.send(f"type.googleapis.com/junk.T{i}", resource_names=["x"])
    ads.send(EDS, resource_names=[CLUSTER])
    r = ads.responses.get(timeout=10)
    if isinstance(r, grpc.RpcError):
        assert r.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)
    else:
        assert r.type_url == EDS
    ads.close()
    assert_served(fixture)


def test_b10_huge_and_duplicated_resource_names(fixture):
    """#10: 1,000 duplicates of one name → the resource exactly once; 150,000 names (over the 100,000
    cap) → ignored (no response, or an error) without blocking the stream or others."""
    ads = Ads(fixture.addr)
    ads.send(EDS, node=grpc_node(), resource_names=[CLUSTER] * 1000 + ["nope"])
    r = ads.recv()
    assert [a.type_url for a in r.resources] == [EDS] and list(decode(r)) == [CLUSTER]
    ads.close()
    big = Ads(fixture.addr)
    start = time.monotonic()
    big.send(EDS, node=grpc_node(), resource_names=[f"outbound|1||s{i}.x" for i in range(150_000)])
    try:
        r = big.responses.get(timeout=3)
        assert isinstance(r, grpc.RpcError), f"answered an over-cap request: {r.type_url}"
    except queue.Empty:
        pass  # ignored, as designed
    # The same stream still works for a sane request.
    big.send(EDS, resource_names=[CLUSTER])
    assert list(decode(big.recv(timeout=5))) == [CLUSTER]
    assert time.monotonic() - start < 10
    big.close()
    assert_served(fixture)


def test_b11_nack_storm_does_not_resend_the_same_version(fixture):
    """#11: NACKing every response gets no resend of the same version; only a real change is pushed."""
    ads = Ads(fixture.addr)
    ads.send(CDS, node=sidecar_node(), resource_names=[CLUSTER])
    first = ads.recv()
    for _ in range(50):
        ads.nack(first, [CLUSTER])
    ads.expect_none(1.0)
    fixture.set_mesh({"services": [echo_service([("127.0.0.1", 50051)], serviceAccount=ECHO_SA)]})
    assert ads.recv().version_info != first.version_info
    ads.close()


def test_b12_sotw_stale_nonce_with_new_names_is_ignored(fixture):
    """#12 (SotW half; the delta half is test_xds_protocol::test_delta_stale_nonce_still_changes_subscription)."""
    ads = Ads(fixture.addr)
    ads.send(EDS, node=grpc_node(), resource_names=[CLUSTER])
    ads.recv()
    ads.send(EDS, resource_names=[CLUSTER, "outbound|1||x.default.svc.cluster.local"], response_nonce="stale")
    ads.expect_none()
    ads.close()


@pytest.mark.parametrize("type_url", [CDS, LDS])
def test_b13_spec_wildcard_sequence_sotw(fixture, type_url):
    """#13 (SotW): unset → wildcard (everything); ``*``+A → everything; A → only A; then an empty list
    after names were sent → unsubscribe (no response)."""
    name = CLUSTER if type_url == CDS else f"{HOST}:7070"
    ads = Ads(fixture.addr)
    ads.send(type_url, node=grpc_node())
    r = ads.recv()
    if type_url == CDS:
        assert list(decode(r)) == [CLUSTER]
    ads.ack(r)
    ads.send(type_url, resource_names=["*", name], version_info=r.version_info, response_nonce=r.nonce)
    try:
        r2 = ads.recv(timeout=1)
        assert name in decode(r2)
        r = r2
    except Exception:
        pass
    ads.send(type_url, resource_names=[name], version_info=r.version_info, response_nonce=r.nonce)
    r3 = ads.recv()
    assert list(decode(r3)) == [name]
    ads.send(type_url, resource_names=[], version_info=r3.version_info, response_nonce=r3.nonce)
    ads.expect_none()
    ads.close()


def test_b13_spec_wildcard_sequence_delta(fixture):
    """#13 (delta): implicit wildcard, then subscribe A, unsubscribe ``*`` → only A kept, then
    unsubscribe A."""
    ads = Ads(fixture.addr, delta=True)
    ads.send(CDS, node=grpc_node())
    r = ads.recv()
    assert [x.name for x in r.resources] == [CLUSTER]
    ads.ack(r)
    ads.send(CDS, resource_names_subscribe=[CLUSTER], resource_names_unsubscribe=["*"], response_nonce=r.nonce)
    fixture.set_mesh({"services": [echo_service([("127.0.0.1", 50051)]), echo_service([], name="other")]})
    time.sleep(1.0)
    got = []
    while True:
        try:
            x = ads.recv(timeout=0.5)
        except Exception:
            break
        got += [y.name for y in x.resources]
        ads.ack(x)
    assert "outbound|7070||other.default.svc.cluster.local" not in got, "wildcard was not unsubscribed"
    ads.close()


def test_b14_eds_for_a_missing_service_is_pushed_when_it_appears(fixture):
    """#14 (SotW): while the cluster does not exist nothing is fabricated for it (at most an empty
    response, a no-op for EDS); pushed without a new request once the Service appears."""
    other = "outbound|7070||late.default.svc.cluster.local"
    ads = Ads(fixture.addr)
    ads.send(EDS, node=grpc_node(), resource_names=[other])
    try:
        first = ads.recv(timeout=1)
        assert not first.resources, f"a resource was invented for a missing service: {first}"
        ads.ack(first, [other])
    except queue.Empty:
        pass
    fixture.set_mesh({"services": [echo_service([("127.0.0.1", 50051)]),
                                   echo_service([("127.0.0.1", 50099)], name="late")]})
    assert list(decode(ads.recv(timeout=10))) == [other]
    ads.close()


def test_b15_reconnect_with_old_nonce_and_same_node_id_twice(fixture):
    """#15: EDS first on a new stream with an old nonce/version → full state; two streams with the same
    node id are both served; closing the old one does not stop pushes to the new one."""
    old = Ads(fixture.addr)
    old.send(EDS, node=grpc_node(), resource_names=[CLUSTER], version_info="v-old", response_nonce="n-old")
    r = old.recv()
    assert list(decode(r)) == [CLUSTER]
    new = Ads(fixture.addr)
    new.send(EDS, node=grpc_node(), resource_names=[CLUSTER], version_info=r.version_info, response_nonce=r.nonce)
    r2 = new.recv()
    assert list(decode(r2)) == [CLUSTER]
    new.ack(r2, [CLUSTER])
    old.close()
    fixture.set_mesh({"services": [echo_service([("127.0.0.1", 50051), ("127.0.0.1", 50052)])]})
    assert len(decode(new.recv(timeout=10))[CLUSTER].endpoints[0].lb_endpoints) == 2
    new.close()


def test_b17_incremental_delta_eds_among_1000_services(fixture):
    """#17: a delta client holding 1,000 EDS resources; one service's endpoints change → a response
    with exactly that resource and no removals; the other 999 are never re-sent; a SotW client of one
    of the others gets nothing."""
    def services(changed_port: int) -> dict:
        return {"services": [echo_service([("127.0.0.1", changed_port if i == 500 else 40000 + i)], name=f"svc{i}")
                             for i in range(1000)]}

    names = [f"outbound|7070||svc{i}.default.svc.cluster.local" for i in range(1000)]
    fixture.set_mesh(services(40500))
    delta, bystander = Ads(fixture.addr, delta=True), Ads(fixture.addr)
    bystander.send(EDS, node=grpc_node(), resource_names=[names[7]])
    while True:  # an empty answer first if the fixture has not loaded the new mesh yet (see #14)
        r = bystander.recv(timeout=10)
        bystander.ack(r, [names[7]])
        if names[7] in decode(r):
            break
    delta.send(EDS, node=grpc_node(), resource_names_subscribe=names)
    held: dict[str, str] = {}
    while len(held) < 1000:  # the initial state may come in several batches
        r = delta.recv(timeout=10)
        assert not r.removed_resources
        held.update({x.name: x.version for x in r.resources})
        delta.ack(r)
    assert sorted(held) == sorted(names)
    delta.expect_none()

    fixture.set_mesh(services(50500))
    r = delta.recv(timeout=10)
    assert [x.name for x in r.resources] == [names[500]] and not r.removed_resources
    assert held[names[500]] != r.resources[0].version
    cla = decode(r)[names[500]]
    assert cla.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value == 50500
    delta.ack(r)
    delta.expect_none()
    bystander.expect_none()
    delta.close()
    bystander.close()


def test_b19_slow_reader_is_bounded_and_others_converge(fixture):
    """#19: a client that never reads while 200 config changes happen costs bounded memory, and a
    normal client still sees the final state promptly."""
    # A zero flow-control window: the server can never send it anything, and we never read.
    stuck = RawH2(fixture.addr, initial_window=0)
    from envoy.service.discovery.v3 import discovery_pb2

    req = discovery_pb2.DiscoveryRequest(type_url=EDS, resource_names=[CLUSTER])
    req.node.CopyFrom(grpc_node())
    msg = req.SerializeToString()
    stuck.send(RawH2.DATA, 0, stuck.open(ADS_METHOD), b"\x00" + len(msg).to_bytes(4, "big") + msg)
    live = Ads(fixture.addr)
    live.send(EDS, node=grpc_node(), resource_names=[CLUSTER])
    live.ack(live.recv(), [CLUSTER])
    before = rss_kib(fixture.proc.pid)
    many = [("127.0.0.1", 40000 + i) for i in range(200)]
    for i in range(200):
        fixture.set_mesh({"services": [echo_service(many[: i + 1])]})
        time.sleep(0.005)
    deadline = time.monotonic() + 15
    n = 0
    while n != 200 and time.monotonic() < deadline:
        r = live.recv(timeout=10)
        n = len(decode(r)[CLUSTER].endpoints[0].lb_endpoints)
        live.ack(r, [CLUSTER])
    assert n == 200
    assert rss_kib(fixture.proc.pid) - before < 64 * 1024
    live.close()
    stuck.close()


def test_b_many_concurrent_streams_are_bounded(fixture):
    """Resource bounds: 500 streams opened at once by one client: each is served or shed with
    RESOURCE_EXHAUSTED; the server stays responsive during and after, and its RSS stays bounded."""
    before = rss_kib(fixture.proc.pid)
    streams = []
    for _ in range(500):
        s = Ads(fixture.addr)
        s.send(CDS, node=grpc_node(), resource_names=[CLUSTER])
        streams.append(s)
    served = 0
    for s in streams:
        try:
            served += bool(s.recv(timeout=10).resources)
        except grpc.RpcError as e:
            assert e.code() == SHED, e
    assert served >= 20
    assert_served(fixture)
    for s in streams:
        s.close()
    assert rss_kib(fixture.proc.pid) - before < 256 * 1024
    threading.Event().wait(0.5)
    assert_served(fixture)
