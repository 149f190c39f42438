#!/usr/bin/env bash
# web/scripts/test.sh — builds web/ (and the wasm module and static update site it
# needs), type-checks it and runs the browser end-to-end tests (tests/e2e: every test in
# Debian's Chromium via playwright-core, Debian's Firefox ESR via puppeteer-core and Debian's
# WebKitGTK via tests/e2e/webkitgtk_browser.py, see tests/e2e/engines.mjs; real OPFS, real
# HTTP). 145 tests in about 13 minutes here (2 cores under other builds' load); a test whose
# WebKit web process crashes runs once more (engineTests in tests/e2e/engines.mjs).
# Assumes scripts/setup.sh ran (cargo, wasm-pack, chromium, firefox-esr, WebKitGTK + Xvfb,
# node 20, npm workspaces). Node 20 applies --test-timeout to a whole file, hence 20 minutes.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
web/scripts/build-all.sh --big
echo "[web] tsc --noEmit (web/tsconfig.json)" >&2
node_modules/.bin/tsc -p web/tsconfig.json
node_modules/.bin/tsc -p web/test-types/tsconfig.json --strict --noEmit # the public types as a user's code sees them
echo "[web] browser e2e tests (tests/e2e)" >&2
node --test --test-concurrency=1 --test-timeout=1200000 tests/e2e/*.test.mjs
