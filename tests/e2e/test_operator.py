"""The operator surface against the real binaries on the sandbox: ``meshctl add-cluster`` /
``remove-cluster`` / ``remote-clusters`` for a third simulated cluster, ``proxy-status`` with a real grpcio
client and a NACKing raw ADS client, ``explain`` through cluster2's gateway, secret material never in any
debug output, and non-loopback debug callers refused without credentials."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from meshd_proc import BIN_DIR, REPO, Meshd, eventually
from xdsharness import CDS, Ads, grpc_node

HERE = Path(__file__).resolve().parent
PLANTED = "planted-operator-token-7f3c9d1e"
GRPC_NODE = "sidecar~10.10.0.99~client-0.sample~sample.svc.cluster.local"


def meshctl(m: Meshd, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [str(BIN_DIR / "meshctl"), "--meshd", f"http://127.0.0.1:{m.monitoring}", *args],
        capture_output=True, text=True, timeout=60,
    )
    if check:
        assert out.returncode == 0, f"meshctl {' '.join(args)}: {out.stderr}"
    return out


def host_ip() -> str | None:
    """This machine's own non-loopback address (traffic to it stays on the machine)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") else ip


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("operator"), admin_host="0.0.0.0")
    yield m
    m.stop()


@pytest.fixture(scope="module")
def cluster3(tmp_path_factory):
    """A third simulated cluster: cluster2's manifests with its names, addresses and network changed."""
    root = tmp_path_factory.mktemp("third")
    folder = root / "clusters" / "cluster3"
    folder.mkdir(parents=True)
    swaps = [("cluster2", "cluster3"), ("network2", "network3"), ("10.20.", "10.30."), ("10.97.", "10.98."),
             ("198.51.100.", "203.0.113.")]
    for f in (REPO / "clusters" / "cluster2").glob("*.yaml"):
        text = f.read_text()
        for a, b in swaps:
            text = text.replace(a, b)
        (folder / f.name).write_text(text)
    state = root / "state"
    proc = subprocess.Popen(
        [str(BIN_DIR / "meshctl"), "sandbox", "serve", "--clusters", str(root / "clusters"), "--state-dir", str(state)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    report = json.loads(proc.stdout.readline())
    yield Path(report["clusters"]["cluster3"]["kubeconfig"])
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)


def remote_clusters(m: Meshd) -> dict[str, dict]:
    return {r["name"]: r for r in json.loads(meshctl(m, "remote-clusters", "-o", "json").stdout)}


def service_clusters(m: Meshd, host: str) -> set[str]:
    for s in m.json("/debug/registryz"):
        if s["hostname"] == host:
            return set(s["clusterVIPs"]["Addresses"])
    return set()


@pytest.mark.parametrize("token_flags", [[], ["--long-lived"]], ids=["token-request", "long-lived"])
def test_add_cluster_syncs_merges_and_remove_cluster_removes(mesh, cluster3, token_flags):
    primary = str(mesh.kubeconfig("cluster1"))
    hello = "helloworld.sample.svc.cluster.local"

    refused = subprocess.run(
        [str(BIN_DIR / "meshctl"), "add-cluster", "--name", "cluster3", "--kubeconfig", str(cluster3)],
        capture_output=True, text=True, timeout=60,
    )
    assert refused.returncode != 0 and "loopback" in refused.stderr, refused.stderr

    printed = meshctl(mesh, "add-cluster", "--name", "cluster3", "--kubeconfig", str(cluster3),
                      "--allow-loopback", *token_flags).stdout
    assert "istio/multiCluster: 'true'" in printed and "stringData:" in printed
    assert "cluster3" not in remote_clusters(mesh), "printing does not apply"

    added = meshctl(mesh, "add-cluster", "--name", "cluster3", "--kubeconfig", str(cluster3), "--allow-loopback",
                    *token_flags, "--apply", "--primary-kubeconfig", primary)
    assert "written to the primary" in added.stderr and added.stdout == ""
    eventually("cluster3 synced", lambda: remote_clusters(mesh).get("cluster3", {}).get("status") == "synced")
    eventually("cluster3's helloworld merged", lambda: "cluster3" in service_clusters(mesh, hello))
    assert {"cluster1", "cluster2", "cluster3"} <= service_clusters(mesh, hello)

    meshctl(mesh, "remove-cluster", "cluster3", "--primary-kubeconfig", primary)
    eventually("cluster3 gone", lambda: "cluster3" not in remote_clusters(mesh))
    eventually("cluster3's endpoints gone", lambda: "cluster3" not in service_clusters(mesh, hello))


def grpc_bootstrap(m: Meshd) -> str:
    # The certificate provider (instance "default", as istio-agent's bootstrap names it) a cluster
    # needs once a DestinationRule makes it ISTIO_MUTUAL; the NACK half of this test is a raw client's.
    certs = m.state / "certs"
    provider = {"plugin_name": "file_watcher", "config": {
        "certificate_file": str(certs / "cert-chain.pem"), "private_key_file": str(certs / "key.pem"),
        "ca_certificate_file": str(certs / "root-cert.pem"), "refresh_interval": "900s"}}
    return json.dumps({
        "certificate_providers": {"default": provider},
        "xds_servers": [{"server_uri": f"127.0.0.1:{m.grpc}", "channel_creds": [{"type": "insecure"}],
                         "server_features": ["xds_v3"]}],
        "node": {"id": GRPC_NODE, "locality": {},
                 "metadata": {"GENERATOR": "grpc", "NAMESPACE": "sample", "CLUSTER_ID": "cluster1",
                              "NETWORK": "network1"}},
    })


@pytest.fixture(scope="module")
def grpc_client(mesh):
    """A real grpcio xDS client, kept connected (its calls may fail: the sandbox's pods are not real)."""
    env = dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=grpc_bootstrap(mesh), GRPC_VERBOSITY="ERROR")
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "grpc_xds_client.py"), "xds:///helloworld.sample.svc.cluster.local:5000",
         "--count", "1", "--timeout", "5", "--forever"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    yield GRPC_NODE
    proc.kill()
    proc.wait()


def proxy_rows(m: Meshd) -> dict[str, dict]:
    return {r["name"]: r for r in json.loads(meshctl(m, "proxy-status", "-o", "json").stdout)}


def test_proxy_status_shows_grpcio_synced_and_a_nack(mesh, grpc_client):
    def synced():
        row = proxy_rows(mesh).get(grpc_client)
        return row if row and all(row["status"][t] == "SYNCED" for t in ("LDS", "RDS", "CDS", "EDS")) else None

    row = eventually("grpcio client SYNCED on every type", synced)
    assert (row["cluster"], row["network"], row["last_nack"]) == ("cluster1", "network1", "")
    table = meshctl(mesh, "proxy-status").stdout
    assert re.search(rf"{re.escape(grpc_client)}\s+cluster1\s+network1\s+SYNCED\s+SYNCED\s+SYNCED\s+SYNCED", table), table

    node = "sidecar~10.10.0.98~nacker-0.sample~sample.svc.cluster.local"
    ads = Ads(f"127.0.0.1:{mesh.grpc}")
    try:
        ads.send(CDS, node=grpc_node(node, NAMESPACE="sample", CLUSTER_ID="cluster1"))
        ads.nack(ads.recv())
        row = eventually("the NACK in proxy-status", lambda: (proxy_rows(mesh).get(node) or {}).get("last_nack") and proxy_rows(mesh)[node])
        assert row["last_nack"] == "CDS: rejected by test" and row["status"]["CDS"] == "STALE"
        assert row["status"]["EDS"] == "NOT SENT"
        assert mesh.json("/debug/push_status")["version"] > 0
    finally:
        ads.close()


SIDECAR_1 = "sidecar~10.10.0.98~envoy-0.sample~sample.svc.cluster.local"


def test_explain_shows_the_gateway_and_the_dropped_plain_endpoint(mesh, grpc_client):
    # An Envoy sidecar on network1 (not connected: explain parses its node from the flags).
    sidecar = ("explain", SIDECAR_1, "helloworld.sample:5000", "--network", "network1", "--cluster", "cluster1")
    report = json.loads(meshctl(mesh, *sidecar, "-o", "json").stdout)
    port = report["ports"][0]
    remote = [e for e in port["endpoints"] if e["cluster"] == "cluster2"]
    assert remote and all(e["verdict"]["decision"] == "viaGateways" for e in remote)
    assert {g["address"] for e in remote for g in e["verdict"]["gateways"]} == {"198.51.100.10"}
    gateway = [s for s in port["sent"] if s["gateway"]]
    # cluster2's two healthy helloworld-v2 pods (one per zone) and the VM on network2 (weight 2) go through
    # its one gateway, sent once (Envoy keeps one endpoint per address): 1 + 2 + 1 in the first locality.
    assert sorted((g["address"], g["port"], g["locality"]["zone"], g["weight"]) for g in gateway) == [
        ("198.51.100.10", 15443, "eu-west1-a", 4)]
    assert "through network2's gateway 198.51.100.10:15443" in meshctl(mesh, *sidecar).stdout

    # ratings-v2 in cluster2 has no sidecar: not reachable through the gateway.
    ratings = ("explain", SIDECAR_1, "ratings.sample", "--network", "network1", "--cluster", "cluster1")
    out = json.loads(meshctl(mesh, *ratings, "-o", "json").stdout)
    dropped = [e for e in out["ports"][0]["endpoints"] if e["verdict"]["decision"] == "dropped"]
    assert dropped and all(e["verdict"]["why"] == "notMtls" and e["tlsMode"] == "disabled" for e in dropped)
    assert "DROPPED: not mTLS-capable" in meshctl(mesh, *ratings).stdout

    # The connected grpcio client cannot cross the gateway (no SNI): cluster2's endpoints are dropped.
    eventually("grpcio client connected", lambda: grpc_client in proxy_rows(mesh))
    report = json.loads(meshctl(mesh, "explain", grpc_client, "helloworld.sample:5000", "-o", "json").stdout)
    port = report["ports"][0]
    remote = [e for e in port["endpoints"] if e["network"] == "network2"]
    assert remote and all(e["verdict"] == {"decision": "dropped", "why": "proxylessBehindGateway"} for e in remote)
    assert not [s for s in port["sent"] if s["gateway"]]
    assert "DROPPED: behind another network's gateway" in meshctl(
        mesh, "explain", grpc_client, "helloworld.sample:5000").stdout


def test_no_secret_material_in_any_debug_output(mesh, grpc_client):
    mesh.kubectl("cluster2", "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "planted", "namespace": "sample"},
        "stringData": {"token": PLANTED},
    }))
    secrets = [PLANTED]
    remote = json.loads(mesh.kubectl("cluster1", "get", "secret", "-n", "istio-system",
                                     "istio-remote-secret-cluster2", "-o", "json"))
    kubeconfig = base64.b64decode(remote["data"]["cluster2"]).decode()
    secrets.append(re.search(r"token: (\S+)", kubeconfig).group(1))
    ca = json.loads(mesh.kubectl("cluster1", "get", "secret", "-n", "istio-system", "istio-ca-secret", "-o", "json"))
    key_pem = base64.b64decode(ca["data"]["ca-key.pem"]).decode()
    secrets.append(key_pem.splitlines()[1])  # a line of the private key's body
    secrets.append(ca["data"]["ca-key.pem"])
    assert all(len(s) > 20 for s in secrets)
    eventually("grpcio client connected", lambda: grpc_client in proxy_rows(mesh))

    paths = [e["path"] for e in mesh.json("/debug")["endpoints"]]
    assert {"/debug/adsz", "/debug/syncz", "/debug/clusterz", "/debug/registryz", "/debug/endpointz",
            "/debug/networkz", "/debug/configz", "/debug/push_status", "/debug/config_dump"} <= set(paths)
    paths += [f"/debug/config_dump?proxyID={GRPC_NODE}",
              f"/debug/explain?proxyID={GRPC_NODE}&service=helloworld.sample", "/metrics", "/debug"]
    for path in paths:
        status, body = mesh.get(path.replace("~", "%7E"))
        assert status in (200, 400), f"{path}: {status}"
        for s in secrets:
            assert s not in body, f"{path} leaks secret material"
    status, body = mesh.get(f"/debug/config_dump?proxyID={GRPC_NODE}")
    assert status == 200 and json.loads(body)["configs"], body


def test_non_loopback_debug_requires_credentials(mesh):
    ip = host_ip()
    if ip is None:
        pytest.skip("no non-loopback address on this machine")
    for path, want in [("/debug/clusterz", 401), ("/debug/config_dump?proxyID=x", 401), ("/metrics", 200)]:
        req = urllib.request.Request(f"http://{ip}:{mesh.monitoring}{path}")
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                status = r.status
        except urllib.error.HTTPError as e:
            status = e.code
        assert status == want, f"{path} from {ip}: {status}"
    req = urllib.request.Request(f"http://{ip}:{mesh.monitoring}/debug/clusterz",
                                 headers={"Authorization": "Bearer not-a-token"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 401 and b"token" in e.value.read()
    assert mesh.get("/debug/clusterz")[0] == 200, "loopback stays open"


def test_meshctl_never_answers_for_another_meshd_than_the_one_named(mesh, tmp_path):
    """Pointed at a state folder that is missing, or whose meshd is not running, meshctl fails and says
    so, instead of asking the meshd that runs elsewhere; pointed at the running one's folder, it asks it."""
    env = {k: v for k, v in os.environ.items() if k != "MESHCTL_MESHD"}

    def run(state: Path) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN_DIR / "meshctl"), "remote-clusters"], capture_output=True, text=True,
                              timeout=60, env=dict(env, MESHD_STATE_DIR=str(state)))

    missing = run(tmp_path / "missing")
    assert missing.returncode != 0 and not missing.stdout, missing
    assert f"MESHD_STATE_DIR={tmp_path / 'missing'}: no such folder" in missing.stderr, missing.stderr
    (tmp_path / "stopped").mkdir()
    stopped = run(tmp_path / "stopped")
    assert stopped.returncode != 0 and not stopped.stdout, stopped
    assert "no meshd is running on MESHD_STATE_DIR=" in stopped.stderr, stopped.stderr
    live = run(mesh.state)
    assert live.returncode == 0 and "cluster2" in live.stdout, live


def test_analyze_names_a_route_to_a_subset_no_rule_defines(mesh, grpc_client):
    """IST0101: a VirtualService sending half the traffic to subset v3, which no DestinationRule defines;
    proxy-status shows the grpcio client waiting for the cluster CDS never builds."""
    vs = {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
          "metadata": {"name": "to-nothing", "namespace": "sample"},
          "spec": {"hosts": ["helloworld"], "http": [{"route": [
              {"destination": {"host": "helloworld", "subset": "v3"}, "weight": 50},
              {"destination": {"host": "helloworld"}, "weight": 50}]}]}}
    mesh.kubectl("cluster1", "apply", "-f", "-", stdin=json.dumps(vs))
    try:
        def report():
            out = meshctl(mesh, "analyze", "-o", "json", check=False)
            return out.returncode, json.loads(out.stdout or "[]")

        eventually("the route to nothing reported", lambda: any(
            f["name"] == "sample/to-nothing" for f in report()[1]))
        code, findings = report()
        mine = [f for f in findings if f["name"] == "sample/to-nothing"]
        assert [(f["level"], f["code"], f["kind"]) for f in mine] == [("Error", "IST0101", "VirtualService")], mine
        assert mine[0]["reason"] == 'Referenced host+subset in destinationrule not found: "helloworld+v3"', mine
        assert code == 0, findings  # istioctl's rule: JSON output exits 0 whatever it reports
        table = meshctl(mesh, "analyze", check=False)
        assert table.returncode == 79, table  # istioctl's "analyzers found issues"
        assert ('Error [IST0101] (VirtualService sample/to-nothing) Referenced host+subset in destinationrule '
                'not found: "helloworld+v3"') in table.stdout, table.stdout
        # explain says the subset's cluster is never built, for a proxy that is not connected too.
        text = meshctl(mesh, "explain", SIDECAR_1, "helloworld.sample:5000", "--network", "network1",
                       "--subset", "v3").stdout
        assert "CLUSTER NOT BUILT: no " in text and "subset v3" in text, text
        # The real grpcio client follows the route and asks for the v3 cluster: SYNCED, yet waiting.
        v3 = "outbound|5000|v3|helloworld.sample.svc.cluster.local"
        row = eventually("the client waiting for the v3 cluster",
                         lambda: (proxy_rows(mesh).get(grpc_client) or {}).get("waiting_for") and proxy_rows(mesh)[grpc_client])
        assert row["waiting_for"] == f"CDS {v3}", row
        assert row["status"]["CDS"] == "SYNCED", row
        shown = meshctl(mesh, "proxy-status")
        assert re.search(rf"{re.escape(grpc_client)}\s.*CDS {re.escape(v3)}", shown.stdout), shown.stdout
        assert "WAITING FOR: resources a proxy asked for that meshd does not have" in shown.stderr, shown.stderr
    finally:
        mesh.kubectl("cluster1", "delete", "-n", "sample", "virtualservice", "to-nothing")
    eventually("reported no more", lambda: not any(f["name"] == "sample/to-nothing" for f in report()[1]))
    eventually("the client waits no more", lambda: (proxy_rows(mesh).get(grpc_client) or {"waiting_for": "x"})["waiting_for"] == "")


def test_analyze_resolves_subsets_against_every_cluster(mesh):
    """istio#24345: helloworld v1 runs in cluster1 and v2 in cluster2 only. meshd analyzes the merged
    registry, so subset v2 (pods in cluster2 alone) is not reported; v3, matching no pod in any
    cluster, is (IST0173), naming the clusters searched. Live: fixing the rule clears the message."""
    def dr(subsets):
        return json.dumps({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
                           "metadata": {"name": "hello-versions", "namespace": "sample"},
                           "spec": {"host": "helloworld", "subsets": [
                               {"name": v, "labels": {"version": v}} for v in subsets]}})

    def mine():
        out = meshctl(mesh, "analyze", "-o", "json", check=False)
        return [f for f in json.loads(out.stdout or "[]") if f["name"] == "sample/hello-versions"]

    assert "/debug/analyzez" in [e["path"] for e in mesh.json("/debug")["endpoints"]]
    mesh.kubectl("cluster1", "apply", "-f", "-", stdin=dr(["v1", "v2", "v3"]))
    try:
        found = eventually("subset v3 reported", lambda: (m := mine()) and m)
        assert [(f["level"], f["code"], f["kind"]) for f in found] == [
            ("Error", "IST0173", "DestinationRule")], found
        reason = found[0]["reason"]
        assert reason.startswith("The Subset v3 defined in the DestinationRule does not select any pods"), reason
        assert "clusters with endpoints: cluster1, cluster2" in reason and "version=v3" in reason, reason
        messages = mesh.json("/debug/analyzez")["messages"]
        assert not [m for m in messages if m["origin"] == "DestinationRule sample/hello-versions"
                    and "Subset v2 " in m["message"]], messages
        table = meshctl(mesh, "analyze", check=False)
        assert table.returncode == 79, table
        assert "Error [IST0173] (DestinationRule sample/hello-versions) The Subset v3 " in table.stdout, table.stdout
        ok = meshctl(mesh, "analyze", "--output-threshold", "ERROR", "--failure-threshold", "error", check=False)
        assert ok.returncode == 79 and "Info" not in ok.stdout, ok

        mesh.kubectl("cluster1", "apply", "-f", "-", stdin=dr(["v1", "v2"]))
        eventually("v3 no longer reported", lambda: not mine())
    finally:
        mesh.kubectl("cluster1", "delete", "-n", "sample", "destinationrule", "hello-versions")


def test_a_proxy_that_is_not_connected_points_to_proxy_status_and_explain(mesh):
    ghost = "sidecar~10.10.9.9~ghost-0.sample~sample.svc.cluster.local"
    out = meshctl(mesh, "proxy-config", "cluster", ghost, check=False)
    assert out.returncode != 0 and "is not connected" in out.stderr, out
    assert "meshctl proxy-status" in out.stderr and "meshctl explain PROXY HOST --network" in out.stderr, out.stderr
    out = meshctl(mesh, "explain", ghost, "helloworld.sample", check=False)
    assert out.returncode != 0 and "meshctl proxy-status" in out.stderr and "--network NETWORK" in out.stderr, out


def test_explain_refuses_an_unknown_network_and_suggests_a_namespaced_service(mesh):
    out = meshctl(mesh, "explain", SIDECAR_1, "helloworld.sample", "--network", "nettwork1", check=False)
    assert out.returncode != 0, out
    assert 'unknown network "nettwork1"; the mesh\'s networks: network1, network2' in out.stderr, out.stderr
    out = meshctl(mesh, "explain", SIDECAR_1, "helloworld", "--network", "network1", check=False)
    assert out.returncode != 0 and "did you mean helloworld.sample?" in out.stderr, out


def test_explain_says_a_change_is_still_inside_the_debounce_window(tmp_path):
    """With a long debounce, explain right after an apply shows the old state and says so; once the window
    closes the rule is in the report and the note is gone."""
    m = Meshd(tmp_path / "slow", args=["--debounce-after", "4s", "--debounce-max", "30s"])
    try:
        dr = {"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
              "metadata": {"name": "slow-rule", "namespace": "sample"},
              "spec": {"host": "helloworld.sample.svc.cluster.local",
                       "trafficPolicy": {"loadBalancer": {"simple": "RANDOM"}}}}
        query = ("explain", SIDECAR_1, "helloworld.sample:5000", "--network", "network1", "--cluster", "cluster1")
        m.kubectl("cluster1", "apply", "-f", "-", stdin=json.dumps(dr))
        text = eventually("the pending change noted", lambda: (
            t := meshctl(m, *query).stdout) and "still inside the debounce window" in t and t)
        assert "destination rule: none (defaults)" in text, text
        report = json.loads(meshctl(m, *query, "-o", "json").stdout)
        pending = report.get("debouncing")
        if pending:  # the window may have closed between the two calls
            assert pending["publishWithinMs"] <= 4000 and pending["sinceMs"] >= 0, pending
        text = eventually("the rule published", lambda: (
            t := meshctl(m, *query).stdout) and "sample/slow-rule" in t and t)
        assert "debounce" not in text, text
    finally:
        m.stop()
