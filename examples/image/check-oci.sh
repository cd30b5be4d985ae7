#!/bin/sh
# What is inside the image build-oci.sh wrote, checked by running it: every blob of the OCI
# layout has the digest and size its parent names; the `platform` image's layers, unpacked in
# order, are a root file system in which, as the image's user (65532) with the image's
# environment, `migrate --version`, `migrate-shim` (started by name it refuses, as it
# should), `kubectl version --client`,
# `helm version`, `jq` and busybox's `sh` run, and the demo tree at MIGRATION_TREE runs as
# examples/run-demo.sh runs it (plan, the pre-apply tier, the background tier, status, a
# second run with nothing pending, verify) against a file ledger stamped with legacy version 44.
#
#   sh examples/image/check-oci.sh LAYOUT
#
# Needs root (CI runs as root): chroot, and a private mount and PID namespace (unshare) with
# /proc and /dev for the commands (Rust's current_exe reads /proc/self/exe; scripts write to
# /dev/null). Needs jq and GNU tar on the host. POSIX sh (dash, busybox ash).
set -eu
[ $# -eq 1 ] || {
	echo "usage: $0 LAYOUT" >&2
	exit 2
}
LAYOUT=$1

fail() {
	echo "check-oci.sh: $*" >&2
	exit 1
}
[ "$(id -u)" = 0 ] || fail "needs root (chroot, unshare --mount --pid)"
command -v jq >/dev/null || fail "needs jq"

# blob DIGEST SIZE: the path of a blob whose content has that digest and size.
blob() {
	path=$LAYOUT/blobs/sha256/${1#sha256:}
	[ -f "$path" ] || fail "blob $1 is missing"
	actual=$(sha256sum "$path" | cut -d' ' -f1)
	[ "sha256:$actual" = "$1" ] || fail "blob $1 has digest sha256:$actual"
	[ "$(wc -c <"$path" | tr -d ' ')" = "$2" ] || fail "blob $1 is not $2 bytes"
	echo "$path"
}

[ "$(jq -r .imageLayoutVersion "$LAYOUT/oci-layout")" = 1.0.0 ] || fail "no oci-layout 1.0.0"
# manifest TAG: the path of the manifest the index names TAG.
manifest() {
	entry=$(jq -c --arg t "$1" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $t)' \
		"$LAYOUT/index.json")
	[ -n "$entry" ] || fail "index.json names no image $1"
	blob "$(echo "$entry" | jq -r .digest)" "$(echo "$entry" | jq -r .size)"
}
ENGINE=$(manifest engine)
PLATFORM=$(manifest platform)
config_of() { blob "$(jq -r .config.digest "$1")" "$(jq -r .config.size "$1")"; }
for m in "$ENGINE" "$PLATFORM"; do
	config=$(config_of "$m")
	[ "$(jq -r .config.User "$config")" = 65532:65532 ] || fail "$m: the image does not run as 65532"
	[ "$(jq '.layers | length' "$m")" = "$(jq '.rootfs.diff_ids | length' "$config")" ] ||
		fail "$m: as many diff_ids as layers"
done
# The platform's image is the engine's with one layer more: FROM the engine, nothing changed.
jq -e --slurpfile e "$ENGINE" '.layers[:-1] == $e[0].layers' "$PLATFORM" >/dev/null ||
	fail "the platform image does not start with the engine image's layers"
CONFIG=$(config_of "$PLATFORM")

ROOT=$(mktemp -d "${TMPDIR:-/tmp}/migrate-image-root.XXXXXX")
trap 'rm -rf "$ROOT"' EXIT
i=0
for layer in $(jq -r '.layers[] | "\(.digest)=\(.size)"' "$PLATFORM"); do
	path=$(blob "${layer%=*}" "${layer#*=}")
	# Each layer's uncompressed tar is the diff_id the config names.
	diff=$(jq -r ".rootfs.diff_ids[$i]" "$CONFIG")
	[ "sha256:$(gzip -dc "$path" | sha256sum | cut -d' ' -f1)" = "$diff" ] ||
		fail "layer $i does not decompress to $diff"
	tar -C "$ROOT" -xzpf "$path"
	i=$((i + 1))
done

# in_image COMMAND...: COMMAND in the root file system as the image's user, with the image's
# environment (only) and working directory, /proc and /dev in a private mount and PID
# namespace that ends with it.
USERSPEC=$(jq -r .config.User "$CONFIG")
WORKDIR=$(jq -r .config.WorkingDir "$CONFIG")
ENVS=$(jq -r '.config.Env | map(@sh) | join(" ")' "$CONFIG")
run() {
	echo "== $*"
	in_image "$@"
}
in_image() {
	# The image's environment, then sh to enter the working directory, then the command.
	# shellcheck disable=SC2016 # expanded by eval and the shells below, in order
	eval "set -- $ENVS sh -c 'cd \"\$0\" && exec \"\$@\"' \"$WORKDIR\" \"\$@\""
	# shellcheck disable=SC2016 # expanded by the inner sh
	unshare --mount --pid --fork --mount-proc="$ROOT/proc" sh -c '
		root=$1 user=$2; shift 2
		mount --rbind /dev "$root/dev"
		exec chroot --userspec="$user" "$root" /usr/bin/env -i "$@"
	' sh "$ROOT" "$USERSPEC" "$@"
}

run id
[ "$(in_image id -u)" = 65532 ] || fail "the image's commands do not run as 65532"
run migrate --version
# The shim runs only as the runner starts it (as kubectl, helm, migrate-supervise...); started
# by name it says so and exits 127. The demo below runs it for real.
echo "== migrate-shim"
if shim=$(in_image migrate-shim 2>&1); then
	fail "migrate-shim started by its own name succeeded: $shim"
fi
echo "$shim"
case $shim in
*"the runner starts this binary itself"*) ;;
*) fail "migrate-shim did not run: $shim" ;;
esac
run kubectl version --client
run helm version
run sh -c 'echo "{\"a\":[1,2]}" | jq -c ".a | length"'
run sh -c 'test -s /etc/ssl/certs/ca-certificates.crt && echo CA bundle present'

echo "== the demo at MIGRATION_TREE, as examples/run-demo.sh runs it"
# shellcheck disable=SC2016 # expanded inside the image
in_image sh -euc '
	[ "$MIGRATION_TREE" = /migrations ]
	ledger=/tmp/ledger.json
	printf "{\"format\":\"migration-ledger/v1\",\"ledger\":{\"revision\":1,\"data\":{\"version\":\"44\"}},\"lock\":null,\"lock_generation\":0}\n" >$ledger
	export KUBECTL="$MIGRATION_TREE/tests/fake-kubectl"
	export MIGRATION_IMAGE="ghcr.io/example/platform-migrations@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	migrate plan "$MIGRATION_TREE" --ledger file:$ledger --tier pre-apply
	migrate run "$MIGRATION_TREE" --ledger file:$ledger --tier pre-apply
	migrate run "$MIGRATION_TREE" --ledger file:$ledger --tier background
	migrate status --ledger file:$ledger
	migrate run "$MIGRATION_TREE" --ledger file:$ledger --tier pre-apply
	migrate verify "$MIGRATION_TREE" --ledger file:$ledger --since v1.7.0
'
echo "check-oci.sh: the image runs its tools and the demo as 65532"
