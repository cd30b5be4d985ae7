#!/bin/sh
. "$(dirname "$0")/lib.sh"
# The demo's cluster: two tenants.
answer 'kubectl get namespaces -l tenant=true -o name' ok 'namespace/tenant-a\nnamespace/tenant-b'
run_migration pre-apply/postgres-hand-over-to-tenant-release
expect_call "-n tenant-a annotate cluster.postgresql.cnpg.io postgres meta.helm.sh/release-name=postgres-tenant-a --overwrite"
expect_failure_when_kubectl_fails pre-apply/postgres-hand-over-to-tenant-release "annotate"
