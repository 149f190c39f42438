#!/usr/bin/env bash
# scripts/test-other-systems.sh — the CLI's tests (unit and integration) run as the other systems'
# builds, from this Linux machine:
#   - the static musl binary (x86_64-unknown-linux-musl), natively;
#   - Windows (x86_64-pc-windows-gnu, MinGW) under Wine 8 from apt, with tests/wine's
#     bcryptprimitives.dll beside the binaries (that Wine lacks the DLL Rust's std imports).
# macOS builds are linted and linked (scripts/check-targets.sh) but not run: no Mac here.
# Idempotent: Wine is installed when missing; its prefix lives in ~/.cache/edgepatch-wine.
# Builds go to target/cross, beside scripts/check-targets.sh's.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export PATH="$HOME/.cargo/bin:$PATH"
log() { echo "[other systems] $*" >&2; }
export CARGO_TARGET_DIR="$REPO/target/cross"
source scripts/lean_disk.sh

log "cargo test -p edgepatch-cli --target x86_64-unknown-linux-musl"
cargo test -p edgepatch-cli --target x86_64-unknown-linux-musl --quiet
drop_build "$CARGO_TARGET_DIR/x86_64-unknown-linux-musl/debug"

if ! command -v wine >/dev/null 2>&1; then
  log "apt-get install wine wine64"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wine wine64 >/dev/null
fi
win=x86_64-pc-windows-gnu
log "cargo test -p edgepatch-cli --target $win, run under $(wine --version 2>/dev/null)"
# The test binaries, built once; each is then run under Wine here (not through cargo's runner)
# so that one of them can be run again alone (below).
mapfile -t tests < <(cargo test -p edgepatch-cli --target "$win" --no-run --quiet --message-format=json |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["profile"]["test"] and m.get("executable"):
        print(m["executable"])')
shim="$CARGO_TARGET_DIR/$win/debug/bcryptprimitives.dll"
x86_64-w64-mingw32-gcc -O2 -shared -Wall -Werror -o "$shim" tests/wine/bcryptprimitives.c -ladvapi32
cp "$shim" "$CARGO_TARGET_DIR/$win/debug/deps/"
export WINEPREFIX="$HOME/.cache/edgepatch-wine" WINEDEBUG=-all
mkdir -p "$WINEPREFIX"
# The prefix is made (or updated) and its services started before any test, and one wineserver
# serves every test binary (persistent until the end): a test that spawns and kills the CLI
# hundreds of times does not race Wine's own start-up and shut-down.
wineboot -i >/dev/null 2>&1 || true
wineserver -w
wineserver -p >/dev/null 2>&1 || log "no persistent wineserver (one is already running)"
trap 'wineserver -k 2>/dev/null || true' EXIT
# Wine itself, not the code under test, sometimes fails a process that spawns and kills many
# others: the test's connection to the wineserver is reset ("wine client error: ... recvmsg"),
# or a spawn fails with Windows' ERROR_INTERNAL_ERROR (os error 1359), which Windows does not
# return for a CreateProcess of a file that exists (seen twice in about 30 runs of kill_apply,
# 2026-11-27/28). A binary that failed so, and only so, is run once more; any other failure,
# or the same one twice, fails.
# The spawn error is printed as io::Error's Display ("os error 1359") or, from an unwrap, its
# Debug ("Os { code: 1359, ..."): update_trust failed so on 2026-11-28.
wine_fault='wine client error|os error 1359|Os \{ code: 1359,'
# run_one BINARY OUT: runs one test binary under Wine, its output to the file OUT (not a pipe:
# Wine's services, started by the first test, keep a pipe open), then prints it.
run_one() {
  local rc=0
  wine "$1" --quiet >"$2" 2>&1 </dev/null || rc=$?
  cat "$2"
  return "$rc"
}
cd crates/edgepatch-cli
out=$(mktemp)
for t in "${tests[@]}"; do
  run_one "$t" "$out" && continue
  if grep -Eq "$wine_fault" "$out"; then
    log "$(basename "$t") failed in Wine itself ($(grep -Eo "$wine_fault" "$out" | head -1)); running it once more"
    run_one "$t" "$out" || exit 1
  else
    log "$(basename "$t") failed under Wine"
    exit 1
  fi
done
rm -f "$out"
