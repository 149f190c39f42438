#!/usr/bin/env bash
# packages/edgepatch-js/test/workerd/run.sh — docs/EMBEDDING.md's Worker example in workerd
# (vitest.config.mjs). wrangler's vitest pool needs Node 22 (worker/scripts/node22.sh).
set -euo pipefail
cd "$(dirname "$0")"
REPO=$(cd ../../../.. && pwd)
source "$REPO/worker/scripts/node22.sh"
export WRANGLER_SEND_METRICS=false CLOUDFLARE_CF_FETCH_ENABLED=false
"$REPO/node_modules/.bin/vitest" run --config vitest.config.mjs --root . --reporter=dot
