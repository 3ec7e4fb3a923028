{{/*
Chart name, truncated to the 63 characters a label value allows.
*/}}
{{- define "meshd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: the prefix of every object's name. The release name alone when it already contains the chart
name (`helm install meshd …` gives `meshd`, not `meshd-meshd`).
*/}}
{{- define "meshd.fullname" -}}
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

{{/*
`helm.sh/chart` label value.
*/}}
{{- define "meshd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of the pods and the Deployment's selector; never change them between releases.
*/}}
{{- define "meshd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "meshd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels of every object.
*/}}
{{- define "meshd.labels" -}}
helm.sh/chart: {{ include "meshd.chart" . }}
{{ include "meshd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: meshd
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Labels of the control plane's objects: the common ones plus the component.
*/}}
{{- define "meshd.controlPlaneLabels" -}}
{{ include "meshd.labels" . }}
app.kubernetes.io/component: control-plane
{{- end }}

{{/*
Name of the control plane's ServiceAccount.
*/}}
{{- define "meshd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "meshd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Name of the control plane's Service.
*/}}
{{- define "meshd.serviceName" -}}
{{- default (include "meshd.fullname" .) .Values.service.name }}
{{- end }}

{{/*
Name of a cluster-scoped object: it carries the namespace, so releases in two namespaces do not collide.
*/}}
{{- define "meshd.clusterScopedName" -}}
{{- printf "%s-%s" (include "meshd.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the remote profile's reader ClusterRole and ClusterRoleBinding.
*/}}
{{- define "meshd.readerClusterRoleName" -}}
{{- if .Values.remote.readerClusterRoleName }}
{{- .Values.remote.readerClusterRoleName }}
{{- else }}
{{- printf "%s-reader-%s" (include "meshd.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/*
Container image: `repository@digest` when a digest is set, else `repository:tag` (tag defaults to appVersion).
*/}}
{{- define "meshd.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Where the mesh ConfigMap is mounted.
*/}}
{{- define "meshd.meshConfigDir" -}}
/etc/istio/config
{{- end }}

{{/*
meshd's flags, one per line, from the values. Each maps to a flag of `meshd --help`.
*/}}
{{- define "meshd.args" -}}
- --grpc-addr=:{{ .Values.ports.grpc }}
- --secure-grpc-addr=:{{ .Values.ports.secureGrpc }}
- --http-addr=:{{ .Values.ports.http }}
- --monitoring-addr=:{{ .Values.ports.monitoring }}
- --domain-suffix={{ .Values.domainSuffix }}
- --mesh-config={{ include "meshd.meshConfigDir" . }}/mesh
- --mesh-networks={{ include "meshd.meshConfigDir" . }}/meshNetworks
- --remote-cluster-timeout={{ .Values.meshd.remoteClusterTimeout }}
- --debounce-after={{ .Values.meshd.debounceAfter }}
- --debounce-max={{ .Values.meshd.debounceMax }}
- --eds-debounce={{ .Values.meshd.edsDebounce }}
- --eds-settle={{ .Values.meshd.edsSettle }}
- --config-poll={{ .Values.meshd.configPoll }}
{{- if .Values.meshd.maxNewStreamsPerSecond }}
- --max-new-streams-per-second={{ .Values.meshd.maxNewStreamsPerSecond }}
{{- end }}
- --drain-deadline={{ .Values.meshd.drainDeadlineSeconds }}s
- --log-level={{ .Values.meshd.logLevel }}
- --log-format={{ .Values.meshd.logFormat }}
{{- if .Values.pluggedInCA.enabled }}
- --ca-dir={{ .Values.pluggedInCA.mountPath }}
{{- end }}
{{- if .Values.remoteKubeconfigs.enabled }}
- --multicluster-kubeconfig-path={{ .Values.remoteKubeconfigs.mountPath }}
{{- end }}
{{- range .Values.meshd.extraArgs }}
- {{ . }}
{{- end }}
{{- end }}

{{/*
Checks across values that the schema cannot express; fails the render with a message naming the values.
*/}}
{{- define "meshd.validate" -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (int .Values.meshd.drainDeadlineSeconds) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must exceed meshd.drainDeadlineSeconds (%d), or Kubernetes kills meshd before its drain finishes" (int .Values.terminationGracePeriodSeconds) (int .Values.meshd.drainDeadlineSeconds)) }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail (printf "autoscaling.minReplicas (%d) must not exceed autoscaling.maxReplicas (%d)" (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- end }}
{{- $ports := list .Values.ports.grpc .Values.ports.secureGrpc .Values.ports.http .Values.ports.monitoring }}
{{- if ne (len $ports) (len (uniq $ports)) }}
{{- fail (printf "ports must be distinct, got grpc=%v secureGrpc=%v http=%v monitoring=%v" .Values.ports.grpc .Values.ports.secureGrpc .Values.ports.http .Values.ports.monitoring) }}
{{- end }}
{{- if and (eq .Values.profile "remote") .Values.remote.discovery.enabled (not .Values.remote.discovery.address) }}
{{- fail "remote.discovery.address (where this cluster's pods reach the primary's meshd) is required when remote.discovery.enabled" }}
{{- end }}
{{- end }}

{{/*
Address family of the remote discovery address: IPv4, IPv6 or FQDN.
*/}}
{{- define "meshd.addressType" -}}
{{- if regexMatch "^[0-9]{1,3}(\\.[0-9]{1,3}){3}$" . }}IPv4
{{- else if contains ":" . }}IPv6
{{- else }}FQDN
{{- end }}
{{- end }}
