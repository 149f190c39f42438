#!/bin/sh
# install.sh — installs a released edgepatch CLI: downloads edgepatch-<version>-<target> and
# SHA256SUMS from a release, refuses an archive whose SHA-256 is not the one SHA256SUMS lists,
# extracts it and puts the binary's directory on PATH ($GITHUB_PATH when run by Actions).
# The setup-edgepatch action (action.yml beside this file) runs it; so can a person or
# another CI. Settings, from the environment:
#   EDGEPATCH_VERSION       0.1.0, v0.1.0 or latest (default)
#   EDGEPATCH_RELEASE_URL   the directory holding the release's assets; default: the GitHub
#                           release of EDGEPATCH_REPOSITORY for that version
#   EDGEPATCH_REPOSITORY    owner/name on GitHub (needed without EDGEPATCH_RELEASE_URL)
#   EDGEPATCH_TARGET        a Rust target triple; default: this machine's (static musl on Linux)
#   EDGEPATCH_INSTALL_DIR   default: $RUNNER_TOOL_CACHE (else ~/.cache)/edgepatch/<version>/<target>
# Prints the binary's directory last. POSIX sh, curl or wget, tar, sha256sum or shasum.
set -eu

fail() { echo "setup-edgepatch: $*" >&2; exit 1; }

version=${EDGEPATCH_VERSION:-latest}
version=${version#v}
target=${EDGEPATCH_TARGET:-}
if [ -z "$target" ]; then
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64 | Linux-amd64) target=x86_64-unknown-linux-musl ;;
    Linux-aarch64 | Linux-arm64) target=aarch64-unknown-linux-musl ;;
    Darwin-arm64 | Darwin-aarch64) target=aarch64-apple-darwin ;;
    Darwin-x86_64) target=x86_64-apple-darwin ;;
    *) fail "no release archive for $(uname -s) $(uname -m); set EDGEPATCH_TARGET (on Windows the action runs install.ps1)" ;;
  esac
fi
case "$target" in *windows*) fail "$target: Windows archives are installed by install.ps1" ;; esac

url=${EDGEPATCH_RELEASE_URL:-}
if [ -z "$url" ]; then
  [ -n "${EDGEPATCH_REPOSITORY:-}" ] || fail "set EDGEPATCH_REPOSITORY (owner/name) or EDGEPATCH_RELEASE_URL"
  if [ "$version" = latest ]; then
    url="https://github.com/$EDGEPATCH_REPOSITORY/releases/latest/download"
  else
    url="https://github.com/$EDGEPATCH_REPOSITORY/releases/download/v$version"
  fi
fi
url=${url%/}

download() { # URL FILE
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL --retry 3 -o "$2" "$1" || fail "could not download $1"
  else
    wget -q -O "$2" "$1" || fail "could not download $1"
  fi
}
sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1"; else shasum -a 256 "$1"; fi | cut -d' ' -f1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
download "$url/SHA256SUMS" "$work/SHA256SUMS"

# The archive's name, from SHA256SUMS: "<sha256>  edgepatch-<version>-<target>.tar.gz".
# For `latest` the version is whichever that release holds.
if [ "$version" = latest ]; then
  name=$(awk -v t="$target" '{ n = $2; sub(/^\*/, "", n) } n ~ ("^edgepatch-.*-" t "\\.tar\\.gz$") { print n; exit }' "$work/SHA256SUMS")
  [ -n "$name" ] || fail "$url/SHA256SUMS lists no archive for $target"
  version=${name#edgepatch-}
  version=${version%-"$target".tar.gz}
else
  name="edgepatch-$version-$target.tar.gz"
fi
expected=$(awk -v n="$name" '{ f = $2; sub(/^\*/, "", f) } f == n { print $1; exit }' "$work/SHA256SUMS")
[ -n "$expected" ] || fail "$url/SHA256SUMS lists no $name"

download "$url/$name" "$work/$name"
actual=$(sha256 "$work/$name")
[ "$actual" = "$expected" ] || fail "$name: SHA-256 $actual, but SHA256SUMS says $expected; refusing to install it"

dir=${EDGEPATCH_INSTALL_DIR:-${RUNNER_TOOL_CACHE:-$HOME/.cache}/edgepatch/$version/$target}
mkdir -p "$dir"
tar -xzf "$work/$name" -C "$work"
cp "$work/edgepatch-$version-$target/edgepatch" "$dir/edgepatch"
chmod +x "$dir/edgepatch"
[ -z "${GITHUB_PATH:-}" ] || echo "$dir" >> "$GITHUB_PATH"
[ -z "${GITHUB_OUTPUT:-}" ] || { echo "version=$version"; echo "path=$dir"; } >> "$GITHUB_OUTPUT"
echo "setup-edgepatch: edgepatch $version ($target) in $dir" >&2
echo "$dir"
