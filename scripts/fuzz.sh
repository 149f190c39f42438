#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] — fuzzes the patch reader (fuzz target patch_apply) and the wasm
# transform's inverse (wasm_inverse) for SECONDS each (default 60), both at once, one
# process each, from seeds made by fuzz/examples/make_seeds.rs. Installs what it needs if missing
# (the nightly toolchain, minimal profile; cargo-fuzz). Fails on a crash, a timeout or an
# out-of-memory, and prints the reproducer's path (fuzz/README.md: minimize, keep in
# fuzz/regressions/). Builds into fuzz/target/ (about 1 GB); the corpus grows in fuzz/corpus/.
set -euo pipefail
SECONDS_EACH=${1:-60}
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO/fuzz"

CARGO_FUZZ_VERSION=0.13.2
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz: rustup toolchain install nightly --profile minimal"
  rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: cargo install cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install --quiet --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi

echo "fuzz: seeds (cargo run --release --example make_seeds)"
cargo run --release --quiet --example make_seeds >/dev/null

# -malloc_limit_mb: any single allocation above it is reported as a crash. The patch reader may
# hold a whole new file (the in-memory sink caps its output at 256 MiB), so it gets the process
# limit; the inverse of a module of at most a few hundred KiB has no business allocating 128 MiB.
declare -A MALLOC_LIMIT_MB=([patch_apply]=2048 [wasm_inverse]=128)
TARGETS=(patch_apply wasm_inverse)

for target in "${TARGETS[@]}"; do
  echo "fuzz: cargo +nightly fuzz build $target"
  cargo +nightly fuzz build "$target"
done

# Both targets at once, a process each (the machine's two cores): SECONDS each, in SECONDS.
declare -A LOGS PIDS
for target in "${TARGETS[@]}"; do
  LOGS[$target]=$(mktemp)
  echo "fuzz: $target for ${SECONDS_EACH} s"
  cargo +nightly fuzz run "$target" "corpus/$target" -- \
    -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -malloc_limit_mb="${MALLOC_LIMIT_MB[$target]}" \
    -max_len=65536 -timeout=30 -print_final_stats=1 >"${LOGS[$target]}" 2>&1 &
  PIDS[$target]=$!
done

status=0
for target in "${TARGETS[@]}"; do
  log=${LOGS[$target]}
  rc=0
  wait "${PIDS[$target]}" || rc=$?
  echo "fuzz: $target"
  if [ "$rc" -eq 0 ]; then
    # The last status line (execs, cov, ft, corpus) and the final stats.
    grep -E '^#[0-9]+' "$log" | tail -n 1
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log"
  else
    status=1
    # What failed (a panic's message, a sanitizer's or libFuzzer's report), then the log's end.
    grep -m 1 -A 2 -E 'panicked at|==ERROR|ERROR: libFuzzer' "$log" >&2 || true
    tail -n 30 "$log" >&2
    artifact=$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -n 1 | sed 's/^Test unit written to //')
    echo "fuzz: $target FAILED (exit $rc); reproducer: ${artifact:-none written}" >&2
    echo "fuzz: replay with: cd fuzz && cargo +nightly fuzz run $target ${artifact:-<artifact>}" >&2
  fi
  rm -f "$log"
done
exit "$status"
