"""Every resource meshd generates for each DestinationRule / VirtualService variant is accepted by every
proxyless client: a long-lived grpcio, @grpc/grpc-js-xds and grpc-go client (one channel each, calling
``echo`` all along; grpc-js and grpc-go where proxyless.py finds them) on the two-cluster sandbox of
``traffic_mesh``; after each ``kubectl apply`` all have ACKed everything meshd sent them
(``/debug/syncz``: acked == sent for every type, no error) and watch the clusters the variant routes to."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

import proxyless
from meshd_proc import eventually
from traffic_mesh import NS, TrafficMesh, host, target

CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
SUBSETS = [{"name": "v1", "labels": {"version": "v1"}}, {"name": "v2", "labels": {"version": "v2"}}]
SPLIT = [{"route": [{"destination": {"host": "echo", "subset": "v1"}, "weight": 50},
                    {"destination": {"host": "echo", "subset": "v2"}, "weight": 50}]}]
OUTLIER = {"consecutive5xxErrors": 3, "interval": "1s", "baseEjectionTime": "30s", "maxEjectionPercent": 50}
V1, V2 = (f"outbound|7070|{s}|{host('echo')}" for s in ("v1", "v2"))
DEFAULT = f"outbound|7070||{host('echo')}"


def dr(policy: dict | None = None, subsets=SUBSETS, **extra) -> dict:
    spec = {"host": "echo", "subsets": subsets, **extra}
    if policy is not None:
        spec["trafficPolicy"] = policy
    return spec


def to(subset: str) -> dict:
    return {"destination": {"host": "echo", "subset": subset}}


# (name, DestinationRule spec, VirtualService http, clusters the clients must then watch)
VARIANTS = [
    ("lb-round-robin", dr({"loadBalancer": {"simple": "ROUND_ROBIN"}}), SPLIT, {V1, V2}),
    ("lb-least-request", dr({"loadBalancer": {"simple": "LEAST_REQUEST"}}), SPLIT, {V1, V2}),
    ("lb-random", dr({"loadBalancer": {"simple": "RANDOM"}}), SPLIT, {V1, V2}),
    ("ring-hash-header", dr({"loadBalancer": {"consistentHash": {"httpHeaderName": "x-user"}}}), SPLIT, {V1, V2}),
    ("ring-hash-source-ip", dr({"loadBalancer": {"consistentHash": {
        "useSourceIp": True, "ringHash": {"minimumRingSize": 1024}}}}), SPLIT, {V1, V2}),
    ("locality-distribute", dr({"loadBalancer": {"localityLbSetting": {"enabled": True, "distribute": [
        {"from": "us-east1/us-east1-a/*", "to": {"us-east1/us-east1-a/*": 80, "eu-west1/eu-west1-a/*": 20}}]}}}),
     SPLIT, {V1, V2}),
    ("locality-failover", dr({"loadBalancer": {"localityLbSetting": {"enabled": True, "failover": [
        {"from": "us-east1", "to": "eu-west1"}]}}, "outlierDetection": OUTLIER}), SPLIT, {V1, V2}),
    ("failover-priority", dr({"loadBalancer": {"localityLbSetting": {"enabled": True, "failoverPriority": [
        "topology.istio.io/network", "topology.istio.io/cluster", "topology.kubernetes.io/region"]}},
        "outlierDetection": OUTLIER}), SPLIT, {V1, V2}),
    ("outlier-detection", dr({"outlierDetection": OUTLIER}), SPLIT, {V1, V2}),
    ("connection-pool", dr({"connectionPool": {
        "tcp": {"maxConnections": 100, "connectTimeout": "2s"},
        "http": {"http2MaxRequests": 50, "maxRetries": 3, "idleTimeout": "30s", "maxRequestsPerConnection": 10}}}),
     SPLIT, {V1, V2}),
    ("port-level-and-subset-policy", dr({"portLevelSettings": [
        {"port": {"number": 7070}, "loadBalancer": {"simple": "LEAST_REQUEST"}, "outlierDetection": OUTLIER}]},
        subsets=[SUBSETS[0], dict(SUBSETS[1], trafficPolicy={"loadBalancer": {
            "consistentHash": {"httpHeaderName": "x-user"}}})]), SPLIT, {V1, V2}),
    ("tls-istio-mutual", dr({"tls": {"mode": "ISTIO_MUTUAL"}}), SPLIT, {V1, V2}),
    ("tls-disable", dr({"tls": {"mode": "DISABLE"}}), SPLIT, {V1, V2}),
    ("tls-simple", dr({"tls": {"mode": "SIMPLE", "sni": "echo.example.com"}}), SPLIT, {V1, V2}),
    ("vs-matches", dr(), [
        {"match": [{"headers": {"x-canary": {"exact": "true"}}}, {"headers": {"x-tier": {"prefix": "gold"}}},
                   {"headers": {"x-re": {"regex": "a+b"}}}], "route": [to("v2")]},
        {"match": [{"uri": {"prefix": "/echo.Echo/"}}, {"uri": {"exact": "/echo.Echo/Call"}},
                   {"uri": {"regex": "/echo\\..*"}, "ignoreUriCase": True}], "route": [to("v1")]},
        {"match": [{"sourceLabels": {"app": "client"}}, {"sourceNamespace": NS}], "route": [to("v2")]},
        {"route": [to("v1")]}], {V1, V2}),
    ("vs-weights", dr(), [{"route": [dict(to("v1"), weight=80), dict(to("v2"), weight=20)]}], {V1, V2}),
    ("vs-timeout-retries", dr(), [{"timeout": "2s", "retries": {
        "attempts": 3, "perTryTimeout": "1s", "retryOn": "unavailable,cancelled,resource-exhausted"},
        "route": [to("v1")]}], {V1}),
    ("vs-no-retries", dr(), [{"retries": {"attempts": 0}, "route": [to("v2")]}], {V2}),
    ("vs-fault", dr(), [{"fault": {"delay": {"fixedDelay": "10ms", "percentage": {"value": 50}},
                                   "abort": {"grpcStatus": "UNAVAILABLE", "percentage": {"value": 10}}},
                         "route": [to("v1")]}], {V1}),
    ("vs-fault-http-status", dr(), [{"fault": {"abort": {"httpStatus": 503, "percentage": {"value": 1}}},
                                     "route": [to("v1")]}], {V1}),
    # Routes gRPC cannot forward or does not act on: still accepted (no NACK), the forwarding route used.
    ("vs-redirect-direct-response", dr(), [
        {"match": [{"uri": {"prefix": "/old"}}], "redirect": {"uri": "/new", "authority": "a.example"}},
        {"match": [{"uri": {"prefix": "/teapot"}}], "directResponse": {"status": 418, "body": {"string": "no"}}},
        {"route": [to("v1")]}], {V1}),
    ("vs-rewrite-mirrors-cors", dr(), [
        {"match": [{"uri": {"prefix": "/v1/"}}], "rewrite": {"uriRegexRewrite": {"match": "^/v1/(.*)", "rewrite": "/\\1"}},
         "mirrors": [{"destination": {"host": "echo", "subset": "v2"}, "percentage": {"value": 50}}],
         "route": [to("v1")]},
        {"rewrite": {"uri": "/", "authority": "echo.internal"}, "mirror": {"host": "echo", "subset": "v2"},
         "corsPolicy": {"allowOrigins": [{"exact": "https://app.example"}], "allowMethods": ["POST"]},
         "route": [to("v1")]}], {V1}),
    ("vs-headers", dr(), [{"headers": {
        "request": {"set": {"x-set": "1"}, "add": {"x-add": "2"}, "remove": ["x-remove"]},
        "response": {"set": {"x-resp": "3"}}}, "route": [to("v2")]}], {V2}),
]


# The clients here: grpcio always, the other two where proxyless.py finds them.
KINDS = [k for k in proxyless.CLIENTS if not proxyless.missing(k)]


class Clients:
    """The long-lived clients, each on its own node id."""

    NODES = {kind: f"acks-{kind}" for kind in KINDS}

    def __init__(self, mesh: TrafficMesh, tmp):
        self.procs = []
        for kind, node in self.NODES.items():
            self.procs.append(subprocess.Popen(
                proxyless.command(kind, target("echo"), "--stream", "--forever", "--timeout", "2",
                                  "--interval", "0.05"),
                env=proxyless.env(kind, mesh.env(node_name=node, providers=True)),
                stdout=subprocess.DEVNULL, stderr=open(tmp / f"{kind}.log", "w")))

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()


def proxy_ids() -> set[str]:
    return {f"sidecar~127.0.0.1~{n}.{NS}~{NS}.svc.cluster.local" for n in Clients.NODES.values()}


def settled(mesh: TrafficMesh, version: int, clusters: set[str]):
    """Every client has processed snapshot ``version``, ACKed every response, NACKed none, and watch
    ``clusters``: the last state of each, or a falsy value while not there yet."""
    conns = {c["proxy"]["id"]: c for c in mesh.meshd.json("/debug/connections") if c.get("proxy")}
    sync = {s["proxy"]: s for s in mesh.meshd.json("/debug/syncz")}
    watches = {c["connectionId"].rsplit("-", 1)[0]: c["watches"] for c in mesh.meshd.json("/debug/adsz")["clients"]}
    for pid in proxy_ids():
        conn, s = conns.get(pid), sync.get(pid)
        if conn is None or s is None or (conn.get("pushVersion") or 0) < version:
            return False
        for ty, r in s["resources"].items():
            assert not r["lastError"], f"{pid} NACKed {ty}: {r['lastError']}"
            if r["acked"] != r["sent"]:
                return False
        watched = set(watches.get(pid, {}).get(CDS) or [])
        if not clusters <= watched:
            return False
    return True


def config_status(mesh: TrafficMesh, kind: str, name: str) -> dict | None:
    """The config cluster's copy of ``kind`` ``traffic/name`` in ``/debug/configz``."""
    objects = mesh.meshd.json("/debug/configz")["istioConfig"]["objects"]
    return next((o for o in objects if (o["kind"], o["namespace"], o["name"]) == (kind, NS, name)), None)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    m = TrafficMesh(tmp_path_factory.mktemp("acks"))
    yield m
    m.close()


@pytest.mark.skipif(len(KINDS) < 2, reason="neither @grpc/grpc-js-xds nor grpc-go here: "
                    + "; ".join(proxyless.missing(k) or "" for k in ("grpc-js", "grpc-go")))
def test_every_client_acks_every_destination_rule_and_virtual_service_variant(mesh, tmp_path):
    print("clients:", ", ".join(KINDS))
    clients = Clients(mesh, tmp_path)
    try:
        eventually("every client connected and settled", lambda: settled(mesh, 1, {DEFAULT}), timeout=30)
        for name, rule, http, clusters in VARIANTS:
            before = mesh.meshd.json("/debug/push_status")["version"]
            mesh.apply(
                {"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
                 "metadata": {"name": "echo", "namespace": NS}, "spec": rule},
                {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
                 "metadata": {"name": "echo", "namespace": NS}, "spec": {"hosts": ["echo"], "http": http}})
            written = json.loads(mesh.meshd.kubectl("cluster1", "get", "-n", NS, "destinationrule,virtualservice",
                                                    "echo", "-o", "json"))["items"]
            for obj in written:
                kind, revision = obj["kind"], obj["metadata"]["resourceVersion"]
                status = eventually(f"{name}: the {kind} read", lambda: (
                    s := config_status(mesh, kind, "echo")) and s["revision"] == revision and s)
                # Admitted as written: a typo or an unimplemented field would test nothing.
                assert (status["status"], status.get("warnings") or []) == ("valid", []), (name, status)
            version = eventually(f"{name}: a new snapshot", lambda: (
                v := mesh.meshd.json("/debug/push_status")["version"]) > before and v)
            # Settled twice, a beat apart: a response in flight at the first look is ACKed by the second.
            for _ in range(2):
                eventually(f"{name}: every client ACKs", lambda: settled(mesh, version, clusters), timeout=15)
                time.sleep(0.2)
        rejects = [line for line in mesh.meshd.get("/metrics")[1].splitlines()
                   if line.startswith("pilot_total_xds_rejects") and not line.endswith(" 0")]
        assert not rejects, rejects
    finally:
        clients.close()
        mesh.delete("virtualservice", "echo")
        mesh.delete("destinationrule", "echo")

