#!/usr/bin/env bash
# Builds istiod's discovery server, pilot-discovery, from the istio.io/istio Go module at the version
# tests/peers/istiod/go.mod pins (go.sum holds the checksums), into tests/.cache/bin. The xDS diff tests
# (tests/e2e/test_istiod_diff.py) run it beside meshd. A module of its own: istio pins its own k8s.io/*
# versions, which differ from the ones tests/peers/go.mod pins for kube-apiserver.
# Cached: nothing is built when the binary exists and the stamp of go.mod, go.sum, this script and the
# Go version matches. Without `go` it says so and exits 0 (the diff tests then skip).
#
# Gentle on a shared machine: the build runs under `nice -n 19` with GOMAXPROCS=1 and -p=1 unless
# PEERS_BUILD_JOBS says otherwise. Prints the path as a `PILOT_DISCOVERY=...` line last.
set -euo pipefail
# shellcheck source=tests/peers/lib.sh
source "$(dirname "$0")/../lib.sh"
peers_init "$(dirname "$0")" "pilot-discovery" "the istiod diff tests"

if peers_fresh pilot-discovery "$bin/pilot-discovery" -- "$here/go.mod" "$here/go.sum" "$here/build.sh"; then
  echo "pilot-discovery is up to date in $bin ($(go env GOVERSION), stamp ${want:0:12})"
else
  peers_go_env
  cd "$here"
  ver=$(go list -m -f '{{.Version}}' istio.io/istio)
  echo "building pilot-discovery istio.io/istio $ver with $(go env GOVERSION) (GOMAXPROCS=$jobs) into $bin"
  start=$SECONDS
  # What `pilot-discovery version` reports, as istio's report_build_info.sh sets it (the revision is the
  # pseudo-version's commit). Tags: istio's STANDARD_TAGS less vtprotobuf (faster marshalling only, and
  # more code to compile); the xDS it serves is the same.
  v=istio.io/istio/pkg/version
  ldflags="-s -w -X $v.buildVersion=$ver -X $v.buildGitRevision=${ver##*-} -X $v.buildStatus=Clean"
  ldflags="$ldflags -X $v.buildTag=$ver -X $v.buildHub=local"
  nice -n 19 go build -trimpath -tags disable_pgv -ldflags "$ldflags" -o "$bin/pilot-discovery.tmp" \
    istio.io/istio/pilot/cmd/pilot-discovery
  mv "$bin/pilot-discovery.tmp" "$bin/pilot-discovery"
  peers_stamp pilot-discovery
  echo "pilot-discovery built in $((SECONDS - start))s"
fi
"$bin/pilot-discovery" version --short 2>/dev/null || "$bin/pilot-discovery" version | sed -n 1p
echo "PILOT_DISCOVERY=$bin/pilot-discovery"
