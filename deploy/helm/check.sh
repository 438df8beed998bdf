#!/usr/bin/env bash
# Checks the chart as CI does (`make chart-check`): helm lint, then helm template with each value
# set in check-values/, every rendered object decoded strictly into its Kubernetes API type
# (validate/), and values the schema must refuse. Needs helm and the validator built under
# .data/bin (the Makefile builds both).
set -euo pipefail
cd "$(dirname "$0")/../.."

HELM=${HELM:-.data/bin/helm}
VALIDATE=${K8S_VALIDATE:-.data/bin/k8s-validate}
CHART=deploy/helm/latchkey
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$HELM" version --short
"$HELM" lint --strict "$CHART" -f deploy/helm/check-values/defaults.yaml

for values in deploy/helm/check-values/*.yaml; do
  name=$(basename "$values" .yaml)
  "$HELM" template latchkey "$CHART" --namespace latchkey -f "$values" > "$out/$name.yaml"
  printf '%-22s ' "$name:"
  "$VALIDATE" "$out/$name.yaml"
done

# The schema must refuse a misspelled key, a wrong type and an out-of-range value.
refuse() {
  local why=$1
  shift
  if "$HELM" template latchkey "$CHART" -f deploy/helm/check-values/existing-secret.yaml "$@" > "$out/refused.yaml" 2> "$out/refused.err"; then
    echo "the chart accepted $why ($*)" >&2
    exit 1
  fi
  grep -q 'values don.t meet the specifications of the schema' "$out/refused.err" || { cat "$out/refused.err" >&2; exit 1; }
  echo "refused: $why"
}
refuse 'a misspelled key' --set services.proxy.replica=3
refuse 'a misspelled top-level key' --set networkPolicies.enabled=false
refuse 'a mistyped value' --set-string services.proxy.replicas=three
refuse 'a JetStream replica count NATS cannot hold' --set nats.jetstreamReplicas=0
refuse 'an unknown scheduling mode' --set scheduling.podAntiAffinity=always
refuse 'a scrape interval that is not a duration' --set metrics.serviceMonitor.interval=often
refuse 'an allow list that is not CIDRs' --set-string proxyAllowCidrs=10.0.0.1
refuse 'a drain of no time' --set services.action-runner.shutdownTimeoutMs=0
echo "chart-check: ok"
