#!/usr/bin/env bash
# bench/brotli_params.sh CORPUS [PAIRS] [QUALITIES]
# Can a Brotli-compressed file be rebuilt byte for byte from its content? For each corpus
# pair (bench/corpus/fetch.sh; default: all four single-file pairs) and each quality (default
# "5 11"), both files of the pair are compressed by the reference command-line tool (`brotli
# -q Q`, as Unity's and most hosts' build steps do), and bench/brotli_params searches the
# brotli reference encoder's settings (quality, mode; the window read from the stream) that
# give the same bytes, and compares the Rust `brotli` crate's encoder at those settings.
# One JSON line a file (pair, side, quality, `brotli --version`, and brotli-params's fields).
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
tool=$(brotli --version)
for pair in $pairs; do
  for side in old new; do
    content="$corpus/pairs/$pair/$side"
    for q in $qualities; do
      start=$(date +%s%N)
      brotli -q "$q" -c "$content" > "$work/file.br"
      secs=$(awk "BEGIN { print ($(date +%s%N) - $start) / 1e9 }")
      line=$("$finder" "$content" "$work/file.br")
      echo "{\"pair\":\"$pair\",\"side\":\"$side\",\"brotli_q\":$q,\"tool\":\"$tool\",\"tool_seconds\":$secs,${line#\{}"
    done
  done
done
