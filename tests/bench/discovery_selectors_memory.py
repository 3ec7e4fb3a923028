#!/usr/bin/env python3
"""Memory per remote cluster with and without MeshConfig ``discoverySelectors`` (issue 33).

kube-sim (``meshctl sandbox serve``) serves one empty primary and ``--remotes`` remote clusters, each
with 300 Services × 13 endpoints (pods and EndpointSlices) spread over 10 namespaces ``ns-0`` … ``ns-9``,
loaded from manifest folders. meshd runs three times against the same clusters: with no remote (the
baseline), with every remote and no selectors, and with every remote and selectors that select one
namespace in ten (``ns-0``, labelled ``mesh: on``; ``--select N``: ``ns-0`` … ``ns-<N-1>``). Each remote joins through a labelled remote Secret;
RSS (``/proc/<pid>/status`` VmRSS, and its anonymous part RssAnon) is read once every remote is ``synced`` and meshd has been quiet
for a few seconds. Per remote = (RSS − baseline RSS) / remotes; and, as ``meshctl bench --clusters``
counts it, the marginal cost of a remote, (RSS − RSS with one remote) / (remotes − 1), which leaves out
what the first remote costs once (the first client stack, allocator arenas of more busy threads).

Usage (from the repository root, after ``cargo build --workspace --release``):

    python3 tests/bench/discovery_selectors_memory.py --bin-dir target/release --remotes 4
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))

import yaml  # noqa: E402

NAMESPACES, SERVICES, ENDPOINTS = 10, 300, 13


def remote_manifests(cluster: int, selected: int) -> list[dict]:
    out = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "istio-system",
                                                                  "labels": {"mesh": "on"}}}]
    out += [{"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": f"ns-{n}", "labels": {"mesh": "on"} if n < selected else {}}} for n in range(NAMESPACES)]
    for s in range(SERVICES):
        ns = f"ns-{s % NAMESPACES}"
        name = f"svc-{s}"
        out.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
                    "spec": {"clusterIP": f"10.96.{s // 250}.{s % 250 + 2}", "selector": {"app": name},
                             "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
        ips = [f"10.{cluster}.{s // 16}.{(s % 16) * 16 + e + 1}" for e in range(ENDPOINTS)]
        for ip in ips:
            out.append({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"pod-{ip.replace('.', '-')}", "namespace": ns,
                                     "labels": {"app": name, "security.istio.io/tlsMode": "istio"}},
                        "spec": {"containers": [{"name": "app", "image": "app"}]},
                        "status": {"phase": "Running", "podIP": ip,
                                   "conditions": [{"type": "Ready", "status": "True"}]}})
        out.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": f"{name}-a", "namespace": ns,
                                 "labels": {"kubernetes.io/service-name": name}},
                    "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
                    "endpoints": [{"addresses": [ip], "conditions": {"ready": True},
                                   "targetRef": {"kind": "Pod", "name": f"pod-{ip.replace('.', '-')}",
                                                 "namespace": ns}} for ip in ips]})
    return out


def rss_mib(pid: int) -> tuple[float, float]:
    """VmRSS and its anonymous part (RssAnon: heap, stacks), which leaves out the binary's own pages."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["RssAnon"].split()[0]) / 1024


def run(args, root: Path, clusters: dict, remotes: int, mesh_config: str | None) -> tuple[float, float]:
    from meshd_proc import KUBECTL, Meshd, eventually

    primary = clusters["cluster-0"]["kubeconfig"]
    state = root / f"meshd-{remotes}-{'sel' if mesh_config else 'all'}"
    extra = []
    if mesh_config is not None:
        state.mkdir(parents=True, exist_ok=True)
        (state / "mesh.yaml").write_text(mesh_config)
        extra = ["--mesh-config", str(state / "mesh.yaml")]
    secrets = []
    for r in range(1, remotes + 1):
        name = f"cluster-{r}"
        kc = Path(clusters[name]["kubeconfig"]).read_bytes()
        secrets.append({"apiVersion": "v1", "kind": "Secret",
                        "metadata": {"name": f"istio-remote-secret-{name}", "namespace": "istio-system",
                                     "labels": {"istio/multiCluster": "true"}},
                        "data": {name: base64.b64encode(kc).decode()}})
    subprocess.run([KUBECTL, "--kubeconfig", primary, "delete", "secret", "-n", "istio-system", "-l",
                    "istio/multiCluster=true"], check=True, capture_output=True)
    if secrets:
        subprocess.run([KUBECTL, "--kubeconfig", primary, "apply", "-f", "-"], input=yaml.safe_dump_all(secrets),
                       text=True, check=True, capture_output=True)
    m = Meshd(state, ["--kubeconfig", primary, "--cluster-id", "cluster-0", "--log-level", "warn", *extra],
              ready_timeout=180)
    try:
        def synced():
            rows = m.json("/debug/clusterz")
            return len(rows) == remotes + 1 and all(r["syncStatus"] == "synced" for r in rows)

        eventually("every remote synced", synced, timeout=180, interval=0.5)
        time.sleep(args.settle)
        samples = []
        for _ in range(5):
            samples.append(rss_mib(m.proc.pid))
            time.sleep(1)
        return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)
    finally:
        m.kill()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin-dir", default="target/release")
    p.add_argument("--remotes", type=int, default=4, help="at least 2")
    p.add_argument("--settle", type=float, default=5.0)
    p.add_argument("--select", type=int, default=1, help="namespaces of the 10 the selectors select")
    args = p.parse_args()
    if args.remotes < 2:
        p.error("--remotes must be at least 2")
    import os

    os.environ["MESHD_BIN_DIR"] = str(Path(args.bin_dir).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folders = root / "clusters"
        (folders / "cluster-0").mkdir(parents=True)
        (folders / "cluster-0" / "ns.yaml").write_text(yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "istio-system", "labels": {"mesh": "on"}}}))
        for r in range(1, args.remotes + 1):
            (folders / f"cluster-{r}").mkdir()
            (folders / f"cluster-{r}" / "world.yaml").write_text(yaml.safe_dump_all(remote_manifests(r, args.select)))
        sim = subprocess.Popen([str(Path(args.bin_dir) / "meshctl"), "sandbox", "serve", "--clusters", str(folders),
                                "--state-dir", str(root / "sandbox")], stdout=subprocess.PIPE, text=True)
        try:
            clusters = json.loads(sim.stdout.readline())["clusters"]
            selectors = "discoverySelectors: [{matchLabels: {mesh: 'on'}}]\n"
            base = run(args, root, clusters, 0, None)
            every = run(args, root, clusters, args.remotes, None)
            selected = run(args, root, clusters, args.remotes, selectors)
            every_1 = run(args, root, clusters, 1, None)
            selected_1 = run(args, root, clusters, 1, selectors)
        finally:
            sim.send_signal(signal.SIGTERM)
            sim.wait(timeout=30)
    for i, what in enumerate(["RSS", "anonymous RSS"]):
        per = lambda rss: (rss[i] - base[i]) / args.remotes  # noqa: E731
        marginal = lambda rss, one: (rss[i] - one[i]) / (args.remotes - 1)  # noqa: E731
        print(f"{what}: baseline (no remote): {base[i]:.1f} MiB")
        print(f"{what}: {args.remotes} remotes, every namespace: {every[i]:.1f} MiB, {per(every):.2f} MiB per "
              f"remote; 1 remote {every_1[i]:.1f} MiB, {marginal(every, every_1):.2f} MiB per further remote")
        print(f"{what}: {args.remotes} remotes, {args.select} namespace(s) in 10: {selected[i]:.1f} MiB, {per(selected):.2f} MiB "
              f"per remote; 1 remote {selected_1[i]:.1f} MiB, {marginal(selected, selected_1):.2f} MiB per further "
              "remote")


if __name__ == "__main__":
    main()
