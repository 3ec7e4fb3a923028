"""What an operator sees when things are wrong: an unreachable config cluster is named (URL) in clusterz,
``meshctl remote-clusters`` and one log line per failure (no library duplicates, no colour codes, no Rust
``Debug`` dumps); meshctl pointed at the gRPC port says so; a missing file and a YAML syntax error are
reported once, by line and column."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from meshd_proc import BIN_DIR, REPO, Meshd, eventually, free_port


def meshctl(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN_DIR / "meshctl"), *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **(env or {})))


@pytest.fixture(scope="module")
def down(tmp_path_factory):
    """meshd on a `meshctl sandbox serve` primary, which is then stopped: the API server is unreachable."""
    root = tmp_path_factory.mktemp("diag")
    sandbox = subprocess.Popen(
        [str(BIN_DIR / "meshctl"), "sandbox", "serve", "--clusters", str(REPO / "clusters"),
         "--state-dir", str(root / "sandbox")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    report = json.loads(sandbox.stdout.readline())["clusters"]["cluster1"]
    m = Meshd(root / "meshd", args=["--kubeconfig", report["kubeconfig"], "--cluster-id", "cluster1"])
    sandbox.send_signal(signal.SIGTERM)
    sandbox.wait(timeout=20)
    m.remote_kubeconfig = root / "sandbox" / "cluster2" / "kubeconfig"
    yield m, report["url"]
    m.stop()


def test_an_unreachable_primary_is_named_everywhere(down):
    m, url = down
    row = eventually("the primary's error", lambda: next(
        (r for r in m.json("/debug/clusterz") if r["id"] == "cluster1" and r.get("lastError")), None))
    assert f"unreachable: API server {url}" in row["lastError"], row
    out = meshctl("--meshd", f"http://127.0.0.1:{m.monitoring}", "remote-clusters")
    assert out.returncode == 0, out.stderr
    assert "cluster1" in out.stdout and f"API server {url}" in out.stdout, out.stdout
    log = eventually("the warning", lambda: (lambda t: t if "watch failed" in t else None)(m.log()))
    assert "\x1b[" not in log
    assert f"unreachable: API server {url}" in log
    assert "kube_client" not in log, "the library's duplicate of meshd's warning is dropped"
    assert "Some(" not in log and "kind=Namespace " not in log, "values as an operator reads them"


def test_meshctl_on_the_grpc_port_says_what_answered(down):
    m, _ = down
    out = meshctl("--meshd", f"http://127.0.0.1:{m.grpc}", "remote-clusters")
    assert out.returncode != 0
    assert "did not answer as meshd's admin HTTP" in out.stderr and "monitoring port" in out.stderr, out.stderr


def test_config_file_errors_are_printed_once(tmp_path: Path):
    ports = [str(free_port()) for _ in range(4)]
    common = ["--state-dir", str(tmp_path / "state"), "--http-addr", f"127.0.0.1:{ports[0]}",
              "--monitoring-addr", f"127.0.0.1:{ports[1]}", "--grpc-addr", f"127.0.0.1:{ports[2]}",
              "--secure-grpc-addr", f"127.0.0.1:{ports[3]}"]
    missing = subprocess.run([str(BIN_DIR / "meshd"), *common, "--mesh-config", str(tmp_path / "nope.yaml")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0
    last = missing.stderr.strip().splitlines()[-1]
    assert "nope.yaml" in last and last.count("No such file or directory") == 1, last
    bad = tmp_path / "networks.yaml"
    bad.write_text("networks:\n  n1: {}\n - x\n")
    syntax = subprocess.run([str(BIN_DIR / "meshd"), *common, "--mesh-networks", str(bad)],
                            capture_output=True, text=True, timeout=60)
    last = syntax.stderr.strip().splitlines()[-1]
    assert syntax.returncode != 0 and "(line " in last and "?" not in last, last


def test_meshctl_logs_have_no_colour_and_no_library_duplicates(down):
    m, _ = down
    out = meshctl("add-cluster", "--name", "cluster2", "--kubeconfig", str(m.remote_kubeconfig), "--allow-loopback",
                  env={"RUST_LOG": "debug"})
    assert out.returncode != 0 and "DEBUG" in out.stderr, out.stderr
    assert "\x1b[" not in out.stderr, "no colour codes off a terminal"
    assert "failed with error" not in out.stderr, "kube's duplicate of the error meshctl prints"
    assert "(remote API server https://127.0.0.1:" in out.stderr.strip().splitlines()[-1], out.stderr
