# Starting and waiting for the processes of `make up` and `make cluster-up`; sourced by both,
# after they set `data` (their directory under .data/) and load their secrets.

start() { # name, whose secrets (a service, nats or none), command...
  local name=$1 who=$2 env_args=()
  shift 2
  mapfile -t env_args < <(service_env "$who")
  nohup env "${env_args[@]}" "$@" > "$data/logs/$name.log" 2>&1 &
  echo $! > "$data/run/$name.pid"
}

wait_for_port() { # port, what
  for _ in $(seq 1 150); do
    (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$2 did not start; see $data/logs/" >&2
  exit 1
}
