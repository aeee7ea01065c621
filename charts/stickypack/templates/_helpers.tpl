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

{{/* The webhook's Service and ServiceAccount name. The certificate is for
<this>.<namespace>.svc. */}}
{{- define "stickypack.webhook.serviceName" -}}
{{ include "stickypack.fullname" . }}-webhook
{{- end }}

{{/* The Secret with the webhook's tls.crt and tls.key: webhook.tls.secretName, else the
chart's (generated) or cert-manager's <fullname>-webhook-tls. */}}
{{- define "stickypack.webhook.secretName" -}}
{{- .Values.webhook.tls.secretName | default (printf "%s-webhook-tls" (include "stickypack.fullname" .)) }}
{{- end }}

{{/* The webhook's webhook.yaml: the values' config, with the chart's listen (0.0.0.0:8443)
and tls (the Secret mounted in /tls). */}}
{{- define "stickypack.webhook.config" -}}
{{- $config := deepCopy (.Values.webhook.config | default dict) }}
{{- $_ := set $config "listen" (dict "host" "0.0.0.0" "port" 8443) }}
{{- $_ := set $config "tls" (dict "cert_file" "/tls/tls.crt" "key_file" "/tls/tls.key") }}
{{- toYaml $config }}
{{- end }}

{{/* A webhook route's pod_selector as the metav1.LabelSelector the API server reads (JSON):
"key=value,..." becomes matchLabels (as the webhook parses it: parts trimmed, empty parts
skipped); a mapping keeps matchLabels and matchExpressions, empty parts and empty values
left out (as `stickypack render webhook-config` writes it). Call with (dict "route" $route). */}}
{{- define "stickypack.webhook.objectSelector" -}}
{{- $route := .route }}
{{- $raw := $route.pod_selector }}
{{- $out := dict }}
{{- if kindIs "string" $raw }}
{{- $labels := dict }}
{{- range $part := splitList "," $raw }}
{{- $part = trim $part }}
{{- if $part }}
{{- $kv := splitList "=" $part }}
{{- if ne (len $kv) 2 }}
{{- fail (printf "webhook.config.routes: route %s: pod_selector %q: expected key=value[,key=value...]" $route.name $raw) }}
{{- end }}
{{- $key := trim (index $kv 0) }}
{{- $value := trim (index $kv 1) }}
{{- if and (hasKey $labels $key) (ne (get $labels $key) $value) }}
{{- fail (printf "webhook.config.routes: route %s: pod_selector %q: %s given twice with different values" $route.name $raw $key) }}
{{- end }}
{{- $_ := set $labels $key $value }}
{{- end }}
{{- end }}
{{- if $labels }}
{{- $_ := set $out "matchLabels" $labels }}
{{- end }}
{{- else if kindIs "map" $raw }}
{{- with $raw.matchLabels }}
{{- $_ := set $out "matchLabels" . }}
{{- end }}
{{- $expressions := list }}
{{- range $e := $raw.matchExpressions | default list }}
{{- $expression := dict "key" $e.key "operator" $e.operator }}
{{- with $e.values }}
{{- $_ := set $expression "values" . }}
{{- end }}
{{- $expressions = append $expressions $expression }}
{{- end }}
{{- if $expressions }}
{{- $_ := set $out "matchExpressions" $expressions }}
{{- end }}
{{- end }}
{{- if not $out }}
{{- fail (printf "webhook.config.routes: route %s: an empty pod_selector would route every pod; name the pods' labels" $route.name) }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* A value of the values (null, a boolean, a string, an integer, a list, a map) as the CEL
literal stickypack.render._cel writes (the routing policies' variables): each map value in
dyn(), the keys sorted (as _cel sorts them), strings as JSON without HTML escaping (Go's
encoder escapes U+2028 and U+2029, as _cel does too). Helm reads a values file's numbers as
float64: an integer is written as one; a fraction, or an integer beyond +-(2^53 - 1) (which
a float64 does not hold exactly, nor a policy's JSON Patch), fails. Recursive. */}}
{{- define "stickypack.cel" -}}
{{- $v := . }}
{{- if kindIs "invalid" $v }}null
{{- else if kindIs "bool" $v }}{{ ternary "true" "false" $v }}
{{- else if kindIs "string" $v }}{{ toRawJson $v }}
{{- else if or (kindIs "float64" $v) (kindIs "int64" $v) (kindIs "int" $v) }}
{{- $f := float64 $v }}
{{- if or (gt $f 9007199254740991.0) (lt $f -9007199254740991.0) (ne $f (float64 (int64 $f))) }}
{{- fail (printf "%v: not an integer within +-(2^53 - 1), which a routing policy cannot carry" $v) }}
{{- end }}
{{- int64 $f }}
{{- else if kindIs "slice" $v }}[
{{- range $i, $item := $v }}{{ if $i }}, {{ end }}{{ include "stickypack.cel" $item }}{{ end -}}
]
{{- else if kindIs "map" $v }}{
{{- range $i, $key := keys $v | sortAlpha }}{{ if $i }}, {{ end }}{{ toRawJson $key }}: dyn({{ include "stickypack.cel" (get $v $key) }}){{ end -}}
}
{{- else }}
{{- fail (printf "%v (%s) is not JSON data" $v (kindOf $v)) }}
{{- end }}
{{- end }}

{{/* A NodeSelectorTerm as RoutePlacement.from_dict normalises it (JSON): requirements of
key, operator and (when not empty) values; an empty list left out; a term left empty fails
(values.schema.json refuses it first). Call with (dict "term" $term "where" "..."). */}}
{{- define "stickypack.routing.nodeSelectorTerm" -}}
{{- $out := dict }}
{{- range $part := list "matchExpressions" "matchFields" }}
{{- $requirements := list }}
{{- range $r := get $.term $part | default list }}
{{- $requirement := dict "key" $r.key "operator" $r.operator }}
{{- with $r.values }}
{{- $_ := set $requirement "values" . }}
{{- end }}
{{- $requirements = append $requirements $requirement }}
{{- end }}
{{- if $requirements }}
{{- $_ := set $out $part $requirements }}
{{- end }}
{{- end }}
{{- if not $out }}
{{- fail (printf "%s: an empty term matches no node; give matchExpressions or matchFields" $.where) }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/* A routing route's placement as RoutePlacement.from_dict normalises it, as JSON:
{"requiredTerms": [...], "preferredTerms": [...], "tolerations": [...]} (lists, maybe
empty). A toleration has its operator written (Equal when left out) and its empty key,
value and effect left out. Call with (dict "route" $route "where" "routing.routes[N]"). */}}
{{- define "stickypack.routing.placement" -}}
{{- $affinity := .route.node_affinity | default dict }}
{{- $required := list }}
{{- with get $affinity "requiredDuringSchedulingIgnoredDuringExecution" }}
{{- range $i, $term := .nodeSelectorTerms }}
{{- $where := printf "%s.node_affinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d]" $.where $i }}
{{- $required = append $required (include "stickypack.routing.nodeSelectorTerm" (dict "term" $term "where" $where) | fromJson) }}
{{- end }}
{{- end }}
{{- $preferred := list }}
{{- range $i, $p := get $affinity "preferredDuringSchedulingIgnoredDuringExecution" | default list }}
{{- $where := printf "%s.node_affinity.preferredDuringSchedulingIgnoredDuringExecution[%d].preference" $.where $i }}
{{- $term := include "stickypack.routing.nodeSelectorTerm" (dict "term" $p.preference "where" $where) | fromJson }}
{{- $preferred = append $preferred (dict "weight" $p.weight "preference" $term) }}
{{- end }}
{{- $tolerations := list }}
{{- range $t := .route.tolerations | default list }}
{{- $toleration := dict "operator" ($t.operator | default "Equal") }}
{{- range $field := list "key" "value" "effect" }}
{{- with get $t $field }}
{{- $_ := set $toleration $field . }}
{{- end }}
{{- end }}
{{- if and (hasKey $t "tolerationSeconds") (not (kindIs "invalid" $t.tolerationSeconds)) }}
{{- $_ := set $toleration "tolerationSeconds" $t.tolerationSeconds }}
{{- end }}
{{- $tolerations = append $tolerations $toleration }}
{{- end }}
{{- toJson (dict "requiredTerms" $required "preferredTerms" $preferred "tolerations" $tolerations) }}
{{- end }}
