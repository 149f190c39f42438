#!/usr/bin/env bash
# bench/fetch_wasm_pairs.sh DIR : the real compiled-wasm version pairs that bench/wasm_pairs.sh
# measures (BENCHMARKS.md, "Compiled wasm against the peers"), fetched from the npm registry with `npm pack` and
# checked against bench/wasm_pairs.sha256. Idempotent. Keep DIR outside the repository.
#
# Layout: DIR/dl/*.tgz (the packages), DIR/src/<package>-<version>/ (unpacked),
#         DIR/pairs/<pair>/{old,new} (the two modules, hard links into src).
# The two corpus pairs (havok-wasm, esbuild-wasm-adj) come from bench/corpus/fetch.sh.
# Then: bash bench/wasm_pairs.sh DIR/pairs/* CORPUS/pairs/{havok-wasm,esbuild-wasm-adj}
set -euo pipefail
DIR=${1:?usage: bench/fetch_wasm_pairs.sh DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR"/dl "$DIR"/src "$DIR"/pairs
DIR=$(cd "$DIR" && pwd)

# pair  package  old version  new version  module's path in the package
PAIRS='
sqljs              sql.js                               1.15.2  1.16.0  dist/sql-wasm.wasm
resvg              @resvg/resvg-wasm                    2.6.0   2.6.2   index_bg.wasm
tiktoken           @dqbd/tiktoken                       1.0.21  1.0.22  tiktoken_bg.wasm
lightningcss       lightningcss-wasm                    1.32.0  1.33.0  lightningcss_node.wasm
esbuild-go-nonadj  esbuild-wasm                         0.27.7  0.28.0  esbuild.wasm
box2d              box2d-wasm                           6.0.4   7.0.0   dist/es/Box2D.simd.wasm
harfbuzz           harfbuzzjs                           1.6.3   1.6.4   dist/harfbuzz-subset.wasm
treesitter         web-tree-sitter                      0.27.1  0.27.2  debug/web-tree-sitter.wasm
rive               @rive-app/canvas                     2.43.0  2.43.1  rive_fallback.wasm
rapier             @dimforge/rapier3d                   0.20.0  0.21.0  rapier_wasm3d_bg.wasm
resvg-w            @resvg/resvg-wasm                    2.6.1   2.6.2   index_bg.wasm
automerge          @automerge/automerge                 3.4.1   3.5.0   dist/mjs/wasm_bindgen_output/web/automerge_wasm_bg.wasm
wasmer             @wasmer/sdk                          0.15.0  0.16.0  pkg/wasmer_sdk_js_bg.wasm
vips               wasm-vips                            0.0.18  0.0.19  lib/vips.wasm
canvaskit          canvaskit-wasm                       0.41.1  0.42.0  bin/profiling/canvaskit.wasm
swc                @swc/wasm                            1.16.17 1.16.18 wasm_bg.wasm
typst              @myriaddreamin/typst-ts-web-compiler 0.6.0   0.7.0   pkg/typst_ts_web_compiler_bg.wasm
ort                onnxruntime-web                      1.29.0  1.30.0  dist/ort-wasm-simd-threaded.jsep.wasm
duckdb             @duckdb/duckdb-wasm                  1.31.0  1.32.0  dist/duckdb-mvp.wasm
'

# unpacked PACKAGE VERSION -> prints the directory the package is unpacked in
unpacked() {
  local safe dir tgz
  safe=$(echo "$1" | sed 's#^@##; s#/#-#g')
  tgz="$DIR/dl/$safe-$2.tgz"
  dir="$DIR/src/$safe-$2"
  if [ ! -s "$tgz" ]; then
    echo "[wasm pairs] npm pack $1@$2" >&2
    (cd "$DIR/dl" && npm pack "$1@$2" --silent > /dev/null)
    [ -s "$tgz" ] || { echo "npm pack did not produce $tgz" >&2; exit 1; }
  fi
  if [ ! -f "$dir/.unpacked" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    tar -xzf "$tgz" -C "$dir" --strip-components=1 --no-same-owner
    touch "$dir/.unpacked"
  fi
  echo "$dir"
}

echo "$PAIRS" | while read -r pair package old new path; do
  [ -n "$pair" ] || continue
  mkdir -p "$DIR/pairs/$pair"
  ln -f "$(unpacked "$package" "$old")/$path" "$DIR/pairs/$pair/old"
  ln -f "$(unpacked "$package" "$new")/$path" "$DIR/pairs/$pair/new"
done
(cd "$DIR/pairs" && sha256sum --quiet -c "$HERE/wasm_pairs.sha256")
echo "[wasm pairs] $(ls "$DIR/pairs" | wc -l) pairs in $DIR/pairs, checked" >&2
