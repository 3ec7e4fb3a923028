"""meshd against a real kube-apiserver (issue 28 §1): the chart's Istio CRDs installed with kubectl, so the
real server validates Istio config by the chart's schemas; a selector-less Service with a hand-written
EndpointSlice reaches EDS; a DestinationRule with a subset applied with kubectl reaches CDS; a
DestinationRule that breaks the schema is refused by the server (and never reaches meshd). A second real
API server (a remote) runs beside the first with its own CA, signing keys and store: its ServiceAccount
tokens come from a real TokenRequest, pass its TokenReview and RBAC, and mean nothing to the primary.

meshd runs with the admin kubeconfig (group system:masters) here; tests/e2e/test_real_multicluster.py
applies the chart's RBAC and runs meshd as the chart's ServiceAccount, with a remote joined by
``meshctl add-cluster``.

Skips when tests/peers/build.sh has not built etcd and kube-apiserver (no Go on the machine).
"""

from __future__ import annotations

import json
import queue
import time

import pytest

import realk8s
from meshd_proc import REPO, Meshd, eventually
from xdsharness import CDS, EDS, Ads, decode, grpc_node, routable

NS = "realk8s"
HOST = f"echo.{NS}.svc.cluster.local"
CLUSTER = f"outbound|7070||{HOST}"
SUBSET = f"outbound|7070|v1|{HOST}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    realk8s.skip_unless_available()
    with realk8s.RealCluster(tmp_path_factory.mktemp("real-primary"), name="cluster1") as c:
        yield c


@pytest.fixture(scope="module")
def mesh(cluster, tmp_path_factory):
    cluster.kubectl("create", "namespace", "istio-system")
    cluster.kubectl("create", "namespace", NS)
    cluster.install_crds(REPO / "helm" / "meshd" / "crds")  # kubectl apply -f helm/meshd/crds, then wait
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": NS},
         "spec": {"ports": [{"name": "grpc", "port": 7070, "targetPort": 17070, "appProtocol": "grpc"}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "echo-a", "namespace": NS, "labels": {"kubernetes.io/service-name": "echo"}},
         "addressType": "IPv4",
         "ports": [{"name": "grpc", "port": 17070, "protocol": "TCP"}],
         "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "zone": "zone-a"}
                       for ip in ("10.1.0.1", "10.1.0.2")]},
    ]}))
    m = Meshd(tmp_path_factory.mktemp("meshd-real"),
              args=["--kubeconfig", str(cluster.kubeconfig), "--cluster-id", "cluster1"], ready_timeout=90)
    yield m
    assert m.stop() == 0, m.log()[-4000:]


def watch(ads: Ads, type_url: str, names: list[str], want, timeout: float = 30):
    """ACKs responses of one type until ``want(resources)`` holds; returns the last resources seen."""
    seen: dict = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            resp = ads.recv(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if resp.type_url != type_url:
            continue
        ads.ack(resp, names)
        seen = decode(resp)
        if want(seen):
            return seen
    raise AssertionError(f"{type_url}: timed out; last {sorted(seen)}")


def node():
    return grpc_node(f"sidecar~127.0.0.1~client.{NS}~{NS}.svc.cluster.local", NAMESPACE=NS, CLUSTER_ID="cluster1")


def test_the_real_server_serves_the_chart_crds(cluster, mesh):
    out = cluster.kubectl("api-resources", "--api-group=networking.istio.io", "-o", "name").stdout
    assert "destinationrules.networking.istio.io" in out, out
    status = mesh.get("/ready", mesh.http)
    assert status[0] == 200, status


def test_eds_holds_the_endpoint_slice(mesh):
    ads = Ads(f"127.0.0.1:{mesh.grpc}")
    try:
        ads.send(EDS, node=node(), resource_names=[CLUSTER])
        got = watch(ads, EDS, [CLUSTER], lambda r: CLUSTER in r and routable(r[CLUSTER]) == {"10.1.0.1", "10.1.0.2"})
        ports = {lb.endpoint.address.socket_address.port_value for loc in got[CLUSTER].endpoints for lb in loc.lb_endpoints}
        assert ports == {17070}, got[CLUSTER]
    finally:
        ads.close()


def test_a_subset_applied_with_kubectl_reaches_cds(cluster, mesh):
    ads = Ads(f"127.0.0.1:{mesh.grpc}")
    try:
        ads.send(CDS, node=node())
        watch(ads, CDS, [], lambda r: CLUSTER in r)
        out = cluster.kubectl("apply", "-f", "-", stdin=f"""
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: echo, namespace: {NS}}}
spec:
  host: {HOST}
  subsets:
  - name: v1
    labels: {{version: v1}}
""")
        assert "destinationrule.networking.istio.io/echo created" in out.stdout, out.stdout
        got = watch(ads, CDS, [], lambda r: SUBSET in r)
        assert CLUSTER in got, sorted(got)
    finally:
        ads.close()


@pytest.mark.parametrize("spec,message", [
    ("{host: 5}", 'spec.host: Invalid value: "integer": spec.host in body must be of type string: "integer"'),
    ("{host: a.b, trafficPolicy: {tls: {mode: SOMETIMES}}}",
     'spec.trafficPolicy.tls.mode: Unsupported value: "SOMETIMES": supported values: "DISABLE", "SIMPLE", "MUTUAL", '
     '"ISTIO_MUTUAL"'),
], ids=["wrong-type", "not-in-enum"])
def test_a_schema_violation_is_refused_by_the_real_server(cluster, mesh, spec, message):
    bad = cluster.kubectl("apply", "-f", "-", check=False, stdin=f"""
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: broken, namespace: {NS}}}
spec: {spec}
""")
    assert bad.returncode == 1, bad.stdout
    # With Istio's CRDs the server also says its CEL rules were skipped, so the errors come as a list.
    assert bad.stderr.startswith('The DestinationRule "broken" is invalid:'), bad.stderr
    assert message in bad.stderr, bad.stderr
    status, body = cluster.request("GET", f"/apis/networking.istio.io/v1/namespaces/{NS}/destinationrules/broken")
    assert status == 404, body
    # The rule meshd applies to the service is still the valid one.
    proxy = f"sidecar~127.0.0.1~client.{NS}~{NS}.svc.cluster.local"
    explain = json.dumps(mesh.json(f"/debug/explain?proxyID={proxy}&service={HOST}:7070&network=&cluster=cluster1"))
    assert f"{NS}/echo" in explain or '"echo"' in explain, explain[:3000]
    assert "broken" not in explain, explain[:3000]


def test_a_remote_runs_beside_the_primary_with_real_tokens(cluster, tmp_path):
    with realk8s.RealCluster(tmp_path / "remote", name="cluster2", controller_manager=False) as remote:
        assert remote.server != cluster.server
        remote.kubectl("create", "serviceaccount", "reader", "-n", "default")
        status, tr = remote.request("POST", "/api/v1/namespaces/default/serviceaccounts/reader/token",
                                    {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                     "spec": {"audiences": [realk8s.ISSUER], "expirationSeconds": 3600}})
        assert status == 201, tr
        token = tr["status"]["token"]
        status, review = remote.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                                        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                         "spec": {"token": token}})
        assert status == 201 and review["status"]["authenticated"], review
        assert review["status"]["user"]["username"] == "system:serviceaccount:default:reader", review
        # RBAC is the real one: nothing until a binding, then exactly what it grants.
        assert remote.request("GET", "/api/v1/namespaces/default/pods", token=token)[0] == 403
        # (A Role with its own rules: `view` is aggregated by kube-controller-manager, not run here.)
        remote.kubectl("create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", "default")
        remote.kubectl("create", "rolebinding", "reader-pods", "--role=pod-reader",
                       "--serviceaccount=default:reader", "-n", "default")
        eventually("the binding to take effect",
                   lambda: remote.request("GET", "/api/v1/namespaces/default/pods", token=token)[0] == 200)
        assert remote.request("GET", "/api/v1/namespaces/default/secrets", token=token)[0] == 403
        # Impersonation as the admin, answered by the real SelfSubjectReview.
        status, me = remote.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                    {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                                    headers={"Impersonate-User": "alice", "Impersonate-Group": "devs"})
        assert status == 201 and me["status"]["userInfo"]["username"] == "alice", me
        # Another cluster's token is not the primary's: its signing key differs.
        assert cluster.request("GET", "/api/v1/namespaces/default/pods", token=token)[0] == 401
        assert cluster.request("GET", "/api/v1/namespaces/default/serviceaccounts/reader")[0] == 404
