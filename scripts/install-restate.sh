#!/usr/bin/env bash
# Installs Restate's server (a native binary in a platform package) and its TypeScript SDK for the
# peers benchmark (bench/peers.ts) outside the main `npm ci`, into a cache keyed by
# bench/peers/restate/package-lock.json, and links bench/peers/restate/node_modules to it.
# A second run with the same lockfile takes no time. --ignore-scripts: the server package's only
# install script is @scarf/scarf's download analytics, which would call out to the internet.
set -euo pipefail
cd "$(dirname "$0")/../bench/peers/restate"
cache_root="${SESSIOND_RESTATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sessiond/restate}"
key=$(sha256sum package-lock.json | cut -c1-16)
target="$cache_root/$key"
server_bin="node_modules/@restatedev/restate-server-$(node -p 'process.platform + "-" + process.arch')/bin/restate-server"
if [ ! -x "$target/$server_bin" ] || [ ! -f "$target/node_modules/@restatedev/restate-sdk/package.json" ]; then
  echo "restate: installing into $target" >&2
  rm -rf "$target.tmp"
  mkdir -p "$target.tmp"
  cp package.json package-lock.json "$target.tmp/"
  (cd "$target.tmp" && SCARF_ANALYTICS=false npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  rm -rf "$target"
  mv "$target.tmp" "$target"
else
  echo "restate: cached in $target" >&2
fi
rm -rf node_modules
ln -s "$target/node_modules" node_modules
"./$server_bin" --version >&2
