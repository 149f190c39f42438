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
log="${TMPDIR:-/tmp}/edgepatch-web-build.$$.log"
step() { echo "[web] $*" >&2; }

step "cargo build --release --bin edgepatch"
cargo build --release --quiet --bin edgepatch
step "wasm-pack build (apply-only, --target web) -> crates/edgepatch-wasm/pkg/web-apply"
wasm-pack build --mode no-install --release --target web --out-dir pkg/web-apply crates/edgepatch-wasm --no-default-features >"$log" 2>&1 \
  || { cat "$log" >&2; rm -f "$log"; exit 1; }
rm -f "$log"
step "esbuild bundles -> web/dist"
node web/scripts/build.mjs
step "static update site -> web/dist/updates"
node web/scripts/make-static-site.mjs --edgepatch "${CARGO_TARGET_DIR:-$repo/target}/release/edgepatch" "$@"
