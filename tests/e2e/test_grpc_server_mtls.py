"""A real xDS-enabled grpcio server (gRFC A36) takes its security from meshd's server listener
(``xds.istio.io/grpc/lds/inbound/<ip>:<port>``), following PeerAuthentication (issue 29).

The sandbox's one cluster has a Service ``secure`` in ``srv`` whose pod is the grpcio server on
127.0.0.61 (tests/e2e/grpc_xds_server.py, mesh certificates from the bootstrap's file_watcher
providers). A plaintext client and an mTLS client (xDS credentials with a DestinationRule saying
ISTIO_MUTUAL, as proxyless gRPC needs) call it while the namespace's PeerAuthentication changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import proxyless
from meshd_proc import Meshd, eventually, free_port, namespace, topology

HERE = Path(__file__).resolve().parent
NS = "srv"
IP = "127.0.0.61"
TARGET = f"xds:///secure.{NS}.svc.cluster.local:7070"


def bootstrap(m: Meshd, node_id: str, labels: dict | None = None) -> str:
    return proxyless.bootstrap(m.grpc, m.state / "certs", node_id, NS, "cluster1", labels)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grpc-server")
    port = free_port()
    objects = [namespace("istio-system"), namespace(NS),
               {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "secure", "namespace": NS},
                "spec": {"selector": {"app": "secure"},
                         "ports": [{"name": "grpc", "port": 7070, "targetPort": "grpc", "appProtocol": "grpc"}]}},
               {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "secure-0", "namespace": NS,
                                                                "labels": {"app": "secure"}},
                "spec": {"containers": [{"name": "app", "image": "echo",
                                         "ports": [{"name": "grpc", "containerPort": port}]}]},
                "status": {"phase": "Running", "podIP": IP, "podIPs": [{"ip": IP}],
                           "conditions": [{"type": "Ready", "status": "True"}]}}]
    m = Meshd(tmp / "state", ["--sandbox", str(topology(tmp / "clusters", {"cluster1": objects}))])
    env = dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=bootstrap(
        m, f"sidecar~{IP}~secure-0.{NS}~{NS}.svc.cluster.local", {"app": "secure"}), GRPC_VERBOSITY="ERROR")
    server = subprocess.Popen([sys.executable, str(HERE / "grpc_xds_server.py"), "--address", f"{IP}:{port}",
                               "--name", "secure-0"], env=env, stdout=subprocess.PIPE,
                              stderr=open(tmp / "server.log", "w"), text=True)
    assert server.stdout.readline().strip() == "serving", (tmp / "server.log").read_text()
    try:
        yield m
    finally:
        server.terminate()
        server.wait(timeout=20)
        assert m.stop() == 0, m.log()


def call(m: Meshd, mtls: bool) -> str:
    """One RPC from a fresh client: the answering server's name, or the error."""
    env = dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=bootstrap(m, f"sidecar~127.0.0.9~client.{NS}~{NS}.svc.cluster.local"),
               GRPC_VERBOSITY="NONE")
    args = [sys.executable, str(HERE / "grpc_xds_client.py"), TARGET, "--count", "1", "--timeout", "3"]
    out = subprocess.run(args + (["--xds-creds"] if mtls else []), env=env, capture_output=True, text=True, timeout=60)
    return out.stdout.strip() if out.returncode == 0 else f"error: {out.stderr.strip()[-200:]}"


def apply(m: Meshd, *objects: dict) -> None:
    m.kubectl("cluster1", "apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))


def peer_authentication(mode: str) -> dict:
    return {"apiVersion": "security.istio.io/v1", "kind": "PeerAuthentication",
            "metadata": {"name": "default", "namespace": NS}, "spec": {"mtls": {"mode": mode}}}


ISTIO_MUTUAL = {"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
                "metadata": {"name": "secure", "namespace": NS},
                "spec": {"host": "secure", "trafficPolicy": {"tls": {"mode": "ISTIO_MUTUAL"}}}}


def test_permissive_without_the_tls_label_serves_plaintext(mesh):
    # No PeerAuthentication: PERMISSIVE; the pod has no tlsMode label, so clients send plaintext.
    assert call(mesh, mtls=False) == "secure-0"


def test_strict_refuses_plaintext_and_takes_mesh_mtls(mesh):
    apply(mesh, peer_authentication("STRICT"), ISTIO_MUTUAL)
    eventually("plaintext refused under STRICT", lambda: call(mesh, mtls=False).startswith("error"), timeout=30)
    assert call(mesh, mtls=True) == "secure-0"


def test_disable_serves_plaintext_again(mesh):
    apply(mesh, peer_authentication("DISABLE"))
    mesh.kubectl("cluster1", "delete", "-n", NS, "destinationrule", "secure")
    eventually("plaintext served under DISABLE", lambda: call(mesh, mtls=False) == "secure-0", timeout=30)
