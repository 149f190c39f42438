#!/usr/bin/env bash
# scripts/build-wasm.sh [--if-stale] [VARIANT...] — builds the wasm variants of
# crates/edgepatch-wasm, every one by default; the one place that says how each is made:
#   web        crates/edgepatch-wasm/pkg/web        --target web: apply, signer, generator (the Worker)
#   web-apply  crates/edgepatch-wasm/pkg/web-apply  --target web, --no-default-features: apply only (browsers)
#   node       packages/edgepatch-js/wasm           --target web: everything (and the deflate transform), the ESM glue @edgepatch/js loads
#                                                   in Node, Deno and Workers (and the benchmarks); without
#                                                   wasm-pack's .gitignore and package.json, which would keep
#                                                   the module out of the npm package and make Node read the
#                                                   glue as CommonJS
# --if-stale skips a variant whose .wasm is newer than every Rust source it is built from.
# A failed build stops the script with wasm-pack's output (nothing is ignored).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export PATH="$HOME/.cargo/bin:$PATH"

if_stale=
variants=()
for a in "$@"; do
  case "$a" in
    --if-stale) if_stale=1 ;;
    web | web-apply | node) variants+=("$a") ;;
    *) echo "build-wasm: unknown variant $a (web, web-apply, node)" >&2; exit 2 ;;
  esac
done
[ ${#variants[@]} -gt 0 ] || variants=(web web-apply node)

stale() {
  [ -z "$if_stale" ] || [ ! -e "$1" ] || [ -n "$(find crates/edgepatch-core/src crates/edgepatch-core/Cargo.toml \
    crates/edgepatch-format crates/edgepatch-transform-wasm crates/edgepatch-transform-compressed \
    crates/edgepatch-wasm/src crates/edgepatch-wasm/Cargo.toml Cargo.lock Cargo.toml .cargo/config.toml -newer "$1" -print -quit 2>/dev/null)" ]
}

for v in "${variants[@]}"; do
  case "$v" in
    web) out=crates/edgepatch-wasm/pkg/web; args=(--target web --out-dir pkg/web) ;;
    web-apply) out=crates/edgepatch-wasm/pkg/web-apply; args=(--target web --out-dir pkg/web-apply --no-default-features) ;;
    node) out=packages/edgepatch-js/wasm; args=(--target web --out-dir ../../packages/edgepatch-js/wasm --out-name edgepatch_wasm --features deflate-transform) ;;
  esac
  # node: a package.json there is wasm-pack's, from a CommonJS (--target nodejs) build of earlier versions.
  stale "$out/edgepatch_wasm_bg.wasm" || { [ "$v" = node ] && [ -e "$out/package.json" ]; } || continue
  echo "[wasm] $v -> $out" >&2
  log=$(mktemp)
  if ! wasm-pack --quiet build --mode no-install --release crates/edgepatch-wasm "${args[@]}" >"$log" 2>&1; then
    sed '/failed to get wasm-pack version/d' "$log" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  test -s "$out/edgepatch_wasm_bg.wasm"
  [ "$v" != node ] || rm -f "$out/.gitignore" "$out/package.json"
done
