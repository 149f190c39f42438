#!/usr/bin/env bash
# scripts/check.sh — the fast check, for every change: import cycles (Rust and TypeScript)
# and source rules,
# formatting, lints, the unit tests and the golden, hostile-input, tree-limit and
# reader-capability tests of the core (and FORMAT.md's reject rules against the hostile
# vectors), and the TypeScript type checks.
# Minutes with a warm build cache; the full suite (browsers, workerd, other systems) is
# scripts/test.sh. Assumes the toolchain is installed (scripts/setup.sh; scripts/test.sh runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
start=$SECONDS

echo "== import cycles between modules (scripts/module_cycles.allow names the known ones)"
python3 scripts/module_cycles.py --allow scripts/module_cycles.allow crates/*

# Runtime imports only (-T drops type-only ones, which are erased when built).
if [ -x node_modules/.bin/dpdm ]; then
  echo "== import cycles between TypeScript modules (web/, worker/; dpdm)"
  node_modules/.bin/dpdm -T --no-tree --no-warning --no-progress --circular --exit-code circular:1 'web/src/**/*.ts' 'worker/src/**/*.ts'
else
  echo "== TypeScript import cycles skipped: node_modules is missing (scripts/setup.sh)"
fi

echo "== source rules: no file over 800 lines, no environment reads or printing in library crates"
python3 scripts/source_rules.py

echo "== cargo fmt --check"
cargo fmt --all --check

echo "== cargo clippy -D warnings (native, every target)"
cargo clippy --workspace --all-targets --quiet -- -D warnings

# The fuzz crate is outside the workspace: its seed generator and targets use the core's types.
echo "== the fuzz crate compiles: its targets and seed generator (cargo check, stable; fuzz/)"
cargo check --manifest-path fuzz/Cargo.toml --examples --lib --bins --quiet

echo "== unit tests of every crate, and the core's golden, hostile-input and tree-limit tests"
cargo test --workspace --lib --bins --quiet
echo "== TypeScript declarations of the protocol's documents: the committed file is what ts-rs writes (scripts/typescript-types.sh)"
cargo test -p edgepatch-format --lib --quiet typescript::typescript_declarations_are_current
cargo test -p edgepatch-core --quiet --test golden_vectors --test hostile_vectors --test format_rules --test hostile_inputs --test tree_limits --test reader_capabilities

# Both import the wasm bindings' generated types (scripts/build-wasm.sh).
if [ -x node_modules/.bin/tsc ] && [ -e crates/edgepatch-wasm/pkg/web-apply/edgepatch_wasm.d.ts ] && [ -e crates/edgepatch-wasm/pkg/web/edgepatch_wasm.d.ts ]; then
  echo "== TypeScript: web/ and worker/ type-check"
  node_modules/.bin/tsc -p web/tsconfig.json
  node_modules/.bin/tsc -p web/tsconfig.vite.json --noEmit
  node_modules/.bin/tsc -p worker/tsconfig.json
  [ -e packages/edgepatch-js/wasm/edgepatch_wasm.d.ts ] && npm run --silent typecheck -w @edgepatch/js
else
  echo "== TypeScript skipped: node_modules or the wasm bindings are missing (scripts/setup.sh, scripts/build-wasm.sh)"
fi

echo "== check passed in $((SECONDS - start)) s"
