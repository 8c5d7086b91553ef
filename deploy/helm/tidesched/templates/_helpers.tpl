{{/* Names: "tidesched" for a release named tidesched (the names deploy/*.yaml use). */}}
{{- define "tidesched.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tidesched.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tidesched.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "tidesched.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tidesched.labels" -}}
{{ include "tidesched.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The ConfigMap holding the scheduler configuration: the chart's own, or an existing one. */}}
{{- define "tidesched.configMapName" -}}
{{- if .Values.config.existingConfigMap -}}
{{- .Values.config.existingConfigMap -}}
{{- else -}}
{{- printf "%s-scheduler-configmap" (include "tidesched.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "tidesched.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace -}}
{{- end -}}

{{/* Refuse value sets that would install a broken scheduler. */}}
{{- define "tidesched.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicas > 1 needs leaderElection.enabled: without it every instance schedules and they undo each other's decisions" -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not (and .Values.metrics.enabled .Values.metrics.service.enabled)) -}}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled and metrics.service.enabled" -}}
{{- end -}}
{{- if and (not .Values.config.existingConfigMap) (not .Values.config.inline) -}}
{{- fail "config: give config.inline (Volcano scheduler configuration text) or config.existingConfigMap" -}}
{{- end -}}
{{- if not .Values.schedulerNames -}}
{{- fail "schedulerNames: give at least one schedulerName to serve" -}}
{{- end -}}
{{- if not (has .Values.evictionMode (list "evict" "delete")) -}}
{{- fail (printf "evictionMode: evict or delete, got %q" .Values.evictionMode) -}}
{{- end -}}
{{- end -}}
