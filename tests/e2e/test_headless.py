"""A headless Service's per-pod listeners follow its StatefulSet as it scales (issue 32 item 3).

A real kube-apiserver and kube-controller-manager: the StatefulSet controller creates and deletes the
pods, the EndpointSlice controller writes the headless Service's slices from them. No kubelet or
scheduler runs, so the pods are bound to a Node object by their template and this test stands in for the
kubelet: it writes each new pod's status (Running, Ready, an IP) as a kubelet would.
meshd watches the API server; a raw ADS client on each protocol (state of the world and delta) stays
connected as the sidecar of a client pod, subscribed to every listener, and must see
``<pod IP>_5432`` appear when the StatefulSet scales up and disappear when it scales down (a removal in
a delta response, absence from the full set in state of the world), with the HTTP port on the shared
``0.0.0.0_8080`` listener throughout.

Skips unless tests/peers/build.sh built etcd, kube-apiserver and kube-controller-manager.
"""

from __future__ import annotations

import json
import queue
import time

import pytest

import realk8s
from meshd_proc import Meshd
from xdsharness import CDS, LDS, Ads, decode, sidecar_node

NS = "headless"
CLIENT_IP = "10.1.0.99"


def pod_ip(name: str) -> str:
    """db-N runs at 10.1.0.(10 + N)."""
    return f"10.1.0.{10 + int(name.rsplit('-', 1)[1])}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    realk8s.skip_unless_available()
    with realk8s.RealCluster(tmp_path_factory.mktemp("headless-k8s"), name="cluster1") as c:
        if c.kcm_bin is None:
            pytest.skip("kube-controller-manager not built (tests/peers/build.sh)")
        c.kubectl("create", "namespace", "istio-system")
        c.kubectl("create", "namespace", NS)
        c.install_crds()
        c.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            # The EndpointSlice controller leaves out a pod whose Node does not exist.
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": NS},
             "spec": {"clusterIP": "None", "selector": {"app": "db"},
                      "ports": [{"name": "tcp-db", "port": 5432}, {"name": "http-admin", "port": 8080}]}},
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": NS},
             "spec": {"serviceName": "db", "replicas": 2, "podManagementPolicy": "Parallel",
                      "selector": {"matchLabels": {"app": "db"}},
                      "template": {"metadata": {"labels": {"app": "db"}},
                                   # Bound to the Node without a scheduler; deleted at once on scale-down
                                   # (no kubelet to finish a graceful deletion).
                                   "spec": {"nodeName": "node-a", "terminationGracePeriodSeconds": 0,
                                            "automountServiceAccountToken": False,
                                            "containers": [{"name": "db", "image": "db",
                                                            "ports": [{"containerPort": 5432},
                                                                      {"containerPort": 8080}]}]}}}},
        ]}))
        yield c


def kubelet(c: realk8s.RealCluster, replicas: int) -> None:
    """Waits for the StatefulSet's ``replicas`` pods and runs each one not yet running: Running, Ready,
    its IP (what a kubelet would write)."""
    def pods():
        out = json.loads(c.kubectl("get", "pods", "-n", NS, "-l", "app=db", "-o", "json").stdout)["items"]
        return out if len(out) == replicas else None

    deadline = time.monotonic() + 60
    while (items := pods()) is None:
        assert time.monotonic() < deadline, "the StatefulSet controller did not create its pods"
        time.sleep(0.2)
    for p in items:
        name = p["metadata"]["name"]
        if p.get("status", {}).get("podIP"):
            continue
        ip = pod_ip(name)
        status = {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "192.0.2.10",
                             "conditions": [{"type": "Ready", "status": "True"}]}}
        c.kubectl("patch", "pod", name, "-n", NS, "--subresource=status", "--type=merge", "-p", json.dumps(status))


@pytest.fixture(scope="module")
def meshd(cluster, tmp_path_factory):
    kubelet(cluster, 2)
    m = Meshd(tmp_path_factory.mktemp("meshd-headless"),
              args=["--kubeconfig", str(cluster.kubeconfig), "--cluster-id", "cluster1"], ready_timeout=90)
    yield m
    assert m.stop() == 0, m.log()[-4000:]


class Stream:
    """A sidecar's wildcard subscription to one type on one stream, ACKing each response and keeping the
    resources in force: a state-of-the-world response replaces them, a delta one adds and removes."""

    def __init__(self, addr: str, delta: bool, type_url: str = LDS):
        self.ads = Ads(addr, delta=delta)
        self.resources: dict = {}
        node = sidecar_node(f"sidecar~{CLIENT_IP}~client-0.{NS}~{NS}.svc.cluster.local", NAMESPACE=NS,
                            CLUSTER_ID="cluster1", INSTANCE_IPS=CLIENT_IP, LABELS={"app": "client"})
        self.ads.send(type_url, node=node)  # wildcard (implicitly, in delta too)

    @property
    def names(self) -> set[str]:
        return set(self.resources)

    def until(self, what: str, want, timeout: float = 60, of=lambda s: s.names):
        deadline = time.monotonic() + timeout
        while not want(of(self)):
            left = deadline - time.monotonic()
            assert left > 0, f"{'delta' if self.ads.delta else 'SotW'}: {what}; have {sorted(self.names)}"
            try:
                resp = self.ads.recv(timeout=left)
            except queue.Empty:
                continue
            self.ads.ack(resp)
            got = decode(resp)
            if self.ads.delta:
                self.resources.update(got)
                for name in resp.removed_resources:
                    self.resources.pop(name, None)
            else:
                self.resources = got
        return of(self)


def per_pod(names: set[str]) -> set[str]:
    return {n for n in names if n.endswith("_5432")}


def test_scaling_adds_and_removes_per_pod_listeners(cluster, meshd):
    streams = [Stream(f"127.0.0.1:{meshd.grpc}", delta) for delta in (False, True)]
    try:
        two = {"10.1.0.10_5432", "10.1.0.11_5432"}
        for s in streams:
            got = s.until("two pods, two listeners", lambda n: per_pod(n) == two)
            assert "0.0.0.0_8080" in got, "the HTTP port shares the wildcard listener"
            assert not any(n.startswith("10.1.0.") and n.endswith("_8080") for n in got), "no per-pod HTTP"
        cluster.kubectl("scale", "statefulset", "db", "-n", NS, "--replicas=3")
        kubelet(cluster, 3)
        for s in streams:
            s.until("a third pod's listener", lambda n: per_pod(n) == two | {"10.1.0.12_5432"})
        cluster.kubectl("scale", "statefulset", "db", "-n", NS, "--replicas=1")
        for s in streams:
            got = s.until("only db-0's listener left", lambda n: per_pod(n) == {"10.1.0.10_5432"})
            assert "0.0.0.0_8080" in got
    finally:
        for s in streams:
            s.ads.close()


def tls_of(s: Stream) -> str:
    """How the sidecar dials db's TCP port: its original-destination cluster's socket."""
    c = s.resources.get(f"outbound|5432||db.{NS}.svc.cluster.local")
    if c is None:
        return "no cluster"
    return "mtls" if c.HasField("transport_socket") else "plaintext"


def test_the_cluster_is_mtls_only_while_every_pod_has_a_sidecar(cluster, meshd):
    """istiod's rule for a passthrough cluster (no endpoint metadata to match per pod): Istio mTLS when
    every endpoint has a sidecar, else plaintext; a pod gaining or losing it pushes the sidecars CDS."""
    cluster.kubectl("scale", "statefulset", "db", "-n", NS, "--replicas=2")
    kubelet(cluster, 2)
    streams = [Stream(f"127.0.0.1:{meshd.grpc}", delta, CDS) for delta in (False, True)]
    pods = [p["metadata"]["name"] for p in json.loads(
        cluster.kubectl("get", "pods", "-n", NS, "-l", "app=db", "-o", "json").stdout)["items"]]
    label = "security.istio.io/tlsMode"
    try:
        for s in streams:
            s.until("no pod has a sidecar: plaintext", lambda t: t == "plaintext", of=tls_of)
        for p in pods:
            cluster.kubectl("label", "pod", p, "-n", NS, f"{label}=istio", "--overwrite")
        for s in streams:
            s.until("every pod has one: mTLS", lambda t: t == "mtls", of=tls_of)
        cluster.kubectl("label", "pod", pods[0], "-n", NS, f"{label}-")
        for s in streams:
            s.until("one pod without: plaintext again", lambda t: t == "plaintext", of=tls_of)
    finally:
        for s in streams:
            s.ads.close()
