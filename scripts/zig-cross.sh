#!/usr/bin/env bash
# scripts/zig-cross.sh — sourced by check-targets.sh and release.sh: puts cargo-zigbuild and
# zig (both from PyPI, in a venv under target/) on PATH. zig's clang ships macOS's libc headers
# and libSystem stubs, so the C dependencies (zstd-sys, ring) compile for macOS and the CLI
# links without Apple's SDK, which no registry serves. Idempotent.
ZIG_VENV="${ZIG_VENV:-$REPO/target/zig-venv}"
if ! "$ZIG_VENV/bin/cargo-zigbuild" --version >/dev/null 2>&1 || ! "$ZIG_VENV/bin/python" -m ziglang version >/dev/null 2>&1; then
  echo "[zig] pip install ziglang cargo-zigbuild into $ZIG_VENV" >&2
  python3 -m venv "$ZIG_VENV"
  "$ZIG_VENV/bin/pip" install --quiet --disable-pip-version-check "ziglang==0.17.0" "cargo-zigbuild==0.24.1"
fi
export PATH="$ZIG_VENV/bin:$PATH"
