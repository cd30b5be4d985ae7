#!/bin/sh
. "$(dirname "$0")/lib.sh"
run_migration pre-apply/etcd-crds-precreate
expect_call "apply -f ./lib/etcd-crds.yaml"
expect_failure_when_kubectl_fails pre-apply/etcd-crds-precreate "apply"
