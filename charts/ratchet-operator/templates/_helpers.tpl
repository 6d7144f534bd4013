{{/* Names and labels shared by every template. */}}

{{- define "ratchet-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ratchet-operator.fullname" -}}
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

{{- define "ratchet-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "ratchet-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ratchet-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ratchet-operator.labels" -}}
helm.sh/chart: {{ include "ratchet-operator.chart" . }}
{{ include "ratchet-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ratchet
{{- end }}

{{- define "ratchet-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ratchet-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ratchet-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* The Lease the replicas compete for, in the release namespace. */}}
{{- define "ratchet-operator.leaseName" -}}
{{- printf "%s-leader" (include "ratchet-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
