#!/usr/bin/env bash
# scripts/test-other-systems.sh — the CLI's tests (unit and integration) run as the other systems'
# builds, from this Linux machine:
#   - the static musl binary (x86_64-unknown-linux-musl), natively;
#   - Windows (x86_64-pc-windows-gnu, MinGW) under Wine 8 from apt, with tests/wine's
#     bcryptprimitives.dll beside the binaries (that Wine lacks the DLL Rust's std imports).
# macOS builds are linted and linked (scripts/check-targets.sh) but not run: no Mac here.
# Idempotent: Wine is installed when missing; its prefix lives in ~/.cache/edgepatch-wine.
# Builds go to target/cross, beside scripts/check-targets.sh's.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export PATH="$HOME/.cargo/bin:$PATH"
log() { echo "[other systems] $*" >&2; }
export CARGO_TARGET_DIR="$REPO/target/cross"

log "cargo test -p edgepatch-cli --target x86_64-unknown-linux-musl"
cargo test -p edgepatch-cli --target x86_64-unknown-linux-musl --quiet

if ! command -v wine >/dev/null 2>&1; then
  log "apt-get install wine64"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wine64 >/dev/null
fi
win=x86_64-pc-windows-gnu
log "cargo test -p edgepatch-cli --target $win, run under $(wine --version 2>/dev/null)"
cargo test -p edgepatch-cli --target "$win" --no-run --quiet
shim="$CARGO_TARGET_DIR/$win/debug/bcryptprimitives.dll"
x86_64-w64-mingw32-gcc -O2 -shared -Wall -Werror -o "$shim" tests/wine/bcryptprimitives.c -ladvapi32
cp "$shim" "$CARGO_TARGET_DIR/$win/debug/deps/"
export WINEPREFIX="$HOME/.cache/edgepatch-wine" WINEDEBUG=-all
mkdir -p "$WINEPREFIX"
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
cargo test -p edgepatch-cli --target "$win" --quiet
