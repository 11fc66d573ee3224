{{- define "gitfleet.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/name: gitfleet
{{- end -}}
