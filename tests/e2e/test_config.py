"""Istio configuration end to end: objects applied with kubectl and the same objects from --config-dir reach
/debug/configz with their source, revision and status; every invalid case is rejected with its reason in
`meshctl analyze` (non-zero exit) while the valid objects keep serving; an object that turns invalid keeps
its last valid version; a conflict between the two sources is reported."""

import json
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from meshd_proc import BIN_DIR, Meshd, eventually

VALID = """
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: hello, namespace: sample}
spec:
  host: helloworld
  subsets:
  - {name: v1, labels: {version: v1}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: external-api, namespace: sample}
spec:
  hosts: [api.example.com]
  ports: [{number: 443, name: https, protocol: HTTPS}]
  resolution: DNS
"""

# One object per must-reject rule: name → (spec YAML, the field the reason must name).
INVALID = {
    ("DestinationRule", "unnamed-subset"): ("host: helloworld\nsubsets:\n- labels: {version: v2}\n",
                                            "spec.subsets[0].name"),
    ("DestinationRule", "dup-subsets"): ("host: helloworld\nsubsets:\n- {name: v1}\n- {name: v1}\n",
                                         "spec.subsets[1].name"),
    ("ServiceEntry", "static-hostnames"): ("hosts: [db.example.com]\nports: [{number: 5432, name: tcp, protocol: TCP}]\n"
                                           "resolution: STATIC\nendpoints: [{address: db.example.com}]\n",
                                           "spec.endpoints[0].address"),
    ("ServiceEntry", "no-hosts"): ("ports: [{number: 80, name: http, protocol: HTTP}]\n", "spec.hosts"),
    ("ServiceEntry", "bad-cidr"): ("hosts: [a.example.com]\naddresses: [10.0.0.0/33]\n"
                                   "ports: [{number: 80, name: http, protocol: HTTP}]\n", "spec.addresses[0]"),
    ("WorkloadEntry", "no-address"): ("labels: {app: vm}\n", "spec.address"),
    ("VirtualService", "negative-weight"): ("hosts: [helloworld]\nhttp:\n- route:\n"
                                            "  - {destination: {host: helloworld}, weight: -1}\n"
                                            "  - {destination: {host: helloworld}, weight: 5}\n",
                                            "spec.http[0].route[0].weight"),
    ("Sidecar", "short-egress-host"): ("egress: [{hosts: [sample/helloworld]}]\n", "spec.egress[0].hosts[0]"),
}


def manifest(kind: str, name: str, spec: str) -> str:
    group = "security.istio.io" if kind == "PeerAuthentication" else "networking.istio.io"
    body = "\n".join("  " + line for line in spec.splitlines())
    return f"apiVersion: {group}/v1\nkind: {kind}\nmetadata: {{name: {name}, namespace: sample}}\nspec:\n{body}\n"


# Istio's CRD schemas mark these fields required (or a CEL rule of theirs refuses: a WorkloadEntry needs an
# address or a network), so the API server itself refuses the object (as with istiod): they can only reach
# meshd from files.
SCHEMA_REJECTS = {("DestinationRule", "unnamed-subset"), ("ServiceEntry", "no-hosts"), ("WorkloadEntry", "no-address")}
API_INVALID = {k: v for k, v in INVALID.items() if k not in SCHEMA_REJECTS}


def objects(invalid: dict) -> str:
    return VALID + "".join("---\n" + manifest(k, n, s) for (k, n), (s, _) in invalid.items())


def istio_config(mesh: Meshd) -> dict:
    return mesh.json("/debug/configz")["istioConfig"]


def by_name(view: dict) -> dict:
    return {(o["kind"], o["name"]): o for o in view["objects"]}


def all_listed(view: dict, invalid: dict) -> bool:
    """Every object the test wrote is in the view (the topology's own objects count for nothing)."""
    wanted = {("DestinationRule", "hello"), ("ServiceEntry", "external-api"), *invalid}
    return wanted <= by_name(view).keys()


def analyze(mesh: Meshd, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN_DIR / "meshctl"), "--meshd", f"http://127.0.0.1:{mesh.monitoring}", "analyze", *args],
                          capture_output=True, text=True, timeout=30)


def check_statuses(view: dict, source_key: str, invalid: dict) -> None:
    objs = by_name(view)
    for key in [("DestinationRule", "hello"), ("ServiceEntry", "external-api")]:
        assert objs[key]["status"] == "valid", objs[key]
        assert source_key in objs[key]["source"], objs[key]
    for (kind, name), (_, field) in invalid.items():
        o = objs[(kind, name)]
        assert o["status"] == "rejected", o
        assert o["field"] == field, o
        assert o["reason"].startswith(f"{kind} sample/{name}: {field}: "), o


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("config"))
    yield m
    m.stop()


def test_kubectl_objects_show_in_configz_and_analyze(mesh):
    mesh.kubectl("cluster1", "apply", "-f", "-", stdin=objects(API_INVALID))
    view = eventually("every object in configz",
                      lambda: (v := istio_config(mesh)) and all_listed(v, API_INVALID) and v)
    check_statuses(view, "cluster", API_INVALID)
    assert all(o["revision"] for o in view["objects"])
    out = analyze(mesh)
    assert out.returncode != 0, out.stdout
    for (kind, name), (_, field) in API_INVALID.items():
        assert f"sample/{name}" in out.stdout and field in out.stdout, out.stdout
    assert "sample/hello " not in out.stdout
    rows = json.loads(analyze(mesh, "-o", "json").stdout)
    assert {r["name"] for r in rows if r["level"] == "Error"} == {f"sample/{n}" for _, n in API_INVALID}


def test_an_object_that_turns_invalid_keeps_its_last_valid_version(mesh):
    bad = VALID.split("---")[0].replace("- {name: v1, labels: {version: v1}}",
                                            "- {name: v1, labels: {version: v1}}\n  - {name: v1}")
    mesh.kubectl("cluster1", "apply", "-f", "-", stdin=bad)
    o = eventually("hello rejected", lambda: (o := by_name(istio_config(mesh))[("DestinationRule", "hello")])
                   ["status"] == "rejected" and o)
    assert o["servingRevision"] and o["servingRevision"] != o["revision"], o
    assert "still serving" in analyze(mesh).stdout


def test_the_same_objects_from_config_dir_give_the_same_configz(tmp_path, mesh):
    cluster_view = by_name(istio_config(mesh))
    d = tmp_path / "istio"
    (d / "nested").mkdir(parents=True)
    (d / "nested" / "all.yaml").write_text(objects(INVALID))
    files = Meshd(tmp_path / "state", args=["--config-dir", str(d)])
    try:
        view = eventually("file objects", lambda: (v := istio_config(files)) and all_listed(v, INVALID) and v)
        check_statuses(view, "file", INVALID)
        file_view = by_name(view)
        for key, o in file_view.items():
            if key == ("DestinationRule", "hello") or key in SCHEMA_REJECTS:
                continue  # turned invalid in the cluster above; refused by the API server
            assert (o["status"], o.get("field")) == (cluster_view[key]["status"], cluster_view[key].get("field")), key
        assert "line" in file_view[("DestinationRule", "unnamed-subset")]["reason"]

        # The same object from the cluster: a conflict, reported; the cluster copy is in force.
        files.kubectl("cluster1", "apply", "-f", "-", stdin=VALID.split("---")[1])
        se = eventually("conflict", lambda: [o for o in istio_config(files)["objects"]
                                             if o["name"] == "external-api" and o["status"] == "ignored"])
        assert "conflict: cluster cluster1" in se[0]["reason"], se

        # A file that stops being YAML keeps its objects and is reported with document and line.
        (d / "nested" / "all.yaml").write_text(objects(INVALID) + "---\nkind: [unclosed\n")
        src = eventually("file error", lambda: [s for n, s in istio_config(files)["sources"].items()
                                                if n.startswith("file ") and s.get("error")])
        assert "document" in src[0]["error"] and "line" in src[0]["error"], src
        assert by_name(istio_config(files))[("DestinationRule", "hello")]["status"] == "valid"
    finally:
        files.stop()


def test_a_second_namespace_wide_sidecar_is_reported(mesh):
    # Cross-object rule: only the oldest Sidecar without a workloadSelector applies in a namespace.
    wide = "egress: [{hosts: ['./*']}]\n"
    mesh.kubectl("cluster1", "apply", "-f", "-", stdin=manifest("Sidecar", "wide-old", wide))
    eventually("wide-old in configz", lambda: ("Sidecar", "wide-old") in by_name(istio_config(mesh)))
    assert not [r for r in json.loads(analyze(mesh, "-o", "json").stdout) if "several Sidecars" in r["reason"]]
    time.sleep(1.1)  # creationTimestamp has second resolution
    mesh.kubectl("cluster1", "apply", "-f", "-", stdin=manifest("Sidecar", "wide-new", wide))
    rows = eventually("wide-new reported", lambda: [r for r in json.loads(analyze(mesh, "-o", "json").stdout)
                                                    if "several Sidecars" in r["reason"]])
    assert [r["name"] for r in rows] == ["sample/wide-new"], rows
    assert "only the oldest, wide-old, applies" in rows[0]["reason"], rows
