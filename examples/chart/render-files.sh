#!/bin/sh
# Renders the chart's files/ from a migrations tree at a release cut, with
# the same code the engine seeds and indexes with:
#
#   examples/chart/render-files.sh TREE IMAGE [AT]
#
#   TREE   the migrations tree with its generated manifest (order.d/)
#   IMAGE  the digest-pinned image the release runs (values.yaml's `image`)
#   AT     RFC 3339 time stamped on the seeded entries (default: now, UTC)
#
# files/ledger-seed.yaml is `migrate seed-fresh TREE --render configmap --at AT`,
# files/index.yaml is `migrate index TREE --image IMAGE`. LEDGER_NAME and
# INDEX_NAME are the values' ledger.name and operator.indexName (defaults:
# the chart's), NAMESPACE the release namespace (default cozy-system; the
# chart puts the objects in the release namespace whatever the files say,
# and refuses files rendered for other names). MIGRATE names the
# binary (default `migrate` on PATH), FILES the output directory (default
# files/ next to this script). Each file is replaced only when its command
# succeeded.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 TREE IMAGE [AT]" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
TREE=$1
IMAGE=$2
AT=${3:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}
MIGRATE=${MIGRATE:-migrate}
FILES=${FILES:-$HERE/files}
mkdir -p "$FILES"
NAMESPACE=${NAMESPACE:-cozy-system}
"$MIGRATE" seed-fresh "$TREE" --render configmap --at "$AT" \
    --namespace "$NAMESPACE" --name "${LEDGER_NAME:-cozystack-version}" >"$FILES/ledger-seed.yaml.tmp"
"$MIGRATE" index "$TREE" --image "$IMAGE" \
    --namespace "$NAMESPACE" --name "${INDEX_NAME:-cozystack-migrations-index}" >"$FILES/index.yaml.tmp"
mv "$FILES/ledger-seed.yaml.tmp" "$FILES/ledger-seed.yaml"
mv "$FILES/index.yaml.tmp" "$FILES/index.yaml"
