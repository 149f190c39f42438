#!/usr/bin/env bash
# scripts/release.sh [TARGET...] — release artifacts of the CLI a CI job (or a person)
# publishes: dist/release/edgepatch-<version>-<target>.tar.gz (.zip for Windows) with the
# binary, README and licenses, and dist/release/SHA256SUMS. Targets built here by default:
# x86_64-unknown-linux-gnu, x86_64-unknown-linux-musl (static), x86_64-pc-windows-gnu.
# Pass aarch64-apple-darwin / x86_64-apple-darwin for macOS: built natively on a Mac
# (.github/workflows/release.yml does), elsewhere cross-linked by zig (scripts/zig-cross.sh;
# not code-signed beyond the linker's ad-hoc signature, and not run here: no Mac).
# Each binary is checked with `file` before packing.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export PATH="$HOME/.cargo/bin:$PATH"
version=$(cargo pkgid -p edgepatch-cli | sed 's/.*[#@]//')
# Release binaries without debug info, stripped.
export CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-linux-gnu x86_64-unknown-linux-musl x86_64-pc-windows-gnu)
out="$REPO/dist/release"
rm -rf "$out"
mkdir -p "$out"
for t in "${targets[@]}"; do
  rustup target list --installed | grep -qx "$t" || rustup target add "$t"
  echo "[release] $t" >&2
  if [[ "$t" == *apple-darwin && "$(uname -s)" != Darwin ]]; then
    [ -n "${ZIG_READY:-}" ] || { source scripts/zig-cross.sh; ZIG_READY=1; }
    CARGO_TARGET_DIR="$REPO/target/cross" cargo-zigbuild zigbuild --release --quiet -p edgepatch-cli --target "$t"
  else
    CARGO_TARGET_DIR="$REPO/target/cross" cargo build --release --quiet -p edgepatch-cli --target "$t"
  fi
  exe=edgepatch
  case "$t" in *windows*) exe=edgepatch.exe ;; esac
  bin="$REPO/target/cross/$t/release/$exe"
  kind=$(file -b "$bin")
  case "$t" in
    *windows*) [[ "$kind" == PE32+* ]] ;;
    *musl*) [[ "$kind" == *"statically linked"* || "$kind" == *"static-pie linked"* ]] ;;
    *linux*) [[ "$kind" == ELF* ]] ;;
    *darwin*) [[ "$kind" == Mach-O* ]] ;;
  esac || { echo "release: $bin is not what $t needs: $kind" >&2; exit 1; }
  stage=$(mktemp -d)
  name="edgepatch-$version-$t"
  mkdir "$stage/$name"
  cp "$bin" README.md "$stage/$name/"
  case "$t" in
    *windows*) (cd "$stage" && zip -qr "$out/$name.zip" "$name") ;;
    *) tar -C "$stage" -czf "$out/$name.tar.gz" "$name" ;;
  esac
  rm -rf "$stage"
done
(cd "$out" && sha256sum -- * > SHA256SUMS)
ls -l "$out" >&2
