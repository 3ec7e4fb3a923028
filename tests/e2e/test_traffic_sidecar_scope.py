"""Sidecar scoping on the embedded sandbox, seen by a raw ADS client (``xdsharness.Ads``) playing an
Envoy sidecar in ``sample``: with a Sidecar in ``sample`` whose egress allows two hosts, the proxy
receives exactly their clusters, endpoints and routes; an endpoint change of a service outside its
scope sends it nothing, one inside its scope sends it the new endpoints."""

from __future__ import annotations

import json

import pytest
from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2 as hcm_pb2
from google.protobuf import struct_pb2

from meshd_proc import Meshd, eventually
from xdsharness import CDS, EDS, LDS, RDS, Ads, decode

HELLO = "helloworld.sample.svc.cluster.local"
RATINGS = "ratings.sample.svc.cluster.local"
ALLOWED = {f"outbound|5000||{HELLO}", f"outbound|9080||{RATINGS}"}
REVIEWS = "outbound|9080||reviews.sample.svc.cluster.local"
# What istiod adds to every sidecar's CDS besides its services' clusters.
BUILTIN = {"BlackHoleCluster", "PassthroughCluster", "InboundPassthroughCluster", "InboundPassthroughClusterIpv4"}
SIDECAR = {
    "apiVersion": "networking.istio.io/v1", "kind": "Sidecar",
    "metadata": {"name": "default", "namespace": "sample"},
    "spec": {"egress": [{"hosts": [f"./{HELLO}", f"./{RATINGS}"]}]},
}


def sidecar_node() -> base_pb2.Node:
    meta = struct_pb2.Struct()
    meta.update({"NAMESPACE": "sample", "NETWORK": "network1", "CLUSTER_ID": "cluster1"})
    return base_pb2.Node(id="sidecar~10.10.0.99~scoped.sample~sample.svc.cluster.local", metadata=meta)


@pytest.fixture(scope="module")
def meshd(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("sidecar-scope"))
    m.kubectl("cluster1", "apply", "-f", "-", stdin=json.dumps(SIDECAR))
    eventually("the Sidecar read", lambda: any(
        (o["kind"], o["namespace"], o["name"], o["status"]) == ("Sidecar", "sample", "default", "valid")
        for o in m.json("/debug/configz")["istioConfig"]["objects"]))
    # Read is not yet served: the snapshot follows after the debounce.
    eventually("the Sidecar in force", lambda: REVIEWS not in clusters_now(m))
    yield m
    assert m.stop() == 0, m.log()


def clusters_now(meshd: Meshd) -> set[str]:
    s = Sidecar(meshd)
    s.ads.close()
    return set(s.clusters)


class Sidecar:
    """A raw SotW stream that subscribes like Envoy: CDS and LDS wildcard, then the EDS and RDS they name."""

    def __init__(self, meshd: Meshd):
        self.ads = Ads(f"127.0.0.1:{meshd.grpc}")
        self.ads.send(CDS, node=sidecar_node())
        self.clusters = self._take(CDS)
        self.eds_names = sorted(n for n, c in self.clusters.items() if c.HasField("eds_cluster_config"))
        self.ads.send(EDS, resource_names=self.eds_names)
        self.assignments = self._take(EDS, self.eds_names)
        self.ads.send(LDS)
        self.listeners = self._take(LDS)
        self.route_names = sorted({hcm.rds.route_config_name for hcm in self._hcms() if hcm.HasField("rds")})
        self.ads.send(RDS, resource_names=self.route_names)
        self.routes = self._take(RDS, self.route_names)

    def _take(self, type_url, names=()):
        resp = self.ads.recv()
        assert resp.type_url == type_url, resp.type_url
        self.ads.ack(resp, names)
        return decode(resp)

    def _hcms(self):
        for listener in self.listeners.values():
            for chain in listener.filter_chains:
                for f in chain.filters:
                    if f.typed_config.type_url.endswith("HttpConnectionManager"):
                        hcm = hcm_pb2.HttpConnectionManager()
                        f.typed_config.Unpack(hcm)
                        yield hcm


def test_a_sidecar_receives_exactly_the_hosts_its_sidecar_allows(meshd):
    s = Sidecar(meshd)
    try:
        assert {n for n in s.clusters if n.startswith("outbound|")} == ALLOWED
        assert set(s.clusters) - ALLOWED <= BUILTIN, sorted(s.clusters)
        assert set(s.eds_names) == ALLOWED and set(s.assignments) == ALLOWED
        assert all(s.assignments[n].endpoints for n in ALLOWED)
        domains = {d for rc in s.routes.values() for vh in rc.virtual_hosts for d in vh.domains}
        hosts = {d.split(":")[0] for d in domains if not d[0].isdigit() and d != "*"}
        assert hosts and all(h.startswith(("helloworld", "ratings")) for h in hosts), sorted(hosts)
    finally:
        s.ads.close()


def patch_ready(meshd: Meshd, slice_name: str, index: int, ready: bool) -> None:
    meshd.kubectl("cluster1", "patch", "endpointslice", "-n", "sample", slice_name, "--type=json", "-p", json.dumps(
        [{"op": "replace", "path": f"/endpoints/{index}/conditions/ready", "value": ready},
         {"op": "replace", "path": f"/endpoints/{index}/conditions/serving", "value": ready}]))


def health(meshd: Meshd, hostname: str, address: str) -> str | None:
    shards = meshd.json("/debug/endpointz").get(hostname, {}).get("sample", {}).get("Shards", {})
    return next((e["health"] for eps in shards.values() for e in eps if e["address"] == address), None)


def test_an_endpoint_change_outside_the_scope_sends_nothing(meshd):
    s = Sidecar(meshd)
    try:
        s.ads.expect_none(0.5)
        # reviews (not allowed): its first cluster1 pod goes unready.
        before = meshd.json("/debug/push_status")["version"]
        patch_ready(meshd, "reviews-xb4q9", 0, False)
        eventually("reviews' endpoint unhealthy",
                   lambda: health(meshd, "reviews.sample.svc.cluster.local", "10.10.0.10") == "Unhealthy")
        eventually("the snapshot with the change", lambda: meshd.json("/debug/push_status")["version"] > before)
        s.ads.expect_none(1.0)

        # helloworld (allowed): its unready cluster1 pod becomes ready, and the new endpoints arrive.
        patch_ready(meshd, "helloworld-b5mrn", 1, True)
        hello = f"outbound|5000||{HELLO}"
        while True:
            resp = s.ads.recv(timeout=10)
            got = decode(resp)
            assert set(got) <= ALLOWED | BUILTIN, sorted(got)
            s.ads.ack(resp, sorted(got) if resp.type_url == EDS else ())
            if resp.type_url == EDS and hello in got:
                break
    finally:
        s.ads.close()
        patch_ready(meshd, "reviews-xb4q9", 0, True)
        patch_ready(meshd, "helloworld-b5mrn", 1, False)
