#!/usr/bin/env bash
# Installs the coding-agent CLIs that the agent suites run for real (Claude Code, Codex, Gemini CLI, Qwen Code,
# OpenCode, the Claude Code ACP adapter:
# hundreds of MB of native binaries) outside the main `npm ci`, into a cache keyed by their lockfile,
# and links agent-clis/node_modules to it. A second run with the same lockfile takes no time.
set -euo pipefail
cd "$(dirname "$0")/../agent-clis"
cache_root="${SESSIOND_AGENT_CLI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sessiond/agent-clis}"
key=$(sha256sum package-lock.json | cut -c1-16)
target="$cache_root/$key"
bins=(claude codex gemini qwen opencode claude-agent-acp)
missing=0
for bin in "${bins[@]}"; do [ -x "$target/node_modules/.bin/$bin" ] || missing=1; done
if [ "$missing" = 1 ]; then
  echo "agent-clis: installing into $target"
  rm -rf "$target.tmp"
  mkdir -p "$target.tmp"
  cp package.json package-lock.json "$target.tmp/"
  (cd "$target.tmp" && npm ci --no-audit --no-fund --engine-strict=false --loglevel=error)
  rm -rf "$target"
  mv "$target.tmp" "$target"
else
  echo "agent-clis: cached in $target"
fi
rm -rf node_modules
ln -s "$target/node_modules" node_modules
./node_modules/.bin/claude --version
./node_modules/.bin/codex --version
./node_modules/.bin/gemini --version
./node_modules/.bin/qwen --version
./node_modules/.bin/opencode --version
./node_modules/.bin/claude-agent-acp --version </dev/null
