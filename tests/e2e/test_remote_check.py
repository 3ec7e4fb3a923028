"""★ ``meshctl remote-clusters --check`` (issue 33 item 10) on the two backends of test_real_multicluster.py
(two real kube-apiservers, and kube-sim with RBAC enforced), whose helpers it reuses.

cluster1 is the primary (network1); cluster2 a remote (network2), joined with ``meshctl add-cluster`` as
the chart's reader, with one service and an east-west gateway Service whose load balancer is 127.0.0.1 and
whose port is a TCP listener of the test. One meshd runs as the chart's ServiceAccount. In order:

- healthy: every line passes (sync, last event, credentials with the token's real expiry, RBAC, stale
  endpoints, the gateway accepting connections) and the exit status is 0;
- the gateway's listener closed: its line fails (connection refused), exit status 1;
- a remote Secret for cluster3 whose bearer token expired an hour ago: its credentials line says so
  (and it does not sync: the API server refuses the token);
- cluster4 joined with a reader whose ClusterRole lacks ``create configmaps``: it syncs, and its RBAC line
  names exactly that verb (asked of cluster2 with cluster4's own token: SelfSubjectAccessReview), and
  its one-hour token warns;
- cluster5 pointing at a closed port: its sync line fails, and its RBAC line cannot be asked.

About 20 s per backend. The expired token is built here, not issued by the API server (none issues one
already expired): a JWT with the reader's subject and an ``exp`` in the past, which both servers refuse.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

import realk8s
from meshd_proc import BIN_DIR, Meshd, eventually
from test_helm import render
from test_real_multicluster import SYS, apply, clusterz, meshctl, namespace, token_kubeconfig

NS = "sample"
PASSING = {"sync", "last event", "credentials", "rbac", "stale endpoints"}


def web(ip: str) -> list[dict]:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
           "spec": {"ports": [{"name": "grpc", "port": 7070, "targetPort": 17070, "appProtocol": "grpc"}]}}
    slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
              "metadata": {"name": "web-a", "namespace": NS, "labels": {"kubernetes.io/service-name": "web"}},
              "addressType": "IPv4", "ports": [{"name": "grpc", "port": 17070, "protocol": "TCP"}],
              "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}]}
    return [svc, slice_]


def add_gateway(c, port: int) -> None:
    """network2's east-west gateway on the test's listener: a LoadBalancer whose ingress is 127.0.0.1 (the
    API server refuses a loopback externalIP, not a load balancer's status)."""
    apply(c, [{"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "istio-eastwestgateway", "namespace": SYS,
                            "labels": {"istio": "eastwestgateway", "topology.istio.io/network": "network2",
                                       "networking.istio.io/gatewayPort": str(port)}},
               "spec": {"type": "LoadBalancer", "selector": {"istio": "eastwestgateway"},
                        "ports": [{"name": "tls", "port": port}]}}])
    c.kubectl("patch", "service", "istio-eastwestgateway", "-n", SYS, "--subresource=status", "--type=merge",
              "-p", json.dumps({"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}}))


def check(m: Meshd) -> tuple[int, list[dict], str]:
    """``remote-clusters --check -o json``: exit status, lines; and the table's stderr summary."""
    base = [str(BIN_DIR / "meshctl"), "--meshd", f"http://127.0.0.1:{m.monitoring}", "remote-clusters", "--check"]
    js = subprocess.run([*base, "-o", "json"], capture_output=True, text=True, timeout=60)
    table = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert table.returncode == js.returncode, (table.stderr, js.stderr)
    return js.returncode, json.loads(js.stdout), table.stdout + table.stderr


def lines(rows: list[dict], cluster: str) -> dict[str, dict]:
    return {r["check"]: r for r in rows if r["cluster"] == cluster}


def remote_secret(c1, name: str, kubeconfig: Path) -> None:
    """A labelled remote Secret for cluster ``name`` in the primary."""
    c1.kubectl("create", "secret", "generic", f"istio-remote-secret-{name}", "-n", SYS,
               f"--from-file={name}={kubeconfig}")
    c1.kubectl("label", "secret", f"istio-remote-secret-{name}", "-n", SYS, "istio/multiCluster=true")


def expired_token(subject: str) -> str:
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    now = int(time.time())
    claims = {"iss": "https://kubernetes.default.svc.cluster.local", "sub": subject, "aud": ["https://kubernetes.default.svc.cluster.local"],
              "iat": now - 7200, "nbf": now - 7200, "exp": now - 3600}
    return f"{enc({'alg': 'RS256', 'kid': 'test'})}.{enc(claims)}.{base64.urlsafe_b64encode(b'x' * 256).rstrip(b'=').decode()}"


@pytest.fixture(scope="module", params=["kube-sim", "real"])
def env(request, tmp_path_factory):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    with realk8s.two_clusters(request, tmp_path_factory, "check") as e:
        e.listener = listener
        apply(e.c1, [namespace(SYS, "network1")])
        apply(e.c2, [namespace(SYS, "network2"), namespace(NS)])
        apply(e.c2, web("10.2.0.1"))
        add_gateway(e.c2, listener.getsockname()[1])
        e.c1.install_crds()
        apply(e.c1, render({"clusterId": "cluster1"}))
        apply(e.c2, render({"profile": "remote"}))
        try:
            yield e
        finally:
            listener.close()


@pytest.fixture(scope="module")
def mesh(env):
    c1, c2 = env.c1, env.c2
    token = c1.kubectl("create", "token", "meshd", "-n", SYS, "--duration", "2h").stdout.strip()
    m = Meshd(env.root / "meshd", ["--kubeconfig", str(token_kubeconfig(c1, token, env.root / "meshd.kubeconfig")),
                                   "--cluster-id", "cluster1"], ready_timeout=90)
    try:
        meshctl("add-cluster", "--name", "cluster2", "--kubeconfig", str(c2.kubeconfig), "--allow-loopback",
                "--create-service-account=false", "--apply", "--primary-kubeconfig", str(c1.kubeconfig))
        eventually("cluster2 synced", lambda: clusterz(m).get("cluster2", {}).get("syncStatus") == "synced",
                   timeout=30)
        eventually("network2's gateway discovered", lambda: [g["Network"] for g in m.json("/debug/networkz")] == ["network2"],
                   timeout=20)
        eventually("cluster2's endpoint served", lambda: "web.sample.svc.cluster.local" in m.json("/debug/endpointz"),
                   timeout=20)
        yield m
    finally:
        m.kill()


def test_a_healthy_remote_passes_every_check(mesh):
    code, rows, table = check(mesh)
    c2 = lines(rows, "cluster2")
    assert set(c2) == PASSING | {"gateway"}, rows
    assert all(r["result"] == "ok" for r in c2.values()), rows
    assert code == 0, table
    assert "grants all 18 permissions meshd needs" in c2["rbac"]["detail"]
    # web's endpoint, and the API server's own (default/kubernetes).
    assert re.fullmatch(r"none \([1-9]\d* endpoints, all current\)", c2["stale endpoints"]["detail"]), c2
    # add-cluster's token is a long-lived ServiceAccount token, or a TokenRequest one with an expiry.
    assert "bearer token" in c2["credentials"]["detail"]
    assert c2["last event"]["detail"].endswith(" ago")
    assert "network network2 gateway 127.0.0.1:" in c2["gateway"]["detail"]
    assert "accepts connections" in c2["gateway"]["detail"]
    assert "all" in table and "checks passed" in table
    assert "cluster1" not in {r["cluster"] for r in rows}, "the config cluster is not a remote"


def test_an_unreachable_gateway_fails_its_line(env, mesh):
    env.listener.close()
    code, rows, table = check(mesh)
    gw = lines(rows, "cluster2")["gateway"]
    assert gw["result"] == "fail" and "unreachable from meshd" in gw["detail"], gw
    assert "refused" in gw["detail"].lower(), gw
    assert code == 1, table
    assert "FAIL" in table and "check(s) failed" in table
    assert all(r["result"] == "ok" for k, r in lines(rows, "cluster2").items() if k != "gateway"), rows


def test_an_expired_token_fails_the_credentials_line(env, mesh):
    kc = token_kubeconfig(env.c2, expired_token(f"system:serviceaccount:{SYS}:istio-reader-service-account"),
                          env.root / "expired.kubeconfig")
    remote_secret(env.c1, "cluster3", kc)
    eventually("cluster3 known", lambda: "cluster3" in clusterz(mesh), timeout=20)
    code, rows, _ = check(mesh)
    c3 = lines(rows, "cluster3")
    assert c3["credentials"]["result"] == "fail", c3
    assert "bearer token expired at" in c3["credentials"]["detail"] and "(1h" in c3["credentials"]["detail"], c3
    assert c3["sync"]["result"] == "fail" and c3["rbac"]["result"] == "fail", c3
    assert code == 1


def test_a_missing_verb_fails_the_rbac_line(env, mesh):
    c2 = env.c2
    needed = [("", ["namespaces", "services", "pods", "nodes"], ["list", "watch"]),
              ("discovery.k8s.io", ["endpointslices"], ["list", "watch"]),
              ("authentication.k8s.io", ["tokenreviews"], ["create"]),
              ("", ["secrets"], ["list", "watch"]), ("authorization.k8s.io", ["subjectaccessreviews"], ["create"]),
              ("", ["configmaps"], ["list", "watch", "update"])]  # no `create configmaps`
    apply(c2, [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "partial", "namespace": SYS}},
               {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "partial-reader"},
                "rules": [{"apiGroups": [g], "resources": r, "verbs": v} for g, r, v in needed]},
               {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "partial-reader"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "partial-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "partial", "namespace": SYS}]}])
    token = c2.kubectl("create", "token", "partial", "-n", SYS, "--duration", "1h").stdout.strip()
    remote_secret(env.c1, "cluster4", token_kubeconfig(c2, token, env.root / "partial.kubeconfig"))
    eventually("cluster4 synced", lambda: clusterz(mesh).get("cluster4", {}).get("syncStatus") == "synced",
               timeout=30)
    code, rows, _ = check(mesh)
    c4 = lines(rows, "cluster4")
    assert c4["rbac"]["result"] == "fail", c4
    assert "missing 1 of 18 permissions meshd needs: create configmaps (" in c4["rbac"]["detail"], c4
    assert c4["sync"]["result"] == "ok", c4
    # A token that ends within a week warns (a warning alone does not fail the check).
    assert c4["credentials"]["result"] == "warning", c4
    assert "bearer token expires at" in c4["credentials"]["detail"] and "(in 59m" in c4["credentials"]["detail"], c4
    assert code == 1


def test_an_unsynced_remote_fails_the_sync_line(env, mesh):
    kc = yaml.safe_load(env.c2.kubeconfig.read_text())
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    kc["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path = env.root / "closed.kubeconfig"
    path.write_text(yaml.safe_dump(kc))
    remote_secret(env.c1, "cluster5", path)
    eventually("cluster5 known", lambda: "cluster5" in clusterz(mesh), timeout=20)
    code, rows, _ = check(mesh)
    c5 = lines(rows, "cluster5")
    assert c5["sync"]["result"] == "fail" and c5["sync"]["detail"].startswith("not synced: "), c5
    assert c5["rbac"]["result"] == "fail" and "cannot review its permissions" in c5["rbac"]["detail"], c5
    assert c5["stale endpoints"]["result"] == "ok", c5
    assert code == 1
