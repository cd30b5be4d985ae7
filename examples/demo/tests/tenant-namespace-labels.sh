#!/bin/sh
. "$(dirname "$0")/lib.sh"
# The demo's cluster: two tenants.
answer 'kubectl get namespaces -l tenant=true -o name' ok 'namespace/tenant-a\nnamespace/tenant-b'
run_migration pre-apply/tenant-namespace-labels
expect_call "label namespace tenant-a cozystack.io/tenant=tenant-a --overwrite"
expect_call "label namespace tenant-b cozystack.io/tenant=tenant-b --overwrite"
# Listing tenants failing must fail the migration, not loop zero times.
expect_failure_when_kubectl_fails pre-apply/tenant-namespace-labels "get namespaces"
