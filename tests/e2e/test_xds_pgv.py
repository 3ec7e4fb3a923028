"""Envoy's proto validation rules (the PGV ``validate`` annotations in the xds-protos descriptors,
evaluated by ``pgv.py``) hold for every resource meshd serves for a DestinationRule/VirtualService-rich
config: sidecars on both networks, the east-west gateway and a proxyless gRPC client on the embedded
sandbox, and a sidecar of ``xds-fixture`` serving the same config on its JSON mesh."""

from __future__ import annotations

import json

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm_pb2
from google.protobuf import duration_pb2, struct_pb2

import pgv
from meshd_proc import Meshd, eventually
from xdsharness import CDS, EDS, LDS, RDS, Ads, Fixture, decode

HELLO = "helloworld.sample.svc.cluster.local"
SUBSET_CLUSTERS = {f"outbound|5000|v1|{HELLO}", f"outbound|5000|v2|{HELLO}"}


def obj(kind: str, name: str, spec: dict) -> dict:
    api = "security.istio.io/v1" if kind == "PeerAuthentication" else "networking.istio.io/v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "sample"}, "spec": spec}


OUTLIER = {"consecutive5xxErrors": 3, "consecutiveGatewayErrors": 2, "interval": "2s", "baseEjectionTime": "30s",
           "maxEjectionPercent": 50, "minHealthPercent": 10}
CONFIG = [
    obj("DestinationRule", "helloworld", {
        "host": "helloworld",
        "trafficPolicy": {
            "loadBalancer": {"simple": "LEAST_REQUEST", "localityLbSetting": {
                "enabled": True, "failover": [{"from": "us-east1", "to": "eu-west1"}]}},
            "outlierDetection": OUTLIER,
            "connectionPool": {
                "tcp": {"maxConnections": 100, "connectTimeout": "2s"},
                "http": {"http1MaxPendingRequests": 10, "http2MaxRequests": 100, "maxRequestsPerConnection": 5,
                         "maxRetries": 3, "idleTimeout": "30s"}},
            "tls": {"mode": "ISTIO_MUTUAL"},
            "portLevelSettings": [{"port": {"number": 5000},
                                   "loadBalancer": {"consistentHash": {"httpHeaderName": "x-user"}}}]},
        "subsets": [
            {"name": "v1", "labels": {"version": "v1"}},
            {"name": "v2", "labels": {"version": "v2"}, "trafficPolicy": {"loadBalancer": {"consistentHash": {
                "httpCookie": {"name": "session", "ttl": "10s"}, "ringHash": {"minimumRingSize": 1024}}}}}]}),
    obj("DestinationRule", "reviews", {
        "host": "reviews.sample.svc.cluster.local",
        "trafficPolicy": {"loadBalancer": {"simple": "RANDOM", "localityLbSetting": {"enabled": True, "distribute": [
            {"from": "us-east1/*", "to": {"us-east1/*": 70, "eu-west1/*": 30}}]}}, "tls": {"mode": "DISABLE"}},
        "subsets": [{"name": v, "labels": {"version": v}} for v in ("v1", "v2", "v3")]}),
    obj("DestinationRule", "ratings", {
        "host": "ratings",
        "trafficPolicy": {"loadBalancer": {"localityLbSetting": {
            "enabled": True, "failoverPriority": ["topology.istio.io/network", "topology.istio.io/cluster"]}},
            "outlierDetection": {"consecutive5xxErrors": 1}, "tls": {"mode": "SIMPLE", "sni": "ratings.example.com"}}}),
    obj("VirtualService", "helloworld", {"hosts": ["helloworld"], "http": [
        {"match": [{"headers": {"x-canary": {"exact": "true"}}}],
         "route": [{"destination": {"host": "helloworld", "subset": "v2"}}],
         "fault": {"abort": {"httpStatus": 503, "percentage": {"value": 10}}}},
        {"match": [{"uri": {"prefix": "/hello"}}, {"uri": {"regex": "/h.*o"}}],
         "route": [{"destination": {"host": "helloworld", "subset": "v1"}, "weight": 70},
                   {"destination": {"host": "helloworld", "subset": "v2"}, "weight": 30}],
         "timeout": "3s", "retries": {"attempts": 2, "perTryTimeout": "1s", "retryOn": "5xx,connect-failure"},
         "headers": {"request": {"set": {"x-a": "1"}, "remove": ["x-b"]}, "response": {"add": {"x-c": "2"}}}},
        {"route": [{"destination": {"host": "helloworld", "subset": "v1", "port": {"number": 5000}}}],
         "fault": {"delay": {"fixedDelay": "5ms", "percentage": {"value": 1}}}}]}),
    obj("VirtualService", "reviews", {"hosts": ["reviews"], "http": [
        {"match": [{"sourceLabels": {"app": "productpage"}}], "route": [{"destination": {"host": "reviews", "subset": "v2"}}]},
        {"route": [{"destination": {"host": "reviews", "subset": "v3"}, "weight": 50},
                   {"destination": {"host": "reviews", "subset": "v1"}, "weight": 50}]}]}),
    obj("PeerAuthentication", "ratings-v2", {"selector": {"matchLabels": {"app": "ratings", "version": "v2"}},
                                            "mtls": {"mode": "DISABLE"}}),
]


def node(node_id: str, **meta) -> base_pb2.Node:
    m = struct_pb2.Struct()
    m.update(meta)
    return base_pb2.Node(id=node_id, metadata=m)


NODES = {
    "sidecar-network1": node("sidecar~10.10.0.99~client.sample~sample.svc.cluster.local",
                             NAMESPACE="sample", NETWORK="network1", CLUSTER_ID="cluster1"),
    "sidecar-network2": node("sidecar~10.20.0.99~client.sample~sample.svc.cluster.local",
                             NAMESPACE="sample", NETWORK="network2", CLUSTER_ID="cluster2"),
    "east-west-gateway": node("router~10.20.0.50~istio-eastwestgateway-x.istio-system~istio-system.svc.cluster.local",
                              NETWORK="network2", REQUESTED_NETWORK_VIEW="network2", CLUSTER_ID="cluster2"),
    "grpc-network1": node("sidecar~10.10.0.98~grpc.sample~sample.svc.cluster.local", GENERATOR="grpc",
                          NAMESPACE="sample", NETWORK="network1", CLUSTER_ID="cluster1"),
}


def hcms(listener: listener_pb2.Listener):
    anys = [f.typed_config for chain in listener.filter_chains for f in chain.filters]
    if listener.HasField("api_listener"):
        anys.append(listener.api_listener.api_listener)
    for a in anys:
        if a.type_url.endswith("HttpConnectionManager"):
            hcm = hcm_pb2.HttpConnectionManager()
            a.Unpack(hcm)
            yield hcm


def served(addr: str, n: base_pb2.Node) -> dict[str, dict]:
    """Everything a proxy subscribing like Envoy gets: CDS and LDS wildcard, then the EDS and RDS they name."""
    ads = Ads(addr)
    got: dict[str, dict] = {}
    try:
        def take(type_url, names=()):
            ads.send(type_url, node=n, resource_names=list(names))
            resp = ads.recv()
            assert resp.type_url == type_url, resp.type_url
            ads.ack(resp, names)
            got[type_url] = decode(resp)
            return got[type_url]

        clusters = take(CDS)
        eds = sorted(k for k, c in clusters.items() if c.HasField("eds_cluster_config"))
        if eds:
            take(EDS, eds)
        listeners = take(LDS)
        rds = sorted({h.rds.route_config_name for lis in listeners.values() for h in hcms(lis) if h.HasField("rds")})
        if rds:  # a gateway's listeners are TCP only
            take(RDS, rds)
    finally:
        ads.close()
    return got


def violations(got: dict[str, dict]) -> list[str]:
    return [f"{name}: {v}" for resources in got.values() for name, msg in resources.items() for v in pgv.check(msg)]


# The walker itself: each rule kind it evaluates catches a violation (and a valid message passes).
def bad_cla():
    cla = endpoint_pb2.ClusterLoadAssignment(cluster_name="c")
    loc = cla.endpoints.add()
    loc.load_balancing_weight.value = 0
    return cla


def bad_listener():
    hcm = hcm_pb2.HttpConnectionManager(stat_prefix="")
    hcm.rds.route_config_name = "r"
    hcm.rds.config_source.ads.SetInParent()
    listener = listener_pb2.Listener(name="l")
    listener.filter_chains.add().filters.add(name="hcm").typed_config.Pack(hcm)
    return listener


def bad_header():
    rc = route_pb2.RouteConfiguration(name="r")
    vh = rc.virtual_hosts.add(name="v", domains=["*"])
    r = vh.routes.add()
    r.match.prefix = "/"
    r.route.cluster = "c"
    r.request_headers_to_add.add(header={"key": "x-ok", "value": "bad\nvalue"})
    return rc


WALKER_CASES = [
    ("valid cluster", lambda: cluster_pb2.Cluster(name="c", type=cluster_pb2.Cluster.EDS), []),
    ("required string", lambda: endpoint_pb2.ClusterLoadAssignment(cluster_name=""),
     ["ClusterLoadAssignment.cluster_name: '' fails min_len 1"]),
    ("duration range", lambda: cluster_pb2.Cluster(name="c", connect_timeout=duration_pb2.Duration()),
     ["Cluster.connect_timeout: 0ns fails gt 0ns"]),
    ("enum defined_only", lambda: cluster_pb2.Cluster(name="c", lb_policy=42),
     ["Cluster.lb_policy: 42 is not a defined envoy.config.cluster.v3.Cluster.LbPolicy"]),
    ("wrapper range", bad_cla, ["ClusterLoadAssignment.endpoints[0].load_balancing_weight: 0 out of range ('gte', 1) None"]),
    ("repeated min_items", lambda: route_pb2.RouteConfiguration(virtual_hosts=[route_components_pb2.VirtualHost(name="v")]),
     ["RouteConfiguration.virtual_hosts[0].domains: 0 items, at least 1 required"]),
    ("inside Any", bad_listener, [
        "Listener.filter_chains[0].filters[0].typed_config<envoy.extensions.filters.network.http_connection_manager"
        ".v3.HttpConnectionManager>.stat_prefix: '' fails min_len 1"]),
    ("HTTP header value", bad_header,
     ["RouteConfiguration.virtual_hosts[0].routes[0].request_headers_to_add[0].header.value: 'bad\\nvalue' is not "
      "a valid HTTP_HEADER_VALUE"]),
    ("required message", lambda: route_components_pb2.Route(route=route_components_pb2.RouteAction(cluster="c")),
     ["Route.match: value is required"]),
]


@pytest.mark.parametrize("make,want", [c[1:] for c in WALKER_CASES], ids=[c[0] for c in WALKER_CASES])
def test_the_walker_catches_each_rule_kind(make, want):
    assert pgv.check(make()) == want


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("pgv"))
    m.kubectl("cluster1", "apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in CONFIG))
    ours = {(o["kind"], o["metadata"]["name"]) for o in CONFIG}  # not the sandbox's own (its ingress VS)
    objects = lambda: [o for o in m.json("/debug/configz")["istioConfig"]["objects"] if o["namespace"] == "sample"
                       and (o["kind"], o["name"]) in ours]
    eventually("the config read", lambda: len(objects()) == len(CONFIG))
    assert [(o["name"], o["status"], o.get("warnings") or []) for o in objects() if o["status"] != "valid"
            or o.get("warnings")] == []
    # Served once the subset clusters are: every later stream gets a snapshot with the whole config.
    eventually("the subset clusters served", lambda: SUBSET_CLUSTERS <= set(
        served(f"127.0.0.1:{m.grpc}", NODES["sidecar-network1"])[CDS]))
    yield m
    assert m.stop() == 0, m.log()


@pytest.mark.parametrize("who", list(NODES))
def test_sandbox_resources_pass_envoys_validation_rules(sandbox, who):
    got = served(f"127.0.0.1:{sandbox.grpc}", NODES[who])
    assert got[CDS] and got[LDS], who
    assert violations(got) == []
    if who.startswith("sidecar"):
        # The rich config is in what was checked: subset clusters and the VirtualService's routes.
        assert SUBSET_CLUSTERS <= set(got[CDS])
        routes = [r for rc in got[RDS].values() for vh in rc.virtual_hosts for r in vh.routes]
        assert any(r.route.HasField("weighted_clusters") for r in routes)


def fixture_mesh() -> dict:
    """The JSON mesh of xds-fixture: helloworld v1/v2, reviews v1-v3 and ratings, with CONFIG."""
    def svc(name, port, versions):
        return {"name": name, "namespace": "sample", "ports": [["http", port, "HTTP"]],
                "endpoints": [{"address": f"10.0.{port % 250}.{i + 1}", "ports": {"http": port}, "tlsModeIstio": True,
                               "labels": {"app": name, "version": v}, "locality": [region, f"{region}-a"]}
                              for i, (v, region) in enumerate(versions)]}
    return {"services": [svc("helloworld", 5000, [("v1", "us-east1"), ("v2", "eu-west1")]),
                         svc("reviews", 9080, [("v1", "us-east1"), ("v2", "eu-west1"), ("v3", "eu-west1")]),
                         svc("ratings", 9081, [("v1", "eu-west1"), ("v2", "eu-west1")])],
            "config": CONFIG}


def test_xds_fixture_resources_pass_envoys_validation_rules(tmp_path):
    fixture = Fixture(tmp_path, fixture_mesh())
    try:
        got = served(fixture.addr, node("sidecar~10.0.0.99~client.sample~sample.svc.cluster.local",
                                        NAMESPACE="sample"))
        assert violations(got) == []
        assert SUBSET_CLUSTERS <= set(got[CDS])
    finally:
        fixture.close()
