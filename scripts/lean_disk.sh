# scripts/lean_disk.sh — sourced by scripts/test.sh and scripts/test-other-systems.sh.
# drop_build DIR...: in lean-disk mode (EDGEPATCH_LEAN_DISK=1), removes build products no later
# stage reads, each logged with its size.
drop_build() {
  [ -n "${EDGEPATCH_LEAN_DISK:-}" ] || return 0
  local d
  for d in "$@"; do
    [ -e "$d" ] || continue
    echo "[lean disk] rm -rf $d ($(du -sm "$d" | cut -f1) MB)" >&2
    rm -rf "$d"
  done
}
