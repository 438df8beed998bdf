#!/usr/bin/env bash
# Stops exactly what deploy/local/cluster-up.sh started (the pids it recorded), services first,
# then drops the run's PostgreSQL database.
set -uo pipefail
cd "$(dirname "$0")/../.."
run=.data/cluster/run
postgres=${CLUSTER_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432}
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
for replica in 1 2; do
  for service in gateway credential-vault proxy sync-scheduler action-runner webhook-router; do stop "$service-$replica" & done
done
wait
stop ferretdb
for n in 1 2 3; do stop "nats-n$n" & done
wait
if [ -f "$run/postgres-database" ]; then
  database=$(cat "$run/postgres-database")
  psql "$postgres/postgres" -qAtc "DROP DATABASE IF EXISTS $database" > /dev/null && echo "dropped PostgreSQL database $database"
  rm -f "$run/postgres-database"
fi
