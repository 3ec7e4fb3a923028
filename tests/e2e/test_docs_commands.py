"""Every command in the docs is exercised, so an example cannot drift from the binaries and the chart.

Commands come from the fenced code blocks of README.md, helm/meshd/README.md and docs/*.md (``sh``/``bash``
and unlabelled blocks: every line, backslash continuations joined), and from the chart's rendered
NOTES.txt. ``console`` blocks (``$ command`` and the output it prints) are not here: ``test_docs_output.py``
runs them in a sandbox session and compares their output. Each command is handled by the real thing:

* blocks marked ``<!-- docs-test: sandbox N -->`` (docs/install-primary-remote.md's sandbox path) are
  concatenated in order of N and run verbatim by bash (``docs_session.OFFLINE`` aside: the grpcio venv
  is the suite's), in a network namespace of their own so the documented default ports are free; every
  command must succeed and the output must show the remote synced, the proxy synced on every type and
  cluster2's endpoints sent through network2's gateway;
* ``meshctl`` commands that read meshd (``remote-clusters``, ``proxy-status``, ``proxy-config``,
  ``explain``, ``adsz``, ``networks``) run against a sandbox meshd with the documented proxy connected (placeholders such as
  ``<proxy-id>`` are filled from live data) and must exit 0;
* other ``meshctl`` and ``meshd`` commands run for real, isolated (own network namespace, empty HOME and
  KUBECONFIG, a scratch folder) for a few seconds: they must not fail with a usage error (clap's exit 2);
  what happens next (no kubeconfig, nothing listening) is the environment's, not the example's;
* every metric name the docs' metrics tables and samples mention must be served on ``/metrics`` (the
  fixture makes each metric have a sample: a proxy, a NACK, a stale nonce, config reloads);
* ``helm install`` is rendered by the chart (real Helm SDK) with the command's ``--set`` values and
  namespace, so a value the schema rejects fails here;
* the rest — ``kubectl``/``helm`` against a real cluster, ``cargo``, ``tests/run.sh`` — is excluded by the
  rules in ``EXCLUDED``, each with its reason, and a command no rule covers fails the test.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from docs_session import offline
from meshd_proc import BIN_DIR, KUBECTL, REPO, Meshd, eventually
from xdsharness import CDS, EDS, LDS, RDS, Ads, grpc_node

DOCS = [REPO / "README.md", REPO / "helm" / "meshd" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TOOLS = ("meshctl", "meshd", "kubectl", "helm", "curl", "openssl", "cargo", "tests/run.sh")
# The proxy docs/debugging.md's samples were taken with.
PROXY_ID = "sidecar~10.10.0.99~client-0.sample~sample.svc.cluster.local"
READS = {"remote-clusters", "proxy-status", "proxy-config", "explain", "adsz", "networks"}
# Values for documented placeholders and environment variables of commands that are only parsed.
PLACEHOLDERS = {"<proxy-id>": PROXY_ID, "<cluster-id>": "cluster9", "$DISCOVERY_ADDRESS": "192.0.2.10",
                "$ISTIOD_PID": "4242"}

# (regex on the command, why it is not run). Keep it short: everything else runs.
EXCLUDED = [
    (r"^kubectl --context ", "targets a real cluster by context (the guide's CTX_PRIMARY / CTX_REMOTE)"),
    (r"^kubectl (create namespace|-n istio-system create secret|-n istio-system rollout status)",
     "the chart README's install on the current kubectl context, a real cluster"),
    (r"^helm uninstall ", "removes a release from a real cluster"),
    (r"^cargo (run|build)", "builds meshd; the suite runs the binaries it already built (MESHD_BIN_DIR)"),
    (r"^tests/run\.sh", "runs the whole suite, this test included"),
    (r"^cargo (fmt|clippy) ", "lints the source: tests/run.sh runs exactly these first"),
]


# --------------------------------------------------------------------------- extraction


def fenced_blocks(text: str) -> list[tuple[str, str, str | None, int]]:
    """(language, body, docs-test marker or None, line number) of each fenced block."""
    out = []
    pattern = re.compile(r"(?:<!-- docs-test: (?P<marker>[^>]*?) -->\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```", re.M | re.S)
    for m in pattern.finditer(text):
        out.append((m["lang"], m["body"], m["marker"], text.count("\n", 0, m.start("body")) + 1))
    return out


def logical_lines(body: str) -> list[str]:
    lines, current = [], None
    for raw in body.splitlines():
        if current is None:
            current = ""
        current += raw.rstrip("\\").rstrip() + " " if raw.endswith("\\") else raw
        if not raw.endswith("\\"):
            lines.append(current.strip())
            current = None
    return lines


def simple_commands(line: str) -> list[str]:
    """The simple commands of a shell line: split at ``|``, ``&&``, ``||``, ``;`` and ``&``, comments and
    redirections dropped."""
    line = re.sub(r"\s+#.*$", "", line)
    parts = re.split(r"\s*(?:\|\||&&|\||;|(?<![>&])&(?!>))\s*", line)
    return [re.sub(r"\s+\d?>+\s*\S+", "", p).strip() for p in parts if p.strip()]


def doc_commands() -> list[tuple[str, str]]:
    """(where, command) for every tracked command of the ``sh``, ``bash`` and unlabelled blocks but the marked
    ones (run by their own tests)."""
    found = []
    for path in DOCS:
        for lang, body, marker, line in fenced_blocks(path.read_text()):
            if marker or lang not in ("sh", "bash", ""):
                continue
            for cmd_line in logical_lines(body):
                for cmd in simple_commands(cmd_line):
                    if cmd.startswith(TOOLS):
                        found.append((f"{path.relative_to(REPO)}:{line}", cmd))
    return found


def notes_commands() -> list[tuple[str, str]]:
    from test_helm import notes

    found = []
    for values in ({}, {"profile": "remote", "remote": {"discovery": {"enabled": True, "address": "192.0.2.10"}}}):
        for cmd_line in logical_lines(notes(values)):
            for cmd in simple_commands(cmd_line):
                if cmd.startswith("meshctl"):
                    found.append((f"NOTES.txt ({values.get('profile', 'primary')})", cmd))
    return found


def argv(cmd: str) -> list[str]:
    for key, value in PLACEHOLDERS.items():
        cmd = cmd.replace(key, value)
    cmd = re.sub(r"<[a-z][a-z-]*>", "placeholder", cmd)
    return shlex.split(cmd)


def excluded(cmd: str) -> str | None:
    return next((why for pattern, why in EXCLUDED if re.search(pattern, cmd)), None)


# --------------------------------------------------------------------------- running


def netns_works() -> bool:
    """Whether an unprivileged network namespace with loopback up can be made here."""
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-rn", "bash", "-c", "ip link set lo up"], capture_output=True).returncode == 0


def isolated(args: list[str], cwd: Path, timeout: float = 5, env: dict | None = None,
             script: str | None = None) -> tuple[int | None, str]:
    """Runs ``args`` (or a bash ``script``) in a fresh network namespace with loopback up; returns
    (exit code or None if still running at ``timeout``, output). The whole process group is ended."""
    inner = 'ip link set lo up && exec "$@"'
    cmd = ["unshare", "-rn", "bash", "-c", inner, "bash"]
    cmd += ["bash", "-c", script] if script is not None else args
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def bare_env(tmp: Path) -> dict:
    """No kubeconfig, no home: a command that parses cannot reach anything real."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": f"{BIN_DIR}:{os.environ['PATH']}", "HOME": str(home), "KUBECONFIG": str(tmp / "no-kubeconfig"),
            "TMPDIR": str(tmp)}


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    state = tmp_path_factory.mktemp("docs")
    mesh_config = state / "mesh.yaml"
    mesh_config.write_text("trustDomain: cluster.local\n")
    m = Meshd(state, args=["--mesh-config", str(mesh_config), "--config-poll", "200ms"])
    m.mesh_config = mesh_config
    # The documented proxy, holding helloworld on every type as the grpcio client of "Try a proxy" does.
    ads = Ads(f"127.0.0.1:{m.grpc}")
    node = grpc_node(PROXY_ID, NAMESPACE="sample", CLUSTER_ID="cluster1", NETWORK="network1")
    cluster, listener = "outbound|5000||helloworld.sample.svc.cluster.local", "helloworld.sample.svc.cluster.local:5000"
    for ty, names in [(CDS, [cluster]), (EDS, [cluster]), (LDS, [listener]), (RDS, [cluster])]:
        ads.send(ty, node=node if ty == CDS else None, resource_names=names)
        ads.ack(ads.recv(timeout=10), names)
    yield m
    ads.close()
    m.stop()


# --------------------------------------------------------------------------- the tests


def test_the_docs_have_commands_and_every_one_is_handled():
    commands = doc_commands() + notes_commands()
    tools = {argv(c)[0] for _, c in commands}
    assert {"meshctl", "meshd", "kubectl", "helm"} <= tools, tools
    reads = [c for _, c in commands if argv(c)[0] == "meshctl" and argv(c)[1] in READS]
    assert len(reads) >= 5, reads
    unhandled = [(w, c) for w, c in commands
                 if argv(c)[0] not in ("meshctl", "meshd") and not c.startswith("helm install")
                 and not excluded(c)]
    assert not unhandled, f"commands neither run nor excluded with a reason: {unhandled}"


def test_the_extraction_can_fail():
    """A command with a flag meshctl lacks is caught by the same check the docs go through."""
    if not netns_works():
        pytest.skip("no unprivileged network namespaces (unshare -rn)")
    code, out = isolated([str(BIN_DIR / "meshctl"), *argv("meshctl add-cluster --context x --no-such-flag")[1:]],
                         cwd=Path("/"))
    assert code == 2 and "--no-such-flag" in out, out
    assert simple_commands("meshctl a --b c | kubectl apply -f - && meshd --x > log 2>&1 &") == [
        "meshctl a --b c", "kubectl apply -f -", "meshd --x"]


def test_meshctl_read_commands_run_against_meshd(mesh):
    env = dict(os.environ, MESHCTL_MESHD=f"http://127.0.0.1:{mesh.monitoring}")
    eventually("the documented proxy connected",
               lambda: PROXY_ID in subprocess.run([str(BIN_DIR / "meshctl"), "proxy-status"], env=env,
                                                  capture_output=True, text=True).stdout)
    failures = []
    ran = 0
    for where, cmd in doc_commands() + notes_commands():
        args = argv(cmd)
        if args[0] != "meshctl" or args[1] not in READS:
            continue
        out = subprocess.run([str(BIN_DIR / "meshctl"), *args[1:]], env=env, capture_output=True, text=True,
                             timeout=30)
        ran += 1
        if out.returncode != 0 or not out.stdout.strip():
            failures.append(f"{where}: {cmd}: exit {out.returncode}: {out.stderr.strip()}")
    assert ran >= 5
    assert not failures, "\n".join(failures)


def test_other_meshctl_and_meshd_commands_parse(tmp_path):
    if not netns_works():
        pytest.skip("no unprivileged network namespaces (unshare -rn)")
    failures = []
    ran = 0
    for where, cmd in doc_commands() + notes_commands():
        args = argv(cmd)
        if args[0] not in ("meshctl", "meshd") or (args[0] == "meshctl" and args[1] in READS):
            continue
        scratch = tmp_path / f"cmd{ran}"
        scratch.mkdir()
        code, out = isolated([str(BIN_DIR / args[0]), *args[1:]], cwd=scratch, env=bare_env(scratch))
        ran += 1
        if code == 2:
            failures.append(f"{where}: {cmd}:\n{out}")
    assert ran >= 5
    assert not failures, "usage errors:\n" + "\n".join(failures)


def helm_values(args: list[str]) -> tuple[dict, str]:
    """The values and namespace of a ``helm install`` argv (``--set a.b=c``, ``-n``)."""
    values: dict = {}
    namespace = "default"
    it = iter(args)
    for a in it:
        if a in ("-n", "--namespace"):
            namespace = next(it)
        elif a == "--kube-context":
            next(it)
        elif a == "--set":
            key, _, raw = next(it).partition("=")
            node = values
            *parents, leaf = key.split(".")
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = {"true": True, "false": False}.get(raw, int(raw) if raw.isdigit() else raw)
        elif a.startswith("-"):
            raise AssertionError(f"unhandled helm flag {a}")
    return values, namespace


def test_helm_install_values_render():
    from test_helm import render

    ran = 0
    for where, cmd in doc_commands():
        if not cmd.startswith("helm install"):
            continue
        args = argv(cmd)
        chart = args[3]
        assert (REPO / chart).resolve() == (REPO / "helm" / "meshd").resolve(), f"{where}: chart {chart}"
        values, namespace = helm_values(args[4:])
        docs = render(values, namespace=namespace)
        ran += 1
        assert docs, f"{where}: {cmd} renders nothing"
    assert ran >= 4


def sandbox_script() -> str:
    text = (REPO / "docs" / "install-primary-remote.md").read_text()
    blocks = sorted((int(m.split()[1]), body) for _, body, m, _ in fenced_blocks(text) if m and m.startswith("sandbox"))
    assert [n for n, _ in blocks] == list(range(1, len(blocks) + 1)), "sandbox blocks are numbered 1..N"
    # The binaries are built already (MESHD_BIN_DIR); everything else runs as written.
    body = "".join(b for _, b in blocks)
    assert "cargo build --bins\n" in body
    return "set -euo pipefail\n" + offline(body.replace("cargo build --bins\n", ""), check_used=True)


def test_the_sandbox_walkthrough_runs_verbatim(tmp_path):
    if not netns_works():
        pytest.skip("no unprivileged network namespaces (unshare -rn)")
    # tests/run.sh may have unpacked its own kubectl (KUBECTL); the walkthrough calls it `kubectl`.
    kubectl = shutil.which(KUBECTL)
    path = f"{Path(kubectl).parent}:{os.environ['PATH']}" if kubectl else os.environ["PATH"]
    missing = [t for t in ("openssl", "curl", "kubectl") if shutil.which(t, path=path) is None]
    if missing:
        pytest.skip(f"not installed: {missing}")
    if importlib.util.find_spec("grpc") is None:
        pytest.skip("no grpcio in the test's Python, which stands in for the walkthrough's grpcio venv")
    if BIN_DIR.resolve() != (REPO / "target" / "debug").resolve():
        pytest.skip("the walkthrough uses target/debug")
    env = dict(os.environ, TMPDIR=str(tmp_path), PATH=path)
    env.pop("MESHCTL_MESHD", None)
    # The script's background jobs share its output pipe: exiting 0 within the timeout also means its
    # last block stopped every one of them.
    code, out = isolated([], cwd=REPO, timeout=180, env=env, script=sandbox_script())
    assert code == 0, f"the walkthrough failed (exit {code}):\n{out[-6000:]}"
    assert re.search(r"cluster2\s+istio-system/istio-remote-secret-cluster2\s+synced", out), out
    assert '"id":"cluster2"' in out and '"syncStatus":"synced"' in out, out
    assert re.search(r"network2\s+cluster2\s+198\.51\.100\.10\s+15443", out), out
    assert re.search(rf"{re.escape(PROXY_ID)}\s+cluster1\s+network1(\s+SYNCED){{4}}\n", out), out
    assert re.search(r"198\.51\.100\.10:15443\s+gateway\s+cluster\d\s+network2", out), out
    assert "through network2's gateway 198.51.100.10:15443" in out, out
    assert "DROPPED: behind another network's gateway, which proxyless gRPC cannot cross" in out, out


# --------------------------------------------------------------------------- documented output


def test_push_status_counts_the_connected_proxy(mesh):
    """The documented proxy is connected and was answered: the latest push counts it."""
    status = mesh.json("/debug/push_status")
    assert status["proxiesPushed"] >= 1 and status["pushes"], status


METRIC = re.compile(r"\b((?:pilot|xds|meshd|istiod|remote)_[a-z0-9_]*[a-z0-9])\b")


def documented_metrics() -> dict[str, str]:
    """Metric name → where, from the Metrics sections of the docs (tables and samples)."""
    found = {}
    for name in ("operations.md", "debugging.md"):
        text = (REPO / "docs" / name).read_text()
        section = text[text.index("## Metrics"):]
        section = section[:section.find("\n## ", 1)] if "\n## " in section[1:] else section
        # Command lines hold grep patterns (`pilot_k8s|istiod_`), not names.
        section = "\n".join(line for line in section.splitlines() if not line.startswith("$ "))
        for m in METRIC.finditer(section):
            if not section[m.end():].startswith("*"):  # `meshd_*`: a family of names, not one
                found.setdefault(m[1], f"docs/{name}")
    return found


def served_metrics(body: str) -> set[str]:
    """The names a query can use: samples' names (a counter's `# TYPE` line names it without the `_total`
    its samples carry), histograms by their base name."""
    names = set()
    for line in body.splitlines():
        if line and not line.startswith("#"):
            names.add(re.sub(r"_(bucket|sum|count|created)$", "", re.split(r"[{ ]", line)[0]))
    return names


def test_documented_metric_names_are_served(mesh):
    # Give every documented family a sample: a NACK, a stale nonce, a config reload and a rejected one.
    ads = Ads(f"127.0.0.1:{mesh.grpc}")
    ads.send(CDS, node=grpc_node("sidecar~10.10.0.98~metrics-0.sample~sample.svc.cluster.local",
                                 NAMESPACE="sample", CLUSTER_ID="cluster1", NETWORK="network1"))
    ads.nack(ads.recv())
    ads.send(CDS, response_nonce="not-a-nonce-meshd-sent")
    # An address that does not parse, which meshd leaves out and counts.
    mesh.kubectl("cluster1", "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad-ip", "namespace": "sample"},
        "spec": {"ports": [{"port": 80}], "externalIPs": ["not-an-ip"]}}))
    mesh.mesh_config.write_text("trustDomain: cluster.local\ndefaultConfig: {}\n")
    eventually("a config reload", lambda: "meshd_config_reloads_total{" in mesh.get("/metrics")[1])
    mesh.mesh_config.write_text("trustDomain: [\n")
    eventually("a rejected config reload", lambda: "meshd_config_reload_errors_total{" in mesh.get("/metrics")[1])
    documented = documented_metrics()
    assert {"pilot_xds_pushes", "pilot_k8s_reg_events", "meshd_build_info"} <= set(documented), documented

    def missing():
        served = served_metrics(mesh.get("/metrics")[1])
        return {n: w for n, w in documented.items() if n not in served}

    try:
        eventually("every documented metric served", lambda: not missing(), timeout=10)
    except AssertionError:
        raise AssertionError(f"documented metric names /metrics does not serve: {missing()}") from None
    finally:
        ads.close()
