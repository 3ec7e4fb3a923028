#!/usr/bin/env bash
# Builds, runs the Rust tests, then the kubectl end-to-end tests against target/debug/meshctl.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --all-targets
cargo test
export MESHD_BIN_DIR="${MESHD_BIN_DIR:-target/debug}"
python3 -m pytest -q tests/e2e
