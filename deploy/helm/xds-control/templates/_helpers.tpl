{{/*
Names, labels and the one xds-control container spec both modes share.
*/}}

{{- define "xds-control.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name; a release called like the chart ("xds-control") keeps that name, so
the Service is xds-control.<namespace>.svc, as envoy/bootstrap-gateway.yaml expects.
*/}}
{{- define "xds-control.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "xds-control.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "xds-control.selectorLabels" -}}
app.kubernetes.io/name: {{ include "xds-control.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "xds-control.labels" -}}
helm.sh/chart: {{ include "xds-control.chart" . }}
{{ include "xds-control.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- end }}

{{- define "xds-control.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "xds-control.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "xds-control.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "xds-control.adminTokenSecret" -}}
{{- default (printf "%s-admin-token" (include "xds-control.fullname" .)) .Values.adminToken.existingSecret }}
{{- end }}

{{/*
Ports come from values.config, the one place they are set: the server binds what its config
says, and the container, the Service and the probes follow it.
*/}}
{{- define "xds-control.adminPort" -}}
{{- regexFind "[0-9]+$" (dig "admin_address" "127.0.0.1:9902" .Values.config) }}
{{- end }}

{{- define "xds-control.xdsPort" -}}
{{- $address := dig "xds_address" "0.0.0.0:18000" .Values.config }}
{{- if hasPrefix "unix:" $address }}{{ fail "central mode serves xDS over TCP: set config.xds_address to IP:PORT (a unix:// address is for mode: sidecar)" }}{{ end }}
{{- regexFind "[0-9]+$" $address }}
{{- end }}

{{/*
The ports the pools' pickers listen on (config.pools[].picker.address and
config.inference_pools.picker.address), each once, space-separated: the container and, in
central mode, the Service expose them (named picker-0, picker-1, ...).
*/}}
{{- define "xds-control.pickerPorts" -}}
{{- $ports := list }}
{{- range .Values.config.pools }}
{{- with .picker }}{{ $ports = append $ports (regexFind "[0-9]+$" .address) }}{{ end }}
{{- end }}
{{- with .Values.config.inference_pools }}
{{- with .picker }}{{ $ports = append $ports (regexFind "[0-9]+$" .address) }}{{ end }}
{{- end }}
{{- join " " (uniq $ports) }}
{{- end }}

{{- define "xds-control.checks" -}}
{{- $central := eq .Values.mode "central" }}
{{- $limited := false }}
{{- range .Values.config.listeners }}{{ if .limits }}{{ $limited = true }}{{ end }}{{ end }}
{{- $counted := not (empty .Values.config.gateways) }}
{{- range .Values.config.node_groups }}{{ if .gateways }}{{ $counted = true }}{{ end }}{{ end }}
{{- $replicas := int (ternary .Values.replicaCount .Values.sidecar.workload.replicas $central) }}
{{- if and (gt $replicas 1) $limited (not $counted) }}
{{- fail (printf "%d replicas with config.listeners[].limits: each control plane would divide the fleet-wide budgets by its own Envoys only, and the fleet would admit about %d times its budget; set config.gateways (the gateway Service's EndpointSlices, a headless Service's name, or a count) so every replica divides by the whole fleet" $replicas $replicas) }}
{{- end }}
{{- $budgeted := false }}
{{- range .Values.config.pools }}{{ if dig "picker" "flow" "budgets" (list) . }}{{ $budgeted = true }}{{ end }}{{ end }}
{{- if and (gt $replicas 1) $budgeted (not .Values.config.control_planes) }}
{{- fail (printf "%d replicas with pools[].picker.flow.budgets: each replica's picker would hold a whole token budget, and the fleet would be served about %d times it; set config.control_planes (this chart's Service, e.g. kubernetes: {namespace: %s, service: %s}, or a count) so each replica holds its share" $replicas $replicas .Release.Namespace (include "xds-control.fullname" .)) }}
{{- end }}
{{- if $central }}
{{- range .Values.config.pools }}
{{- if and .picker (not .picker.envoy_address) }}
{{- fail (printf "pool %s: in central mode Envoy reaches the picker through the Service: set picker.envoy_address to its NAME:PORT (e.g. %s.%s.svc:%s)" .name (include "xds-control.fullname" $) $.Release.Namespace (regexFind "[0-9]+$" .picker.address)) }}
{{- end }}
{{- end }}
{{- end }}
{{- if regexMatch "^(127\\.|localhost:|\\[::1\\]:)" (dig "admin_address" "127.0.0.1:9902" .Values.config) }}
{{- fail "config.admin_address is on loopback: bind 0.0.0.0:PORT, since the kubelet's probes and Prometheus reach the pod's IP (the chart's Secret holds the token the admin API then requires)" }}
{{- end }}
{{- if and .Values.tls.enabled (not (hasKey .Values.config "tls")) }}
{{- fail "tls.enabled mounts the certificates; config.tls must name them (cert_file, key_file under tls.mountPath)" }}
{{- end }}
{{- if and .Values.rbac.create (not .Values.rbac.clusterWide) }}
{{- $allowed := default (list .Release.Namespace) .Values.rbac.namespaces }}
{{- range .Values.config.pools }}
{{- $namespace := dig "kubernetes" "namespace" "" . }}
{{- if and $namespace (not (has $namespace $allowed)) }}
{{- fail (printf "pool %s reads EndpointSlices in namespace %s, which rbac.namespaces does not grant: add it there (or set rbac.clusterWide)" .name $namespace) }}
{{- end }}
{{- end }}
{{- $fleets := list }}
{{- range (prepend (default (list) .Values.config.node_groups) .Values.config) }}
{{- with .gateways }}{{ with .kubernetes }}{{ $fleets = append $fleets .namespace }}{{ end }}{{ end }}
{{- end }}
{{- with .Values.config.control_planes }}{{ with .kubernetes }}{{ $fleets = append $fleets .namespace }}{{ end }}{{ end }}
{{- range $fleets }}
{{- if not (has . $allowed) }}
{{- fail (printf "gateways or control_planes reads a Service's EndpointSlices in namespace %s, which rbac.namespaces does not grant: add it there (or set rbac.clusterWide)" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- range $pool := .Values.config.pools }}
{{- with (dig "picker" "tokenizer" "" $pool) }}
{{- if not (hasPrefix "/" .) }}
{{- fail (printf "pool %s: picker.tokenizer %s is relative to the config file's folder, which is the chart's ConfigMap: mount the tokenizer with tokenizers.<name> and set picker.tokenizer to /etc/xds-control/tokenizers/<name>" $pool.name .) }}
{{- end }}
{{- if hasPrefix "/etc/xds-control/tokenizers/" . }}
{{- $mounted := index (splitList "/" .) 4 }}
{{- if not (hasKey $.Values.tokenizers $mounted) }}
{{- fail (printf "pool %s: picker.tokenizer %s is under tokenizers.%s, which values does not mount (tokenizers: %s)" $pool.name . $mounted (keys $.Values.tokenizers | sortAlpha | join ", " | default "none")) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if and (eq .Values.mode "sidecar") (not (hasPrefix "unix://" (dig "xds_address" "" .Values.config))) }}
{{- fail "mode: sidecar serves ADS on a Unix socket: set config.xds_address to unix://<sidecar.socketDir>/ads.sock" }}
{{- end }}
{{- end }}

{{/*
The xds-control container, the same in both modes: config from the ConfigMap (reloaded live
when the ConfigMap changes), a writable /tmp for the engine's state file on a read-only root,
the admin token from a Secret, optional TLS certificates.
*/}}
{{- define "xds-control.container" -}}
- name: xds-control
  image: {{ include "xds-control.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args:
    - --config
    - /etc/xds-control/config/config.yaml
    {{- with .Values.extraArgs }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  env:
    - name: XDS_CONTROL_LOG_FORMAT
      value: json
    - name: XDS_CONTROL_ADMIN_TOKEN
      valueFrom:
        secretKeyRef:
          name: {{ include "xds-control.adminTokenSecret" . }}
          key: {{ .Values.adminToken.key }}
    {{- with .Values.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    {{- if eq .Values.mode "central" }}
    - name: xds
      containerPort: {{ include "xds-control.xdsPort" . }}
      protocol: TCP
    {{- end }}
    - name: admin
      containerPort: {{ include "xds-control.adminPort" . }}
      protocol: TCP
    {{- range $i, $port := splitList " " (include "xds-control.pickerPorts" .) }}
    {{- if $port }}
    - name: picker-{{ $i }}
      containerPort: {{ $port }}
      protocol: TCP
    {{- end }}
    {{- end }}
  livenessProbe:
    httpGet:
      path: /healthz
      port: admin
    {{- toYaml .Values.probes.liveness | nindent 4 }}
  readinessProbe:
    httpGet:
      path: /readyz
      port: admin
    {{- toYaml .Values.probes.readiness | nindent 4 }}
  {{- with .Values.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: config
      mountPath: /etc/xds-control/config
      readOnly: true
    - name: tmp
      mountPath: /tmp
    {{- if .Values.tls.enabled }}
    - name: tls
      mountPath: {{ .Values.tls.mountPath }}
      readOnly: true
    {{- end }}
    {{- if eq .Values.mode "sidecar" }}
    - name: xds-socket
      mountPath: {{ .Values.sidecar.socketDir }}
    {{- end }}
    {{- range $name, $_ := .Values.tokenizers }}
    - name: tokenizer-{{ $name }}
      mountPath: /etc/xds-control/tokenizers/{{ $name }}
      readOnly: true
    {{- end }}
    {{- with .Values.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/*
The volumes the container above mounts.
*/}}
{{- define "xds-control.volumes" -}}
- name: config
  configMap:
    name: {{ include "xds-control.fullname" . }}
- name: tmp
  emptyDir: {}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ required "tls.enabled needs tls.secretName (a Secret with tls.crt, tls.key and, for mutual TLS, ca.crt)" .Values.tls.secretName }}
{{- end }}
{{- if eq .Values.mode "sidecar" }}
- name: xds-socket
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
{{- end }}
{{- range $name, $source := .Values.tokenizers }}
- name: tokenizer-{{ $name }}
  {{- toYaml $source | nindent 2 }}
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "xds-control.podSpecCommon" -}}
serviceAccountName: {{ include "xds-control.serviceAccountName" . }}
automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
