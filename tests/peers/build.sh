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
# shellcheck source=tests/peers/lib.sh
source "$(dirname "$0")/lib.sh"
peers_init "$(dirname "$0")" "kube-apiserver, kube-controller-manager and etcd" "the real-API-server tests"

if peers_fresh peers "$bin/kube-apiserver" "$bin/kube-controller-manager" "$bin/etcd" -- \
  "$here/go.mod" "$here/go.sum" "$here/build.sh"; then
  echo "kube-apiserver, kube-controller-manager and etcd are up to date in $bin ($(go env GOVERSION), stamp ${want:0:12})"
else
  peers_go_env
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
  peers_stamp peers
  echo "peers built in $((SECONDS - start))s"
fi
"$bin/kube-apiserver" --version
"$bin/kube-controller-manager" --version
"$bin/etcd" --version | sed -n 1p
echo "KUBE_APISERVER=$bin/kube-apiserver"
echo "KUBE_CONTROLLER_MANAGER=$bin/kube-controller-manager"
echo "ETCD=$bin/etcd"
