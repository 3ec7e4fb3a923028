"""The Helm chart's RBAC is exactly what meshd uses: nothing missing, nothing spare.

The simulated API servers enforce RBAC (``meshctl sandbox serve --enforce-rbac``: the stored Roles,
ClusterRoles and bindings decide, 403 otherwise) and log every request (``--request-log``: the
authenticated user and the request's RBAC terms — verb, API group, resource, subresource, namespace,
name). Enforcement proves the chart grants enough (meshd would not sync); the log proves it grants
nothing more:

1. the chart's ``primary`` profile is applied to cluster1 and its ``remote`` profile to cluster2;
2. meshd runs against cluster1 as the chart's ServiceAccount (a TokenRequest token in a kubeconfig),
   with the self-signed CA (the leader creates ``istio-ca-secret``) and leader election; the leader
   publishes ``istio-ca-root-cert`` in every namespace and repairs the copy the test edits;
3. ``meshctl add-cluster --apply`` writes cluster2's remote secret with a token of the chart's reader
   ServiceAccount; meshd discovers cluster2 as that reader, and the leader publishes the root there too
   (and repairs the copy the test edits there) with the same token;
4. workload tokens from both clusters are sent to meshd's CA, so each cluster gets a TokenReview;
5. an ingress gateway in ``sample`` (its own ServiceAccount, a Role to read Secrets there, a
   ``credentialName`` Secret and a Gateway naming it) asks for its certificate over SDS on 15012 with its
   token: meshd watches that Secret (outside its own namespace) and asks a SubjectAccessReview, both as
   the chart's ServiceAccount, and serves the key; an identity of ``sample`` without the Role gets only
   the public CA (the review says no); the same in cluster2 (its own Secret, the gateway's token and
   node of cluster2), read and reviewed there as the remote reader;
6. the permissions each identity used are compared with the chart's rendered rules, both ways.
"""

from __future__ import annotations

import base64
import json
import signal
import subprocess
from pathlib import Path

import grpc
import pytest
import yaml

from meshd_proc import BIN_DIR, KUBECTL, REPO, Meshd, eventually
from test_helm import render, rules
from test_replicas import plugged_in_ca
from test_ingress_gateway import SDS, certificate, decode_secrets, gateway_node
from test_secure_grpc import SAMPLE, call, make_csr
from xdsharness import Ads

NS = "istio-system"
MESHD_USER = f"system:serviceaccount:{NS}:meshd"
READER_USER = f"system:serviceaccount:{NS}:istio-reader-service-account"
ADMIN_USER = "sandbox-admin"
OPERATOR = "operator"
OPERATOR_USER = f"system:serviceaccount:{NS}:{OPERATOR}"

def cluster_role(rules: list[tuple[str, str, list[str]]]) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": OPERATOR},
            "rules": [{"apiGroups": [g], "resources": [r], "verbs": v} for g, r, v in rules]}


# What the operator running `meshctl add-cluster` needs (docs/install-primary-remote.md#permissions).
# In cluster2 it also needs the reader's own permissions: the API server refuses to let anyone create a
# ClusterRole, or bind one, granting what they do not hold (RBAC escalation prevention).
OPERATOR_ROLES = {
    "cluster2": cluster_role([("", "serviceaccounts/token", ["create"]), ("", "namespaces", ["create"]),
                              ("", "serviceaccounts", ["create"]),
                              ("rbac.authorization.k8s.io", "clusterroles", ["create", "get", "update"]),
                              ("rbac.authorization.k8s.io", "clusterrolebindings", ["create"])]),
    "cluster1": cluster_role([("", "secrets", ["create", "get", "update"])]),
}

# Granted by the chart but not exercised here, each with why it is needed. Keep it tiny.
UNEXERCISED: dict[tuple, str] = {}


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], input=stdin,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
    return out.stdout


def meshctl(*args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([str(BIN_DIR / "meshctl"), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"meshctl {' '.join(args)}: {out.stderr}"
    return out


def token_kubeconfig(admin: Path, token: str, out: Path) -> Path:
    """``admin``'s cluster (server and CA) with ``token`` as the user."""
    kc = yaml.safe_load(admin.read_text())
    kc["users"] = [{"name": "sa", "user": {"token": token}}]
    kc["contexts"][0]["context"]["user"] = "sa"
    out.write_text(yaml.safe_dump(kc))
    out.chmod(0o600)
    return out


def apply(kubeconfig: Path, docs: list[dict]) -> None:
    kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(docs))


GATEWAY_CERT, GATEWAY_CA = "kubernetes://ingress-cert", "kubernetes://ingress-cert-cacert"


def gateway_objects(ns: str = "sample") -> list[dict]:
    """An ingress gateway's identity in ``ns`` allowed to read Secrets there (Istio's chart gives its
    gateways that Role), one that is not, the gateway's certificate and a Gateway naming it."""
    cert, key = certificate("ingress.example.com")
    ca, _ = certificate("client-ca.example.com")
    meta = {"namespace": ns}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ingress", **meta}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "no-secrets", **meta}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "ingress-sds", **meta},
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "watch", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "ingress-sds", **meta},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ingress-sds"},
         "subjects": [{"kind": "ServiceAccount", "name": "ingress", "namespace": ns}]},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": {"name": "ingress-cert", **meta},
         "stringData": {"tls.crt": cert, "tls.key": key, "ca.crt": ca}},
        {"apiVersion": "networking.istio.io/v1", "kind": "Gateway", "metadata": {"name": "ingress", **meta},
         "spec": {"selector": {"istio": "ingressgateway"}, "servers": [
             {"port": {"number": 443, "name": "https", "protocol": "HTTPS"}, "hosts": ["ingress.example.com"],
              "tls": {"mode": "MUTUAL", "credentialName": "ingress-cert"}}]}},
    ]


def gateway_ads(addr: str, root: bytes, token: str, host: str | None = None,
                cluster: str = "cluster1") -> Ads:
    """An ADS stream to ``addr`` (15012, its certificate checked for ``host``) authenticated by ``token``, a
    workload token of ``cluster`` (the ``clusterid`` metadata says where to review it)."""
    def metadata(_, done):
        done((("authorization", f"Bearer {token}"), ("clusterid", cluster)), None)

    creds = grpc.composite_channel_credentials(grpc.ssl_channel_credentials(root_certificates=root),
                                               grpc.metadata_call_credentials(metadata))
    options = [("grpc.ssl_target_name_override", host)] if host else []
    return Ads("", channel=grpc.secure_channel(addr, creds, options=options))


def gateway_sds(addr: str, root: bytes, token: str, ns: str, sa: str, host: str | None = None,
                cluster: str = "cluster1") -> dict:
    """What SDS on ``addr`` gives a gateway of ``ns`` in ``cluster`` authenticated as ``sa`` with
    ``token`` (:func:`gateway_ads`): name → Secret."""
    ads = gateway_ads(addr, root, token, host, cluster)
    try:
        ads.send(SDS, node=gateway_node(ns, sa, cluster), resource_names=[GATEWAY_CERT, GATEWAY_CA])
        resp = ads.recv(timeout=15)
        assert resp.type_url == SDS, resp
        return decode_secrets(resp)
    finally:
        ads.close()


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module", params=["self-signed-ca", "plugged-in-ca"])
def run(request, tmp_path_factory):
    """Everything above, once per CA mode; yields the request log's entries and the rendered objects.
    With a plugged-in CA (``--ca-dir``, the chart's ``pluggedInCA``) meshd writes no CA Secret, so the
    chart must not grant it; the leader still publishes the mesh root."""
    plugged_in = request.param == "plugged-in-ca"
    if not (BIN_DIR / "meshctl").exists():
        pytest.skip(f"{BIN_DIR / 'meshctl'} not built")
    tmp = tmp_path_factory.mktemp("rbac")
    log = tmp / "requests.jsonl"
    sandbox = subprocess.Popen(
        [str(BIN_DIR / "meshctl"), "sandbox", "serve", "--clusters", str(REPO / "clusters"),
         "--state-dir", str(tmp / "sandbox"), "--request-log", str(log), "--enforce-rbac"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mesh = None
    try:
        line = sandbox.stdout.readline()
        assert line, f"sandbox exited: {sandbox.stderr.read()}"
        admin = {name: Path(c["kubeconfig"]) for name, c in json.loads(line)["clusters"].items()}
        primary_docs = render({"clusterId": "cluster1", "pluggedInCA": {"enabled": plugged_in}})
        remote_docs = render({"profile": "remote"})
        apply(admin["cluster1"], primary_docs)
        apply(admin["cluster2"], remote_docs)

        token = kubectl(admin["cluster1"], "create", "token", "meshd", "-n", NS, "--duration", "1h").strip()
        as_meshd = token_kubeconfig(admin["cluster1"], token, tmp / "meshd.kubeconfig")
        # meshctl runs as an operator identity of its own, so its requests are told from kubectl's.
        # It is granted exactly what docs/install-primary-remote.md says it needs.
        operator = {}
        reader_role = next(d for d in remote_docs if d["kind"] == "ClusterRole")
        for cluster, role in OPERATOR_ROLES.items():
            if cluster == "cluster2":
                role = {**role, "rules": role["rules"] + reader_role["rules"]}
            kubectl(admin[cluster], "create", "serviceaccount", OPERATOR, "-n", NS)
            apply(admin[cluster], [role, {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": OPERATOR}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                                            "kind": "ClusterRole", "name": OPERATOR},
                "subjects": [{"kind": "ServiceAccount", "name": OPERATOR, "namespace": NS}]}])
            op_token = kubectl(admin[cluster], "create", "token", OPERATOR, "-n", NS).strip()
            operator[cluster] = token_kubeconfig(admin[cluster], op_token, tmp / f"operator-{cluster}.kubeconfig")
        # Twice: the second run rotates the token (the Secret exists and is replaced).
        for _ in range(2):
            meshctl("add-cluster", "--name", "cluster2", "--kubeconfig", str(operator["cluster2"]),
                    "--allow-loopback", "--create-service-account=false", "--apply",
                    "--primary-kubeconfig", str(operator["cluster1"]))
        reader_only = used(read_log(log), "cluster2", OPERATOR_USER)

        ca_args = ["--ca-dir", str(plugged_in_ca(tmp / "cacerts"))] if plugged_in else []
        mesh = Meshd(tmp / "meshd", ["--kubeconfig", str(as_meshd), "--cluster-id", "cluster1",
                                     "--tls-hosts", "localhost", *ca_args], env={"POD_NAME": "meshd-0"})
        eventually("cluster2 synced", lambda: any(
            c["id"] == "cluster2" and c["syncStatus"] == "synced" for c in mesh.json("/debug/clusterz")), timeout=30)

        # The leader publishes the root in both clusters; an edited copy is repaired (the `update` the
        # chart grants).
        def published(cluster: str, ns: str) -> dict:
            out = subprocess.run([KUBECTL, "--kubeconfig", str(admin[cluster]), "get", "configmap", "-n", ns,
                                  "istio-ca-root-cert", "-o", "json"], capture_output=True, text=True, timeout=60)
            return json.loads(out.stdout).get("data", {}) if out.returncode == 0 else {}
        for cluster in ("cluster1", "cluster2"):
            eventually(f"root published in {cluster}", lambda: "root-cert.pem" in published(cluster, "sample"),
                       timeout=30)
            kubectl(admin[cluster], "patch", "configmap", "-n", "sample", "istio-ca-root-cert", "--type", "merge",
                    "-p", '{"data": {"root-cert.pem": "tampered"}}')
            eventually(f"root repaired in {cluster}",
                       lambda: published(cluster, "sample").get("root-cert.pem", "tampered") != "tampered",
                       timeout=30)
        assert published("cluster1", "sample") == published("cluster2", "sample"), "one mesh root"

        if plugged_in:
            root = (tmp / "cacerts" / "root-cert.pem").read_bytes()
        else:
            ca = json.loads(kubectl(admin["cluster1"], "get", "secret", "-n", NS, "istio-ca-secret", "-o", "json"))
            root = base64.b64decode(ca["data"].get("root-cert.pem") or ca["data"]["ca-cert.pem"])
        certs = tmp / "certs"
        certs.mkdir()
        (certs / "root-cert.pem").write_bytes(root)
        target = {"addr": f"localhost:{mesh.secure}", "certs": certs}
        for cluster in ("cluster1", "cluster2"):
            workload = kubectl(admin[cluster], "create", "token", "default", "-n", "sample",
                               "--audience", "istio-ca").strip()
            chain = call(target, make_csr(SAMPLE), metadata=(("authorization", f"Bearer {workload}"),
                                                                ("clusterid", cluster)))
            assert chain, f"no certificate for a {cluster} workload"
        # Gateway certificates: the key only to the identity RBAC lets read Secrets in its namespace.
        objects = gateway_objects()
        apply(admin["cluster1"], objects)
        pem = next(o for o in objects if o["kind"] == "Secret")["stringData"]
        addr = f"localhost:{mesh.secure}"
        # Once meshd has the Gateway (before, no Gateway names the Secret and SDS answers nothing).
        def fetch(sa: str) -> dict:
            token = kubectl(admin["cluster1"], "create", "token", sa, "-n", "sample", "--audience", "istio-ca").strip()
            return gateway_sds(addr, root, token, "sample", sa)
        sds = {"ingress": eventually("the gateway's certificate over SDS", lambda: (
            lambda got: got if GATEWAY_CERT in got else None)(fetch("ingress")), timeout=30, interval=0.5)}
        sds["no-secrets"] = fetch("no-secrets")
        # A gateway in cluster2 gets cluster2's Secret (a certificate of its own), watched and reviewed there
        # as the chart's remote reader; the Gateway naming it is the config cluster's.
        remote = [o for o in gateway_objects() if o["kind"] != "Gateway"]
        apply(admin["cluster2"], remote)

        def fetch_remote(sa: str) -> dict:
            token = kubectl(admin["cluster2"], "create", "token", sa, "-n", "sample", "--audience", "istio-ca").strip()
            return gateway_sds(addr, root, token, "sample", sa, cluster="cluster2")
        sds["remote ingress"] = eventually("a cluster2 gateway's certificate over SDS", lambda: (
            lambda got: got if GATEWAY_CERT in got else None)(fetch_remote("ingress")), timeout=30, interval=0.5)
        sds["remote no-secrets"] = fetch_remote("no-secrets")
        assert mesh.stop() == 0, mesh.log()
        mesh = None
        # Without the chart's remote profile, add-cluster creates the reader's ClusterRole itself.
        add_cluster = ["add-cluster", "--name", "cluster2", "--kubeconfig", str(operator["cluster2"]),
                       "--allow-loopback"]
        meshctl(*add_cluster)
        first_run = used(read_log(log), "cluster2", OPERATOR_USER)
        # A reader role from before gateway certificates (no secrets, no subjectaccessreviews): running
        # add-cluster again brings its rules up to date.
        role_name = f"istio-reader-clusterrole-{NS}"
        old_role = json.loads(kubectl(admin["cluster2"], "get", "clusterrole", role_name, "-o", "json"))
        old_role["rules"] = [r for r in old_role["rules"]
                             if not {"secrets", "subjectaccessreviews"} & set(r["resources"])]
        kubectl(admin["cluster2"], "replace", "-f", "-", stdin=json.dumps(old_role))
        meshctl(*add_cluster)
        own_role = json.loads(kubectl(admin["cluster2"], "get", "clusterrole", role_name, "-o", "json"))
        entries = read_log(log)  # what follows is the test's own probing
        # Enforced: meshd's identity may list Secrets anywhere (gateway certificates), get none outside
        # its own namespace.
        denied = subprocess.run([KUBECTL, "--kubeconfig", str(as_meshd), "get", "secret", "ingress-cert", "-n", "sample"],
                                capture_output=True, text=True, timeout=60)
        allowed = subprocess.run([KUBECTL, "--kubeconfig", str(as_meshd), "get", "secrets", "-n", "sample"],
                                 capture_output=True, text=True, timeout=60)
        yield {"plugged_in": plugged_in, "denied": denied, "allowed": allowed, "entries": entries, "primary": primary_docs, "remote": remote_docs,
               "add_cluster_role": own_role, "reader_only": reader_only, "first_run": first_run, "sds": sds, "pem": pem,
               "remote_pem": next(o for o in remote if o["kind"] == "Secret")["stringData"]}
    finally:
        if mesh is not None:
            mesh.kill()
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=20)


def used(entries: list[dict], cluster: str, user: str) -> set[tuple]:
    """(apiGroup, resource[/subresource], verb, namespace or "", name or "") per request."""
    return {(e["apiGroup"], e["resource"] + (f"/{e['subresource']}" if e["subresource"] else ""), e["verb"],
             e["namespace"], e["name"])
            for e in entries if e["cluster"] == cluster and e["user"] == user}


def grants(docs: list[dict], subject: str) -> list[tuple]:
    """The subject's atoms: (group, resource, verb, resourceName or None, namespace or None=cluster-wide)."""
    ns, _, sa = subject.removeprefix("system:serviceaccount:").partition(":")
    roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("ClusterRole", "Role")}
    out = []
    for b in docs:
        if b["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(s["kind"] == "ServiceAccount" and s["name"] == sa and s["namespace"] == ns
                   for s in b["subjects"]):
            continue
        role = roles[(b["roleRef"]["kind"], b["roleRef"]["name"])]
        scope = b["metadata"].get("namespace") if b["kind"] == "RoleBinding" else None
        out += [(*atom, scope) for atom in rules(role)]
    return out


def allows(atom: tuple, request: tuple) -> bool:
    """Kubernetes RBAC matching of one rule atom against one request (no wildcards in the chart)."""
    group, resource, verb, name, scope = atom
    r_group, r_resource, r_verb, r_ns, r_name = request
    if (group, resource, verb) != (r_group, r_resource, r_verb):
        return False
    if scope is not None and scope != r_ns:
        return False
    # resourceNames never match create, list, watch or deletecollection (no name in the request).
    return name is None or (name == r_name and r_verb not in ("create", "list", "watch", "deletecollection"))


def compare(granted: list[tuple], requests: set[tuple]) -> tuple[list, list]:
    denied = sorted(r for r in requests if not any(allows(a, r) for a in granted))
    spare = sorted(a for a in granted if a not in UNEXERCISED and not any(allows(a, r) for r in requests))
    return denied, spare


def test_rbac_is_enforced(run):
    assert run["denied"].returncode != 0 and "Forbidden" in run["denied"].stderr, run["denied"].stderr
    assert 'cannot get resource "secrets" in API group "" in the namespace "sample"' in run["denied"].stderr
    assert run["allowed"].returncode == 0, run["allowed"].stderr
    assert "ingress-cert" in run["allowed"].stdout, run["allowed"].stdout


def test_gateway_sds_works_under_the_chart_rbac(run):
    """With only the chart's rules meshd read the gateway's Secret and reviewed the gateway's access:
    the identity granted Secrets in its namespace gets the key, the other only the public CA."""
    granted, refused = run["sds"]["ingress"], run["sds"]["no-secrets"]
    assert set(granted) == {GATEWAY_CERT, GATEWAY_CA}, sorted(granted)
    assert granted[GATEWAY_CERT].tls_certificate.private_key.inline_bytes.decode() == run["pem"]["tls.key"]
    assert granted[GATEWAY_CA].validation_context.trusted_ca.inline_bytes.decode() == run["pem"]["ca.crt"]
    assert set(refused) == {GATEWAY_CA}, sorted(refused)
    requests = used(run["entries"], "cluster1", MESHD_USER)
    # The Secret was watched by name in the gateway's namespace, and access reviewed, as meshd.
    assert ("", "secrets", "watch", "sample", "") in requests, sorted(requests)
    assert ("authorization.k8s.io", "subjectaccessreviews", "create", "", "") in requests, sorted(requests)


def test_a_gateway_in_the_remote_gets_the_remote_secret_under_the_remote_profile(run):
    """The gateway's cluster decides where its certificate comes from: cluster2's Secret of that name,
    watched by name and the gateway's access reviewed in cluster2 with the reader's token."""
    granted, refused = run["sds"]["remote ingress"], run["sds"]["remote no-secrets"]
    assert set(granted) == {GATEWAY_CERT, GATEWAY_CA}, sorted(granted)
    key = granted[GATEWAY_CERT].tls_certificate.private_key.inline_bytes.decode()
    assert key == run["remote_pem"]["tls.key"] != run["pem"]["tls.key"]
    assert set(refused) == {GATEWAY_CA}, sorted(refused)
    requests = used(run["entries"], "cluster2", READER_USER)
    assert ("", "secrets", "watch", "sample", "") in requests, sorted(requests)
    assert ("authorization.k8s.io", "subjectaccessreviews", "create", "", "") in requests, sorted(requests)


def test_the_log_records_every_identity(run):
    users = {(e["cluster"], e["user"]) for e in run["entries"]}
    assert {("cluster1", MESHD_USER), ("cluster2", READER_USER), ("cluster1", ADMIN_USER),
            ("cluster2", ADMIN_USER)} <= users, users
    assert all(e["verb"] in ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
               for e in run["entries"])


def test_meshd_uses_exactly_the_primary_profile_rbac(run):
    requests = used(run["entries"], "cluster1", MESHD_USER)
    # The paths this test means to exercise all happened: discovery, remote secrets, CA, lease, TokenReview.
    kinds = {(g, r, v) for g, r, v, _, _ in requests}
    assert {("", "services", "watch"), ("discovery.k8s.io", "endpointslices", "watch"), ("", "secrets", "watch"),
            ("authentication.k8s.io", "tokenreviews", "create"),
            ("authorization.k8s.io", "subjectaccessreviews", "create"),
            ("networking.istio.io", "serviceentries", "watch"),
            ("security.istio.io", "peerauthentications", "watch")} <= kinds, sorted(kinds)
    # The leader publishes the mesh root in both CA modes; only the self-signed CA creates its Secret.
    assert {("coordination.k8s.io", "leases", "update"), ("", "configmaps", "create"),
            ("", "configmaps", "update")} <= kinds, sorted(kinds)
    ca_secret = ("", "secrets", "create")
    if run["plugged_in"]:
        assert ca_secret not in kinds, "a plugged-in CA needs no CA Secret"
    else:
        assert ca_secret in kinds, sorted(kinds)
    denied, spare = compare(grants(run["primary"], MESHD_USER), requests)
    assert not denied, f"meshd used permissions the chart does not grant: {denied}"
    assert not spare, f"the chart grants meshd permissions it never used: {spare}"


def test_the_remote_reader_uses_exactly_the_remote_profile_rbac(run):
    requests = used(run["entries"], "cluster2", READER_USER)
    assert ("authentication.k8s.io", "tokenreviews", "create", "", "") in requests
    # The leader's root publisher in the remote, with the reader's token; a remote gateway's certificate.
    kinds = {(g, r, v) for g, r, v, _, _ in requests}
    assert {("", "configmaps", v) for v in ("list", "watch", "create", "update")} <= kinds, sorted(kinds)
    assert {("", "secrets", "list"), ("", "secrets", "watch"),
            ("authorization.k8s.io", "subjectaccessreviews", "create")} <= kinds, sorted(kinds)
    denied, spare = compare(grants(run["remote"], READER_USER), requests)
    assert not denied, f"the remote reader used permissions the chart does not grant: {denied}"
    assert not spare, f"the chart grants the remote reader permissions it never used: {spare}"


def test_add_cluster_creates_the_same_reader_role_as_the_chart(run):
    chart_role = next(d for d in run["remote"] if d["kind"] == "ClusterRole")
    assert rules(run["add_cluster_role"]) == rules(chart_role)


def test_what_meshctl_add_cluster_needs(run):
    """What docs/install-primary-remote.md says the operator running ``meshctl add-cluster`` needs."""
    def scoped(requests):
        return {(g, r, v, ns or "cluster") for g, r, v, ns, _ in requests}

    # --create-service-account=false (the chart's remote profile made the reader): one TokenRequest.
    assert scoped(run["reader_only"]) == {("", "serviceaccounts/token", "create", NS)}
    # The default also creates the namespace, the reader and its ClusterRole/Binding.
    creates = {
        ("", "serviceaccounts/token", "create", NS), ("", "namespaces", "create", "cluster"),
        ("", "serviceaccounts", "create", NS), ("rbac.authorization.k8s.io", "clusterroles", "create", "cluster"),
        ("rbac.authorization.k8s.io", "clusterrolebindings", "create", "cluster")}
    assert scoped(run["first_run"]) == creates
    # Run again over an outdated reader ClusterRole: it is read, and updated.
    assert scoped(used(run["entries"], "cluster2", OPERATOR_USER)) == creates | {
        ("rbac.authorization.k8s.io", "clusterroles", v, "cluster") for v in ("get", "update")}
    # --apply writes the remote Secret; a re-run (token rotation) reads and replaces it.
    assert scoped(used(run["entries"], "cluster1", OPERATOR_USER)) == {
        ("", "secrets", v, NS) for v in ("create", "get", "update")}


def test_the_reader_is_only_used_by_meshd_in_the_remote_cluster(run):
    """The reader token is never presented to the primary, nor meshd's token to the remote."""
    assert not used(run["entries"], "cluster1", READER_USER)
    assert not used(run["entries"], "cluster2", MESHD_USER)


def test_the_comparison_can_fail(run):
    """A request outside the grants is reported, and so is a grant nothing used."""
    granted = grants(run["primary"], MESHD_USER)
    denied, _ = compare(granted, {("", "secrets", "delete", NS, "istio-ca-secret"),
                                  ("", "secrets", "update", NS, "other"),
                                  ("", "services", "list", "sample", "")})
    assert denied == [("", "secrets", "delete", NS, "istio-ca-secret"), ("", "secrets", "update", NS, "other")]
    _, spare = compare(granted, {("", "services", "list", "", "")})
    assert ("", "nodes", "watch", None, None) in spare
