#!/bin/sh
. "$(dirname "$0")/lib.sh"
# The demo's cluster: two tenants.
answer 'kubectl get namespaces -l tenant=true -o name' ok 'namespace/tenant-a\nnamespace/tenant-b'
run_migration background/reindex-tenant-dashboards
expect_call "-n tenant-a rollout restart deployment grafana"
expect_failure_when_kubectl_fails background/reindex-tenant-dashboards "get namespaces"
