"""meshd's multi-cluster scenarios on two API servers (issue 28 §1), each test run on two backends:
``real`` (two real etcd + kube-apiserver pairs, ``realk8s.RealCluster``, no controller manager: nothing
here needs one) and ``kube-sim`` (``meshctl sandbox serve --enforce-rbac`` with two empty clusters, RBAC
decided by the stored roles). cluster1 is the primary (network1), cluster2 a remote (network2). On them:

- the chart, rendered with the real Helm SDK: its ``primary`` profile applied to cluster1, its ``remote``
  profile (the reader ServiceAccount and ClusterRole) to cluster2;
- two meshd replicas, each authenticated as the chart's ``meshd`` ServiceAccount with a token from a
  TokenRequest (``kubectl create token``), not as an admin; they elect a leader on the ``meshd-leader``
  Lease;
- ``meshctl add-cluster --create-service-account=false --apply`` once they serve, twice (the second
  rotates the token), run as an operator ServiceAccount holding only what
  docs/install-primary-remote.md#permissions lists: a TokenRequest for the reader in cluster2, the remote
  secret written to cluster1, which meshd's secret controller picks up;
- ``echo.sample`` in both clusters (pods with a kubelet-like status, hand-written EndpointSlices), each
  cluster's network from its ``istio-system`` label, and in each an east-west gateway Service labelled
  with its network (``topology.istio.io/network``) with an externalIP.

The tests check, in order: the remote is ``synced`` in /debug/clusterz, and the secret's token is the
reader's (TokenReview) and reads (Secrets too, for gateway certificates) but may not write; split-horizon EDS (a sidecar in each network
gets its own pods directly and the other cluster's through the other network's gateway); the leader
publishes ``istio-ca-root-cert`` in every namespace of both clusters (not Kubernetes' own), restores a
deleted one and fills a new namespace; a watch that gets 410 Gone relists and loses nothing (an
addition, a change and a deletion made while the watches were down); 1,000 unlabelled Secrets created and
updated (and a metadata-only change to the remote secret) publish nothing and push nothing (istio#51899);
the primary's API server restarted
under meshd, then a change; an ingress gateway's ``credentialName`` certificate served over SDS by each
replica under the chart's RBAC (meshd's by-name Secret watch and SubjectAccessReview) to the identity a
Role lets read Secrets, only the CA to one without; the lease moving when its holder is SIGKILLed (the new leader restores a
deleted root ConfigMap in both clusters); and, over everything before, that RBAC refused meshd nothing
(no 403 in either replica's log).

How each backend does the hard parts (``realk8s.Env``): for 410, cluster2's real apiserver runs with
``--watch-cache=false`` (a watch resumes from etcd) and ``--etcd-compaction-interval=0``; the follower
replica is SIGSTOPped, cluster2 ends its watches (real: meshd's ``--watch-timeout 3s`` runs out; kube-sim:
the ``dropWatches`` fault), the changes are made, the store is compacted (etcd's ``/v3/kv/compaction``;
kube-sim's ``compact`` fault), and meshd is resumed. The restart is ``RealCluster.restart_apiserver``
(etcd kept) or kube-sim's ``refuse`` fault for 3 s.

What the real server showed: for a moment after it starts listening, before its RBAC informers have
synced, a restarted kube-apiserver answers 403 to everyone but ``system:masters`` (its /readyz waits for
the sync; clients do not). meshd logs them, backs off and relists; the 403 check leaves out cluster1
lines logged during the restart. kube-sim's EndpointSlice controller replaces its own slice when a
hand-written one joins a selector Service, which found a registry bug (fixed: a pod named by two slices
of a service lost its index to the service when one went).

About 80 s for both backends. Skips the real backend when tests/peers/build.sh has not built etcd and
kube-apiserver (no Go on the machine).
"""

from __future__ import annotations

import base64
import datetime
import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

import realk8s
from meshd_proc import BIN_DIR, Meshd, eventually
from test_helm import render
from test_rbac import GATEWAY_CA, GATEWAY_CERT, gateway_objects, gateway_sds
from xdsharness import EDS, Ads, decode, sidecar_node

SYS = "istio-system"
NS = "sample"
ECHO = f"outbound|7070||echo.{NS}.svc.cluster.local"
LATE = f"outbound|7070||late.{NS}.svc.cluster.local"
AFTER_RESTART = f"outbound|7070||after-restart.{NS}.svc.cluster.local"
GATEWAY1, GATEWAY2 = "198.51.100.1", "198.51.100.2"  # the east-west gateways' externalIPs
TLS = {"security.istio.io/tlsMode": "istio"}
ROOT_CM = "istio-ca-root-cert"
# Namespaces the publisher leaves alone (istiod's inject.IgnoredNamespaces).
IGNORED = {"kube-system", "kube-public", "kube-node-lease", "local-path-storage"}


# --------------------------------------------------------------------------- objects


def pod(name: str, ip: str, labels: dict) -> tuple[dict, dict]:
    """A Pod and the status a kubelet would write for it (none runs here)."""
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels},
           "spec": {"containers": [{"name": "app", "image": "app"}], "automountServiceAccountToken": False}}
    status = {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "192.0.2.10",
                         "conditions": [{"type": "Ready", "status": "True"}]}}
    return obj, status


def service(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"app": name},
                     "ports": [{"name": "grpc", "port": 7070, "targetPort": 17070, "appProtocol": "grpc"}]}}


def endpoint_slice(svc: str, name: str, pods: list[tuple[str, str]]) -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": NS, "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4", "ports": [{"name": "grpc", "port": 17070, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True},
                           "targetRef": {"kind": "Pod", "name": p, "namespace": NS}} for p, ip in pods]}


def namespace(name: str, network: str | None = None) -> dict:
    labels = {"topology.istio.io/network": network} if network else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def east_west_gateway(network: str, ip: str) -> dict:
    """A network's east-west gateway Service, found by meshd by its network label."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "istio-eastwestgateway", "namespace": SYS,
                         "labels": {"istio": "eastwestgateway", "topology.istio.io/network": network}},
            "spec": {"selector": {"istio": "eastwestgateway"}, "externalIPs": [ip],
                     "ports": [{"name": "status-port", "port": 15021}, {"name": "tls", "port": 15443}]}}


def apply(c: realk8s.RealCluster, objects: list[dict]) -> None:
    c.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects))


def add_pods(c: realk8s.RealCluster, pods: list[tuple[dict, dict]]) -> None:
    apply(c, [p for p, _ in pods])
    for p, status in pods:
        c.kubectl("patch", "pod", p["metadata"]["name"], "-n", NS, "--subresource=status", "--type=merge",
                  "-p", json.dumps(status))


def populate(c: realk8s.RealCluster, network: str, pods: list[tuple[dict, dict]], objects: list[dict]) -> None:
    apply(c, [namespace(SYS, network), namespace(NS)])
    # No controller manager on the real servers: no ServiceAccount controller makes `default`, which pods need.
    if c.request("GET", f"/api/v1/namespaces/{NS}/serviceaccounts/default")[0] == 404:
        c.kubectl("create", "serviceaccount", "default", "-n", NS)
    add_pods(c, pods)
    apply(c, objects)


# --------------------------------------------------------------------------- clients


def token_kubeconfig(c: realk8s.RealCluster, token: str, out: Path) -> Path:
    """``c``'s server and CA with ``token`` as the user."""
    kc = yaml.safe_load(c.kubeconfig.read_text())
    kc["users"] = [{"name": "sa", "user": {"token": token}}]
    kc["contexts"][0]["context"]["user"] = "sa"
    out.write_text(yaml.safe_dump(kc))
    out.chmod(0o600)
    return out


def operator_kubeconfig(c, rules: list[tuple[str, list[str]]], out: Path) -> Path:
    """A ServiceAccount ``operator`` granted ``rules`` (core resources) in istio-system only, as a kubeconfig."""
    c.kubectl("create", "serviceaccount", "operator", "-n", SYS)
    apply(c, [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "operator", "namespace": SYS},
               "rules": [{"apiGroups": [""], "resources": [r], "verbs": v} for r, v in rules]},
              {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "operator", "namespace": SYS},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "operator"},
               "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": SYS}]}])
    token = c.kubectl("create", "token", "operator", "-n", SYS).stdout.strip()
    return token_kubeconfig(c, token, out)


def meshctl(*args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([str(BIN_DIR / "meshctl"), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"meshctl {' '.join(args)}: {out.stderr}"
    return out


def eds_priorities(mesh: Meshd, cluster: str, network: str, name: str) -> dict[str, int]:
    """``ip:port`` → priority of every endpoint a sidecar in ``cluster``/``network`` gets for ``name``
    (fresh stream)."""
    ads = Ads(f"127.0.0.1:{mesh.grpc}")
    try:
        ads.send(EDS, node=sidecar_node(f"sidecar~10.9.0.1~client-0.{NS}~{NS}.svc.cluster.local", NAMESPACE=NS,
                                        CLUSTER_ID=cluster, NETWORK=network), resource_names=[name])
        cla = decode(ads.recv(timeout=10)).get(name)
        if cla is None:
            return {}
        return {f"{lb.endpoint.address.socket_address.address}:{lb.endpoint.address.socket_address.port_value}":
                loc.priority for loc in cla.endpoints for lb in loc.lb_endpoints}
    finally:
        ads.close()


def eds(mesh: Meshd, cluster: str, network: str, name: str) -> set[str]:
    """``ip:port`` of every endpoint a sidecar in ``cluster``/``network`` gets for ``name`` (fresh stream)."""
    return set(eds_priorities(mesh, cluster, network, name))


def wait_eds(mesh: Meshd, cluster: str, network: str, name: str, want: set[str], what: str,
             timeout: float = 30) -> None:
    """Polls :func:`eds` until it is ``want``; fails with the last answer."""
    deadline = time.monotonic() + timeout
    got: set[str] = set()
    while time.monotonic() < deadline:
        got = eds(mesh, cluster, network, name)
        if got == want:
            return
        time.sleep(0.2)
    raise AssertionError(f"{what}: {name} for a {cluster}/{network} sidecar is {sorted(got)}, not {sorted(want)}")


def clusterz(mesh: Meshd) -> dict[str, dict]:
    return {c["id"]: c for c in mesh.json("/debug/clusterz")}


def root_configmaps(c: realk8s.RealCluster) -> dict[str, str]:
    """Namespace → ``root-cert.pem`` of every ``istio-ca-root-cert`` in ``c``."""
    status, body = c.request("GET", f"/api/v1/configmaps?fieldSelector=metadata.name={ROOT_CM}")
    assert status == 200, body
    return {cm["metadata"]["namespace"]: cm.get("data", {}).get("root-cert.pem", "") for cm in body["items"]}


def namespaces(c: realk8s.RealCluster) -> set[str]:
    status, body = c.request("GET", "/api/v1/namespaces")
    assert status == 200, body
    return {n["metadata"]["name"] for n in body["items"]}


def lease_holder(c: realk8s.RealCluster) -> str:
    status, body = c.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{SYS}/leases/meshd-leader")
    return (body["spec"].get("holderIdentity") or "") if status == 200 else ""


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", params=["kube-sim", "real"])
def env(request, tmp_path_factory):
    with realk8s.two_clusters(request, tmp_path_factory, "mc") as e:
        c1, c2 = e.c1, e.c2
        populate(c1, "network1", [pod("echo-1", "10.1.0.1", {"app": "echo", **TLS})],
                 [service("echo"), endpoint_slice("echo", "echo-a", [("echo-1", "10.1.0.1")]),
                  east_west_gateway("network1", GATEWAY1)])
        populate(c2, "network2", [pod("echo-r1", "10.2.0.1", {"app": "echo", **TLS}),
                                  pod("echo-old", "10.2.0.9", {"app": "echo", **TLS})],
                 [service("echo"), endpoint_slice("echo", "echo-a", [("echo-r1", "10.2.0.1")]),
                  endpoint_slice("echo", "echo-old", [("echo-old", "10.2.0.9")]),
                  east_west_gateway("network2", GATEWAY2)])
        c1.install_crds()
        apply(c1, render({"clusterId": "cluster1"}))
        apply(c2, render({"profile": "remote"}))
        yield e


@pytest.fixture(scope="module")
def replicas(env, tmp_path_factory):
    """Two meshd replicas as the chart's ServiceAccount; the remote joined with ``meshctl add-cluster``
    once they serve (the secret controller picks the Secret up while running)."""
    c1, c2 = env.c1, env.c2
    root = tmp_path_factory.mktemp(f"mc-meshd-{env.backend}")
    token = c1.kubectl("create", "token", "meshd", "-n", SYS, "--duration", "2h").stdout.strip()
    as_meshd = token_kubeconfig(c1, token, root / "meshd.kubeconfig")
    args = ["--kubeconfig", str(as_meshd), "--cluster-id", "cluster1", "--watch-timeout", f"{realk8s.WATCH_TIMEOUT}s"]
    out: dict[str, Meshd] = {}
    try:
        for name in ("meshd-a", "meshd-b"):
            out[name] = Meshd(root / name, args, env={"POD_NAME": name}, ready_timeout=None)
        for m in out.values():
            m.wait_ready(90)
        # The operator holds exactly what docs/install-primary-remote.md#permissions says add-cluster needs.
        operator = {c.name: operator_kubeconfig(c, rules, root / f"operator-{c.name}.kubeconfig")
                    for c, rules in ((c1, [("secrets", ["create", "get", "update"])]),
                                     (c2, [("serviceaccounts/token", ["create"])]))}
        for _ in range(2):  # the second run rotates the token: the Secret exists and is replaced
            meshctl("add-cluster", "--name", "cluster2", "--kubeconfig", str(operator["cluster2"]),
                    "--allow-loopback", "--create-service-account=false", "--apply",
                    "--primary-kubeconfig", str(operator["cluster1"]))
        yield out
    finally:
        for m in out.values():
            m.kill()


def leader_and_follower(c1: realk8s.RealCluster, replicas: dict[str, Meshd]) -> tuple[str, str]:
    holder = eventually("a lease holder", lambda: lease_holder(c1), timeout=30)
    leader = next(n for n in replicas if holder.startswith(n + "_"))
    return leader, next(n for n in replicas if n != leader)


# --------------------------------------------------------------------------- tests


def test_the_remote_joins_with_add_cluster(env, replicas):
    c1, c2 = env.c1, env.c2
    status, secret = c1.request("GET", f"/api/v1/namespaces/{SYS}/secrets/istio-remote-secret-cluster2")
    assert status == 200, secret
    assert secret["metadata"]["labels"]["istio/multiCluster"] == "true", secret["metadata"]
    kubeconfig = yaml.safe_load(base64.b64decode(secret["data"]["cluster2"]))
    assert kubeconfig["clusters"][0]["cluster"]["server"] == c2.server
    token = kubeconfig["users"][0]["user"]["token"]
    # The token is the real TokenRequest's, for the chart's reader: cluster2's TokenReview says so.
    status, review = c2.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                 "spec": {"token": token}})
    assert status == 201 and review["status"]["authenticated"], review
    assert review["status"]["user"]["username"] == f"system:serviceaccount:{SYS}:istio-reader-service-account"
    # ... and the chart's remote RBAC lets it read (Secrets too: gateway certificates), not write.
    assert c2.request("GET", f"/api/v1/namespaces/{NS}/pods", token=token)[0] == 200
    assert c2.request("GET", f"/api/v1/namespaces/{SYS}/secrets", token=token)[0] == 200
    assert c2.request("POST", f"/api/v1/namespaces/{NS}/secrets", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "written-by-the-reader"}}, token=token)[0] == 403
    for name, m in replicas.items():
        rows = eventually(f"{name}: cluster2 synced",
                          lambda: (lambda z: z if z.get("cluster2", {}).get("syncStatus") == "synced" else None)(
                              clusterz(m)), timeout=30)
        assert rows["cluster2"]["secretName"] == f"{SYS}/istio-remote-secret-cluster2", rows
        assert rows["cluster1"]["syncStatus"] == "synced", rows


def test_split_horizon_across_two_clusters(replicas):
    for name, m in replicas.items():
        # network1: its own pod directly, cluster2's through network2's gateway (one entry for both pods).
        wait_eds(m, "cluster1", "network1", ECHO, {"10.1.0.1:17070", f"{GATEWAY2}:15443"},
                 f"{name}: network1 reaches cluster2 through the gateway")
        # network2: its own pods directly, cluster1's through network1's gateway.
        wait_eds(m, "cluster2", "network2", ECHO, {"10.2.0.1:17070", "10.2.0.9:17070", f"{GATEWAY1}:15443"},
                 f"{name}: network2 reaches its own pods")


def metric_sum(mesh: Meshd, name: str) -> float:
    """The sum of every sample of ``name`` in meshd's /metrics (0 when absent)."""
    status, text = mesh.get("/metrics")
    assert status == 200, text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " "))


def secrets(n: int, namespace: str, generation: int) -> list[dict]:
    return [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": f"churn-{i}", "namespace": namespace},
             "stringData": {"value": f"{generation}-{i}"}} for i in range(n)]


def test_unrelated_secret_churn_triggers_no_push(env, replicas):
    """istio#51899 / #59997: thousands of pushes from opaque Secret updates. 1,000 unlabelled Secrets
    (500 in each cluster's istio-system, where remote secrets live) are created, then every one is updated,
    and the remote secret itself gets a metadata-only change: no replica publishes a snapshot or pushes, a
    connected sidecar gets nothing, and cluster2 stays synced (a restarted remote would republish)."""
    c1, c2 = env.c1, env.c2
    m = replicas["meshd-a"]
    # Settle: whatever earlier tests changed is published and pushed.
    wait_eds(m, "cluster1", "network1", ECHO, {"10.1.0.1:17070", f"{GATEWAY2}:15443"}, "settled")

    def quiet() -> tuple[float, ...]:
        return tuple(metric_sum(r, n) for r in replicas.values()
                     for n in ("pilot_debounce_time_count", "pilot_xds_pushes"))

    def settled():
        first = quiet()
        time.sleep(1.5)
        return first if quiet() == first else None

    ads = Ads(f"127.0.0.1:{m.grpc}")
    try:
        ads.send(EDS, node=sidecar_node(f"sidecar~10.9.0.2~watcher-0.{NS}~{NS}.svc.cluster.local", NAMESPACE=NS,
                                        CLUSTER_ID="cluster1", NETWORK="network1"), resource_names=[ECHO])
        assert ECHO in decode(ads.recv(timeout=10))
        before = eventually("no change in flight", settled, timeout=30)  # after the watcher's own response
        for c in (c1, c2):
            c.kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(secrets(500, SYS, 1)))
            c.kubectl("replace", "-f", "-", stdin=yaml.safe_dump_all(secrets(500, SYS, 2)))
        c1.kubectl("annotate", "secret", "istio-remote-secret-cluster2", "-n", SYS, "churn=1", "--overwrite")
        time.sleep(3)  # a few debounce windows: a push caused by the churn would have happened by now
        ads.expect_none(wait=1)
        assert quiet() == before, "the churn published a snapshot or pushed"
        for n, r in replicas.items():
            assert clusterz(r)["cluster2"]["syncStatus"] == "synced", n
    finally:
        ads.close()


def test_the_root_configmap_is_published_everywhere_and_restored(env, replicas):
    c1, c2 = env.c1, env.c2
    status, ca = c1.request("GET", f"/api/v1/namespaces/{SYS}/secrets/istio-ca-secret")
    assert status == 200, ca
    root = base64.b64decode(ca["data"].get("root-cert.pem") or ca["data"]["ca-cert.pem"]).decode()

    def everywhere(c):
        want = namespaces(c) - IGNORED
        got = root_configmaps(c)
        return got if set(got) == want and set(got.values()) == {root} else None

    for c in (c1, c2):
        got = eventually(f"{c.name}: the root in every namespace", lambda: everywhere(c), timeout=30)
        assert {SYS, NS, "default"} <= set(got), got
        assert not IGNORED & set(got), got
    # Deleted, it comes back; a new namespace gets it.
    for c in (c1, c2):
        c.kubectl("delete", "configmap", ROOT_CM, "-n", NS)
        c.kubectl("create", "namespace", "late-ns")
    for c in (c1, c2):
        eventually(f"{c.name}: the root restored and in the new namespace",
                   lambda: (lambda got: got.get(NS) == root and got.get("late-ns") == root)(root_configmaps(c)),
                   timeout=30)


def test_a_watch_that_gets_410_gone_relists_and_loses_nothing(env, replicas):
    """The follower is paused while cluster2 ends its watches (a real server: past their server-side
    timeout; kube-sim: dropped); meanwhile a Service and its endpoints are added and an EndpointSlice
    deleted, and the store is compacted past meshd's resourceVersions (etcd's compaction API; kube-sim's
    compact fault). Resumed, meshd's watches resume from there, get 410 Gone and relist: the additions
    are in EDS and the deletion too."""
    c1, c2 = env.c1, env.c2
    _, follower = leader_and_follower(c1, replicas)
    m = replicas[follower]
    wait_eds(m, "cluster2", "network2", ECHO, {"10.2.0.1:17070", "10.2.0.9:17070", f"{GATEWAY1}:15443"}, "before")

    def gone() -> int:  # cluster2's watches answered 410 Gone (cluster2 never compacts on its own)
        return sum("cluster=cluster2" in line and "410 Gone" in line for line in m.log().splitlines())

    before = gone()
    m.proc.send_signal(signal.SIGSTOP)
    try:
        env.end_watches(c2)
        add_pods(c2, [pod("late-1", "10.2.0.7", {"app": "late", **TLS}),
                      pod("echo-r2", "10.2.0.2", {"app": "echo", **TLS})])
        apply(c2, [service("late"), endpoint_slice("late", "late-a", [("late-1", "10.2.0.7")]),
                   endpoint_slice("echo", "echo-a", [("echo-r1", "10.2.0.1"), ("echo-r2", "10.2.0.2")])])
        c2.kubectl("delete", "endpointslice", "echo-old", "-n", NS)
        env.compact(c2)
    finally:
        m.proc.send_signal(signal.SIGCONT)
    eventually("cluster2's watches get 410 Gone", lambda: gone() > before, timeout=30)
    wait_eds(m, "cluster2", "network2", LATE, {"10.2.0.7:17070"}, "the relist added the new Service")
    wait_eds(m, "cluster2", "network2", ECHO, {"10.2.0.1:17070", "10.2.0.2:17070", f"{GATEWAY1}:15443"},
             "the relist applied the change and the deletion")
    assert clusterz(m)["cluster2"]["syncStatus"] == "synced"


def test_the_apiserver_restarted_under_meshd(env, replicas):
    c1 = env.c1
    env.restart(c1)
    add_pods(c1, [pod("after-1", "10.1.0.5", {"app": "after-restart", **TLS})])
    apply(c1, [service("after-restart"), endpoint_slice("after-restart", "after-restart-a", [("after-1", "10.1.0.5")])])
    for name, m in replicas.items():
        wait_eds(m, "cluster1", "network1", AFTER_RESTART, {"10.1.0.5:17070"},
                 f"{name}: a Service made after the restart", timeout=45)
        assert m.get("/ready", m.http)[0] == 200


def test_a_gateway_gets_its_certificate_under_the_chart_rbac(env, replicas):
    """Gateway certificates (issue 32) with nothing but the chart's RBAC: meshd (as the chart's
    ServiceAccount) watches the Gateway's ``credentialName`` Secret in the gateway's namespace and asks
    the API server's SubjectAccessReview; the gateway's identity, granted Secrets there by a Role, gets
    the key over SDS on 15012 from each replica; one without the Role gets only the public CA."""
    c1 = env.c1
    objects = gateway_objects(NS)
    apply(c1, objects)
    pem = next(o for o in objects if o["kind"] == "Secret")["stringData"]
    status, ca = c1.request("GET", f"/api/v1/namespaces/{SYS}/secrets/istio-ca-secret")
    assert status == 200, ca
    root = base64.b64decode(ca["data"].get("root-cert.pem") or ca["data"]["ca-cert.pem"])

    def fetch(m: Meshd, sa: str) -> dict:
        token = c1.kubectl("create", "token", sa, "-n", NS, "--audience", "istio-ca").stdout.strip()
        return gateway_sds(f"127.0.0.1:{m.secure}", root, token, NS, sa, host=f"istiod.{SYS}.svc")

    for name, m in replicas.items():
        got = eventually(f"{name}: the gateway's certificate over SDS", lambda: (
            lambda r: r if GATEWAY_CERT in r else None)(fetch(m, "ingress")), timeout=30, interval=0.5)
        assert got[GATEWAY_CERT].tls_certificate.private_key.inline_bytes.decode() == pem["tls.key"], name
        assert set(fetch(m, "no-secrets")) == {GATEWAY_CA}, name


def test_the_lease_moves_when_the_leader_dies(env, replicas):
    c1 = env.c1
    leader, follower = leader_and_follower(c1, replicas)
    replicas[leader].kill()
    eventually("the follower takes the lease", lambda: lease_holder(c1).startswith(follower + "_"), timeout=45,
               interval=0.5)
    # The new leader does the leader's duties: a deleted root ConfigMap comes back in both clusters.
    for c in (env.c1, env.c2):
        c.kubectl("delete", "configmap", ROOT_CM, "-n", "default")
    for c in (env.c1, env.c2):
        eventually(f"{c.name}: the new leader restores the root", lambda: "default" in root_configmaps(c),
                   timeout=30)


def test_the_chart_rbac_refused_meshd_nothing(env, replicas):
    """Runs last: everything above ran as the chart's ServiceAccount and the chart's reader. A real
    kube-apiserver serves requests as soon as it listens and, for a moment before its RBAC informers
    have synced, answers 403 to all but system:masters (/readyz waits for that; clients do not): lines
    about cluster1 logged while it restarted are not the chart's RBAC. meshd backs off and relists."""
    def restarting(line: str) -> bool:
        t = datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()
        return "cluster=cluster2" not in line and any(a <= t <= b for a, b in env.restarts)

    for name, m in replicas.items():
        refused = [line for line in m.log().splitlines()
                   if re.search(r"forbidden|\b403\b", line, re.I) and not restarting(line)]
        assert not refused, f"{name}: " + "\n".join(refused[:20])
