#!/usr/bin/env bash
# bench/bounded_default.sh EDGEPATCH [CORPUS] — the default (in-memory) diff against `diff
# --bounded` on the corpus pairs and three-tree: patch bytes, wall and CPU seconds, peak RSS,
# and the bounded patch's size as a ratio to the default's. One run each; run it on an idle
# machine (BENCHMARKS.md, "Apply and diff: time and memory").
set -euo pipefail
BIN=$(realpath "$1")
CORPUS=${2:-$HOME/.cache/edgepatch-corpus}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '| %s | %s | %s | %s | %s | %s |\n' input diff "patch bytes" "wall s" "CPU s" "peak RSS MB"
printf '|---|---|---:|---:|---:|---:|\n'
for input in pairs/havok-wasm pairs/phaser-js pairs/esbuild-wasm-adj pairs/freedoom2-wad trees/three-tree; do
  for mode in default bounded; do
    args=()
    [ "$mode" = bounded ] && args=(--bounded)
    /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$BIN" diff "${args[@]}" "$CORPUS/$input/old" "$CORPUS/$input/new" "$work/$mode.patch" > /dev/null 2>&1
    read -r wall user sys rss < "$work/time"
    size=$(stat -c %s "$work/$mode.patch")
    printf '| %s | %s | %s | %s | %.2f | %.0f |\n' "${input#*/}" "$mode" "$size" "$wall" "$(echo "$user + $sys" | bc)" "$(echo "$rss / 1024" | bc -l)"
  done
  echo "| ${input#*/} | bounded / default | $(echo "scale=4; $(stat -c %s "$work/bounded.patch") / $(stat -c %s "$work/default.patch")" | bc) | | | |"
done
