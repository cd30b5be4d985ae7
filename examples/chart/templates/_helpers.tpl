{{/*
The seeded ledger of a fresh install, as `migrate seed-fresh TREE --render
configmap` printed it at the release cut (files/ledger-seed.yaml): its `data`
holds one `m.<slug>` key per manifest line.
*/}}
{{- define "migrations.seed" -}}
{{- $seed := .Files.Get "files/ledger-seed.yaml" | fromYaml -}}
{{- if or (not $seed) (not (kindIs "map" (get $seed "data"))) -}}
{{- fail "files/ledger-seed.yaml is missing or has no data: render it with render-files.sh" -}}
{{- end -}}
{{- toYaml $seed.data -}}
{{- end -}}

{{/*
The index as `migrate index TREE --image IMAGE` printed it (files/index.yaml).
*/}}
{{- define "migrations.index" -}}
{{- $index := .Files.Get "files/index.yaml" | fromYaml -}}
{{- if or (not $index) (not (kindIs "map" (get $index "data"))) -}}
{{- fail "files/index.yaml is missing or has no data: render it with render-files.sh" -}}
{{- end -}}
{{- toYaml $index.data -}}
{{- end -}}

{{/*
The ledger ConfigMap as the API server holds it now (`lookup`), or an empty
map: when it does not exist, and always under `helm template` and client-side
dry runs, where `lookup` cannot reach a cluster.
*/}}
{{- define "migrations.live" -}}
{{- toYaml (lookup "v1" "ConfigMap" .Release.Namespace .Values.ledger.name) -}}
{{- end -}}

{{/*
The render gate: the manifest's slugs the ledger lacks, minus the background
tier's (the operator runs those), comma-separated. The set difference of
`m.<slug>` keys: files/ledger-seed.yaml names every manifest line (pre-apply,
background, retired, revoked), files/index.yaml the background ones. A retired
or revoked slug the ledger lacks counts too: the run seeds it `revoked`, or
refuses naming the release to upgrade through first.
*/}}
{{- define "migrations.pending" -}}
{{- $seed := include "migrations.seed" . | fromYaml -}}
{{- $index := include "migrations.index" . | fromYaml -}}
{{- $live := include "migrations.live" . | fromYaml -}}
{{- $recorded := dict -}}
{{- if $live -}}{{- $recorded = (get $live "data") | default dict -}}{{- end -}}
{{- $background := splitList "\n" ((get $index "slugs") | default "") | compact -}}
{{- $pending := list -}}
{{- range $key := keys $seed | sortAlpha -}}
{{- $slug := trimPrefix "m." $key -}}
{{- if and (hasPrefix "m." $key) (not (hasKey $recorded $key)) (not (has $slug $background)) -}}
{{- $pending = append $pending $slug -}}
{{- end -}}
{{- end -}}
{{- join "," $pending -}}
{{- end -}}

{{/* Labels of every object the chart renders. */}}
{{- define "migrations.labels" -}}
app.kubernetes.io/name: platform-migrations
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{/* The ledger spec every runner is given. */}}
{{- define "migrations.ledgerSpec" -}}
configmap:{{ .Release.Namespace }}/{{ .Values.ledger.name }}
{{- end -}}

{{/*
What the hook's and the operator's pods share: pull secrets, node placement,
the pod securityContext, and the scratch volume a read-only root needs.
Placed under a pod `spec:`.
*/}}
{{- define "migrations.podSettings" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: tmp
    emptyDir: {}
{{- end -}}

{{/* What the hook's and the operator's containers share. */}}
{{- define "migrations.containerSettings" -}}
{{- with .Values.securityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- end -}}

{{/* Annotations of the hook's and the operator's pods. */}}
{{- define "migrations.podAnnotations" -}}
{{- with .Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Refuses files/ rendered for another ledger or index name than the values
give: render-files.sh LEDGER_NAME=... INDEX_NAME=... renders them for these.
*/}}
{{- define "migrations.checkFiles" -}}
{{- $seed := .Files.Get "files/ledger-seed.yaml" | fromYaml -}}
{{- $index := .Files.Get "files/index.yaml" | fromYaml -}}
{{- if and $seed (ne (($seed.metadata | default dict).name | default "") .Values.ledger.name) -}}
{{- fail (printf "files/ledger-seed.yaml: metadata.name is %q but ledger.name is %q: render the files for these values (LEDGER_NAME=%s render-files.sh TREE IMAGE)" (($seed.metadata | default dict).name | default "") .Values.ledger.name .Values.ledger.name) -}}
{{- end -}}
{{- if and .Values.operator.enabled $index (ne (($index.metadata | default dict).name | default "") .Values.operator.indexName) -}}
{{- fail (printf "files/index.yaml: metadata.name is %q but operator.indexName is %q: render the files for these values (INDEX_NAME=%s render-files.sh TREE IMAGE)" (($index.metadata | default dict).name | default "") .Values.operator.indexName .Values.operator.indexName) -}}
{{- end -}}
{{- end -}}
