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

    def __init__(self, state: Path, args: list[str] = (), ready_timeout: float = 60, env: dict | None = None,
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
