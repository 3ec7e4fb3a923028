#!/usr/bin/env bash
# pilot-discovery as istio's release images build it (STANDARD_TAGS: vtprotobuf,disable_pgv), for the
# performance comparison (tests/bench/istiod_vs_meshd.py --pilot-discovery ...); tests/peers/istiod/build.sh
# leaves vtprotobuf out (less to compile; the xDS it serves is the same, only its marshalling is slower).
# Same module, version and ldflags as that script; into tests/.cache/bin/pilot-discovery-vtprotobuf.
# Measured 2026-11-27 on 2 shared cores with a warm module and build cache: 854 s (GOMAXPROCS=1, nice 19).
set -euo pipefail
here=$(cd "$(dirname "$0")/../peers/istiod" && pwd)
bin=$(cd "$here/../.." && pwd)/.cache/bin
mkdir -p "$bin"
jobs=${PEERS_BUILD_JOBS:-1}
export GOMAXPROCS=$jobs GOFLAGS="-p=$jobs -buildvcs=false -mod=readonly" GOTOOLCHAIN=local CGO_ENABLED=0
cd "$here"
ver=$(go list -m -f '{{.Version}}' istio.io/istio)
v=istio.io/istio/pkg/version
ldflags="-s -w -X $v.buildVersion=$ver -X $v.buildGitRevision=${ver##*-} -X $v.buildStatus=Clean"
ldflags="$ldflags -X $v.buildTag=$ver -X $v.buildHub=local"
nice -n 19 go build -trimpath -tags vtprotobuf,disable_pgv -ldflags "$ldflags" \
  -o "$bin/pilot-discovery-vtprotobuf.tmp" istio.io/istio/pilot/cmd/pilot-discovery
mv "$bin/pilot-discovery-vtprotobuf.tmp" "$bin/pilot-discovery-vtprotobuf"
echo "PILOT_DISCOVERY=$bin/pilot-discovery-vtprotobuf"
