#!/usr/bin/env bash
# worker/scripts/test.sh — the Worker's tests (after scripts/setup.sh): the vitest suite in
# workerd (real local R2, Durable Objects, Cache) and the cross-component test of the native
# CLI against `wrangler dev` (tests/worker-cli).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
source worker/scripts/node22.sh
worker/scripts/build-wasm.sh
export WRANGLER_SEND_METRICS=false CLOUDFLARE_CF_FETCH_ENABLED=false
echo "== worker: typecheck"
(cd worker && npx --no-install tsc -p tsconfig.json)
echo "== worker: vitest in workerd (access, channels, pre-generation, backoff, rate limit, settings, integrity, publish, idempotent publish, delete, retention, stale uploads, refused uploads, patches, ranges, cache, statements, race)"
(cd worker && npx --no-install vitest run --reporter=dot 2>&1 | grep -v '^exception = \|^stack: \|^uncaught exception')
echo "== worker: npm run deploy:dry-run (wasm build, typecheck, wrangler deploy --dry-run; production and staging)"
rm -rf "${TMPDIR:-/tmp}/edgepatch-worker-dry-run"
npm run --silent -w worker deploy:dry-run 2>&1 | grep -E "Total Upload|dry-run"
npm run --silent -w worker deploy:dry-run -- --env staging 2>&1 | grep -E "Total Upload|dry-run"
echo "== worker + CLI: edgepatch publish/update against wrangler dev (tests/worker-cli)"
cargo build --release --quiet --bin edgepatch
EDGEPATCH_BIN="$REPO/target/release/edgepatch" node --test tests/worker-cli/worker-cli.test.mjs
