{{/*
Names, labels, the image, the rendered configuration and the shape of every process.
The templates in this directory only lay out what these helpers decide.
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* `<release>-<name>`, or just the release when it already holds the name; 63 at most. */}}
{{- define "gateway.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A resource name `<fullname>-<suffix>` that is a valid DNS label (63 characters): a longer
one keeps its first 54 characters and gets a digest of the whole, so two long names stay
apart. Takes (list $ "suffix").
*/}}
{{- define "gateway.resourceName" -}}
{{- $root := index . 0 -}}
{{- $full := printf "%s-%s" (include "gateway.fullname" $root) (index . 1) -}}
{{- if le (len $full) 63 -}}
{{- $full -}}
{{- else -}}
{{- printf "%s-%s" ($full | trunc 54 | trimSuffix "-") ($full | sha256sum | trunc 8) -}}
{{- end -}}
{{- end -}}

{{- define "gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels every resource carries. */}}
{{- define "gateway.labels" -}}
helm.sh/chart: {{ include "gateway.chart" . }}
app.kubernetes.io/name: {{ include "gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: payments-gateway
{{- end -}}

{{/* What selects one process's pods. Takes (dict "root" $ "process" $spec). */}}
{{- define "gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gateway.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{ include "gateway.processLabels" .process }}
{{- end -}}

{{/* The labels that tell one process from another: its component (and forward target). */}}
{{- define "gateway.processLabels" -}}
app.kubernetes.io/component: {{ .component }}
{{- with .target }}
payments-gateway/forward-target: {{ . }}
{{- end }}
{{- end -}}

{{/* The labels of one process's resources. Takes (dict "root" $ "process" $spec). */}}
{{- define "gateway.componentLabels" -}}
{{ include "gateway.labels" .root }}
{{ include "gateway.processLabels" .process }}
{{- end -}}

{{/* The image reference: repository, then @digest or :tag (the appVersion by default). */}}
{{- define "gateway.image" -}}
{{- $image := .Values.image -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gateway.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The configuration file, gateway.toml: `config` parsed, checked, with the keys the chart
owns (listen addresses and ports) written in, rendered again as TOML.

What is refused, each with a message naming the value to change:
- TOML that does not parse;
- a secret written into the file: a provider's `secrets`, a service's `token`, or a URL
  that carries a credential (gateway.hasCredentials). They belong in a Secret, named by
  secret_env / token_env / api_key_env, or in `connections`;
- a chart-owned key set to another value than the chart's (the probes would miss it);
- a forward target without its [forward.NAME] table;
- [outbox] inline = false without processes.relay, which would leave events unpublished.
*/}}
{{- define "gateway.config" -}}
{{- $cfg := fromToml .Values.config -}}
{{- if hasKey $cfg "Error" -}}
{{- fail (printf "config: not valid TOML: %v" (index $cfg "Error")) -}}
{{- end -}}
{{- range $name, $provider := (get $cfg "providers" | default dict) -}}
{{- if and (kindIs "map" $provider) (hasKey $provider "secrets") -}}
{{- fail (printf "config: [providers.%s] secrets is a secret in a ConfigMap: name its variable with secret_env and provide it through secrets.existingSecret" $name) -}}
{{- end -}}
{{- end -}}
{{- range $name, $service := (get $cfg "services" | default dict) -}}
{{- if and (kindIs "map" $service) (hasKey $service "token") -}}
{{- fail (printf "config: [services.%s] token is a secret in a ConfigMap: name its variable with token_env and provide it through secrets.existingSecret" $name) -}}
{{- end -}}
{{- end -}}
{{- range $key := list "database.url" "nats.url" "redis.url" "currency.url" "tracing.endpoint" "alerts.webhook_url" -}}
{{- $parts := splitList "." $key -}}
{{- $table := get $cfg (first $parts) | default dict -}}
{{- if and (kindIs "map" $table) (include "gateway.hasCredentials" (list $key (get $table (last $parts) | toString))) -}}
{{- fail (printf "config: %s carries a credential (a password, or a NATS token): give the URL through connections.* with a secretKeyRef, or secrets.existingSecret" $key) -}}
{{- end -}}
{{- end -}}
{{- $host := .Values.listenHost -}}
{{- $p := .Values.processes -}}
{{- if and $p.serve.adminPort (eq (int $p.serve.adminPort) (int $p.serve.port)) -}}
{{- fail "processes.serve.adminPort must differ from processes.serve.port (or be 0)" -}}
{{- end -}}
{{- $owned := list
  (list (list "http") "host" $host "listenHost")
  (list (list "http") "port" (int $p.serve.port) "processes.serve.port")
  (list (list "http") "admin_port" (int $p.serve.adminPort) "processes.serve.adminPort")
  (list (list "outbox") "relay_metrics_host" $host "listenHost")
  (list (list "outbox") "relay_metrics_port" (int $p.relay.metricsPort) "processes.relay.metricsPort")
  (list (list "settlement") "metrics_host" $host "listenHost")
  (list (list "settlement") "metrics_port" (int $p.settle.metricsPort) "processes.settle.metricsPort")
  (list (list "confirm") "metrics_host" $host "listenHost")
  (list (list "confirm") "metrics_port" (int $p.confirm.metricsPort) "processes.confirm.metricsPort")
  (list (list "console") "host" $host "listenHost")
  (list (list "console") "port" (int $p.console.port) "processes.console.port")
  (list (list "console") "jobs_metrics_host" $host "listenHost")
  (list (list "console") "jobs_metrics_port" (int $p.dlqJobs.metricsPort) "processes.dlqJobs.metricsPort")
-}}
{{- if $p.serve.adminPort -}}
{{- $owned = append $owned (list (list "http") "admin_host" $host "listenHost") -}}
{{- end -}}
{{- $forwards := get $cfg "forward" | default dict -}}
{{- if $p.forward.enabled -}}
{{- range $target := $p.forward.targets -}}
{{- if not (kindIs "map" (get $forwards $target.name)) -}}
{{- fail (printf "processes.forward.targets: %s has no [forward.%s] table in config (its url and secret_env)" $target.name $target.name) -}}
{{- end -}}
{{- $owned = append $owned (list (list "forward" $target.name) "metrics_host" $host "listenHost") -}}
{{- $owned = append $owned (list (list "forward" $target.name) "metrics_port" (int $p.forward.metricsPort) "processes.forward.metricsPort") -}}
{{- end -}}
{{- end -}}
{{- range $entry := $owned -}}
{{- $table := $cfg -}}
{{- range $section := index $entry 0 -}}
{{- if not (hasKey $table $section) -}}
{{- $_ := set $table $section dict -}}
{{- end -}}
{{- $next := index $table $section -}}
{{- if not (kindIs "map" $next) -}}
{{- fail (printf "config: %s must be a table" $section) -}}
{{- end -}}
{{- $table = $next -}}
{{- end -}}
{{- $key := index $entry 1 -}}
{{- $value := index $entry 2 -}}
{{- if and (hasKey $table $key) (ne (toString (index $table $key)) (toString $value)) -}}
{{- fail (printf "config sets %s.%s, which the chart owns (it is %v): set %s instead, so the probes and Services follow it" (join "." (index $entry 0)) $key $value (index $entry 3)) -}}
{{- end -}}
{{- $_ := set $table $key $value -}}
{{- end -}}
{{- $outbox := get $cfg "outbox" | default dict -}}
{{- if and (hasKey $outbox "inline") (eq (toString (get $outbox "inline")) "false") (not $p.relay.enabled) -}}
{{- fail "config: [outbox] inline = false leaves publishing to gateway relay: enable processes.relay" -}}
{{- end -}}
{{- toToml $cfg -}}
{{- end -}}

{{/*
"yes" when a URL carries a credential: a password in its user-info (`user:password@`) or
query (`password=`), or, for NATS, any user-info (`nats://token@host`). A user name alone
(`postgresql://gateway@db/gateway`, with a client certificate, say) is not one. Takes
(list "setting" "url").
*/}}
{{- define "gateway.hasCredentials" -}}
{{- $url := index . 1 -}}
{{- if regexMatch "://[^/?#@]*:[^/?#@]*@|[?&](ssl)?password=" $url -}}yes
{{- else if and (hasPrefix "nats" (index . 0)) (regexMatch "://[^/?#]*@" $url) -}}yes
{{- end -}}
{{- end -}}

{{/* The connection URL variables, each from a secretKeyRef or a plain URL. */}}
{{- define "gateway.connectionEnv" -}}
{{- range $name := list "database" "nats" "redis" }}
{{- $c := index $.Values.connections $name }}
{{- $var := printf "GATEWAY_%s_URL" (upper $name) }}
{{- if and $c.url $c.secretKeyRef.name }}
{{- fail (printf "connections.%s: give url or secretKeyRef, not both" $name) }}
{{- end }}
{{- if $c.secretKeyRef.name }}
{{- if not $c.secretKeyRef.key }}
{{- fail (printf "connections.%s.secretKeyRef.key: which key of Secret %s holds the URL?" $name $c.secretKeyRef.name) }}
{{- end }}
- name: {{ $var }}
  valueFrom:
    secretKeyRef:
      name: {{ $c.secretKeyRef.name }}
      key: {{ $c.secretKeyRef.key }}
{{- else if $c.url }}
{{- if include "gateway.hasCredentials" (list $name $c.url) }}
{{- fail (printf "connections.%s.url carries a credential (a password, or a NATS token): put the URL in a Secret and use connections.%s.secretKeyRef" $name $name) }}
{{- end }}
- name: {{ $var }}
  value: {{ $c.url | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The environment of every gateway container. Takes (dict "root" $ "extraEnv" list).
*/}}
{{- define "gateway.env" -}}
- name: GATEWAY_CONFIG
  value: /etc/gateway/gateway.toml
- name: GATEWAY_LOG_LEVEL
  value: {{ .root.Values.logLevel | quote }}
{{- include "gateway.connectionEnv" .root }}
{{- with .root.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- with .extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "gateway.envFrom" -}}
{{- with .Values.secrets.existingSecret }}
- secretRef:
    name: {{ . }}
{{- end }}
{{- with .Values.extraEnvFrom }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The configuration volume (ConfigMap `name`) and /tmp. Takes (list $ "configmap-name"). */}}
{{- define "gateway.volumes" -}}
{{- $root := index . 0 -}}
- name: config
  configMap:
    name: {{ index . 1 }}
    defaultMode: 0444
    items:
      - key: gateway.toml
        path: gateway.toml
- name: tmp
  emptyDir:
    {{- with $root.Values.tmpVolume.sizeLimit }}
    sizeLimit: {{ . }}
    {{- else }} {}
    {{- end }}
{{- end -}}

{{- define "gateway.volumeMounts" -}}
- name: config
  mountPath: /etc/gateway
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/*
Every long-running process as one spec, as JSON (templates read it with fromJsonArray):
its name, component, args, ports and probe targets, and its values with the top-level
pod defaults filled in. Forward targets become one spec each, over processes.forward.
*/}}
{{- define "gateway.processes" -}}
{{- $root := . -}}
{{- $p := .Values.processes -}}
{{- $specs := list -}}
{{- $serveReady := $p.serve.adminPort | default $p.serve.port -}}
{{- $servePorts := list (dict "name" "http" "containerPort" $p.serve.port) -}}
{{- if $p.serve.adminPort -}}
{{- $servePorts = append $servePorts (dict "name" "admin" "containerPort" $p.serve.adminPort) -}}
{{- end -}}
{{- $serveArgs := list "serve" -}}
{{- if gt (int $p.serve.workers) 1 -}}
{{- $serveArgs = concat $serveArgs (list "--workers" (toString (int $p.serve.workers))) -}}
{{- end -}}
{{- $specs = append $specs (dict "key" "serve" "component" "serve" "values" $p.serve "args" $serveArgs
  "ports" $servePorts "metricsPortName" (ternary "admin" "http" (gt (int $p.serve.adminPort) 0))
  "liveness" (dict "path" "/healthz" "port" $p.serve.port)
  "readiness" (dict "path" "/readyz" "port" $serveReady)
  "preStopSleepSeconds" $p.serve.preStopSleepSeconds) -}}
{{- range $key, $args := dict "relay" (list "relay") "settle" (list "settle") "confirm" (list "confirm") "dlqJobs" (list "dlq" "run-jobs") -}}
{{- $v := index $p $key -}}
{{- /* relay and confirm serve /livez but no /readyz (404): both probes ask /livez. */ -}}
{{- $readyPath := has $key (list "relay" "confirm") | ternary "/livez" "/readyz" -}}
{{- $specs = append $specs (dict "key" $key "component" (eq $key "dlqJobs" | ternary "dlq-jobs" $key) "values" $v "args" $args
  "ports" (list (dict "name" "metrics" "containerPort" $v.metricsPort)) "metricsPortName" "metrics"
  "liveness" (dict "path" "/livez" "port" $v.metricsPort)
  "readiness" (dict "path" $readyPath "port" $v.metricsPort)) -}}
{{- end -}}
{{- $specs = append $specs (dict "key" "console" "component" "console" "values" $p.console "args" (list "console")
  "ports" (list (dict "name" "http" "containerPort" $p.console.port)) "metricsPortName" ""
  "liveness" (dict "path" "/livez" "port" $p.console.port)
  "readiness" (dict "path" "/readyz" "port" $p.console.port)) -}}
{{- $names := dict -}}
{{- range $target := $p.forward.targets -}}
{{- $slug := $target.name | replace "_" "-" -}}
{{- if hasKey $names $slug -}}
{{- fail (printf "processes.forward.targets: %s and %s would share the resource name forward-%s" (get $names $slug) $target.name $slug) -}}
{{- end -}}
{{- $_ := set $names $slug $target.name -}}
{{- $v := omit $p.forward "targets" "metricsPort" -}}
{{- range $k, $val := omit $target "name" -}}
{{- $_ := set $v $k $val -}}
{{- end -}}
{{- $specs = append $specs (dict "key" "forward" "component" "forward" "target" $target.name "slug" (printf "forward-%s" $slug)
  "values" $v "args" (list "forward" "--name" $target.name "--output" "quiet")
  "ports" (list (dict "name" "metrics" "containerPort" $p.forward.metricsPort)) "metricsPortName" "metrics"
  "liveness" (dict "path" "/livez" "port" $p.forward.metricsPort)
  "readiness" (dict "path" "/readyz" "port" $p.forward.metricsPort)) -}}
{{- end -}}
{{- $out := list -}}
{{- range $spec := $specs -}}
{{- $v := deepCopy $spec.values -}}
{{- if $v.enabled -}}
{{- range $k := list "nodeSelector" "tolerations" "affinity" "priorityClassName" -}}
{{- if not (get $v $k) -}}
{{- $_ := set $v $k (get $root.Values $k) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $v "podAnnotations" (merge (dict) ($v.podAnnotations | default dict) $root.Values.podAnnotations) -}}
{{- $_ := set $v "podLabels" (merge (dict) ($v.podLabels | default dict) $root.Values.podLabels) -}}
{{- $probes := $v.probes | default dict -}}
{{- $_ := set $v "probes" (dict
  "liveness" (merge (dict) ($probes.liveness | default dict) $root.Values.probes.liveness)
  "readiness" (merge (dict) ($probes.readiness | default dict) $root.Values.probes.readiness)
  "startup" (merge (dict) ($probes.startup | default dict) $root.Values.probes.startup)) -}}
{{- $_ := set $spec "values" $v -}}
{{- $_ := set $spec "name" (include "gateway.resourceName" (list $root ($spec.slug | default $spec.component))) -}}
{{- $out = append $out $spec -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* An httpGet probe with its timings. Takes (dict "target" {path, port} "timing" {...}). */}}
{{- define "gateway.probe" -}}
httpGet:
  path: {{ .target.path }}
  port: {{ .target.port }}
{{ toYaml .timing }}
{{- end -}}
