{{/* The chart name, overridable. */}}
{{- define "latchkey.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object name: the release name, with the chart name added unless the
release name already contains it. Kept short so "<fullname>-credential-vault" fits in 63.
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

{{/* Seconds a pod may take to stop: its preStop pause, the service's drain deadline, a margin. */}}
{{- define "latchkey.terminationGracePeriod" -}}
{{- $drain := divf .root.Values.shutdownTimeoutMs 1000 | ceil | int }}
{{- add $drain (.service.preStopSleepSeconds | default 0 | int) 5 }}
{{- end }}
