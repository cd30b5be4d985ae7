#!/bin/sh
. "$(dirname "$0")/lib.sh"
# The demo's cluster: two tenants.
answer 'kubectl get namespaces -l tenant=true -o name' ok 'namespace/tenant-a\nnamespace/tenant-b'
run_migration pre-apply/seaweedfs-bucket-owner
expect_call "-n tenant-a annotate bucket seaweedfs meta.helm.sh/release-name=seaweedfs-tenant-a --overwrite"
expect_call "-n tenant-b annotate bucket seaweedfs meta.helm.sh/release-name=seaweedfs-tenant-b --overwrite"
expect_failure_when_kubectl_fails pre-apply/seaweedfs-bucket-owner "get namespaces"
