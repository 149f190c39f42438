#!/usr/bin/env bash
# scripts/setup.sh — installs what building and testing edgepatch needs, idempotently:
# anything already present is skipped. Sourced by demo.sh and test.sh.
# Recipe measured on this machine kind: ../shared/TOOLCHAIN.md.
set -euo pipefail

log() { echo "[setup] $*" >&2; }

# Rust toolchain (rustup is on the machine image; a missing one is installed from the registry-less
# path is not possible here, so say so clearly).
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup: cargo not found; install Rust with rustup first" >&2
    exit 1
  fi
fi

# A C compiler for zstd-sys (gcc is on the image; clang is only needed for wasm builds).
if ! command -v cc >/dev/null 2>&1; then
  log "apt-get install build-essential"
  apt-get update -qq && apt-get install -y -qq build-essential >/dev/null
fi
log "toolchain ready: $(cargo --version)"
