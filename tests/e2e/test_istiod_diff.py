"""meshd vs the real istiod, xDS output diff (issue 28 §2).

One real API server (tests/e2e/realk8s.py) holds the config; meshd (``--kubeconfig``) and istiod
(``pilot-discovery``, tests/e2e/istiod.py) both watch it, with the same mesh config. For each scenario the
same raw ADS client (tests/e2e/xds_diff.py) fetches CDS, EDS, LDS and RDS for the same nodes from both
plaintext xDS ports, and the normalised field-by-field differences must equal the committed ones in
tests/e2e/istiod_diff/expected/<scenario>.json: a new difference fails, and so does a documented one that
went away (the file then needs updating, and docs/compatibility.md's "meshd vs istiod, output diff").
``ISTIOD_DIFF_UPDATE=1`` rewrites the files from this run.

Nodes: a proxyless gRPC client (``GENERATOR=grpc``, the metadata Istio's proxyless bootstrap sends) dialling
``echo.diff.svc.cluster.local:7070``, an Envoy sidecar (client-0, no Service's endpoint), and the sidecar of
pod echo-v1 (``server``: its inbound side serves echo); all in namespace ``diff`` of cluster1, network unset.
A scenario asks the nodes its conditions name.

Base config: namespace ``diff`` with Service ``echo`` (gRPC port 7070 → 17070) and Service ``web``
(HTTP port 80 → 8080); pods echo-v1 and echo-v2 (labels app, version and ``security.istio.io/tlsMode: istio``
as an injected sidecar has; no kubelet runs, so their status is written by hand: Running, Ready, an IP)
and web-0, and a StatefulSet's db-0 and db-1 (selected only by the headless scenario's Service);
hand-written EndpointSlices pointing at them (targetRef). Each scenario adds config (Istio's, or a Service
and its EndpointSlice), and removes it afterwards (both servers must come back to their base answer
before the next one).

Skips unless etcd, kube-apiserver and pilot-discovery are built (tests/peers/build.sh,
tests/peers/istiod/build.sh).
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
from pathlib import Path

import pytest

import istiod as istiod_mod
import realk8s
import xds_diff
from meshd_proc import Meshd
from xdsharness import grpc_node, sidecar_node

HERE = Path(__file__).resolve().parent
EXPECTED = HERE / "istiod_diff" / "expected"
NS = "diff"
ECHO = f"echo.{NS}.svc.cluster.local"
WEB = f"web.{NS}.svc.cluster.local"
MESH_CONFIG = "trustDomain: cluster.local\nrootNamespace: istio-system\n"
NODE_IP = "10.1.0.99"
PROXY_ID = f"sidecar~{NODE_IP}~client-0.{NS}~{NS}.svc.cluster.local"
# What istio-agent puts in every node, less what only a running pod has.
COMMON_META = {"NAMESPACE": NS, "CLUSTER_ID": "cluster1", "ISTIO_VERSION": "1.31.0", "MESH_ID": "cluster.local",
               "LABELS": {"app": "client"}, "INSTANCE_IPS": NODE_IP, "WORKLOAD_NAME": "client",
               "SERVICE_ACCOUNT": "default"}


def located(node):
    """The client runs in r1/z1 (as istio-agent reports its node's topology labels)."""
    node.locality.region, node.locality.zone = "r1", "z1"
    return node


# The sidecar of pod echo-v1 (10.1.0.1): an endpoint of echo, so its inbound side (virtualInbound on
# 15006, inbound|17070||) serves echo's port 17070.
SERVER_IP = "10.1.0.1"
GATEWAY_IP = "10.1.0.50"
SERVER_META = {**COMMON_META, "LABELS": {"app": "echo", "version": "v1", "security.istio.io/tlsMode": "istio"},
               "INSTANCE_IPS": SERVER_IP, "WORKLOAD_NAME": "echo-v1"}
NODES = {
    "grpc": (lambda: located(grpc_node(PROXY_ID, **COMMON_META)), [f"{ECHO}:7070"]),
    "sidecar": (lambda: located(sidecar_node(PROXY_ID, **COMMON_META)), None),
    "server": (lambda: located(sidecar_node(f"sidecar~{SERVER_IP}~echo-v1.{NS}~{NS}.svc.cluster.local",
                                            **SERVER_META)), None),
    # An ingress gateway pod in istio-system (no Service: server ports are listened on as written).
    "gateway": (lambda: located(sidecar_node(
        f"router~{GATEWAY_IP}~istio-ingressgateway-0.istio-system~istio-system.svc.cluster.local",
        **{**COMMON_META, "NAMESPACE": "istio-system", "INSTANCE_IPS": GATEWAY_IP,
           "WORKLOAD_NAME": "istio-ingressgateway", "SERVICE_ACCOUNT": "istio-ingressgateway-service-account",
           "LABELS": {"app": "istio-ingressgateway", "istio": "ingressgateway"}})), None),
}


def k8s_node(name: str, zone: str) -> dict:
    """A Node object (no kubelet behind it): its topology labels give the pods on it their locality."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/region": "r1",
                                                  "topology.kubernetes.io/zone": zone}}}


def pod(name: str, ip: str, labels: dict, node: str | None = None) -> tuple[dict, dict]:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels},
           "spec": {"containers": [{"name": "app", "image": "app"}], "automountServiceAccountToken": False,
                    **({"nodeName": node} if node else {})}}
    status = {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "192.0.2.10",
                         "conditions": [{"type": "Ready", "status": "True"}]}}
    return obj, status


def slice_(svc: str, port_name: str, port: int, pods: list[tuple[str, str]], protocol_hint: str | None = None) -> dict:
    p = {"name": port_name, "port": port, "protocol": "TCP"}
    if protocol_hint:
        p["appProtocol"] = protocol_hint
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{svc}-a", "namespace": NS, "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4", "ports": [p],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True},
                           "targetRef": {"kind": "Pod", "name": name, "namespace": NS}} for name, ip in pods]}


PODS = [
    pod("echo-v1", "10.1.0.1", {"app": "echo", "version": "v1", "security.istio.io/tlsMode": "istio"}, "node-a"),
    pod("echo-v2", "10.1.0.2", {"app": "echo", "version": "v2", "security.istio.io/tlsMode": "istio"}, "node-b"),
    pod("web-0", "10.1.0.3", {"app": "web", "version": "v1", "security.istio.io/tlsMode": "istio"}, "node-a"),
    # A StatefulSet's pods; no Service selects them but the headless scenario's.
    pod("db-0", "10.1.0.10", {"app": "db", "security.istio.io/tlsMode": "istio"}, "node-a"),
    pod("db-1", "10.1.0.11", {"app": "db", "security.istio.io/tlsMode": "istio"}, "node-b"),
]
BASE = [
    k8s_node("node-a", "z1"),
    k8s_node("node-b", "z2"),
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": NS},
     "spec": {"clusterIP": "10.96.10.10", "ports": [{"name": "grpc", "port": 7070, "targetPort": 17070, "appProtocol": "grpc"}]}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
     "spec": {"clusterIP": "10.96.10.20", "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}},
    slice_("echo", "grpc", 17070, [("echo-v1", "10.1.0.1"), ("echo-v2", "10.1.0.2")], "grpc"),
    slice_("web", "http", 8080, [("web-0", "10.1.0.3")]),
]

DR_SUBSETS = f"""
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: echo, namespace: {NS}}}
spec:
  host: {ECHO}
  subsets:
  - name: v1
    labels: {{version: v1}}
  - name: v2
    labels: {{version: v2}}
"""
VS_SPLIT = f"""
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: echo, namespace: {NS}}}
spec:
  hosts: [{ECHO}]
  http:
  - route:
    - destination: {{host: {ECHO}, subset: v1}}
      weight: 80
    - destination: {{host: {ECHO}, subset: v2}}
      weight: 20
"""
VS_HTTP_FEATURES = f"""
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: echo, namespace: {NS}}}
spec:
  hosts: [{ECHO}]
  http:
  - name: canary
    match:
    - headers: {{x-canary: {{exact: "true"}}}}
      uri: {{prefix: /echo.Echo/}}
    route:
    - destination: {{host: {ECHO}, subset: v2}}
    timeout: 5s
    retries: {{attempts: 3, perTryTimeout: 2s, retryOn: "unavailable,5xx"}}
    fault:
      abort: {{percentage: {{value: 10}}, grpcStatus: UNAVAILABLE}}
  - name: delegated
    match: [{{uri: {{prefix: /echo.Echo/Delegated}}}}]
    timeout: 3s
    delegate: {{name: echo-delegate}}
  - name: rewritten
    match: [{{uri: {{prefix: /v1/}}}}]
    rewrite: {{uriRegexRewrite: {{match: "^/v1/(.*)$", rewrite: '/\\1'}}, authority: echo.internal}}
    mirror: {{host: {ECHO}, subset: v1}}
    mirrorPercentage: {{value: 25}}
    corsPolicy:
      allowOrigins: [{{exact: "https://app.example"}}, {{regex: "https://.*[.]example"}}]
      allowMethods: [GET, POST]
      allowHeaders: [x-a]
      exposeHeaders: [x-b]
      maxAge: 24h
      allowCredentials: true
    retries: {{attempts: 2, retryOn: "unavailable,503"}}
    route:
    - destination: {{host: {ECHO}, subset: v2}}
  - name: mirrored
    match: [{{uri: {{prefix: /mirrored/}}}}]
    rewrite: {{uri: /}}
    mirrors:
    - destination: {{host: {ECHO}, subset: v1}}
    - destination: {{host: {ECHO}, subset: v2}}
      percentage: {{value: 5}}
    route:
    - destination: {{host: {ECHO}, subset: v1}}
  - name: moved
    match: [{{uri: {{exact: /old}}}}]
    redirect: {{uri: /new, authority: echo.example, redirectCode: 302}}
  - name: teapot
    match: [{{uri: {{prefix: /teapot}}}}]
    directResponse: {{status: 418, body: {{string: short and stout}}}}
    headers: {{response: {{set: {{x-why: teapot}}}}}}
  - name: default
    route:
    - destination: {{host: {ECHO}, subset: v1}}
      headers: {{request: {{set: {{x-route: default}}}}}}
    fault:
      delay: {{percentage: {{value: 5}}, fixedDelay: 1s}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: echo-delegate, namespace: {NS}}}
spec:
  http:
  - name: v2
    match: [{{uri: {{prefix: /echo.Echo/DelegatedV2}}}}]
    route:
    - destination: {{host: {ECHO}, subset: v2}}
  - name: outside
    match: [{{uri: {{prefix: /elsewhere}}}}]
    route:
    - destination: {{host: {ECHO}, subset: v2}}
  - route:
    - destination: {{host: {ECHO}, subset: v1}}
"""
PA_STRICT = f"""
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: default, namespace: {NS}}}
spec:
  mtls: {{mode: STRICT}}
"""
PA_DISABLE = PA_STRICT.replace("STRICT", "DISABLE")
# echo-v1's own policy: STRICT but plaintext on its target port 17070, and PERMISSIVE on 9000, which no
# Service targets (a passthrough chain set of its own).
PA_PORT_LEVEL = f"""
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: echo-v1, namespace: {NS}}}
spec:
  selector: {{matchLabels: {{app: echo, version: v1}}}}
  mtls: {{mode: STRICT}}
  portLevelMtls:
    17070: {{mode: DISABLE}}
    9000: {{mode: PERMISSIVE}}
"""
SERVICE_ENTRY = f"""
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: external, namespace: {NS}}}
spec:
  hosts: [api.example.com]
  location: MESH_EXTERNAL
  ports: [{{number: 443, name: tls, protocol: TLS}}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: vm, namespace: {NS}}}
spec:
  hosts: [vm.{NS}.example]
  location: MESH_INTERNAL
  ports: [{{number: 7070, name: grpc, protocol: GRPC, targetPort: 17070}}]
  resolution: STATIC
  endpoints:
  - address: 10.2.0.1
    labels: {{app: vm}}
"""
# Istio's egress TLS origination example (plain HTTP on 80 leaves as TLS to 443), a DNS_ROUND_ROBIN
# entry and an ExternalName Service.
EXTERNAL_SERVICES = f"""
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: api, namespace: {NS}}}
spec:
  hosts: [api.example.com]
  location: MESH_EXTERNAL
  ports: [{{number: 80, name: http, protocol: HTTP, targetPort: 443}}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: api, namespace: {NS}}}
spec:
  host: api.example.com
  trafficPolicy:
    tls: {{mode: SIMPLE, sni: api.example.com}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: rr, namespace: {NS}}}
spec:
  hosts: [rr.example.com]
  location: MESH_EXTERNAL
  ports: [{{number: 8080, name: http, protocol: HTTP}}]
  resolution: DNS_ROUND_ROBIN
---
apiVersion: v1
kind: Service
metadata: {{name: db, namespace: {NS}}}
spec:
  type: ExternalName
  externalName: db.example.org
  ports: [{{port: 5432, name: tcp-db}}]
"""
# A StatefulSet's headless Service (a TCP and an HTTP port) with its two pods, a ServiceEntry
# `resolution: NONE` selecting a WorkloadEntry and one with no endpoints (istiod's wildcard fallback):
# per-endpoint TCP listeners, the HTTP port on the shared 0.0.0.0 listener.
HEADLESS = f"""
apiVersion: v1
kind: Service
metadata: {{name: db, namespace: {NS}}}
spec:
  clusterIP: None
  selector: {{app: db}}
  ports: [{{name: tcp-db, port: 5432}}, {{name: http-admin, port: 8080}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: db-a, namespace: {NS}, labels: {{kubernetes.io/service-name: db}}}}
addressType: IPv4
ports: [{{name: tcp-db, port: 5432, protocol: TCP}}, {{name: http-admin, port: 8080, protocol: TCP}}]
endpoints:
- addresses: [10.1.0.10]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: db-0, namespace: {NS}}}
- addresses: [10.1.0.11]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: db-1, namespace: {NS}}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: legacy, namespace: {NS}}}
spec:
  hosts: [legacy.{NS}.example]
  location: MESH_INTERNAL
  ports: [{{number: 3306, name: tcp-mysql, protocol: TCP}}]
  resolution: NONE
  workloadSelector: {{labels: {{app: legacy}}}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {{name: legacy-0, namespace: {NS}}}
spec:
  address: 10.2.0.7
  labels: {{app: legacy}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: anywhere, namespace: {NS}}}
spec:
  hosts: [anywhere.{NS}.example]
  location: MESH_EXTERNAL
  ports: [{{number: 27017, name: tcp-mongo, protocol: TCP}}]
  resolution: NONE
"""
DR_POLICY = f"""
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: echo, namespace: {NS}}}
spec:
  host: {ECHO}
  trafficPolicy:
    tls: {{mode: ISTIO_MUTUAL}}
    loadBalancer: {{simple: ROUND_ROBIN}}
    connectionPool:
      tcp: {{maxConnections: 100, connectTimeout: 3s}}
      http: {{http2MaxRequests: 1000, maxRequestsPerConnection: 10, idleTimeout: 30s}}
    outlierDetection: {{consecutive5xxErrors: 3, interval: 5s, baseEjectionTime: 30s, maxEjectionPercent: 50}}
  subsets:
  - name: v1
    labels: {{version: v1}}
    trafficPolicy:
      loadBalancer: {{consistentHash: {{httpHeaderName: x-user}}}}
"""
LOCALITY_FAILOVER = f"""
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: echo, namespace: {NS}}}
spec:
  host: {ECHO}
  trafficPolicy:
    loadBalancer:
      simple: LEAST_REQUEST
      localityLbSetting:
        enabled: true
        failover: [{{from: r1, to: r2}}]
    outlierDetection: {{consecutive5xxErrors: 1, interval: 1s, baseEjectionTime: 1m}}
"""
SIDECAR_SCOPE = f"""
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: {NS}}}
spec:
  egress:
  - hosts: ["./{ECHO}", "istio-system/*"]
"""

# Istio's ingress examples on one gateway: HTTP and HTTPS (SIMPLE, credentialName) for web, MUTUAL for
# another host, TLS PASSTHROUGH by SNI and a TCP route to echo.
INGRESS = f"""
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: ingress, namespace: istio-system}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: 80, name: http, protocol: HTTP}}
    hosts: [web.example.com]
  - port: {{number: 443, name: https, protocol: HTTPS}}
    tls: {{mode: SIMPLE, credentialName: web-credential}}
    hosts: [web.example.com]
  - port: {{number: 443, name: https-mtls, protocol: HTTPS}}
    tls: {{mode: MUTUAL, credentialName: web-credential}}
    hosts: [mtls.example.com]
  - port: {{number: 443, name: tls, protocol: TLS}}
    tls: {{mode: PASSTHROUGH}}
    hosts: [echo.example.com]
  - port: {{number: 31400, name: tcp, protocol: TCP}}
    hosts: ['*']
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web-ingress, namespace: {NS}}}
spec:
  hosts: [web.example.com, mtls.example.com]
  gateways: [istio-system/ingress]
  http:
  - match: [{{uri: {{prefix: /api}}}}]
    route: [{{destination: {{host: web, port: {{number: 80}}}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: echo-passthrough, namespace: {NS}}}
spec:
  hosts: [echo.example.com]
  gateways: [istio-system/ingress]
  tls:
  - match: [{{port: 443, sniHosts: [echo.example.com]}}]
    route: [{{destination: {{host: {ECHO}, port: {{number: 7070}}}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: echo-tcp, namespace: {NS}}}
spec:
  hosts: ['*']
  gateways: [istio-system/ingress]
  tcp:
  - route: [{{destination: {{host: {ECHO}, port: {{number: 7070}}}}}}]
"""


def has(kind: str, *names: str):
    return lambda j: all(n in j.get(kind, {}) for n in names)


def lacks(kind: str, *names: str):
    return lambda j: all(n not in j.get(kind, {}) for n in names)


SUBSET_V1, SUBSET_V2 = f"outbound|7070|v1|{ECHO}", f"outbound|7070|v2|{ECHO}"


def serves_echo(has_text: tuple[str, ...] = (), lacks_text: tuple[str, ...] = ()):
    """The server's inbound side serves echo (virtualInbound, inbound|17070||), in the shape a policy gives
    it: its listener's JSON contains each of ``has_text`` and none of ``lacks_text``."""
    def want(j):
        inbound = json.dumps(j.get("LDS", {}).get("virtualInbound"))
        return (has("CDS", "inbound|17070||")(j) and all(t in inbound for t in has_text)
                and not any(t in inbound for t in lacks_text))
    return want


TLS, PLAINTEXT = '"transport_protocol": "tls"', '"transport_protocol": "raw_buffer"'
# (name, config YAML, {node: condition both servers' answers must meet}); "none" asks every node, the
# baseline the others come back to.
SCENARIOS = [
    ("none", "", {"grpc": has("CDS", f"outbound|7070||{ECHO}"), "sidecar": has("CDS", f"outbound|80||{WEB}"),
                  "server": serves_echo((TLS, PLAINTEXT))}),
    ("dr-subsets", DR_SUBSETS, {"grpc": has("CDS", f"outbound|7070||{ECHO}"), "sidecar": has("CDS", SUBSET_V1)}),
    ("vs-weighted-split", DR_SUBSETS + "---" + VS_SPLIT,
     {"grpc": has("CDS", SUBSET_V1, SUBSET_V2), "sidecar": has("CDS", SUBSET_V1)}),
    ("vs-http-features", DR_SUBSETS + "---" + VS_HTTP_FEATURES,
     {"grpc": has("CDS", SUBSET_V1, SUBSET_V2), "sidecar": has("CDS", SUBSET_V1)}),
    ("dr-policy", DR_POLICY, {"grpc": has("CDS", f"outbound|7070||{ECHO}"), "sidecar": has("CDS", SUBSET_V1)}),
    ("locality-failover", LOCALITY_FAILOVER,
     {"grpc": lambda j: True,  # istiod's gRPC clusters carry no outlier detection: the settle time only
      "sidecar": lambda j: "outlier_detection" in j.get("CDS", {}).get(f"outbound|7070||{ECHO}", {})}),
    # A client's outbound config need not change with its namespace's STRICT policy: no condition but
    # the settle time and two equal answers. The server's inbound side follows its PeerAuthentication:
    # mTLS only, plaintext only, per port.
    ("peerauthn-strict", PA_STRICT, {"grpc": has("CDS", f"outbound|7070||{ECHO}"), "sidecar": lambda j: True,
                                     "server": serves_echo((TLS,), (PLAINTEXT,))}),
    ("peerauthn-disable", PA_DISABLE, {"sidecar": lambda j: True, "server": serves_echo((PLAINTEXT,), (TLS,))}),
    ("peerauthn-port-level", PA_PORT_LEVEL, {"server": serves_echo(('"destination_port": 9000',))}),
    ("serviceentry", SERVICE_ENTRY,
     {"grpc": has("CDS", f"outbound|7070||{ECHO}"), "sidecar": has("CDS", "outbound|443||api.example.com",
                                                                    f"outbound|7070||vm.{NS}.example")}),
    ("external-services", EXTERNAL_SERVICES,
     {"grpc": has("CDS", f"outbound|7070||{ECHO}"),
      "sidecar": has("CDS", "outbound|80||api.example.com", "outbound|8080||rr.example.com")}),
    ("headless", HEADLESS,
     {"sidecar": has("LDS", "10.1.0.10_5432", "10.1.0.11_5432", "0.0.0.0_8080")}),
    ("ingress-gateway", INGRESS,
     {"gateway": lambda j: {"0.0.0.0_80", "0.0.0.0_443", "0.0.0.0_31400"} <= set(j.get("LDS", {}))
      and "http.80" in j.get("RDS", {})}),
    ("sidecar-scope", SIDECAR_SCOPE,
     {"grpc": has("CDS", f"outbound|7070||{ECHO}"), "sidecar": lacks("CDS", f"outbound|80||{WEB}")}),
]


def populate(c: realk8s.RealCluster, pods: list[tuple[dict, dict]], objects: list[dict]) -> None:
    """Namespaces istio-system and ``diff``, its default ServiceAccount, ``pods`` with their status written
    as a kubelet would, and ``objects``."""
    c.kubectl("create", "namespace", "istio-system")
    c.kubectl("create", "namespace", NS)
    if c.request("GET", f"/api/v1/namespaces/{NS}/serviceaccounts/default")[0] == 404:
        c.kubectl("create", "serviceaccount", "default", "-n", NS, check=False)
    c.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                    "items": [p for p, _ in pods] + objects}))
    for p, status in pods:
        c.kubectl("patch", "pod", p["metadata"]["name"], "-n", NS, "--subresource=status", "--type=merge",
                  "-p", json.dumps(status))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    realk8s.skip_unless_available()
    istiod_mod.skip_unless_available()
    # No kube-controller-manager: nothing here needs it, and its node lifecycle controller would taint the
    # kubelet-less Nodes and evict the pods on them.
    with realk8s.RealCluster(tmp_path_factory.mktemp("diff-k8s"), name="cluster1", controller_manager=False) as c:
        populate(c, PODS, BASE)
        c.install_crds()
        yield c


@pytest.fixture(scope="module")
def servers(cluster, tmp_path_factory):
    root = tmp_path_factory.mktemp("diff-servers")
    (root / "mesh.yaml").write_text(MESH_CONFIG)
    # istiod first, as in a migration: it writes istio-ca-secret (a PKCS#1 RSA key), which meshd takes over.
    istiod = istiod_mod.Istiod(root / "istiod", cluster.kubeconfig, mesh_config=MESH_CONFIG)
    istiod.start(timeout=180)
    try:
        meshd = Meshd(root / "meshd", args=["--kubeconfig", str(cluster.kubeconfig), "--cluster-id", "cluster1",
                                            "--mesh-config", str(root / "mesh.yaml")], ready_timeout=90)
    except BaseException:
        istiod.stop()
        raise
    yield {"istiod": f"127.0.0.1:{istiod.grpc}", "meshd": f"127.0.0.1:{meshd.grpc}", "_istiod": istiod,
           "_meshd": meshd}
    meshd.stop()
    istiod.stop()


def test_meshd_takes_over_the_ca_secret_istiod_wrote(cluster, servers, tmp_path):
    """istiod's self-signed istio-ca-secret (PKCS#1 key) is meshd's CA: meshd's 15012 serves a certificate
    that chains to istiod's root."""
    secret = json.loads(cluster.kubectl("get", "secret", "-n", "istio-system", "istio-ca-secret", "-o", "json").stdout)
    assert base64.b64decode(secret["data"]["ca-key.pem"]).startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    root = tmp_path / "istiod-root.pem"
    root.write_bytes(base64.b64decode(secret["data"]["ca-cert.pem"]))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # istiod.istio-system.svc is not 127.0.0.1
    ctx.load_verify_locations(root)
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", servers["_meshd"].secure), timeout=10) as raw:
        with ctx.wrap_socket(raw) as tls:  # fails unless the chain ends at istiod's root
            assert tls.getpeercert(binary_form=True)


BASELINE: dict = {}
# Both debounce pushes (meshd 100ms; istiod PILOT_DEBOUNCE_AFTER=100ms, at most 1s): after this, two equal
# answers a second apart are the settled config.
SETTLE = 3


def answers(servers, node: str, want) -> dict:
    make, targets = NODES[node]
    return {side: xds_diff.settled(servers[side], make(), targets, want) for side in ("istiod", "meshd")}


@pytest.mark.parametrize("name,config,wants", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_xds_diff(cluster, servers, name, config, wants):
    if config:
        cluster.kubectl("apply", "-f", "-", stdin=config)
        time.sleep(SETTLE)
    try:
        got = {node: answers(servers, node, want) for node, want in wants.items()}
    finally:
        if config:
            cluster.kubectl("delete", "-f", "-", "--wait=true", stdin=config)
    if name == "none":
        BASELINE.update(got)
    problems = xds_diff.check(name, got, EXPECTED)
    # Back to base on both before the next scenario.
    if config and BASELINE:
        for node in (n for n in wants if n in BASELINE):  # a node only one scenario asks for has no base
            for side in ("istiod", "meshd"):
                base = BASELINE[node][side]
                xds_diff.settled(servers[side], NODES[node][0](), NODES[node][1], lambda j, b=base: j == b)
    assert not problems, xds_diff.failure(EXPECTED / f"{name}.json", problems)
