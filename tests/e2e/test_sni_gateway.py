"""Across networks through a real SNI-routing east-west gateway (issue 29): HAProxy (sni_gateway.py),
configured only from the listener, clusters and endpoints meshd sends the network2 gateway node.

The sandbox: cluster1 on network1, cluster2 on network2, echo pods on loopback addresses that answer a
TLS connection (mTLS with the sandbox's mesh certificates) with their name: ``echo-v1-a`` in cluster1,
``echo-v1-b`` and ``echo-v2-b`` in cluster2, plus ``plain-b`` (no sidecar) in cluster2. cluster2's
east-west gateway Service points at HAProxy on 127.0.0.50.

The client does what an Envoy sidecar on network1 does with the clusters meshd sends it: for
``outbound|7070|<subset>|echo…`` it takes the gateway endpoint from EDS and opens TLS to it with the
cluster's SNI and ALPNs, its mesh certificate, verifying the server against the mesh root. The answer
names the pod that the real proxy routed it to."""

from __future__ import annotations

import json
import socket
import ssl
import threading
from pathlib import Path

import pytest
from envoy.config.core.v3 import base_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from google.protobuf import struct_pb2

import sni_gateway
from meshd_proc import Meshd, eventually, free_port, namespace, topology
from xdsharness import CDS, EDS, LDS, Ads, decode

if reason := sni_gateway.missing():
    pytest.skip(reason, allow_module_level=True)

NS = "sni"
HOST = f"echo.{NS}.svc.cluster.local"
GW_IP = "127.0.0.50"
PODS = [  # name, cluster, version, ip, sidecar
    ("echo-v1-a", "cluster1", "v1", "127.0.0.41", True),
    ("echo-v1-b", "cluster2", "v1", "127.0.0.42", True),
    ("echo-v2-b", "cluster2", "v2", "127.0.0.43", True),
    ("plain-b", "cluster2", "v3", "127.0.0.44", False),
]


class TlsEcho:
    """A pod's server: mTLS with the mesh certificates, answers every connection with its name."""

    def __init__(self, name: str, ip: str, port: int, certs: Path):
        self.name = name
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certs / "cert-chain.pem", certs / "key.pem")
        self.ctx.load_verify_locations(certs / "root-cert.pem")
        self.ctx.verify_mode = ssl.CERT_REQUIRED
        self.ctx.set_alpn_protocols(["istio-peer-exchange", "istio"])
        self.sock = socket.create_server((ip, port))
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        try:
            with self.ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(self.name.encode())
        except (OSError, ssl.SSLError):
            conn.close()

    def close(self):
        self.sock.close()


def pod(name: str, version: str, ip: str, port: int, sidecar: bool) -> dict:
    labels = {"app": "echo", "version": version}
    if sidecar:
        labels["security.istio.io/tlsMode"] = "istio"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "echo", "ports": [{"name": "tls", "containerPort": port}]}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def node(node_id: str, **meta) -> base_pb2.Node:
    m = struct_pb2.Struct()
    m.update(meta)
    return base_pb2.Node(id=node_id, metadata=m)


SIDECAR_1 = node(f"sidecar~127.0.0.9~client.{NS}~{NS}.svc.cluster.local", NAMESPACE=NS, NETWORK="network1",
                 CLUSTER_ID="cluster1")
GATEWAY_2 = node("router~127.0.0.50~istio-eastwestgateway-x.istio-system~istio-system.svc.cluster.local",
                 NAMESPACE="istio-system", NETWORK="network2", REQUESTED_NETWORK_VIEW="network2",
                 CLUSTER_ID="cluster2")


def fetch(m: Meshd, type_url: str, n: base_pb2.Node, names=()) -> dict:
    ads = Ads(f"127.0.0.1:{m.grpc}")
    try:
        ads.send(type_url, node=n, resource_names=list(names))
        return decode(ads.recv())
    finally:
        ads.close()


class Mesh:
    """meshd on the two-network sandbox, the pods' servers, and HAProxy as network2's gateway."""

    def __init__(self, tmp: Path):
        self.gw_port = free_port()
        # The pods' ports are chosen first (each on its own loopback address); the servers start once
        # meshd has written the mesh certificates they serve with.
        self.ports = {name: free_port() for name, *_ in PODS}
        objects = {}
        for cluster, network in (("cluster1", "network1"), ("cluster2", "network2")):
            objects[cluster] = [namespace("istio-system", **{"topology.istio.io/network": network}), namespace(NS),
                                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": NS},
                                 "spec": {"selector": {"app": "echo"},
                                          "ports": [{"name": "tls", "port": 7070, "targetPort": "tls"}]}}]
            objects[cluster] += [pod(name, v, ip, self.ports[name], sc) for name, c, v, ip, sc in PODS if c == cluster]
        objects["cluster2"].append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "istio-eastwestgateway", "namespace": "istio-system",
                         "labels": {"topology.istio.io/network": "network2", "istio": "eastwestgateway",
                                    "networking.istio.io/gatewayPort": str(self.gw_port)}},
            "spec": {"type": "LoadBalancer", "externalIPs": [GW_IP],
                     "ports": [{"name": "tls", "port": self.gw_port, "targetPort": self.gw_port}]}})
        self.meshd = Meshd(tmp / "state", ["--sandbox", str(topology(tmp / "clusters", objects))])
        self.certs = self.meshd.state / "certs"
        self.backends = [TlsEcho(name, ip, self.ports[name], self.certs) for name, _, _, ip, _ in PODS]
        self.meshd.kubectl("cluster1", "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "echo", "namespace": NS},
            "spec": {"host": "echo", "subsets": [{"name": v, "labels": {"version": v}} for v in ("v1", "v2", "v3")]}}))
        eventually("the gateway's subset chains", lambda: len(self.gateway_chains()) == 4, timeout=30)
        self.gateway = sni_gateway.Gateway(tmp, (GW_IP, self.gw_port), self.gateway_config())

    def gateway_listener(self):
        return fetch(self.meshd, LDS, GATEWAY_2).get("0.0.0.0_15443")

    def gateway_chains(self) -> list[dict]:
        listener = self.gateway_listener()
        return [c for c in sni_gateway.chains(listener) if HOST in c["cluster"]] if listener else []

    def gateway_config(self) -> str:
        """HAProxy's configuration from the gateway's LDS and the EDS of every cluster it names."""
        listener = self.gateway_listener()
        names = [c["cluster"] for c in sni_gateway.chains(listener)]
        return sni_gateway.haproxy_config((GW_IP, self.gw_port), listener, fetch(self.meshd, EDS, GATEWAY_2, names))

    def sidecar_route(self, subset: str) -> tuple[str, list[str], list[tuple[str, int]]]:
        """What a network1 sidecar is sent for the subset's cluster: SNI, ALPNs, and the endpoints."""
        name = f"outbound|7070|{subset}|{HOST}"
        cluster = fetch(self.meshd, CDS, SIDECAR_1)[name]
        tls = tls_pb2.UpstreamTlsContext()
        sockets = [m.transport_socket for m in cluster.transport_socket_matches] + [cluster.transport_socket]
        assert any(t.typed_config.Unpack(tls) for t in sockets if t.name), f"{name}: no Istio mTLS socket"
        cla = fetch(self.meshd, EDS, SIDECAR_1, [name])[name]
        return tls.sni, list(tls.common_tls_context.alpn_protocols), sni_gateway.servers(cla)

    def connect(self, addr: tuple[str, int], sni: str | None, alpns: list[str]) -> str:
        """One connection as an Envoy sidecar opens it; the answering pod's name, or what failed."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False  # Istio verifies the SPIFFE identity, not a host name
        ctx.load_verify_locations(self.certs / "root-cert.pem")
        ctx.load_cert_chain(self.certs / "cert-chain.pem", self.certs / "key.pem")
        ctx.set_alpn_protocols(alpns)
        try:
            with socket.create_connection(addr, timeout=5) as raw, ctx.wrap_socket(raw, server_hostname=sni) as tls:
                return tls.recv(100).decode() or "closed"
        except (OSError, ssl.SSLError) as e:
            return f"refused: {type(e).__name__}"

    def close(self):
        self.gateway.stop()
        for b in self.backends:
            b.close()
        assert self.meshd.stop() == 0, self.meshd.log()


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    m = Mesh(tmp_path_factory.mktemp("sni-gateway"))
    yield m
    m.close()


ISTIO_ALPNS = ["istio-peer-exchange", "istio"]


@pytest.mark.parametrize("subset, pods", [("", {"echo-v1-b", "echo-v2-b"}), ("v1", {"echo-v1-b"}),
                                          ("v2", {"echo-v2-b"})])
def test_a_network1_sidecar_reaches_each_subset_through_the_real_gateway(mesh, subset, pods):
    sni, alpns, endpoints = mesh.sidecar_route(subset)
    assert sni == f"outbound_.7070_.{subset}_.{HOST}"
    assert alpns == ISTIO_ALPNS
    gateway = (GW_IP, mesh.gw_port)
    assert gateway in endpoints, endpoints  # network2's pods are behind its gateway
    answers = {mesh.connect(gateway, sni, alpns) for _ in range(12)}
    assert answers == pods


def test_a_subset_without_mtls_capable_pods_has_no_path_through_the_gateway(mesh):
    # v3's only pod has no sidecar: it takes no Istio mTLS, so it is not behind the gateway for this
    # sidecar (EDS drops it) and the gateway's chain for it has no server.
    _, _, endpoints = mesh.sidecar_route("v3")
    assert endpoints == []
    chain = next(c for c in mesh.gateway_chains() if c["server_names"] == [f"outbound_.7070_.v3_.{HOST}"])
    assert sni_gateway.servers(fetch(mesh.meshd, EDS, GATEWAY_2, [chain["cluster"]])[chain["cluster"]]) == []


@pytest.mark.parametrize("sni, alpns", [
    (f"outbound_.7070_.v2_.{HOST}", ["h2"]),  # what a proxyless gRPC client offers
    (f"outbound_.7070_.v9_.{HOST}", ISTIO_ALPNS),  # no such subset
    (None, ISTIO_ALPNS),  # no SNI at all (a gRPC client's ClientHello)
])
def test_the_gateway_closes_what_no_chain_matches(mesh, sni, alpns):
    assert mesh.connect((GW_IP, mesh.gw_port), sni, alpns).startswith("refused"), (sni, alpns)


def test_a_new_subset_gets_its_chain_and_is_routed(mesh):
    mesh.meshd.kubectl("cluster1", "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
        "metadata": {"name": "echo", "namespace": NS},
        "spec": {"host": "echo", "subsets": [{"name": "b-only", "labels": {"version": "v2"}}]}}))
    eventually("the new subset's chain", lambda: any(
        c["server_names"] == [f"outbound_.7070_.b-only_.{HOST}"] for c in mesh.gateway_chains()), timeout=30)
    mesh.gateway.reload(mesh.gateway_config())
    sni, alpns, _ = mesh.sidecar_route("b-only")
    assert {mesh.connect((GW_IP, mesh.gw_port), sni, alpns) for _ in range(6)} == {"echo-v2-b"}
    # The old subsets' chains are gone with the rule's subsets.
    assert mesh.connect((GW_IP, mesh.gw_port), f"outbound_.7070_.v1_.{HOST}", ISTIO_ALPNS).startswith("refused")
