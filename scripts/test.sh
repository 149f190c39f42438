#!/usr/bin/env bash
# scripts/test.sh — sets up what is needed and runs every test.
# Benchmarks are not part of it (bench/run.sh; results in BENCHMARKS.md).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
source scripts/setup.sh

echo "== fixtures are what make_fixtures.py generates"
python3 fixtures/make_fixtures.py --check

echo "== Rust workspace: unit, integration, golden-vector and hostile-input tests"
cargo test --workspace --quiet 2>&1 | tee "${TMPDIR:-/tmp}/edgepatch-cargo-test.log"
