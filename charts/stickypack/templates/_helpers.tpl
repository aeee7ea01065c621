{{/* Chart name, or nameOverride. */}}
{{- define "stickypack.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object name prefix: fullnameOverride, else the release name when it contains the chart
name, else "<release>-<chart>". Kept short enough for "-build-scheduler" suffixes. */}}
{{- define "stickypack.fullname" -}}
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

{{/* Labels of every object; call with (dict "root" $ "component" "...") */}}
{{- define "stickypack.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: stickypack
{{ include "stickypack.selectorLabels" . }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels; call with (dict "root" $ "component" "...") */}}
{{- define "stickypack.selectorLabels" -}}
app.kubernetes.io/name: {{ include "stickypack.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "stickypack.scheduler.serviceAccountName" -}}
{{ include "stickypack.fullname" . }}-scheduler
{{- end }}

{{- define "stickypack.extender.serviceAccountName" -}}
{{ include "stickypack.fullname" . }}-extender
{{- end }}

{{/* The extender's Service name (the URL in files/scheduler-stickypack-builds.yaml is
http://stickypack-extender:8888: this name for a release named stickypack). */}}
{{- define "stickypack.extender.serviceName" -}}
{{ include "stickypack.fullname" . }}-extender
{{- end }}

{{/* The URL the builds scheduler asks: scheduler.builds.extenderURL, else this release's
extender Service (same namespace as the scheduler, so the short name resolves). */}}
{{- define "stickypack.extender.url" -}}
{{- if .Values.scheduler.builds.extenderURL }}
{{- .Values.scheduler.builds.extenderURL | trimSuffix "/" }}
{{- else if .Values.extender.enabled }}
{{- printf "http://%s:%d" (include "stickypack.extender.serviceName" .) (int .Values.extender.service.port) }}
{{- else }}
{{- fail "scheduler.builds needs an extender: set extender.enabled=true or scheduler.builds.extenderURL (or scheduler.builds.enabled=false)" }}
{{- end }}
{{- end }}

{{/* The namespace of the extender's build history ConfigMaps. */}}
{{- define "stickypack.extender.historyNamespace" -}}
{{- $history := .Values.extender.config.history | default dict }}
{{- $history.namespace | default .Release.Namespace }}
{{- end }}

{{/* The history store the extender uses (its default: configmap). */}}
{{- define "stickypack.extender.historyStore" -}}
{{- $history := .Values.extender.config.history | default dict }}
{{- $history.store | default "configmap" }}
{{- end }}

{{/* The extender's extender.yaml: the values' config, with listen from extender.port and
history.namespace made explicit. */}}
{{- define "stickypack.extender.config" -}}
{{- $config := deepCopy (.Values.extender.config | default dict) }}
{{- $history := deepCopy ($config.history | default dict) }}
{{- $_ := set $history "namespace" (include "stickypack.extender.historyNamespace" .) }}
{{- $_ := set $config "history" $history }}
{{- $_ := set $config "listen" (dict "host" "0.0.0.0" "port" (int .Values.extender.port)) }}
{{- toYaml $config }}
{{- end }}

{{/* A KubeSchedulerConfiguration from a committed rendered file, with the chart's only
changes: leader election on for more than one replica, and for the builds scheduler the
extender's URL (and weight, if given). Call with (dict "root" $ "file" "..." "replicas" N
"extender" bool). */}}
{{- define "stickypack.scheduler.config" -}}
{{- $config := .root.Files.Get .file | fromYaml }}
{{- if not $config.profiles }}
{{- fail (printf "%s is missing or not a KubeSchedulerConfiguration" .file) }}
{{- end }}
{{- if gt (int .replicas) 1 }}
{{- $_ := set $config.leaderElection "leaderElect" true }}
{{- end }}
{{- if .extender }}
{{- $entry := first $config.extenders }}
{{- $_ := set $entry "urlPrefix" (include "stickypack.extender.url" .root) }}
{{- with .root.Values.scheduler.builds.extenderWeight }}
{{- $_ := set $entry "weight" (int .) }}
{{- end }}
{{- end }}
{{- toYaml $config }}
{{- end }}
