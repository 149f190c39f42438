#!/usr/bin/env bash
# worker/scripts/dev.sh — `npm run dev:worker`: wrangler dev on 127.0.0.1:8787 with local
# R2, Durable Objects and cache (state in .wrangler/state), secrets from .dev.vars if it
# exists, else the committed development ones in .dev.vars.example.
# EDGEPATCH_PORT overrides the port; extra arguments go to wrangler (e.g. --persist-to DIR).
# It runs as ENVIRONMENT=development (wrangler.toml says production, which refuses the
# development key and token).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
source worker/scripts/node22.sh
worker/scripts/build-wasm.sh
vars=.dev.vars.example
[ -f .dev.vars ] && vars=.dev.vars
export WRANGLER_SEND_METRICS=false CLOUDFLARE_CF_FETCH_ENABLED=false
exec npx --no-install wrangler dev --config wrangler.toml --ip 127.0.0.1 --port "${EDGEPATCH_PORT:-8787}" --env-file "$vars" --var ENVIRONMENT:development --show-interactive-dev-session=false "$@"
