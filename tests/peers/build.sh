#!/usr/bin/env bash
# Builds the real peers the end-to-end suite runs meshd against, kube-apiserver, kube-controller-manager
# (the controllers a real cluster runs: namespace lifecycle, garbage collector, ServiceAccounts, ...) and
# etcd, from their Go modules at the versions tests/peers/go.mod pins (go.sum holds their checksums), into tests/.cache/bin.
# Cached: nothing is built when the binaries exist and the stamp of go.mod, go.sum, this script and the
# Go version matches. Without `go` it says so and exits 0 (the tests that need the binaries then skip).
#
# Gentle on a shared machine: the build runs under `nice -n 19` with GOMAXPROCS=1 and -p=1 unless
# PEERS_BUILD_JOBS says otherwise (e.g. PEERS_BUILD_JOBS=2 on a dedicated CI machine).
# Prints the paths as `KUBE_APISERVER=...`, `KUBE_CONTROLLER_MANAGER=...` and `ETCD=...` lines last, for a caller to export.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$root/tests/.cache/bin"
stamp="$bin/.peers.sha256"
mkdir -p "$bin"

if ! command -v go >/dev/null 2>&1; then
  echo "go not found: not building kube-apiserver, kube-controller-manager and etcd (the real-API-server tests will skip)"
  exit 0
fi

want=$( { cat "$here/go.mod" "$here/go.sum" "$here/build.sh"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -d' ' -f1)
if [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] && [ -x "$bin/etcd" ] \
  && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "kube-apiserver, kube-controller-manager and etcd are up to date in $bin ($(go env GOVERSION), stamp ${want:0:12})"
else
  jobs=${PEERS_BUILD_JOBS:-1}
  export GOMAXPROCS=$jobs GOFLAGS="-p=$jobs -buildvcs=false -mod=readonly" GOTOOLCHAIN=local CGO_ENABLED=0
  cd "$here"
  k8s=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
  etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
  minor=$(echo "$k8s" | cut -d. -f2)
  echo "building kube-apiserver and kube-controller-manager $k8s and etcd $etcd with $(go env GOVERSION) (GOMAXPROCS=$jobs) into $bin"
  start=$SECONDS
  # The version the server reports at /version (kubectl version, discovery), as the release build sets it.
  v=k8s.io/component-base/version
  ldflags="-s -w -X $v.gitVersion=$k8s -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
  ldflags="$ldflags -X $v.buildDate=1970-01-01T00:00:00Z"
  t=$SECONDS
  for cmd in kube-apiserver kube-controller-manager; do
    t=$SECONDS
    nice -n 19 go build -trimpath -ldflags "$ldflags" -o "$bin/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
    mv "$bin/$cmd.tmp" "$bin/$cmd"
    echo "$cmd built in $((SECONDS - t))s"
  done
  t=$SECONDS
  nice -n 19 go build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "$bin/etcd.tmp" "$bin/etcd"
  echo "etcd built in $((SECONDS - t))s"
  echo "$want" > "$stamp"
  echo "peers built in $((SECONDS - start))s"
fi
"$bin/kube-apiserver" --version
"$bin/kube-controller-manager" --version
"$bin/etcd" --version | sed -n 1p
echo "KUBE_APISERVER=$bin/kube-apiserver"
echo "KUBE_CONTROLLER_MANAGER=$bin/kube-controller-manager"
echo "ETCD=$bin/etcd"
