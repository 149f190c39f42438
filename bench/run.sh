#!/usr/bin/env bash
# bench/run.sh [--pairs a,b] [--tools a,b] [--corpus DIR] [--work DIR] [--no-build] [compare.py options]
#
# Benchmarks edgepatch against xdelta3, bsdiff, zstd --patch-from, HDiffPatch and
# rdiff+zstd on the real corpus, all measured in this run; see BENCHMARKS.md.
#   1. installs the peers if missing (apt: xdelta3 bsdiff zstd rdiff time; PyPI: hdiffpatch)
#   2. fetches the corpus with bench/corpus/fetch.sh (idempotent; verifies checksums)
#   3. builds target/release/edgepatch (skipped with --no-build or when EDGEPATCH_BIN is set)
#   4. runs bench/compare.py: markdown to stdout, raw JSON to bench/out/
#
# Environment: EDGEPATCH_CORPUS (default ~/.cache/edgepatch-corpus),
#              EDGEPATCH_BENCH_WORK (default ~/.cache/edgepatch-bench; holds the ~101 MB
#              pair, patches and outputs), EDGEPATCH_BIN (use this binary, do not build).
# Every other option goes to compare.py (--edgepatch-diff-args, --no-large, --repeat,
# --timeout, --out); `bench/run.sh --help` lists them.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
CORPUS=${EDGEPATCH_CORPUS:-$HOME/.cache/edgepatch-corpus}
WORK=${EDGEPATCH_BENCH_WORK:-$HOME/.cache/edgepatch-bench}
BUILD=1
COMPARE_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --corpus) CORPUS=$2; shift 2 ;;
    --corpus=*) CORPUS=${1#*=}; shift ;;
    --work) WORK=$2; shift 2 ;;
    --work=*) WORK=${1#*=}; shift ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; echo
               exec python3 "$REPO/bench/compare.py" --help ;;
    *) COMPARE_ARGS+=("$1"); shift ;;
  esac
done

log() { echo "[bench] $*" >&2; }

# Data stays out of the repo: the corpus is ~100 MB and the work dir several hundred.
for dir in "$CORPUS" "$WORK"; do
  case "$(realpath -m "$dir")/" in
    "$(realpath "$REPO")"/*) echo "bench: $dir is inside the repo; pick a directory outside it" >&2; exit 2 ;;
  esac
  mkdir -p "$dir"
done

# ---- 1. peers (idempotent: only what is missing gets installed)
missing_debs=()
for tool_and_package in xdelta3:xdelta3 bsdiff:bsdiff bspatch:bsdiff zstd:zstd rdiff:rdiff \
                        cmp:diffutils diff:diffutils; do
  command -v "${tool_and_package%%:*}" >/dev/null || missing_debs+=("${tool_and_package#*:}")
done
[ -x /usr/bin/time ] || missing_debs+=(time)   # GNU time (for %M), not the shell keyword
if [ ${#missing_debs[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  log "apt-get install ${missing_debs[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing_debs[@]}" >/dev/null
fi
if ! python3 -c 'import hdiffpatch' 2>/dev/null; then
  log "pip install hdiffpatch"
  python3 -m pip install --quiet hdiffpatch
fi

# ---- 2. corpus (fetch.sh skips what is present and checks SHA256SUMS; ~1 s when complete)
bash "$REPO/bench/corpus/fetch.sh" "$CORPUS"

# ---- 3. edgepatch
if [ -n "${EDGEPATCH_BIN:-}" ]; then
  log "using EDGEPATCH_BIN=$EDGEPATCH_BIN (not building)"
else
  EDGEPATCH_BIN=$REPO/target/release/edgepatch
  if [ "$BUILD" = 1 ]; then
    command -v cargo >/dev/null || { [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"; }
    log "cargo build --release --bin edgepatch"
    (cd "$REPO" && cargo build --release --quiet --bin edgepatch)
  fi
fi

# ---- 4. measure
exec python3 "$REPO/bench/compare.py" --corpus "$CORPUS" --work "$WORK" \
  --edgepatch "$EDGEPATCH_BIN" --out "$REPO/bench/out" ${COMPARE_ARGS[@]+"${COMPARE_ARGS[@]}"}
