#!/bin/sh
# SESSIOND_PI_COMMAND of the chaos workers. Sessions enqueued with `--model chaos` run the fake
# agent (chaos/fake-agent.mjs); every other session runs the real pi CLI ($CHAOS_REAL_PI, against
# the fake model server). `exec`: the agent is the worker's child itself (same pid, same marker).
# Sessions with a `limits-…` model run the one-request agent (a shell and one curl to the fake model
# server, test/fixtures/agents/http-pi.sh): the server counts their requests in flight per model.
for arg in "$@"; do
  if [ "$arg" = "chaos" ]; then
    exec "${CHAOS_NODE:-node}" "$(dirname "$0")/fake-agent.mjs" "$@"
  fi
  case "$arg" in
    limits-*) exec sh "$(dirname "$0")/../test/fixtures/agents/http-pi.sh" "$@" ;;
  esac
done
exec "${CHAOS_REAL_PI:?CHAOS_REAL_PI is not set}" "$@"
