#!/usr/bin/env bash
# Stops exactly what deploy/local/cluster-up.sh started (the pids it recorded), services first,
# then drops the run's PostgreSQL database.
set -uo pipefail
cd "$(dirname "$0")/../.."
run=.data/cluster/run
postgres=${CLUSTER_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432}
# shellcheck source=processes.sh
source deploy/local/processes.sh
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
