#!/usr/bin/env bash
# scripts/typescript-types.sh — writes crates/edgepatch-format/typescript/update_protocol.d.ts,
# the TypeScript declarations of the update protocol's JSON documents, from their Rust
# definitions (ts-rs; crates/edgepatch-format/src/typescript.rs). scripts/check.sh fails
# while the committed file differs from what this writes.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
cargo test -p edgepatch-format --lib --quiet typescript::write_typescript_declarations -- --ignored --exact
echo "wrote crates/edgepatch-format/typescript/update_protocol.d.ts" >&2
