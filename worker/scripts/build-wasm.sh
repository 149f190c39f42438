#!/usr/bin/env bash
# worker/scripts/build-wasm.sh — the Worker's wasm (full variant, with the generator):
# crates/edgepatch-wasm/pkg/web, rebuilt only when a Rust source is newer than it.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
out="$REPO/crates/edgepatch-wasm/pkg/web/edgepatch_wasm_bg.wasm"
if [ ! -e "$out" ] || [ -n "$(find "$REPO/crates/edgepatch-core/src" "$REPO/crates/edgepatch-core/Cargo.toml" \
  "$REPO/crates/edgepatch-wasm/src" "$REPO/crates/edgepatch-wasm/Cargo.toml" "$REPO/Cargo.lock" \
  "$REPO/.cargo/config.toml" -newer "$out" -print -quit 2>/dev/null)" ]; then
  echo "[worker] wasm-pack build --target web (crates/edgepatch-wasm/pkg/web)" >&2
  (cd "$REPO" && wasm-pack --quiet build --mode no-install --release --target web --out-dir pkg/web crates/edgepatch-wasm 2>&1 \
    | grep -v 'failed to get wasm-pack version' >&2) || true
  test -s "$out"
fi
