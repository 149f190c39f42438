#!/usr/bin/env bash
# web/scripts/build-all.sh [--big] — everything the browser library, its demo and its
# tests need, from a fresh clone (after scripts/setup.sh): the native CLI, the
# apply-only wasm module for browsers, the bundles (web/dist/lib, web/dist/demo) and
# the static update site made with the CLI (web/dist/updates; --big adds the large
# multi-segment game the resume test uses). Output is gitignored.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
export PATH="$HOME/.cargo/bin:$PATH"
step() { echo "[web] $*" >&2; }

step "cargo build --release --bin edgepatch"
cargo build --release --quiet --bin edgepatch
step "scripts/build-wasm.sh --if-stale web-apply -> crates/edgepatch-wasm/pkg/web-apply"
scripts/build-wasm.sh --if-stale web-apply
step "esbuild bundles -> web/dist"
node web/scripts/build.mjs
step "static update site -> web/dist/updates"
node web/scripts/make-static-site.mjs --edgepatch "${CARGO_TARGET_DIR:-$repo/target}/release/edgepatch" "$@"
