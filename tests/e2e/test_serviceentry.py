"""ServiceEntry / WorkloadEntry registry on the sandbox, with the raw ADS client.

The sandbox's config cluster (cluster1) holds a ServiceEntry for an external API and a VM: WorkloadEntry
``helloworld-vm-10.202.0.5`` on network2 (clusters/cluster1/60-istio-config.yaml), which the helloworld
Service selects. Split horizon must treat it like a pod: a network1 sidecar reaches it through network2's
east-west gateway (the gateway's weight grows by the VM's weight 2 in its locality), a network2 sidecar
gets its own address. The same objects from ``--config-dir`` instead of Kubernetes give the same EDS. A
ServiceEntry applied with kubectl selects the config cluster's ready pods by label."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from envoy.extensions.network.dns_resolver.cares.v3 import cares_dns_resolver_pb2  # noqa: F401  (DNS clusters' resolver)

from meshd_proc import Meshd, eventually
from test_multinetwork import C1_LOCAL, C2_LOCAL, HELLO, cla, fetch, grpc_client, lb, locality, node, sidecar
from xdsharness import CDS, EDS

REPO = Path(__file__).resolve().parents[2]
ISTIO_CONFIG = REPO / "clusters" / "cluster1" / "60-istio-config.yaml"
VM = "helloworld-vm-10.202.0.5"
VM_LB = lb("10.202.0.5", 5000, 2, "cluster1", f"{VM};sample;helloworld;vm")


def vm_ready(m: Meshd) -> bool:
    shards = m.json("/debug/endpointz").get("helloworld.sample.svc.cluster.local", {}).get("sample", {})
    return "External/cluster1" in shards.get("Shards", {})


@pytest.fixture(scope="module")
def meshd(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("serviceentry"))
    eventually("the VM in helloworld's endpoints", lambda: vm_ready(m))
    yield m
    assert m.stop() == 0, m.log()


@pytest.fixture(scope="module")
def from_dir(tmp_path_factory):
    """The same topology with the Istio objects in --config-dir instead of the config cluster."""
    root = tmp_path_factory.mktemp("serviceentry-dir")
    clusters = root / "clusters"
    shutil.copytree(REPO / "clusters", clusters)
    (clusters / "cluster1" / ISTIO_CONFIG.name).unlink()
    config = root / "istio"
    config.mkdir()
    shutil.copy(ISTIO_CONFIG, config / "vm.yaml")
    m = Meshd(root / "state", args=["--sandbox", str(clusters), "--config-dir", str(config)])
    eventually("the VM from the config directory", lambda: vm_ready(m), timeout=20)
    yield m
    assert m.stop() == 0, m.log()


def test_network1_sidecar_reaches_the_vm_through_network2s_gateway(meshd):
    got = fetch(meshd, EDS, sidecar(1), [HELLO])[HELLO]
    # helloworld-v2's pods (weight 1 each, eu-west1-a and -b) and the VM (weight 2) behind one gateway
    # endpoint, sent once (Envoy keeps one endpoint per address), naming the cluster with the most weight.
    gateway = [locality("eu-west1", "eu-west1-a", lb("198.51.100.10", 15443, 4, "cluster1"))]
    assert got == cla(HELLO, *gateway, *C1_LOCAL)


def test_network2_sidecar_gets_the_vm_directly(meshd):
    got = fetch(meshd, EDS, sidecar(2), [HELLO])[HELLO]
    zone_a = C2_LOCAL[0]["lbEndpoints"] + [VM_LB]
    local = [locality("eu-west1", "eu-west1-a", *zone_a), C2_LOCAL[1]]
    gateway = locality("us-east1", "us-east1-a", lb("192.0.2.10", 15443, 1, "cluster1"))
    assert got == cla(HELLO, *local, gateway)


def test_debug_views_name_the_registry_and_the_objects(meshd):
    services = {(s["hostname"], s["attributes"]["Namespace"]): s for s in meshd.json("/debug/registryz")}
    api = services[("api.example.com", "sample")]
    assert api["attributes"]["ServiceRegistry"] == "External"
    assert api["origin"] == {"registry": "ServiceEntry", "namespace": "sample", "names": ["api-example-com"]}
    assert api["resolution"] == "Dns" and api["meshExternal"] is True
    hello = services[("helloworld.sample.svc.cluster.local", "sample")]
    assert hello["attributes"]["ServiceRegistry"] == "Kubernetes"

    shards = meshd.json("/debug/endpointz")["helloworld.sample.svc.cluster.local"]["sample"]["Shards"]
    assert sorted(shards) == ["External/cluster1", "Kubernetes/cluster1", "Kubernetes/cluster2"]
    [vm] = shards["External/cluster1"]
    assert (vm["address"], vm["workload"], vm["kind"], vm["network"], vm["weight"], vm["tlsMode"]) == (
        "10.202.0.5", VM, "WorkloadEntry", "network2", 2, "istio")
    assert vm["serviceAccount"] == "spiffe://cluster.local/ns/sample/sa/helloworld"
    assert vm["locality"] == {"region": "eu-west1", "zone": "eu-west1-a", "subzone": ""}


def test_explain_names_the_workload_entry(meshd):
    report = meshd.json("/debug/explain?proxyID=sidecar~10.10.0.99~client.sample~sample.svc.cluster.local"
                        "&service=helloworld.sample:5000&network=network1")
    [port] = report["ports"]
    by_address = {e["address"]: e for e in port["endpoints"]}
    assert by_address["10.202.0.5"]["origin"] == f"WorkloadEntry sample/{VM}"
    assert by_address["10.10.0.7"]["origin"] == "Pod sample/helloworld-v1-284dd6mmqf-fb4tw"


API = "outbound|443||api.example.com"


def socket_addresses(cluster: dict) -> list[tuple[str, int]]:
    eps = [e for g in cluster.get("loadAssignment", {}).get("endpoints", []) for e in g["lbEndpoints"]]
    return [(e["endpoint"]["address"]["socketAddress"]["address"], e["endpoint"]["address"]["socketAddress"]["portValue"])
            for e in eps]


def test_external_api_is_a_dns_cluster_in_every_cluster(meshd):
    """The DNS ServiceEntry is a STRICT_DNS cluster whose inline endpoint is the host, for a sidecar of the
    config cluster and for one of the remote cluster2 (istio#60343: istiod 1.30 drops it there); proxyless
    gRPC gets an EDS cluster, as from istiod's gRPC generator."""
    for net in (1, 2):
        c = fetch(meshd, CDS, sidecar(net))[API]
        assert (c["type"], c["dnsLookupFamily"], c["dnsRefreshRate"], c["respectDnsTtl"]) == (
            "STRICT_DNS", "V4_ONLY", "60s", True), net
        assert "edsClusterConfig" not in c
        assert socket_addresses(c) == [("api.example.com", 443)]
    assert fetch(meshd, CDS, grpc_client(1), [API])[API]["type"] == "EDS"


ORIGINATION = "outbound|80||edition.cnn.com"
DB = "outbound|5432||db.sample.svc.cluster.local"
PRIVATE = "outbound|443||private.example.com"
# Istio's egress TLS-origination example, an ExternalName Service, and an entry istio-system keeps to itself.
EXTERNAL = """
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: cnn, namespace: sample}
spec:
  hosts: [edition.cnn.com]
  location: MESH_EXTERNAL
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 443}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: cnn, namespace: sample}
spec:
  host: edition.cnn.com
  trafficPolicy:
    tls: {mode: SIMPLE, sni: edition.cnn.com}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: sample}
spec:
  type: ExternalName
  externalName: db.example.org
  ports: [{port: 5432, name: tcp-db}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: private, namespace: istio-system}
spec:
  hosts: [private.example.com]
  exportTo: ["."]
  location: MESH_EXTERNAL
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS_ROUND_ROBIN
"""


def test_tls_origination_external_name_and_export_to(meshd):
    """Plain HTTP to edition.cnn.com:80 leaves as TLS to 443 (the DestinationRule's SNI, the system roots);
    the ExternalName Service is a STRICT_DNS cluster on its external name; an entry exported only to
    istio-system is a LOGICAL_DNS cluster there and no cluster in sample."""
    meshd.kubectl("cluster1", "apply", "-f", "-", stdin=EXTERNAL)
    try:
        eventually("the external clusters", lambda: {ORIGINATION, DB} <= set(fetch(meshd, CDS, sidecar(1))))
        clusters = fetch(meshd, CDS, sidecar(1))
        cnn = clusters[ORIGINATION]
        assert (cnn["type"], socket_addresses(cnn)) == ("STRICT_DNS", [("edition.cnn.com", 443)])
        tls = cnn["transportSocket"]["typedConfig"]
        assert tls["sni"] == "edition.cnn.com"
        root = tls["commonTlsContext"]["combinedValidationContext"]["validationContextSdsSecretConfig"]["name"]
        assert root == "file-root:system"
        db = clusters[DB]
        assert (db["type"], socket_addresses(db)) == ("STRICT_DNS", [("db.example.org", 5432)])
        assert PRIVATE not in clusters
        system = node("sidecar~10.10.0.97~client.istio-system~istio-system.svc.cluster.local",
                      NETWORK="network1", CLUSTER_ID="cluster1")
        private = fetch(meshd, CDS, system, [PRIVATE])[PRIVATE]
        assert (private["type"], socket_addresses(private)) == ("LOGICAL_DNS", [("private.example.com", 443)])
    finally:
        meshd.kubectl("cluster1", "delete", "-f", "-", stdin=EXTERNAL)


def test_config_dir_gives_the_same_eds_as_kubernetes(meshd, from_dir):
    for net in (1, 2):
        assert fetch(from_dir, EDS, sidecar(net), [HELLO]) == fetch(meshd, EDS, sidecar(net), [HELLO]), net


POD_SE = "outbound|80||hello-pods.example.com"
HELLO_V1 = "helloworld-v1-284dd6mmqf-fb4tw"
POD_ENTRY = """
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: hello-pods, namespace: sample}
spec:
  hosts: [hello-pods.example.com]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  workloadSelector: {labels: {app: helloworld, version: v1}}
"""


def pod_addresses(meshd) -> list[tuple[str, int]]:
    got = fetch(meshd, EDS, sidecar(1), [POD_SE]).get(POD_SE, {})
    sockets = [e["endpoint"]["address"]["socketAddress"] for loc in got.get("endpoints", []) for e in loc["lbEndpoints"]]
    return sorted((s["address"], s["portValue"]) for s in sockets)


def test_workload_selector_selects_ready_pods_until_their_label_goes(meshd):
    """The ServiceEntry selects both helloworld-v1 pods by label; only the ready one (10.10.0.7) becomes an
    endpoint, on the port its container names `http`. Dropping the label drops the endpoint."""
    meshd.kubectl("cluster1", "apply", "-f", "-", stdin=POD_ENTRY)
    try:
        eventually("the ready pod in the ServiceEntry's EDS", lambda: pod_addresses(meshd) == [("10.10.0.7", 5000)])
        [pod] = fetch(meshd, EDS, sidecar(1), [POD_SE])[POD_SE]["endpoints"]
        assert pod["locality"] == {"region": "us-east1", "zone": "us-east1-a"}
        [ep] = pod["lbEndpoints"]
        # The pod's own name: the fixture's pods have no controller owner reference.
        assert ep["metadata"]["filterMetadata"]["istio"] == {"workload": f"{HELLO_V1};sample;helloworld;v1;cluster1"}
        shards = meshd.json("/debug/endpointz")["hello-pods.example.com"]["sample"]["Shards"]
        assert list(shards) == ["External/cluster1"]
        [e] = shards["External/cluster1"]
        assert (e["kind"], e["serviceAccount"]) == ("Pod", "spiffe://cluster.local/ns/sample/sa/helloworld")

        meshd.kubectl("cluster1", "-n", "sample", "label", "pod", HELLO_V1, "version-")
        eventually("the unlabelled pod gone from the ServiceEntry's EDS", lambda: pod_addresses(meshd) == [])
    finally:
        meshd.kubectl("cluster1", "-n", "sample", "label", "--overwrite", "pod", HELLO_V1, "version=v1")
        meshd.kubectl("cluster1", "-n", "sample", "delete", "serviceentry", "hello-pods")
