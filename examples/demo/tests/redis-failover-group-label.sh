#!/bin/sh
. "$(dirname "$0")/lib.sh"
# The demo's cluster: two tenants.
answer 'kubectl get namespaces -l tenant=true -o name' ok 'namespace/tenant-a\nnamespace/tenant-b'
run_migration pre-apply/redis-failover-group-label
expect_call "-n tenant-b label pods -l app=redis-failover redis-failover-group=tenant-b --overwrite"
expect_failure_when_kubectl_fails pre-apply/redis-failover-group-label "get namespaces"
