"""Gateway certificates from a remote cluster (issue 32 item 2), on two API servers: real (etcd +
kube-apiserver, ``realk8s``) and kube-sim (``--enforce-rbac``). cluster1 is the primary, cluster2 a remote,
each with the chart's profile applied; meshd runs as the chart's ``meshd`` ServiceAccount and reads
cluster2 with the token ``meshctl add-cluster`` puts in the remote secret (the chart's reader).

The Gateway naming ``credentialName: ingress-cert`` is the config cluster's; each cluster has its own
``sample/ingress-cert`` Secret (different certificates) and the gateway identities (``ingress``, which a
Role lets read Secrets in ``sample``, and ``no-secrets``). A router proxy whose node says cluster2,
authenticated over 15012 by a cluster2 token (``clusterid: cluster2``), gets cluster2's certificate: meshd
watched that Secret by name and asked cluster2's SubjectAccessReview, both as the reader. A cluster1
gateway still gets cluster1's; the identity without the Role gets only the public CA; a rotation of
cluster2's Secret is re-sent on the open stream.

Then the reader loses what gateway certificates need (its ClusterRole back to the pre-issue-32 rules):
``remote-clusters --check`` fails naming the three missing verbs, a gateway of another namespace of
cluster2 gets nothing, and meshd's log says why (the SubjectAccessReview and the Secret watch forbidden).
"""

from __future__ import annotations

import base64

import pytest

import realk8s
from meshd_proc import Meshd, eventually
from test_helm import render
from test_ingress_gateway import SDS, certificate, decode_secrets, gateway_node
from test_real_multicluster import SYS, apply, clusterz, meshctl, namespace, token_kubeconfig
from test_rbac import GATEWAY_CA, GATEWAY_CERT, gateway_ads, gateway_objects, gateway_sds
from test_remote_check import check, lines

NS, OTHER = "sample", "other"
HOST = f"istiod.{SYS}.svc"  # a name meshd's serving certificate carries
GATEWAY_NEEDS = "list secrets, watch secrets, create subjectaccessreviews.authorization.k8s.io"


def secret_of(objects: list[dict]) -> dict:
    return next(o for o in objects if o["kind"] == "Secret")["stringData"]


def without_gateway(objects: list[dict]) -> list[dict]:
    """The gateway's identities, Role and Secret: the Gateway itself is the config cluster's."""
    return [o for o in objects if o["kind"] != "Gateway"]


@pytest.fixture(scope="module", params=["real", "kube-sim"])
def env(request, tmp_path_factory):
    with realk8s.two_clusters(request, tmp_path_factory, "gwcert") as e:
        apply(e.c1, [namespace(SYS, "network1"), namespace(NS)])
        apply(e.c2, [namespace(SYS, "network2"), namespace(NS), namespace(OTHER)])
        e.c1.install_crds()
        apply(e.c1, render({"clusterId": "cluster1"}))
        e.remote_chart = render({"profile": "remote"})
        apply(e.c2, e.remote_chart)
        e.pem = {}
        for c in (e.c1, e.c2):
            objects = gateway_objects(NS)
            apply(c, objects if c is e.c1 else without_gateway(objects))
            e.pem[c.name] = secret_of(objects)
        yield e


@pytest.fixture(scope="module")
def mesh(env):
    c1, c2 = env.c1, env.c2
    token = c1.kubectl("create", "token", "meshd", "-n", SYS, "--duration", "2h").stdout.strip()
    m = Meshd(env.root / "meshd", ["--kubeconfig", str(token_kubeconfig(c1, token, env.root / "meshd.kubeconfig")),
                                   "--cluster-id", "cluster1"], env={"POD_NAME": "meshd-0"}, ready_timeout=90)
    try:
        meshctl("add-cluster", "--name", "cluster2", "--kubeconfig", str(c2.kubeconfig), "--allow-loopback",
                "--create-service-account=false", "--apply", "--primary-kubeconfig", str(c1.kubeconfig))
        eventually("cluster2 synced", lambda: clusterz(m).get("cluster2", {}).get("syncStatus") == "synced",
                   timeout=30)
        status, ca = eventually("the CA Secret", lambda: (lambda r: r if r[0] == 200 else None)(
            c1.request("GET", f"/api/v1/namespaces/{SYS}/secrets/istio-ca-secret")), timeout=30)
        m.root = base64.b64decode(ca["data"].get("root-cert.pem") or ca["data"]["ca-cert.pem"])
        yield m
    finally:
        m.kill()


def workload_token(c, ns: str, sa: str) -> str:
    return c.kubectl("create", "token", sa, "-n", ns, "--audience", "istio-ca").stdout.strip()


def fetch(env, m: Meshd, c, sa: str, ns: str = NS) -> dict:
    """SDS for a gateway of ``c`` in ``ns`` authenticated as ``sa`` (one request on a fresh stream)."""
    return gateway_sds(f"127.0.0.1:{m.secure}", m.root, workload_token(c, ns, sa), ns, sa, host=HOST, cluster=c.name)


def key_of(secrets: dict) -> str:
    return secrets[GATEWAY_CERT].tls_certificate.private_key.inline_bytes.decode()


def test_a_remote_gateway_gets_its_own_clusters_secret(env, mesh):
    c1, c2 = env.c1, env.c2
    got = eventually("cluster2's certificate over SDS", lambda: (
        lambda r: r if GATEWAY_CERT in r else None)(fetch(env, mesh, c2, "ingress")), timeout=30, interval=0.5)
    assert set(got) == {GATEWAY_CERT, GATEWAY_CA}, sorted(got)
    assert key_of(got) == env.pem["cluster2"]["tls.key"] != env.pem["cluster1"]["tls.key"]
    assert got[GATEWAY_CA].validation_context.trusted_ca.inline_bytes.decode() == env.pem["cluster2"]["ca.crt"]
    # cluster2's identity without the Role: the SubjectAccessReview in cluster2 says no, only the CA.
    assert set(fetch(env, mesh, c2, "no-secrets")) == {GATEWAY_CA}
    # The same Secret name for a gateway of the primary is the primary's.
    assert key_of(fetch(env, mesh, c1, "ingress")) == env.pem["cluster1"]["tls.key"]


def test_a_rotation_in_the_remote_is_resent(env, mesh):
    c2 = env.c2
    ads = gateway_ads(f"127.0.0.1:{mesh.secure}", mesh.root, workload_token(c2, NS, "ingress"), HOST, "cluster2")
    try:
        names = [GATEWAY_CERT, GATEWAY_CA]
        ads.send(SDS, node=gateway_node(NS, "ingress", "cluster2"), resource_names=names)
        first = ads.recv(timeout=15)
        assert key_of(decode_secrets(first)) == env.pem["cluster2"]["tls.key"]
        ads.ack(first, names)
        cert, key = certificate("ingress.example.com")
        apply(c2, [{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                    "metadata": {"name": "ingress-cert", "namespace": NS},
                    "stringData": {"tls.crt": cert, "tls.key": key, "ca.crt": env.pem["cluster2"]["ca.crt"]}}])
        pushed = decode_secrets(ads.recv(timeout=30))
        assert pushed[GATEWAY_CERT].tls_certificate.certificate_chain.inline_bytes.decode() == cert
        assert key_of(pushed) == key
        env.pem["cluster2"].update({"tls.crt": cert, "tls.key": key})
    finally:
        ads.close()


def test_a_reader_without_the_gateway_permissions_fails_clearly(env, mesh):
    """The reader's ClusterRole without the secrets and subjectaccessreviews rules (as before issue 32):
    `--check` names them; a gateway of another namespace (a new watch, a new review) gets nothing, and the
    log says both were forbidden."""
    c2 = env.c2
    apply(c2, without_gateway(gateway_objects(OTHER)))
    role = next(d for d in env.remote_chart if d["kind"] == "ClusterRole")
    gateway_rules = [r for r in role["rules"] if {"secrets", "subjectaccessreviews"} & set(r["resources"])]
    assert len(gateway_rules) == 2, role["rules"]
    apply(c2, [{**role, "rules": [r for r in role["rules"] if r not in gateway_rules]}])

    def failing():
        code, rows, _ = check(mesh)
        rbac = lines(rows, "cluster2")["rbac"]
        return (code, rbac) if rbac["result"] == "fail" else None

    code, rbac = eventually("--check sees the missing verbs", failing, timeout=30, interval=1)
    assert code == 1
    assert f"missing 3 of 18 permissions meshd needs: {GATEWAY_NEEDS} (" in rbac["detail"], rbac
    before = len(mesh.log().splitlines())
    assert fetch(env, mesh, c2, "ingress", OTHER) == {}

    def said(what: str) -> bool:
        new = [line for line in mesh.log().splitlines()[before:] if "cluster2" in line and what in line]
        return any("forbidden" in line.lower() for line in new)

    eventually("the review's refusal logged", lambda: said("SubjectAccessReview for a gateway's certificates failed"),
               timeout=10)
    eventually("the watch's refusal logged", lambda: said("cannot watch a gateway's certificate Secret"), timeout=10)
