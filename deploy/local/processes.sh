# Starting, waiting for and stopping the processes of `make up` and `make cluster-up`, sourced
# by their up and down scripts: `start` and `wait_for_port` after `data` (their directory under
# .data/) is set and the secrets loaded, `stop` after `run` (where the pids are) is set.

start() { # name, whose secrets (a service, nats or none), command...
  local name=$1 who=$2 env_args=()
  shift 2
  mapfile -t env_args < <(service_env "$who")
  nohup env "${env_args[@]}" "$@" > "$data/logs/$name.log" 2>&1 &
  echo $! > "$data/run/$name.pid"
}

wait_for_port() { # port, what
  for _ in $(seq 1 150); do
    # Opened and closed without a byte written: NATS would log a line sent before CONNECT as a
    # failed login.
    (exec 3<> "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$2 did not start; see $data/logs/" >&2
  exit 1
}

exited() { # names...: true, with the end of its log on stderr, when one of them is no longer running
  local name pid
  for name in "$@"; do
    pid=$(cat "$data/run/$name.pid" 2>/dev/null) || continue
    kill -0 "$pid" 2>/dev/null && continue
    echo "$name exited while starting; the end of $data/logs/$name.log:" >&2
    tail -n 20 "$data/logs/$name.log" | sed 's/^/  /' >&2
    return 0
  done
  return 1
}

stop() { # name: SIGTERM, then SIGKILL after 15 s
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
