#!/usr/bin/env bash
# Starts Latchkey natively: NATS (unless NATS_URL is given), FerretDB (unless MONGODB_URI is
# given) and the six services, with data, logs and pids under .data/. Secrets that the caller
# does not set are generated once into .data/secrets.env; the caller's environment always wins.
# Each process gets only its own secrets (deploy/local/secrets.sh says which), and each service
# logs in to NATS as its own user, allowed only its contracts' subjects (deploy/nats/auth.conf).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
# The services run on Node 24: the one deploy/local/node.sh installs into .data/node, or LATCHKEY_NODE's.
node_bin=$(deploy/local/node.sh)
export PATH=$node_bin:$PATH
data=$root/.data
mkdir -p "$data"/{logs,run}
chmod 700 "$data"

if [ -n "$(ls "$data"/run/*.pid 2>/dev/null)" ]; then
  for pidfile in "$data"/run/*.pid; do
    if kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      echo "Latchkey is already running (see $pidfile); run 'make down' first." >&2
      exit 1
    fi
  done
  rm -f "$data"/run/*.pid
fi

# shellcheck source=secrets.sh
source deploy/local/secrets.sh
secrets=$data/secrets.env
[ -f "$secrets" ] || echo "Generating local secrets in .data/secrets.env"
generate_secrets "$secrets"
# Values from the file only fill in what the caller left unset; nothing is exported.
load_secrets "$secrets"

# shellcheck source=processes.sh
source deploy/local/processes.sh

if [ -z "${NATS_URL:-}" ]; then
  nats_port=${LOCAL_NATS_PORT:-4322}
  command -v nats-server > /dev/null || { echo "nats-server not found: apt-get install nats-server, or set NATS_URL" >&2; exit 1; }
  # The authorization generated from the contracts; include paths are relative to this file.
  echo 'include "../deploy/nats/auth.conf"' > "$data/nats.conf"
  start nats nats nats-server -c "$data/nats.conf" -a 127.0.0.1 -p "$nats_port" -js -sd "$data/nats"
  wait_for_port "$nats_port" "NATS"
  export NATS_URL=nats://127.0.0.1:$nats_port
fi

if [ -z "${MONGODB_URI:-}" ]; then
  mongo_port=${LOCAL_MONGODB_PORT:-27018}
  start ferretdb none "$data/bin/ferretdb" -listen "127.0.0.1:$mongo_port" -sqlite "$data/ferretdb"
  wait_for_port "$mongo_port" "FerretDB"
  export MONGODB_URI="mongodb://127.0.0.1:$mongo_port/?directConnection=true"
fi

# The action-runner's memory, layer by layer: each run's isolate has FUNCTION_MEMORY_MB (its
# ArrayBuffers included; functions get no WebAssembly, whose memories would live outside it),
# FUNCTION_CONCURRENCY runs at once, and the host's own heap is capped by --max-old-space-size.
# On top, an OS cap when this machine offers a usable one: a systemd scope with MemoryMax
# (cgroup: counts what the process really uses). `prlimit --as` is no such cap for V8: every
# isolate reserves about 0.5 GiB of address space it never uses, so a limit low enough to matter
# refuses isolates long before memory runs short; it is applied only when asked for with
# ACTION_RUNNER_MAX_VIRTUAL_MB.
runner_heap_mb=${ACTION_RUNNER_HEAP_MB:-512}
runner_memory_mb=${ACTION_RUNNER_MEMORY_MB:-$((runner_heap_mb + ${FUNCTION_MEMORY_MB:-128} * ${FUNCTION_CONCURRENCY:-8} + 512))}
runner_cap=()
if command -v systemd-run > /dev/null && systemd-run --user --scope -q -p MemoryMax=64M true > /dev/null 2>&1; then
  runner_cap=(systemd-run --user --scope -q -p "MemoryMax=${runner_memory_mb}M" -p MemorySwapMax=0)
  echo "action-runner: memory capped at ${runner_memory_mb} MiB (systemd scope)"
elif [ -n "${ACTION_RUNNER_MAX_VIRTUAL_MB:-}" ] && command -v prlimit > /dev/null; then
  runner_cap=(prlimit "--as=$((ACTION_RUNNER_MAX_VIRTUAL_MB * 1024 * 1024))")
  echo "action-runner: address space capped at ${ACTION_RUNNER_MAX_VIRTUAL_MB} MiB (prlimit)"
else
  echo "action-runner: no OS memory cap here (no systemd user scope); isolate limits and a ${runner_heap_mb} MiB host heap apply"
fi

# The gateway's address, which the vault also names (providers' logo URLs).
export PUBLIC_URL=${PUBLIC_URL:-http://localhost:${PORT:-3003}}

for service in credential-vault proxy sync-scheduler action-runner webhook-router gateway; do
  # --no-node-snapshot: isolated-vm (the action-runner's sandbox) still asks for it on Node 24.
  if [ "$service" = action-runner ]; then
    start "$service" "$service" "${runner_cap[@]}" node --no-node-snapshot "--max-old-space-size=$runner_heap_mb" "services/$service/dist/main.js"
  else
    start "$service" "$service" node --no-node-snapshot "services/$service/dist/main.js"
  fi
done

port=${PORT:-3003}
for attempt in $(seq 1 300); do
  # A service that cannot start (a PROVIDERS_FILE it refuses, a port in use) says why in its log.
  if [ $((attempt % 5)) -eq 0 ] && exited credential-vault proxy sync-scheduler action-runner webhook-router gateway; then
    echo "Latchkey did not start (make down stops what started)." >&2
    exit 1
  fi
  if curl -fsS "http://127.0.0.1:$port/ready" > /dev/null 2>&1; then
    # The key webhooks to the customer are signed with, for verifyIncomingWebhookRequest.
    signing_key=$(curl -fsS -H "Authorization: Bearer ${SECRETS[ADMIN_TOKEN]}" \
      "http://127.0.0.1:$port/admin/environments/${BOOTSTRAP_ENVIRONMENT:-dev}/webhook-signing-key" 2>/dev/null |
      sed -n 's/.*"signing_key":"\([^"]*\)".*/\1/p')
    cat <<MSG

Latchkey is up.
  Gateway:  $PUBLIC_URL
  API key:  ${SECRETS[BOOTSTRAP_SECRET_KEY]}   (environment ${BOOTSTRAP_ENVIRONMENT:-dev}, full access)
  Webhook signing key: ${signing_key:-(GET /admin/environments/${BOOTSTRAP_ENVIRONMENT:-dev}/webhook-signing-key)}
  Admin:    Authorization: Bearer \$ADMIN_TOKEN (in .data/secrets.env)
  Logs:     .data/logs/        Stop: make down

Try: curl -H "Authorization: Bearer ${SECRETS[BOOTSTRAP_SECRET_KEY]}" $PUBLIC_URL/environment-variables
MSG
    exit 0
  fi
  sleep 0.2
done
echo "The gateway did not become ready within 60 s; see .data/logs/ (make down stops what started)." >&2
exit 1
