#!/usr/bin/env bash
# web/scripts/build-all.sh [--big] — everything the browser library, its demo and its
# tests need, from a fresh clone (after scripts/setup.sh): the native CLI, the
# apply-only wasm module for browsers, the bundles (web/dist/lib, web/dist/demo) and
# the static update site made with the CLI (web/dist/updates; --big adds the large
# multi-segment game the resume test uses; EDGEPATCH_RELEASE_DIR: made by a release's CLI).
# Output is gitignored.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
export PATH="$HOME/.cargo/bin:$PATH"
step() { echo "[web] $*" >&2; }

step "cargo build --release --bin edgepatch"
cargo build --release --quiet --bin edgepatch
step "scripts/build-wasm.sh --if-stale web-apply -> crates/edgepatch-wasm/pkg/web-apply"
scripts/build-wasm.sh --if-stale web-apply
step "esbuild bundles -> web/dist"
node web/scripts/build.mjs
# With EDGEPATCH_RELEASE_DIR (scripts/release.sh's output), the site is made by the static Linux
# CLI of that release, unpacked from its archive after its SHA-256 is checked, as a studio's CI
# would use it; else by the CLI built above.
site_cli="${CARGO_TARGET_DIR:-$repo/target}/release/edgepatch"
if [ -n "${EDGEPATCH_RELEASE_DIR:-}" ]; then
  archive=$(cd "$EDGEPATCH_RELEASE_DIR" && ls edgepatch-*-x86_64-unknown-linux-musl.tar.gz)
  (cd "$EDGEPATCH_RELEASE_DIR" && grep " $archive\$" SHA256SUMS | sha256sum -c --quiet -)
  unpacked=$(mktemp -d)
  trap 'rm -rf "$unpacked"' EXIT
  tar -C "$unpacked" -xzf "$EDGEPATCH_RELEASE_DIR/$archive"
  site_cli=$(echo "$unpacked"/*/edgepatch)
  step "the site's CLI: $archive ($("$site_cli" --version))"
fi
step "static update site -> web/dist/updates"
node web/scripts/make-static-site.mjs --edgepatch "$site_cli" "$@"
