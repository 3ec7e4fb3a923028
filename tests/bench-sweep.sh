#!/usr/bin/env bash
# The scaling sweeps of docs/benchmarks.md ("Scaling curves"): one `meshctl bench` per point, then
# `meshctl bench-summary` per sweep (scaling-<param>.md and .svg). Only calls meshctl.
#
#   tests/bench-sweep.sh [clients|clusters|endpoints|scope|storms|reconnect|all]...   (default: all)
#
# MESHCTL: the meshctl binary (default target/release/meshctl; meshd is taken from beside it).
# OUT: where each run's folder and the summaries go (default bench-sweep/).
set -euo pipefail

MESHCTL=${MESHCTL:-target/release/meshctl}
OUT=${OUT:-bench-sweep}
mkdir -p "$OUT"

# One run; its folder is $OUT/<name>. Prints the run's wall time with its table.
run() {
  local name=$1
  shift
  echo "== $name: meshctl bench $*"
  "$MESHCTL" bench --out "$OUT/$name" "$@"
}

summarize() {
  local vary=$1
  shift
  "$MESHCTL" bench-summary --vary "$vary" --out "$OUT" "$@"
}

# Clients at 3 × 100 × 10 (3,000 endpoints, ≈ 0.6 MiB of config per client): small enough for the tool's
# clients to decode 3,000 streams' pushes next to meshd on 2 cores. Dialled at meshd's new-stream limit.
clients() {
  local dirs=()
  for n in 100 300 1000 3000; do
    run "clients-$n" --clusters 3 --services 100 --endpoints 10 --clients "$n" --connect-rate 25 \
      --churn 2 --duration 20s
    dirs+=("$OUT/clients-$n")
  done
  summarize clients "${dirs[@]}"
}

# Remote clusters of 300 services × 13 endpoints each (issue 34 §1), 100 clients: 1 / 3 / 10 / 30 / 100
# remotes (the primary holds the same 300 × 13 besides).
clusters() {
  local dirs=()
  for n in 1 3 10 30 100; do
    run "clusters-$n" --clusters $((n + 1)) --services 300 --endpoints 13 --clients 100 --connect-rate 25 \
      --churn 5 --duration 20s --configure-timeout 600s
    dirs+=("$OUT/clusters-$n")
  done
  summarize clusters "${dirs[@]}"
}

# Change storms (issue 34 §2): endpoint flaps round-robin over 10 remote clusters at 5 / 50 / 500 changes/s,
# REPEAT times each (default 3), then 1,000 unrelated Secret updates, for each of meshd's --eds-debounce
# modes in EDS_DEBOUNCE (default "paced"; "paced quiet" alternates them). Under `quiet` (istiod's rule)
# rates above one change per debounce (100 ms) never let the quiet period elapse: pushes wait for
# --debounce-max (10 s), so 30 s runs. Folders: storm-<mode>-<rate>-<round>.
storms() {
  for round in $(seq "${REPEAT:-3}"); do
    for rate in 5 50 500; do
      for mode in ${EDS_DEBOUNCE:-paced}; do
        MESHD_EDS_DEBOUNCE=$mode run "storm-$mode-$rate-$round" --clusters 11 --services 100 --endpoints 10 \
          --clients 100 --connect-rate 25 --churn "$rate" --duration 30s --settle-timeout 60s --secret-storm 1000
      done
    done
  done
}

# Reconnect storms (issue 34 §3): 1,000 delta clients, meshd killed, 50 changes written, meshd restarted;
# every client resumes with initial_resource_versions. REPEAT times (default 3) for each new-stream limit
# of LIMITS (meshd's --max-new-streams-per-second through PILOT_MAX_REQUESTS_PER_SECOND, which the meshd
# meshctl starts inherits; default "0": automatic), rounds alternating between the limits.
reconnect() {
  for round in $(seq "${REPEAT:-3}"); do
    for limit in ${LIMITS:-0}; do
      PILOT_MAX_REQUESTS_PER_SECOND=$limit run "reconnect-limit$limit-$round" --clusters 3 --services 100 \
        --endpoints 10 --clients 1000 --connect-rate 25 --churn 2 --duration 5s --reconnect-storm 50 \
        --configure-timeout 300s
    done
  done
}

# Endpoints per service at 2 clusters × 100 services, 50 clients (at 1,000: 200,000 endpoints, a
# 380 KiB assignment per change per client).
endpoints() {
  local dirs=()
  for n in 10 100 1000; do
    run "endpoints-$n" --clusters 2 --services 100 --endpoints "$n" --clients 50 --connect-rate 25 \
      --churn 2 --duration 20s --configure-timeout 600s
    dirs+=("$OUT/endpoints-$n")
  done
  summarize endpoints "${dirs[@]}"
}

# The full run's mesh and clients, every client's Sidecar importing 20 services, against no Sidecar.
scope() {
  local full=(--clusters 10 --services 1000 --endpoints 10 --clients 1000 --connect-rate 25 --stalled 1
    --churn 5 --duration 30s)
  run scope-all "${full[@]}"
  run scope-20 "${full[@]}" --sidecar-hosts 20
  summarize hosts "$OUT/scope-20" "$OUT/scope-all"
}

sweeps=("$@")
[[ ${#sweeps[@]} -eq 0 ]] && sweeps=(all)
for s in "${sweeps[@]}"; do
  case $s in
    clients | clusters | endpoints | scope | storms | reconnect) "$s" ;;
    all) clients && clusters && endpoints && scope ;;
    *)
      echo "unknown sweep: $s (clients, clusters, endpoints, scope, storms, reconnect, all)" >&2
      exit 2
      ;;
  esac
done
