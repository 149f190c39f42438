#!/usr/bin/env bash
# Times `edgepatch site add` on a ~25 MB multi-file build made from corpus pairs
# (~/.cache/edgepatch-corpus/pairs: esbuild-wasm-adj, phaser-js, havok-wasm): the first
# add (v1), a second (v2, the pairs' new sides), a third (v3: v2 with one small file
# changed), v2 added again (a no-op since site add keeps published pairs; refused before),
# and v3 added again after an add interrupted during its last pair (v1 -> v3): state.json
# as before v3, that pair's descriptor gone.
# Usage: bench/site_add_incremental.sh EDGEPATCH [WORKDIR]
set -euo pipefail
bin=${1:?usage: $0 EDGEPATCH [WORKDIR]}
work=${2:-$(mktemp -d)}
corpus=${EDGEPATCH_CORPUS:-$HOME/.cache/edgepatch-corpus}/pairs
mkdir -p "$work"
rm -rf "$work/site" "$work/v1" "$work/v2" "$work/v3"
for side in old new; do
  v=$([ "$side" = old ] && echo v1 || echo v2)
  mkdir -p "$work/$v/js" "$work/$v/wasm"
  cp "$corpus/esbuild-wasm-adj/$side" "$work/$v/wasm/esbuild.wasm"
  cp "$corpus/havok-wasm/$side" "$work/$v/wasm/havok.wasm"
  cp "$corpus/phaser-js/$side" "$work/$v/js/phaser.js"
  printf '{"build":"%s"}\n' "$v" > "$work/$v/build.json"
done
cp -r "$work/v2" "$work/v3"
printf '{"build":"v3"}\n' > "$work/v3/build.json"
"$bin" keygen "$work/site.key" >/dev/null 2>&1 || true
echo "build: $(du -sb "$work/v1" | cut -f1) bytes (v1), $(find "$work/v1" -type f | wc -l) files"
# Wall time and CPU time (user + system; steadier than wall time on a shared machine).
add() {
  local build=$1 dir=$2 status=0
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$bin" --quiet site add --site "$work/site" --key "$work/site.key" \
    --game bench --build "$build" "$dir" >/dev/null || status=$?
  read -r wall user sys < <(tail -1 "$work/time")
  printf '%-28s wall %7.2f s  cpu %7.2f s%s\n' "site add $3" "$wall" "$(echo "$user + $sys" | bc)" \
    "$([ $status = 0 ] || echo "  (refused, exit $status)")"
}
add v1 "$work/v1" "v1 (first)"
add v2 "$work/v2" "v2 (second)"
add v3 "$work/v3" "v3 (third)"
add v2 "$work/v2" "v2 again" 2>/dev/null
# As if the v3 add had stopped while diffing v1 -> v3.
python3 - "$work/site/private/state.json" <<'PY'
import json, sys
state = json.load(open(sys.argv[1]))
state["games"]["bench"]["builds"].remove("v3")
json.dump(state, open(sys.argv[1], "w"), indent=2)
PY
rm "$work/site/public/v1/games/bench/updates/v1/v3"
add v3 "$work/v3" "v3 after interruption"
