{{/*
Named templates shared by the chart's templates. Keep to the template subset charts/render/render.ts implements
(its header lists it): the chart is rendered by that renderer in the tests, since no helm binary is at hand.
*/}}

{{/*
The base of every object's name: the release name when it already says "runlet", else "<release>-runlet".
At most 63 characters: Service names are DNS labels.
*/}}
{{- define "runlet.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* The operator's Deployment, ServiceAccount, Service, Lease and RBAC share this name. */}}
{{- define "runlet.operatorName" -}}
{{- printf "%s-operator" (include "runlet.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The activator's Deployment, ServiceAccount, PodDisruptionBudget and RBAC share this name. */}}
{{- define "runlet.activatorName" -}}
{{- printf "%s-activator" (include "runlet.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Service listing the activator pods' holder port; its key's Secret is "<this>-key". */}}
{{- define "runlet.holderName" -}}
{{- printf "%s-holder" (include "runlet.fullname" .) | trunc 59 | trimSuffix "-" }}
{{- end }}

{{/*
The namespace of the held async calls' records: holder.heldCalls.namespace, else "<release namespace>-held", the
release namespace cut so that the name stays a DNS label (63 characters) and never is the release namespace.
*/}}
{{- define "runlet.heldCallsNamespace" -}}
{{- .Values.holder.heldCalls.namespace | default (printf "%s-held" (.Release.Namespace | trunc 58 | trimSuffix "-")) }}
{{- end }}

{{/*
Namespaces never enrolled as App namespaces (tenant-namespaces.yaml refuses them; `runlet namespace enable` reads
them from the tenant ClusterRoles' annotation runlet.dev/never-enrolled): Kubernetes' own, the release namespace
(the operator's Secrets and Lease) and the held calls' namespace.
*/}}
{{- define "runlet.neverEnrolled" -}}
{{- printf "kube-system,kube-public,kube-node-lease,%s,%s" .Release.Namespace (include "runlet.heldCallsNamespace" .) }}
{{- end }}

{{/* The embedded PostgreSQL's StatefulSet and Service, and the Secret the operator makes for it. */}}
{{/* The Service of the operator pods' results collector port, where App pods send their run records. */}}
{{- define "runlet.collectorName" -}}
{{- printf "%s-collector" (include "runlet.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Whether the operator keeps run history in PostgreSQL (and so serves the results collector). */}}
{{- define "runlet.resultsStore" -}}
{{- if .Values.results.postgres.existingSecret }}true{{- else }}{{- if .Values.results.postgres.embedded.enabled }}true{{- end }}{{- end }}
{{- end }}

{{- define "runlet.postgresName" -}}
{{- printf "%s-postgres" (include "runlet.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The ClusterRole users bind for read access to runs. */}}
{{- define "runlet.runsViewerName" -}}
{{- printf "%s-runs-viewer" (include "runlet.fullname" .) }}
{{- end }}

{{- define "runlet.runsOperatorName" -}}
{{- printf "%s-runs-operator" (include "runlet.fullname" .) }}
{{- end }}

{{- define "runlet.appEditorName" -}}
{{- printf "%s-app-editor" (include "runlet.fullname" .) }}
{{- end }}

{{/* Labels on every object of the release. */}}
{{- define "runlet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: runlet
{{- end }}

{{/*
The operator pods' selector. Fixed for the life of the Deployment (a selector cannot change), so it holds
neither the chart version nor the app version.
*/}}
{{- define "runlet.operatorSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "runlet.operatorLabels" -}}
{{ include "runlet.labels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The activator pods' selector: fixed for the life of the Deployment, as the operator's. */}}
{{- define "runlet.activatorSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: activator
{{- end }}

{{- define "runlet.activatorLabels" -}}
{{ include "runlet.labels" . }}
app.kubernetes.io/component: activator
{{- end }}

{{/*
On the operator and activator pods: the peers an App's NetworkPolicy admits (the activator hands held calls to
the run port, the operator scrapes load and cancels on the admin port). A label of its own, since the two
components differ in app.kubernetes.io/component and the release's other pods (PostgreSQL) must not match.
*/}}
{{- define "runlet.appPeerLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
runlet.dev/app-peer: "true"
{{- end }}

{{/* Image tags default to the chart's appVersion: chart and images are released together. */}}
{{- define "runlet.operatorTag" -}}
{{- .Values.operator.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "runlet.operatorImage" -}}
{{- printf "%s:%s" .Values.operator.image.repository (include "runlet.operatorTag" .) }}
{{- end }}

{{/* The sidecar is the runlet image too: operator.image unless apps.sidecar.image names another. */}}
{{- define "runlet.sidecarImage" -}}
{{- printf "%s:%s" (.Values.apps.sidecar.image.repository | default .Values.operator.image.repository) (.Values.apps.sidecar.image.tag | default (include "runlet.operatorTag" .)) }}
{{- end }}

{{- define "runlet.pythonRuntimeImage" -}}
{{- printf "%s:%s" .Values.apps.pythonRuntime.image.repository (.Values.apps.pythonRuntime.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
The operator's configuration file (the schema is OperatorConfigSchema in operator/config.ts). The
ConfigMap holds it, and its checksum on the pod template rolls the pods when it changes: the operator
reads it once, at start. Settings left out keep the operator's defaults; the leader-election identity comes
from POD_NAME.
*/}}
{{- define "runlet.operatorConfig" -}}
sidecarImage: {{ include "runlet.sidecarImage" . | quote }}
pythonRuntimeImage: {{ include "runlet.pythonRuntimeImage" . | quote }}
{{- if .Values.apps.ingress.enabled }}
ingress:
  {{- with .Values.apps.ingress.className }}
  className: {{ . | quote }}
  {{- end }}
  {{- if .Values.apps.ingress.tls }}
  host: {{ required "apps.ingress.tls needs apps.ingress.host: a certificate is for a host" .Values.apps.ingress.host | quote }}
  tls: true
  {{- with .Values.apps.ingress.tlsSecretName }}
  tlsSecretName: {{ . | quote }}
  {{- end }}
  {{- else if .Values.apps.ingress.host }}
  host: {{ .Values.apps.ingress.host | quote }}
  {{- end }}
  {{- with .Values.apps.ingress.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- else }}
ingress: null
{{- end }}
{{- with .Values.apps.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.apps.networkPolicy.enabled }}
networkPolicy:
  {{- with .Values.apps.networkPolicy.ingressController }}
  ingressController:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.apps.networkPolicy.runFromNamespaces }}
  runFromNamespaces:
    {{- toYaml . | nindent 4 }}
  {{- else }}
  runFromNamespaces: []
  {{- end }}
  {{- with .Values.apps.networkPolicy.metricsFromNamespaces }}
  metricsFromNamespaces:
    {{- toYaml . | nindent 4 }}
  {{- else }}
  metricsFromNamespaces: []
  {{- end }}
  # The operator and activator pods: the activator hands held calls over to App pods, the operator scrapes their load.
  operatorPods:
    namespace: {{ .Release.Namespace | quote }}
    matchLabels:
      {{- include "runlet.appPeerLabels" . | nindent 6 }}
{{- else }}
networkPolicy: null
{{- end }}
nativeSidecars: {{ .Values.apps.nativeSidecars }}
{{- with .Values.apps.webhookAllowCidrs }}
webhookAllowCidrs:
  {{- toYaml . | nindent 2 }}
{{- else }}
webhookAllowCidrs: []
{{- end }}
leaderElection:
  # The Role of the chart grants access to this one Lease, in the release namespace.
  namespace: {{ .Release.Namespace | quote }}
  leaseName: {{ include "runlet.operatorName" . | quote }}
server:
  host: 0.0.0.0
  port: {{ .Values.operator.port }}
  metricsPort: {{ .Values.operator.metricsPort }}
results:
  # The collector's own port (App pods send their batches there, each with its pod's projected token), and the
  # bytes of batches it holds at once across all pods.
  collectorPort: {{ .Values.results.collector.port }}
  collectorMaxInFlightMiB: {{ .Values.results.collector.maxInFlightMiB }}
  # Per-namespace quotas of the results store (values results.quotas); 0: no limit.
  maxRunsPerNamespace: {{ int64 .Values.results.quotas.maxRuns }}
  maxRecordMiBPerNamespace: {{ int64 .Values.results.quotas.maxRecordMiB }}
  maxKeptResultMiBPerNamespace: {{ int64 .Values.results.quotas.maxKeptResultMiB }}
  {{- with .Values.results.quotas.namespaces }}
  namespaceQuotas:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- if .Values.holder.enabled }}
holder:
  enabled: true
  # The activator Deployment holds the calls; the operator points Apps at zero at its pods and copies the keys.
  inOperator: false
  # The chart's Service and the key's Secret, in the release namespace (the Role <release>-operator-holder).
  serviceNamespace: {{ .Release.Namespace | quote }}
  serviceName: {{ include "runlet.holderName" . | quote }}
  keySecretName: {{ printf "%s-control" (include "runlet.holderName" .) | quote }}
  # The held async calls' records, in a namespace of their own (the Roles <release>-activator-held-calls and
  # <release>-operator-held-calls there).
  heldCallsNamespace: {{ include "runlet.heldCallsNamespace" . | quote }}
  # Where the leader asks each activator for the calls waiting there (/load), which its autoscaler counts.
  activatorAdminPort: {{ .Values.holder.adminPort }}
{{- else }}
holder:
  enabled: false
{{- end }}
apiKeys:
  maxExpiryDays: {{ .Values.apiKeys.maxExpiryDays }}
logLevel: {{ .Values.operator.logLevel | quote }}
{{- end }}
