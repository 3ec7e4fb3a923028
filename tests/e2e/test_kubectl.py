"""The stock kubectl against `meshctl sandbox serve`: every command asserts on the state read back."""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

BIN_DIR = Path(os.environ.get("MESHD_BIN_DIR", "target/debug"))
KUBECTL = os.environ.get("KUBECTL", "/usr/bin/kubectl")


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
    ready = json.loads(line)
    yield ready["clusters"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


@pytest.fixture
def kc(sandbox):
    """Runs kubectl against cluster east; returns stdout, raising with stderr on failure."""
    kubeconfig = sandbox["east"]["kubeconfig"]

    def run(*args, check=True, stdin=None, kubeconfig=kubeconfig):
        res = subprocess.run(
            [KUBECTL, "--kubeconfig", kubeconfig, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check and res.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {res.stderr}")
        return res if not check else res.stdout

    return run


def get_json(kc, *args):
    return json.loads(kc("get", *args, "-o", "json"))


def names(listing):
    return sorted(item["metadata"]["name"] for item in listing["items"])


def test_ready_line_and_kubeconfigs(sandbox):
    assert set(sandbox) == {"east", "west"}
    for cluster in sandbox.values():
        assert cluster["url"].startswith("https://127.0.0.1:")
        assert Path(cluster["kubeconfig"]).stat().st_mode & 0o077 == 0


def test_version_and_discovery(kc):
    version = json.loads(kc("version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"] == "v1.33.0"
    resources = kc("api-resources")
    for row in ["configmaps", "cm", "endpointslices", "leases", "clusterroles", "tokenreviews"]:
        assert re.search(rf"\b{row}\b", resources), row
    versions = kc("api-versions").split()
    assert {"v1", "discovery.k8s.io/v1", "coordination.k8s.io/v1", "rbac.authorization.k8s.io/v1"} <= set(versions)


def test_default_namespaces_and_service_accounts(kc):
    assert {"default", "kube-system", "kube-public"} <= set(names(get_json(kc, "namespaces")))
    sas = get_json(kc, "serviceaccounts", "-A")
    assert ("kube-system", "default") in {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in sas["items"]}
    table = kc("get", "ns")
    assert re.search(r"^default\s+Active\s+\d+s", table, re.M), table


MANIFEST = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  labels: {app: web, tier: front}
data:
  keep: "1"
  drop: "2"
---
apiVersion: v1
kind: Service
metadata:
  name: web
  labels: {app: web}
spec:
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: 8080}
  - {name: https, port: 443, targetPort: 8443}
"""


def test_apply_create_then_update_removes_dropped_fields(kc, tmp_path):
    path = tmp_path / "app.yaml"
    path.write_text(MANIFEST)
    out = kc("apply", "-f", str(path))
    assert "configmap/app-config created" in out and "service/web created" in out
    path.write_text(MANIFEST.replace('  drop: "2"\n', "").replace('keep: "1"', 'keep: "9"'))
    assert "configmap/app-config configured" in kc("apply", "-f", str(path))
    cm = get_json(kc, "configmap", "app-config")
    assert cm["data"] == {"keep": "9"}
    svc = get_json(kc, "service", "web")
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["clusterIP"]
    assert [p["port"] for p in svc["spec"]["ports"]] == [80, 443]
    assert "unchanged" in kc("apply", "-f", str(path))


def test_create_label_annotate_patch_delete(kc, tmp_path):
    path = tmp_path / "cm.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "edits"}, "data": {"a": "1"}}))
    assert "configmap/edits created" in kc("create", "-f", str(path))
    assert "AlreadyExists" in kc("create", "-f", str(path), check=False).stderr
    kc("label", "configmap", "edits", "team=mesh")
    kc("annotate", "configmap", "edits", "note=hello")
    kc("patch", "configmap", "edits", "--type", "merge", "-p", '{"data":{"b":"2"}}')
    kc("patch", "configmap", "edits", "--type", "json", "-p", '[{"op":"remove","path":"/data/a"}]')
    cm = get_json(kc, "configmap", "edits")
    assert cm["metadata"]["labels"] == {"team": "mesh"}
    assert cm["metadata"]["annotations"]["note"] == "hello"
    assert cm["data"] == {"b": "2"}
    kc("label", "configmap", "edits", "team-")
    assert "labels" not in get_json(kc, "configmap", "edits")["metadata"]
    assert 'configmap "edits" deleted' in kc("delete", "configmap", "edits")
    assert "NotFound" in kc("get", "configmap", "edits", check=False).stderr


def test_strategic_patch_merges_lists_by_key(kc, tmp_path):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "smp"},
        "spec": {"containers": [{"name": "app", "image": "app:1"}, {"name": "proxy", "image": "proxy:1"}]},
    }
    kc("create", "-f", "-", stdin=json.dumps(pod))
    kc("patch", "pod", "smp", "-p", '{"spec":{"containers":[{"name":"proxy","image":"proxy:2"}]}}')
    containers = get_json(kc, "pod", "smp")["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("app", "app:1"), ("proxy", "proxy:2")]
    table = kc("get", "pod", "smp")
    assert re.search(r"^smp\s+Pending\s", table, re.M), table


def test_selectors_all_namespaces_and_output_formats(kc):
    kc("create", "namespace", "sel")
    for name, labels in [("s1", "app=web"), ("s2", "app=api"), ("s3", "")]:
        kc("create", "configmap", name, "-n", "sel")
        if labels:
            kc("label", "configmap", name, labels, "-n", "sel")
    assert names(get_json(kc, "cm", "-n", "sel", "-l", "app=web")) == ["s1"]
    assert names(get_json(kc, "cm", "-n", "sel", "-l", "app in (web,api)")) == ["s1", "s2"]
    # Every namespace also holds kube-root-ca.crt, which has no labels.
    assert names(get_json(kc, "cm", "-n", "sel", "-l", "!app")) == ["kube-root-ca.crt", "s3"]
    assert names(get_json(kc, "cm", "-n", "sel", "--field-selector", "metadata.name!=s1")) == ["kube-root-ca.crt", "s2", "s3"]
    everywhere = get_json(kc, "cm", "-A")
    assert {("sel", "s1"), ("sel", "s2")} <= {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere["items"]}
    wide = kc("get", "cm", "-A")
    assert re.search(r"^sel\s+s1\s+\d+s", wide, re.M), wide
    assert "name: s1" in kc("get", "cm", "s1", "-n", "sel", "-o", "yaml")
    bad = kc("get", "cm", "-l", "app in web", check=False)
    assert bad.returncode != 0 and ("BadRequest" in bad.stderr or "unable to parse" in bad.stderr), bad.stderr
    assert 'configmap "s1" deleted' in kc("delete", "cm", "-n", "sel", "-l", "app")
    assert names(get_json(kc, "cm", "-n", "sel")) == ["kube-root-ca.crt", "s3"]


def test_watch_sees_another_kubectls_change(kc, sandbox):
    kc("create", "namespace", "watched")
    kubeconfig = sandbox["east"]["kubeconfig"]
    watcher = subprocess.Popen(
        [KUBECTL, "--kubeconfig", kubeconfig, "get", "cm", "-n", "watched", "-w", "-o", "name"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.5)
        kc("create", "configmap", "seen-by-watch", "-n", "watched")
        deadline = time.time() + 15
        lines = []
        while time.time() < deadline:
            line = watcher.stdout.readline()
            lines.append(line)
            if "seen-by-watch" in line:
                break
        assert any("configmap/seen-by-watch" in l for l in lines), lines
    finally:
        watcher.kill()
        watcher.wait()


def test_service_account_tokens(kc):
    kc("create", "serviceaccount", "robot")
    token = kc("create", "token", "robot", "--duration", "15m").strip()
    assert token.count(".") == 2
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    result = json.loads(kc("create", "-f", "-", "-o", "json", stdin=json.dumps(review)))
    assert result["status"]["authenticated"] is True
    assert result["status"]["user"]["username"] == "system:serviceaccount:default:robot"
    who = json.loads(kc("auth", "whoami", "-o", "json"))
    assert who["status"]["userInfo"]["username"] == "sandbox-admin"
    as_robot = kc("auth", "whoami", "-o", "json", "--token", token)
    assert json.loads(as_robot)["status"]["userInfo"]["groups"][0] == "system:serviceaccounts"


def test_unauthenticated_kubeconfig_is_rejected(kc, sandbox, tmp_path):
    text = Path(sandbox["east"]["kubeconfig"]).read_text()
    bad = tmp_path / "bad-kubeconfig"
    bad.write_text(re.sub(r"token: \S+", "token: not-a-valid-token", text))
    res = kc("get", "configmaps", check=False, kubeconfig=str(bad))
    assert res.returncode != 0
    assert "Unauthorized" in res.stderr


def test_clusters_are_independent(kc, sandbox):
    kc("create", "configmap", "only-east")
    res = kc("get", "configmap", "only-east", check=False, kubeconfig=sandbox["west"]["kubeconfig"])
    assert res.returncode != 0 and "NotFound" in res.stderr
