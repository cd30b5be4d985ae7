#!/bin/sh
# The main job, end to end, on the embedded default (the file ledger):
# build `migrate`, give the demo tree a release history in a scratch git
# repository (v1.7.0, then v1.8.0), generate its manifest explicitly, and run
# the engine against a file ledger that starts as an old cluster stamped
# with legacy version 44. Run it twice: the second run has nothing pending.
#
#   ./examples/run-demo.sh            # state lives in target/demo/
#   ./examples/run-demo.sh --reset    # forget the ledger and start over
set -eu
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK="$ROOT/target/demo"
[ "${1:-}" = "--reset" ] && rm -rf "$WORK"
mkdir -p "$WORK"

# Both binaries: the runner runs no script without migrate-shim beside migrate.
cargo build --quiet -p migrate --bins
MIGRATE="$ROOT/target/debug/migrate"

# A scratch repository whose tags ship the demo's migrations in two releases.
REPO="$WORK/repo"
rm -rf "$REPO"
mkdir -p "$REPO/migrations"
git_() { git -C "$REPO" -c user.name=demo -c user.email=demo@example.invalid -c init.defaultBranch=main "$@"; }
git_ init --quiet
copy() { mkdir -p "$REPO/migrations/$(dirname "$1")"; cp -p "$ROOT/examples/demo/$1" "$REPO/migrations/$1"; }
for f in lib/kube.sh lib/etcd-crds.yaml legacy-map tests/lib.sh tests/fake-kubectl \
         pre-apply/flux-crds-relabel pre-apply/tenant-namespace-labels pre-apply/seaweedfs-bucket-owner \
         pre-apply/etcd-crds-precreate pre-apply/drop-legacy-monitoring; do
    copy "$f"
done
git_ add -A && git_ commit --quiet -m "release 1.7" && git_ tag v1.7.0
cp -Rp "$ROOT/examples/demo/." "$REPO/migrations/"
git_ add -A && git_ commit --quiet -m "release 1.8" && git_ tag v1.8.0

echo "== generating the manifest from the release tags"
"$MIGRATE" manifest --repo "$REPO" --path migrations --out "$REPO/migrations/order.d"
for f in "$REPO"/migrations/order.d/*; do echo "-- $(basename "$f")"; cat "$f"; done

# An old cluster: the previous engine stamped the integer 44.
LEDGER="$WORK/ledger.json"
if [ ! -f "$LEDGER" ]; then
    printf '{"format":"migration-ledger/v1","ledger":{"revision":1,"data":{"version":"44"}},"lock":null,"lock_generation":0}\n' > "$LEDGER"
fi

# The scripts call kubectl through lib/kube.sh; the demo points it at a
# stand-in cluster with two tenants (examples/demo/tests/fake-kubectl).
export KUBECTL="$REPO/migrations/tests/fake-kubectl"
export MIGRATION_IMAGE="ghcr.io/example/platform-migrations@sha256:$(printf demo | sha256sum | cut -c1-64)"

echo "== plan (pre-apply)"
"$MIGRATE" plan "$REPO/migrations" --ledger "file:$LEDGER" --tier pre-apply
echo "== run the blocking tier (the pre-upgrade hook Job)"
"$MIGRATE" run "$REPO/migrations" --ledger "file:$LEDGER" --tier pre-apply
echo "== run the background tier (what the operator's Jobs do, one slug at a time)"
"$MIGRATE" run "$REPO/migrations" --ledger "file:$LEDGER" --tier background
echo "== status"
"$MIGRATE" status --ledger "file:$LEDGER"
echo "== run again: nothing is pending"
"$MIGRATE" run "$REPO/migrations" --ledger "file:$LEDGER" --tier pre-apply
echo "== verify: every migration has a terminal entry, everything after v1.7.0 is ok"
"$MIGRATE" verify "$REPO/migrations" --ledger "file:$LEDGER" --since v1.7.0
