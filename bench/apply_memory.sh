#!/usr/bin/env bash
# bench/apply_memory.sh BASE NEW PAIR_DIR... : what `edgepatch apply` holds and takes for
# transformed wasm modules (BENCHMARKS.md, "Transformed wasm modules").
# For each PAIR_DIR/{old,new}: NEW makes the patch (and one with --no-wasm-transform, the
# floor); BASE and NEW apply it, each three times: peak RSS (KB) and the fastest wall time.
# Every output is compared with PAIR_DIR/new. Prints TSV. Pairs: bench/fetch_wasm_pairs.sh.
set -euo pipefail
BASE=${1:?usage: bench/apply_memory.sh BASE NEW PAIR_DIR...}
NEW=${2:?usage: bench/apply_memory.sh BASE NEW PAIR_DIR...}
shift 2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

# apply BIN PATCH OLD NEW -> "peak_kb fastest_seconds"
apply() {
  local best="" kb=0 r s
  for _ in 1 2 3; do
    rm -f "$W/out"
    r=$( { /usr/bin/time -f "%M %e" "$1" apply --quiet "$3" "$2" "$W/out" >/dev/null; } 2>&1 | tail -1)
    cmp -s "$W/out" "$4" || { echo "MISMATCH: $1 on $2" >&2; exit 1; }
    kb=${r% *}
    s=${r#* }
    if [ -z "$best" ] || awk "BEGIN { exit !($s < $best) }"; then best=$s; fi
  done
  echo "$kb $best"
}

printf "pair\tnew_bytes\tsplit_layout\tbase_kb\tnew_kb\tbase_s\tnew_s\tplain_kb\tplain_s\n"
for P in "$@"; do
  p=$(basename "$P")
  "$NEW" diff --quiet "$P/old" "$P/new" "$W/t.patch" >/dev/null
  "$NEW" diff --quiet --no-wasm-transform "$P/old" "$P/new" "$W/p.patch" >/dev/null
  split=$("$NEW" inspect "$W/t.patch" | grep -c "in the field-split layout" || true)
  read -r bkb bs < <(apply "$BASE" "$W/t.patch" "$P/old" "$P/new")
  read -r nkb ns < <(apply "$NEW" "$W/t.patch" "$P/old" "$P/new")
  read -r pkb ps < <(apply "$NEW" "$W/p.patch" "$P/old" "$P/new")
  printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$p" "$(stat -c %s "$P/new")" "$split" "$bkb" "$nkb" "$bs" "$ns" "$pkb" "$ps"
done
