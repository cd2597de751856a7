{{- define "raterlimiter.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "raterlimiter.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "raterlimiter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "raterlimiter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "raterlimiter.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "raterlimiter.selectorLabels" . }}
app.kubernetes.io/component: {{ .Values.mode }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "raterlimiter.adminSecret" -}}
{{- default (printf "%s-admin" (include "raterlimiter.fullname" .)) .Values.admin.existingSecret -}}
{{- end -}}

{{/* The metrics port's name: a sidecar's must not meet the app's ports. */}}
{{- define "raterlimiter.metricsPort" -}}
{{- if eq .Values.mode "sidecar" }}rl-metrics{{ else }}metrics{{ end -}}
{{- end -}}

{{/* Refuse values that would deploy something that cannot work; the
schema has refused unknown keys and wrong types already. */}}
{{- define "raterlimiter.validate" -}}
{{- if and (eq .Values.backend "redis") (not .Values.redis.url) (not .Values.redis.existingSecret) -}}
{{- fail "backend redis needs redis.url or redis.existingSecret" -}}
{{- end -}}
{{- if and (ne .Values.mode "sidecar") (eq .Values.backend "memory") (gt (int .Values.replicas) 1) -}}
{{- fail (printf "mode %s: replicas above 1 needs backend: redis: memory replicas count apart, each letting the whole limit through" .Values.mode) -}}
{{- end -}}
{{- if and .Values.rls.tls.clientSAN (not .Values.rls.tls.clientCA) -}}
{{- fail "rls.tls.clientSAN needs rls.tls.clientCA" -}}
{{- end -}}
{{- if and .Values.rls.tls.clientCA (not .Values.rls.tls.secretName) -}}
{{- fail "rls.tls.clientCA needs rls.tls.secretName (the Secret's ca.crt)" -}}
{{- end -}}
{{- end -}}

{{/* The prometheus.io annotations of the pods. */}}
{{- define "raterlimiter.scrapeAnnotations" -}}
{{- if and .Values.metrics.enabled .Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{/* The health check a probe asks: /livez or /readyz, by the kubelet
(gateway: the port beyond loopback) or by the binary itself (the image
has no shell nor curl). */}}
{{- define "raterlimiter.probe" -}}
{{- $top := index . 0 -}}
{{- $path := index . 1 -}}
{{- if eq $top.Values.mode "gateway" }}
httpGet:
  path: {{ $path }}
  port: http
{{- else if eq $top.Values.mode "rls" }}
exec:
  command: [/usr/local/bin/raterlimiter, -healthcheck, "http://127.0.0.1:8080{{ $path }}"]
{{- else }}
exec:
  command: [/usr/local/bin/raterlimiter, -healthcheck, "unix:/run/raterlimiter/raterlimiter.sock:{{ $path }}"]
{{- end }}
{{- end -}}

{{/* The raterlimiter container, for every shape. */}}
{{- define "raterlimiter.container" -}}
name: raterlimiter
image: {{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
{{- if eq .Values.mode "sidecar" }}
restartPolicy: Always # a native sidecar: started, and probed, before the app
{{- end }}
args:
{{- if eq .Values.mode "sidecar" }}
  # Only this pod's containers that mount the socket's directory reach it.
  - -listen=unix:/run/raterlimiter/raterlimiter.sock
  - -unix-mode=0666
  - -policies=/etc/raterlimiter/policies/policies.yaml
{{- else if eq .Values.mode "gateway" }}
  - -listen=0.0.0.0:{{ .Values.gateway.port }}
  - -policies=/etc/raterlimiter/policies/policies.yaml
  - -auth-headers={{ .Values.gateway.authHeaders }}
{{- if .Values.gateway.policiesOnly }}
  - -policies-only
{{- end }}
{{- else }}
  - -listen=127.0.0.1:8080
  - -rls-listen=0.0.0.0:{{ .Values.rls.port }}
  - -rls-config=/etc/raterlimiter/rls
{{- with .Values.rls.tls }}
{{- if .secretName }}
  - -rls-tls-cert=/etc/raterlimiter/tls/tls.crt
  - -rls-tls-key=/etc/raterlimiter/tls/tls.key
{{- end }}
{{- if .clientCA }}
  - -rls-tls-client-ca=/etc/raterlimiter/tls/ca.crt
{{- end }}
{{- if .clientSAN }}
  - -rls-tls-client-san={{ .clientSAN }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.metrics.enabled }}
  - -admin-listen=0.0.0.0:{{ .Values.metrics.port }}
  - -admin-token-file=/etc/raterlimiter/admin/token
{{- end }}
  - -log-format={{ .Values.logFormat }}
  - -backend={{ .Values.backend }}
{{- if eq .Values.backend "memory" }}
  - -max-bucket-bytes={{ int64 .Values.memory.maxBucketBytes }}
  - -shards={{ int .Values.memory.shards }}
{{- end }}
{{- range .Values.extraArgs }}
  - {{ . | quote }}
{{- end }}
{{- if or .Values.goMemLimit (eq .Values.backend "redis") .Values.extraEnv }}
env:
{{- if .Values.goMemLimit }}
  - name: GOMEMLIMIT
    value: {{ .Values.goMemLimit | quote }}
{{- end }}
{{- if eq .Values.backend "redis" }}
  - name: RATERLIMITER_REDIS_URL
{{- if .Values.redis.existingSecret }}
    valueFrom:
      secretKeyRef:
        name: {{ .Values.redis.existingSecret }}
        key: {{ .Values.redis.existingSecretKey }}
{{- else }}
    value: {{ .Values.redis.url | quote }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- if or (ne .Values.mode "sidecar") .Values.metrics.enabled }}
ports:
{{- if eq .Values.mode "gateway" }}
  - name: http
    containerPort: {{ .Values.gateway.port }}
{{- else if eq .Values.mode "rls" }}
  - name: grpc
    containerPort: {{ .Values.rls.port }}
{{- end }}
{{- if .Values.metrics.enabled }}
  - name: {{ include "raterlimiter.metricsPort" . }}
    containerPort: {{ .Values.metrics.port }}
{{- end }}
{{- end }}
volumeMounts:
{{- if eq .Values.mode "sidecar" }}
  - name: raterlimiter-socket
    mountPath: /run/raterlimiter
{{- end }}
{{- if eq .Values.mode "rls" }}
  - name: raterlimiter-rls-config
    mountPath: /etc/raterlimiter/rls
    readOnly: true
{{- if .Values.rls.tls.secretName }}
  - name: raterlimiter-tls
    mountPath: /etc/raterlimiter/tls
    readOnly: true
{{- end }}
{{- else }}
  - name: raterlimiter-policies
    mountPath: /etc/raterlimiter/policies
    readOnly: true
{{- end }}
{{- if .Values.metrics.enabled }}
  - name: raterlimiter-admin-token
    mountPath: /etc/raterlimiter/admin
    readOnly: true
{{- end }}
# The process serves at once (live); it is ready while its backend
# answers. timeoutSeconds leaves room above -healthcheck-timeout (1s).
startupProbe:
  {{- include "raterlimiter.probe" (list . "/livez") | trim | nindent 2 }}
  periodSeconds: 1
  timeoutSeconds: 3
  failureThreshold: 30
readinessProbe:
  {{- include "raterlimiter.probe" (list . "/readyz") | trim | nindent 2 }}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 2
livenessProbe:
  {{- include "raterlimiter.probe" (list . "/livez") | trim | nindent 2 }}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
resources:
  {{- toYaml .Values.resources | nindent 2 }}
{{- end -}}

{{/* The volumes the container mounts. */}}
{{- define "raterlimiter.volumes" -}}
{{- if eq .Values.mode "sidecar" }}
- name: raterlimiter-socket
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
{{- end }}
{{- if eq .Values.mode "rls" }}
- name: raterlimiter-rls-config
  configMap:
    name: {{ include "raterlimiter.fullname" . }}
{{- if .Values.rls.tls.secretName }}
- name: raterlimiter-tls
  secret:
    secretName: {{ .Values.rls.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- else }}
- name: raterlimiter-policies
  configMap:
    name: {{ include "raterlimiter.fullname" . }}
{{- end }}
{{- if .Values.metrics.enabled }}
- name: raterlimiter-admin-token
  secret:
    secretName: {{ include "raterlimiter.adminSecret" . }}
{{- if eq .Values.mode "sidecar" }}
    # Your pod has no fsGroup of this chart's: readable by the container's
    # one user whatever its group.
    defaultMode: 0444
{{- else }}
    defaultMode: 0440
{{- end }}
{{- end }}
{{- end -}}

{{/*
The sidecar in your own Deployment (mode sidecar), for a chart that has
this one as a dependency. Each takes this chart's scope,
.Subcharts.raterlimiter:

  spec:
    replicas: {{ .Values.raterlimiter.replicas }}
    template:
      metadata:
        annotations:
          {{- include "raterlimiter.sidecar.podAnnotations" .Subcharts.raterlimiter | nindent 10 }}
      spec:
        initContainers:
          {{- include "raterlimiter.sidecar.container" .Subcharts.raterlimiter | nindent 10 }}
        containers:
          - name: app
            env:
              {{- include "raterlimiter.sidecar.appEnv" .Subcharts.raterlimiter | nindent 14 }}
            volumeMounts:
              {{- include "raterlimiter.sidecar.appVolumeMounts" .Subcharts.raterlimiter | nindent 14 }}
        volumes:
          {{- include "raterlimiter.sidecar.volumes" .Subcharts.raterlimiter | nindent 10 }}
*/}}
{{- define "raterlimiter.sidecar.container" -}}
{{- include "raterlimiter.validate" . -}}
{{- if ne .Values.mode "sidecar" -}}
{{- fail "raterlimiter.sidecar.* need mode: sidecar" -}}
{{- end -}}
- {{ include "raterlimiter.container" . | indent 2 | trim }}
{{- end -}}

{{- define "raterlimiter.sidecar.volumes" -}}
{{- include "raterlimiter.volumes" . | trim }}
{{- end -}}

{{- define "raterlimiter.sidecar.appEnv" -}}
- name: RATERLIMITER_URL
  value: unix:/run/raterlimiter/raterlimiter.sock
{{- end -}}

{{- define "raterlimiter.sidecar.appVolumeMounts" -}}
- name: raterlimiter-socket
  mountPath: /run/raterlimiter
{{- end -}}

{{- define "raterlimiter.sidecar.podAnnotations" -}}
{{- include "raterlimiter.scrapeAnnotations" . | trim }}
{{- end -}}
