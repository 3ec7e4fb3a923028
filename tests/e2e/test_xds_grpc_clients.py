"""Real proxyless gRPC clients (grpcio; @grpc/grpc-js-xds and grpc-go when available, see
proxyless.py) resolve a service through meshd's ADS server and reach echo backends on loopback;
changing the endpoints moves the traffic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import proxyless
from proxyless import node_modules  # noqa: F401 (kept for tests that import it from here)
from xdsharness import EchoBackend, Fixture, bootstrap, echo_service, wait_until

HERE = Path(__file__).resolve().parent
TARGET = "xds:///echo.default.svc.cluster.local:7070"


def run_grpcio(port: int, target=TARGET, count=6) -> list[str]:
    env = dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=bootstrap(port), GRPC_VERBOSITY="ERROR")
    out = subprocess.run(
        [sys.executable, str(HERE / "grpc_xds_client.py"), target, "--count", str(count)],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.fixture
def backends():
    bs = [EchoBackend("backend-a"), EchoBackend("backend-b")]
    yield bs
    for b in bs:
        b.stop()


def test_grpcio_resolves_and_traffic_follows_endpoints(tmp_path, backends):
    a, b = backends
    fixture = Fixture(tmp_path, {"services": [echo_service([("127.0.0.1", a.port)])]})
    try:
        assert set(run_grpcio(fixture.port)) == {"backend-a"}
        fixture.set_mesh({"services": [echo_service([("127.0.0.1", a.port), ("127.0.0.1", b.port)])]})
        assert set(run_grpcio(fixture.port, count=8)) == {"backend-a", "backend-b"}
        fixture.set_mesh({"services": [echo_service([("127.0.0.1", b.port)])]})
        assert set(run_grpcio(fixture.port)) == {"backend-b"}
        # Short names resolve in the client's namespace.
        assert set(run_grpcio(fixture.port, target="xds:///echo:7070")) == {"backend-b"}
    finally:
        fixture.close()


def test_grpcio_moves_traffic_within_one_channel(tmp_path, backends):
    """One long-lived client: endpoint pushes reach it without a reconnect."""
    a, b = backends
    fixture = Fixture(tmp_path, {"services": [echo_service([("127.0.0.1", a.port)])]})
    env = dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=bootstrap(fixture.port), GRPC_VERBOSITY="ERROR")
    code = (
        "import grpc,sys,time\n"
        f"ch=grpc.insecure_channel('{TARGET}'); call=ch.unary_unary('/echo.Echo/Call')\n"
        "print(call(b'x',timeout=10,wait_for_ready=True).decode(),flush=True)\n"
        "sys.stdin.readline()\n"
        "deadline=time.time()+10\n"
        "while time.time()<deadline:\n"
        "    r=call(b'x',timeout=10,wait_for_ready=True).decode()\n"
        "    if r=='backend-b': print(r,flush=True); break\n"
        "    time.sleep(0.1)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "backend-a"
        fixture.set_mesh({"services": [echo_service([("127.0.0.1", b.port)])]})
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "backend-b"
    finally:
        proc.kill()
        fixture.close()


@pytest.mark.parametrize("kind", proxyless.params("grpc-js", "grpc-go"))
def test_other_clients_resolve_and_traffic_follows_endpoints(tmp_path, backends, kind):
    """@grpc/grpc-js-xds and grpc-go, one fresh client per look."""
    a, b = backends
    fixture = Fixture(tmp_path, {"services": [echo_service([("127.0.0.1", a.port)])]})

    def run() -> set[str]:
        env = proxyless.env(kind, dict(os.environ, GRPC_XDS_BOOTSTRAP_CONFIG=bootstrap(fixture.port)))
        # Paced: round robin sends only to READY backends, and grpc-go's first RPCs can all go out
        # before the second connection is up.
        out = subprocess.run(proxyless.command(kind, TARGET, "--count", "12", "--interval", "0.05"),
                             env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return set(out.stdout.split())

    def serves(want: set[str]):
        # The fixture reloads its mesh file on a poll: a fresh client per look until it has.
        got = []
        wait_until(lambda: got.append(run()) or got[-1] == want, timeout=20)
        assert got[-1] == want, got

    try:
        serves({"backend-a"})
        fixture.set_mesh({"services": [echo_service([("127.0.0.1", a.port), ("127.0.0.1", b.port)])]})
        serves({"backend-a", "backend-b"})
        fixture.set_mesh({"services": [echo_service([("127.0.0.1", b.port)])]})
        serves({"backend-b"})
    finally:
        fixture.close()
