# scripts/cross-cc.sh — sourced: `need_cross_cc TARGET...` installs, from Debian's packages,
# the C compilers that the C dependencies (zstd-sys, ring) need to build the CLI for other
# targets on this Linux machine, when missing: musl-gcc for x86_64 static musl, MinGW for
# Windows. Other targets need none here (macOS and ARM64 Linux are cross-linked by zig:
# scripts/zig-cross.sh). Used by scripts/check-targets.sh and scripts/release.sh.
need_cross_cc() {
  local t pkgs=()
  for t in "$@"; do
    case "$t" in
      x86_64-unknown-linux-musl) command -v musl-gcc >/dev/null 2>&1 || pkgs+=(musl-tools) ;;
      x86_64-pc-windows-gnu) command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || pkgs+=(gcc-mingw-w64-x86-64) ;;
    esac
  done
  [ ${#pkgs[@]} -gt 0 ] || return 0
  [ "$(uname -s)" = Linux ] && command -v apt-get >/dev/null 2>&1 || { echo "cross-cc: install ${pkgs[*]} (C compilers for $*)" >&2; return 1; }
  echo "[cross-cc] apt-get install ${pkgs[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
}
