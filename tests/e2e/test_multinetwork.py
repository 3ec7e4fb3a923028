"""Split-horizon EDS and the east-west gateway on the sandbox (cluster1/network1, cluster2/network2):
simulator objects in, the raw ADS client's resources out, compared exactly."""

from __future__ import annotations

import json
import socket

import pytest
from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2  # noqa: F401
from google.protobuf import json_format, struct_pb2

from meshd_proc import Meshd, eventually
from xdsharness import CDS, EDS, LDS, Ads, decode

HELLO = "outbound|5000||helloworld.sample.svc.cluster.local"
HELLO_SNI = "outbound_.5000_._.helloworld.sample.svc.cluster.local"
RATINGS_SNI = "outbound_.9080_._.ratings.sample.svc.cluster.local"
GW = "istio-eastwestgateway"


def node(node_id: str, **meta) -> base_pb2.Node:
    m = struct_pb2.Struct()
    m.update(meta)
    return base_pb2.Node(id=node_id, metadata=m)


def sidecar(net: int) -> base_pb2.Node:
    return node(f"sidecar~10.{net}0.0.99~client.sample~sample.svc.cluster.local",
                NETWORK=f"network{net}", CLUSTER_ID=f"cluster{net}")


def grpc_client(net: int) -> base_pb2.Node:
    return node(f"sidecar~10.{net}0.0.98~grpc.sample~sample.svc.cluster.local", GENERATOR="grpc",
                NAMESPACE="sample", NETWORK=f"network{net}", CLUSTER_ID=f"cluster{net}")


EAST_WEST_2 = node("router~10.20.0.50~istio-eastwestgateway-x.istio-system~istio-system.svc.cluster.local",
                   NETWORK="network2", REQUESTED_NETWORK_VIEW="network2", CLUSTER_ID="cluster2")


def fetch(meshd, type_url, n, names=()):
    ads = Ads(f"127.0.0.1:{meshd.grpc}")
    try:
        ads.send(type_url, node=n, resource_names=list(names))
        return {k: json_format.MessageToDict(v) for k, v in decode(ads.recv()).items()}
    finally:
        ads.close()


def lb(ip, port, weight, cluster, workload=";;;", health="HEALTHY"):
    """An Istio mTLS endpoint as istiod sends it: `istio.workload` is `<workload>;<namespace>;<canonical
    name>;<canonical revision>;<cluster>` (a network gateway has only its cluster)."""
    return {"endpoint": {"address": {"socketAddress": {"address": ip, "portValue": port}}},
            "healthStatus": health,
            "metadata": {"filterMetadata": {"envoy.transport_socket_match": {"tlsMode": "istio"},
                                            "istio": {"workload": f"{workload};{cluster}"}}},
            "loadBalancingWeight": weight}


def locality(region, zone, *eps):
    return {"locality": {"region": region, "zone": zone}, "lbEndpoints": list(eps),
            "loadBalancingWeight": sum(e["loadBalancingWeight"] for e in eps)}


def cla(name, *localities):
    return {"clusterName": name, "endpoints": list(localities)}


# The local endpoints each network sees of helloworld (cluster1: one ready, one not; cluster2: two).
C1_LOCAL = [
    locality("us-east1", "us-east1-a", lb("10.10.0.7", 5000, 1, "cluster1", "helloworld-v1-284dd6mmqf-fb4tw;sample;helloworld;v1")),
    locality("us-east1", "us-east1-b", lb("10.10.2.4", 5000, 1, "cluster1", "helloworld-v1-284dd6mmqf-fxrwt;sample;helloworld;v1",
                                          health="UNHEALTHY")),
]
C2_LOCAL = [
    locality("eu-west1", "eu-west1-a", lb("10.20.0.5", 5000, 1, "cluster2", "helloworld-v2-h989smkk4l-zgkks;sample;helloworld;v2")),
    locality("eu-west1", "eu-west1-b", lb("10.20.1.5", 5000, 1, "cluster2", "helloworld-v2-h989smkk4l-tcsdh;sample;helloworld;v2")),
]


# The sandbox's VM (WorkloadEntry in the config cluster cluster1, on network2, weight 2, in eu-west1-a),
# selected by the helloworld Service: network2's endpoints are cluster2's pods and the VM.
VM = lb("10.202.0.5", 5000, 2, "cluster1", "helloworld-vm-10.202.0.5;sample;helloworld;vm")
N2_LOCAL = [
    locality("eu-west1", "eu-west1-a", *C2_LOCAL[0]["lbEndpoints"], VM),
    C2_LOCAL[1],
]


def via_gateway_2(ip="198.51.100.10"):
    """network2's helloworld endpoints behind its gateway: a pod (1) and the VM (2) in eu-west1-a, a pod
    in eu-west1-b. Envoy keeps one endpoint per address, so the gateway is sent once, in the first
    locality, weighing all 4, and names the cluster it carries the most weight for (the VM's cluster1)."""
    return [locality("eu-west1", "eu-west1-a", lb(ip, 15443, 4, "cluster1"))]


@pytest.fixture(scope="module")
def meshd(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("multinetwork"))
    # Ready means synced; the aggregate publishes the last registry's view after its debounce.
    eventually("the VM among helloworld's endpoints", lambda: "External/cluster1" in m.json("/debug/endpointz")
               .get("helloworld.sample.svc.cluster.local", {}).get("sample", {}).get("Shards", {}))
    yield m
    assert m.stop() == 0, m.log()


def test_networkz_lists_each_clusters_gateway(meshd):
    # Ready means synced; the aggregate publishes after its debounce.
    eventually("both gateways", lambda: len(meshd.json("/debug/networkz")) == 2)
    assert meshd.json("/debug/networkz") == [
        {"Network": "network1", "Cluster": "cluster1", "Addr": "192.0.2.10", "Port": 15443, "HBONEPort": 0,
         "ServiceAccount": ""},
        {"Network": "network2", "Cluster": "cluster2", "Addr": "198.51.100.10", "Port": 15443, "HBONEPort": 0,
         "ServiceAccount": ""},
    ]


def test_network1_sidecar_reaches_cluster2_through_its_gateway(meshd):
    got = fetch(meshd, EDS, sidecar(1), [HELLO])[HELLO]
    assert got == cla(HELLO, *via_gateway_2(), *C1_LOCAL)


def test_network1_grpc_client_is_not_sent_a_gateway_it_cannot_cross(meshd):
    # Proxyless gRPC sends no SNI: cluster2's endpoints (and the VM on network2) are dropped, not
    # replaced by network2's gateway.
    assert fetch(meshd, EDS, grpc_client(1), [HELLO])[HELLO] == cla(HELLO, *C1_LOCAL)


def test_network2_gets_the_mirror_image(meshd):
    # cluster1 has one ready helloworld: its gateway with weight 1, in that endpoint's locality.
    gateway = locality("us-east1", "us-east1-a", lb("192.0.2.10", 15443, 1, "cluster1"))
    assert fetch(meshd, EDS, sidecar(2), [HELLO])[HELLO] == cla(HELLO, *N2_LOCAL, gateway)
    assert fetch(meshd, EDS, grpc_client(2), [HELLO])[HELLO] == cla(HELLO, *N2_LOCAL)


def test_sidecar_clusters_send_the_sni_the_gateway_routes_by(meshd):
    tls = fetch(meshd, CDS, sidecar(1))[HELLO]["transportSocketMatches"][0]["transportSocket"]["typedConfig"]
    assert tls["sni"] == HELLO_SNI


def test_east_west_gateway_listener_routes_each_sni_to_its_cluster(meshd):
    listeners = fetch(meshd, LDS, EAST_WEST_2)
    assert list(listeners) == ["0.0.0.0_15443"]
    lis = listeners["0.0.0.0_15443"]
    assert lis["address"] == {"socketAddress": {"address": "0.0.0.0", "portValue": 15443}}
    assert lis["trafficDirection"] == "OUTBOUND"
    assert lis["listenerFilters"] == [{
        "name": "envoy.filters.listener.tls_inspector",
        "typedConfig": {"@type": "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"},
    }]
    chains = {c["filterChainMatch"]["serverNames"][0]: c for c in lis["filterChains"]}
    assert all(len(c["filterChainMatch"]["serverNames"]) == 1 for c in lis["filterChains"])
    # istiod's allIstioMtlsALPNs: a chain admits only Istio mTLS handshakes.
    alpns = ["istio", "istio-peer-exchange", "istio-http/1.0", "istio-http/1.1", "istio-h2"]
    assert chains[HELLO_SNI] == {
        "filterChainMatch": {"serverNames": [HELLO_SNI], "applicationProtocols": alpns},
        "filters": [{"name": "envoy.filters.network.tcp_proxy", "typedConfig": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
            "statPrefix": HELLO_SNI, "cluster": HELLO_SNI}}],
    }
    # One chain per SNI-DNAT cluster, each service port's and each subset's of its DestinationRule, but
    # for mesh-external services (the sandbox's api.example.com), which istiod's AUTO_PASSTHROUGH skips.
    sni_dnat = {n for n in fetch(meshd, CDS, EAST_WEST_2) if n.startswith("outbound_.")}
    assert set(chains) == {n for n in sni_dnat if not n.endswith(".api.example.com")}


def test_east_west_gateway_sni_clusters_hold_local_mtls_endpoints_only(meshd):
    clusters = fetch(meshd, CDS, EAST_WEST_2)
    sni = clusters[HELLO_SNI]
    # istiod's outbound defaults (load balancer, circuit breakers, metadata) and no TLS of its own: the
    # client's mTLS passes through.
    assert {k: sni[k] for k in ("name", "type", "connectTimeout", "edsClusterConfig", "lbPolicy")} == {
        "name": HELLO_SNI, "type": "EDS", "connectTimeout": "10s", "lbPolicy": "LEAST_REQUEST",
        "edsClusterConfig": {"edsConfig": {"ads": {}, "initialFetchTimeout": "0s", "resourceApiVersion": "V3"},
                             "serviceName": HELLO_SNI},
    }
    assert "transportSocket" not in sni and "transportSocketMatches" not in sni, sni
    assert fetch(meshd, EDS, EAST_WEST_2, [HELLO_SNI])[HELLO_SNI] == cla(HELLO_SNI, *N2_LOCAL)
    # ratings-v2 is plaintext: it cannot take the passed-through mTLS, so only the two v1 pods.
    assert fetch(meshd, EDS, EAST_WEST_2, [RATINGS_SNI])[RATINGS_SNI] == cla(
        RATINGS_SNI,
        locality("eu-west1", "eu-west1-a", lb("10.20.0.13", 9080, 1, "cluster2", "ratings-v1-bhkln45tpw-zs5xh;sample;ratings;v1")),
        locality("eu-west1", "eu-west1-b", lb("10.20.1.9", 9080, 1, "cluster2", "ratings-v1-bhkln45tpw-2j58r;sample;ratings;v1")),
    )


def test_a_sidecar_is_not_a_gateway(meshd):
    assert not any(n.startswith("outbound_.") for n in fetch(meshd, CDS, sidecar(2)))


def patch_gateway_status(meshd, ingress):
    meshd.kubectl("cluster2", "-n", "istio-system", "patch", "svc", GW, "--subresource=status",
                  "--type=merge", "-p", json.dumps({"status": {"loadBalancer": {"ingress": ingress}}}))


def hello_from_network1(meshd):
    return fetch(meshd, EDS, sidecar(1), [HELLO])[HELLO]


def test_gateway_changes_address_disappears_and_comes_back(meshd):
    try:
        patch_gateway_status(meshd, [{"ip": "198.51.100.11"}])
        want = cla(HELLO, *via_gateway_2("198.51.100.11"), *C1_LOCAL)
        eventually("the new gateway address", lambda: hello_from_network1(meshd) == want)

        # A second address (an externalIP): two gateways, LCM 2, every weight doubled.
        meshd.kubectl("cluster2", "-n", "istio-system", "patch", "svc", GW, "--type=merge",
                      "-p", json.dumps({"spec": {"externalIPs": ["198.51.100.20"]}}))
        doubled = [dict(l, loadBalancingWeight=2, lbEndpoints=[dict(e, loadBalancingWeight=2) for e in l["lbEndpoints"]])
                   for l in C1_LOCAL]
        # Each endpoint's scaled weight is split over the two: eu-west1-a (pod 2 + VM 4) gives 3 each,
        # eu-west1-b (pod 2) 1 each, merged into eu-west1-a (one endpoint per address).
        two = [locality("eu-west1", "eu-west1-a", lb("198.51.100.11", 15443, 4, "cluster1"),
                        lb("198.51.100.20", 15443, 4, "cluster1"))]
        eventually("two gateways", lambda: hello_from_network1(meshd) == cla(HELLO, *two, *doubled))

        # The label goes: network2 has no gateway, so its endpoints are sent directly (istiod's rule).
        meshd.kubectl("cluster2", "-n", "istio-system", "label", "svc", GW, "topology.istio.io/network-")
        eventually("direct endpoints", lambda: hello_from_network1(meshd) == cla(HELLO, *N2_LOCAL, *C1_LOCAL))
        eventually("networkz without network2",
                   lambda: [g["Network"] for g in meshd.json("/debug/networkz")] == ["network1"])
    finally:
        meshd.kubectl("cluster2", "-n", "istio-system", "label", "--overwrite", "svc", GW,
                      "topology.istio.io/network=network2")
        meshd.kubectl("cluster2", "-n", "istio-system", "patch", "svc", GW, "--type=json",
                      "-p", json.dumps([{"op": "remove", "path": "/spec/externalIPs"}]))
        patch_gateway_status(meshd, [{"ip": "198.51.100.10"}])
    eventually("the original gateway back", lambda: hello_from_network1(meshd) == cla(HELLO, *via_gateway_2(), *C1_LOCAL))


def test_hostname_gateways_are_resolved_by_meshd(meshd):
    try:
        # `.invalid` never resolves: no usable gateway, so network2's endpoints go direct.
        patch_gateway_status(meshd, [{"hostname": "gw.invalid"}])
        eventually("direct endpoints while DNS fails",
                   lambda: hello_from_network1(meshd) == cla(HELLO, *N2_LOCAL, *C1_LOCAL))
        eventually("the failure logged", lambda: "gw.invalid" in meshd.log())

        patch_gateway_status(meshd, [{"hostname": "localhost"}])
        ips = sorted({a[4][0] for a in socket.getaddrinfo("localhost", 0, proto=socket.IPPROTO_TCP)})
        eventually("localhost's addresses in networkz", lambda: sorted(
            g["Addr"] for g in meshd.json("/debug/networkz") if g.get("Hostname") == "localhost") == ips)
        got = hello_from_network1(meshd)
        remote = [e["endpoint"]["address"]["socketAddress"]["address"]
                  for l in got["endpoints"] if l["locality"]["region"] == "eu-west1" for e in l["lbEndpoints"]]
        assert sorted(set(remote)) == ips
    finally:
        patch_gateway_status(meshd, [{"ip": "198.51.100.10"}])
    eventually("the original gateway back", lambda: hello_from_network1(meshd) == cla(HELLO, *via_gateway_2(), *C1_LOCAL))


FAILOVER_BY_VERSION = """
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: helloworld-by-version, namespace: sample}
spec:
  host: helloworld.sample.svc.cluster.local
  trafficPolicy:
    outlierDetection: {consecutive5xxErrors: 5, interval: 10s, baseEjectionTime: 30s}
    loadBalancer:
      localityLbSetting: {enabled: true, failoverPriority: [version]}
"""


def priorities(meshd, version: str) -> dict[str, int]:
    """address → priority of helloworld's endpoints for a network1 sidecar labelled ``version``."""
    n = node("sidecar~10.10.0.99~client.sample~sample.svc.cluster.local", NETWORK="network1",
             CLUSTER_ID="cluster1", NAMESPACE="sample", LABELS={"app": "client", "version": version})
    got = fetch(meshd, EDS, n, [HELLO])[HELLO]
    return {e["endpoint"]["address"]["socketAddress"]["address"]: loc.get("priority", 0)
            for loc in got["endpoints"] for e in loc["lbEndpoints"]}


def test_failover_priority_on_a_pod_label_survives_the_gateway(meshd):
    """★ istio#49500: `failoverPriority: [version]` ranks network2's pods behind the gateway by their own
    `version` (v2; the VM's `vm`), which the gateway endpoint carries; istiod's gateway endpoint has no
    `version` and would rank last for a v2 client too."""
    meshd.kubectl("cluster1", "apply", "-f", "-", stdin=FAILOVER_BY_VERSION)
    try:
        gw, v1 = "198.51.100.10", "10.10.0.7"
        eventually("v2 client: network2's v2 pods first, through the gateway",
                   lambda: priorities(meshd, "v2") == {gw: 0, v1: 1, "10.10.2.4": 1})
        assert priorities(meshd, "v1") == {v1: 0, "10.10.2.4": 0, gw: 1}
    finally:
        meshd.kubectl("cluster1", "delete", "-f", "-", stdin=FAILOVER_BY_VERSION)
    eventually("every endpoint at priority 0 again", lambda: set(priorities(meshd, "v2").values()) == {0})
