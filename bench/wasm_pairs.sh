#!/usr/bin/env bash
# bench/wasm_pairs.sh PAIRS_DIR... : the wasm-aware transform in the patch format
# (docs/FORMAT.md §2.8) on single-file wasm pairs (PAIRS_DIR/{old,new}), against the
# peers in the same run. Prints one TSV line per pair:
#   pair new_bytes transform_bytes plain_bytes bsdiff zstd xdelta3 hdiffpatch
#   apply_s_transform apply_MB_transform apply_s_plain apply_MB_plain diff_s_transform diff_s_plain
# Apply time and peak RSS are GNU time's (%e, %M) for `edgepatch apply` (native CLI).
# Needs target/release/edgepatch; peers as bench/run.sh installs them.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
EP="$HERE/../target/release/edgepatch"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
size() { stat -c %s "$1"; }
timed() { /usr/bin/time -f "%e %M" -o "$T/time" "$@" >/dev/null 2>&1; awk '{printf "%s\t%.1f", $1, $2/1024}' "$T/time"; }
printf "pair\tnew\ttransform\tplain\tbsdiff\tzstd\txdelta3\thdiffpatch\tapply_s_t\tapply_MB_t\tapply_s_p\tapply_MB_p\tdiff_s_t\tdiff_s_p\n"
for dir in "$@"; do
  name=$(basename "$dir"); old="$dir/old"; new="$dir/new"
  # (the diff's one-line summary is not part of the table)
  s0=$(date +%s.%N); nice "$EP" --quiet diff --threads 2 "$old" "$new" "$T/t.patch" > /dev/null; s1=$(date +%s.%N)
  nice "$EP" --quiet diff --threads 2 --no-wasm-transform "$old" "$new" "$T/p.patch" > /dev/null; s2=$(date +%s.%N)
  at=$(timed nice "$EP" --quiet apply "$old" "$T/t.patch" "$T/t.out"); cmp "$T/t.out" "$new"
  ap=$(timed nice "$EP" --quiet apply "$old" "$T/p.patch" "$T/p.out"); cmp "$T/p.out" "$new"
  rm -f "$T/t.out" "$T/p.out"
  nice bsdiff "$old" "$new" "$T/bs"
  nice zstd -q -f -19 --long=27 --patch-from="$old" "$new" -o "$T/zs"
  nice xdelta3 -9 -e -f -B $(( ($(size "$old") / 1048576 + 1) * 1048576 )) -s "$old" "$new" "$T/xd"
  nice python3 "$HERE/hdiffpatch_cli.py" diff "$old" "$new" "$T/hd"
  printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%.1f\n" "$name" "$(size "$new")" "$(size "$T/t.patch")" "$(size "$T/p.patch")" \
    "$(size "$T/bs")" "$(size "$T/zs")" "$(size "$T/xd")" "$(size "$T/hd")" "$at" "$ap" \
    "$(echo "$s1 - $s0" | bc)" "$(echo "$s2 - $s1" | bc)"
done
