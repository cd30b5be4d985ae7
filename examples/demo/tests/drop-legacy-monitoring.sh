#!/bin/sh
# Revoked: kept only so the tree's test inventory stays complete.
. "$(dirname "$0")/lib.sh"
run_migration pre-apply/drop-legacy-monitoring
expect_call "delete namespace monitoring-legacy"
