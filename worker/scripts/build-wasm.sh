#!/usr/bin/env bash
# worker/scripts/build-wasm.sh — the Worker's wasm (full variant, with the generator):
# crates/edgepatch-wasm/pkg/web, rebuilt only when a Rust source is newer than it.
# A failed build stops here with wasm-pack's output.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
out="$REPO/crates/edgepatch-wasm/pkg/web/edgepatch_wasm_bg.wasm"
if [ ! -e "$out" ] || [ -n "$(find "$REPO/crates/edgepatch-core/src" "$REPO/crates/edgepatch-core/Cargo.toml" \
  "$REPO/crates/edgepatch-wasm/src" "$REPO/crates/edgepatch-wasm/Cargo.toml" "$REPO/Cargo.lock" \
  "$REPO/.cargo/config.toml" -newer "$out" -print -quit 2>/dev/null)" ]; then
  echo "[worker] wasm-pack build --target web (crates/edgepatch-wasm/pkg/web)" >&2
  log=$(mktemp)
  if ! (cd "$REPO" && wasm-pack --quiet build --mode no-install --release --target web --out-dir pkg/web crates/edgepatch-wasm) >"$log" 2>&1; then
    sed '/failed to get wasm-pack version/d' "$log" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  test -s "$out"
fi
