#!/bin/sh
. "$(dirname "$0")/lib.sh"
run_migration pre-apply/redis-failover-group-label
expect_call "-n tenant-b label pods -l app=redis-failover redis-failover-group=tenant-b --overwrite"
expect_failure_when_kubectl_fails pre-apply/redis-failover-group-label "get namespaces"
