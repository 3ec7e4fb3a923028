"""Runs the real ``meshd`` binary for end-to-end tests: loopback ports, a private state folder, readiness
wait, and a graceful stop. Binaries come from ``MESHD_BIN_DIR`` (default ``target/debug``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("MESHD_BIN_DIR", REPO / "target" / "debug"))
KUBECTL = os.environ.get("KUBECTL", "kubectl")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Meshd:
    """A running meshd. ``state`` holds the sandbox kubeconfigs (``<cluster>/kubeconfig``) and certs."""

    def __init__(self, state: Path, args: list[str] = (), ready_timeout: float | None = 60, env: dict | None = None,
                 admin_host: str = "127.0.0.1"):
        self.state = state
        state.mkdir(parents=True, exist_ok=True)
        self.http, self.monitoring = free_port(), free_port()
        self.grpc, self.secure = free_port(), free_port()
        self.log_path = state / "meshd.log"
        self.out_path = state / "meshd.out"
        env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"} | (env or {})
        with open(self.log_path, "wb") as log, open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    str(BIN_DIR / "meshd"),
                    "--state-dir", str(state),
                    "--http-addr", f"127.0.0.1:{self.http}",
                    "--monitoring-addr", f"{admin_host}:{self.monitoring}",
                    "--grpc-addr", f"127.0.0.1:{self.grpc}",
                    "--secure-grpc-addr", f"127.0.0.1:{self.secure}",
                    *args,
                ],
                stdout=out,
                stderr=log,
                env=env,
            )
        if ready_timeout is not None:  # None: the caller watches the start-up itself
            self.wait_ready(ready_timeout)

    def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port or self.monitoring}{path}", timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def json(self, path: str):
        status, body = self.get(path)
        assert status == 200, f"{path}: {status} {body}"
        return json.loads(body)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"meshd exited {self.proc.returncode}:\n{self.log()}")
            try:
                if self.get("/ready", self.http)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.kill()
        raise AssertionError(f"meshd not ready after {timeout}s:\n{self.log()}")

    def kubeconfig(self, cluster: str) -> Path:
        return self.state / cluster / "kubeconfig"

    def kubectl(self, cluster: str, *args: str, stdin: str | None = None) -> str:
        out = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig(cluster)), *args],
            input=stdin, capture_output=True, text=True, timeout=60,
        )
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
        return out.stdout

    def rss_kib(self) -> int:
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stdout(self) -> str:
        return self.out_path.read_text(errors="replace")

    def stop(self, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=timeout)
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def eventually(what: str, fn, timeout: float = 20, interval: float = 0.1):
    """Polls ``fn`` until it returns a truthy value; fails naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


class KubeApi:
    """A simulated cluster's API as its admin (server, CA and token from a kubeconfig), over HTTPS on
    loopback. Also drives the simulator's ``/sandbox/v1/faults`` switch."""

    def __init__(self, kubeconfig: Path):
        import base64
        import ssl

        import yaml

        kc = yaml.safe_load(Path(kubeconfig).read_text())
        cluster = kc["clusters"][0]["cluster"]
        self.server = cluster["server"]
        self.token = kc["users"][0]["user"]["token"]
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self.ssl = ssl.create_default_context(cadata=ca)
        self.ssl.check_hostname = False

    def request(self, method: str, path: str, body=None, timeout: float = 5) -> tuple[int, dict]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ssl) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    @staticmethod
    def path(obj: dict, named: bool = True) -> str:
        api = obj["apiVersion"]
        base = f"/api/{api}" if "/" not in api else f"/apis/{api}"
        plural = {"Service": "services", "EndpointSlice": "endpointslices", "Secret": "secrets",
                  "Pod": "pods", "Namespace": "namespaces",
                  "DestinationRule": "destinationrules"}[obj["kind"]]
        ns = obj["metadata"].get("namespace")
        p = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
        return f"{p}/{obj['metadata']['name']}" if named else p

    def apply(self, obj: dict) -> None:
        """Creates or replaces ``obj`` (unconditional update)."""
        status, body = self.request("PUT", self.path(obj), obj)
        if status == 404:
            status, body = self.request("POST", self.path(obj, named=False), obj)
        assert status in (200, 201), f"apply {self.path(obj)}: {status} {body}"

    def delete(self, obj: dict) -> None:
        status, body = self.request("DELETE", self.path(obj))
        assert status in (200, 202, 404), f"delete {self.path(obj)}: {status} {body}"

    def get(self, path: str) -> dict:
        status, body = self.request("GET", path)
        assert status == 200, f"GET {path}: {status} {body}"
        return body

    def fault(self, **req) -> dict:
        """``/sandbox/v1/faults``: e.g. ``mode="error", status=500`` or ``compact=True, dropWatches=True``."""
        status, body = self.request("POST", "/sandbox/v1/faults", req)
        assert status == 200, f"fault {req}: {status} {body}"
        return body


def topology(root: Path, clusters: dict[str, list[dict]]) -> Path:
    """Writes a ``--sandbox`` folder: one sub-folder per cluster (first = primary) with its objects."""
    for i, (name, objects) in enumerate(clusters.items()):
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "00-objects.yaml").write_text("\n---\n".join(json.dumps(o) for o in objects))
    return root


def namespace(name: str, **labels) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def service(name: str, ns: str, port: int = 7070, target: int = 17070) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"app": name},
                     "ports": [{"name": "grpc", "port": port, "targetPort": target, "appProtocol": "grpc"}]}}


def endpoint_slice(svc: str, ns: str, addresses, port: int = 17070, suffix: str = "a") -> dict:
    """A slice of ready endpoints (no target pods) for ``svc``."""
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{svc}-{suffix}", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4",
            "ports": [{"name": "grpc", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in sorted(addresses)]}
