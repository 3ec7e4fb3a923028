"""The real istiod (``pilot-discovery discovery``) on loopback beside meshd, for the xDS diff tests (issue 28
§2). The binary comes from ``$PILOT_DISCOVERY`` or tests/.cache/bin/pilot-discovery, which
tests/peers/istiod/build.sh builds from the pinned ``istio.io/istio`` Go module.

istiod runs out of cluster against a :class:`realk8s.RealCluster`'s admin kubeconfig: every listener on a
free loopback port, its own working folder (it reads ``./etc/istio/config/mesh`` and
``./var/lib/istio/inject`` relative to it; the mesh config and meshNetworks are passed as files), the
features that need what this cluster does not have turned off (Gateway API and its controllers, status
writing, the injection and validation webhooks' configuration patching).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from realk8s import CACHE_BIN, free_port

# What istiod must not try on this cluster: no Gateway API CRDs, no webhooks to patch, nobody to read status.
ENV = {
    "POD_NAMESPACE": "istio-system",
    "POD_NAME": "istiod-test",
    "REVISION": "default",
    "JWT_POLICY": "third-party-jwt",
    "PILOT_ENABLE_GATEWAY_API": "false",
    "PILOT_ENABLE_ALPHA_GATEWAY_API": "false",
    "PILOT_ENABLE_GATEWAY_API_STATUS": "false",
    "PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER": "false",
    "PILOT_ENABLE_GATEWAY_API_GATEWAYCLASS_CONTROLLER": "false",
    "ENABLE_GATEWAY_API_INFERENCE_EXTENSION": "false",
    "PILOT_ENABLE_STATUS": "false",
    "PILOT_ENABLE_ANALYSIS": "false",
    "INJECTION_WEBHOOK_CONFIG_NAME": "",
    "VALIDATION_WEBHOOK_CONFIG_NAME": "",
    "ISTIOD_CUSTOM_HOST": "istiod.istio-system.svc",
    # Push as soon as meshd does (meshd's default --debounce-after is 100ms).
    "PILOT_DEBOUNCE_AFTER": "100ms",
    "PILOT_DEBOUNCE_MAX": "1s",
    "PILOT_ENABLE_XDS_CACHE": "true",
}


def binary() -> Path | None:
    path = Path(os.environ.get("PILOT_DISCOVERY") or CACHE_BIN / "pilot-discovery")
    return path if path.is_file() and os.access(path, os.X_OK) else None


def skip_unless_available():
    import pytest

    if binary() is None:
        pytest.skip("no pilot-discovery (set PILOT_DISCOVERY or run tests/peers/istiod/build.sh, which needs Go; "
                    "tests/run.sh builds it only with MESHD_ISTIOD=1 in CI): the istiod diff tests skip")


class Istiod:
    """``pilot-discovery discovery`` against ``kubeconfig``; ``start()`` waits for ``/ready``.

    ``grpc`` is the plaintext xDS port (istiod's 15010), ``http`` serves ``/ready`` and ``/debug``."""

    def __init__(self, root: Path, kubeconfig: Path, cluster_id: str = "cluster1", mesh_config: str = "",
                 mesh_networks: str = "", env: dict | None = None, args: list[str] = ()):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.bin = binary()
        self.kubeconfig = kubeconfig
        self.cluster_id = cluster_id
        self.grpc, self.secure, self.http, self.https = free_port(), free_port(), free_port(), free_port()
        self.monitoring, self.ctrlz = free_port(), free_port()
        self.mesh = self.root / "mesh.yaml"
        self.networks = self.root / "meshNetworks.yaml"
        self.mesh.write_text(mesh_config or "{}\n")
        self.networks.write_text(mesh_networks or "networks: {}\n")
        self.env = {**ENV, "CLUSTER_ID": cluster_id, **(env or {})}
        self.args = list(args)
        self.log_path = self.root / "istiod.log"
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        return [
            str(self.bin), "discovery",
            "--kubeconfig", str(self.kubeconfig),
            "--clusterID", self.cluster_id,
            "--meshConfig", str(self.mesh), "--networksConfig", str(self.networks),
            "--grpcAddr", f"127.0.0.1:{self.grpc}",
            "--secureGRPCAddr", f"127.0.0.1:{self.secure}",
            "--httpAddr", f"127.0.0.1:{self.http}",
            "--httpsAddr", f"127.0.0.1:{self.https}",
            "--monitoringAddr", f"127.0.0.1:{self.monitoring}",
            "--ctrlz_address", "127.0.0.1", "--ctrlz_port", str(self.ctrlz),
            "--shutdownDuration", "1s",
            "--log_output_level", "default:info",
            *self.args,
        ]

    def start(self, timeout: float = 120) -> "Istiod":
        if self.bin is None:
            raise RuntimeError("no pilot-discovery (tests/peers/istiod/build.sh)")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        env.update(self.env)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command(), cwd=self.root, env=env, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"istiod exited {self.proc.returncode} before /ready:\n{self.log()}")
            if self.get("/ready")[0] == 200:
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"istiod not ready after {timeout}s:\n{self.log()}")

    def __enter__(self) -> "Istiod":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port or self.http}{path}", timeout=5) as r:
                return r.status, r.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except OSError as e:
            return 0, str(e)

    def log(self, tail: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-tail:] if self.log_path.exists() else ""

    def stop(self, timeout: float = 20) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
