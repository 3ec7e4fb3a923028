#!/usr/bin/env python3
"""Markdown tables of docs/benchmarks.md's storm sections from `meshctl bench` reports (issue 34 §2, §3).

    tests/bench/storm_table.py storms bench-sweep/storm-*        # change storms, grouped by churn rate
    tests/bench/storm_table.py reconnect bench-sweep/reconnect-*  # reconnect storms, one row per run

Each argument is a run's --out folder or its report.json. Figures are per run; a storm row gives the
min–max over the runs of that rate.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def load(paths: list[str]) -> list[dict]:
    """Each path is a run's --out folder or its report.json itself."""
    files = [Path(p) if Path(p).is_file() else Path(p) / "report.json" for p in paths]
    return [json.loads(f.read_text()) for f in files]


def span(values: list[float], fmt: str) -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    if lo == hi:
        return lo
    (lo_n, _, unit), hi_n = lo.partition(" "), hi.partition(" ")[0]
    return f"{lo_n}–{hi_n} {unit}".rstrip()


def storms(reports: list[dict]) -> str:
    by_rate: dict[float, list[dict]] = defaultdict(list)
    for r in reports:
        by_rate[r["config"]["churnPerS"]].append(r)
    lines = [
        "| changes/s | runs (load at start) | converged | convergence p50 | convergence p99 | meshd CPU per change "
        "| per change per 1,000 streams | pushes per change per client | RSS configured → end | "
        "1,000 Secret updates: responses |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rate in sorted(by_rate):
        rs = by_rate[rate]
        changes = [r["convergence"]["changes"] for r in rs]
        clients = rs[0]["config"]["clients"]
        cpu_per_change = [r["cost"]["churn"]["targetCpuS"] * 1e3 / max(r["convergence"]["changes"], 1) for r in rs]
        pushes = [r["traffic"]["churnResponses"] / max(r["convergence"]["changes"], 1) / clients for r in rs]
        rss = [f"{r['target']['configured']['rss_mib']:.0f} → {r['target']['end']['rss_mib']:.0f}" for r in rs]
        secrets = [str(r["secretStorm"]["responses"]) if r.get("secretStorm") else "—" for r in rs]
        loads = ", ".join(f"{r['machine']['loadAtStart']:.1f}" for r in rs)
        done = ", ".join(f"{r['convergence']['converged']}/{c}" for r, c in zip(rs, changes))
        lines.append(
            f"| {rate:g} | {len(rs)} ({loads}) | {done} "
            f"| {span([r['convergence']['allClientsMs']['p50'] for r in rs], '{:.0f} ms')} "
            f"| {span([r['convergence']['allClientsMs']['p99'] for r in rs], '{:.0f} ms')} "
            f"| {span(cpu_per_change, '{:.2f} ms')} "
            f"| {span([r['cost']['targetMsPerChangePer1kStreams'] for r in rs], '{:.1f} ms')} "
            f"| {span(pushes, '{:.3f}')} | {', '.join(rss)} MiB | {', '.join(secrets)} |"
        )
    return "\n".join(lines)


def reconnect(reports: list[dict]) -> str:
    lines = [
        "| run (load at start) | new-stream limit | clients | changes while down | kill → ready "
        "| synced p50 / p99 / slowest | all up to date | retries | re-sent per client (full config) | responses "
        "| meshd CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in enumerate(reports, 1):
        s = r["reconnectStorm"]
        if s is None:
            continue
        up = f"{s['allUpToDateS']:.2f} s" if s["allUpToDateS"] is not None else "not all"
        cpu = f"{s['targetCpuS']:.2f} s" if s["targetCpuS"] is not None else "—"
        ms = s["syncedMs"]
        limit = f"{s['newStreamsPerSecond']:g}/s" if s.get("newStreamsPerSecond") else "automatic"
        lines.append(
            f"| {n} ({r['machine']['loadAtStart']:.1f}) | {limit} | {s['synced']}/{s['clients']} | {s['changes']} "
            f"| {s['downS']:.2f} s | {ms['p50']:.0f} / {ms['p99']:.0f} / {ms['max']:.0f} ms | {up} | {s['retries']} "
            f"| {s['bytesPerClient'] / 1024:.1f} KiB ({s['fullConfigBytesPerClient'] / 1024:.1f} KiB) "
            f"| {s['responses']} | {cpu} |"
        )
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] not in ("storms", "reconnect"):
        sys.exit(__doc__)
    reports = load(sys.argv[2:])
    print(storms(reports) if sys.argv[1] == "storms" else reconnect(reports))


if __name__ == "__main__":
    main()
