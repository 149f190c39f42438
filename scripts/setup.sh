#!/usr/bin/env bash
# scripts/setup.sh — installs what building and testing edgepatch needs, idempotently:
# anything already present is skipped. Sourced by demo.sh and test.sh.
# Recipe measured on this machine kind: docs/TOOLCHAIN.md.
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

# --- WebAssembly (crates/edgepatch-wasm) and @edgepatch/js (packages/edgepatch-js) ---
# Measured recipe: docs/TOOLCHAIN.md. Each step is skipped when already done.
SETUP_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="$HOME/.cargo/bin:$PATH"
apt_updated=
apt_install() {
  [ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }
  log "apt-get install $*"
  # One retry after finishing any half-configured packages: a fresh machine's
  # first chromium install once failed in dpkg and succeeded when run again.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || {
    log "apt-get install failed; dpkg --configure -a and one retry"
    DEBIAN_FRONTEND=noninteractive dpkg --configure -a || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -f "$@" >/dev/null
  }
}

# zstd-sys compiles libzstd for wasm32 with clang (gcc has no wasm32 backend).
command -v clang >/dev/null 2>&1 || apt_install clang llvm
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || apt_install nodejs npm
# wasm-pack test --headless --chrome drives Debian's Chromium through its chromedriver.
command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || apt_install chromium chromium-driver
# The browser e2e tests run in Firefox too (firefox-esr, driven by puppeteer-core over WebDriver BiDi).
command -v firefox-esr >/dev/null 2>&1 || apt_install firefox-esr
# ...and in WebKit: Debian's WebKitGTK through tests/e2e/webkitgtk_browser.py (Debian's python3
# with its GObject bindings) on an Xvfb display.
# The check is the import the browser makes (python3-gi plus the WebKit2 4.1 typelib and library).
command -v Xvfb >/dev/null 2>&1 && /usr/bin/python3 -c 'import gi; gi.require_version("WebKit2", "4.1")' >/dev/null 2>&1 \
  || apt_install xvfb gir1.2-webkit2-4.1 python3-gi

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  log "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

# wasm-bindgen's CLI must be exactly the library's version (pinned "=X" in the wasm crate).
WASM_BINDGEN_VERSION=$(sed -n '/^name = "wasm-bindgen"$/{n;s/^version = "\(.*\)"$/\1/p;}' "$SETUP_REPO/Cargo.lock")
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  log "cargo install wasm-bindgen-cli $WASM_BINDGEN_VERSION (about 3 minutes)"
  # Not --locked: a dependency version its lock file names is missing from the registry.
  cargo install --quiet --force wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi
if ! command -v wasm-pack >/dev/null 2>&1; then
  log "cargo install wasm-pack (about 2 minutes)"
  cargo install --quiet wasm-pack --version 0.15.1
fi

# The npm workspaces (packages/edgepatch-js, web, worker); reinstalled when a package.json changed.
npm_stamp="$SETUP_REPO/node_modules/.package-lock.json"
if [ ! -e "$SETUP_REPO/node_modules/.bin/edgepatch-js" ] || [ -n "$(find "$SETUP_REPO/package.json" "$SETUP_REPO/package-lock.json" \
  "$SETUP_REPO/packages/edgepatch-js/package.json" "$SETUP_REPO/web/package.json" "$SETUP_REPO/worker/package.json" \
  -newer "$npm_stamp" -print -quit 2>/dev/null)" ]; then
  log "npm install (workspace)"
  (cd "$SETUP_REPO" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi

# The wasm build @edgepatch/js (and `npx edgepatch-js`) loads; rebuilt when a source changed.
edgepatch_js_wasm="$SETUP_REPO/packages/edgepatch-js/wasm/edgepatch_wasm_bg.wasm"
# A package.json beside it is the CommonJS build of earlier versions (--target nodejs): rebuilt too.
if [ ! -e "$edgepatch_js_wasm" ] || [ -e "$SETUP_REPO/packages/edgepatch-js/wasm/package.json" ] || [ -n "$(find "$SETUP_REPO/crates/edgepatch-core/src" "$SETUP_REPO/crates/edgepatch-core/Cargo.toml" \
  "$SETUP_REPO/crates/edgepatch-wasm/src" "$SETUP_REPO/crates/edgepatch-wasm/Cargo.toml" "$SETUP_REPO/Cargo.lock" "$SETUP_REPO/Cargo.toml" \
  "$SETUP_REPO/.cargo/config.toml" -newer "$edgepatch_js_wasm" -print -quit 2>/dev/null)" ]; then
  log "wasm-pack build --target web (packages/edgepatch-js/wasm)"
  (cd "$SETUP_REPO/packages/edgepatch-js" && npm run --silent build >/dev/null 2>"${TMPDIR:-/tmp}/edgepatch-wasm-build.log") \
    || { cat "${TMPDIR:-/tmp}/edgepatch-wasm-build.log" >&2; exit 1; }
fi
log "wasm ready: $(wasm-pack --version), $(wasm-bindgen --version), node $(node --version)"

# Node 22 for wrangler (the Worker: worker/), project-local in .tools/node22; wrangler
# refuses the system Node 20 (docs/TOOLCHAIN.md). Installed here, put on PATH only by
# the worker scripts that run wrangler (everything else keeps the system Node).
"$SETUP_REPO/worker/scripts/node22.sh" >/dev/null
