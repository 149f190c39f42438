#!/usr/bin/env bash
# bench/worker_one_run.sh — the Worker's figures measured in one run, one log:
#   1. every corpus pair through `wrangler dev` (bench/worker_corpus.mjs): Worker patch / CLI
#      patch, workerd CPU per 100 MB of new builds, byte-exact updates;
#   2. the synthetic 1.1 GB build fanned out under `wrangler dev` (bench/fanout.mjs): wall time,
#      workerd CPU and peak isolate memory per step count, byte-exact apply;
#   3. the same split run in parallel processes with the Worker's wasm module
#      (bench/parallel_steps.mjs; `wrangler dev` runs steps one after another): wall time by
#      parallelism on each --pair (e.g. the 101 MiB pair, and the 1.1 GB build's 560 MiB file).
#
#   source worker/scripts/node22.sh
#   cargo build --release --bin edgepatch && bash scripts/build-wasm.sh web node
#   bash bench/worker_one_run.sh --corpus DIR --fanout-data DIR --pair DIR [--pair DIR ...] [--steps 1,2,4] [--log FILE]
#
# --corpus: pairs/<name>/{old,new} and trees/<name>/{old,new} (e.g. bench/corpus/fetch.sh's, plus
# concat-101mib); --fanout-data: bench/synthetic_fanout.py's output (its wrangler-state is
# reused when present: the old build is then published already); --pair: a directory holding a
# single-file pair (old, new) for the parallel steps. Stops at the first part that fails; the log says which.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
corpus='' fanout='' pairs=() steps='1,2,4' log="${TMPDIR:-/tmp}/edgepatch-worker-one-run.log"
while [ $# -gt 0 ]; do
  case "$1" in
    --corpus) corpus=$2; shift 2 ;;
    --fanout-data) fanout=$2; shift 2 ;;
    --pair) pairs+=("$2"); shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    *) echo "unknown option $1 (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
[ ${#pairs[@]} -gt 0 ] || { echo "at least one --pair (see $0)" >&2; exit 2; }
for d in "$corpus" "$fanout" "${pairs[@]}"; do
  [ -n "$d" ] && [ -d "$d" ] || { echo "--corpus, --fanout-data and --pair name existing directories (see $0)" >&2; exit 2; }
done
reuse=()
[ -d "$fanout/wrangler-state" ] && reuse=(--reuse)

cd "$REPO"
exec > >(tee "$log") 2>&1
part() { echo; echo "== $(date -u +%FT%TZ) $*"; }
part "tip $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)'), load $(cut -d' ' -f1-3 /proc/loadavg)"
part "1/3 corpus through the Worker: node bench/worker_corpus.mjs --corpus $corpus"
node bench/worker_corpus.mjs --corpus "$corpus"
part "2/3 the 1.1 GB build fanned out: node bench/fanout.mjs --data $fanout --steps $steps ${reuse[*]}"
node bench/fanout.mjs --data "$fanout" --steps "$steps" --tag "r$(date -u +%H%M)" "${reuse[@]}"
for pair in "${pairs[@]}"; do
  part "3/3 parallel steps: node bench/parallel_steps.mjs --pair $pair --steps $steps"
  node bench/parallel_steps.mjs --pair "$pair" --steps "$steps"
done
part "done, load $(cut -d' ' -f1-3 /proc/loadavg); log: $log"
