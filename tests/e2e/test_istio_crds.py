"""Istio's CRDs in the sandbox (helm/meshd/crds/istio.yaml, generated from Istio's own by helm/gen_istio_crds.py,
loaded into every simulated cluster at start):
Istio's own documentation examples apply with stock kubectl, list by short name, are type-checked by the
structural schemas, and read back under any served version."""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

BIN_DIR = Path(os.environ.get("MESHD_BIN_DIR", "target/debug"))
KUBECTL = os.environ.get("KUBECTL", "/usr/bin/kubectl")

# Written from istio.io's reference pages for each kind (networking v1, security v1).
EXAMPLES = """
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: bookinfo-ratings, namespace: prod}
spec:
  host: ratings.prod.svc.cluster.local
  trafficPolicy:
    loadBalancer: {simple: LEAST_REQUEST}
  subsets:
  - name: testversion
    labels: {version: v3}
    trafficPolicy:
      loadBalancer: {simple: ROUND_ROBIN}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-route, namespace: prod}
spec:
  hosts: [reviews.prod.svc.cluster.local]
  http:
  - name: reviews-v2-routes
    match:
    - uri: {prefix: /wpcatalog}
    - uri: {prefix: /consumercatalog}
    rewrite: {uri: /newcatalog}
    route:
    - destination: {host: reviews.prod.svc.cluster.local, subset: v2}
  - name: reviews-v1-route
    route:
    - destination: {host: reviews.prod.svc.cluster.local, subset: v1}
      weight: 75
    - destination: {host: reviews.prod.svc.cluster.local, subset: v2}
      weight: 25
    retries: {attempts: 3, perTryTimeout: 2s, retryOn: "connect-failure,refused-stream,503"}
    fault:
      delay:
        percentage: {value: 0.1}
        fixedDelay: 5s
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: external-svc-https, namespace: prod}
spec:
  hosts: [api.dropboxapi.com, www.googleapis.com]
  location: MESH_EXTERNAL
  ports:
  - {number: 443, name: https, protocol: TLS}
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: details-svc, namespace: prod}
spec:
  serviceAccount: details-legacy
  address: 2.2.2.2
  labels: {app: details-legacy, instance-id: vm1}
  network: network2
  locality: us-east1/us-east1-b
  ports: {http: 8080}
---
apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: reviews, namespace: prod}
spec:
  metadata:
    labels: {app.kubernetes.io/name: reviews, app.kubernetes.io/version: "1.3.4"}
  template:
    ports: {grpc: 3550, http: 8080}
    serviceAccount: default
  probe:
    initialDelaySeconds: 5
    timeoutSeconds: 3
    periodSeconds: 4
    successThreshold: 3
    failureThreshold: 3
    httpGet: {path: /foo/bar, host: 127.0.0.1, port: 3100, scheme: HTTPS}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: prod}
spec:
  egress:
  - hosts: ["./*", "istio-system/*"]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: my-gateway, namespace: prod}
spec:
  selector: {app: my-gateway-controller}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [uk.bookinfo.com, eu.bookinfo.com]
    tls: {httpsRedirect: true}
  - port: {number: 443, name: https-443, protocol: HTTPS}
    hosts: [uk.bookinfo.com, eu.bookinfo.com]
    tls: {mode: SIMPLE, credentialName: bookinfo-secret}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: prod}
spec:
  mtls: {mode: STRICT}
"""


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    proc = subprocess.Popen(
        [str(BIN_DIR / "meshctl"), "sandbox", "serve", "--clusters", "east,west", "--state-dir", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line, f"meshctl exited early: {proc.stderr.read()}"
    yield json.loads(line)["clusters"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


def kubectl(sandbox, *args, cluster="east", stdin=None):
    return subprocess.run(
        [KUBECTL, "--kubeconfig", sandbox[cluster]["kubeconfig"], *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(res):
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_every_cluster_has_istios_crds_established(sandbox):
    want = {
        "destinationrules.networking.istio.io", "virtualservices.networking.istio.io",
        "serviceentries.networking.istio.io", "workloadentries.networking.istio.io",
        "workloadgroups.networking.istio.io", "sidecars.networking.istio.io", "gateways.networking.istio.io",
        "peerauthentications.security.istio.io",
    }
    for cluster in ("east", "west"):
        crds = json.loads(ok(kubectl(sandbox, "get", "crds", "-o", "json", cluster=cluster)))["items"]
        by_name = {c["metadata"]["name"]: c for c in crds}
        assert want <= set(by_name), sorted(by_name)
        for name in want:
            crd = by_name[name]
            established = [c for c in crd["status"]["conditions"] if c["type"] == "Established"]
            assert established and established[0]["status"] == "True", crd["status"]
            storage = [v["name"] for v in crd["spec"]["versions"] if v["storage"]]
            assert storage == ["v1"], name  # Istio's (the chart's CRDs are generated from Istio's)
            assert "istio-io" in crd["spec"]["names"]["categories"]


def test_istio_examples_apply_and_list_by_short_name(sandbox):
    ok(kubectl(sandbox, "create", "namespace", "prod"))
    out = ok(kubectl(sandbox, "apply", "-f", "-", stdin=EXAMPLES))
    for created in [
        "destinationrule.networking.istio.io/bookinfo-ratings created",
        "virtualservice.networking.istio.io/reviews-route created",
        "serviceentry.networking.istio.io/external-svc-https created",
        "workloadentry.networking.istio.io/details-svc created",
        "workloadgroup.networking.istio.io/reviews created",
        "sidecar.networking.istio.io/default created",
        "gateway.networking.istio.io/my-gateway created",
        "peerauthentication.security.istio.io/default created",
    ]:
        assert created in out, out
    listing = ok(kubectl(sandbox, "get", "dr,vs,se,we,sidecar,peerauthentication", "-A"))
    for line in [
        "destinationrule.networking.istio.io/bookinfo-ratings",
        "virtualservice.networking.istio.io/reviews-route",
        "serviceentry.networking.istio.io/external-svc-https",
        "workloadentry.networking.istio.io/details-svc",
        "sidecar.networking.istio.io/default",
        "peerauthentication.security.istio.io/default",
    ]:
        assert line in listing, listing
    # Istio's printer columns.
    se = ok(kubectl(sandbox, "get", "se", "-n", "prod"))
    assert se.split("\n")[0].split() == ["NAME", "HOSTS", "LOCATION", "RESOLUTION", "AGE"], se
    assert '["api.dropboxapi.com","www.googleapis.com"]' in se and "MESH_EXTERNAL" in se and "DNS" in se, se
    pa = ok(kubectl(sandbox, "get", "pa", "-n", "prod"))
    assert pa.split("\n")[0].split() == ["NAME", "MODE", "AGE"] and "STRICT" in pa, pa
    wg = ok(kubectl(sandbox, "get", "wg", "-n", "prod", "-o", "jsonpath={.items[*].metadata.name}"))
    assert wg == "reviews"
    gw = ok(kubectl(sandbox, "get", "gw", "-n", "prod", "-o", "jsonpath={.items[0].spec.servers[1].tls.mode}"))
    assert gw == "SIMPLE"
    # Every example survived the schemas whole (no field of Istio's pruned).
    vs = json.loads(ok(kubectl(sandbox, "get", "vs", "reviews-route", "-n", "prod", "-o", "json")))
    assert vs["spec"]["http"][1]["retries"] == {"attempts": 3, "perTryTimeout": "2s",
                                                 "retryOn": "connect-failure,refused-stream,503"}
    assert vs["spec"]["http"][1]["fault"]["delay"]["fixedDelay"] == "5s"
    assert vs["spec"]["http"][1]["route"][0]["weight"] == 75


@pytest.mark.parametrize(
    "doc,field,message",
    [
        ("kind: DestinationRule\nmetadata: {name: bad}\nspec: {host: 5}", "spec.host",
         'spec.host: Invalid value: "integer": spec.host in body must be of type string: "integer"'),
        ("kind: ServiceEntry\nmetadata: {name: bad}\nspec: {hosts: [a.com], resolution: DNSX}", "spec.resolution",
         'spec.resolution: Unsupported value: "DNSX": supported values: "NONE", "STATIC", "DNS", "DNS_ROUND_ROBIN"'),
        ("kind: WorkloadEntry\nmetadata: {name: bad}\nspec: {address: 1.1.1.1, weight: heavy}", "spec.weight",
         'spec.weight: Invalid value: "string": spec.weight in body must be of type integer: "string"'),
        ("kind: VirtualService\nmetadata: {name: bad}\nspec: {hosts: a.com}", "spec.hosts",
         'spec.hosts: Invalid value: "string": spec.hosts in body must be of type array: "string"'),
    ],
)
def test_a_wrong_type_is_refused_naming_the_field(sandbox, doc, field, message):
    res = kubectl(sandbox, "apply", "-f", "-", stdin="apiVersion: networking.istio.io/v1\n" + doc)
    assert res.returncode == 1 and field in res.stderr and message in res.stderr, res.stderr
    assert " is invalid: " in res.stderr, res.stderr


def test_versions_read_back_under_the_version_asked_for(sandbox):
    beta = """apiVersion: networking.istio.io/v1beta1
kind: DestinationRule
metadata: {name: from-beta}
spec: {host: a.default.svc.cluster.local}
---
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata: {name: from-beta}
spec: {mtls: {mode: PERMISSIVE}}
"""
    ok(kubectl(sandbox, "apply", "-f", "-", stdin=beta))
    ga = """apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: from-ga}
spec: {host: b.default.svc.cluster.local}
"""
    ok(kubectl(sandbox, "apply", "-f", "-", stdin=ga))

    def api_version(resource, name):
        return ok(kubectl(sandbox, "get", resource, name, "-o", "jsonpath={.apiVersion}"))

    assert api_version("destinationrules.v1.networking.istio.io", "from-beta") == "networking.istio.io/v1"
    assert api_version("destinationrules.v1beta1.networking.istio.io", "from-ga") == "networking.istio.io/v1beta1"
    assert api_version("destinationrules.v1alpha3.networking.istio.io", "from-ga") == "networking.istio.io/v1alpha3"
    assert api_version("peerauthentications.v1.security.istio.io", "from-beta") == "security.istio.io/v1"
    # The preferred version is v1: a plain `kubectl get dr` reads v1.
    assert api_version("dr", "from-beta") == "networking.istio.io/v1"
