#!/usr/bin/env python3
"""meshd vs istiod on one machine, in one sitting (issue 28 §2, the performance half).

Each run gets a fresh real API server (etcd + kube-apiserver from tests/.cache/bin, started by
tests/e2e/realk8s.py, no kube-controller-manager so no EndpointSlice controller competes with the
hand-written slices) with the Istio CRDs installed, then `meshctl bench --kubeconfig` writes the same
world to it (S services × E endpoints, a Pod per endpoint with its status, one EndpointSlice per
service), dials the same delta ADS client fleet at the control plane, churns endpoints and reports.
meshd is started by meshctl itself; istiod (`pilot-discovery discovery`) by this script on the line
meshctl prints once the world is written, through a wrapper whose PID is known up front so the report
has istiod's RSS and CPU too. Runs alternate (meshd, istiod, meshd, istiod, ...), every one uncached
(a new API server, a new control plane process).

Why a real API server and not kube-sim: istiod does not reach ready on kube-sim (docs/benchmarks.md,
"meshd vs istiod, one machine", says what it lacks).

    tests/.venv/bin/python tests/bench/istiod_vs_meshd.py --services 100 --endpoints 10 --clients 100 \\
        --churn 5 --duration 20s --pairs 2 --out bench-vs-istiod

Binaries: --meshctl (its sibling meshd is the meshd measured, or --meshd), --pilot-discovery
(default tests/.cache/bin/pilot-discovery). Everything runs under `nice -n $NICE` (default 5) alike.
Writes <out>/<n>-<server>/report.json (meshctl's) and <out>/summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import istiod as istiod_fixture  # noqa: E402
from realk8s import CACHE_BIN, RealCluster, free_port  # noqa: E402


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def istiod_wrapper(root: Path, bin: Path, kubeconfig: Path, trigger: Path, nice: int) -> tuple[subprocess.Popen, int]:
    """A shell that waits for ``trigger`` and then execs istiod: its PID is istiod's from the start."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "mesh.yaml").write_text("{}\n")
    (root / "meshNetworks.yaml").write_text("networks: {}\n")
    grpc = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env.update(istiod_fixture.ENV)
    # The same quiet period and ceiling as meshd's defaults (--debounce-after 100ms, --debounce-max 10s).
    env.update({"CLUSTER_ID": "cluster-0", "PILOT_DEBOUNCE_AFTER": "100ms", "PILOT_DEBOUNCE_MAX": "10s"})
    args = [
        str(bin), "discovery", "--kubeconfig", str(kubeconfig), "--clusterID", "cluster-0",
        "--meshConfig", str(root / "mesh.yaml"), "--networksConfig", str(root / "meshNetworks.yaml"),
        "--grpcAddr", f"127.0.0.1:{grpc}", "--secureGRPCAddr", f"127.0.0.1:{free_port()}",
        "--httpAddr", f"127.0.0.1:{free_port()}", "--httpsAddr", f"127.0.0.1:{free_port()}",
        "--monitoringAddr", f"127.0.0.1:{free_port()}", "--ctrlz_address", "127.0.0.1",
        "--ctrlz_port", str(free_port()), "--shutdownDuration", "1s", "--log_output_level", "default:warn",
    ]
    script = f'until [ -e "{trigger}" ]; do sleep 0.05; done; exec "$@"'
    log = open(root / "istiod.log", "wb")
    proc = subprocess.Popen(["nice", "-n", str(nice), "sh", "-c", script, "istiod", *args], cwd=root, env=env,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    return proc, grpc


def run_one(n: int, server: str, a: argparse.Namespace) -> dict:
    out = a.out / f"{n:02d}-{server}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    k8s = RealCluster(out / "k8s", name="cluster-0", controller_manager=False)
    k8s.start()
    istiod = None
    try:
        k8s.install_crds()
        bench = [
            "nice", "-n", str(a.nice), str(a.meshctl), "bench", "--kubeconfig", str(k8s.kubeconfig),
            "--clusters", "1", "--services", str(a.services), "--endpoints", str(a.endpoints),
            "--clients", str(a.clients), "--connect-rate", str(a.connect_rate), "--churn", str(a.churn),
            "--duration", a.duration, "--configure-timeout", a.configure_timeout, "--out", str(out / "bench"),
        ]
        if server == "meshd":
            bench += ["--meshd-bin", str(a.meshd)]
        else:
            trigger = out / "start-istiod"
            istiod, grpc = istiod_wrapper(out / "istiod", a.pilot_discovery, k8s.kubeconfig, trigger, a.nice)
            bench += ["--target", f"127.0.0.1:{grpc}", "--target-pid", str(istiod.pid)]
        load_start = loadavg()
        started = time.monotonic()
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")}
        proc = subprocess.Popen(bench, stdout=subprocess.PIPE, stderr=open(out / "meshctl.log", "wb"),
                                text=True, env=env)
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if istiod is not None and "start the control plane" in line:
                trigger.touch()
        proc.wait()
        (out / "meshctl.out").write_text("".join(lines))
        report_path = out / "bench" / "report.json"
        if proc.returncode != 0 or not report_path.exists():
            raise RuntimeError(f"meshctl bench exited {proc.returncode}: {''.join(lines)[-3000:]}\n"
                               f"{(out / 'meshctl.log').read_text()[-3000:]}")
        report = json.loads(report_path.read_text())
        return {"run": n, "server": server, "load_start": load_start, "load_end": loadavg(),
                "wall_s": time.monotonic() - started, "out": str(out), "report": report,
                "summary": "".join(lines)}
    finally:
        if istiod is not None and istiod.poll() is None:
            os.killpg(istiod.pid, signal.SIGTERM)
            try:
                istiod.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(istiod.pid, signal.SIGKILL)
        k8s.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--services", type=int, default=100)
    p.add_argument("--endpoints", type=int, default=10)
    p.add_argument("--clients", type=int, default=100)
    p.add_argument("--connect-rate", type=float, default=25)
    p.add_argument("--churn", type=float, default=5)
    p.add_argument("--duration", default="20s")
    p.add_argument("--configure-timeout", default="180s")
    p.add_argument("--pairs", type=int, default=2, help="meshd/istiod pairs, alternating")
    p.add_argument("--order", default="meshd,istiod", help="which goes first in each pair")
    p.add_argument("--nice", type=int, default=5)
    p.add_argument("--meshctl", type=Path, default=REPO / "target" / "release" / "meshctl")
    p.add_argument("--meshd", type=Path, default=None)
    p.add_argument("--pilot-discovery", type=Path, default=CACHE_BIN / "pilot-discovery")
    p.add_argument("--out", type=Path, default=Path("bench-vs-istiod"))
    a = p.parse_args()
    a.meshd = a.meshd or a.meshctl.with_name("meshd")
    a.out = a.out.resolve()
    a.out.mkdir(parents=True, exist_ok=True)
    results = []
    order = a.order.split(",")
    n = 0
    for _ in range(a.pairs):
        for server in order:
            n += 1
            print(f"run {n}: {server} (load {loadavg():.2f})", flush=True)
            r = run_one(n, server, a)
            print(r["summary"], flush=True)
            results.append({k: v for k, v in r.items() if k != "summary"})
            (a.out / "summary.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(a).items()},
                                                            "runs": results}, indent=2))


if __name__ == "__main__":
    main()
