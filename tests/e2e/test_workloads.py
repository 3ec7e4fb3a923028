"""Workloads end to end: stock kubectl creates, exposes and scales a Deployment on the sandbox's primary
cluster; the simulator's controllers make the ReplicaSet, pods and EndpointSlices, and meshd serves the
pods as EDS endpoints to a real ADS client, following scale-up and scale-down."""

from __future__ import annotations

import json
import queue
import time

import pytest

from envoy.config.core.v3 import base_pb2
from google.protobuf import struct_pb2

from meshd_proc import Meshd
from xdsharness import EDS, Ads, decode

WEB = "outbound|80||web.default.svc.cluster.local"


def sidecar() -> base_pb2.Node:
    """An Envoy sidecar in cluster1 (`kubectl expose` leaves the port unnamed, a TCP port for meshd)."""
    meta = struct_pb2.Struct()
    meta.update({"NAMESPACE": "default", "NETWORK": "network1", "CLUSTER_ID": "cluster1"})
    return base_pb2.Node(id="sidecar~10.10.0.99~client.default~default.svc.cluster.local", metadata=meta)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("workloads"))
    yield m
    m.stop()


def kubectl(m: Meshd, *args: str) -> str:
    return m.kubectl("cluster1", *args)


def pod_ips(m: Meshd) -> set[str]:
    pods = json.loads(kubectl(m, "get", "pods", "-l", "app=web", "-o", "json"))["items"]
    return {p["status"]["podIP"] for p in pods}


def eds_addresses(cla) -> set[str]:
    return {lb.endpoint.address.socket_address.address for loc in cla.endpoints for lb in loc.lb_endpoints}


def wait_for_eds(ads: Ads, want: set[str], timeout: float = 20) -> set[str]:
    """ACKs EDS responses until WEB carries exactly `want`; returns the last addresses seen."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            resp = ads.recv(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        ads.ack(resp, [WEB])
        cla = decode(resp).get(WEB)
        if cla is not None:
            seen = eds_addresses(cla)
            if seen == want:
                return seen
    return seen


def test_scaled_deployment_reaches_eds(mesh):
    kubectl(mesh, "create", "deployment", "web", "--image=registry.example/web:1")
    kubectl(mesh, "expose", "deployment", "web", "--port", "80")
    kubectl(mesh, "scale", "deployment", "web", "--replicas", "5")
    out = kubectl(mesh, "rollout", "status", "deployment/web", "--timeout=20s")
    assert 'deployment "web" successfully rolled out' in out
    five = pod_ips(mesh)
    assert len(five) == 5, five

    ads = Ads(f"127.0.0.1:{mesh.grpc}")
    try:
        ads.send(EDS, node=sidecar(), resource_names=[WEB])
        assert wait_for_eds(ads, five) == five

        kubectl(mesh, "scale", "deployment", "web", "--replicas", "2")
        two = pod_ips(mesh)
        assert len(two) == 2 and two < five, (two, five)
        assert wait_for_eds(ads, two) == two
    finally:
        ads.close()
