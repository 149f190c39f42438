#!/usr/bin/env bash
# worker/scripts/deploy.sh [--env staging] [--dry-run [--outdir DIR]] [wrangler deploy options]
# `npm run deploy` (and `npm run deploy:dry-run`): builds the Worker's wasm, checks the
# Worker's types, and runs `wrangler deploy` with Node 22 (wrangler refuses Node 20).
# A real deploy needs `wrangler login` (or CLOUDFLARE_API_TOKEN + CLOUDFLARE_ACCOUNT_ID) and
# the resources and secrets of worker/README.md "Deploying to your account".
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
source worker/scripts/node22.sh
worker/scripts/build-wasm.sh
(cd worker && npx --no-install tsc -p tsconfig.json)
export WRANGLER_SEND_METRICS=false
exec npx --no-install wrangler deploy --config wrangler.toml "$@"
