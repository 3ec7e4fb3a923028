"""`meshctl bootstrap` is enough for a real proxyless gRPC client: each of grpcio, @grpc/grpc-js-xds and
grpc-go (proxyless.py), given only that file, reaches SYNCED on CDS, EDS, LDS and RDS with no NACK
against a sandbox meshd (a DestinationRule makes the cluster ISTIO_MUTUAL, so the bootstrap's `default`
certificate provider is what CDS needs), and its RPCs reach a backend on loopback over workload mTLS
with the sandbox's certificate."""

from __future__ import annotations

import json
import os
import subprocess

import grpc
import pytest

import proxyless
from meshd_proc import BIN_DIR, KubeApi, Meshd, eventually
from xdsharness import EchoBackend

PROXY = "sidecar~127.0.0.1~loop-client.sample~sample.svc.cluster.local"
TARGET = "xds:///loop.sample.svc.cluster.local:7070"


def meshctl(meshd: Meshd, *args: str) -> str:
    out = subprocess.run(
        [str(BIN_DIR / "meshctl"), "--meshd", f"http://127.0.0.1:{meshd.monitoring}", *args],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 0, f"meshctl {' '.join(args)}: {out.stderr}"
    return out.stdout


def loop_service(port: int) -> list[dict]:
    """Service `loop.sample` with one Istio-mTLS pod (the sandbox's sample identity) at 127.0.0.1:port,
    and the DestinationRule that gives proxyless gRPC clients Istio mTLS to it (as with istiod, gRPC
    gets no auto-mTLS)."""
    labels = {"app": "loop", "security.istio.io/tlsMode": "istio", "topology.istio.io/network": "network1"}
    return [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "loop-0", "namespace": "sample", "labels": labels},
         "spec": {"serviceAccountName": "default", "containers": [{"name": "loop", "image": "loop"}]},
         "status": {"phase": "Running", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "loop", "namespace": "sample"},
         "spec": {"selector": {"app": "loop"},
                  "ports": [{"name": "grpc", "port": 7070, "targetPort": port, "appProtocol": "grpc"}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "loop-a", "namespace": "sample", "labels": {"kubernetes.io/service-name": "loop"}},
         "addressType": "IPv4",
         "ports": [{"name": "grpc", "port": port, "protocol": "TCP"}],
         "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True},
                        "targetRef": {"kind": "Pod", "namespace": "sample", "name": "loop-0"}}]},
        {"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
         "metadata": {"name": "loop", "namespace": "sample"},
         "spec": {"host": "loop", "trafficPolicy": {"tls": {"mode": "ISTIO_MUTUAL"}}}},
    ]


@pytest.fixture
def sandbox(tmp_path):
    """A sandbox meshd and an echo server presenting its workload certificate, requiring the client's."""
    m = Meshd(tmp_path / "state")
    certs = m.state / "certs"
    creds = grpc.ssl_server_credentials(
        [((certs / "key.pem").read_bytes(), (certs / "cert-chain.pem").read_bytes())],
        root_certificates=(certs / "root-cert.pem").read_bytes(),
        require_client_auth=True,
    )
    backend = EchoBackend("loop-0", server_credentials=creds)
    yield m, backend
    backend.stop()
    assert m.stop() == 0, m.log()


@pytest.mark.parametrize("kind", proxyless.params())
def test_bootstrap_file_reaches_synced_and_rpcs_flow(sandbox, tmp_path, kind):
    sandbox, backend = sandbox
    api = KubeApi(sandbox.kubeconfig("cluster1"))
    for obj in loop_service(backend.port):
        api.apply(obj)

    # Only the state folder: the xDS address and the certificate folder are the sandbox's defaults.
    out = tmp_path / "bootstrap.json"
    meshctl(sandbox, "bootstrap", PROXY, "--namespace", "sample", "--cluster-id", "cluster1",
            "--network", "network1", "--state-dir", str(sandbox.state), "--out", str(out))
    bs = json.loads(out.read_text())
    assert bs["xds_servers"][0]["server_uri"] == f"127.0.0.1:{sandbox.grpc}"
    assert bs["node"]["metadata"]["GENERATOR"] == "grpc"
    assert bs["certificate_providers"]["default"]["config"]["certificate_file"] == str(
        sandbox.state / "certs" / "cert-chain.pem")

    env = proxyless.env(kind, dict(os.environ, GRPC_XDS_BOOTSTRAP=str(out)))
    env.pop("GRPC_XDS_BOOTSTRAP_CONFIG", None)
    client = subprocess.Popen(
        proxyless.command(kind, TARGET, "--xds-creds", "--count", "4", "--timeout", "20"),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        stdout, stderr = client.communicate(timeout=60)
    finally:
        client.kill()
    assert client.returncode == 0, f"{kind} client failed:\n{stderr}\nmeshd:\n{sandbox.log()[-3000:]}"
    assert stdout.split() == ["loop-0"] * 4

    # The client has exited; its last state is what syncz recorded while it ran, so check a live one.
    live = subprocess.Popen(
        proxyless.command(kind, TARGET, "--xds-creds", "--count", "1", "--forever", "--timeout", "20"),
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        def synced():
            rows = json.loads(meshctl(sandbox, "proxy-status", "-o", "json"))
            row = next((r for r in rows if r["name"] == PROXY), None)
            ok = row and all(row["status"].get(t) == "SYNCED" for t in ("CDS", "EDS", "LDS", "RDS"))
            return row if ok and not row["last_nack"] else None

        row = eventually("the proxy SYNCED on every type", synced, timeout=30, interval=0.3)
        assert (row["cluster"], row["network"]) == ("cluster1", "network1")
        line = next(l for l in meshctl(sandbox, "proxy-status").splitlines() if l.startswith(PROXY))
        assert line.split()[1:] == ["cluster1", "network1"] + ["SYNCED"] * 4, line
    finally:
        live.kill()
        live.wait()
