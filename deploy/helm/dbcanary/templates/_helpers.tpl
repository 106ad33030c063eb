{{/* Chart name, truncated to a DNS label. */}}
{{- define "dbcanary.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name; short enough that "-<vantage>" and pod suffixes still fit. */}}
{{- define "dbcanary.fullname" -}}
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

{{- define "dbcanary.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dbcanary.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "dbcanary.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "dbcanary.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "dbcanary.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dbcanary.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dbcanary.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The pod template shared by every workload kind. Call with
(dict "root" $ "vantage" $v): $v is a vantages entry or nil.
*/}}
{{- define "dbcanary.podTemplate" -}}
{{- $root := .root }}
{{- $v := .vantage }}
{{- with $root }}
metadata:
  labels:
    {{- include "dbcanary.selectorLabels" . | nindent 4 }}
    {{- with $v }}
    dbcanary.io/vantage: {{ .name }}
    {{- end }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    {{- if .Values.rollOnConfigChange }}
    checksum/config: {{ toYaml .Values.config | sha256sum }}
    {{- end }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "dbcanary.serviceAccountName" . }}
  automountServiceAccountToken: {{ .Values.automountServiceAccountToken }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: dbcanary
      image: {{ include "dbcanary.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - run
        - --config.file=/etc/dbcanary/dbcanary.yaml
        - --web.listen-address=:{{ .Values.service.port }}
        - --log.level={{ .Values.logLevel }}
        - --log.format={{ .Values.logFormat }}
        {{- if .Values.webConfig.existingSecret }}
        - --web.config.file=/etc/dbcanary/web/{{ .Values.webConfig.key }}
        {{- end }}
        {{- if eq .Values.mode "sharded" }}
        - --shard.count={{ .Values.replicas }}
        {{- end }}
        {{- with .Values.extraArgs }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      env:
        # Instance id (part of every canary queue, key and object name) = pod name.
        - name: DBCANARY_INSTANCE_ID
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- if eq .Values.mode "sharded" }}
        # Kubernetes >= 1.28 labels StatefulSet pods with their ordinal; older ones leave
        # this empty and dbcanary reads the ordinal from the host name NAME-N.
        - name: DBCANARY_SHARD_INDEX
          valueFrom:
            fieldRef:
              fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
        {{- end }}
        {{- with $v }}
        - name: DBCANARY_VANTAGE
          value: {{ .name | quote }}
        {{- end }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: http-metrics
          containerPort: {{ .Values.service.port }}
          protocol: TCP
      {{- with .Values.livenessProbe }}
      livenessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.readinessProbe }}
      readinessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: /etc/dbcanary
          readOnly: true
        {{- range .Values.existingSecrets }}
        - name: secret-{{ .name }}
          mountPath: /etc/dbcanary/secrets/{{ .name }}
          readOnly: true
        {{- end }}
        {{- if .Values.webConfig.existingSecret }}
        - name: web-config
          mountPath: /etc/dbcanary/web
          readOnly: true
        {{- end }}
        {{- if .Values.stateDir.enabled }}
        - name: state
          mountPath: {{ .Values.stateDir.path }}
        {{- end }}
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    {{- with .Values.extraContainers }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "dbcanary.fullname" . }}
    {{- range .Values.existingSecrets }}
    - name: secret-{{ .name }}
      secret:
        secretName: {{ .name }}
        # Group-readable: fsGroup gives the non-root user the group.
        defaultMode: 0440
        {{- with .items }}
        items:
          {{- toYaml . | nindent 10 }}
        {{- end }}
    {{- end }}
    {{- if .Values.webConfig.existingSecret }}
    - name: web-config
      secret:
        secretName: {{ .Values.webConfig.existingSecret }}
        defaultMode: 0440
    {{- end }}
    {{- if .Values.stateDir.enabled }}
    - name: state
      {{- if .Values.stateDir.existingClaim }}
      persistentVolumeClaim:
        claimName: {{ .Values.stateDir.existingClaim }}
      {{- else }}
      emptyDir:
        sizeLimit: 16Mi
      {{- end }}
    {{- end }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- $nodeSelector := .Values.nodeSelector }}
  {{- with $v }}
  {{- $nodeSelector = merge (dict) (default (dict "topology.kubernetes.io/zone" .name) .nodeSelector) $root.Values.nodeSelector }}
  {{- end }}
  {{- with $nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
The bench Jobs' pod template up to its containers (templates/bench.yaml adds
them). Call with (dict "root" $ "component" "bench"|"bench-merge").
*/}}
{{- define "dbcanary.benchPod" -}}
{{- $b := .root.Values.bench }}
{{- $component := .component }}
{{- with .root }}
metadata:
  labels:
    {{- include "dbcanary.benchLabels" (dict "root" . "component" $component) | nindent 4 }}
  {{- with .Values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  restartPolicy: Never
  serviceAccountName: {{ include "dbcanary.serviceAccountName" . }}
  automountServiceAccountToken: {{ .Values.automountServiceAccountToken }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if $b.affinity }}
  affinity:
    {{- toYaml $b.affinity | nindent 4 }}
  {{- else if eq $component "bench" }}
  # One driver per node where the cluster has the nodes: the point of several drivers.
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "dbcanary.benchLabels" (dict "root" . "component" "bench") | nindent 16 }}
  {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "dbcanary.fullname" . }}
    {{- range .Values.existingSecrets }}
    - name: secret-{{ .name }}
      secret:
        secretName: {{ .name }}
        defaultMode: 0440
        {{- with .items }}
        items:
          {{- toYaml . | nindent 10 }}
        {{- end }}
    {{- end }}
    - name: reports
      persistentVolumeClaim:
        claimName: {{ $b.reports.existingClaim }}
{{- end }}
{{- end }}

{{/*
The bench pods' labels: not the daemon's selector labels, so that neither the
Service (nor its ServiceMonitor), the PodDisruptionBudget nor the NetworkPolicy
selects a bench pod.
*/}}
{{- define "dbcanary.benchLabels" -}}
app.kubernetes.io/name: {{ include "dbcanary.name" .root }}-bench
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The bench drivers' volume mounts: the config, the secrets and the reports claim. */}}
{{- define "dbcanary.benchMounts" -}}
- name: config
  mountPath: /etc/dbcanary
  readOnly: true
{{- range .Values.existingSecrets }}
- name: secret-{{ .name }}
  mountPath: /etc/dbcanary/secrets/{{ .name }}
  readOnly: true
{{- end }}
- name: reports
  mountPath: /reports
{{- end }}
