#!/bin/sh
. "$(dirname "$0")/lib.sh"
run_migration pre-apply/postgres-hand-over-to-tenant-release
expect_call "-n tenant-a annotate cluster.postgresql.cnpg.io postgres meta.helm.sh/release-name=postgres-tenant-a --overwrite"
expect_failure_when_kubectl_fails pre-apply/postgres-hand-over-to-tenant-release "annotate"
