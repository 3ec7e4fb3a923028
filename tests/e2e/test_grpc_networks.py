"""Proxyless gRPC on two networks (issue 29): real xDS gRPC servers (grpc_xds_server.py) taking mesh mTLS
from meshd, real proxyless clients (proxyless.py) with xDS credentials, and network2's east-west gateway
a real HAProxy configured from meshd (sni_gateway.py).

Three clusters: cluster1 (primary) and cluster3 on network1, cluster2 on network2. Namespace ``xnet``
is STRICT and every DestinationRule says ISTIO_MUTUAL, so each RPC is mesh mTLS end to end. Every pod
is a grpc_xds_server.py on its own loopback address, answering with its name:

- ``echo``: ``echo-v1-1`` in cluster1, ``echo-v2-3`` in cluster3, ``echo-v2-2`` in cluster2;
- ``fo``: ``fo-1`` in cluster1 (r1/z1), ``fo-3`` in cluster3 (r3/z3), ``fo-2`` in cluster2 (r2/z2).

The client is on network1 in r1/z1 (cluster1). What meshd promises (docs/multi-network.md, "Proxyless
gRPC stays on its network"): a gRPC client is never sent another network's gateway, so it reaches
network1's pods of both clusters and never network2's, even where an Envoy sidecar beside it would
cross (its EDS, fetched here for contrast, has the gateway)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from envoy.config.core.v3 import base_pb2
from google.protobuf import struct_pb2

import proxyless
import sni_gateway
import xdsharness
from meshd_proc import Meshd, eventually, free_port, namespace, topology
from traffic_mesh import Stream, last_run
from xdsharness import EDS

if reason := sni_gateway.missing():
    pytest.skip(reason, allow_module_level=True)

HERE = Path(__file__).resolve().parent
NS = "xnet"
GW_IP = "127.0.0.80"
NETWORK = {"cluster1": "network1", "cluster3": "network1", "cluster2": "network2"}
LOCALITY = {"cluster1": ("r1", "z1"), "cluster3": ("r3", "z3"), "cluster2": ("r2", "z2")}
PODS = [  # name, cluster, app, version, ip
    ("echo-v1-1", "cluster1", "echo", "v1", "127.0.0.71"),
    ("echo-v2-3", "cluster3", "echo", "v2", "127.0.0.72"),
    ("echo-v2-2", "cluster2", "echo", "v2", "127.0.0.73"),
    ("fo-1", "cluster1", "fo", "v1", "127.0.0.74"),
    ("fo-3", "cluster3", "fo", "v1", "127.0.0.75"),
    ("fo-2", "cluster2", "fo", "v1", "127.0.0.76"),
]
NETWORK1_PODS = {name for name, cluster, *_ in PODS if NETWORK[cluster] == "network1"}


def host(app: str) -> str:
    return f"{app}.{NS}.svc.cluster.local"


def labels(app: str, version: str, cluster: str) -> dict:
    return {"app": app, "version": version, "security.istio.io/tlsMode": "istio",
            "topology.istio.io/locality": ".".join(LOCALITY[cluster])}


def ready(ok: bool) -> dict:
    return {"type": "Ready", "status": "True" if ok else "False"}


def node(node_id: str, cluster: str, **meta) -> base_pb2.Node:
    m = struct_pb2.Struct()
    m.update({"NAMESPACE": NS, "CLUSTER_ID": cluster, "NETWORK": NETWORK[cluster], **meta})
    region, zone = LOCALITY[cluster]
    return base_pb2.Node(id=node_id, metadata=m, locality=base_pb2.Locality(region=region, zone=zone))


CLIENT_ID = f"sidecar~127.0.0.9~client.{NS}~{NS}.svc.cluster.local"
GRPC_CLIENT = node(CLIENT_ID, "cluster1", GENERATOR="grpc")
SIDECAR = node(CLIENT_ID, "cluster1")  # an Envoy sidecar in the client's place, for contrast
GATEWAY_2 = node("router~127.0.0.80~istio-eastwestgateway-x.istio-system~istio-system.svc.cluster.local",
                 "cluster2", REQUESTED_NETWORK_VIEW="network2")
GATEWAY_2.metadata.update({"NAMESPACE": "istio-system"})


class Mesh:
    """meshd on the three-cluster sandbox, a grpc_xds_server.py per pod, HAProxy as network2's gateway."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.ports = {name: free_port() for name, *_ in PODS}
        self.gw_port = free_port()
        objects = {}
        for cluster in ("cluster1", "cluster2", "cluster3"):
            objects[cluster] = [namespace("istio-system", **{"topology.istio.io/network": NETWORK[cluster]}),
                                namespace(NS)]
            objects[cluster] += [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": app, "namespace": NS},
                                  "spec": {"selector": {"app": app}, "ports": [
                                      {"name": "grpc", "port": 7070, "targetPort": "grpc", "appProtocol": "grpc"}]}}
                                 for app in ("echo", "fo")]
            objects[cluster] += [self.pod(name) for name, c, *_ in PODS if c == cluster]
        objects["cluster2"].append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "istio-eastwestgateway", "namespace": "istio-system",
                         "labels": {"topology.istio.io/network": "network2", "istio": "eastwestgateway",
                                    "networking.istio.io/gatewayPort": str(self.gw_port)}},
            "spec": {"type": "LoadBalancer", "externalIPs": [GW_IP],
                     "ports": [{"name": "tls", "port": self.gw_port, "targetPort": self.gw_port}]}})
        self.meshd = Meshd(tmp / "state", ["--sandbox", str(topology(tmp / "clusters", objects))])
        self.servers: list[subprocess.Popen] = []
        self.gateway: sni_gateway.Gateway | None = None
        self.apply({"apiVersion": "security.istio.io/v1", "kind": "PeerAuthentication",
                    "metadata": {"name": "default", "namespace": NS}, "spec": {"mtls": {"mode": "STRICT"}}})
        for name, cluster, app, version, ip in PODS:
            boot = proxyless.bootstrap(self.meshd.grpc, self.meshd.state / "certs",
                                       f"sidecar~{ip}~{name}.{NS}~{NS}.svc.cluster.local", NS, cluster,
                                       labels(app, version, cluster))
            self.servers.append(subprocess.Popen(
                [sys.executable, str(HERE / "grpc_xds_server.py"), "--address", f"{ip}:{self.ports[name]}",
                 "--name", name], env=proxyless.env("grpcio", dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=boot)),
                stdout=subprocess.PIPE, stderr=open(tmp / f"{name}.log", "w"), text=True))
        for (name, *_), server in zip(PODS, self.servers):
            assert server.stdout.readline().strip() == "serving", (self.tmp / f"{name}.log").read_text()
        eventually("network2's gateway chains", lambda: self.gateway_has(host("fo")), timeout=30)
        self.gateway = sni_gateway.Gateway(tmp, (GW_IP, self.gw_port), sni_gateway.config_from(
            self.xds, GATEWAY_2, (GW_IP, self.gw_port)))

    @property
    def xds(self) -> str:
        return f"127.0.0.1:{self.meshd.grpc}"

    def pod(self, name: str) -> dict:
        _, cluster, app, version, ip = next(p for p in PODS if p[0] == name)
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": NS, "labels": labels(app, version, cluster)},
                "spec": {"containers": [{"name": "app", "image": "echo",
                                         "ports": [{"name": "grpc", "containerPort": self.ports[name]}]}]},
                "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [ready(True)]}}

    def gateway_has(self, h: str) -> bool:
        listener = xdsharness.fetch(self.xds, xdsharness.LDS, GATEWAY_2).get(sni_gateway.EAST_WEST_LISTENER)
        return bool(listener) and any(h in c["cluster"] for c in sni_gateway.chains(listener))

    def apply(self, *objects: dict) -> None:
        self.meshd.kubectl("cluster1", "apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))

    def set_ready(self, name: str, ok: bool) -> None:
        """Flips a pod's Ready condition with kubectl, as a failing readiness probe would."""
        cluster = next(p[1] for p in PODS if p[0] == name)
        self.meshd.kubectl(cluster, "patch", "pod", "-n", NS, name, "--subresource=status", "--type=merge",
                           "-p", json.dumps({"status": {"conditions": [ready(ok)]}}))

    def assignment(self, n: base_pb2.Node, cluster: str):
        return xdsharness.fetch(self.xds, EDS, n, [cluster])[cluster]

    def env(self, kind: str) -> dict:
        boot = proxyless.bootstrap(self.meshd.grpc, self.meshd.state / "certs", CLIENT_ID, NS, "cluster1",
                                   {"app": "client"}, LOCALITY["cluster1"], NETWORK="network1")
        return proxyless.env(kind, dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=boot))

    def report(self, kind: str, app: str, count: int, creds: tuple[str, ...] = ("--xds-creds",)) -> tuple[dict, dict]:
        out = subprocess.run(proxyless.command(kind, f"xds:///{host(app)}:7070", *creds, "--report",
                                               "--count", str(count), "--timeout", "5"),
                             env=self.env(kind), capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
        return got["backends"], got["statuses"]

    def stream(self, kind: str, app: str) -> Stream:
        return Stream(subprocess.Popen(
            proxyless.command(kind, f"xds:///{host(app)}:7070", "--xds-creds", "--stream", "--forever",
                              "--timeout", "5", "--interval", "0.01"),
            env=self.env(kind), stdout=subprocess.PIPE, text=True))

    def close(self) -> None:
        if self.gateway:
            self.gateway.stop()
        for s in self.servers:
            s.terminate()
        for s in self.servers:
            s.wait(timeout=20)
        assert "panicked" not in self.meshd.log()
        assert self.meshd.stop() == 0, self.meshd.log()[-4000:]


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    m = Mesh(tmp_path_factory.mktemp("grpc-networks"))
    yield m
    m.close()


def addresses(cla) -> set[str]:
    return {e.endpoint.address.socket_address.address for loc in cla.endpoints for e in loc.lb_endpoints}


def ip(name: str) -> str:
    return next(p[4] for p in PODS if p[0] == name)


def priorities(cla) -> dict[str, int]:
    """``region/zone`` → priority of an assignment's localities."""
    return {f"{loc.locality.region}/{loc.locality.zone}": loc.priority for loc in cla.endpoints}


V1, V2 = (f"outbound|7070|{v}|{host('echo')}" for v in ("v1", "v2"))
MUTUAL = {"tls": {"mode": "ISTIO_MUTUAL"}}


@pytest.mark.parametrize("kind", proxyless.params())
def test_a_weighted_split_to_subsets_across_two_clusters_of_one_network(mesh, kind):
    """VirtualService 80/20 v1/v2 with mesh mTLS: v1 in cluster1, v2 in cluster3 (network1) and in
    cluster2 (network2). The gRPC client's v2 is cluster3's pod only (the sidecar's also has network2's
    gateway); the RPCs all succeed, split about 80/20, and none reaches network2."""
    mesh.apply({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
                "metadata": {"name": "echo", "namespace": NS},
                "spec": {"host": "echo", "trafficPolicy": MUTUAL,
                         "subsets": [{"name": v, "labels": {"version": v}} for v in ("v1", "v2")]}},
               {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
                "metadata": {"name": "echo", "namespace": NS},
                "spec": {"hosts": ["echo"], "http": [{"route": [
                    {"destination": {"host": "echo", "subset": "v1"}, "weight": 80},
                    {"destination": {"host": "echo", "subset": "v2"}, "weight": 20}]}]}})
    eventually("v2 behind network2's gateway for the sidecar",
               lambda: addresses(mesh.assignment(SIDECAR, V2)) == {ip("echo-v2-3"), GW_IP})
    assert addresses(mesh.assignment(GRPC_CLIENT, V2)) == {ip("echo-v2-3")}
    assert addresses(mesh.assignment(GRPC_CLIENT, V1)) == {ip("echo-v1-1")}

    n, since = 300, mesh.gateway.log_size()
    backends, statuses = mesh.report(kind, "echo", n)
    assert statuses == {"OK": n}, statuses
    assert set(backends) == {"echo-v1-1", "echo-v2-3"}, backends
    assert abs(backends["echo-v2-3"] / n - 0.2) < 0.1, backends
    assert mesh.gateway.connections(since) == []  # nothing even tried network2's gateway
    # The servers are STRICT: the same client without xDS credentials (plaintext) is refused.
    backends, statuses = mesh.report(kind, "echo", 5, creds=())
    assert (backends, statuses) == ({}, {"UNAVAILABLE": 5}), (backends, statuses)


FO = f"outbound|7070||{host('fo')}"


@pytest.mark.parametrize("kind", proxyless.params())
def test_failover_stays_on_the_clients_network(mesh, kind):
    """outlierDetection + failover r1 → r2 (network2): the sidecar's next priority is network2's gateway,
    the gRPC client's is cluster3's r3 (network1). When fo-1 turns unready the RPCs move to fo-3; when
    fo-3 is unready too they fail (there is no path to fo-2 for gRPC), and they come back to fo-1."""
    mesh.apply({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
                "metadata": {"name": "fo", "namespace": NS},
                "spec": {"host": "fo", "trafficPolicy": {
                    **MUTUAL,
                    "loadBalancer": {"simple": "ROUND_ROBIN", "localityLbSetting": {
                        "enabled": True, "failover": [{"from": "r1", "to": "r2"}]}},
                    "outlierDetection": {"consecutive5xxErrors": 3, "interval": "1s", "baseEjectionTime": "30s"}}}})
    eventually("the sidecar's failover to network2's gateway",
               lambda: priorities(mesh.assignment(SIDECAR, FO)) == {"r1/z1": 0, "r2/z2": 1, "r3/z3": 2})
    assert priorities(mesh.assignment(GRPC_CLIENT, FO)) == {"r1/z1": 0, "r3/z3": 1}
    assert GW_IP not in addresses(mesh.assignment(GRPC_CLIENT, FO))

    stream = mesh.stream(kind, "fo")
    try:
        stream.until("traffic on fo-1", lambda rs: last_run(rs, 20, lambda r: r["backend"] == "fo-1"))
        mesh.set_ready("fo-1", False)
        moved = stream.until("traffic on fo-3", lambda rs: last_run(rs, 50, lambda r: r["backend"] == "fo-3"))
        mesh.set_ready("fo-3", False)
        stranded = stream.until("RPCs failing", lambda rs: last_run(rs, 20, lambda r: r["status"] != "OK"))
        mesh.set_ready("fo-1", True)
        back = stream.until("traffic back on fo-1", lambda rs: last_run(rs, 50, lambda r: r["backend"] == "fo-1"))
    finally:
        stream.close()
        mesh.set_ready("fo-1", True)
        mesh.set_ready("fo-3", True)
    records = moved + stranded + back
    assert {r["backend"] for r in records} <= NETWORK1_PODS | {None}, records[-20:]
    assert not [r for r in moved if r["status"] != "OK"], moved[-20:]
    assert {r["status"] for r in stranded[-20:]} == {"UNAVAILABLE"}, stranded[-20:]
