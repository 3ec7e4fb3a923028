"""Shared pieces for the xDS end-to-end tests: the ``xds-fixture`` server (meshd's real ADS server on
a JSON-described mesh), gRPC echo backends on loopback, and a raw ADS client (``xds-protos``) that
speaks state-of-the-world and delta message by message.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2

# Registered for json_format: the types meshd nests in `Any` fields.
from envoy.extensions.filters.http.cors.v3 import cors_pb2  # noqa: F401
from envoy.extensions.request_id.uuid.v3 import uuid_pb2  # noqa: F401
from envoy.extensions.filters.http.fault.v3 import fault_pb2  # noqa: F401
from envoy.extensions.filters.listener.http_inspector.v3 import http_inspector_pb2  # noqa: F401
from envoy.extensions.filters.listener.original_dst.v3 import original_dst_pb2  # noqa: F401
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2  # noqa: F401
from envoy.extensions.network.dns_resolver.cares.v3 import cares_dns_resolver_pb2  # noqa: F401
from envoy.extensions.filters.http.router.v3 import router_pb2  # noqa: F401
from envoy.extensions.retry.host.previous_hosts.v3 import previous_hosts_pb2  # noqa: F401
from envoy.extensions.retry.priority.previous_priorities.v3 import previous_priorities_config_pb2  # noqa: F401
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2  # noqa: F401
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2  # noqa: F401
from envoy.extensions.transport_sockets.raw_buffer.v3 import raw_buffer_pb2  # noqa: F401
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2  # noqa: F401
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2  # noqa: F401
from google.protobuf import struct_pb2
from google.rpc import status_pb2

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("MESHD_BIN_DIR", REPO / "target" / "debug"))

CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
LDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
RDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
MESSAGES = {
    CDS: cluster_pb2.Cluster,
    EDS: endpoint_pb2.ClusterLoadAssignment,
    LDS: listener_pb2.Listener,
    RDS: route_pb2.RouteConfiguration,
}


def echo_service(endpoints, name="echo", ns="default", port=7070, **extra):
    """A mesh-file service with a GRPC port named ``grpc`` and ``endpoints`` as (ip, port) pairs."""
    return {
        "name": name,
        "namespace": ns,
        "ports": [["grpc", port, "GRPC"]],
        "endpoints": [{"address": ip, "ports": {"grpc": p}, **extra} for ip, p in endpoints],
    }


class Fixture:
    """``xds-fixture`` serving ``mesh`` (rewrite it with :meth:`set_mesh`)."""

    def __init__(self, tmp: Path, mesh: dict):
        self.path = tmp / "mesh.json"
        self.set_mesh(mesh)
        self.proc = subprocess.Popen(
            [str(BIN_DIR / "examples" / "xds-fixture"), "--mesh", str(self.path)],
            stdout=subprocess.PIPE,
            stderr=open(tmp / "xds-fixture.log", "w"),
            text=True,
        )
        line = self.proc.stdout.readline()
        assert line.startswith("listening on "), f"xds-fixture did not start: {line!r}"
        self.addr = line.split()[-1]
        self.port = int(self.addr.rsplit(":", 1)[1])

    def set_mesh(self, mesh: dict):
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(mesh))
        tmp.replace(self.path)

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def grpc_node(node_id="sidecar~127.0.0.1~client.default~default.svc.cluster.local", **metadata):
    meta = struct_pb2.Struct()
    meta.update({"GENERATOR": "grpc", "NAMESPACE": "default", **metadata})
    return base_pb2.Node(id=node_id, metadata=meta)


def sidecar_node(node_id="sidecar~127.0.0.1~client.default~default.svc.cluster.local", **metadata):
    """An Envoy sidecar's node (no ``GENERATOR``)."""
    meta = struct_pb2.Struct()
    meta.update({"NAMESPACE": "default", **metadata})
    return base_pb2.Node(id=node_id, metadata=meta)


# A workload identity: a change of it alters what CDS sends a sidecar (the SANs of its auto-mTLS); a
# gRPC client's clusters depend on DestinationRules only.
ECHO_SA = "spiffe://cluster.local/ns/default/sa/echo"


def bootstrap(port: int, namespace: str = "default") -> str:
    """A gRPC xDS bootstrap (``GRPC_XDS_BOOTSTRAP_CONFIG``) for a client in ``namespace``."""
    return json.dumps({
        "xds_servers": [{
            "server_uri": f"127.0.0.1:{port}",
            "channel_creds": [{"type": "insecure"}],
            "server_features": ["xds_v3"],
        }],
        "node": {
            "id": f"sidecar~127.0.0.1~client.{namespace}~{namespace}.svc.cluster.local",
            "locality": {},
            "metadata": {"GENERATOR": "grpc", "NAMESPACE": namespace},
        },
    })


class Ads:
    """A raw ADS stream. ``send`` queues a request; ``recv`` waits for the next response."""

    def __init__(self, addr: str, delta: bool = False, channel: grpc.Channel | None = None):
        self.channel = channel or grpc.insecure_channel(addr)
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(self.channel)
        self.requests: queue.Queue = queue.Queue()
        self.responses: queue.Queue = queue.Queue()
        self.delta = delta
        call = stub.DeltaAggregatedResources if delta else stub.StreamAggregatedResources
        self.call = call(iter(self.requests.get, None))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for r in self.call:
                self.responses.put(r)
        except grpc.RpcError as e:
            self.responses.put(e)

    def send(self, type_url, node=None, **fields):
        cls = discovery_pb2.DeltaDiscoveryRequest if self.delta else discovery_pb2.DiscoveryRequest
        req = cls(type_url=type_url, **fields)
        if node is not None:
            req.node.CopyFrom(node)
        self.requests.put(req)

    def nack(self, resp, names=(), version=""):
        err = status_pb2.Status(code=3, message="rejected by test")
        if self.delta:
            self.send(resp.type_url, response_nonce=resp.nonce, error_detail=err)
        else:
            self.send(resp.type_url, resource_names=list(names), version_info=version,
                      response_nonce=resp.nonce, error_detail=err)

    def ack(self, resp, names=()):
        if self.delta:
            self.send(resp.type_url, response_nonce=resp.nonce)
        else:
            self.send(resp.type_url, resource_names=list(names), version_info=resp.version_info,
                      response_nonce=resp.nonce)

    def recv(self, timeout=5.0):
        r = self.responses.get(timeout=timeout)
        if isinstance(r, Exception):
            raise r
        return r

    def expect_none(self, wait=0.6):
        try:
            r = self.responses.get(timeout=wait)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected response: {r}")

    def error(self, timeout=5.0) -> grpc.RpcError:
        r = self.responses.get(timeout=timeout)
        assert isinstance(r, grpc.RpcError), f"expected the stream to fail, got {r}"
        return r

    def close(self):
        self.requests.put(None)
        self.channel.close()


def decode(resp):
    """(name → message) of a SotW or delta response."""
    out = {}
    if isinstance(resp, discovery_pb2.DeltaDiscoveryResponse):
        anys = [(r.name, r.resource) for r in resp.resources]
    else:
        anys = [(None, a) for a in resp.resources]
    for name, a in anys:
        msg = MESSAGES[a.type_url]()
        a.Unpack(msg)
        key = name or getattr(msg, "name", "") or msg.cluster_name
        out[key] = msg
    return out


def fetch(addr: str, type_url: str, node, names=()) -> dict:
    """(name → message) of one SotW answer on a fresh ADS stream."""
    ads = Ads(addr)
    try:
        ads.send(type_url, node=node, resource_names=list(names))
        return decode(ads.recv())
    finally:
        ads.close()


class EchoBackend:
    """A gRPC server on a loopback address answering ``/echo.Echo/Call`` with its name."""

    def __init__(self, name: str, server_credentials=None, host: str = "127.0.0.1"):
        self.name = name
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handler = grpc.unary_unary_rpc_method_handler(self._call)
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("echo.Echo", {"Call": handler}),)
        )
        self.host = host
        addr = f"{host}:0"
        if server_credentials is None:
            self.port = self.server.add_insecure_port(addr)
        else:
            self.port = self.server.add_secure_port(addr, server_credentials)
        self.server.start()

    def _call(self, request, context):
        return self.name.encode()

    def stop(self):
        self.server.stop(0)


def wait_until(predicate, timeout=10.0, every=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return predicate()


class RawH2:
    """HTTP/2 by hand on a plain socket, for what real gRPC clients refuse to send: hostile frames,
    a zero flow-control window, gRPC length prefixes that lie. Headers use literal HPACK encoding."""

    PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9

    def __init__(self, addr: str, initial_window: int | None = None):
        import socket

        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        settings = b"" if initial_window is None else (4).to_bytes(2, "big") + initial_window.to_bytes(4, "big")
        self.sock.sendall(self.PREFACE + self.frame(self.SETTINGS, 0, 0, settings))
        self.next_stream = 1

    @staticmethod
    def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
        return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload

    @staticmethod
    def literal(name: str, value: str) -> bytes:
        def s(x: bytes) -> bytes:
            assert len(x) < 127
            return bytes([len(x)]) + x
        return b"\x00" + s(name.encode()) + s(value.encode())

    def grpc_headers(self, path: str, **extra: str) -> bytes:
        fields = [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "meshd"),
                  ("content-type", "application/grpc"), ("te", "trailers"), *extra.items()]
        return b"".join(self.literal(k, v) for k, v in fields)

    def open(self, path: str, end_headers: bool = True, **extra: str) -> int:
        sid = self.next_stream
        self.next_stream += 2
        self.sock.sendall(self.frame(self.HEADERS, 0x4 if end_headers else 0, sid, self.grpc_headers(path, **extra)))
        return sid

    def send(self, kind: int, flags: int, stream: int, payload: bytes = b"") -> None:
        self.sock.sendall(self.frame(kind, flags, stream, payload))

    def read_until_closed(self, limit: float = 10) -> bytes:
        """Everything the server sends until it closes the connection (or ``limit`` seconds pass)."""
        import time

        self.sock.settimeout(0.5)
        out, end = b"", time.monotonic() + limit
        while time.monotonic() < end:
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionError:
                break
            if not chunk:
                break
            out += chunk
        return out

    def frames(self, data: bytes):
        """(type, flags, stream, payload) of every complete frame in ``data``."""
        i = 0
        while i + 9 <= len(data):
            n = int.from_bytes(data[i:i + 3], "big")
            yield data[i + 3], data[i + 4], int.from_bytes(data[i + 5:i + 9], "big") & 0x7FFFFFFF, data[i + 9:i + 9 + n]
            i += 9 + n

    def close(self) -> None:
        self.sock.close()


def routable(cla) -> set[str]:
    """Addresses of a ClusterLoadAssignment a client would send traffic to (health UNKNOWN or HEALTHY)."""
    from envoy.config.core.v3 import health_check_pb2 as hc

    ok = (hc.UNKNOWN, hc.HEALTHY)
    return {lb.endpoint.address.socket_address.address
            for loc in cla.endpoints for lb in loc.lb_endpoints if lb.health_status in ok}
