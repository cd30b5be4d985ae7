#!/bin/sh
. "$(dirname "$0")/lib.sh"
run_migration pre-apply/flux-crds-relabel
expect_call "label crd helmreleases.helm.toolkit.fluxcd.io app.kubernetes.io/managed-by=Helm --overwrite"
expect_failure_when_kubectl_fails pre-apply/flux-crds-relabel "label crd"
