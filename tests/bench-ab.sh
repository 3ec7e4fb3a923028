#!/usr/bin/env bash
# Before/after in one sitting: the criterion EDS/CDS benches and the full `meshctl bench` run, of two
# release builds, alternately (before, after, before, after), with the load at the start of each run.
#
#   git worktree add ../before <rev> && (cd ../before && CARGO_TARGET_DIR=../target-before \
#     cargo build --release -p meshd -p meshctl && CARGO_TARGET_DIR=../target-before cargo bench --bench eds --no-run)
#   cargo build --release -p meshd -p meshctl && cargo bench --bench eds --no-run
#   tests/bench-ab.sh ../target-before target bench-ab-out
set -euo pipefail
before=$1 after=$2 out=$3
mkdir -p "$out"
bench_bin() { ls -t "$1"/release/deps/eds-* | grep -v '\.d$' | head -1; }
for round in 1 2; do
  for side in before after; do
    target=${!side}
    uptime > "$out/crit-$side-$round.load"
    "$(bench_bin "$target")" --bench --noplot > "$out/crit-$side-$round.txt" 2>&1
  done
done
for round in 1 2; do
  for side in before after; do
    target=${!side}
    uptime > "$out/full-$side-$round.load"
    "$target/release/meshctl" bench --clusters 10 --services 1000 --endpoints 10 --clients 1000 \
      --connect-rate 25 --stalled 1 --churn 5 --duration 30s --out "$out/full-$side-$round" \
      > "$out/full-$side-$round.txt" 2>&1
  done
done
grep -H 'time:' "$out"/crit-*.txt | grep -v '%' || true
grep -H -E 'convergence \(all|initial config \(from accept|CPU ms per change' "$out"/full-*.txt
