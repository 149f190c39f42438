#!/usr/bin/env bash
# scripts/check-targets.sh — the CLI for the other systems it ships on, from this Linux
# machine: cargo clippy -D warnings (every target: code, tests) for Windows
# (x86_64-pc-windows-gnu, MinGW from apt), a static Linux binary (x86_64-unknown-linux-musl)
# and macOS on Apple silicon and Intel (aarch64/x86_64-apple-darwin: the C dependencies built
# by zig's clang through cargo-zigbuild, scripts/zig-cross.sh, which needs no Apple SDK).
# Idempotent: targets and linkers are installed when missing.
# Cross builds go to target/cross so they never invalidate the native build's cache.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export PATH="$HOME/.cargo/bin:$PATH"
log() { echo "[targets] $*" >&2; }

macos=(aarch64-apple-darwin x86_64-apple-darwin)
for t in x86_64-pc-windows-gnu x86_64-unknown-linux-musl "${macos[@]}"; do
  rustup target list --installed | grep -qx "$t" || { log "rustup target add $t"; rustup target add "$t"; }
done
# C compilers for the C dependencies (zstd-sys, ring): MinGW for Windows, musl-gcc for musl.
source scripts/cross-cc.sh
need_cross_cc x86_64-pc-windows-gnu x86_64-unknown-linux-musl

export CARGO_TARGET_DIR="$REPO/target/cross"
for t in x86_64-pc-windows-gnu x86_64-unknown-linux-musl; do
  log "cargo clippy -p edgepatch-cli --all-targets --target $t -D warnings"
  cargo clippy -p edgepatch-cli --all-targets --target "$t" --quiet -- -D warnings
done
source scripts/zig-cross.sh
for t in "${macos[@]}"; do
  log "cargo zigbuild clippy -p edgepatch-cli --all-targets --target $t -D warnings"
  cargo-zigbuild clippy -p edgepatch-cli --all-targets --target "$t" --quiet -- -D warnings
done
