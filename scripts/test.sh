#!/usr/bin/env bash
# scripts/test.sh — sets up what is needed and runs every test.
# Benchmarks are not part of it (bench/run.sh; results in BENCHMARKS.md).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"

# A full run writes about 7 GB (target/ for native, wasm and cross builds; the Wine prefix).
# With EDGEPATCH_LEAN_DISK=1 (set by .ci/run, and here when the disk is short) each stage's build
# products are removed once no later stage needs them, so the run needs room for its largest
# stage, not for all of them. A full disk fails a link step with a bus error far from its cause,
# so a short one is said up front.
free_mb=$(df -Pm "$REPO" | awk 'NR == 2 { print $4 }')
if [ "${free_mb:-0}" -lt 8000 ] && [ -z "${EDGEPATCH_LEAN_DISK:-}" ]; then
  echo "[lean disk] ${free_mb} MB free on the disk holding $REPO, less than a full run's 7 GB: build products are removed after each stage (EDGEPATCH_LEAN_DISK=1)" >&2
  export EDGEPATCH_LEAN_DISK=1
fi
source scripts/lean_disk.sh

# Each stage's wall time, printed when the run ends (passed or not): where the minutes go.
stage_names=() stage_starts=()
stage() {
  echo "== $*"
  stage_names+=("$1") stage_starts+=("$SECONDS")
}
stage_times() {
  local rc=$? i n=${#stage_names[@]} end
  if [ -n "${e2e_pid:-}" ]; then
    kill -- -"$e2e_pid" 2>/dev/null || true
    echo "== the background browser tests were stopped; their output so far:" && tail -n 40 "$e2e_log"
  fi
  [ "$n" -gt 0 ] || return "$rc"
  echo "== stage times (s), $SECONDS s in all$([ "$rc" = 0 ] || echo ", stopped by a failure"):"
  for ((i = 0; i < n; i++)); do
    end=$([ $((i + 1)) -lt "$n" ] && echo "${stage_starts[i + 1]}" || echo "$SECONDS")
    printf '%6d  %s\n' $((end - stage_starts[i])) "${stage_names[i]:0:100}"
  done
  return "$rc"
}
trap stage_times EXIT

stage "setup (scripts/setup.sh: toolchains, browsers, packages; idempotent)"
source scripts/setup.sh

stage "fixtures are what make_fixtures.py generates"
python3 fixtures/make_fixtures.py --check
node fixtures/arcade/make_arcade.mjs --check

stage "Rust style: cargo fmt --check (rustfmt.toml)"
cargo fmt --all --check

stage "Rust workspace: unit, integration, golden-vector and hostile-input tests"
cargo test --workspace --quiet 2>&1 | tee "${TMPDIR:-/tmp}/edgepatch-cargo-test.log"

stage "Rust lints: cargo clippy -D warnings (native, and the wasm crate for wasm32)"
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo clippy -p edgepatch-wasm --target wasm32-unknown-unknown --quiet -- -D warnings
drop_build target/debug

stage "WebAssembly: every variant (scripts/build-wasm.sh: web for Workers, web-apply for browsers, node for edgepatch-js)"
scripts/build-wasm.sh
for w in crates/edgepatch-wasm/pkg/web/edgepatch_wasm_bg.wasm crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm_bg.wasm packages/edgepatch-js/wasm/edgepatch_wasm_bg.wasm; do
  echo "$w: $(stat -c %s "$w") bytes, $(gzip -9c "$w" | wc -c) gzip -9"
done

stage "WebAssembly: wasm-pack test --node (golden fixtures through the JS bindings)"
wasm-pack test --node --mode no-install crates/edgepatch-wasm --test node 2>&1 | grep -v '^\s*Compiling\|failed to get wasm-pack version'

stage "WebAssembly: the same cases in headless Chromium (wasm-pack test --headless --chrome)"
# Chromium leaves a ~30 MB scoped_dir in TMPDIR after a run: it gets a directory of its own.
chromium_tmp=$(mktemp -d)
TMPDIR="$chromium_tmp" wasm-pack test --headless --chrome --chromedriver "$(command -v chromedriver)" --mode no-install crates/edgepatch-wasm --test browser 2>&1 \
  | grep -v '^\s*Compiling\|failed to get wasm-pack version'
rm -rf "$chromium_tmp"
drop_build target/wasm32-unknown-unknown/debug

stage "@edgepatch/js (Node and workerd, over the wasm build): same bytes as the native CLI, byte-exact file and tree apply, the packed tarball, its types and the API reference"
cargo build --release --quiet --bin edgepatch
EDGEPATCH_BIN="$REPO/target/release/edgepatch" node --test packages/edgepatch-js/test/*.test.js
npx --no-install edgepatch-js --help >/dev/null
npm run --silent typecheck -w @edgepatch/js
npm run --silent test:workerd -w @edgepatch/js
echo "API reference (typedoc, every warning an error): @edgepatch/web and @edgepatch/js"
npm run --silent docs:api:check -w @edgepatch/js

stage "Releases: scripts/release.sh for the static Linux CLI and the npm tarballs (dist/release-test), which the browser tests and the release tests below use as a user downloads them"
export EDGEPATCH_RELEASE_DIR="$REPO/dist/release-test"
RELEASE_DIR="$EDGEPATCH_RELEASE_DIR" bash scripts/release.sh x86_64-unknown-linux-musl npm

# The browser tests use about one core (one browser at a time, mostly waiting on it), so they
# run in the background beside the next stages, which build and lint on the other core; their
# output follows when they end. A failure anywhere else stops them (stage_times).
stage "web/: type-check and browser end-to-end tests in Chromium, Firefox and WebKit (install, update, resume, hostile input, storage, site headers, the game through the Service Worker, the packed example), started in the background"
e2e_log=$(mktemp)
e2e_start=$SECONDS
setsid bash web/scripts/test.sh >"$e2e_log" 2>&1 &
e2e_pid=$!

stage "Fuzzing: the patch reader (patch_apply) and the wasm transform's inverse (wasm_inverse), 60 s each (scripts/fuzz.sh; fuzz/README.md)"
bash scripts/fuzz.sh 60
drop_build fuzz/target

stage "Other systems: the CLI's clippy -D warnings for Windows, static Linux and macOS (Apple silicon, Intel) (scripts/check-targets.sh; macOS through cargo-zigbuild)"
bash scripts/check-targets.sh

stage "Other systems: the CLI's tests as the static musl binary (natively) and as the Windows build (under Wine) (scripts/test-other-systems.sh)"
bash scripts/test-other-systems.sh
stage "Releases: the static Linux CLI of dist/release-test installed from a local stand-in for the GitHub release by the setup-edgepatch action's script, checksum refusal included (tests/release/)"
node --test tests/release/*.test.mjs
drop_build target/cross target/zig-venv "$HOME/.cache/edgepatch-wine"

stage "web/: the browser end-to-end tests' output (started above)"
e2e_rc=0
wait "$e2e_pid" || e2e_rc=$?
e2e_pid=
cat "$e2e_log"
rm -f "$e2e_log"
echo "web/scripts/test.sh: exit $e2e_rc after $((SECONDS - e2e_start)) s"
[ "$e2e_rc" = 0 ]

stage "Worker: typecheck, vitest in workerd (real R2/DO/Cache), dry-run bundle size, edgepatch publish/update against wrangler dev"
worker/scripts/test.sh

stage "the README's main command, non-interactively (EDGEPATCH_DEMO_CHECK=1 scripts/demo.sh --port 0)"
EDGEPATCH_DEMO_CHECK=1 bash scripts/demo.sh --port 0
