#!/usr/bin/env bash
# worker/scripts/build-wasm.sh — the Worker's wasm (full variant, with the generator):
# crates/edgepatch-wasm/pkg/web, rebuilt only when a Rust source is newer than it.
set -euo pipefail
exec "$(dirname "$0")/../../scripts/build-wasm.sh" --if-stale web
