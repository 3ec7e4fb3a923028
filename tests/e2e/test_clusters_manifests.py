"""Consistency checks for the embedded default topology in ``clusters/``.

Requirements: Python 3.8+, pytest and PyYAML only (no cluster, no meshd binary).

    python3 -m venv /tmp/cvenv
    /tmp/cvenv/bin/pip install -q pytest pyyaml
    /tmp/cvenv/bin/pytest tests/e2e/test_clusters_manifests.py   # from the repo root

Every ``clusters/<cluster>/*.yaml`` document is loaded in the order meshd applies
them (folders sorted, files sorted lexically, documents in file order), and the
rules documented in ``clusters/README.md`` are asserted: slice addresses are pod
IPs of the same cluster, pods sit on existing nodes, slice zones match node zones,
every Service with pods has EndpointSlices, port names line up, network labels are
present, and no IP is used by two clusters.

The generic rules hold for any cluster folder; ``test_default_topology_*`` pin
the shape of the shipped cluster1/cluster2 topology described in the README.
"""

from __future__ import annotations

import ipaddress
import re
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLUSTERS_DIR = REPO / "clusters"

NETWORK_LABEL = "topology.istio.io/network"
TLS_MODE_LABEL = "security.istio.io/tlsMode"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
HOSTNAME_LABEL = "kubernetes.io/hostname"
GATEWAY = ("istio-system", "istio-eastwestgateway")

# Istio protocol selection: port name "<proto>" or "<proto>-<suffix>", or appProtocol.
PROTOCOL_PREFIXES = ("http", "http2", "https", "grpc", "grpc-web", "tcp", "tls", "udp",
                     "mongo", "mysql", "redis")
# Istio's own gateway ports that carry no protocol prefix.
UNPREFIXED_GATEWAY_PORTS = {"status-port"}

TEST_NETS = [ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")]

CLUSTER_SCOPED = {"Namespace", "Node"}
SLICE_NAME_RE = re.compile(r"^(?P<svc>[a-z0-9-]+)-[a-z0-9]{5}$")


# --------------------------------------------------------------------------- loading


class Cluster:
    def __init__(self, name: str):
        self.name = name
        self.docs: list[tuple[str, dict]] = []  # (file, doc) in apply order

    def of(self, kind):
        return [d for _, d in self.docs if d.get("kind") == kind]

    def by_name(self, kind):
        return {d["metadata"]["name"]: d for d in self.of(kind)}

    def by_ns_name(self, kind):
        return {(d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in self.of(kind)}

    @property
    def nodes(self):
        return self.by_name("Node")

    @property
    def pods(self):
        return self.of("Pod")

    @property
    def services(self):
        return self.of("Service")

    @property
    def slices(self):
        return self.of("EndpointSlice")

    def network(self):
        ns = self.by_name("Namespace").get("istio-system")
        return ((ns or {}).get("metadata", {}).get("labels") or {}).get(NETWORK_LABEL)


def _load() -> dict[str, Cluster]:
    clusters = {}
    for folder in sorted(p for p in CLUSTERS_DIR.iterdir() if p.is_dir()):
        c = Cluster(folder.name)
        for f in sorted(folder.iterdir()):
            if f.suffix not in (".yaml", ".yml"):
                continue
            with f.open() as fh:
                for doc in yaml.safe_load_all(fh):
                    if doc is None:
                        continue
                    c.docs.append((f"{folder.name}/{f.name}", doc))
        clusters[folder.name] = c
    return clusters


CLUSTERS = _load()
CLUSTER_NAMES = sorted(CLUSTERS)


@pytest.fixture(params=CLUSTER_NAMES)
def cluster(request) -> Cluster:
    return CLUSTERS[request.param]


# --------------------------------------------------------------------------- helpers


def labels(obj) -> dict:
    return obj["metadata"].get("labels") or {}


def ns_name(obj):
    return f'{obj["metadata"].get("namespace", "")}/{obj["metadata"]["name"]}'


def pod_ready(pod) -> bool:
    for cond in pod["status"].get("conditions") or []:
        if cond["type"] == "Ready":
            return cond["status"] == "True"
    return False


def node_internal_ip(node):
    for a in node["status"]["addresses"]:
        if a["type"] == "InternalIP":
            return a["address"]
    return None


def node_ips(node):
    return [a["address"] for a in node["status"]["addresses"] if a["type"] in ("InternalIP", "ExternalIP")]


def selects(selector: dict, pod) -> bool:
    if not selector:
        return False
    pl = labels(pod)
    return all(pl.get(k) == v for k, v in selector.items())


def selected_pods(cluster: Cluster, svc):
    ns = svc["metadata"]["namespace"]
    sel = svc["spec"].get("selector") or {}
    return [p for p in cluster.pods if p["metadata"]["namespace"] == ns and selects(sel, p)]


def slices_of(cluster: Cluster, svc):
    ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
    return [s for s in cluster.slices
            if s["metadata"]["namespace"] == ns and labels(s).get(SERVICE_NAME_LABEL) == name]


def resolve_target_port(port, pod):
    tp = port.get("targetPort", port["port"])
    if isinstance(tp, int):
        return tp
    for c in pod["spec"]["containers"]:
        for cp in c.get("ports") or []:
            if cp.get("name") == tp:
                return cp["containerPort"]
    return None


def all_cluster_ips(cluster: Cluster):
    """Every IP a cluster owns: pod IPs, node IPs, Service VIPs, load-balancer IPs."""
    ips = defaultdict(list)
    for p in cluster.pods:
        ips[p["status"]["podIP"]].append(f"pod {ns_name(p)}")
    for n in cluster.nodes.values():
        for ip in node_ips(n):
            ips[ip].append(f"node {n['metadata']['name']}")
    for s in cluster.services:
        for ip in s["spec"].get("clusterIPs") or [s["spec"].get("clusterIP")]:
            if ip and ip != "None":
                ips[ip].append(f"service {ns_name(s)}")
        for ing in ((s.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
            if ing.get("ip"):
                ips[ing["ip"]].append(f"lb {ns_name(s)}")
    return ips


# --------------------------------------------------------------------------- generic rules


def test_topology_has_clusters():
    assert len(CLUSTERS) >= 2, f"expected at least two cluster folders under {CLUSTERS_DIR}"
    for c in CLUSTERS.values():
        assert c.docs, f"{c.name}: no manifests"


def test_docs_well_formed_and_apply_order(cluster):
    seen = set()
    namespaces_so_far = set()
    for f, d in cluster.docs:
        assert d.get("apiVersion") and d.get("kind"), f"{f}: document without apiVersion/kind"
        md = d.get("metadata") or {}
        assert md.get("name"), f"{f}: {d['kind']} without metadata.name"
        if d["kind"] == "Namespace":
            namespaces_so_far.add(md["name"])
        if d["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in md, f"{f}: cluster-scoped {d['kind']} {md['name']} has a namespace"
        else:
            ns = md.get("namespace")
            assert ns, f"{f}: {d['kind']} {md['name']} has no namespace"
            assert ns in namespaces_so_far, (
                f"{f}: {d['kind']} {ns}/{md['name']} applied before its Namespace exists")
        key = (d["apiVersion"], d["kind"], md.get("namespace"), md["name"])
        assert key not in seen, f"{f}: duplicate {key}"
        seen.add(key)


def test_istio_system_network_label(cluster):
    ns = cluster.by_name("Namespace").get("istio-system")
    assert ns, f"{cluster.name}: no istio-system namespace"
    assert labels(ns).get(NETWORK_LABEL), f"{cluster.name}: istio-system lacks {NETWORK_LABEL}"


def test_networks_are_distinct():
    nets = {c.name: c.network() for c in CLUSTERS.values()}
    assert len(set(nets.values())) == len(nets), f"clusters share a network: {nets}"


def test_eastwest_gateway_service(cluster):
    svc = cluster.by_ns_name("Service").get(GATEWAY)
    assert svc, f"{cluster.name}: no istio-system/istio-eastwestgateway Service"
    lb = labels(svc)
    assert lb.get(NETWORK_LABEL) == cluster.network(), f"{cluster.name}: gateway network label mismatch"
    assert lb.get("istio") == "eastwestgateway"
    assert lb.get("app") == "istio-eastwestgateway"
    assert svc["spec"]["type"] == "LoadBalancer"
    ports = {p["name"]: p for p in svc["spec"]["ports"]}
    for name, num in {"tls": 15443, "status-port": 15021, "tls-istiod": 15012, "tls-webhook": 15017}.items():
        assert name in ports and ports[name]["port"] == num, f"{cluster.name}: gateway port {name}/{num} missing"
    ingress = svc["status"]["loadBalancer"]["ingress"]
    ip = ipaddress.ip_address(ingress[0]["ip"])
    assert any(ip in n for n in TEST_NETS), f"{cluster.name}: gateway LB IP {ip} is not a TEST-NET address"
    pods = selected_pods(cluster, svc)
    assert pods, f"{cluster.name}: gateway Service selects no pods"
    for p in pods:
        assert labels(p).get(NETWORK_LABEL) == cluster.network()


def test_gateway_addresses_distinct():
    ips = [CLUSTERS[c].by_ns_name("Service")[GATEWAY]["status"]["loadBalancer"]["ingress"][0]["ip"]
           for c in CLUSTER_NAMES]
    assert len(set(ips)) == len(ips), f"gateway addresses collide: {ips}"


def test_nodes(cluster):
    nodes = cluster.nodes
    assert 2 <= len(nodes), f"{cluster.name}: expected at least 2 nodes"
    regions = set()
    for name, n in nodes.items():
        lb = labels(n)
        assert lb.get(HOSTNAME_LABEL) == name, f"{name}: {HOSTNAME_LABEL} != node name"
        assert lb.get(REGION_LABEL), f"{name}: no region label"
        assert lb.get(ZONE_LABEL, "").startswith(lb[REGION_LABEL]), f"{name}: zone not in region"
        regions.add(lb[REGION_LABEL])
        assert node_internal_ip(n), f"{name}: no InternalIP"
        assert n["spec"].get("podCIDR"), f"{name}: no spec.podCIDR"
        ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", f"{name}: node not Ready"
    assert len(regions) == 1, f"{cluster.name}: nodes span several regions {regions}"
    cidrs = [ipaddress.ip_network(n["spec"]["podCIDR"]) for n in nodes.values()]
    for i, a in enumerate(cidrs):
        for b in cidrs[i + 1:]:
            assert not a.overlaps(b), f"{cluster.name}: node pod CIDRs {a} and {b} overlap"


def test_pods(cluster):
    nodes = cluster.nodes
    sas = cluster.by_ns_name("ServiceAccount")
    seen_ips = {}
    for p in cluster.pods:
        name = ns_name(p)
        spec, st, lb = p["spec"], p["status"], labels(p)
        node = nodes.get(spec.get("nodeName"))
        assert node, f"{cluster.name}: pod {name} on unknown node {spec.get('nodeName')}"
        assert st["phase"] == "Running", f"{name}: not Running"
        assert st["hostIP"] == node_internal_ip(node), f"{name}: hostIP != node InternalIP"
        ip = ipaddress.ip_address(st["podIP"])
        assert ip in ipaddress.ip_network(node["spec"]["podCIDR"]), f"{name}: podIP {ip} outside node podCIDR"
        assert st["podIP"] not in seen_ips, f"{name}: podIP {ip} also used by {seen_ips[st['podIP']]}"
        seen_ips[st["podIP"]] = name
        assert [x["ip"] for x in st.get("podIPs", [{"ip": st["podIP"]}])][0] == st["podIP"]
        assert any(c["type"] == "Ready" for c in st["conditions"]), f"{name}: no Ready condition"
        ready = pod_ready(p)
        for cs in st.get("containerStatuses") or []:
            assert cs["ready"] == ready, f"{name}: containerStatuses disagree with Ready condition"
        assert len(spec["containers"]) >= 1 and spec["containers"][0].get("ports"), f"{name}: no container ports"
        sa = spec.get("serviceAccountName")
        assert sa and (p["metadata"]["namespace"], sa) in sas, f"{name}: ServiceAccount {sa!r} missing"
        assert lb.get("app"), f"{name}: no app label"
        if TLS_MODE_LABEL in lb:
            assert lb[TLS_MODE_LABEL] == "istio", f"{name}: unexpected tlsMode {lb[TLS_MODE_LABEL]}"
            assert lb.get("service.istio.io/canonical-name"), f"{name}: meshed pod without canonical-name"
            assert lb.get("service.istio.io/canonical-revision"), f"{name}: meshed pod without canonical-revision"
        if NETWORK_LABEL in lb:
            assert lb[NETWORK_LABEL] == cluster.network(), f"{name}: pod network label != cluster network"


def test_services(cluster):
    for svc in cluster.services:
        name = ns_name(svc)
        spec = svc["spec"]
        assert spec.get("type") in ("ClusterIP", "LoadBalancer", "NodePort"), f"{name}: type {spec.get('type')}"
        ipaddress.ip_address(spec["clusterIP"])
        assert spec.get("clusterIPs", [spec["clusterIP"]])[0] == spec["clusterIP"]
        assert spec.get("selector"), f"{name}: no selector"
        names = [p.get("name") for p in spec["ports"]]
        assert all(names) and len(set(names)) == len(names), f"{name}: ports must be uniquely named"
        for p in spec["ports"]:
            n = p["name"]
            ok = (p.get("appProtocol") or n in UNPREFIXED_GATEWAY_PORTS
                  or any(n == pre or n.startswith(pre + "-") for pre in PROTOCOL_PREFIXES))
            assert ok, f"{name}: port {n!r} has neither a protocol prefix nor appProtocol"


def test_service_vips_unique_within_cluster(cluster):
    vips = [s["spec"]["clusterIP"] for s in cluster.services]
    assert len(set(vips)) == len(vips), f"{cluster.name}: duplicate ClusterIPs"


def test_every_service_with_pods_has_matching_slices(cluster):
    for svc in cluster.services:
        name = ns_name(svc)
        pods = selected_pods(cluster, svc)
        slices = slices_of(cluster, svc)
        if not pods:
            assert not [e for s in slices for e in s.get("endpoints") or []], f"{name}: endpoints but no pods"
            continue
        assert slices, f"{cluster.name}: Service {name} has pods but no EndpointSlice"
        by_ip = {p["status"]["podIP"]: p for p in pods}
        slice_ips = []
        for s in slices:
            sname = s["metadata"]["name"]
            m = SLICE_NAME_RE.match(sname)
            assert m and m.group("svc") == svc["metadata"]["name"], f"{sname}: not named <svc>-<5 chars>"
            assert s["addressType"] == "IPv4"
            assert labels(s).get(MANAGED_BY_LABEL) == "endpointslice-controller.k8s.io"
            # ports: same names as the Service, numbers = resolved target ports
            sports = {p["name"]: p for p in s["ports"]}
            assert set(sports) == {p["name"] for p in svc["spec"]["ports"]}, f"{sname}: port names differ"
            for sp in svc["spec"]["ports"]:
                want = {resolve_target_port(sp, p) for p in pods}
                assert len(want) == 1 and None not in want, f"{name}: targetPort {sp.get('targetPort')} ambiguous"
                ep = sports[sp["name"]]
                assert ep["port"] == want.pop(), f"{sname}: port {sp['name']} != target port"
                assert ep.get("protocol", "TCP") == sp.get("protocol", "TCP")
                assert ep.get("appProtocol") == sp.get("appProtocol"), f"{sname}: appProtocol mismatch"
            for e in s["endpoints"]:
                assert len(e["addresses"]) == 1
                ip = e["addresses"][0]
                pod = by_ip.get(ip)
                assert pod, f"{sname}: address {ip} is not the IP of a pod selected by {name} in {cluster.name}"
                slice_ips.append(ip)
                tr = e["targetRef"]
                assert tr["kind"] == "Pod" and tr["name"] == pod["metadata"]["name"]
                assert tr["namespace"] == pod["metadata"]["namespace"]
                assert e["nodeName"] == pod["spec"]["nodeName"], f"{sname}: {ip} nodeName mismatch"
                node = cluster.nodes[e["nodeName"]]
                assert e["zone"] == labels(node)[ZONE_LABEL], f"{sname}: {ip} zone != node zone"
                ready = pod_ready(pod)
                cond = e["conditions"]
                assert cond["ready"] == ready, f"{sname}: {ip} ready={cond['ready']} but pod Ready={ready}"
                assert cond["serving"] == ready, f"{sname}: {ip} serving inconsistent with pod readiness"
                assert cond["terminating"] is False
        assert sorted(slice_ips) == sorted(by_ip), f"{name}: slice addresses != selected pod IPs"


def test_every_slice_belongs_to_a_service(cluster):
    svcs = cluster.by_ns_name("Service")
    for s in cluster.slices:
        key = (s["metadata"]["namespace"], labels(s).get(SERVICE_NAME_LABEL))
        assert key in svcs, f"{cluster.name}: slice {ns_name(s)} points at unknown Service {key}"


def test_service_exists_wherever_it_has_pods():
    """A Service defined in any cluster must exist in every cluster where its selector matches pods."""
    defs = {}
    for c in CLUSTERS.values():
        for s in c.services:
            defs.setdefault((s["metadata"]["namespace"], s["metadata"]["name"]), s)
    for key, svc in defs.items():
        for c in CLUSTERS.values():
            if selected_pods(c, svc):
                assert key in c.by_ns_name("Service"), f"{c.name} runs pods of {key} but lacks the Service"


def test_same_service_ports_agree_across_clusters():
    seen = {}
    for c in CLUSTERS.values():
        for s in c.services:
            key = (s["metadata"]["namespace"], s["metadata"]["name"])
            ports = sorted((p["name"], p["port"], p.get("appProtocol")) for p in s["spec"]["ports"])
            if key in seen:
                assert seen[key][1] == ports, f"{key}: ports differ between {seen[key][0]} and {c.name}"
            else:
                seen[key] = (c.name, ports)


def test_no_ip_overlap_across_clusters():
    owners = {}
    for c in CLUSTERS.values():
        ips = all_cluster_ips(c)
        for ip, who in ips.items():
            # within a cluster an IP has one owner (a node's IP is not a pod's IP, etc.)
            assert len(who) == 1, f"{c.name}: {ip} used by {who}"
            assert ip not in owners, f"{ip} used in {owners.get(ip)} and {c.name} ({who[0]})"
            owners[ip] = c.name
    # and the pod CIDRs of different clusters are disjoint
    cidrs = [(c.name, ipaddress.ip_network(n["spec"]["podCIDR"]))
             for c in CLUSTERS.values() for n in c.nodes.values()]
    for i, (ca, a) in enumerate(cidrs):
        for cb, b in cidrs[i + 1:]:
            if ca != cb:
                assert not a.overlaps(b), f"pod CIDR {a} ({ca}) overlaps {b} ({cb})"


# --------------------------------------------------------------------------- default topology


def DEFAULT():
    """The two shipped clusters; clusters added later are covered by the generic rules only."""
    return [CLUSTERS["cluster1"], CLUSTERS["cluster2"]]


def _versions(cluster_name, app):
    c = CLUSTERS[cluster_name]
    return sorted({labels(p).get("version") for p in c.pods
                   if p["metadata"]["namespace"] == "sample" and labels(p).get("app") == app})


def _svc(cluster_name, name):
    return CLUSTERS[cluster_name].by_ns_name("Service").get(("sample", name))


@pytest.mark.skipif(not {"cluster1", "cluster2"} <= set(CLUSTERS), reason="default topology not present")
class TestDefaultTopology:
    def test_networks(self):
        assert CLUSTERS["cluster1"].network() == "network1"
        assert CLUSTERS["cluster2"].network() == "network2"

    def test_regions(self):
        for cl, region in (("cluster1", "us-east1"), ("cluster2", "eu-west1")):
            nodes = CLUSTERS[cl].nodes.values()
            assert {labels(n)[REGION_LABEL] for n in nodes} == {region}
            assert {labels(n)[ZONE_LABEL] for n in nodes} == {f"{region}-a", f"{region}-b"}
            assert any(a["type"] == "ExternalIP" for n in nodes for a in n["status"]["addresses"])

    def test_ip_conventions(self):
        for cl, pods, vips in (("cluster1", "10.10.0.0/16", "10.96.0.0/16"),
                               ("cluster2", "10.20.0.0/16", "10.97.0.0/16")):
            c = CLUSTERS[cl]
            for p in c.pods:
                assert ipaddress.ip_address(p["status"]["podIP"]) in ipaddress.ip_network(pods)
            for s in c.services:
                assert ipaddress.ip_address(s["spec"]["clusterIP"]) in ipaddress.ip_network(vips)
        assert CLUSTERS["cluster1"].by_ns_name("Service")[GATEWAY]["status"]["loadBalancer"]["ingress"][0]["ip"] \
            == "192.0.2.10"
        assert CLUSTERS["cluster2"].by_ns_name("Service")[GATEWAY]["status"]["loadBalancer"]["ingress"][0]["ip"] \
            == "198.51.100.10"

    def test_sample_namespace_injected(self):
        for c in DEFAULT():
            ns = c.by_name("Namespace")["sample"]
            assert labels(ns).get("istio-injection") == "enabled"

    def test_service_placement(self):
        for name in ("helloworld", "reviews", "echo"):
            assert _svc("cluster1", name) and _svc("cluster2", name), f"{name} must exist in both clusters"
        assert _svc("cluster1", "productpage") and not _svc("cluster2", "productpage")
        assert _svc("cluster2", "ratings") and not _svc("cluster1", "ratings")

    def test_version_split(self):
        assert _versions("cluster1", "helloworld") == ["v1"]
        assert _versions("cluster2", "helloworld") == ["v2"]
        assert _versions("cluster1", "reviews") == ["v1"]
        assert _versions("cluster2", "reviews") == ["v2", "v3"]
        assert _versions("cluster1", "productpage") == ["v1"]
        assert _versions("cluster1", "ratings") == []
        assert _versions("cluster2", "ratings")

    def test_ports(self):
        for cl in ("cluster1", "cluster2"):
            hw = {p["name"]: p["port"] for p in _svc(cl, "helloworld")["spec"]["ports"]}
            assert hw == {"http": 5000}
            assert {p["name"]: p["port"] for p in _svc(cl, "reviews")["spec"]["ports"]} == {"http": 9080}
            echo = {p["name"]: p["port"] for p in _svc(cl, "echo")["spec"]["ports"]}
            assert echo.get("grpc") == 7070
        assert {p["port"] for p in _svc("cluster1", "productpage")["spec"]["ports"]} == {9080}
        assert {p["port"] for p in _svc("cluster2", "ratings")["spec"]["ports"]} == {9080}

    def test_vips_differ_per_cluster(self):
        for name in ("helloworld", "reviews", "echo"):
            assert _svc("cluster1", name)["spec"]["clusterIP"] != _svc("cluster2", name)["spec"]["clusterIP"]

    def test_one_not_ready_pod_per_cluster(self):
        for c in DEFAULT():
            not_ready = [ns_name(p) for p in c.pods if not pod_ready(p)]
            assert len(not_ready) == 1, f"{c.name}: not-ready pods {not_ready}"

    def test_plaintext_workload_in_cluster2(self):
        plain = [ns_name(p) for p in CLUSTERS["cluster2"].pods
                 if p["metadata"]["namespace"] == "sample" and TLS_MODE_LABEL not in labels(p)]
        assert len(plain) == 1, plain
        meshed1 = [p for p in CLUSTERS["cluster1"].pods if p["metadata"]["namespace"] == "sample"]
        assert all(labels(p).get(TLS_MODE_LABEL) == "istio" for p in meshed1)

    def test_size(self):
        total = sum(len(c.pods) for c in DEFAULT())
        assert 20 <= total <= 30, f"{total} pods; keep the default topology small"
