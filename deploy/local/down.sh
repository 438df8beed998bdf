#!/usr/bin/env bash
# Stops exactly what deploy/local/up.sh started (the pids it recorded), services first.
set -uo pipefail
cd "$(dirname "$0")/../.."
run=.data/run
# shellcheck source=processes.sh
source deploy/local/processes.sh
for service in gateway credential-vault proxy sync-scheduler action-runner webhook-router; do stop "$service" & done
wait
stop ferretdb
stop nats
