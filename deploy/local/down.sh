#!/usr/bin/env bash
# Stops exactly what deploy/local/up.sh started (the pids it recorded), services first.
set -uo pipefail
cd "$(dirname "$0")/../.."
run=.data/run
stop() { # name
  local pidfile=$run/$1.pid
  [ -f "$pidfile" ] || return 0
  local pid
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    echo "stopped $1"
  fi
  rm -f "$pidfile"
}
for service in gateway credential-vault proxy sync-scheduler action-runner webhook-router; do stop "$service" & done
wait
stop ferretdb
stop nats
