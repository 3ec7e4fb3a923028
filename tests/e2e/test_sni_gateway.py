"""Across networks through a real SNI-routing east-west gateway (issue 29): HAProxy (sni_gateway.py),
configured only from the listener, clusters and endpoints meshd sends the network2 gateway node.

The sandbox: cluster1 on network1 (locality r1/z1), cluster2 on network2 (r2/z2), pods on loopback
addresses that answer a TLS connection (mTLS with the sandbox's mesh certificates) with their name. Service
``echo`` (HTTP port 7070): ``echo-v1-a`` in cluster1, ``echo-v1-b`` and ``echo-v2-b`` in cluster2, plus
``plain-b`` (no sidecar) in cluster2; service ``fo``: ``fo-a`` in cluster1, ``fo-b`` in cluster2.
cluster2's east-west gateway Service points at HAProxy on 127.0.0.50.

The client does what an Envoy sidecar on network1 in r1/z1 does with the routes, clusters and endpoints
meshd sends it (envoy_client.py): for ``outbound|7070|<subset>|echo…`` it takes an endpoint from EDS (the
gateway for network2's pods) and opens TLS to it with the cluster's SNI and ALPNs, its mesh certificate,
verifying the server against the mesh root. The answer names the pod that the real proxy routed it to;
HAProxy's log says which SNI it routed."""

from __future__ import annotations

import json
import random
import socket
import ssl
import threading
from pathlib import Path

import pytest
from envoy.config.core.v3 import base_pb2
from google.protobuf import struct_pb2

import envoy_client
import sni_gateway
from meshd_proc import Meshd, eventually, free_port, namespace, topology
import xdsharness
from xdsharness import CDS, EDS, LDS, RDS

if reason := sni_gateway.missing():
    pytest.skip(reason, allow_module_level=True)

NS = "sni"
HOST = f"echo.{NS}.svc.cluster.local"
GW_IP = "127.0.0.50"
FO_HOST = f"fo.{NS}.svc.cluster.local"
LOCALITY = {"cluster1": ("r1", "z1"), "cluster2": ("r2", "z2")}
PODS = [  # name, cluster, app, version, ip, sidecar
    ("echo-v1-a", "cluster1", "echo", "v1", "127.0.0.41", True),
    ("echo-v1-b", "cluster2", "echo", "v1", "127.0.0.42", True),
    ("echo-v2-b", "cluster2", "echo", "v2", "127.0.0.43", True),
    ("plain-b", "cluster2", "echo", "v3", "127.0.0.44", False),
    ("fo-a", "cluster1", "fo", "v1", "127.0.0.45", True),
    ("fo-b", "cluster2", "fo", "v1", "127.0.0.46", True),
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


def pod(name: str, cluster: str, app: str, version: str, ip: str, port: int, sidecar: bool) -> dict:
    labels = {"app": app, "version": version, "topology.istio.io/locality": ".".join(LOCALITY[cluster])}
    if sidecar:
        labels["security.istio.io/tlsMode"] = "istio"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "echo", "ports": [{"name": "tls", "containerPort": port}]}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def service(app: str) -> dict:
    # An HTTP port, so a sidecar gets its routes (and a VirtualService's weights) in RDS.
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": app, "namespace": NS},
            "spec": {"selector": {"app": app},
                     "ports": [{"name": "http", "port": 7070, "targetPort": "tls", "appProtocol": "http"}]}}


def node(node_id: str, **meta) -> base_pb2.Node:
    m = struct_pb2.Struct()
    m.update(meta)
    return base_pb2.Node(id=node_id, metadata=m)


SIDECAR_1 = node(f"sidecar~127.0.0.9~client.{NS}~{NS}.svc.cluster.local", NAMESPACE=NS, NETWORK="network1",
                 CLUSTER_ID="cluster1")
SIDECAR_1.locality.region, SIDECAR_1.locality.zone = LOCALITY["cluster1"]
GATEWAY_2 = node("router~127.0.0.50~istio-eastwestgateway-x.istio-system~istio-system.svc.cluster.local",
                 NAMESPACE="istio-system", NETWORK="network2", REQUESTED_NETWORK_VIEW="network2",
                 CLUSTER_ID="cluster2")


def fetch(m: Meshd, type_url: str, n: base_pb2.Node, names=()) -> dict:
    return xdsharness.fetch(f"127.0.0.1:{m.grpc}", type_url, n, names)


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
                                service("echo"), service("fo")]
            objects[cluster] += [self.pod(name) for name, c, *_ in PODS if c == cluster]
        objects["cluster2"].append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "istio-eastwestgateway", "namespace": "istio-system",
                         "labels": {"topology.istio.io/network": "network2", "istio": "eastwestgateway",
                                    "networking.istio.io/gatewayPort": str(self.gw_port)}},
            "spec": {"type": "LoadBalancer", "externalIPs": [GW_IP],
                     "ports": [{"name": "tls", "port": self.gw_port, "targetPort": self.gw_port}]}})
        self.meshd = Meshd(tmp / "state", ["--sandbox", str(topology(tmp / "clusters", objects))])
        self.certs = self.meshd.state / "certs"
        self.backends = [TlsEcho(name, ip, self.ports[name], self.certs) for name, _, _, _, ip, _ in PODS]
        self.meshd.kubectl("cluster1", "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "echo", "namespace": NS},
            "spec": {"host": "echo", "subsets": [{"name": v, "labels": {"version": v}} for v in ("v1", "v2", "v3")]}}))
        eventually("the gateway's subset chains", lambda: len(self.gateway_chains()) == 4, timeout=30)
        self.gateway = sni_gateway.Gateway(tmp, (GW_IP, self.gw_port), self.gateway_config())

    def pod(self, name: str) -> dict:
        _, cluster, app, version, ip, sidecar = next(p for p in PODS if p[0] == name)
        return pod(name, cluster, app, version, ip, self.ports[name], sidecar)

    def cluster_of(self, name: str) -> str:
        return next(p[1] for p in PODS if p[0] == name)

    def set_ready(self, name: str, ready: bool) -> None:
        """Flips a pod's Ready condition with kubectl, as a failing readiness probe would."""
        self.meshd.kubectl(self.cluster_of(name), "patch", "pod", "-n", NS, name, "--subresource=status",
                           "--type=merge", "-p", json.dumps({"status": {"conditions": [
                               {"type": "Ready", "status": "True" if ready else "False"}]}}))

    def apply(self, *objects: dict, cluster: str = "cluster1") -> None:
        self.meshd.kubectl(cluster, "apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))

    def gateway_listener(self):
        return fetch(self.meshd, LDS, GATEWAY_2).get(sni_gateway.EAST_WEST_LISTENER)

    def gateway_chains(self) -> list[dict]:
        listener = self.gateway_listener()
        return [c for c in sni_gateway.chains(listener) if HOST in c["cluster"]] if listener else []

    def gateway_config(self) -> str:
        return sni_gateway.config_from(f"127.0.0.1:{self.meshd.grpc}", GATEWAY_2, (GW_IP, self.gw_port))

    def sidecar_route(self, subset: str, host: str = HOST) -> tuple[str, list[str], list[tuple[str, int]]]:
        """What a network1 sidecar is sent for the subset's cluster: SNI, ALPNs, and the endpoints."""
        name = f"outbound|7070|{subset}|{host}"
        sni, alpns = envoy_client.upstream_tls(fetch(self.meshd, CDS, SIDECAR_1)[name])
        return sni, alpns, sni_gateway.servers(fetch(self.meshd, EDS, SIDECAR_1, [name])[name])

    def sidecar_assignment(self, cluster: str):
        return fetch(self.meshd, EDS, SIDECAR_1, [cluster])[cluster]

    def sidecar_weights(self, host: str) -> dict[str, int]:
        """The weighted clusters of the network1 sidecar's route to ``host``: LDS's listener for port
        7070, then the RDS its HttpConnectionManager names."""
        listener = next(lis for lis in fetch(self.meshd, LDS, SIDECAR_1).values()
                        if lis.address.socket_address.port_value == 7070)
        name = envoy_client.route_config_name(listener)
        return envoy_client.route_weights(fetch(self.meshd, RDS, SIDECAR_1, [name])[name], host)

    def connect(self, addr: tuple[str, int], sni: str | None, alpns: list[str]) -> str:
        """One connection as an Envoy sidecar opens it; the answering pod's name, or what failed."""
        return envoy_client.connect(addr, sni, alpns, self.certs)

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
    (f"outbound_.7071_._.{HOST}", ISTIO_ALPNS),  # not a port of the service
    (f"outbound_.7070_._.nope.{NS}.svc.cluster.local", ISTIO_ALPNS),  # no such service
])
def test_the_gateway_closes_what_no_chain_matches(mesh, sni, alpns):
    since = mesh.gateway.log_size()
    assert mesh.connect((GW_IP, mesh.gw_port), sni, alpns).startswith("refused"), (sni, alpns)
    # HAProxy read the ClientHello and found no chain: no backend, no server.
    logged = eventually("HAProxy logged the connection", lambda: mesh.gateway.connections(since))
    assert [(c["backend"], c["server"], c["sni"]) for c in logged] == [("eastwest", "<NOSRV>", sni or "-")]


V1, V2 = (f"outbound|7070|{v}|{HOST}" for v in ("v1", "v2"))


def test_a_weighted_split_across_networks_reaches_v2_only_through_the_gateway(mesh):
    """VirtualService 80/20 v1/v2, v2 only on network2: the sidecar's RDS carries the weights, v2's EDS
    only the gateway; connections chosen as Envoy chooses reach each side in about that share, and
    every v2 connection crossed HAProxy with v2's SNI."""
    mesh.apply({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
                "metadata": {"name": "echo", "namespace": NS},
                "spec": {"hosts": ["echo"], "http": [{"route": [
                    {"destination": {"host": "echo", "subset": "v1"}, "weight": 80},
                    {"destination": {"host": "echo", "subset": "v2"}, "weight": 20}]}]}})
    try:
        eventually("the 80/20 route", lambda: mesh.sidecar_weights(HOST) == {V1: 80, V2: 20})
        weights = mesh.sidecar_weights(HOST)
        gateway = (GW_IP, mesh.gw_port)
        routes = {c: (*envoy_client.upstream_tls(fetch(mesh.meshd, CDS, SIDECAR_1)[c]),
                      envoy_client.active_priority(mesh.sidecar_assignment(c))) for c in weights}
        assert [e for e, _ in routes[V2][2]] == [gateway]  # v2 lives only behind network2's gateway
        since = mesh.gateway.log_size()
        rng, answers, n = random.Random(29), {}, 200
        for _ in range(n):
            sni, alpns, endpoints = routes[envoy_client.pick(rng, weights)]
            answer = mesh.connect(envoy_client.pick(rng, endpoints), sni, alpns)
            answers[answer] = answers.get(answer, 0) + 1
        assert set(answers) == {"echo-v1-a", "echo-v1-b", "echo-v2-b"}, answers
        v2_share = answers["echo-v2-b"] / n
        assert abs(v2_share - weights[V2] / sum(weights.values())) < 0.1, answers
        # At the proxy: each v2 connection was routed by v2's SNI; v1's network2 pod by v1's.
        logged = eventually("HAProxy logged every crossing", lambda: (
            c := mesh.gateway.connections(since)) and len(c) == answers["echo-v2-b"] + answers["echo-v1-b"] and c)
        by_sni = {}
        for c in logged:
            assert c["server"] != "<NOSRV>", c
            by_sni[c["sni"]] = by_sni.get(c["sni"], 0) + 1
        assert by_sni == {routes[V2][0]: answers["echo-v2-b"], routes[V1][0]: answers["echo-v1-b"]}, by_sni
    finally:
        mesh.meshd.kubectl("cluster1", "delete", "-n", NS, "virtualservice", "echo")


FO = f"outbound|7070||{FO_HOST}"


def priorities(cla) -> dict[str, int]:
    """``region/zone`` → priority of an assignment's localities."""
    return {f"{loc.locality.region}/{loc.locality.zone}": loc.priority for loc in cla.endpoints}


def fo_answers(mesh: Mesh, n: int = 10) -> set[str]:
    """``n`` connections to ``fo`` as the network1 sidecar opens them now."""
    sni, alpns = envoy_client.upstream_tls(fetch(mesh.meshd, CDS, SIDECAR_1)[FO])
    endpoints = envoy_client.active_priority(mesh.sidecar_assignment(FO))
    rng = random.Random(n)
    return {mesh.connect(envoy_client.pick(rng, endpoints), sni, alpns) for _ in range(n)}


def test_locality_failover_to_the_other_network_through_the_gateway_and_back(mesh):
    """outlierDetection + failover r1 → r2: network2's gateway is the next priority; when ``fo-a``
    turns unready (then is deleted) the traffic crosses HAProxy to ``fo-b``, and comes back home."""
    gateway = (GW_IP, mesh.gw_port)
    mesh.apply({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
                "metadata": {"name": "fo", "namespace": NS},
                "spec": {"host": "fo", "trafficPolicy": {
                    "loadBalancer": {"simple": "ROUND_ROBIN", "localityLbSetting": {
                        "enabled": True, "failover": [{"from": "r1", "to": "r2"}]}},
                    "outlierDetection": {"consecutive5xxErrors": 3, "interval": "1s", "baseEjectionTime": "30s"}}}})
    try:
        eventually("r2's gateway as the failover priority",
                   lambda: priorities(mesh.sidecar_assignment(FO)) == {"r1/z1": 0, "r2/z2": 1})
        cla = mesh.sidecar_assignment(FO)
        assert sni_gateway.servers(cla) == [("127.0.0.45", mesh.ports["fo-a"]), gateway], cla
        assert fo_answers(mesh) == {"fo-a"}

        since = mesh.gateway.log_size()
        mesh.set_ready("fo-a", False)
        eventually("fo-a unhealthy", lambda: [e for e, _ in envoy_client.active_priority(
            mesh.sidecar_assignment(FO))] == [gateway])
        assert fo_answers(mesh) == {"fo-b"}
        logged = eventually("HAProxy logged the crossings", lambda: len(c := mesh.gateway.connections(since)) == 10 and c)
        assert {(c["sni"], c["server"] != "<NOSRV>") for c in logged} == {(f"outbound_.7070_._.{FO_HOST}", True)}

        mesh.set_ready("fo-a", True)
        eventually("fo-a healthy again", lambda: [e for e, _ in envoy_client.active_priority(
            mesh.sidecar_assignment(FO))] == [("127.0.0.45", mesh.ports["fo-a"])])
        assert fo_answers(mesh) == {"fo-a"}

        # Gone, not just unready: network2's gateway is the only priority left.
        mesh.meshd.kubectl("cluster1", "delete", "-n", NS, "pod", "fo-a")
        eventually("only the gateway", lambda: priorities(mesh.sidecar_assignment(FO)) == {"r2/z2": 0})
        assert fo_answers(mesh) == {"fo-b"}
        mesh.apply(mesh.pod("fo-a"))
        mesh.meshd.kubectl("cluster1", "patch", "pod", "-n", NS, "fo-a", "--subresource=status", "--type=merge",
                           "-p", json.dumps({"status": mesh.pod("fo-a")["status"]}))  # a create drops status
        eventually("fo-a back at priority 0",
                   lambda: priorities(mesh.sidecar_assignment(FO)) == {"r1/z1": 0, "r2/z2": 1})
        assert fo_answers(mesh) == {"fo-a"}
    finally:
        mesh.meshd.kubectl("cluster1", "delete", "-n", NS, "destinationrule", "fo")


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
