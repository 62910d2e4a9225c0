#!/bin/sh
# SESSIOND_PI_COMMAND of the chaos workers. Sessions enqueued with `--model chaos` run the fake
# agent (chaos/fake-agent.mjs); every other session runs the real pi CLI ($CHAOS_REAL_PI, against
# the fake model server). `exec`: the agent is the worker's child itself (same pid, same marker).
for arg in "$@"; do
  if [ "$arg" = "chaos" ]; then
    exec "${CHAOS_NODE:-node}" "$(dirname "$0")/fake-agent.mjs" "$@"
  fi
done
exec "${CHAOS_REAL_PI:?CHAOS_REAL_PI is not set}" "$@"
