#!/usr/bin/env bash
# Builds the grpc-go xDS test client (main.go here, our own code) at the google.golang.org/grpc version
# go.mod pins (go.sum holds the checksums) into tests/.cache/bin/grpc-go-xds-client: the third proxyless
# client of the end-to-end suite, beside grpcio and @grpc/grpc-js-xds.
# Cached: nothing is built when the binary exists and the stamp of go.mod, go.sum, main.go, this script
# and the Go version matches. Without `go` it says so and exits 0 (the grpc-go tests then skip).
# Gentle on a shared machine: `nice -n 19`, GOMAXPROCS=1 and -p=1 unless PEERS_BUILD_JOBS says otherwise.
# Prints the path as a `GRPC_GO_XDS_CLIENT=...` line last, for a caller to export.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin="$root/tests/.cache/bin"
out="$bin/grpc-go-xds-client"
stamp="$bin/.grpc-go-xds-client.sha256"
mkdir -p "$bin"

if ! command -v go >/dev/null 2>&1; then
  echo "go not found: not building the grpc-go xDS client (the grpc-go tests will skip)"
  exit 0
fi

want=$( { cat "$here/go.mod" "$here/go.sum" "$here/main.go" "$here/build.sh"; go env GOVERSION GOOS GOARCH; } \
  | sha256sum | cut -d' ' -f1)
if [ -x "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "grpc-go-xds-client is up to date in $bin ($(go env GOVERSION), stamp ${want:0:12})"
else
  jobs=${PEERS_BUILD_JOBS:-1}
  export GOMAXPROCS=$jobs GOFLAGS="-p=$jobs -buildvcs=false -mod=readonly" GOTOOLCHAIN=local CGO_ENABLED=0
  cd "$here"
  grpc=$(go list -m -f '{{.Version}}' google.golang.org/grpc)
  echo "building grpc-go-xds-client (google.golang.org/grpc $grpc) with $(go env GOVERSION) (GOMAXPROCS=$jobs) into $bin"
  t=$SECONDS
  nice -n 19 go build -trimpath -ldflags "-s -w" -o "$out.tmp" .
  mv "$out.tmp" "$out"
  echo "$want" > "$stamp"
  echo "grpc-go-xds-client built in $((SECONDS - t))s"
fi
echo "GRPC_GO_XDS_CLIENT=$out"
