"""Traffic policy across clusters, proven with real gRPC traffic from each proxyless client (grpcio,
@grpc/grpc-js-xds and grpc-go: proxyless.py) on the two-cluster sandbox of ``traffic_mesh`` (backends
on loopback, Istio config applied with kubectl to the config cluster): a weighted canary split across
clusters, locality failover to the other cluster, header routing, an abort fault and a per-route timeout,
each through the xDS meshd generates for proxyless gRPC."""

from __future__ import annotations

import pytest
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm_pb2

# Registered for json_format: typed configs meshd nests in routes (fault, retry host predicate).
from envoy.extensions.filters.http.fault.v3 import fault_pb2  # noqa: F401
from envoy.extensions.retry.host.previous_hosts.v3 import previous_hosts_pb2  # noqa: F401
from google.protobuf import json_format, struct_pb2
from envoy.config.core.v3 import base_pb2

import proxyless
from meshd_proc import eventually
from traffic_mesh import NS, TrafficMesh, host, last_run
from xdsharness import EDS, LDS, RDS, Ads, decode


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    m = TrafficMesh(tmp_path_factory.mktemp("traffic"))
    yield m
    m.close()


def client_node() -> base_pb2.Node:
    """The raw-ADS twin of the test's gRPC client (same namespace, cluster and locality)."""
    meta = struct_pb2.Struct()
    meta.update({"GENERATOR": "grpc", "NAMESPACE": NS, "CLUSTER_ID": "cluster1"})
    return base_pb2.Node(id=f"sidecar~127.0.0.9~watcher.{NS}~{NS}.svc.cluster.local", metadata=meta,
                         locality=base_pb2.Locality(region="us-east1", zone="us-east1-a"))


def route_config(m: TrafficMesh, app: str) -> dict:
    """The RouteConfiguration a gRPC client of ``app`` gets now (LDS, then the RDS its HCM names)."""
    ads = Ads(f"127.0.0.1:{m.meshd.grpc}")
    try:
        listener_name = f"{host(app)}:7070"
        ads.send(LDS, node=client_node(), resource_names=[listener_name])
        listener = decode(ads.recv())[listener_name]
        hcm = hcm_pb2.HttpConnectionManager()
        listener.api_listener.api_listener.Unpack(hcm)
        name = hcm.rds.route_config_name
        ads.send(RDS, resource_names=[name])
        return json_format.MessageToDict(decode(ads.recv())[name])
    finally:
        ads.close()


def assignment(m: TrafficMesh, cluster: str) -> dict:
    ads = Ads(f"127.0.0.1:{m.meshd.grpc}")
    try:
        ads.send(EDS, node=client_node(), resource_names=[cluster])
        return json_format.MessageToDict(decode(ads.recv())[cluster])
    finally:
        ads.close()


def routes(rc: dict) -> list[dict]:
    return [r for vh in rc.get("virtualHosts", []) for r in vh.get("routes", [])]


def subset_rule(app: str) -> dict:
    return {"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": app, "namespace": NS},
            "spec": {"host": app, "subsets": [{"name": v, "labels": {"version": v}} for v in ("v1", "v2")]}}


def virtual_service(app: str, *http: dict) -> dict:
    return {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": app, "namespace": NS}, "spec": {"hosts": [app], "http": list(http)}}


def to(subset: str, weight: int | None = None) -> dict:
    d = {"destination": {"host": "echo", "subset": subset}}
    return d if weight is None else d | {"weight": weight}


def weights(rc: dict) -> dict[str, int]:
    """cluster → weight of the catch-all route's weighted clusters."""
    action = routes(rc)[-1].get("route", {})
    return {c["name"]: c.get("weight", 0) for c in action.get("weightedClusters", {}).get("clusters", [])}


V1 = f"outbound|7070|v1|{host('echo')}"
V2 = f"outbound|7070|v2|{host('echo')}"


@pytest.mark.parametrize("kind", proxyless.params())
def test_weighted_canary_across_clusters_and_moving_all_traffic_within_one_second(mesh, kind):
    """v1 runs in cluster1, v2 in cluster2: VS 80/20 splits 1,000 RPCs within ±5 points; after the VS
    is changed to 0/100 with kubectl apply, no RPC reaches v1 more than a second later."""
    try:
        mesh.apply(subset_rule("echo"), virtual_service("echo", {"route": [to("v1", 80), to("v2", 20)]}))
        eventually("the 80/20 route", lambda: weights(route_config(mesh, "echo")) == {V1: 80, V2: 20})
        backends, statuses = mesh.report("echo", 1000, kind=kind)
        assert statuses == {"OK": 1000}, statuses
        assert set(backends) == {"echo-v1-0", "echo-v2-0"}, backends
        assert abs(backends["echo-v2-0"] / 10 - 20) <= 5, backends

        stream = mesh.stream("echo", kind=kind)
        try:
            stream.until("both versions answering one channel",
                         lambda rs: {r["backend"] for r in rs} >= {"echo-v1-0", "echo-v2-0"})
            t_apply = mesh.apply(virtual_service("echo", {"route": [to("v1", 0), to("v2", 100)]}))
            records = stream.until("all traffic on v2", lambda rs: last_run(rs, 200, lambda r: r["t"] > t_apply
                                                                               and r["backend"] == "echo-v2-0"))
        finally:
            stream.close()
        assert all(r["status"] == "OK" for r in records), [r for r in records if r["status"] != "OK"][:5]
        last_v1 = max((r["t"] for r in records if r["backend"] == "echo-v1-0"), default=t_apply)
        print(f"v1 last answered {last_v1 - t_apply:.3f}s after the apply began")
        assert last_v1 - t_apply < 1.0, f"v1 still answered {last_v1 - t_apply:.3f}s after the apply"
    finally:
        mesh.delete("virtualservice", "echo")
        mesh.delete("destinationrule", "echo")


FO = f"outbound|7070||{host('fo')}"
FAILOVER_RULE = {
    "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule", "metadata": {"name": "fo", "namespace": NS},
    "spec": {"host": "fo", "trafficPolicy": {
        "loadBalancer": {"simple": "ROUND_ROBIN",
                         "localityLbSetting": {"enabled": True, "failover": [{"from": "us-east1", "to": "eu-west1"}]}},
        "outlierDetection": {"consecutive5xxErrors": 3, "interval": "1s", "baseEjectionTime": "30s"}}},
}


def priorities(cla: dict) -> dict[str, int]:
    """``region/zone`` → priority."""
    return {f"{l['locality'].get('region')}/{l['locality'].get('zone')}": l.get("priority", 0)
            for l in cla.get("endpoints", [])}


LOCAL = {"fo-local-0", "fo-local-1"}


@pytest.mark.parametrize("kind", proxyless.params())
def test_locality_failover_to_the_other_cluster_and_back(mesh, kind):
    """A client in us-east1/us-east1-a stays on its zone's pods; when kubectl makes every one of them
    unready its RPCs go to eu-west1 (cluster2) without one failing, and come back on recovery."""
    try:
        mesh.apply(FAILOVER_RULE)
        eventually("eu-west1 as the failover priority", lambda: priorities(assignment(mesh, FO)) == {
            "us-east1/us-east1-a": 0, "eu-west1/eu-west1-a": 1})
        backends, statuses = mesh.report("fo", 300, kind=kind)
        assert statuses == {"OK": 300} and set(backends) == LOCAL, (backends, statuses)

        stream = mesh.stream("fo", kind=kind)
        try:
            stream.until("local traffic", lambda rs: last_run(rs, 20, lambda r: r["backend"] in LOCAL))
            for p in sorted(LOCAL):
                mesh.set_ready(p, False)
            failed_over = stream.until("traffic in cluster2",
                                       lambda rs: last_run(rs, 200, lambda r: r["backend"] == "fo-remote-0"))
            for p in sorted(LOCAL):
                mesh.set_ready(p, True)
            back = stream.until("traffic back home", lambda rs: last_run(rs, 200, lambda r: r["backend"] in LOCAL))
        finally:
            stream.close()
        failures = [r for r in failed_over + back if r["status"] != "OK"]
        assert not failures, failures[:5]
    finally:
        for p in sorted(LOCAL):
            mesh.set_ready(p, True)
        mesh.delete("destinationrule", "fo")


@pytest.mark.parametrize("kind", proxyless.params())
def test_a_header_routes_to_v2(mesh, kind):
    try:
        mesh.apply(subset_rule("echo"), virtual_service(
            "echo", {"match": [{"headers": {"x-canary": {"exact": "true"}}}], "route": [to("v2")]},
            {"route": [to("v1")]}))
        eventually("the header route", lambda: len(routes(route_config(mesh, "echo"))) == 2)
        assert mesh.report("echo", 100, "x-canary=true", kind=kind) == ({"echo-v2-0": 100}, {"OK": 100})
        assert mesh.report("echo", 100, "x-canary=false", kind=kind) == ({"echo-v1-0": 100}, {"OK": 100})
        assert mesh.report("echo", 100, kind=kind) == ({"echo-v1-0": 100}, {"OK": 100})
    finally:
        mesh.delete("virtualservice", "echo")
        mesh.delete("destinationrule", "echo")


@pytest.mark.parametrize("kind", proxyless.params())
def test_an_abort_fault_fails_the_configured_share_with_the_configured_status(mesh, kind):
    try:
        mesh.apply(subset_rule("echo"), virtual_service("echo", {
            "fault": {"abort": {"percentage": {"value": 30}, "grpcStatus": "ABORTED"}}, "route": [to("v1")]}))
        eventually("the fault on the route", lambda: any(
            "typedPerFilterConfig" in r for r in routes(route_config(mesh, "echo"))))
        backends, statuses = mesh.report("echo", 1000, kind=kind)
        assert set(statuses) == {"OK", "ABORTED"}, statuses
        assert abs(statuses["ABORTED"] / 10 - 30) <= 5, statuses
        assert backends == {"echo-v1-0": statuses["OK"]}, backends
    finally:
        mesh.delete("virtualservice", "echo")
        mesh.delete("destinationrule", "echo")


@pytest.mark.parametrize("kind", proxyless.params(unsupported={
    "grpc-go": "a grpc-go RPC delayed by a fault succeeds past the route timeout: the delay cannot prove it"}))
def test_a_route_timeout_bounds_the_rpc(mesh, kind):
    """The same 500ms delay (a fault, gRFC A33) on both routes: the route with ``timeout: 100ms`` fails
    every RPC with DEADLINE_EXCEEDED (gRFC A31: ``max_stream_duration``), the one without succeeds. The
    backends answer at once, so the delay is the only slow part."""
    delay = {"delay": {"fixedDelay": "500ms", "percentage": {"value": 100}}}
    try:
        mesh.apply(subset_rule("echo"), virtual_service(
            "echo", {"match": [{"headers": {"x-slow": {"exact": "bounded"}}}], "timeout": "100ms",
                     "fault": delay, "route": [to("v1")]},
            {"fault": delay, "route": [to("v1")]}))
        eventually("the timeout on the route", lambda: any(
            r.get("route", {}).get("timeout") == "0.100s" for r in routes(route_config(mesh, "echo"))))
        assert mesh.report("echo", 5, "x-slow=bounded", kind=kind) == ({}, {"DEADLINE_EXCEEDED": 5})
        assert mesh.report("echo", 5, kind=kind) == ({"echo-v1-0": 5}, {"OK": 5})
    finally:
        mesh.delete("virtualservice", "echo")
        mesh.delete("destinationrule", "echo")
