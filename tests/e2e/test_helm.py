"""The meshd Helm chart, rendered, linted and schema-checked by real Helm, then applied to the simulator.

Helm comes from the pinned PyPI package ``helm-python-sdk`` (import ``helm_python``): a ctypes binding to
``libhelm_c``, Helm v4's Go SDK compiled into a shared library that ships inside the wheel. No ``helm``
binary, Go toolchain or network is involved; rendering is ``helm template``'s engine, schema validation is
Helm's own JSON-schema check, and ``lint`` is ``helm lint``.

Applying needs the meshctl binary (``MESHD_BIN_DIR``, default ``target/debug``) and kubectl (``KUBECTL``,
default ``kubectl``); those tests are skipped when either is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is in tests/requirements.txt")

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "meshd"
NS = "istio-system"
RELEASE = "meshd"
BIN_DIR = Path(os.environ.get("MESHD_BIN_DIR", REPO / "target" / "debug"))
KUBECTL = os.environ.get("KUBECTL", "kubectl")

# Value sets exercised by every render/lint/apply test: name -> values.
VALUE_SETS: dict[str, dict] = {
    "defaults": {},
    "replicas-2-hpa": {"replicas": 2, "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 4}},
    "plugged-in-ca": {"pluggedInCA": {"enabled": True}, "clusterId": "cluster1"},
    "remote-kubeconfigs": {"remoteKubeconfigs": {"enabled": True}, "clusterId": "cluster1"},
    "custom-ports": {"ports": {"grpc": 16010, "secureGrpc": 16012, "http": 9090, "monitoring": 16014},
                     "service": {"name": "istiod"}},
    "remote": {"profile": "remote"},
    "remote-gateway-ip": {"profile": "remote",
                          "remote": {"discovery": {"enabled": True, "address": "192.0.2.10"}}},
    "remote-gateway-dns": {"profile": "remote",
                           "remote": {"discovery": {"enabled": True, "address": "eastwest.example.com",
                                                    "plaintext": False}}},
}


# --------------------------------------------------------------------------- helpers


def render(values: dict | None = None, namespace: str = NS) -> list[dict]:
    """Renders the chart as ``helm template`` would; returns the objects (NOTES.txt excluded)."""
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values or {}, name=RELEASE, namespace=namespace, is_install=True)
    docs = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def notes(values: dict | None = None) -> str:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values or {}, name=RELEASE, namespace=NS, is_install=True)
    return next(v for k, v in manifests.items() if k.endswith("NOTES.txt"))


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def kinds(docs: list[dict]) -> list[str]:
    return sorted(d["kind"] for d in docs)


def container(docs: list[dict]) -> dict:
    return one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def args_of(docs: list[dict]) -> dict[str, str]:
    out = {}
    for a in container(docs)["args"]:
        flag, _, value = a.partition("=")
        out[flag] = value
    return out


def env_of(docs: list[dict]) -> dict[str, dict]:
    return {e["name"]: e for e in container(docs)["env"]}


def rules(role: dict) -> set[tuple]:
    """RBAC rules flattened to (group, resource, verb, resourceName-or-None)."""
    out = set()
    for r in role["rules"]:
        for g in r["apiGroups"]:
            for res in r["resources"]:
                for v in r["verbs"]:
                    for n in r.get("resourceNames") or [None]:
                        out.add((g, res, v, n))
    return out


def schema_error(values: dict) -> str:
    with helm.Chart.load(CHART) as chart:
        with pytest.raises(helm.HelmValuesError) as info:
            chart.validate_schema(values)
        # Rendering validates too: a bad value can never reach a template.
        with pytest.raises(helm.HelmValuesError):
            chart.render(values, name=RELEASE, namespace=NS)
    return str(info.value)


def render_error(values: dict) -> str:
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(values)
        with pytest.raises(helm.HelmError) as info:
            chart.render(values, name=RELEASE, namespace=NS)
    return str(info.value)


# --------------------------------------------------------------------------- helm itself


def test_helm_is_the_real_sdk():
    assert helm.helm_sdk_version().startswith("v4."), helm.helm_sdk_version()
    with helm.Chart.load(CHART) as chart:
        assert chart.metadata["apiVersion"] == "v2"
        assert chart.name == "meshd"
        assert chart.schema is not None


@pytest.mark.parametrize("name", VALUE_SETS)
def test_lint_reports_nothing(name):
    report = helm.lint(CHART, VALUE_SETS[name] or None, strict=True, namespace=NS)
    assert report["messages"] == [] and report["errors"] == [], report


def test_lint_notices_a_broken_chart(tmp_path):
    """The lint test can fail: a template error is reported."""
    broken = tmp_path / "meshd"
    shutil.copytree(CHART, broken)
    (broken / "templates" / "broken.yaml").write_text("{{ .Values.nope.missing }}\n")
    report = helm.lint(broken, strict=True)
    assert report["errors"], report


# --------------------------------------------------------------------------- primary profile


def test_primary_defaults():
    docs = render()
    assert kinds(docs) == sorted([
        "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget", "Role",
        "RoleBinding", "Service", "ServiceAccount",
    ])
    for d in docs:
        labels = d["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "meshd"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["helm.sh/chart"] == "meshd-0.1.0"
        if d["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert d["metadata"]["namespace"] == NS

    dep = one(docs, "Deployment", "meshd")
    assert dep["spec"]["replicas"] == 1
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "meshd"
    c = container(docs)
    assert c["image"] == "meshd/meshd:0.1.0"
    assert args_of(docs) == {
        "--grpc-addr": ":15010", "--secure-grpc-addr": ":15012", "--http-addr": ":8080",
        "--monitoring-addr": ":15014", "--domain-suffix": "cluster.local",
        "--mesh-config": "/etc/istio/config/mesh", "--mesh-networks": "/etc/istio/config/meshNetworks",
        "--remote-cluster-timeout": "30s", "--debounce-after": "100ms", "--debounce-max": "10s",
        "--eds-debounce": "paced", "--eds-settle": "10ms", "--config-poll": "1s", "--drain-deadline": "10s", "--log-level": "info", "--log-format": "json",
    }
    env = env_of(docs)
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert "CLUSTER_ID" not in env, "empty clusterId leaves meshd's default"
    assert env["MESHD_LEADER_LEASE"]["value"] == "meshd-leader"

    # Readiness on /ready at the http port; graceful termination longer than the drain deadline.
    probe = c["readinessProbe"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert probe["httpGet"]["path"] == "/ready" and ports[probe["httpGet"]["port"]] == 8080
    assert pod["terminationGracePeriodSeconds"] == 30 > 10
    assert ports == {"grpc-xds": 15010, "grpc-xds-tls": 15012, "http-ready": 8080, "http-monitoring": 15014}

    # Hardened: non-root, read-only root, no capabilities, RuntimeDefault seccomp.
    sc, psc = c["securityContext"], pod["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0
    assert psc["seccompProfile"]["type"] == "RuntimeDefault"
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"]
    assert c["resources"]["requests"]["cpu"]

    # The mesh ConfigMap is mounted where the flags point.
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["mesh-config"] == "/etc/istio/config"
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["mesh-config"]["configMap"]["name"] == "istio"
    assert "cacerts" not in vols
    cm = one(docs, "ConfigMap", "istio")
    assert set(cm["data"]) == {"mesh", "meshNetworks"}
    assert yaml.safe_load(cm["data"]["mesh"]) == {"trustDomain": "cluster.local"}
    assert yaml.safe_load(cm["data"]["meshNetworks"]) == {"networks": {}}

    # Service: istiod's port names; the http port stays pod-local.
    svc = one(docs, "Service", "meshd")
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    sports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
    assert sports == {"grpc-xds": (15010, "grpc-xds"), "https-dns": (15012, "grpc-xds-tls"),
                      "http-monitoring": (15014, "http-monitoring")}
    assert all(t in ports for _, t in sports.values())

    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": dep["spec"]["selector"]["matchLabels"]}}
    assert "Note: no plugged-in CA" in notes()


def test_primary_rbac_is_least_privilege():
    docs = render()
    read = {"list", "watch"}
    cr = one(docs, "ClusterRole", f"meshd-{NS}")
    assert rules(cr) == (
        {("", r, v, None) for r in ("namespaces", "services", "pods", "nodes") for v in read}
        | {("discovery.k8s.io", "endpointslices", v, None) for v in read}
        | {("authentication.k8s.io", "tokenreviews", "create", None)}
        | {("", "configmaps", v, None) for v in read | {"create", "update"}}
        | {("networking.istio.io", r, v, None) for v in read
           for r in ("destinationrules", "virtualservices", "serviceentries", "workloadentries", "workloadgroups",
                     "sidecars", "gateways")}
        | {("security.istio.io", "peerauthentications", v, None) for v in read}
        # Gateway certificates in any namespace (and the remote secrets); the SubjectAccessReview before one.
        | {("", "secrets", v, None) for v in read}
        | {("authorization.k8s.io", "subjectaccessreviews", "create", None)}
    )
    role = one(docs, "Role", "meshd")
    assert role["metadata"]["namespace"] == NS
    lease = ({("coordination.k8s.io", "leases", "create", None)}
             | {("coordination.k8s.io", "leases", v, "meshd-leader") for v in ("get", "update")})
    assert rules(role) == {("", "secrets", v, None) for v in ("get", "create")} | lease
    # A plugged-in CA needs no CA Secret; the leader still publishes the mesh root.
    plugged = one(render(VALUE_SETS["plugged-in-ca"]), "Role", "meshd")
    assert rules(plugged) == lease
    for binding, role_kind, role_name in (("ClusterRoleBinding", "ClusterRole", f"meshd-{NS}"),
                                          ("RoleBinding", "Role", "meshd")):
        b = one(docs, binding)
        assert b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name}
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "meshd", "namespace": NS}]
    # No wildcard and no write verb on anything cluster-wide.
    for d in docs:
        for r in d.get("rules", []):
            assert "*" not in r["verbs"] + r["resources"] + r["apiGroups"], r


def test_names_follow_the_release_and_namespace():
    docs = render(namespace="mesh-a")
    assert one(docs, "ClusterRole")["metadata"]["name"] == "meshd-mesh-a"
    with helm.Chart.load(CHART) as chart:
        out = chart.render({}, name="blue", namespace="mesh-b")
    docs = [d for k, t in out.items() if not k.endswith("NOTES.txt") for d in yaml.safe_load_all(t) if d]
    assert one(docs, "Deployment")["metadata"]["name"] == "blue-meshd"
    assert one(docs, "ClusterRole")["metadata"]["name"] == "blue-meshd-mesh-b"
    assert all(d["metadata"].get("namespace", "mesh-b") == "mesh-b" for d in docs)


def test_replicas_and_hpa():
    docs = render({"replicas": 2})
    assert one(docs, "Deployment")["spec"]["replicas"] == 2
    assert "HorizontalPodAutoscaler" not in kinds(docs)

    docs = render(VALUE_SETS["replicas-2-hpa"])
    assert "replicas" not in one(docs, "Deployment")["spec"], "the HPA owns the replica count"
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "meshd"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 4)
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80


def test_plugged_in_ca_and_cluster_id():
    docs = render(VALUE_SETS["plugged-in-ca"])
    assert args_of(docs)["--ca-dir"] == "/etc/cacerts"
    c = container(docs)
    assert {"name": "cacerts", "mountPath": "/etc/cacerts", "readOnly": True} in c["volumeMounts"]
    vols = {v["name"]: v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert vols["cacerts"]["secret"]["secretName"] == "cacerts"
    assert env_of(docs)["CLUSTER_ID"]["value"] == "cluster1"
    assert "Note: no plugged-in CA" not in notes(VALUE_SETS["plugged-in-ca"])


def test_remote_kubeconfigs_folder():
    docs = render(VALUE_SETS["remote-kubeconfigs"])
    assert args_of(docs)["--multicluster-kubeconfig-path"] == "/etc/meshd/remote-kubeconfigs"
    c = container(docs)
    assert {"name": "remote-kubeconfigs", "mountPath": "/etc/meshd/remote-kubeconfigs",
            "readOnly": True} in c["volumeMounts"]
    vols = {v["name"]: v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert vols["remote-kubeconfigs"]["secret"]["secretName"] == "remote-kubeconfigs"
    assert "--multicluster-kubeconfig-path" not in args_of(render())


def test_custom_ports_flow_to_flags_probe_and_service():
    docs = render(VALUE_SETS["custom-ports"])
    a = args_of(docs)
    assert (a["--grpc-addr"], a["--secure-grpc-addr"], a["--http-addr"], a["--monitoring-addr"]) == (
        ":16010", ":16012", ":9090", ":16014")
    ports = {p["name"]: p["containerPort"] for p in container(docs)["ports"]}
    assert ports["http-ready"] == 9090 and container(docs)["readinessProbe"]["httpGet"]["port"] == "http-ready"
    svc = one(docs, "Service", "istiod")
    assert {p["name"]: p["port"] for p in svc["spec"]["ports"]} == {
        "grpc-xds": 16010, "https-dns": 16012, "http-monitoring": 16014}


def test_mesh_networks_and_extra_args():
    networks = {"networks": {"network1": {"endpoints": [{"fromRegistry": "cluster1"}],
                                          "gateways": [{"address": "192.0.2.10", "port": 15443}]}}}
    docs = render({"meshNetworks": networks, "meshd": {"extraArgs": ["--insecure-kubeconfig-options"]}})
    assert yaml.safe_load(one(docs, "ConfigMap")["data"]["meshNetworks"]) == networks
    assert container(docs)["args"][-1] == "--insecure-kubeconfig-options"


# --------------------------------------------------------------------------- remote profile


def test_remote_reader_and_root_publisher():
    docs = render(VALUE_SETS["remote"])
    assert kinds(docs) == ["ClusterRole", "ClusterRoleBinding", "ServiceAccount"]
    sa = one(docs, "ServiceAccount", "istio-reader-service-account")
    assert sa["metadata"]["namespace"] == NS
    cr = one(docs, "ClusterRole", f"meshd-reader-{NS}")
    read = {"list", "watch"}
    assert rules(cr) == (
        {("", r, v, None) for r in ("namespaces", "services", "pods", "nodes") for v in read}
        | {("discovery.k8s.io", "endpointslices", v, None) for v in read}
        | {("authentication.k8s.io", "tokenreviews", "create", None)}
        | {("", "configmaps", v, None) for v in read | {"create", "update"}}
        # Gateway certificates of gateways in the remote: their Secrets, the review before one.
        | {("", "secrets", v, None) for v in read}
        | {("authorization.k8s.io", "subjectaccessreviews", "create", None)}
    ), "no secret gets, no serviceaccounts/token, no writes but the istio-ca-root-cert ConfigMaps"
    crb = one(docs, "ClusterRoleBinding")
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "istio-reader-service-account", "namespace": NS}]
    assert crb["roleRef"]["name"] == cr["metadata"]["name"]


def test_remote_discovery_through_gateway_ip():
    docs = render(VALUE_SETS["remote-gateway-ip"])
    svc = one(docs, "Service", "istiod")
    assert "selector" not in svc["spec"] and svc["spec"]["type"] == "ClusterIP"
    assert {p["name"]: p["port"] for p in svc["spec"]["ports"]} == {"tcp-istiod": 15012, "grpc-xds": 15010}
    eps = one(docs, "EndpointSlice")
    assert eps["metadata"]["labels"]["kubernetes.io/service-name"] == "istiod"
    assert eps["addressType"] == "IPv4"
    assert eps["endpoints"] == [{"addresses": ["192.0.2.10"], "conditions": {"ready": True}}]
    assert {p["name"]: p["port"] for p in eps["ports"]} == {"tcp-istiod": 15012, "grpc-xds": 15010}

    v6 = render({"profile": "remote", "remote": {"discovery": {"enabled": True, "address": "2001:db8::10"}}})
    assert one(v6, "EndpointSlice")["addressType"] == "IPv6"


def test_remote_discovery_through_gateway_hostname():
    docs = render(VALUE_SETS["remote-gateway-dns"])
    svc = one(docs, "Service", "istiod")
    assert svc["spec"]["type"] == "ExternalName"
    assert svc["spec"]["externalName"] == "eastwest.example.com"
    assert [p["name"] for p in svc["spec"]["ports"]] == ["tcp-istiod"]
    assert "EndpointSlice" not in kinds(docs)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("values, fragment", [
    ({"replicas": -1}, "/replicas"),
    ({"replicas": "2"}, "/replicas"),
    ({"profile": "bogus"}, "value must be one of 'primary', 'remote'"),
    ({"ports": {"grpc": "15010"}}, "/ports/grpc"),
    ({"ports": {"monitoring": 70000}}, "/ports/monitoring"),
    ({"unknownKey": 1}, "unknownKey"),
    ({"image": {"repo": "x"}}, "repo"),
    ({"meshd": {"logFormat": "xml"}}, "/meshd/logFormat"),
    ({"meshd": {"debounceAfter": "soon"}}, "/meshd/debounceAfter"),
    ({"meshd": {"edsDebounce": "never"}}, "/meshd/edsDebounce"),
    ({"meshd": {"extraArgs": ["-v"]}}, "/meshd/extraArgs/0"),
    ({"clusterId": "Cluster_1"}, "/clusterId"),
    ({"remote": {"discovery": {"address": "not an address"}}}, "/remote/discovery/address"),
    ({"podDisruptionBudget": {"maxUnavailable": "half"}}, "/podDisruptionBudget/maxUnavailable"),
])
def test_schema_rejects_bad_values(values, fragment):
    message = schema_error(values)
    assert fragment in message, message


@pytest.mark.parametrize("values, fragment", [
    ({"terminationGracePeriodSeconds": 10}, "must exceed meshd.drainDeadlineSeconds"),
    ({"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}}, "must not exceed"),
    ({"ports": {"http": 15014}}, "ports must be distinct"),
    ({"profile": "remote", "remote": {"discovery": {"enabled": True}}}, "remote.discovery.address"),
])
def test_cross_value_checks_fail_the_render(values, fragment):
    message = render_error(values)
    assert fragment in message, message


# --------------------------------------------------------------------------- values, schema, README agree


def leaf_paths(tree: dict, prefix: str = "") -> set[str]:
    """Dotted paths of values.yaml's leaves; free-form maps (Kubernetes or Istio types) count as leaves."""
    out = set()
    for k, v in tree.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and v and path not in FREE_FORM:
            out |= leaf_paths(v, path + ".")
        else:
            out.add(path)
    return out


# Values whose content is Kubernetes or Istio types, documented as a whole.
FREE_FORM = {"resources", "podSecurityContext", "securityContext", "podAnnotations", "meshConfig",
             "meshNetworks", "commonLabels", "podLabels", "nodeSelector", "affinity"}


def schema_paths(schema: dict, prefix: str = "") -> dict[str, dict]:
    out = {}
    for k, sub in schema.get("properties", {}).items():
        path = f"{prefix}{k}"
        out[path] = sub
        out |= schema_paths(sub, path + ".")
    return out


def test_every_value_is_in_the_schema_and_the_readme():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    readme = (CHART / "README.md").read_text().split("## Values", 1)[-1]
    described = schema_paths(schema)
    documented = set(re.findall(r"^\| `([A-Za-z0-9_.]+)` \|", readme, re.M))
    paths = leaf_paths(values)
    missing_schema = sorted(p for p in paths if p not in described)
    undescribed = sorted(p for p in paths if p in described and not described[p].get("description"))
    missing_readme = sorted(paths - documented)
    assert not missing_schema, f"values without a schema entry: {missing_schema}"
    assert not undescribed, f"schema entries without a description: {undescribed}"
    assert not missing_readme, f"values not in README.md's table: {missing_readme}"
    stale = sorted(documented - paths)
    assert not stale, f"README documents values that do not exist: {stale}"


def test_the_schema_is_strict():
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["additionalProperties"] is False
    for path, sub in schema_paths(schema).items():
        if sub.get("type") == "object" and "properties" in sub:
            assert sub.get("additionalProperties") is False, f"{path} accepts unknown keys"


# --------------------------------------------------------------------------- flags exist in meshd


def test_rendered_flags_are_accepted_by_meshd():
    """Every flag the chart passes parses in the real binary (clap stops at --help only after parsing)."""
    meshd = BIN_DIR / "meshd"
    if not meshd.exists():
        pytest.skip(f"{meshd} not built")
    for name in ("defaults", "custom-ports"):
        args = container(render(VALUE_SETS[name]))["args"]
        proc = subprocess.run([str(meshd), *args, "--help"], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, f"{name}: meshd rejected {args}: {proc.stderr}"
    helptext = subprocess.run([str(meshd), "--help"], capture_output=True, text=True, timeout=30).stdout
    bogus = subprocess.run([str(meshd), "--no-such-flag", "--help"], capture_output=True, text=True, timeout=30)
    assert bogus.returncode != 0, "the check above can fail"
    if "--ca-dir" in helptext:
        args = container(render(VALUE_SETS["plugged-in-ca"]))["args"]
        proc = subprocess.run([str(meshd), *args, "--help"], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr


# --------------------------------------------------------------------------- apply to the simulator


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    meshctl = BIN_DIR / "meshctl"
    if not meshctl.exists():
        pytest.skip(f"{meshctl} not built")
    if shutil.which(KUBECTL) is None:
        pytest.skip(f"kubectl not found ({KUBECTL!r})")
    state = tmp_path_factory.mktemp("sandbox")
    proc = subprocess.Popen([str(meshctl), "sandbox", "serve", "--clusters", "primary,remote",
                             "--state-dir", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"sandbox exited: {proc.stderr.read()}")
        clusters = json.loads(line)["clusters"]
        yield {name: c["kubeconfig"] for name, c in clusters.items()}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([KUBECTL, "--kubeconfig", kubeconfig, *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def ensure_namespace(kubeconfig: str, ns: str) -> None:
    if kubectl(kubeconfig, "get", "namespace", ns).returncode != 0:
        proc = kubectl(kubeconfig, "create", "namespace", ns)
        assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", VALUE_SETS)
def test_apply_to_the_simulator(sandbox, name):
    values = VALUE_SETS[name]
    cluster = "remote" if values.get("profile") == "remote" else "primary"
    kubeconfig = sandbox[cluster]
    ns = f"t-{name}"[:63]
    ensure_namespace(kubeconfig, ns)
    docs = render(values, namespace=ns)
    # Cluster-scoped names carry the namespace, so every value set installs side by side.
    stream = yaml.safe_dump_all(docs)
    proc = kubectl(kubeconfig, "apply", "-f", "-", stdin=stream)
    assert proc.returncode == 0, f"kubectl apply failed:\n{proc.stderr}\n{proc.stdout}"
    assert proc.stdout.count("created") == len(docs), proc.stdout
    # Applying again is a no-op, as a helm upgrade with the same values would be.
    again = kubectl(kubeconfig, "apply", "-f", "-", stdin=stream)
    assert again.returncode == 0 and "created" not in again.stdout, again.stdout
    for d in docs:
        scope = ["-n", d["metadata"]["namespace"]] if "namespace" in d["metadata"] else []
        group = d["apiVersion"].rpartition("/")[0]
        resource = d["kind"].lower() + (f".{group}" if group else "")
        got = kubectl(kubeconfig, "get", resource, d["metadata"]["name"], *scope, "-o", "json")
        assert got.returncode == 0, got.stderr
        stored = json.loads(got.stdout)
        assert stored["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE


def test_apply_rejects_a_broken_object(sandbox):
    """The apply test can fail: the simulator refuses what a real API server refuses."""
    kubeconfig = sandbox["primary"]
    docs = render({}, namespace="t-broken")
    svc = one(docs, "Service")
    svc["metadata"]["name"] = "Not_A_Valid_Name"
    proc = kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(svc))
    assert proc.returncode != 0


def test_the_chart_ships_istios_crds_and_they_apply(sandbox):
    """crds/istio.yaml (installed by Helm before the templates) holds the CRDs for every Istio kind meshd
    reads, and a stock kubectl applies it cleanly over the copy the sandbox loads at start."""
    path = CHART / "crds" / "istio.yaml"
    crds = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert {c["kind"] for c in crds} == {"CustomResourceDefinition"}
    assert sorted(c["spec"]["names"]["kind"] for c in crds) == [
        "DestinationRule", "Gateway", "PeerAuthentication", "ServiceEntry", "Sidecar", "VirtualService",
        "WorkloadEntry", "WorkloadGroup",
    ]
    for c in crds:
        assert c["metadata"]["name"] == f"{c['spec']['names']['plural']}.{c['spec']['group']}"
        # Istio's storage version (crds/istio.yaml is generated from Istio's CRDs: helm/gen_istio_crds.py).
        assert [v["name"] for v in c["spec"]["versions"] if v["storage"]] == ["v1"]
        assert any(v.get("schema", {}).get("openAPIV3Schema") for v in c["spec"]["versions"])
    proc = kubectl(sandbox["remote"], "apply", "-f", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("customresourcedefinition.apiextensions.k8s.io/") == len(crds), proc.stdout
