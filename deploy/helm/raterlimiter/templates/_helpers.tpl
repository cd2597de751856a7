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
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "raterlimiter.adminSecret" -}}
{{- default (printf "%s-admin" (include "raterlimiter.fullname" .)) .Values.admin.existingSecret -}}
{{- end -}}

{{/* Refuse values that would deploy something that cannot work. */}}
{{- define "raterlimiter.validate" -}}
{{- if not (has .Values.mode (list "sidecar-example" "rls")) -}}
{{- fail (printf "mode must be sidecar-example or rls, not %q" .Values.mode) -}}
{{- end -}}
{{- if not (has .Values.backend (list "memory" "redis")) -}}
{{- fail (printf "backend must be memory or redis, not %q" .Values.backend) -}}
{{- end -}}
{{- if and (eq .Values.backend "redis") (not .Values.redis.url) (not .Values.redis.existingSecret) -}}
{{- fail "backend redis needs redis.url or redis.existingSecret" -}}
{{- end -}}
{{- if and (eq .Values.mode "rls") (eq .Values.backend "memory") (gt (int .Values.rls.replicas) 1) -}}
{{- fail "rls.replicas above 1 needs backend: redis: memory replicas count apart, each letting the whole limit through" -}}
{{- end -}}
{{- if and (eq .Values.mode "rls") (not .Values.rls.config) -}}
{{- fail "mode rls needs rls.config" -}}
{{- end -}}
{{- if and (eq .Values.mode "sidecar-example") (not .Values.policies) -}}
{{- fail "mode sidecar-example needs policies" -}}
{{- end -}}
{{- end -}}

{{/* The pod's prometheus.io annotations and the user's. */}}
{{- define "raterlimiter.podAnnotations" -}}
{{- if and .Values.metrics.enabled .Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The raterlimiter container, for either shape. */}}
{{- define "raterlimiter.container" -}}
name: raterlimiter
image: {{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
{{- if eq .Values.mode "sidecar-example" }}
restartPolicy: Always # a native sidecar: started, and probed, before the app
{{- end }}
args:
{{- if eq .Values.mode "sidecar-example" }}
  - -listen=unix:/run/raterlimiter/raterlimiter.sock
  - -unix-mode=0660
  - -policies=/etc/raterlimiter/policies/policies.yaml
{{- else }}
  - -listen=127.0.0.1:8080
  - -rls-listen=0.0.0.0:{{ .Values.rls.port }}
  - -rls-config=/etc/raterlimiter/rls
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
ports:
{{- if eq .Values.mode "rls" }}
  - name: grpc
    containerPort: {{ .Values.rls.port }}
{{- end }}
{{- if .Values.metrics.enabled }}
  - name: metrics
    containerPort: {{ .Values.metrics.port }}
{{- end }}
volumeMounts:
{{- if eq .Values.mode "sidecar-example" }}
  - name: raterlimiter-socket
    mountPath: /run/raterlimiter
  - name: policies
    mountPath: /etc/raterlimiter/policies
    readOnly: true
{{- else }}
  - name: rls-config
    mountPath: /etc/raterlimiter/rls
    readOnly: true
{{- end }}
{{- if .Values.metrics.enabled }}
  - name: admin-token
    mountPath: /etc/raterlimiter/admin
    readOnly: true
{{- end }}
{{- $probe := dict "exec" (dict "command" (list "/usr/local/bin/raterlimiter" "-healthcheck" "unix:/run/raterlimiter/raterlimiter.sock")) }}
{{- if eq .Values.mode "rls" }}
{{- $probe = dict "grpc" (dict "port" (int .Values.rls.port)) }}
{{- end }}
# timeoutSeconds leaves room: above -healthcheck-timeout (1s) for the exec probe.
startupProbe:
  {{- toYaml $probe | nindent 2 }}
  periodSeconds: 1
  timeoutSeconds: 3
  failureThreshold: 30
readinessProbe:
  {{- toYaml $probe | nindent 2 }}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 2
livenessProbe:
  {{- toYaml $probe | nindent 2 }}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
resources:
  {{- toYaml .Values.resources | nindent 2 }}
{{- end -}}

{{- define "raterlimiter.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "raterlimiter.scheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
