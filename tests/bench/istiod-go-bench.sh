#!/usr/bin/env bash
# istiod's own Go benchmarks (pilot/pkg/xds/bench_test.go) from the pinned istio.io/istio module, for
# docs/benchmarks.md "meshd vs istiod, one machine". Nothing of istio's source is committed: the module
# comes from the Go module cache by name and version (tests/peers/istiod/go.mod).
#   1. as shipped: a test binary built in a scratch copy of tests/peers/istiod (its go.sum already covers
#      the test dependencies), run from the package folder in the module cache (testdata/benchmarks is in
#      the module zip). Tags: vtprotobuf (istio's release builds); not disable_pgv, which the test
#      helpers (pilot/test/xdstest: Validate) need.
#   2. BenchmarkEndpointGeneration with its PushRequest Forced (at this version it is not, so the EDS
#      generator returns nothing): a scratch copy of the module with that one line changed, used through
#      `go mod edit -replace` (the Go module cache itself cannot be overlaid).
# Usage: tests/bench/istiod-go-bench.sh [benchtime]   (output on stdout; scratch in $TMPDIR)
set -euo pipefail
here=$(cd "$(dirname "$0")/../peers/istiod" && pwd)
benchtime=${1:-2s}
tmp=${TMPDIR:-/tmp}/istiod-go-bench
mkdir -p "$tmp/plain" "$tmp/forced"
export GOFLAGS="-buildvcs=false -mod=mod" GOTOOLCHAIN=local CGO_ENABLED=0
cd "$here"
ver=$(go list -m -f '{{.Version}}' istio.io/istio)
mod=$(go env GOMODCACHE)/istio.io/istio@$ver
bench='BenchmarkEndpointGeneration|BenchmarkClusterGeneration/(http|tcp)$|BenchmarkRouteGeneration/http$|BenchmarkListenerGeneration/http$|BenchmarkInitPushContext/http$'

cp "$here/go.mod" "$here/go.sum" "$here/tools.go" "$tmp/plain/"
(cd "$tmp/plain" && nice -n 10 go test -c -tags vtprotobuf -o "$tmp/plain/xds.test" istio.io/istio/pilot/pkg/xds)

rm -rf "$tmp/istio" && cp -r "$mod" "$tmp/istio" && chmod -R u+w "$tmp/istio"
sed -i 's|wr, &model.PushRequest{Push: s.PushContext()})|wr, \&model.PushRequest{Push: s.PushContext(), Forced: true})|' \
  "$tmp/istio/pilot/pkg/xds/bench_test.go"
grep -q 'Forced: true})' "$tmp/istio/pilot/pkg/xds/bench_test.go"
cp "$here/go.mod" "$here/go.sum" "$here/tools.go" "$tmp/forced/"
(cd "$tmp/forced" && go mod edit -replace "istio.io/istio=$tmp/istio" &&
  nice -n 10 go test -c -trimpath -tags vtprotobuf -o "$tmp/forced/xds.test" istio.io/istio/pilot/pkg/xds)

run() { echo "--- ${PILOT_ENABLE_XDS_CACHE:+PILOT_ENABLE_XDS_CACHE=$PILOT_ENABLE_XDS_CACHE }$* (load $(cut -d' ' -f1 /proc/loadavg))"; "$@" -test.run XXX -test.benchtime "$benchtime" -test.benchmem 2>&1 | grep -E '^Benchmark|FAIL|panic'; }
echo "istio.io/istio $ver, $(go env GOVERSION), $(nproc) cores"
cd "$mod/pilot/pkg/xds"
run nice -n 5 "$tmp/plain/xds.test" -test.bench "$bench"
PILOT_ENABLE_XDS_CACHE=false run nice -n 5 "$tmp/plain/xds.test" -test.bench "$bench"
cd "$tmp/istio/pilot/pkg/xds"
run nice -n 5 "$tmp/forced/xds.test" -test.bench BenchmarkEndpointGeneration
PILOT_ENABLE_XDS_CACHE=false run nice -n 5 "$tmp/forced/xds.test" -test.bench BenchmarkEndpointGeneration
