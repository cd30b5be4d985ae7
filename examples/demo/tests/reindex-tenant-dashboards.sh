#!/bin/sh
. "$(dirname "$0")/lib.sh"
run_migration background/reindex-tenant-dashboards
expect_call "-n tenant-a rollout restart deployment grafana"
expect_failure_when_kubectl_fails background/reindex-tenant-dashboards "get namespaces"
