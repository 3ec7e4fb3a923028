"""Discovery selectors, per-remote selectors, cluster-local services and ServiceEntries selecting the
pods of every cluster (issue 33 items 1, 2, 4, 6), on the two backends of test_real_multicluster.py
(two real kube-apiservers, and kube-sim with RBAC enforced), whose helpers it reuses.

cluster1 (primary, network1) and cluster2 (remote, network2, joined with ``meshctl add-cluster``) each
have ``team-a`` (labelled ``mesh: on``, as is ``istio-system``, whose east-west gateway Service is
discovered like any other, in istiod too) and ``team-b`` (unlabelled), each with a ``web`` Service and
one pod. One meshd runs as the chart's ServiceAccount with a mesh config file selecting ``mesh: on``; the
tests rewrite the file (meshd reloads it) and relabel namespaces, in order:

- only ``team-a`` is discovered, in both clusters: its endpoints, its Istio config, its root ConfigMap;
  ``team-b`` has none of them;
- a ServiceEntry of the config cluster selects the pods of cluster2 too (istiod's behaviour);
- ``serviceSettings`` makes ``*.team-a.svc.cluster.local`` cluster-local: a proxy gets only its own
  cluster's endpoints (no gateway for the other network);
- ``team-b`` labelled in cluster1 is discovered at once (endpoints, config, root ConfigMap); ``team-a``
  unlabelled in cluster2 loses its endpoints at once;
- with a few namespaces selected each has its own watches: after cluster2's watches end with 410 Gone,
  each namespace's relist prunes only its own objects;
- ★ the remote Secret's ``meshd.io/discovery-selectors`` annotation replaces the selectors for cluster2
  only, shows in /debug/clusterz, and removing it restores the mesh-wide ones; a malformed one is
  refused by name while the cluster keeps running;
- a second meshd reads cluster2 from a kubeconfig folder (``--multicluster-kubeconfig-path``): synced,
  rotated without a gap, an unusable file refused by its path, the cluster stopped with its file.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
import yaml

import realk8s
from meshd_proc import Meshd, eventually
from test_helm import render
from test_real_multicluster import (
    GATEWAY1,
    GATEWAY2,
    ROOT_CM,
    SYS,
    TLS,
    apply,
    clusterz,
    east_west_gateway,
    eds,
    meshctl,
    namespace,
    root_configmaps,
    token_kubeconfig,
    wait_eds,
)

A, B = "team-a", "team-b"
SELECT = "discoverySelectors: [{matchLabels: {mesh: 'on'}}]\n"
ANNOTATION = "meshd.io/discovery-selectors"
REMOTE_SECRET = "istio-remote-secret-cluster2"
# Pod IPs: cluster, namespace.
IPS = {("cluster1", A): "10.1.1.1", ("cluster1", B): "10.1.2.1",
       ("cluster2", A): "10.2.1.1", ("cluster2", B): "10.2.2.1"}


def web(ns: str) -> str:
    return f"outbound|7070||web.{ns}.svc.cluster.local"


def objects(ns: str, ip: str) -> list[dict]:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": ns},
           "spec": {"selector": {"app": "web"},
                    "ports": [{"name": "grpc", "port": 7070, "targetPort": 17070, "appProtocol": "grpc"}]}}
    slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
              "metadata": {"name": "web-a", "namespace": ns, "labels": {"kubernetes.io/service-name": "web"}},
              "addressType": "IPv4", "ports": [{"name": "grpc", "port": 17070, "protocol": "TCP"}],
              "endpoints": [{"addresses": [ip], "conditions": {"ready": True},
                             "targetRef": {"kind": "Pod", "name": "web-0", "namespace": ns}}]}
    return [svc, slice_]


def add_pod(c, ns: str, ip: str) -> None:
    if c.request("GET", f"/api/v1/namespaces/{ns}/serviceaccounts/default")[0] == 404:
        c.kubectl("create", "serviceaccount", "default", "-n", ns)
    apply(c, [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": ns,
                                                              "labels": {"app": "web", **TLS}},
               "spec": {"containers": [{"name": "app", "image": "app"}], "automountServiceAccountToken": False}}])
    c.kubectl("patch", "pod", "web-0", "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps(
        {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "192.0.2.10",
                    "conditions": [{"type": "Ready", "status": "True"}]}}))


def label(c, ns: str, *pairs: str) -> None:
    c.kubectl("label", "namespace", ns, *pairs, "--overwrite")


def destination_rule(ns: str) -> dict:
    return {"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"host": f"web.{ns}.svc.cluster.local", "trafficPolicy": {"connectionPool": {
                "tcp": {"maxConnections": 7}}}}}


def config_namespaces(m: Meshd) -> set[str]:
    """Namespaces of the DestinationRules meshd read from the config cluster."""
    objs = m.json("/debug/configz")["istioConfig"]["objects"]
    return {o["namespace"] for o in objs if o["kind"] == "DestinationRule"}


@pytest.fixture(scope="module", params=["kube-sim", "real"])
def env(request, tmp_path_factory):
    with realk8s.two_clusters(request, tmp_path_factory, "sel") as e:
        for c, network, gateway in ((e.c1, "network1", GATEWAY1), (e.c2, "network2", GATEWAY2)):
            apply(c, [namespace(SYS, network), namespace(A), namespace(B)])
            # The system namespace too: its east-west gateway Service is discovered like any other.
            label(c, A, "mesh=on")
            label(c, SYS, "mesh=on")
            for ns in (A, B):
                add_pod(c, ns, IPS[(c.name, ns)])
                apply(c, objects(ns, IPS[(c.name, ns)]))
            apply(c, [east_west_gateway(network, gateway)])
        e.c1.install_crds()
        apply(e.c1, render({"clusterId": "cluster1"}))
        apply(e.c2, render({"profile": "remote"}))
        apply(e.c1, [destination_rule(A), destination_rule(B)])
        yield e


@pytest.fixture(scope="module")
def mesh(env, tmp_path_factory):
    """One meshd as the chart's ServiceAccount, following a mesh config file; cluster2 joined."""
    c1, c2 = env.c1, env.c2
    root = tmp_path_factory.mktemp(f"sel-meshd-{env.backend}")
    token = c1.kubectl("create", "token", "meshd", "-n", SYS, "--duration", "2h").stdout.strip()
    config = root / "mesh.yaml"
    config.write_text(SELECT)
    m = Meshd(root / "meshd", ["--kubeconfig", str(token_kubeconfig(c1, token, root / "meshd.kubeconfig")),
                               "--cluster-id", "cluster1", "--mesh-config", str(config),
                               "--config-poll", "200ms", "--watch-timeout", f"{realk8s.WATCH_TIMEOUT}s"],
              ready_timeout=90)
    m.config = config
    try:
        meshctl("add-cluster", "--name", "cluster2", "--kubeconfig", str(c2.kubeconfig), "--allow-loopback",
                "--create-service-account=false", "--apply", "--primary-kubeconfig", str(c1.kubeconfig))
        eventually("cluster2 synced", lambda: clusterz(m).get("cluster2", {}).get("syncStatus") == "synced",
                   timeout=30)
        yield m
    finally:
        m.kill()


def test_only_selected_namespaces_are_discovered(env, mesh):
    # team-a from both clusters (cluster1's pod through network1's gateway for a network2 proxy) ...
    wait_eds(mesh, "cluster2", "network2", web(A), {"10.2.1.1:17070", f"{GATEWAY1}:15443"}, "team-a")
    # ... team-b from neither.
    assert eds(mesh, "cluster2", "network2", web(B)) == set()
    assert eds(mesh, "cluster1", "network1", web(B)) == set()
    # Istio config of team-b is not read; the root ConfigMap is published in team-a only.
    eventually("team-a's DestinationRule only", lambda: config_namespaces(mesh) == {A}, timeout=20)
    for c in (env.c1, env.c2):
        got = eventually(f"{c.name}: root ConfigMap in team-a", lambda: root_configmaps(c) if A in
                         root_configmaps(c) else None, timeout=30)
        assert B not in got and "default" not in got, got


def test_a_service_entry_selects_pods_in_every_cluster(env, mesh):
    host = "web-vm.team-a.example"
    apply(env.c1, [{"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
                    "metadata": {"name": "web-vm", "namespace": A},
                    "spec": {"hosts": [host], "location": "MESH_INTERNAL", "resolution": "STATIC",
                             "ports": [{"number": 8080, "name": "http", "protocol": "HTTP"}],
                             "workloadSelector": {"labels": {"app": "web"}}}}])
    name = f"outbound|8080||{host}"
    # cluster2's pod, seen directly by a cluster2 proxy: only selectable when remote pods count.
    eventually("the remote pod in the ServiceEntry",
               lambda: "10.2.1.1:8080" in eds(mesh, "cluster2", "network2", name), timeout=30)
    # A team-b pod is not selected (its namespace is not discovered, and it is another namespace).
    assert "10.2.2.1:8080" not in eds(mesh, "cluster2", "network2", name)


def test_a_cluster_local_service_is_served_from_the_proxy_cluster_only(env, mesh):
    wait_eds(mesh, "cluster1", "network1", web(A), {"10.1.1.1:17070", f"{GATEWAY2}:15443"}, "before")
    mesh.config.write_text(SELECT + "serviceSettings: [{settings: {clusterLocal: true}, "
                                    "hosts: ['*.team-a.svc.cluster.local']}]\n")
    wait_eds(mesh, "cluster1", "network1", web(A), {"10.1.1.1:17070"}, "cluster-local from cluster1")
    wait_eds(mesh, "cluster2", "network2", web(A), {"10.2.1.1:17070"}, "cluster-local from cluster2")
    mesh.config.write_text(SELECT)
    wait_eds(mesh, "cluster1", "network1", web(A), {"10.1.1.1:17070", f"{GATEWAY2}:15443"}, "global again")


def test_a_namespace_that_starts_or_stops_matching_changes_at_once(env, mesh):
    c1, c2 = env.c1, env.c2
    label(c1, B, "mesh=on")
    wait_eds(mesh, "cluster1", "network1", web(B), {"10.1.2.1:17070"}, "team-b discovered in cluster1")
    eventually("team-b's DestinationRule read", lambda: config_namespaces(mesh) == {A, B}, timeout=20)
    eventually("cluster1: root ConfigMap in team-b", lambda: B in root_configmaps(c1), timeout=30)
    assert B not in root_configmaps(c2), "cluster2's team-b is still unlabelled"
    label(c2, A, "mesh-")
    wait_eds(mesh, "cluster1", "network1", web(A), {"10.1.1.1:17070"}, "cluster2's team-a dropped")
    label(c2, A, "mesh=on")
    wait_eds(mesh, "cluster1", "network1", web(A), {"10.1.1.1:17070", f"{GATEWAY2}:15443"}, "and back")


def test_a_relist_prunes_only_its_own_namespace(env, mesh):
    """With a few namespaces selected each has its own watches (cluster2: istio-system and team-a). meshd
    is paused while cluster2 ends them (a real server: past meshd's --watch-timeout; kube-sim: dropped),
    a slice is added to team-a and the store compacted past meshd's resourceVersions (etcd's compaction
    API; kube-sim's compact fault). Resumed, every namespace's watches get 410 Gone and relist, and each
    prunes only what its own namespace lacks: team-a gains the slice, cluster2's east-west gateway
    Service (istio-system) still carries team-a to network1, and team-a's watches follow a later change."""
    c2 = env.c2
    extra = objects(A, "10.2.1.2")[1]
    extra["metadata"]["name"] = "web-extra"
    del extra["endpoints"][0]["targetRef"]  # no pod: served as is

    def gone() -> int:  # cluster2's watches answered 410 Gone (cluster2 never compacts on its own)
        return sum("cluster=cluster2" in line and "410 Gone" in line for line in mesh.log().splitlines())

    before = gone()
    mesh.proc.send_signal(signal.SIGSTOP)
    try:
        env.end_watches(c2)
        apply(c2, [extra])
        env.compact(c2)
    finally:
        mesh.proc.send_signal(signal.SIGCONT)
    eventually("cluster2's watches get 410 Gone", lambda: gone() > before, timeout=30)
    wait_eds(mesh, "cluster2", "network2", web(A), {"10.2.1.1:17070", "10.2.1.2:17070", f"{GATEWAY1}:15443"},
             "cluster2's team-a relisted with the new slice")
    wait_eds(mesh, "cluster1", "network1", web(A), {"10.1.1.1:17070", f"{GATEWAY2}:15443"},
             "cluster2's gateway kept by the other namespace's relist")
    c2.kubectl("delete", "endpointslice", "web-extra", "-n", A)
    wait_eds(mesh, "cluster2", "network2", web(A), {"10.2.1.1:17070", f"{GATEWAY1}:15443"}, "extra slice gone")


def test_a_remote_secret_overrides_the_selectors_for_its_cluster(env, mesh):
    c1, c2 = env.c1, env.c2
    label(c2, B, "remote=yes")
    label(c2, SYS, "remote=yes")  # its gateway
    c1.kubectl("annotate", "secret", REMOTE_SECRET, "-n", SYS, f"{ANNOTATION}=[{{matchLabels: {{remote: 'yes'}}}}]",
               "--overwrite")
    # cluster2 now discovers team-b (its own selectors) and no longer team-a (mesh: on is not its rule).
    wait_eds(mesh, "cluster1", "network1", web(B), {"10.1.2.1:17070", f"{GATEWAY2}:15443"}, "cluster2's team-b")
    wait_eds(mesh, "cluster1", "network1", web(A), {"10.1.1.1:17070"}, "cluster2's team-a gone")
    row = clusterz(mesh)["cluster2"]
    assert row["discoverySelectors"] == [{"matchLabels": {"remote": "yes"}}], row
    assert "discoverySelectors" not in clusterz(mesh)["cluster1"]
    eventually("cluster2: root ConfigMap in team-b", lambda: B in root_configmaps(c2), timeout=30)
    # cluster1 (the mesh-wide selectors) is unchanged.
    assert config_namespaces(mesh) == {A, B}
    # A malformed annotation is refused by name; the cluster keeps its last good selectors.
    c1.kubectl("annotate", "secret", REMOTE_SECRET, "-n", SYS,
               f"{ANNOTATION}=[{{matchExpressions: [{{key: remote, operator: In}}]}}]", "--overwrite")
    def cluster2_rows():
        return [r for r in mesh.json("/debug/clusterz") if r["id"] == "cluster2"]

    rows = eventually("the bad annotation reported",
                      lambda: (lambda rs: rs if any(ANNOTATION in r["syncStatus"] for r in rs) else None)(
                          cluster2_rows()), timeout=20)
    assert any("In and NotIn need at least one value" in r["syncStatus"] for r in rows), rows
    assert any(r["syncStatus"] == "synced" for r in rows), rows
    assert eds(mesh, "cluster1", "network1", web(B)) == {"10.1.2.1:17070", f"{GATEWAY2}:15443"}
    # Removed, cluster2 follows the mesh-wide selectors again.
    c1.kubectl("annotate", "secret", REMOTE_SECRET, "-n", SYS, f"{ANNOTATION}-")
    wait_eds(mesh, "cluster1", "network1", web(A), {"10.1.1.1:17070", f"{GATEWAY2}:15443"}, "mesh-wide again")
    wait_eds(mesh, "cluster1", "network1", web(B), {"10.1.2.1:17070"}, "cluster2's team-b unselected again")
    assert "discoverySelectors" not in clusterz(mesh)["cluster2"]


def renamed_kubeconfig(c, cluster: str, extra_user: str = "") -> str:
    """``c``'s kubeconfig with its cluster and context named ``cluster`` (the folder's cluster ID);
    ``extra_user`` changes the bytes without changing what it grants (a rotation)."""
    kc = yaml.safe_load(Path(c.kubeconfig).read_text())
    kc["clusters"] = [{"name": cluster, "cluster": kc["clusters"][0]["cluster"]}]
    kc["contexts"] = [{"name": cluster, "context": {"cluster": cluster, "user": kc["users"][0]["name"]}}]
    kc["current-context"] = cluster
    if extra_user:
        kc["users"].append({"name": extra_user, "user": {"token": "unused"}})
    return yaml.safe_dump(kc)


def test_remote_kubeconfigs_from_a_folder(env, tmp_path):
    """``--multicluster-kubeconfig-path``: a cluster per file, its ID from the kubeconfig; rotated
    without a gap when the file changes, refused by name when unusable, stopped when removed."""
    c1, c2 = env.c1, env.c2
    folder = tmp_path / "kubeconfigs"
    folder.mkdir()
    (folder / "remote.yaml").write_text(renamed_kubeconfig(c2, "cluster2"))
    token = c1.kubectl("create", "token", "meshd", "-n", SYS, "--duration", "1h").stdout.strip()
    m = Meshd(tmp_path / "meshd", ["--kubeconfig", str(token_kubeconfig(c1, token, tmp_path / "meshd.kubeconfig")),
                                   "--cluster-id", "cluster1", "--multicluster-kubeconfig-path", str(folder),
                                   "--config-poll", "200ms"], ready_timeout=90)
    try:
        both = {"10.1.1.1:17070", f"{GATEWAY2}:15443"}
        wait_eds(m, "cluster1", "network1", web(A), both, "cluster2 from its file")
        row = clusterz(m)["cluster2"]
        assert row["syncStatus"] == "synced" and row["secretName"] == str(folder / "remote.yaml"), row
        # A changed file rotates make-before-break: the endpoints never go.
        (folder / "remote.yaml").write_text(renamed_kubeconfig(c2, "cluster2", extra_user="rotated"))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            assert eds(m, "cluster1", "network1", web(A)) == both, "a gap during the rotation"
            time.sleep(0.2)  # meshd limits how fast new streams open
        assert "switched to the new credentials" in m.log()
        # An unusable file is reported by its path; the others keep running.
        (folder / "junk.yaml").write_text("users: []\n")
        eventually("the unusable file reported", lambda: any(
            r["secretName"].endswith("junk.yaml") and r["syncStatus"].startswith("error: ")
            for r in m.json("/debug/clusterz")), timeout=10)
        assert clusterz(m)["cluster2"]["syncStatus"] == "synced"
        # Removed, the cluster stops and its endpoints go.
        (folder / "remote.yaml").unlink()
        wait_eds(m, "cluster1", "network1", web(A), {"10.1.1.1:17070"}, "cluster2 removed with its file")
        # The remote Secrets are not watched while the folder is in use.
        assert "cluster2" not in clusterz(m)
    finally:
        m.kill()
