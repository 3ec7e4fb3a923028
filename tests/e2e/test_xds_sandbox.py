"""Real proxyless gRPC clients against real meshd on the sandbox: endpoints written to the simulated
cluster with kubectl reach grpcio, @grpc/grpc-js-xds and grpc-go (proxyless.py) through the whole
pipeline (registry → aggregate → ADS), on 15010 (plaintext) and on 15012 (mTLS with the sandbox's mesh
certificates)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import proxyless
from meshd_proc import Meshd, eventually
from xdsharness import EchoBackend

HERE = Path(__file__).resolve().parent
HOST = "e2e-echo.sample.svc.cluster.local"
TARGET = f"xds:///{HOST}:7070"
SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: e2e-echo, namespace: sample}
spec:
  ports: [{name: grpc, port: 7070, appProtocol: grpc}]
"""


def slice_for(name: str, backend: EchoBackend) -> str:
    return json.dumps({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"e2e-echo-{name}", "namespace": "sample",
                     "labels": {"kubernetes.io/service-name": "e2e-echo"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [backend.host], "conditions": {"ready": True}}],
        "ports": [{"name": "grpc", "port": backend.port, "protocol": "TCP"}],
    })


def bootstrap(server_uri: str, creds: dict) -> str:
    return json.dumps({
        "xds_servers": [{"server_uri": server_uri, "channel_creds": [creds], "server_features": ["xds_v3"]}],
        "node": {
            "id": "sidecar~127.0.0.1~e2e-client.sample~sample.svc.cluster.local",
            "locality": {},
            # On cluster1's network: an unlabelled client would reach network1's pods only through its
            # east-west gateway (istiod 1.30 forceGateway, docs/multi-network.md).
            "metadata": {"GENERATOR": "grpc", "NAMESPACE": "sample", "CLUSTER_ID": "cluster1",
                         "NETWORK": "network1"},
        },
    })


def run_grpcio(boot: str, count: int = 8, timeout: float = 10, kind: str = "grpcio") -> subprocess.CompletedProcess:
    env = proxyless.env(kind, dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=boot))
    return subprocess.run(proxyless.command(kind, TARGET, "--count", str(count), "--timeout", str(timeout)),
                          env=env, capture_output=True, text=True, timeout=60)


def grpcio(boot: str, count: int = 8, kind: str = "grpcio") -> set[str]:
    out = run_grpcio(boot, count, kind=kind)
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    m = Meshd(tmp_path_factory.mktemp("xds-sandbox"))
    a = EchoBackend("pod-a", host="127.0.0.2")
    b = EchoBackend("pod-b", host="127.0.0.3")
    m.kubectl("cluster1", "apply", "-f", "-", stdin=SERVICE)
    m.kubectl("cluster1", "apply", "-f", "-", stdin=slice_for("a", a))
    eventually("e2e-echo in registryz", lambda: any(s["hostname"] == HOST for s in m.json("/debug/registryz")))
    yield m, a, b
    a.stop()
    b.stop()
    assert m.stop() == 0, m.log()


def plaintext(m: Meshd) -> str:
    return bootstrap(f"127.0.0.1:{m.grpc}", {"type": "insecure"})


def test_grpcio_on_15010_follows_endpoint_changes_made_with_kubectl(mesh):
    m, a, b = mesh
    assert grpcio(plaintext(m)) == {"pod-a"}
    m.kubectl("cluster1", "apply", "-f", "-", stdin=slice_for("b", b))
    eventually("traffic to both pods", lambda: grpcio(plaintext(m)) == {"pod-a", "pod-b"}, timeout=30)
    m.kubectl("cluster1", "delete", "endpointslice", "-n", "sample", "e2e-echo-a")
    eventually("traffic to pod-b only", lambda: grpcio(plaintext(m)) == {"pod-b"}, timeout=30)
    m.kubectl("cluster1", "apply", "-f", "-", stdin=slice_for("a", a))
    eventually("pod-a back", lambda: grpcio(plaintext(m)) == {"pod-a", "pod-b"}, timeout=30)


def mesh_tls(m: Meshd, with_identity: bool = True) -> dict:
    certs = m.state / "certs"
    config = {"ca_certificate_file": str(certs / "root-cert.pem")}
    if with_identity:
        config |= {"certificate_file": str(certs / "cert-chain.pem"), "private_key_file": str(certs / "key.pem")}
    return {"type": "tls", "config": config}


# grpc-js-xds 1.14 knows only the `google_default` and `insecure` xDS channel credentials (its
# xds-bootstrap.js): the bootstrap's `tls` entry (gRFC A65) makes it refuse the bootstrap.
NO_TLS_XDS_CREDS = {"grpc-js": "@grpc/grpc-js-xds 1.14 supports no `tls` channel_creds for the xDS server"}


@pytest.mark.parametrize("kind", proxyless.params(unsupported=NO_TLS_XDS_CREDS))
def test_clients_on_15012_with_mesh_mtls(mesh, kind):
    m, _, _ = mesh
    got = grpcio(bootstrap(f"localhost:{m.secure}", mesh_tls(m)), kind=kind)
    assert got and got <= {"pod-a", "pod-b"}, got


@pytest.mark.parametrize("kind", proxyless.params(unsupported=NO_TLS_XDS_CREDS))
def test_15012_refuses_a_client_without_a_mesh_identity(mesh, kind):
    m, _, _ = mesh
    out = run_grpcio(bootstrap(f"localhost:{m.secure}", mesh_tls(m, with_identity=False)), count=1, timeout=3,
                     kind=kind)
    assert out.returncode != 0, out.stdout


@pytest.mark.parametrize("kind", proxyless.params("grpc-js", "grpc-go"))
def test_other_clients_on_15010(mesh, kind):
    m, _, _ = mesh
    got = grpcio(plaintext(m), kind=kind)
    assert got and got <= {"pod-a", "pod-b"}, got


MTLS_HOST = "e2e-mtls.sample.svc.cluster.local"
MTLS_OBJECTS = """
apiVersion: v1
kind: Pod
metadata:
  name: e2e-mtls-0
  namespace: sample
  labels: {app: e2e-mtls, security.istio.io/tlsMode: istio}
spec:
  serviceAccountName: default
  containers: [{name: app, image: echo}]
---
apiVersion: v1
kind: Service
metadata: {name: e2e-mtls, namespace: sample}
spec:
  selector: {app: e2e-mtls}
  ports: [{name: grpc, port: 7070, appProtocol: grpc}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: e2e-mtls, namespace: sample}
spec:
  host: e2e-mtls
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
"""


@pytest.mark.parametrize("kind", proxyless.params())
def test_workload_mtls_between_client_and_backend_with_mesh_certificates(mesh, tmp_path, kind):
    """A backend serving TLS with a mesh workload certificate (and requiring one), a pod labelled
    `tlsMode: istio` and a DestinationRule saying ISTIO_MUTUAL (proxyless gRPC gets no auto-mTLS, as
    with istiod): each client with xDS credentials gets the cluster's UpstreamTlsContext from meshd and
    does mTLS with certificates from meshd's CA; without xDS credentials the same call fails."""
    import grpc

    m, _, _ = mesh
    certs = m.state / "certs"
    root, chain, key = ((certs / f).read_bytes() for f in ("root-cert.pem", "cert-chain.pem", "key.pem"))
    backend = EchoBackend("pod-mtls", host="127.0.0.4", server_credentials=grpc.ssl_server_credentials(
        [(key, chain)], root_certificates=root, require_client_auth=True))
    try:
        m.kubectl("cluster1", "apply", "-f", "-", stdin=MTLS_OBJECTS)
        m.kubectl("cluster1", "patch", "pod", "-n", "sample", "e2e-mtls-0", "--subresource=status",
                  "--type=merge", "-p", json.dumps({"status": {
                      "phase": "Running", "podIP": "127.0.0.4", "podIPs": [{"ip": "127.0.0.4"}],
                      "conditions": [{"type": "Ready", "status": "True"}]}}))
        m.kubectl("cluster1", "apply", "-f", "-", stdin=json.dumps({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "e2e-mtls-x", "namespace": "sample",
                         "labels": {"kubernetes.io/service-name": "e2e-mtls"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.4"], "conditions": {"ready": True},
                           "targetRef": {"kind": "Pod", "name": "e2e-mtls-0", "namespace": "sample"}}],
            "ports": [{"name": "grpc", "port": backend.port, "protocol": "TCP"}],
        }))
        eventually("e2e-mtls in registryz",
                   lambda: any(s["hostname"] == MTLS_HOST for s in m.json("/debug/registryz")))
        boot = json.loads(plaintext(m))
        provider = {"plugin_name": "file_watcher", "config": {
            "certificate_file": str(certs / "cert-chain.pem"), "private_key_file": str(certs / "key.pem"),
            "ca_certificate_file": str(certs / "root-cert.pem"), "refresh_interval": "600s"}}
        boot["certificate_providers"] = {"default": provider, "ROOTCA": provider}
        env = proxyless.env(kind, dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=json.dumps(boot)))
        target = f"xds:///{MTLS_HOST}:7070"

        def call(*extra: str) -> subprocess.CompletedProcess:
            return subprocess.run(proxyless.command(kind, target, "--count", "2", "--timeout", "5", *extra),
                                  env=env, capture_output=True, text=True, timeout=60)

        ok = eventually("an mTLS call through xDS credentials",
                        lambda: (r := call("--xds-creds")).returncode == 0 and r, timeout=30)
        assert set(ok.stdout.split()) == {"pod-mtls"}
        assert call().returncode != 0, "plaintext to a TLS-only backend must fail: the TLS came from xDS"
    finally:
        backend.stop()
