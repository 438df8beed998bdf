#!/usr/bin/env bash
# Starts Latchkey as a cluster on this machine: three NATS servers with JetStream clustered on
# loopback, FerretDB on PostgreSQL (a fresh database each run), and two replicas of every service,
# each with every stream and KV bucket in 3 replicas. Data, logs and pids under .data/cluster/.
# Ports: NATS clients 4331-4333 (routes 6331-6333, monitoring 8331-8333), FerretDB 27019,
# gateways 3303 and 3304, other services' probes 3310-3314 and 3320-3324.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
node_bin=$(deploy/local/node.sh)
export PATH=$node_bin:$PATH
data=$root/.data/cluster
postgres=${CLUSTER_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432}
trap 'echo "make cluster-up failed; see .data/cluster/logs/ (make cluster-down stops what started)" >&2' ERR
mkdir -p "$data"/{logs,run}
chmod 700 "$root/.data" "$data"

if [ -n "$(ls "$data"/run/*.pid 2>/dev/null)" ]; then
  echo "The cluster is already running (see .data/cluster/run/); run 'make cluster-down' first." >&2
  exit 1
fi

# shellcheck source=secrets.sh
source deploy/local/secrets.sh
secrets=$data/secrets.env
[ -f "$secrets" ] || echo "Generating the cluster's secrets in .data/cluster/secrets.env"
generate_secrets "$secrets"
load_secrets "$secrets"

# shellcheck source=processes.sh
source deploy/local/processes.sh

# NATS: three nodes, each routed to the other two. A fresh store each run, as the database is.
nats_bin=nats-server
[ -x "$root/.data/bin/nats-server" ] && nats_bin=$root/.data/bin/nats-server
command -v "$nats_bin" > /dev/null || { echo "no nats-server: make nats-server (or apt-get install nats-server)" >&2; exit 1; }
rm -rf "$data/nats"
mkdir -p "$data/nats"
nats_urls=()
for n in 1 2 3; do
  routes=()
  for other in 1 2 3; do [ "$other" = "$n" ] || routes+=("\"nats-route://127.0.0.1:633$other\""); done
  cat > "$data/nats/n$n.conf" <<CONF
include "../../../deploy/nats/auth.conf"
server_name: "n$n"
host: "127.0.0.1"
port: 433$n
http: "127.0.0.1:833$n"
jetstream { store_dir: "$data/nats/n$n" }
cluster {
  name: "latchkey-local"
  listen: "127.0.0.1:633$n"
  routes: [$(IFS=,; echo "${routes[*]}")]
}
CONF
  start "nats-n$n" nats "$nats_bin" -c "$data/nats/n$n.conf"
  nats_urls+=("nats://127.0.0.1:433$n")
done
for n in 1 2 3; do wait_for_port "433$n" "NATS node n$n"; done

# FerretDB on PostgreSQL: a database of its own for this run, dropped by make cluster-down.
database=latchkey_cluster_$(date +%Y%m%d%H%M%S)
psql "$postgres/postgres" -qAtc "CREATE DATABASE $database" > /dev/null
echo "$database" > "$data/run/postgres-database"
start ferretdb none "$root/.data/bin/ferretdb" -listen 127.0.0.1:27019 -handler postgresql -postgres "$postgres/$database"
wait_for_port 27019 FerretDB
export MONGODB_URI="mongodb://127.0.0.1:27019/?directConnection=true"

export JETSTREAM_REPLICAS=3
export PUBLIC_URL=${PUBLIC_URL:-http://localhost:3303}
# Each replica lists every node, starting at a different one, so connections spread over the cluster.
nats_url_for() { # replica index 0..5
  local first=$(($1 % 3))
  echo "${nats_urls[$first]},${nats_urls[$(((first + 1) % 3))]},${nats_urls[$(((first + 2) % 3))]}"
}
declare -A health=([credential-vault]=0 [proxy]=1 [sync-scheduler]=2 [action-runner]=3 [webhook-router]=4)
index=0
for replica in 1 2; do
  for service in credential-vault proxy sync-scheduler action-runner webhook-router gateway; do
    url=$(nats_url_for "$index")
    index=$((index + 1))
    if [ "$service" = gateway ]; then
      # Each gateway its own metrics port too (both would take 9464 otherwise, and the second fail).
      PORT=$((3302 + replica)) METRICS_PORT=$((9464 + replica)) NATS_URL=$url \
        start "gateway-$replica" gateway node --no-node-snapshot services/gateway/dist/main.js
    else
      extra=()
      [ "$service" = action-runner ] && extra=(--max-old-space-size=512)
      HEALTH_PORT=$((3300 + replica * 10 + ${health[$service]})) NATS_URL=$url \
        start "$service-$replica" "$service" node --no-node-snapshot "${extra[@]}" "services/$service/dist/main.js"
    fi
  done
done

for port in 3303 3304; do
  for _ in $(seq 1 600); do
    curl -fsS "http://127.0.0.1:$port/ready" > /dev/null 2>&1 && continue 2
    sleep 0.2
  done
  echo "The gateway on $port did not become ready within 120 s; see .data/cluster/logs/ (make cluster-down stops what started)." >&2
  exit 1
done

cat <<MSG

Latchkey is up as a cluster.
  Gateways: http://localhost:3303 and http://localhost:3304 (two replicas; put a load balancer in front, or use either)
  Metrics:  the gateways' on 9465 and 9466, the other services' on 3310-3314 and 3320-3324 (/metrics)
  API key:  ${SECRETS[BOOTSTRAP_SECRET_KEY]}   (environment ${BOOTSTRAP_ENVIRONMENT:-dev}, full access)
  NATS:     $(IFS=,; echo "${nats_urls[*]}")   (JetStream replicas: 3; monitoring on 8331-8333)
  Database: FerretDB on 127.0.0.1:27019, PostgreSQL database $database
  Logs:     .data/cluster/logs/        Stop: make cluster-down (drops the database)

Try: curl -H "Authorization: Bearer ${SECRETS[BOOTSTRAP_SECRET_KEY]}" http://localhost:3304/environment-variables
MSG
