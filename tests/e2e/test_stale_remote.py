"""★ Stale remotes (issue 33 item 7, istio#54997) on two API servers, real (kube-apiserver) and kube-sim: a
remote whose API server stops answering has its endpoints dropped once its Secret's policy allows (``meshd.io/stale-endpoints:
drop``, ``meshd.io/stale-endpoints-after: 3s``), and served again when it answers; with the policy changed in
place to ``deprioritize``, they stay in EDS at the last priority, behind the primary's, and come back to
priority 0 when it answers.

cluster1 is the primary, cluster2 the remote (joined by an admin-kubeconfig remote secret carrying the
annotations); one network, so a sidecar gets both clusters' pods directly. The remote's kube-apiserver is
killed (SIGKILL, etcd kept) and started again on the same port; kube-sim's refuses connections for 20 s. Checked: EDS (a fresh ADS stream per
look), ``/debug/clusterz``'s ``staleEndpoints``, ``meshctl remote-clusters`` and the
``remote_cluster_stale_total`` counter. The real backend skips without its binaries (tests/peers/build.sh).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess

import pytest

import realk8s
from meshd_proc import BIN_DIR, Meshd, eventually
from test_real_multicluster import (ECHO, SYS, clusterz, eds_priorities, endpoint_slice, metric_sum, pod, populate,
                                    service, wait_eds)

C1_POD, C2_POD = "10.1.0.1", "10.2.0.1"


@pytest.fixture(scope="module", params=["kube-sim", "real"])
def clusters(request, tmp_path_factory):
    with realk8s.two_clusters(request, tmp_path_factory, "stale") as env:
        c1, c2 = env.c1, env.c2
        for c, ip in ((c1, C1_POD), (c2, C2_POD)):
            populate(c, "", [pod(f"echo-{c.name}", ip, {"app": "echo"})],
                     [service("echo"), endpoint_slice("echo", f"echo-{c.name}", [(f"echo-{c.name}", ip)])])
        c1.kubectl("apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "istio-remote-secret-cluster2", "namespace": SYS,
                         "labels": {"istio/multiCluster": "true"},
                         "annotations": {"meshd.io/stale-endpoints": "drop",
                                         "meshd.io/stale-endpoints-after": "3s"}},
            "stringData": {"cluster2": c2.kubeconfig.read_text()}}))
        yield env


@pytest.fixture(scope="module")
def mesh(clusters, tmp_path_factory):
    c1 = clusters.c1
    m = Meshd(tmp_path_factory.mktemp("stale-meshd"),
              args=["--kubeconfig", str(c1.kubeconfig), "--cluster-id", "cluster1"], ready_timeout=90)
    yield m
    m.stop()


def stale_state(mesh: Meshd) -> dict:
    return clusterz(mesh)["cluster2"].get("staleEndpoints", {})


def remote_clusters(mesh: Meshd) -> str:
    out = subprocess.run([str(BIN_DIR / "meshctl"), "--meshd", f"http://127.0.0.1:{mesh.monitoring}", "remote-clusters"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


@contextlib.contextmanager
def api_server_down(env):
    """cluster2's API server stops answering: the real one is killed (as a crashed or partitioned one is
    gone; SIGTERM would wait out meshd's open watches) and started again on its port and store; kube-sim
    refuses connections for a while."""
    if env.backend == "real":
        proc = env.c2.procs.pop("kube-apiserver")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        try:
            yield
        finally:
            env.c2._start_apiserver(120)
    else:
        env.c2.fault(mode="refuse", forSeconds=20)
        yield


def test_a_dropped_stale_remote_leaves_eds_until_its_api_server_answers(clusters, mesh):
    both = {f"{C1_POD}:17070", f"{C2_POD}:17070"}
    wait_eds(mesh, "cluster1", "", ECHO, both, "both clusters' pods", timeout=60)
    eventually("cluster2 synced", lambda: clusterz(mesh)["cluster2"]["syncStatus"] == "synced", timeout=30)
    assert stale_state(mesh) == {"action": "drop", "after": "3s", "stale": False}
    assert "STALE ENDPOINTS" in remote_clusters(mesh)  # drop is not istiod's keep: the column shows
    before = metric_sum(mesh, "remote_cluster_stale_total")

    with api_server_down(clusters):
        eventually("cluster2 unreachable", lambda: "unreachableSince" in stale_state(mesh), timeout=60)
        eventually("cluster2 stale", lambda: stale_state(mesh).get("stale") is True, timeout=15)
        wait_eds(mesh, "cluster1", "", ECHO, {f"{C1_POD}:17070"}, "the stale remote's pod dropped", timeout=10)
        assert metric_sum(mesh, "remote_cluster_stale_total") == before + 1
        assert "STALE since" in remote_clusters(mesh)

    wait_eds(mesh, "cluster1", "", ECHO, both, "served again once its API server answers", timeout=90)
    assert stale_state(mesh) == {"action": "drop", "after": "3s", "stale": False}


def test_a_deprioritized_stale_remote_goes_last_in_eds_until_its_api_server_answers(clusters, mesh):
    """Runs after the drop test, on the same remote: its Secret's policy is changed to ``deprioritize``
    (applied in place, no reconnection). Stale, its pod is still served but at priority 1, after the
    primary's (Envoy uses it only when priority 0 is not healthy enough); counted once more; back at
    priority 0 once its API server answers."""
    level = {f"{C1_POD}:17070": 0, f"{C2_POD}:17070": 0}
    clusters.c1.kubectl("annotate", "secret", "istio-remote-secret-cluster2", "-n", SYS,
                        "meshd.io/stale-endpoints=deprioritize", "--overwrite")
    eventually("the policy changed", lambda: stale_state(mesh).get("action") == "deprioritize", timeout=20)
    # Its watches resumed after the last outage on a quiet cluster: no relist, so its last watch error
    # stays in /debug/clusterz; a second outage with the same error must still be noticed.
    eventually("cluster2 synced", lambda: clusterz(mesh)["cluster2"]["syncStatus"] == "synced", timeout=60)
    eventually("both clusters' pods at priority 0",
               lambda: eds_priorities(mesh, "cluster1", "", ECHO) == level, timeout=60)
    before = metric_sum(mesh, "remote_cluster_stale_total")

    with api_server_down(clusters):
        eventually("cluster2 stale", lambda: stale_state(mesh).get("stale") is True, timeout=60)
        last = {**level, f"{C2_POD}:17070": 1}
        eventually("the stale remote's pod at the last priority",
                   lambda: eds_priorities(mesh, "cluster1", "", ECHO) == last, timeout=10)
        assert metric_sum(mesh, "remote_cluster_stale_total") == before + 1
        shown = remote_clusters(mesh)
        assert any("STALE since" in line and "deprioritize" in line for line in shown.splitlines()), shown

    eventually("priority 0 again once its API server answers",
               lambda: eds_priorities(mesh, "cluster1", "", ECHO) == level, timeout=90)
    assert stale_state(mesh) == {"action": "deprioritize", "after": "3s", "stale": False}
