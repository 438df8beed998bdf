#!/usr/bin/env bash
# Starts Latchkey as a cluster on this machine: three NATS servers with JetStream clustered on
# loopback, FerretDB on PostgreSQL (a fresh database each run), and two replicas of every service,
# each with every stream and KV bucket in 3 replicas. Data, logs and pids under .data/cluster/.
# Ports: NATS clients 4331-4333 (routes 6331-6333, monitoring 8331-8333), FerretDB 27019,
# gateways 3303 and 3304 (metrics 9465 and 9466), other services' probes 3310-3314 and
# 3320-3324; CLUSTER_PORT_OFFSET=N moves every one of them up by N (a second cluster, a test).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
node_bin=$(deploy/local/node.sh)
export PATH=$node_bin:$PATH
data=$root/.data/cluster
postgres=${CLUSTER_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432}
offset=${CLUSTER_PORT_OFFSET:-0}
[[ $offset =~ ^[0-9]+$ ]] && [ "$offset" -le 38000 ] || { echo "CLUSTER_PORT_OFFSET must be a whole number from 0 to 38000" >&2; exit 1; }
nats_port() { echo $((4330 + $1 + offset)); }   # node 1..3
route_port() { echo $((6330 + $1 + offset)); }
monitor_port() { echo $((8330 + $1 + offset)); }
mongo_port=$((27019 + offset))
gateway_ports=($((3303 + offset)) $((3304 + offset)))
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
  for other in 1 2 3; do [ "$other" = "$n" ] || routes+=("\"nats-route://127.0.0.1:$(route_port "$other")\""); done
  cat > "$data/nats/n$n.conf" <<CONF
include "../../../deploy/nats/auth.conf"
server_name: "n$n"
host: "127.0.0.1"
port: $(nats_port "$n")
http: "127.0.0.1:$(monitor_port "$n")"
jetstream { store_dir: "$data/nats/n$n" }
cluster {
  name: "latchkey-local"
  listen: "127.0.0.1:$(route_port "$n")"
  routes: [$(IFS=,; echo "${routes[*]}")]
}
CONF
  start "nats-n$n" nats "$nats_bin" -c "$data/nats/n$n.conf"
  nats_urls+=("nats://127.0.0.1:$(nats_port "$n")")
done
for n in 1 2 3; do wait_for_port "$(nats_port "$n")" "NATS node n$n"; done

# FerretDB on PostgreSQL: a database of its own for this run, dropped by make cluster-down.
database=latchkey_cluster_$(date +%Y%m%d%H%M%S)
psql "$postgres/postgres" -qAtc "CREATE DATABASE $database" > /dev/null
echo "$database" > "$data/run/postgres-database"
start ferretdb none "$root/.data/bin/ferretdb" -listen "127.0.0.1:$mongo_port" -handler postgresql -postgres "$postgres/$database"
wait_for_port "$mongo_port" FerretDB
export MONGODB_URI="mongodb://127.0.0.1:$mongo_port/?directConnection=true"

export JETSTREAM_REPLICAS=3
export PUBLIC_URL=${PUBLIC_URL:-http://localhost:${gateway_ports[0]}}
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
      PORT=${gateway_ports[$((replica - 1))]} METRICS_PORT=$((9464 + replica + offset)) NATS_URL=$url \
        start "gateway-$replica" gateway node --no-node-snapshot services/gateway/dist/main.js
    else
      extra=()
      [ "$service" = action-runner ] && extra=(--max-old-space-size=512)
      HEALTH_PORT=$((3300 + replica * 10 + ${health[$service]} + offset)) NATS_URL=$url \
        start "$service-$replica" "$service" node --no-node-snapshot "${extra[@]}" "services/$service/dist/main.js"
    fi
  done
done

services=()
for replica in 1 2; do
  for service in credential-vault proxy sync-scheduler action-runner webhook-router; do services+=("$service-$replica"); done
  services+=("gateway-$replica")
done
for port in "${gateway_ports[@]}"; do
  for attempt in $(seq 1 600); do
    if [ $((attempt % 5)) -eq 0 ] && exited "${services[@]}"; then
      echo "The cluster did not start (make cluster-down stops what started)." >&2
      exit 1
    fi
    curl -fsS "http://127.0.0.1:$port/ready" > /dev/null 2>&1 && continue 2
    sleep 0.2
  done
  echo "The gateway on $port did not become ready within 120 s; see .data/cluster/logs/ (make cluster-down stops what started)." >&2
  exit 1
done

cat <<MSG

Latchkey is up as a cluster.
  Gateways: http://localhost:${gateway_ports[0]} and http://localhost:${gateway_ports[1]} (two replicas; put a load balancer in front, or use either)
  Metrics:  the gateways' on $((9465 + offset)) and $((9466 + offset)), the other services' on $((3310 + offset))-$((3314 + offset)) and $((3320 + offset))-$((3324 + offset)) (/metrics)
  API key:  ${SECRETS[BOOTSTRAP_SECRET_KEY]}   (environment ${BOOTSTRAP_ENVIRONMENT:-dev}, full access)
  NATS:     $(IFS=,; echo "${nats_urls[*]}")   (JetStream replicas: 3; monitoring on $(monitor_port 1)-$(monitor_port 3))
  Database: FerretDB on 127.0.0.1:$mongo_port, PostgreSQL database $database
  Logs:     .data/cluster/logs/        Stop: make cluster-down (drops the database)

Try: curl -H "Authorization: Bearer ${SECRETS[BOOTSTRAP_SECRET_KEY]}" http://localhost:${gateway_ports[1]}/environment-variables
MSG
