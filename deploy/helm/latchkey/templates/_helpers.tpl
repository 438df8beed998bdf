{{/* The chart name, overridable. */}}
{{- define "latchkey.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object name: the release name, with the chart name added unless the
release name already contains it. Kept short so "<fullname>-credential-vault" fits in 63
(the metrics Services, one suffix longer, cut it further: servicemonitor.yaml).
*/}}
{{- define "latchkey.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels for an object of one component; call with (dict "root" $ "component" "gateway"). */}}
{{- define "latchkey.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- with .root.Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
{{ include "latchkey.selectorLabels" . }}
{{- end }}

{{/* The labels a Deployment selects its pods by; they never change after install. */}}
{{- define "latchkey.selectorLabels" -}}
app.kubernetes.io/name: {{ include "latchkey.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{- define "latchkey.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The Secret the services read: the operator's own, or the one secret.yaml creates. */}}
{{- define "latchkey.secretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingSecret }}
{{- else if .Values.secrets.data }}
{{- include "latchkey.fullname" . }}
{{- else }}
{{- fail "set secrets.existingSecret (a Secret you manage) or secrets.data (the chart creates one); see values.yaml" }}
{{- end }}
{{- end }}

{{/* The Secret key of one service's own MongoDB URI (mongodb.perServiceUris): MONGODB_URI_<SERVICE>. */}}
{{- define "latchkey.mongodbUriKey" -}}
{{- printf "MONGODB_URI_%s" (. | upper | replace "-" "_") }}
{{- end }}

{{/* A service's drain deadline (SHUTDOWN_TIMEOUT_MS): its own, else the top-level one. Call with (dict "root" $ "service" $svc). */}}
{{- define "latchkey.shutdownTimeoutMs" -}}
{{- .service.shutdownTimeoutMs | default .root.Values.shutdownTimeoutMs | int }}
{{- end }}

{{/* Seconds a pod may take to stop: its preStop pause, the service's drain deadline, a margin. */}}
{{- define "latchkey.terminationGracePeriod" -}}
{{- $drain := divf (include "latchkey.shutdownTimeoutMs" . | int) 1000 | ceil | int }}
{{- add $drain (.service.preStopSleepSeconds | default 0 | int) 5 }}
{{- end }}

{{/* True ("true") for a service with a database of its own: every one but the proxy, which stores nothing. */}}
{{- define "latchkey.hasDatabase" -}}
{{- if ne . "proxy" }}true{{ end }}
{{- end }}

{{/*
The gateway's public address: publicUrl, else the Ingress's host (https when an ingress.tls entry
covers it, or names no hosts and so covers every one), else a port-forward's.
*/}}
{{- define "latchkey.publicUrl" -}}
{{- if .Values.publicUrl }}
{{- .Values.publicUrl }}
{{- else if .Values.ingress.enabled }}
{{- $host := .Values.ingress.host }}
{{- $tls := false }}
{{- range .Values.ingress.tls }}
{{- if or (not .hosts) (has $host .hosts) }}{{ $tls = true }}{{ end }}
{{- end }}
{{- printf "%s://%s" (ternary "https" "http" $tls) $host }}
{{- else }}
{{- "http://localhost:3003" }}
{{- end }}
{{- end }}

{{/* The namespace NATS runs in, where its ConfigMap and passwords Secret go. */}}
{{- define "latchkey.natsNamespace" -}}
{{- .Values.nats.namespace | default .Release.Namespace }}
{{- end }}

{{/* True ("true") when a HorizontalPodAutoscaler owns the service's replica count. */}}
{{- define "latchkey.autoscaled" -}}
{{- if and .autoscaling .autoscaling.enabled }}true{{ end }}
{{- end }}

{{/*
The pod's scheduling: anti-affinity and spread over nodes and zones among the replicas of one
service (from .Values.scheduling), unless the service gives its own. Call with
(dict "root" $ "component" $name "service" $svc).
*/}}
{{- define "latchkey.scheduling" -}}
{{- $mode := .root.Values.scheduling.podAntiAffinity }}
{{- $selector := dict "matchLabels" (include "latchkey.selectorLabels" . | fromYaml) }}
{{- if .service.affinity }}
affinity:
  {{- toYaml .service.affinity | nindent 2 }}
{{- else if eq $mode "soft" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            {{- toYaml $selector | nindent 12 }}
{{- else if eq $mode "hard" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          {{- toYaml $selector | nindent 10 }}
{{- end }}
{{- if .service.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml .service.topologySpreadConstraints | nindent 2 }}
{{- else if .root.Values.scheduling.topologySpread }}
topologySpreadConstraints:
  {{- range list "topology.kubernetes.io/zone" "kubernetes.io/hostname" }}
  - maxSkew: 1
    topologyKey: {{ . }}
    whenUnsatisfiable: ScheduleAnyway
    # Counts only the pods of the current rollout, not those being replaced.
    matchLabelKeys: [pod-template-hash]
    labelSelector:
      {{- toYaml $selector | nindent 6 }}
  {{- end }}
{{- end }}
{{- end }}
