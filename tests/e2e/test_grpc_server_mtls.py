"""A real xDS-enabled grpcio server (gRFC A36) takes its security from meshd's server listener
(``xds.istio.io/grpc/lds/inbound/<ip>:<port>``), following PeerAuthentication (issue 29).

The sandbox's one cluster has Services ``secure`` and ``labelled`` in ``srv``, each with one pod that is
a grpcio server (tests/e2e/grpc_xds_server.py, mesh certificates from the bootstrap's file_watcher
providers): ``secure-0`` on 127.0.0.61 without the ``security.istio.io/tlsMode`` label, ``labelled-0``
on 127.0.0.62 with it. A plaintext client and an xDS-credentials client (mTLS when a DestinationRule
says ISTIO_MUTUAL, as proxyless gRPC needs; plaintext otherwise) call them while the namespace's
PeerAuthentication changes."""

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
SERVERS = {"secure": ("127.0.0.61", {}), "labelled": ("127.0.0.62", {"security.istio.io/tlsMode": "istio"})}


def bootstrap(m: Meshd, node_id: str, labels: dict | None = None) -> str:
    return proxyless.bootstrap(m.grpc, m.state / "certs", node_id, NS, "cluster1", labels)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grpc-server")
    ports = {app: free_port() for app in SERVERS}
    objects = [namespace("istio-system"), namespace(NS)]
    for app, (ip, extra) in SERVERS.items():
        objects += [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": app, "namespace": NS},
                     "spec": {"selector": {"app": app}, "ports": [
                         {"name": "grpc", "port": 7070, "targetPort": "grpc", "appProtocol": "grpc"}]}},
                    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{app}-0", "namespace": NS,
                                                                     "labels": {"app": app, **extra}},
                     "spec": {"containers": [{"name": "app", "image": "echo",
                                              "ports": [{"name": "grpc", "containerPort": ports[app]}]}]},
                     "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                                "conditions": [{"type": "Ready", "status": "True"}]}}]
    m = Meshd(tmp / "state", ["--sandbox", str(topology(tmp / "clusters", {"cluster1": objects}))])
    servers = []
    for app, (ip, extra) in SERVERS.items():
        env = dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=bootstrap(
            m, f"sidecar~{ip}~{app}-0.{NS}~{NS}.svc.cluster.local", {"app": app, **extra}), GRPC_VERBOSITY="ERROR")
        servers.append(subprocess.Popen([sys.executable, str(HERE / "grpc_xds_server.py"), "--address",
                                         f"{ip}:{ports[app]}", "--name", f"{app}-0"], env=env, stdout=subprocess.PIPE,
                                        stderr=open(tmp / f"{app}.log", "w"), text=True))
    for app, server in zip(SERVERS, servers):
        assert server.stdout.readline().strip() == "serving", (tmp / f"{app}.log").read_text()
    try:
        yield m
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=20)
        assert m.stop() == 0, m.log()


def call(m: Meshd, mtls: bool, app: str = "secure") -> str:
    """One RPC from a fresh client (xDS credentials when ``mtls``): the answering server's name, or the
    error."""
    env = dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=bootstrap(m, f"sidecar~127.0.0.9~client.{NS}~{NS}.svc.cluster.local"),
               GRPC_VERBOSITY="NONE")
    args = [sys.executable, str(HERE / "grpc_xds_client.py"), f"xds:///{app}.{NS}.svc.cluster.local:7070",
            "--count", "1", "--timeout", "3"]
    out = subprocess.run(args + (["--xds-creds"] if mtls else []), env=env, capture_output=True, text=True, timeout=60)
    return out.stdout.strip() if out.returncode == 0 else f"error: {out.stderr.strip()[-200:]}"


def apply(m: Meshd, *objects: dict) -> None:
    m.kubectl("cluster1", "apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in objects))


def peer_authentication(mode: str) -> dict:
    return {"apiVersion": "security.istio.io/v1", "kind": "PeerAuthentication",
            "metadata": {"name": "default", "namespace": NS}, "spec": {"mtls": {"mode": mode}}}


def istio_mutual(app: str) -> dict:
    return {"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": app, "namespace": NS},
            "spec": {"host": app, "trafficPolicy": {"tls": {"mode": "ISTIO_MUTUAL"}}}}


ISTIO_MUTUAL = istio_mutual("secure")


def test_permissive_without_the_tls_label_serves_plaintext(mesh):
    # No PeerAuthentication: PERMISSIVE; the pod has no tlsMode label, so clients send plaintext: one
    # without xDS credentials and one with them (no ISTIO_MUTUAL rule, so its CDS has no TLS) are served.
    assert call(mesh, mtls=False) == "secure-0"
    assert call(mesh, mtls=True) == "secure-0"


def test_permissive_with_the_tls_label_takes_mesh_mtls_only(mesh):
    # A gRPC server cannot take both on one port (its chain match cannot tell TLS from plaintext), so a
    # PERMISSIVE workload whose label tells clients to send mTLS takes mTLS only, as istiod's.
    apply(mesh, istio_mutual("labelled"))
    eventually("mTLS served under PERMISSIVE", lambda: call(mesh, mtls=True, app="labelled") == "labelled-0",
               timeout=30)
    assert call(mesh, mtls=False, app="labelled").startswith("error")


def test_strict_refuses_plaintext_and_takes_mesh_mtls(mesh):
    apply(mesh, peer_authentication("STRICT"), ISTIO_MUTUAL)
    eventually("plaintext refused under STRICT", lambda: call(mesh, mtls=False).startswith("error"), timeout=30)
    assert call(mesh, mtls=True) == "secure-0"


def test_disable_serves_plaintext_again(mesh):
    apply(mesh, peer_authentication("DISABLE"))
    mesh.kubectl("cluster1", "delete", "-n", NS, "destinationrule", "secure")
    eventually("plaintext served under DISABLE", lambda: call(mesh, mtls=False) == "secure-0", timeout=30)
