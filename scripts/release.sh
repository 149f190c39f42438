#!/usr/bin/env bash
# scripts/release.sh [TARGET...] — the artifacts a release publishes, in dist/release/:
#   edgepatch-<version>-<target>.tar.gz (.zip for Windows)  the CLI with README and CHANGELOG
#   <name>-<version>.tgz                                    the npm packages (`npm pack`)
#   SHA256SUMS                                              every file above
# With no arguments: every target in DEFAULT_TARGETS and the npm packages. Arguments name
# what to build instead, a Rust target triple or `npm` (the npm packages) each, e.g.
# `scripts/release.sh x86_64-unknown-linux-musl` for one static Linux CLI (what
# tests/release/ runs). Default targets, all built on Linux:
#   x86_64-unknown-linux-gnu, x86_64-unknown-linux-musl (static), x86_64-pc-windows-gnu,
#   aarch64-unknown-linux-musl (static, cross-linked by zig: scripts/zig-cross.sh).
# Pass aarch64-apple-darwin / x86_64-apple-darwin for macOS: built natively on a Mac
# (.github/workflows/release.yml does), elsewhere cross-linked by zig (not code-signed
# beyond the linker's ad-hoc signature, and not run here: no Mac).
# Each binary is checked with `file` before packing. The versions of the Cargo workspace and
# of every npm package must agree (CHANGELOG.md says what each version holds).
# Builds go to ${CARGO_TARGET_DIR:-target}/cross, the artifacts to ${RELEASE_DIR:-dist/release}.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export PATH="$HOME/.cargo/bin:$PATH"
DEFAULT_TARGETS=(x86_64-unknown-linux-gnu x86_64-unknown-linux-musl x86_64-pc-windows-gnu aarch64-unknown-linux-musl)
# The npm packages a release packs, by directory.
NPM_PACKAGES=(web packages/edgepatch-js)
version=$(cargo pkgid -p edgepatch-cli | sed 's/.*[#@]//')
# Release binaries without debug info, stripped.
export CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=true
cross="${CARGO_TARGET_DIR:-$REPO/target}/cross"

targets=() npm=
for a in "$@"; do
  case "$a" in
    npm) npm=1 ;;
    -*) echo "release: unknown option $a (arguments are target triples or npm)" >&2; exit 2 ;;
    *) targets+=("$a") ;;
  esac
done
[ $# -gt 0 ] || { targets=("${DEFAULT_TARGETS[@]}"); npm=1; }

for d in "${NPM_PACKAGES[@]}"; do
  v=$(node -p "require('./$d/package.json').version")
  [ "$v" = "$version" ] || { echo "release: $d/package.json has version $v, the Cargo workspace $version" >&2; exit 1; }
done

out="${RELEASE_DIR:-$REPO/dist/release}"
rm -rf "$out"
mkdir -p "$out"
source scripts/cross-cc.sh
for t in "${targets[@]}"; do
  rustup target list --installed | grep -qx "$t" || rustup target add "$t"
  [ "$(uname -s)" != Linux ] || need_cross_cc "$t"
  echo "[release] $t" >&2
  # Cross-linked by zig: macOS off a Mac (no Apple SDK here) and Linux on ARM (no
  # aarch64 musl toolchain in the distribution; zig ships one).
  if [[ ("$t" == *apple-darwin && "$(uname -s)" != Darwin) || ("$t" == aarch64-unknown-linux-* && "$(uname -m)" != aarch64) ]]; then
    [ -n "${ZIG_READY:-}" ] || { source scripts/zig-cross.sh; ZIG_READY=1; }
    CARGO_TARGET_DIR="$cross" cargo-zigbuild zigbuild --release --quiet -p edgepatch-cli --target "$t"
  else
    CARGO_TARGET_DIR="$cross" cargo build --release --quiet -p edgepatch-cli --target "$t"
  fi
  exe=edgepatch
  case "$t" in *windows*) exe=edgepatch.exe ;; esac
  bin="$cross/$t/release/$exe"
  kind=$(file -b "$bin")
  static() { [[ "$kind" == *"statically linked"* || "$kind" == *"static-pie linked"* ]]; }
  case "$t" in
    *windows*) [[ "$kind" == PE32+* ]] ;;
    aarch64-*musl*) [[ "$kind" == *"ARM aarch64"* ]] && static ;;
    x86_64-*musl*) [[ "$kind" == *x86-64* ]] && static ;;
    *linux*) [[ "$kind" == ELF* ]] ;;
    *darwin*) [[ "$kind" == Mach-O* ]] ;;
  esac || { echo "release: $bin is not what $t needs: $kind" >&2; exit 1; }
  stage=$(mktemp -d)
  name="edgepatch-$version-$t"
  mkdir "$stage/$name"
  cp "$bin" README.md CHANGELOG.md "$stage/$name/"
  case "$t" in
    *windows*) (cd "$stage" && zip -qr "$out/$name.zip" "$name") ;;
    *) tar -C "$stage" -czf "$out/$name.tar.gz" "$name" ;;
  esac
  rm -rf "$stage"
done

if [ -n "$npm" ]; then
  # The browser package bundles the apply-only wasm module (its "prepack" runs
  # web/scripts/build.mjs, which needs it built); @edgepatch/js's prepack builds its own.
  echo "[release] npm: ${NPM_PACKAGES[*]}" >&2
  scripts/build-wasm.sh --if-stale web-apply
  for d in "${NPM_PACKAGES[@]}"; do
    (cd "$d" && npm pack --silent --pack-destination "$out" >/dev/null)
  done
fi

(cd "$out" && sha256sum -- * > SHA256SUMS)
ls -l "$out" >&2
