#!/usr/bin/env bash
# scripts/demo.sh [--port N] — the main job: builds the CLI, diffs fixture game v1 -> v2,
# applies the patch to a copy of v1, verifies the result, and prints what it saved;
# then does the same update through the Worker (wrangler dev: publish v1 and v2, edgepatch
# update); then serves the demo game portal (web/) on 127.0.0.1 and prints its URL (Ctrl-C stops it).
# EDGEPATCH_DEMO_CHECK=1: serve, fetch the page once and exit (non-interactive).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
source scripts/setup.sh

cargo build --release --quiet --bin edgepatch
EDGEPATCH=$REPO/target/release/edgepatch
WORK=$(mktemp -d "${TMPDIR:-/tmp}/edgepatch-demo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

mkdir -p "$WORK/v1" "$WORK/v2"
tar -xf fixtures/game-v1.tar -C "$WORK/v1"
tar -xf fixtures/game-v2.tar -C "$WORK/v2"

echo "== diff fixture game v1 -> v2"
"$EDGEPATCH" diff "$WORK/v1" "$WORK/v2" "$WORK/v1-to-v2.patch"
echo "== inspect"
"$EDGEPATCH" inspect "$WORK/v1-to-v2.patch"
echo "== manifest: the per-file index a browser client looks entries up in"
"$EDGEPATCH" manifest --old "$WORK/v1" --new "$WORK/v2" --from game-v1 --to game-v2 "$WORK/v1-to-v2.patch" "$WORK/v1-to-v2.manifest"
echo "== apply to v1 (untouched), creating a new build"
"$EDGEPATCH" apply "$WORK/v1" "$WORK/v1-to-v2.patch" "$WORK/updated"
echo "== verify the result against v2's signature"
"$EDGEPATCH" sign "$WORK/v2" "$WORK/v2.signature"
"$EDGEPATCH" verify "$WORK/updated" "$WORK/v2.signature"

new_bytes=$(du -sb --apparent-size "$WORK/v2" | cut -f1)
tar_bytes=$(stat -c %s fixtures/game-v2.tar)
patch_bytes=$(stat -c %s "$WORK/v1-to-v2.patch")
python3 - "$patch_bytes" "$tar_bytes" <<'PY'
import sys
patch, full = int(sys.argv[1]), int(sys.argv[2])
print(f"== downloaded {patch:,} bytes instead of {full:,} (the whole v2 build): saved {100 * (1 - patch / full):.1f}%")
PY

echo "== the same update through the Worker: publish v1 and v2, then edgepatch update (patch generated on demand)"
# The demo passes the development key with --public-key; the config directory (the channel
# positions it remembers) is a throwaway one, not the user's.
EDGEPATCH_CONFIG_DIR="$WORK/config" EDGEPATCH_BIN="$EDGEPATCH" node worker/scripts/demo.mjs "$WORK/v1" "$WORK/v2"

echo "== the demo game portal: installs v1 into the browser's OPFS, then updates it to v2"
rm -rf "$WORK"; trap - EXIT
if [ -n "${EDGEPATCH_DEMO_CHECK:-}" ]; then
  exec web/scripts/demo.sh --check "$@"
fi
exec web/scripts/demo.sh "$@"
