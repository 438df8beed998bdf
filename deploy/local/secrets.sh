# Secrets of `make up`, sourced by deploy/local/up.sh (and by deploy/local/secrets.test.ts).
# Which process gets which secret is written here once: each service receives only its own,
# under the names its config.ts reads, and NATS only the services' NATS passwords.

# Every secret `make up` knows, as stored in .data/secrets.env.
SECRET_NAMES=(
  ADMIN_TOKEN
  API_KEY_DIGEST_SECRET
  BOOTSTRAP_SECRET_KEY
  ENCRYPTION_KEYS
  SETTINGS_ENCRYPTION_KEYS
  LATCHKEY_NATS_PASSWORD_GATEWAY
  LATCHKEY_NATS_PASSWORD_CREDENTIAL_VAULT
  LATCHKEY_NATS_PASSWORD_PROXY
  LATCHKEY_NATS_PASSWORD_SYNC_SCHEDULER
  LATCHKEY_NATS_PASSWORD_ACTION_RUNNER
  LATCHKEY_NATS_PASSWORD_WEBHOOK_ROUTER
)

# The NATS password variable of a service (as libs/contracts' natsPasswordVariable).
nats_password_name() { # service
  local upper=${1^^}
  echo "LATCHKEY_NATS_PASSWORD_${upper//-/_}"
}

# The secrets a service reads, besides its NATS password.
own_secrets() { # service
  case $1 in
    gateway) echo ADMIN_TOKEN API_KEY_DIGEST_SECRET BOOTSTRAP_SECRET_KEY SETTINGS_ENCRYPTION_KEYS ;;
    credential-vault) echo ENCRYPTION_KEYS ;;
    proxy | sync-scheduler | action-runner | webhook-router) ;;
    *)
      echo "unknown service $1" >&2
      return 1
      ;;
  esac
}

random_secret() { head -c 32 /dev/urandom | base64 | tr -d '=+/\n' | head -c 43; }

# Appends to the file every secret it lacks (mode 600), so a file from an older version gains
# the new ones and keeps the old.
generate_secrets() { # file
  local file=$1 name
  (
    umask 077
    touch "$file"
    chmod 600 "$file"
    for name in "${SECRET_NAMES[@]}"; do
      grep -q "^$name=" "$file" && continue
      case $name in
        API_KEY_DIGEST_SECRET) echo "$name=$(head -c 32 /dev/urandom | base64)" ;;
        ENCRYPTION_KEYS | SETTINGS_ENCRYPTION_KEYS) echo "$name=v1:$(head -c 32 /dev/urandom | base64)" ;;
        BOOTSTRAP_SECRET_KEY) echo "$name=lk_sk_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')" ;;
        # NATS reads these from its environment as config values: a leading digit would make a number.
        LATCHKEY_NATS_PASSWORD_*) echo "$name=nats$(random_secret)" ;;
        *) echo "$name=$(random_secret)" ;;
      esac >> "$file"
    done
  )
}

# Reads NAME=VALUE lines into SECRETS, each value whole (a base64 value may end in `=`); a
# secret set in the caller's environment wins over the file.
declare -A SECRETS=()
load_secrets() { # file
  local line name
  while IFS= read -r line || [ -n "$line" ]; do
    [ -z "$line" ] && continue
    name=${line%%=*}
    [ "$name" = "$line" ] && continue
    SECRETS[$name]=${line#*=}
  done < "$1"
  for name in "${SECRET_NAMES[@]}"; do
    if [ -n "${!name:-}" ]; then SECRETS[$name]=${!name}; fi
  done
}

# The environment changes for one process, one `env` argument per line: every secret unset,
# then this process's own set. `service_env nats` gives the NATS server the services' passwords,
# `service_env none` nothing. The proxy stores nothing, so it gets no MongoDB URI either (one
# the caller gave may carry a password).
service_env() { # service | nats
  local name
  for name in "${SECRET_NAMES[@]}" NATS_PASSWORD; do echo "-u"; echo "$name"; done
  if [ "$1" = proxy ]; then printf '%s\n' -u MONGODB_URI -u MONGODB_DB; fi
  [ "$1" = none ] && return 0
  if [ "$1" = nats ]; then
    for name in "${SECRET_NAMES[@]}"; do
      case $name in LATCHKEY_NATS_PASSWORD_*) [ -n "${SECRETS[$name]:-}" ] && echo "$name=${SECRETS[$name]}" ;; esac
    done
    return 0
  fi
  local own
  own=$(own_secrets "$1") || return 1
  for name in $own; do
    [ -n "${SECRETS[$name]:-}" ] && echo "$name=${SECRETS[$name]}"
  done
  name=$(nats_password_name "$1")
  echo "NATS_PASSWORD=${SECRETS[$name]:?no NATS password for $1}"
}
