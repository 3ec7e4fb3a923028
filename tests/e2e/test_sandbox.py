"""The embedded default: ``meshd`` with no kubeconfig serves clusters/ from simulated API servers, joins
the remote with a remote secret, runs the real pipeline on it, and stays live under kubectl edits."""

from __future__ import annotations

import json

import pytest

from meshd_proc import Meshd, eventually


@pytest.fixture(scope="module")
def meshd(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("sandbox"))
    yield m
    assert m.stop() == 0, m.log()


def test_summary_names_clusters_kubeconfigs_and_addresses(meshd):
    out = meshd.stdout()
    assert "meshd sandbox is ready" in out
    for cluster, role in (("cluster1", "primary"), ("cluster2", "remote")):
        line = next(l for l in out.splitlines() if l.strip().startswith(cluster))
        assert role in line and str(meshd.kubeconfig(cluster)) in line, out
    assert f"127.0.0.1:{meshd.grpc}" in out and f"127.0.0.1:{meshd.secure}" in out
    assert "kubectl --kubeconfig" in out


def test_primary_holds_the_remote_secret_like_istioctl_writes_it(meshd):
    secret = json.loads(meshd.kubectl("cluster1", "get", "secret", "-n", "istio-system",
                                      "-l", "istio/multiCluster=true", "-o", "json"))["items"]
    assert [s["metadata"]["name"] for s in secret] == ["istio-remote-secret-cluster2"]
    assert list(secret[0]["data"]) == ["cluster2"]
    assert secret[0]["metadata"]["annotations"]["networking.istio.io/cluster"] == "cluster2"
    # The remote's reader identity exists, and the token in the secret is that service account's.
    sa = json.loads(meshd.kubectl("cluster2", "get", "sa", "-n", "istio-system",
                                  "istio-reader-service-account", "-o", "json"))
    assert sa["metadata"]["name"] == "istio-reader-service-account"


def test_both_clusters_synced_and_services_merged(meshd):
    rows = meshd.json("/debug/clusterz")
    assert [(r["id"], r["syncStatus"]) for r in rows] == [("cluster1", "synced"), ("cluster2", "synced")]
    services = {s["hostname"]: s for s in meshd.json("/debug/registryz")}
    hello = services["helloworld.sample.svc.cluster.local"]
    assert set(hello["clusterVIPs"]["Addresses"]) == {"cluster1", "cluster2"}
    assert "ratings.sample.svc.cluster.local" in services  # only in cluster2: discovered through the remote


def test_kubectl_edit_in_the_remote_is_live(meshd):
    manifest = """
apiVersion: v1
kind: Service
metadata: {name: live-edit, namespace: sample}
spec:
  ports: [{name: http, port: 8080}]
  selector: {app: live-edit}
"""
    meshd.kubectl("cluster2", "apply", "-f", "-", stdin=manifest)
    got = json.loads(meshd.kubectl("cluster2", "get", "svc", "-n", "sample", "live-edit", "-o", "json"))
    assert got["spec"]["ports"][0]["port"] == 8080 and got["spec"]["clusterIP"]
    host = "live-edit.sample.svc.cluster.local"
    eventually("the new service in registryz",
               lambda: any(s["hostname"] == host for s in meshd.json("/debug/registryz")))
    meshd.kubectl("cluster2", "delete", "svc", "-n", "sample", "live-edit")
    eventually("the deleted service gone from registryz",
               lambda: all(s["hostname"] != host for s in meshd.json("/debug/registryz")))


def test_sandbox_certificates_are_written(meshd):
    for name in ("root-cert.pem", "cert-chain.pem", "key.pem"):
        assert (meshd.state / "certs" / name).read_text().startswith("-----BEGIN")


def test_a_bad_topology_is_a_clear_start_error(tmp_path):
    bad = tmp_path / "clusters" / "c1"
    bad.mkdir(parents=True)
    (bad / "10-svc.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {namespace: x}\n")
    with pytest.raises(AssertionError) as err:
        Meshd(tmp_path / "state-missing-ok", ["--sandbox", str(tmp_path / "clusters")], ready_timeout=30)
    assert "10-svc.yaml#1: missing metadata.name" in str(err.value)
