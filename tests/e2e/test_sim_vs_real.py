"""kube-sim against a real kube-apiserver as the oracle (issue 28 §1).

Every row of the simulator's conformance table (tests/e2e/conformance/*.yaml, see test_sim_conformance.py)
runs against a fresh `meshctl sandbox serve` and a fresh real control plane (tests/e2e/realk8s.py: etcd,
kube-apiserver v1.34 and kube-controller-manager; no scheduler, no kubelet), in lockstep, with the same
kubectl. A row is *equal* when both backends:

- pass or fail the row's own expectations alike (the table states what a real server answers; where the
  real one fails a row, the table is wrong);
- exit alike (kubectl) or answer the same HTTP status;
- answer a `Status` with the same reason, message and causes (field, reason, message);
- print the same table header (`NAME ...` columns) and the same `Error from server` / `error:` /
  `Warning:` lines,

after values a row saved (cluster IPs, UIDs, tokens, server URL) and UIDs/timestamps are normalised.
Each table prints `rows equal / rows`; the totals go to tests/.cache/sim-vs-real.json and to the terminal.
A row that differs must be in KNOWN below (table, row) with the reason, or the test fails; a KNOWN row
that now matches fails too (remove it), unless its reason starts with "timing:".

Reproduce: `tests/peers/build.sh && tests/.venv/bin/pytest -q tests/e2e/test_sim_vs_real.py`
(`SIM_VS_REAL_VERBOSE=1` prints every difference, not only the unknown ones).
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

import realk8s
import test_sim_conformance as sim

REPORT = realk8s.REPO / "tests" / ".cache" / "sim-vs-real.json"

# (table, row) -> why kube-sim and the real control plane (v1.34.4) differ there, grouped by cause. Each is
# a kube-sim bug to fix (the table usually shares it: it was written for v1.33) or a limit of the oracle.
# kube-sim/README.md ("Simulator vs the real API server") lists the same rows.
GO_SYNTAX = ("kube-apiserver 1.34 prints an Invalid/Duplicate value as JSON ({\"app\":\"api\"}, [\"10.96.0.5\"]); "
             "kube-sim (and the table, written for 1.33) print Go syntax (map[string]string{...}, []string{...}, "
             "rbac.RoleRef{...}, v1.LabelSelector{...}, core.ServicePort{...})")
NO_KUBELET = ("oracle limit: no kubelet and no scheduler run beside the real API server, so nodes never report "
              "Ready and pods stay Pending (no IPs, no ready replicas, rollouts never finish); kube-sim fakes both")
FREE_PORT = ("oracle limit: the real API server listens on a free loopback port, so default/kubernetes targets that "
             "port, not 6443 as the table (and kube-sim) say")
ENDPOINTS_CONTROLLER = ("kube-sim has no Endpoints controller: the real kube-controller-manager writes v1 Endpoints "
                        "for every Service with a selector (so a hand-written Endpoints `web` is 409 AlreadyExists and "
                        "shows <none>), and the real server warns 'v1 Endpoints is deprecated in v1.33+' on each use")
NS_ASYNC = ("timing: the real namespace controller empties a terminating namespace asynchronously (conditions and "
            "deletions come a moment later); kube-sim does it inside the DELETE. The row has no `retry`")
ROOT_CA_ASYNC = ("timing: the real kube-controller-manager publishes kube-root-ca.crt into a new namespace a moment "
                 "after it is created, so a paginated list of its ConfigMaps counts 2 or 3 remaining (and the next "
                 "page follows); kube-sim publishes it inside the namespace's creation")
KNOWN: dict[tuple[str, str], str] = {
    ("schemas", "a paginated list counts the remaining items"): ROOT_CA_ASYNC,
    ("schemas", "the next page counts down"): ROOT_CA_ASYNC,
    ("apply", "an apply conflict is a 409 Conflict with FieldManagerConflict causes"):
        "kube-sim writes a StatusCause's type under \"type\"; the real server under \"reason\" "
        "(reason: FieldManagerConflict); the table expects \"type\" too",
    ("apply", "several conflicts are listed per manager"):
        "kube-sim writes a StatusCause's type under \"type\"; the real server under \"reason\"",
    ("apply", "an applied configuration of another API version is refused"):
        "message: real 'invalid object type: apps/v1, Kind=ConfigMap'; kube-sim (and the table) "
        "'Incorrect version specified in apply patch. Specified patch version: apps/v1, expected: v1'",
    ("core", "an explicit taken cluster IP is refused (422)"): GO_SYNTAX,
    ("core", "an out-of-range cluster IP is refused (422)"):
        GO_SYNTAX + "; and the real allocator (MultiCIDRServiceAllocator, on by default since 1.33) says 'the "
        "provided network does not match the current range', not 'the provided IP (192.168.0.1) is not in the valid "
        "range. The range of valid IPs is 10.96.0.0/12'",
    ("core", "a cluster IP may not change once set"): GO_SYNTAX + " (spec.clusterIPs[0]: Invalid value: [\"10.96.77.77\"])",
    ("crds", "the resource is no longer served"):
        "after its CRD is deleted, the real server answers 404 with the plain-text body '404 page not found'; "
        "kube-sim answers a JSON Status (reason NotFound)",
    ("deletion", "the terminating namespace's conditions say what it waits for"): NS_ASYNC,
    ("deletion", "the rest of the namespace's content is gone already"): NS_ASYNC,
    ("protobuf", "a body without the protobuf magic is a BadRequest"):
        "message: real 'the object provided is unrecognized (must be of type ConfigMap): provided data does not "
        "appear to be a protobuf message, expected prefix [107 56 115 0] ({\"metadata\": ...)'; kube-sim 'the "
        "protobuf request body is malformed: ...'",
    ("protobuf", "a truncated protobuf envelope is a BadRequest"):
        "message: real 'the object provided is unrecognized (must be of type ConfigMap): unexpected EOF "
        "(6b3873000a056162)'; kube-sim 'the protobuf request body is malformed: envelope: ... buffer underflow'",
    ("rbac", "a SubjectAccessReview needs a user or a group (422)"):
        "for a body without kind/apiVersion the real server names no kind: '.authorization.k8s.io \"\" is invalid: "
        "...'; kube-sim (and the table) 'SubjectAccessReview.authorization.k8s.io \"\" is invalid: ...'",
    ("rbac", "a LocalSubjectAccessReview must stay in its namespace (422)"):
        "for a body without kind/apiVersion the real server names no kind: '.authorization.k8s.io \"\" is invalid: "
        "...'; kube-sim (and the table) 'LocalSubjectAccessReview.authorization.k8s.io ...'",
    ("schemas", "a single object carries kind and apiVersion first"):
        "field order: the real server writes Go struct order (kind, apiVersion, metadata, data); kube-sim (and the "
        "table) put data before metadata",
    ("schemas", "apply --prune over every kind of the default allow-list but ReplicaSet removes the dropped configmap"):
        ENDPOINTS_CONTROLLER,
    ("tables", "endpoints show addresses and ports"): ENDPOINTS_CONTROLLER,
    ("tables", "kubectl get endpoints web"): ENDPOINTS_CONTROLLER,
    ("validation", "an unsupported fieldValidation value is a BadRequest"):
        "real: 422 Invalid 'CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loud\": "
        "supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"'; kube-sim (and the table): 400 BadRequest "
        "'fieldValidation parameter unsupported: Loud'",
    ("validation", "duplicate service ports and missing names are Invalid together"): GO_SYNTAX,
    ("validation", "a deployment whose selector does not match its template is Invalid"): GO_SYNTAX,
    ("validation", "a secret's type may not change"):
        "the real server also validates the new type's required keys: 'type: ... field is immutable', "
        "'data[username]: Required value', 'data[password]: Required value' (3 errors, kubectl prints a list); "
        "kube-sim reports the immutable type only",
    ("validation", "a role binding's roleRef may not change"): GO_SYNTAX,
    ("validation", "a deployment's selector may not change"): GO_SYNTAX,
    ("workloads", "the node is Ready and gets a pod CIDR from node IPAM"): NO_KUBELET,
    ("workloads", "every cluster has the default/kubernetes Service"): FREE_PORT,
    ("workloads", "the kubernetes Service has the apiserver's EndpointSlice"): FREE_PORT,
    ("workloads", "kubectl rollout status finishes"): NO_KUBELET,
    ("workloads", "the deployment status reports the rollout"): NO_KUBELET,
    ("workloads", "the deployment owns a replicaset named by its pod-template-hash"): NO_KUBELET,
    ("workloads", "the pods are owned by the replicaset and named after it"): NO_KUBELET,
    ("workloads", "the pods are scheduled, Running and READY with IPs from the node's pod CIDR"): NO_KUBELET,
    ("workloads", "running pods carry the kubelet's conditions and container statuses"): NO_KUBELET,
    ("workloads", "the service gets a managed endpointslice with every pod"): NO_KUBELET,
    ("workloads", "the endpointslice lists the five pod IPs"): NO_KUBELET,
    ("workloads", "two endpoints remain after scaling down"): NO_KUBELET,
    ("workloads", "the rollout of the new template finishes"): NO_KUBELET,
    ("workloads", "the old replicaset is scaled to zero and the revision bumped"): NO_KUBELET,
    ("workloads", "the old replicaset's scale subresource reads zero"): NO_KUBELET,
    ("workloads", "the service keeps an empty placeholder slice"):
        "the real server serializes an EndpointSlice without endpoints as \"endpoints\": null (Go nil slice, no "
        "omitempty); kube-sim (and the table) write \"endpoints\": []",
}

RESULTS: dict[str, dict] = {}


def kubectl_for_oracle() -> str:
    """The newest kubectl the suite has (1.34 with tests/run.sh), as the server is v1.34."""
    paths = sim.kubectls()
    return max(paths, key=lambda p: tuple(int(x) for x in sim.kubectl_version(p).split(".")))


def tables():
    return sorted(sim.TABLES.glob("*.yaml"))


UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def normalise(text: str, saved: dict) -> str:
    """Puts `${NAME}` back for each value a row saved, so two clusters' IPs, UIDs and tokens compare equal."""
    for name, value in sorted(saved.items(), key=lambda kv: -len(str(kv[1]))):
        value = str(value)
        if len(value) >= 4:
            text = text.replace(value, "${" + name + "}")
    text = UUID.sub("<uid>", text)
    return TIME.sub("<time>", text)


def run(backend, kubectl, row):
    return sim.run_kubectl(kubectl, backend, row) if "kubectl" in row else sim.run_http(backend, row)


def run_with_retry(backend, kubectl, row):
    deadline = time.monotonic() + float(row.get("retry", 0))
    while True:
        got = run(backend, kubectl, row)
        err = sim.check(row, got)
        if err is None or time.monotonic() >= deadline:
            return got, err
        time.sleep(0.2)


def status_of(got) -> dict | None:
    try:
        doc = json.loads(got["stdout"])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("kind") == "Status" else None


def status_view(doc: dict | None, saved: dict):
    if doc is None:
        return None
    # As a set: kube-apiserver 1.34 repeats some causes (metadata validation runs twice); nobody reads the count.
    causes = sorted(set(json.dumps({k: c.get(k) for k in ("reason", "field", "message")}, sort_keys=True)
                    for c in (doc.get("details") or {}).get("causes") or []))
    return {"reason": doc.get("reason"), "code": doc.get("code"),
            "message": normalise(doc.get("message") or "", saved), "causes": [normalise(c, saved) for c in causes]}


MESSAGE_LINE = re.compile(r"^(Error from server.*|error:.*|Warning:.*|The \S+ .* is invalid:.*)$", re.MULTILINE)


def header(stdout: str) -> str | None:
    first = stdout.splitlines()[0] if stdout.strip() else ""
    return " ".join(first.split()) if first.startswith("NAME") else None


def differences(row, sim_got, sim_err, real_got, real_err, sim_saved, real_saved) -> list[str]:
    out = []
    if real_err:
        out.append(f"the real server fails the table's row: {real_err[:600]}")
    if sim_err and not real_err:
        out.append(f"kube-sim fails the row, the real server passes it: {sim_err[:600]}")
    if "kubectl" in row:
        if sim_got["exit"] != real_got["exit"]:
            out.append(f"exit: kube-sim {sim_got['exit']}, real {real_got['exit']}")
        hs, hr = header(sim_got["stdout"]), header(real_got["stdout"])
        if (hs or hr) and hs != hr:
            out.append(f"columns: kube-sim {hs!r}, real {hr!r}")
        ls = sorted(set(normalise(m, sim_saved) for m in MESSAGE_LINE.findall(sim_got["stderr"])))
        lr = sorted(set(normalise(m, real_saved) for m in MESSAGE_LINE.findall(real_got["stderr"])))
        if ls != lr:
            out.append(f"stderr: kube-sim {ls}, real {lr}")
    else:
        if sim_got["status"] != real_got["status"]:
            out.append(f"HTTP status: kube-sim {sim_got['status']}, real {real_got['status']}")
        vs, vr = status_view(status_of(sim_got), sim_saved), status_view(status_of(real_got), real_saved)
        if vs != vr:
            out.append(f"Status: kube-sim {json.dumps(vs)}, real {json.dumps(vr)}")
    return out


@pytest.fixture(scope="module")
def kubectl():
    realk8s.skip_unless_available()
    if realk8s.binary("KUBE_CONTROLLER_MANAGER", "kube-controller-manager") is None:
        pytest.skip("no kube-controller-manager (tests/peers/build.sh): the oracle would lack a cluster's controllers")
    return kubectl_for_oracle()


@pytest.fixture(scope="module", autouse=True)
def summary(request):
    yield
    if not RESULTS:
        return
    rows = sum(r["rows"] for r in RESULTS.values())
    equal = sum(r["equal"] for r in RESULTS.values())
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps({"rows": rows, "equal": equal, "tables": RESULTS}, indent=1))
    lines = [f"kube-sim vs kube-apiserver: {equal}/{rows} rows equal ({100 * equal / rows:.1f}%)"]
    lines += [f"  {t}: {r['equal']}/{r['rows']}" for t, r in sorted(RESULTS.items())]
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        print("\n" + "\n".join(lines) + f"\n  (details: {REPORT})")


@pytest.mark.parametrize("table", tables(), ids=lambda p: p.stem)
def test_sim_matches_real(table, kubectl, tmp_path):
    sandbox_args, rows = sim.load_table(table)
    (tmp_path / "sim").mkdir()
    real = realk8s.RealCluster(tmp_path / "real", name="oracle").start()
    try:
        real.install_crds()  # the sandbox starts with the chart's Istio CRDs installed
        sandbox = sim.Sandbox(tmp_path / "sim", sandbox_args)
    except BaseException:
        real.stop()
        raise
    try:
        sim_saved = {"SERVER": sandbox.server, "ADMIN_TOKEN": sandbox.token}
        real_saved = {"SERVER": real.server, "ADMIN_TOKEN": real.token}
        diffs: dict[str, list[str]] = {}
        for raw in rows:
            results = []
            for backend, saved in ((sandbox, sim_saved), (real, real_saved)):
                try:
                    row = sim.substitute(raw, saved)
                except KeyError as e:  # an earlier row of this backend saved nothing
                    results.append(({"exit": -1, "status": -1, "stdout": "", "stderr": "", "headers": None},
                                    f"no saved value {e}"))
                    continue
                got, err = run_with_retry(backend, kubectl, row)
                results.append((got, err))
                if err is None:
                    for name, dotted in (row.get("save") or {}).items():
                        saved[name] = sim.dig(json.loads(got["stdout"]), dotted)
            (sim_got, sim_err), (real_got, real_err) = results
            d = differences(raw, sim_got, sim_err, real_got, real_err, sim_saved, real_saved)
            if d:
                diffs[raw["row"]] = d
    finally:
        sandbox.stop()
        real.stop()

    name = table.stem
    RESULTS[name] = {"rows": len(rows), "equal": len(rows) - len(diffs), "differences": diffs}
    known = {r: why for (t, r), why in KNOWN.items() if t == name}
    unknown = {r: d for r, d in diffs.items() if r not in known}
    stale = [r for r, why in known.items() if r not in diffs and not why.startswith("timing:")]
    verbose = os.environ.get("SIM_VS_REAL_VERBOSE")
    shown = diffs if verbose else unknown
    report = "\n".join(f"- {r}:\n    " + "\n    ".join(d) for r, d in shown.items())
    assert not unknown and not stale, (
        f"{name}: {len(rows) - len(diffs)}/{len(rows)} rows equal; {len(unknown)} unknown differences "
        f"(fix kube-sim or add them to KNOWN with the reason):\n{report}"
        + (f"\nKNOWN rows that now match (remove them): {stale}" if stale else ""))


def test_known_differences_name_rows_that_exist():
    """Every KNOWN entry names a table and a row that exist (runs without the binaries)."""
    rows = {(t.stem, r["row"]) for t in tables() for r in sim.load_table(t)[1]}
    assert not set(KNOWN) - rows, sorted(set(KNOWN) - rows)
