#!/bin/sh
# The engine image without a container engine: an OCI image layout (oci-layout, index.json,
# blobs/sha256/...) assembled from Debian packages and static binaries, nothing run as root
# inside an image and no Docker daemon. CI builds it and tests what is inside it
# (examples/image/check-oci.sh); a platform can push it with any OCI tool
# (`skopeo copy oci:DIR:engine docker://REGISTRY/NAME:TAG`) and pin the digest.
#
#   sh examples/image/build-oci.sh --out DIR --bin DIR --kubectl PATH --helm PATH \
#       [--tree DIR] [--debs DIR]
#
# --bin holds static `migrate`, `migrate-shim` and `migrate-operator` (the musl target:
# `cargo build --target x86_64-unknown-linux-musl -p migrate -p migrate-operator --bins`);
# --kubectl and --helm are static binaries (kube-testenv builds both with CGO_ENABLED=0).
# --debs is where the Debian packages are downloaded (`apt-get download`, the system's
# sources) and kept between runs (default DIR/debs). With --tree, the layout holds a second
# image, tagged `platform`: the engine plus one layer with the tree at /migrations and
# MIGRATION_TREE=/migrations, what examples/image/platform.Dockerfile's three lines make.
#
# The image, tagged `engine`:
#   /bin/busybox (busybox-static) and its applets: /bin/sh is busybox ash, as on alpine
#   /usr/bin/jq with libjq1, libonig5 and libc6 (jq is the only dynamic executable)
#   /etc/ssl/certs/ca-certificates.crt (ca-certificates' bundle, concatenated as
#     update-ca-certificates would)
#   /usr/local/bin/{migrate,migrate-shim,migrate-operator,kubectl,helm}, static
#   /tmp (1777), /etc/passwd and /etc/group naming uid and gid 65532 `nonroot`
#   config: User 65532:65532, HOME=/tmp, the Debian package versions as a label
#
# Why a shell script: the layout is three JSON documents and gzipped tars named by their
# sha256; sha256sum, GNU tar and gzip write them, so no tool beyond Debian's base system is
# needed. The tars are reproducible (sorted names, fixed mtime, numeric owner 0), so the same
# inputs give the same digests. POSIX sh (dash, busybox ash).
set -eu

usage() {
	echo "usage: $0 --out DIR --bin DIR --kubectl PATH --helm PATH [--tree DIR] [--debs DIR]" >&2
	exit 2
}

OUT='' BIN='' KUBECTL='' HELM='' TREE='' DEBS=''
while [ $# -gt 0 ]; do
	[ $# -ge 2 ] || usage
	case $1 in
	--out) OUT=$2 ;;
	--bin) BIN=$2 ;;
	--kubectl) KUBECTL=$2 ;;
	--helm) HELM=$2 ;;
	--tree) TREE=$2 ;;
	--debs) DEBS=$2 ;;
	*) usage ;;
	esac
	shift 2
done
if [ -z "$OUT" ] || [ -z "$BIN" ] || [ -z "$KUBECTL" ] || [ -z "$HELM" ]; then
	usage
fi
DEBS=${DEBS:-$OUT/debs}
# Every layer's files get this time, so a rebuild from the same inputs is byte-identical.
EPOCH=${SOURCE_DATE_EPOCH:-0}
PACKAGES="busybox-static jq libjq1 libonig5 libc6 ca-certificates"

fail() {
	echo "build-oci.sh: $*" >&2
	exit 1
}

# A static executable has no program interpreter; `file` is not in every base system, so
# read the ELF program headers' types with od: PT_INTERP is 3.
is_static() {
	# e_phoff at 32 (8 bytes), e_phentsize at 54, e_phnum at 56 (2 bytes each), little endian.
	phoff=$(od -An -tu8 -j32 -N8 "$1" | tr -d ' ')
	phentsize=$(od -An -tu2 -j54 -N2 "$1" | tr -d ' ')
	phnum=$(od -An -tu2 -j56 -N2 "$1" | tr -d ' ')
	i=0
	while [ "$i" -lt "$phnum" ]; do
		type=$(od -An -tu4 -j$((phoff + i * phentsize)) -N4 "$1" | tr -d ' ')
		[ "$type" = 3 ] && return 1
		i=$((i + 1))
	done
	return 0
}

for name in migrate migrate-shim migrate-operator; do
	[ -x "$BIN/$name" ] || fail "$BIN/$name: not an executable (build the musl target first)"
	is_static "$BIN/$name" || fail "$BIN/$name is dynamically linked: build it for x86_64-unknown-linux-musl"
done
for tool in "$KUBECTL" "$HELM"; do
	[ -x "$tool" ] || fail "$tool: not an executable"
	is_static "$tool" || fail "$tool is dynamically linked (build it with CGO_ENABLED=0)"
done
[ -z "$TREE" ] || [ -d "$TREE" ] || fail "--tree $TREE: not a directory"
for tool in sha256sum gzip dpkg-deb od; do
	command -v "$tool" >/dev/null || fail "needs $tool"
done
tar --version 2>/dev/null | grep -q 'GNU tar' || fail "needs GNU tar (--sort, --mtime, --owner)"

rm -rf "$OUT/blobs" "$OUT/index.json" "$OUT/oci-layout" "$OUT/work"
mkdir -p "$OUT/blobs/sha256" "$OUT/work" "$DEBS"
WORK=$OUT/work

# The Debian packages, downloaded once (apt-get download needs no root and installs nothing).
for package in $PACKAGES; do
	if [ -z "$(find "$DEBS" -maxdepth 1 -name "${package}_*.deb")" ]; then
		(cd "$DEBS" && apt-get download "$package") || fail "apt-get download $package failed (run apt-get update?)"
	fi
done

# digest FILE: the sha256 of a file, hex.
digest() { sha256sum "$1" | cut -d' ' -f1; }
size() { wc -c <"$1" | tr -d ' '; }

# blob FILE: moves FILE into blobs/sha256/ under its digest; prints the digest.
blob() {
	d=$(digest "$1")
	mv "$1" "$OUT/blobs/sha256/$d"
	echo "$d"
}

# layer ROOT NAME: a reproducible gzipped tar of ROOT's contents as a blob. Sets LAYER (the
# blob's digest, which the manifest names), LAYER_SIZE and DIFF_ID (the uncompressed tar's
# digest, which the config names).
layer() {
	tar -C "$1" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner \
		--format=gnu -cf "$WORK/$2.tar" .
	DIFF_ID=$(digest "$WORK/$2.tar")
	gzip -n <"$WORK/$2.tar" >"$WORK/$2.tar.gz"
	rm "$WORK/$2.tar"
	LAYER_SIZE=$(size "$WORK/$2.tar.gz")
	LAYER=$(blob "$WORK/$2.tar.gz")
}

# Layer 1, the base: the Debian packages, busybox's applets, the CA bundle, users, /tmp.
BASE=$WORK/base
mkdir -p "$BASE"
VERSIONS=
for package in $PACKAGES; do
	# The newest downloaded version: apt-get download names files PACKAGE_VERSION_ARCH.deb.
	deb=$(find "$DEBS" -maxdepth 1 -name "${package}_*.deb" | LC_ALL=C sort | tail -n 1)
	dpkg-deb -x "$deb" "$BASE"
	VERSIONS="$VERSIONS${VERSIONS:+ }$package=$(dpkg-deb -f "$deb" Version)"
done
# What a running migration never reads: documentation, the initramfs hooks, the CA updater.
rm -rf "$BASE/usr/share/doc" "$BASE/usr/share/man" "$BASE/usr/share/lintian" \
	"$BASE/usr/share/initramfs-tools" "$BASE/usr/sbin/update-ca-certificates"
# busybox's applets as symlinks (what `busybox --install -s` does, but inside BASE and
# without overwriting a file a package shipped); the static busybox runs on the build host.
"$BASE/bin/busybox" --list-full | while read -r applet; do
	[ -e "$BASE/$applet" ] || [ -L "$BASE/$applet" ] && continue
	mkdir -p "$BASE/$(dirname "$applet")"
	ln -s /bin/busybox "$BASE/$applet"
done
[ -L "$BASE/bin/sh" ] || fail "busybox did not list bin/sh"
# update-ca-certificates' bundle: every certificate ca-certificates ships, concatenated.
mkdir -p "$BASE/etc/ssl/certs"
find "$BASE/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort | while read -r crt; do
	cat "$crt"
done >"$BASE/etc/ssl/certs/ca-certificates.crt"
[ -s "$BASE/etc/ssl/certs/ca-certificates.crt" ] || fail "no CA certificates in ca-certificates"
printf 'root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/tmp:/sbin/nologin\n' >"$BASE/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$BASE/etc/group"
mkdir -p "$BASE/tmp" "$BASE/dev" "$BASE/proc" "$BASE/root"
chmod 1777 "$BASE/tmp"
layer "$BASE" base
BASE_LAYER=$LAYER BASE_SIZE=$LAYER_SIZE BASE_DIFF=$DIFF_ID

# Layer 2, the engine: the five static binaries.
ENGINE=$WORK/engine
mkdir -p "$ENGINE/usr/local/bin"
for name in migrate migrate-shim migrate-operator; do
	cp "$BIN/$name" "$ENGINE/usr/local/bin/$name"
done
cp "$KUBECTL" "$ENGINE/usr/local/bin/kubectl"
cp "$HELM" "$ENGINE/usr/local/bin/helm"
# Symbols are not needed to run (a debug build is mostly symbols); strip when strip exists.
if command -v strip >/dev/null 2>&1; then
	strip "$ENGINE/usr/local/bin/"*
fi
chmod 0755 "$ENGINE/usr/local/bin/"*
layer "$ENGINE" engine
ENGINE_LAYER=$LAYER ENGINE_SIZE=$LAYER_SIZE ENGINE_DIFF=$DIFF_ID

LAYER_TYPE=application/vnd.oci.image.layer.v1.tar+gzip
ENV_ENGINE='"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin","HOME=/tmp"'

# image TAG ENV WORKDIR LAYERS DIFF_IDS: writes the config and the manifest of one image;
# appends its entry to the index (MANIFESTS).
MANIFESTS=
image() {
	cat >"$WORK/config.json" <<EOF
{"architecture":"amd64","os":"linux","config":{"User":"65532:65532","Env":[$2],"WorkingDir":"$3","Cmd":["migrate","--help"],"Labels":{"org.opencontainers.image.title":"migrate $1","io.migrate.debian-packages":"$VERSIONS"}},"rootfs":{"type":"layers","diff_ids":[$5]}}
EOF
	config_size=$(size "$WORK/config.json")
	config=$(blob "$WORK/config.json")
	cat >"$WORK/manifest.json" <<EOF
{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$config","size":$config_size},"layers":[$4]}
EOF
	manifest_size=$(size "$WORK/manifest.json")
	manifest=$(blob "$WORK/manifest.json")
	MANIFESTS="$MANIFESTS${MANIFESTS:+,}{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$manifest\",\"size\":$manifest_size,\"annotations\":{\"org.opencontainers.image.ref.name\":\"$1\"}}"
	echo "$1: sha256:$manifest"
}

ENGINE_LAYERS="{\"mediaType\":\"$LAYER_TYPE\",\"digest\":\"sha256:$BASE_LAYER\",\"size\":$BASE_SIZE},{\"mediaType\":\"$LAYER_TYPE\",\"digest\":\"sha256:$ENGINE_LAYER\",\"size\":$ENGINE_SIZE}"
ENGINE_DIFFS="\"sha256:$BASE_DIFF\",\"sha256:$ENGINE_DIFF\""
image engine "$ENV_ENGINE" / "$ENGINE_LAYERS" "$ENGINE_DIFFS"

# The platform's image: what platform.Dockerfile's COPY and ENV add, as one more layer.
if [ -n "$TREE" ]; then
	PLATFORM=$WORK/platform
	mkdir -p "$PLATFORM/migrations"
	cp -R "$TREE/." "$PLATFORM/migrations/"
	layer "$PLATFORM" platform
	image platform "$ENV_ENGINE,\"MIGRATION_TREE=/migrations\"" / \
		"$ENGINE_LAYERS,{\"mediaType\":\"$LAYER_TYPE\",\"digest\":\"sha256:$LAYER\",\"size\":$LAYER_SIZE}" \
		"$ENGINE_DIFFS,\"sha256:$DIFF_ID\""
fi

printf '{"imageLayoutVersion":"1.0.0"}\n' >"$OUT/oci-layout"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s]}\n' \
	"$MANIFESTS" >"$OUT/index.json"
rm -rf "$WORK"
