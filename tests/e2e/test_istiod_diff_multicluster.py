"""meshd vs the real istiod on a primary and a remote (issue 28 §2): the xDS diff of
tests/e2e/test_istiod_diff.py across two real API servers on two networks.

cluster1 (network1) is the primary and holds the Istio config; cluster2 (network2) is a remote, joined by
a remote secret in the primary's istio-system (label ``istio/multiCluster=true``, the data key the cluster
ID, its value the remote's admin kubeconfig), which meshd and istiod both read. meshNetworks (the same
file for both) puts each cluster's endpoints on its network and gives each network a gateway address
(192.0.2.0/24: nothing is sent there). Both clusters have Service ``echo.diff``; the primary has pods
echo-v1 and echo-v2, the remote echo-r (all with ``security.istio.io/tlsMode: istio``, so both servers
may send them through a gateway).

Nodes: a proxyless gRPC client in each network, a sidecar in network1 and network1's east-west gateway
(a router with ``REQUESTED_NETWORK_VIEW`` its own network; for istiod, a ``Gateway`` with an
AUTO_PASSTHROUGH server on 15443 selects it). The differences must equal
tests/e2e/istiod_diff/expected/multicluster-<scenario>.json.
"""

from __future__ import annotations

import json
import time

import pytest

import istiod as istiod_mod
import realk8s
import xds_diff
from meshd_proc import Meshd
from test_istiod_diff import (COMMON_META, DR_SUBSETS, ECHO, EXPECTED, MESH_CONFIG, NS, SETTLE, pod, populate,
                              slice_)
from xdsharness import grpc_node, sidecar_node

GATEWAY1, GATEWAY2 = "192.0.2.100", "192.0.2.200"
MESH_NETWORKS = f"""networks:
  network1:
    endpoints: [{{fromRegistry: cluster1}}]
    gateways: [{{address: {GATEWAY1}, port: 15443}}]
  network2:
    endpoints: [{{fromRegistry: cluster2}}]
    gateways: [{{address: {GATEWAY2}, port: 15443}}]
"""
ECHO_SVC = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": NS},
            "spec": {"clusterIP": "10.96.10.10",
                     "ports": [{"name": "grpc", "port": 7070, "targetPort": 17070, "appProtocol": "grpc"}]}}
TLS = {"security.istio.io/tlsMode": "istio"}
PRIMARY_PODS = [pod("echo-v1", "10.1.0.1", {"app": "echo", "version": "v1", **TLS}),
                pod("echo-v2", "10.1.0.2", {"app": "echo", "version": "v2", **TLS})]
REMOTE_PODS = [pod("echo-r", "10.2.0.1", {"app": "echo", "version": "v1", **TLS})]


def node_id(ip: str) -> str:
    return f"sidecar~{ip}~client-0.{NS}~{NS}.svc.cluster.local"


def meta(cluster: str, network: str, ip: str) -> dict:
    return {**COMMON_META, "CLUSTER_ID": cluster, "NETWORK": network, "INSTANCE_IPS": ip}


NODES = {
    "grpc-network1": (lambda: grpc_node(node_id("10.1.0.99"), **meta("cluster1", "network1", "10.1.0.99")),
                      [f"{ECHO}:7070"]),
    "grpc-network2": (lambda: grpc_node(node_id("10.2.0.99"), **meta("cluster2", "network2", "10.2.0.99")),
                      [f"{ECHO}:7070"]),
    "sidecar-network1": (lambda: sidecar_node(node_id("10.1.0.99"), **meta("cluster1", "network1", "10.1.0.99")),
                         None),
    # network1's east-west gateway as gen-eastwest-gateway.sh deploys it: a router whose view is its network.
    "eastwest-network1": (lambda: sidecar_node(
        "router~10.1.0.50~istio-eastwestgateway-0.istio-system~istio-system.svc.cluster.local",
        **{**meta("cluster1", "network1", "10.1.0.50"), "NAMESPACE": "istio-system",
           "REQUESTED_NETWORK_VIEW": "network1", "WORKLOAD_NAME": "istio-eastwestgateway",
           "SERVICE_ACCOUNT": "istio-eastwestgateway",
           "LABELS": {"istio": "eastwestgateway", "app": "istio-eastwestgateway",
                      "topology.istio.io/network": "network1"}}), None),
}
# What istiod needs to make that router an east-west gateway (meshd does not read Gateway resources: any
# router whose view is exactly its own network is one).
EASTWEST_GATEWAY = {
    "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
    "metadata": {"name": "cross-network-gateway", "namespace": "istio-system"},
    "spec": {"selector": {"istio": "eastwestgateway"},
             "servers": [{"port": {"number": 15443, "name": "tls", "protocol": "TLS"},
                          "tls": {"mode": "AUTO_PASSTHROUGH"}, "hosts": ["*.local"]}]},
}


# Both servers are ready only once the remote has synced (or timed out: PILOT_REMOTE_CLUSTER_TIMEOUT); what
# each sends through a gateway differs, so no condition but two equal answers in a row.
WANTS = {node: (lambda j: bool(j.get("EDS"))) for node in NODES}
WANTS["eastwest-network1"] = lambda j: "0.0.0.0_15443" in j.get("LDS", {})
WORKLOAD_ON_NETWORK2 = f"""
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: db, namespace: {NS}}}
spec:
  hosts: [db.{NS}.example]
  location: MESH_INTERNAL
  ports: [{{number: 7070, name: grpc, protocol: GRPC, targetPort: 17070}}]
  resolution: STATIC
  workloadSelector: {{labels: {{app: db}}}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: db-1, namespace: {NS}}}
spec:
  address: 10.3.0.1
  network: network2
  serviceAccount: db
  labels: {{app: db, security.istio.io/tlsMode: istio}}
"""
DB = f"outbound|7070||db.{NS}.example"
# (name, config applied to the primary, conditions beyond WANTS)
SCENARIOS = [("none", "", {}), ("dr-subsets", DR_SUBSETS, {}),
             ("workloadentry-network2", WORKLOAD_ON_NETWORK2,
              {"sidecar-network1": lambda j: DB in j.get("EDS", {}),
               "eastwest-network1": lambda j: DB in j.get("CDS", {})})]


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    realk8s.skip_unless_available()
    istiod_mod.skip_unless_available()
    root = tmp_path_factory.mktemp("diff-mc-k8s")
    with realk8s.RealCluster(root / "cluster1", name="cluster1", controller_manager=False) as c1, \
            realk8s.RealCluster(root / "cluster2", name="cluster2", controller_manager=False) as c2:
        populate(c1, PRIMARY_PODS, [ECHO_SVC, slice_("echo", "grpc", 17070, [("echo-v1", "10.1.0.1"),
                                                                              ("echo-v2", "10.1.0.2")], "grpc")])
        c1.install_crds()
        c1.kubectl("apply", "-f", "-", stdin=json.dumps(EASTWEST_GATEWAY))
        populate(c2, REMOTE_PODS, [ECHO_SVC, slice_("echo", "grpc", 17070, [("echo-r", "10.2.0.1")], "grpc")])
        c1.kubectl("apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "istio-remote-secret-cluster2", "namespace": "istio-system",
                         "labels": {"istio/multiCluster": "true"},
                         "annotations": {"networking.istio.io/cluster": "cluster2"}},
            "stringData": {"cluster2": c2.kubeconfig.read_text()}}))
        yield c1, c2


@pytest.fixture(scope="module")
def servers(clusters, tmp_path_factory):
    c1, _ = clusters
    root = tmp_path_factory.mktemp("diff-mc-servers")
    (root / "mesh.yaml").write_text(MESH_CONFIG)
    (root / "networks.yaml").write_text(MESH_NETWORKS)
    meshd = Meshd(root / "meshd", args=["--kubeconfig", str(c1.kubeconfig), "--cluster-id", "cluster1",
                                        "--mesh-config", str(root / "mesh.yaml"),
                                        "--mesh-networks", str(root / "networks.yaml")], ready_timeout=90)
    istiod = istiod_mod.Istiod(root / "istiod", c1.kubeconfig, mesh_config=MESH_CONFIG, mesh_networks=MESH_NETWORKS)
    try:
        istiod.start(timeout=180)
    except BaseException:
        meshd.stop()
        raise
    yield {"istiod": f"127.0.0.1:{istiod.grpc}", "meshd": f"127.0.0.1:{meshd.grpc}"}
    meshd.stop()
    istiod.stop()


@pytest.mark.parametrize("name,config,wants", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_xds_diff_primary_remote(clusters, servers, name, config, wants):
    c1, _ = clusters
    if config:
        c1.kubectl("apply", "-f", "-", stdin=config)
        time.sleep(SETTLE)
    try:
        got = {node: {side: xds_diff.settled(servers[side], make(), targets, wants.get(node, WANTS[node]), timeout=90)
                      for side in ("istiod", "meshd")}
               for node, (make, targets) in NODES.items()}
    finally:
        if config:
            c1.kubectl("delete", "-f", "-", "--wait=true", stdin=config)
            time.sleep(SETTLE)
    problems = xds_diff.check(f"multicluster-{name}", got, EXPECTED)
    assert not problems, xds_diff.failure(EXPECTED / f"multicluster-{name}.json", problems)
