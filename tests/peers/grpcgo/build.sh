#!/usr/bin/env bash
# Builds the grpc-go xDS test client (main.go here, our own code) at the google.golang.org/grpc version
# go.mod pins (go.sum holds the checksums) into tests/.cache/bin/grpc-go-xds-client: the third proxyless
# client of the end-to-end suite, beside grpcio and @grpc/grpc-js-xds.
# Cached: nothing is built when the binary exists and the stamp of go.mod, go.sum, main.go, this script
# and the Go version matches. Without `go` it says so and exits 0 (the grpc-go tests then skip).
# Gentle on a shared machine: `nice -n 19`, GOMAXPROCS=1 and -p=1 unless PEERS_BUILD_JOBS says otherwise.
# Prints the path as a `GRPC_GO_XDS_CLIENT=...` line last, for a caller to export.
set -euo pipefail
# shellcheck source=tests/peers/lib.sh
source "$(dirname "$0")/../lib.sh"
peers_init "$(dirname "$0")" "the grpc-go xDS client" "the grpc-go tests"
out="$bin/grpc-go-xds-client"

if peers_fresh grpc-go-xds-client "$out" -- "$here/go.mod" "$here/go.sum" "$here/main.go" "$here/build.sh"; then
  echo "grpc-go-xds-client is up to date in $bin ($(go env GOVERSION), stamp ${want:0:12})"
else
  peers_go_env
  cd "$here"
  grpc=$(go list -m -f '{{.Version}}' google.golang.org/grpc)
  echo "building grpc-go-xds-client (google.golang.org/grpc $grpc) with $(go env GOVERSION) (GOMAXPROCS=$jobs) into $bin"
  t=$SECONDS
  nice -n 19 go build -trimpath -ldflags "-s -w" -o "$out.tmp" .
  mv "$out.tmp" "$out"
  peers_stamp grpc-go-xds-client
  echo "grpc-go-xds-client built in $((SECONDS - t))s"
fi
echo "GRPC_GO_XDS_CLIENT=$out"
