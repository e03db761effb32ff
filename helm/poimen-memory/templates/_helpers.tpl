{{- define "mem.env" -}}
- name: MEM_DATA_DIR
  value: /var/lib/mem
{{- range $k, $v := .Values.env }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}
{{- define "mem.envFrom" -}}
- secretRef:
    name: {{ .Values.existingSecret }}
{{- end -}}
