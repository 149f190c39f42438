#!/usr/bin/env bash
# web/scripts/demo.sh [--port N] [--check] — builds the demo portal and the static
# update site (fixture game v1 and v2, patches made by the CLI) and serves them on
# 127.0.0.1 until Ctrl-C, printing the URL. --check serves, fetches the page, library,
# wasm and channel once, and exits (non-interactive). Port: --port or
# EDGEPATCH_DEMO_PORT (default 8080; 0 picks a free one).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
web/scripts/build-all.sh
port="${EDGEPATCH_DEMO_PORT:-8080}"
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port="$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
exec node web/scripts/serve.mjs --host 127.0.0.1 --port "$port" ${args[@]+"${args[@]}"}
