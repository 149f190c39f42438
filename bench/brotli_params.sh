#!/usr/bin/env bash
# bench/brotli_params.sh CORPUS [PAIRS] [QUALITIES]
# Can a Brotli-compressed file be rebuilt byte for byte from its content? For each corpus
# pair (bench/corpus/fetch.sh; default: all four single-file pairs) and each quality (default
# "5 11"), both files of the pair are compressed by two common writers: the reference
# command-line tool (`brotli -q Q`, which fits the window to the file and gives its length as
# the size hint) and Node's zlib (`zlib.brotliCompressSync` with only the quality set: window
# 22, no size hint, as bundler plugins call it; Node bundles its own brotli). Then
# bench/brotli_params searches the reference encoder's settings (quality, mode, size hint; the
# window read from the stream) that give the same bytes, and compares the Rust `brotli`
# crate's encoder at those settings. One JSON line a file (pair, side, writer and its brotli
# version, quality, and brotli-params's fields).
set -euo pipefail
corpus=${1:?usage: bench/brotli_params.sh CORPUS [PAIRS] [QUALITIES]}
pairs=${2:-havok-wasm phaser-js esbuild-wasm-adj freedoom2-wad}
qualities=${3:-5 11}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --quiet --manifest-path "$here/brotli_params/Cargo.toml"
finder="$here/brotli_params/target/release/brotli-params"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cli_version=$(brotli --version)
node_version="node $(node --version) zlib, brotli $(node -p process.versions.brotli)"
for pair in $pairs; do
  for side in old new; do
    content="$corpus/pairs/$pair/$side"
    for q in $qualities; do
      for writer in cli node; do
        start=$(date +%s%N)
        if [ "$writer" = cli ]; then
          brotli -q "$q" -c "$content" > "$work/file.br"
          version=$cli_version
        else
          node -e 'const z = require("zlib"), fs = require("fs");
            fs.writeFileSync(process.argv[3], z.brotliCompressSync(fs.readFileSync(process.argv[1]), { params: { [z.constants.BROTLI_PARAM_QUALITY]: Number(process.argv[2]) } }));' \
            "$content" "$q" "$work/file.br"
          version=$node_version
        fi
        secs=$(awk "BEGIN { print ($(date +%s%N) - $start) / 1e9 }")
        line=$("$finder" "$content" "$work/file.br")
        echo "{\"pair\":\"$pair\",\"side\":\"$side\",\"writer\":\"$version\",\"brotli_q\":$q,\"writer_seconds\":$secs,${line#\{}"
      done
    done
  done
done
