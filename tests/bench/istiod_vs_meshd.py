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
Writes <out>/<n>-<server>/bench/report.json (meshctl's) and <out>/summary.json;
`istiod_vs_meshd.py table <out>/summary.json ...` prints the markdown table of docs/benchmarks.md.
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


def istiod_wrapper(root: Path, bin: Path, kubeconfig: Path, trigger: Path, nice: int) -> tuple[subprocess.Popen, int, int]:
    """A shell that waits for ``trigger`` and then execs istiod: its PID is istiod's from the start."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "mesh.yaml").write_text("{}\n")
    (root / "meshNetworks.yaml").write_text("networks: {}\n")
    grpc, http = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env.update(istiod_fixture.ENV)
    # The same quiet period and ceiling as meshd's defaults (--debounce-after 100ms, --debounce-max 10s).
    env.update({"CLUSTER_ID": "cluster-0", "PILOT_DEBOUNCE_AFTER": "100ms", "PILOT_DEBOUNCE_MAX": "10s"})
    args = [
        str(bin), "discovery", "--kubeconfig", str(kubeconfig), "--clusterID", "cluster-0",
        "--meshConfig", str(root / "mesh.yaml"), "--networksConfig", str(root / "meshNetworks.yaml"),
        "--grpcAddr", f"127.0.0.1:{grpc}", "--secureGRPCAddr", f"127.0.0.1:{free_port()}",
        "--httpAddr", f"127.0.0.1:{http}", "--httpsAddr", f"127.0.0.1:{free_port()}",
        "--monitoringAddr", f"127.0.0.1:{free_port()}", "--ctrlz_address", "127.0.0.1",
        "--ctrlz_port", str(free_port()), "--shutdownDuration", "1s", "--log_output_level", "default:warn",
    ]
    script = f'until [ -e "{trigger}" ]; do sleep 0.05; done; exec "$@"'
    log = open(root / "istiod.log", "wb")
    proc = subprocess.Popen(["nice", "-n", str(nice), "sh", "-c", script, "istiod", *args], cwd=root, env=env,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    return proc, grpc, http


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
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")}
        if server in ("meshd", "meshd-quiet"):
            bench += ["--meshd-bin", str(a.meshd)]
            # meshd-quiet: endpoint changes debounced by istiod's quiet-period rule, not paced.
            env["MESHD_EDS_DEBOUNCE"] = "quiet" if server == "meshd-quiet" else "paced"
        else:
            trigger = out / "start-istiod"
            istiod, grpc, http = istiod_wrapper(out / "istiod", a.pilot_discovery, k8s.kubeconfig, trigger, a.nice)
            # Clients dial once istiod's /ready answers, as meshctl waits for the meshd it starts.
            bench += ["--target", f"127.0.0.1:{grpc}", "--target-pid", str(istiod.pid),
                      "--target-ready", f"127.0.0.1:{http}"]
        load_start = loadavg()
        started = time.monotonic()
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


ROWS = [
    # (label, getter, unit/format)
    ("initial config p50 (from accept)", lambda r: r["initial"]["sinceAcceptMs"]["p50"], "{:.1f} ms"),
    ("initial config p99 (from accept)", lambda r: r["initial"]["sinceAcceptMs"]["p99"], "{:.1f} ms"),
    ("all clients configured after first dial", lambda r: r["initial"]["allConfiguredS"], "{:.2f} s"),
    ("convergence p50 (all clients)", lambda r: r["convergence"]["allClientsMs"]["p50"], "{:.1f} ms"),
    ("convergence p99 (all clients)", lambda r: r["convergence"]["allClientsMs"]["p99"], "{:.1f} ms"),
    ("convergence p99 (per client)", lambda r: r["convergence"]["perClientMs"]["p99"], "{:.1f} ms"),
    ("RSS ready", lambda r: r["target"]["ready"]["rss_mib"], "{:.0f} MiB"),
    ("RSS configured", lambda r: r["target"]["configured"]["rss_mib"], "{:.0f} MiB"),
    ("RSS end (peak)", lambda r: r["target"]["end"]["peak_rss_mib"], "{:.0f} MiB"),
    ("CPU during connect", lambda r: r["cost"]["connect"]["targetCpuS"], "{:.2f} s"),
    ("CPU during churn", lambda r: r["cost"]["churn"]["targetCpuS"], "{:.2f} s"),
    ("CPU per change per 1,000 streams", lambda r: r["cost"]["targetMsPerChangePer1kStreams"], "{:.0f} ms"),
    ("initial config bytes per client", lambda r: r["initial"]["bytesPerClient"] / 1024, "{:.1f} KiB"),
    ("bytes per client per change (churn)",
     lambda r: r["traffic"]["churnBytesPerS"] / max(r["config"]["churnPerS"], 1e-9) / r["config"]["clients"],
     "{:.0f} B"),
]


def table(summaries: list[Path]) -> str:
    """A markdown table of every run in ``summaries``: each figure per run, then the ratio of the
    means (istiod / meshd; > 1 means istiod takes more)."""
    runs = [r for p in summaries for r in json.loads(Path(p).read_text())["runs"]]
    m = [r for r in runs if r["server"] == "meshd"]
    i = [r for r in runs if r["server"] == "istiod"]
    head = ["figure"] + [f"meshd {k + 1} (load {r['load_start']:.1f})" for k, r in enumerate(m)] + \
           [f"istiod {k + 1} (load {r['load_start']:.1f})" for k, r in enumerate(i)] + ["istiod / meshd"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, get, fmt in ROWS:
        mv = [get(r["report"]) for r in m]
        iv = [get(r["report"]) for r in i]
        mean = lambda v: sum(v) / len(v) if v else float("nan")  # noqa: E731
        ratio = mean(iv) / mean(mv) if mv and mean(mv) else float("nan")
        lines.append("| " + " | ".join([label] + [fmt.format(v) for v in mv + iv] + [f"{ratio:.2f}"]) + " |")
    done = lambda r: (f"{r['report']['initial']['configured']}/{r['report']['initial']['clients']} configured, "  # noqa: E731
                      f"{r['report']['convergence']['converged']}/{r['report']['convergence']['changes']} changes, "
                      f"{r['report']['initial']['retries']} retries")
    lines.append("| " + " | ".join(["completed"] + [done(r) for r in m + i] + [""]) + " |")
    return "\n".join(lines)


# The headline rows (issue 34 §5): meshd ÷ istiod, target ≤ 1/3 each. (label, getter, format)
RATIO_ROWS = [
    ("convergence p99 (all clients)", lambda r: r["convergence"]["allClientsMs"]["p99"], "{:.0f} ms"),
    ("initial config p99 (from accept)", lambda r: r["initial"]["sinceAcceptMs"]["p99"], "{:.1f} ms"),
    ("RSS configured", lambda r: r["target"]["configured"]["rss_mib"], "{:.0f} MiB"),
    ("RSS end (peak)", lambda r: r["target"]["end"]["peak_rss_mib"], "{:.0f} MiB"),
    ("CPU per change per 1,000 streams", lambda r: r["cost"]["targetMsPerChangePer1kStreams"], "{:.0f} ms"),
    ("CPU during connect (initial config)", lambda r: r["cost"]["connect"]["targetCpuS"], "{:.2f} s"),
    ("initial config bytes per client", lambda r: r["initial"]["bytesPerClient"] / 1024, "{:.0f} KiB"),
    ("bytes per client per change",
     lambda r: r["traffic"]["churnBytesPerS"] / max(r["config"]["churnPerS"], 1e-9) / r["config"]["clients"],
     "{:.0f} B"),
]

# Micro benchmark rows: (label, criterion name in meshd's output, Go benchmark name in istiod's, divisor
# of the Go ns/op and of criterion's time to a per-unit figure). Sources: `cargo bench --bench eds` and
# `tests/bench/istiod-go-bench.sh` output, passed to `ratio --criterion FILE --go FILE`.
MICRO_ROWS = [
    ("EDS generation, 100 services × 1 endpoint (per endpoint, miss)", "eds/1/100 miss",
     "BenchmarkEndpointGeneration/1/100 forced", 100),
    ("EDS generation, 10 services × 100 endpoints (per endpoint, miss)", "eds/100/10 miss",
     "BenchmarkEndpointGeneration/100/10 forced", 1000),
    ("CDS generation (per cluster, miss)", "cds 1000 services/miss", "BenchmarkClusterGeneration/http", None),
]


def criterion_times(text: str) -> dict[str, float]:
    """Median time in µs of every criterion benchmark in ``text`` (`name  time: [lo mid hi]`)."""
    import re
    unit = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(r"^(\S.*?)\s+time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
        if m is None and line.strip() and not line.startswith(" ") and "time:" not in line:
            name = line.strip()
        m = m or re.match(r"^\s+time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
        if m:
            if len(m.groups()) == 3:
                name = m.group(1).strip()
            value, u = m.groups()[-2:]
            if name:
                out[name] = float(value) * unit[u]
    return out


def go_times(text: str) -> dict[str, list[float]]:
    """Every run's ns/op (as µs) by Go benchmark name without the `-N` suffix; names from the script's
    forced sections (`---` headers naming `forced`) end in " forced"."""
    import re
    out: dict[str, list[float]] = {}
    forced = False
    for line in text.splitlines():
        if line.startswith("---"):
            forced = "forced" in line
        m = re.match(r"^(Benchmark\S+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op", line)
        if m:
            out.setdefault(m.group(1) + (" forced" if forced else ""), []).append(float(m.group(3)) / 1e3)
    return out


def ratio_table(summaries: list[Path], criterion: Path | None, go: Path | None) -> str:
    """The first table of docs/benchmarks.md: per row meshd's and istiod's runs (min–max), meshd ÷ istiod
    of the means and of the extremes, and whether it meets the ≤ 1/3 target."""
    runs = [r for p in summaries for r in json.loads(Path(p).read_text())["runs"]]
    m = [r["report"] for r in runs if r["server"] == "meshd"]
    i = [r["report"] for r in runs if r["server"] == "istiod"]
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    lines = ["| figure | meshd (min–max of %d) | istiod (min–max of %d) | meshd ÷ istiod (means) | range | ≤ 1/3? |"
             % (len(m), len(i)), "|---|---|---|---|---|---|"]

    def row(label, mv, iv, fmt):
        r = mean(mv) / mean(iv)
        lo, hi = min(mv) / max(iv), max(mv) / min(iv)
        def span(v):
            lo, hi = fmt.format(min(v)), fmt.format(max(v))
            if lo == hi:
                return lo
            (lo_n, _, unit), hi_n = lo.partition(" "), hi.partition(" ")[0]
            return f"{lo_n}–{hi_n} {unit}"
        ok = "yes" if hi <= 1 / 3 else ("no" if lo > 1 / 3 else "partly")
        lines.append(f"| {label} | {span(mv)} | {span(iv)} | **{r:.2f}** | {lo:.2f}–{hi:.2f} | {ok} |")

    for label, get, fmt in RATIO_ROWS:
        row(label, [get(x) for x in m], [get(x) for x in i], fmt)
    if criterion and go:
        ct, gt = criterion_times(criterion.read_text()), go_times(go.read_text())
        for label, cname, gname, per in MICRO_ROWS:
            if cname not in ct or gname not in gt:
                continue
            # CDS: criterion's time covers 1,002 clusters, Go's 105 (100 ServiceEntries + istiod's own).
            c_per = ct[cname] / (per or 1002)
            g_per = [v / (per or 105) for v in gt[gname]]
            row(label, [c_per], g_per, "{:.2f} µs")
    return "\n".join(lines)


def floors(out: Path, rounds: int = 200) -> dict:
    """What no control plane can beat here: a loopback TCP round trip (64-byte ping-pong), and the real API
    server's write → watch delivery (an EndpointSlice replaced, the watch event read) that every
    convergence figure contains besides the 100 ms debounce."""
    import socket
    import statistics
    import threading
    import urllib.request

    def pct(v: list[float], q: float) -> float:
        v = sorted(v)
        return v[min(len(v) - 1, int(q * len(v)))]

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def echo():
        c, _ = srv.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while (b := c.recv(64)):
            c.sendall(b)
    threading.Thread(target=echo, daemon=True).start()
    cli = socket.create_connection(srv.getsockname())
    cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtt = []
    for _ in range(2000):
        t = time.perf_counter()
        cli.sendall(b"x" * 64)
        cli.recv(64)
        rtt.append((time.perf_counter() - t) * 1e6)
    cli.close()

    k8s = RealCluster(out / "floor-k8s", name="cluster-0", controller_manager=False)
    k8s.start()
    try:
        k8s.request("POST", "/api/v1/namespaces", {"metadata": {"name": "bench"}})
        path = "/apis/discovery.k8s.io/v1/namespaces/bench/endpointslices"

        def body(n: int) -> dict:
            return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": "floor", "namespace": "bench", "labels": {"kubernetes.io/service-name": "x"}},
                    "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
                    "endpoints": [{"addresses": [f"10.1.{n // 250}.{n % 250 + 1}"], "conditions": {"ready": True}}]}
        k8s.request("POST", path, body(0))
        req = urllib.request.Request(k8s.server + path + "?watch=1&fieldSelector=metadata.name%3Dfloor",
                                     headers={"Authorization": f"Bearer {k8s.token}"})
        watch = urllib.request.urlopen(req, context=k8s.tls, timeout=30)
        watch.readline()  # the ADDED event of the existing slice
        delays = []
        for n in range(1, rounds + 1):
            t = time.perf_counter()
            k8s.request("PUT", path + "/floor", body(n))
            watch.readline()
            delays.append((time.perf_counter() - t) * 1e3)
        watch.close()
    finally:
        k8s.stop()
    return {"loopback_rtt_us": {"p50": statistics.median(rtt), "p99": pct(rtt, 0.99)},
            "write_to_watch_ms": {"p50": statistics.median(delays), "p99": pct(delays, 0.99)},
            "load": loadavg()}


def main() -> None:
    if sys.argv[1:2] == ["floor"]:
        out = Path(sys.argv[2] if len(sys.argv) > 2 else "bench-vs-istiod").resolve()
        out.mkdir(parents=True, exist_ok=True)
        f = floors(out)
        (out / "floor.json").write_text(json.dumps(f, indent=2))
        print(json.dumps(f, indent=2))
        return
    if sys.argv[1:2] == ["ratio"]:
        r = argparse.ArgumentParser(prog="istiod_vs_meshd.py ratio")
        r.add_argument("summaries", nargs="+", type=Path)
        r.add_argument("--criterion", type=Path, help="`cargo bench --bench eds` output")
        r.add_argument("--go", type=Path, help="tests/bench/istiod-go-bench.sh output (the forced EDS runs)")
        ra = r.parse_args(sys.argv[2:])
        print(ratio_table(ra.summaries, ra.criterion, ra.go))
        return
    if sys.argv[1:2] == ["table"]:
        print(table([Path(p) for p in sys.argv[2:]]))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--services", type=int, default=100)
    p.add_argument("--endpoints", type=int, default=10)
    p.add_argument("--clients", type=int, default=100)
    p.add_argument("--connect-rate", type=float, default=25)
    p.add_argument("--churn", type=float, default=5)
    p.add_argument("--duration", default="20s")
    p.add_argument("--configure-timeout", default="180s")
    p.add_argument("--pairs", type=int, default=2, help="meshd/istiod pairs, alternating")
    p.add_argument("--order", default="meshd,istiod",
                   help="the servers of each round, in order: meshd, istiod, meshd-quiet (meshd with "
                        "--eds-debounce=quiet, istiod's debounce rule)")
    p.add_argument("--nice", type=int, default=5)
    p.add_argument("--meshctl", type=Path, default=REPO / "target" / "release" / "meshctl")
    p.add_argument("--meshd", type=Path, default=None)
    p.add_argument("--pilot-discovery", type=Path, default=CACHE_BIN / "pilot-discovery")
    p.add_argument("--out", type=Path, default=Path("bench-vs-istiod"))
    a = p.parse_args()
    a.meshctl, a.pilot_discovery = a.meshctl.resolve(), a.pilot_discovery.resolve()
    a.meshd = (a.meshd or a.meshctl.with_name("meshd")).resolve()
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
