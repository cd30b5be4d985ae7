#!/bin/sh
# A real Kubernetes control plane for tests: etcd + kube-apiserver on loopback, no nodes,
# no controller-manager (as controller-runtime's envtest). Built from the Go modules pinned
# in go.mod/go.sum next to this script; nothing prebuilt, nothing fetched beyond the module
# proxy.
#
#   testenv.sh build   build kube-apiserver, etcd, kubectl, helm once into
#                      ${MIGRATE_TESTENV_CACHE:-$HOME/.cache/migrate-kube-testenv}/<sha256 of go.sum>/bin
#   testenv.sh start   generate certificates, start etcd and kube-apiserver on 127.0.0.1,
#                      wait for /readyz, write a kubeconfig; prints the environment (as `env`)
#   testenv.sh env     print `export NAME=value` lines for a running environment
#   testenv.sh stop    stop both (safe to call when nothing runs; use it in an EXIT trap)
#
# State (certificates, etcd data, logs, kubeconfig, pids) lives in
# ${MIGRATE_TESTENV_STATE:-<repo>/target/kube-testenv}. Needs: go (build only), openssl, sha256sum.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STATE=${MIGRATE_TESTENV_STATE:-$REPO/target/kube-testenv}
CACHE_ROOT=${MIGRATE_TESTENV_CACHE:-${HOME:?}/.cache/migrate-kube-testenv}

# What go.mod pins, for the version stamps the upstream Makefiles would set (the commits are
# the ones the module proxy reports for these tags). Changing them invalidates the cache (see
# recipe below), so keep them in step with go.mod.
KUBE_VERSION=v1.34.12
KUBE_COMMIT=26c89157669bdc7e3657302bc1abde758507095b
KUBE_BUILD_DATE=2026-09-23T17:08:30Z
ETCD_COMMIT=a0614505aff9b8ff469e9c59c2d979a5936d13f4
HELM_VERSION=v3.19.5
HELM_COMMIT=4a19a5b6fb912c5c28a779e73f2e0880d9e239a4

say() { printf 'kube-testenv: %s\n' "$*" >&2; }
die() {
	say "error: $*"
	exit 1
}

need() {
	command -v "$1" >/dev/null 2>&1 || die "$1 not found on PATH ($2)"
}

cache_dir() {
	need sha256sum "coreutils"
	hash=$(sha256sum "$HERE/go.sum" | cut -d' ' -f1)
	[ -n "$hash" ] || die "cannot hash $HERE/go.sum"
	printf '%s/%s\n' "$CACHE_ROOT" "$hash"
}

kube_minor() {
	printf '%s\n' "$KUBE_VERSION" | cut -d. -f2
}

ldflags() {
	minor=$(kube_minor)
	flags=""
	for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		flags="$flags -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitCommit=$KUBE_COMMIT"
		flags="$flags -X $pkg.gitTreeState=clean -X $pkg.buildDate=$KUBE_BUILD_DATE"
		flags="$flags -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	done
	flags="$flags -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_COMMIT"
	flags="$flags -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
	flags="$flags -X helm.sh/helm/v3/internal/version.gitCommit=$HELM_COMMIT"
	flags="$flags -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
	for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
		flags="$flags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
	done
	# -s -w as the upstream release builds: no symbol tables, smaller binaries.
	printf '%s\n' "-s -w$flags"
}

# Everything that decides the binaries besides go.sum; a cache entry built another way is rebuilt.
recipe() {
	printf 'go.mod %s\n' "$(sha256sum "$HERE/go.mod" | cut -d' ' -f1)"
	printf 'go %s\n' "$(go env GOVERSION)"
	printf 'ldflags %s\n' "$(ldflags)"
}

cmd_build() {
	need go "install the Go toolchain; the real-server lane needs it"
	dir=$(cache_dir)
	want=$(recipe)
	if [ -f "$dir/recipe" ] && [ "$(cat "$dir/recipe")" = "$want" ]; then
		for tool in kube-apiserver etcd kubectl helm; do
			[ -x "$dir/bin/$tool" ] || die "cache $dir is incomplete (no bin/$tool); remove it and build again"
		done
		say "cached: $dir/bin"
		printf '%s\n' "$dir/bin"
		return
	fi
	mkdir -p "$CACHE_ROOT"
	work="$dir.tmp.$$"
	rm -rf "$work"
	mkdir -p "$work/bin"
	say "building kube-apiserver, etcd, kubectl, helm into $dir/bin (cold: about 20 minutes on 2 cores)"
	start=$(date +%s)
	# One go build for the four commands, so the packages they share compile once.
	# CGO off as upstream builds these (static binaries, no C toolchain needed).
	(cd "$HERE" && CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath -ldflags "$(ldflags)" -o "$work/bin/" \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kubectl \
		go.etcd.io/etcd/server/v3 \
		helm.sh/helm/v3/cmd/helm) || {
		rm -rf "$work"
		die "go build failed"
	}
	# go names the etcd main package after its module path (.../server/v3 -> server).
	mv "$work/bin/server" "$work/bin/etcd"
	printf '%s\n' "$want" >"$work/recipe"
	end=$(date +%s)
	printf 'built in %s s\n' "$((end - start))" >"$work/build-time"
	rm -rf "$dir"
	mv "$work" "$dir"
	say "built in $((end - start)) s: $dir/bin"
	printf '%s\n' "$dir/bin"
}

# A TCP port nobody on this machine has bound (checked in /proc/net/tcp{,6}); the daemons'
# own bind is the final check, and start retries with other ports if it fails.
free_port() {
	while :; do
		n=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
		port=$((20000 + n % 40000))
		hex=$(printf '%04X' "$port")
		if ! cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '{print $2}' | grep -q ":$hex\$"; then
			printf '%s\n' "$port"
			return
		fi
	done
}

alive() {
	[ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

# poll PIDFILE TRIES SECONDS COMMAND...: runs COMMAND every SECONDS, at most
# TRIES times, while the process in PIDFILE lives; succeeds once COMMAND
# does, fails when the process died or the tries ran out.
poll() {
	pidfile=$1 tries=$2 every=$3
	shift 3
	i=0
	while [ "$i" -lt "$tries" ]; do
		alive "$pidfile" || return 1
		"$@" && return 0
		sleep "$every"
		i=$((i + 1))
	done
	return 1
}

certificates() {
	need openssl "apt-get install openssl"
	pki="$STATE/pki"
	mkdir -p "$pki"
	umask 077
	openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=kube-testenv-ca" \
		-keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
	# The serving certificate: loopback, plus the names and service IP a pod would use.
	cat >"$pki/serving.ext" <<-EOF
		basicConstraints=CA:FALSE
		keyUsage=digitalSignature,keyEncipherment
		extendedKeyUsage=serverAuth
		subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
	EOF
	openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
		-keyout "$pki/serving.key" -out "$pki/serving.csr" 2>/dev/null
	openssl x509 -req -in "$pki/serving.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
		-days 30 -extfile "$pki/serving.ext" -out "$pki/serving.crt" 2>/dev/null
	# The admin: a client certificate in system:masters (may impersonate, for RBAC tests).
	printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' \
		>"$pki/client.ext"
	openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=kube-testenv-admin" \
		-keyout "$pki/admin.key" -out "$pki/admin.csr" 2>/dev/null
	openssl x509 -req -in "$pki/admin.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
		-days 30 -extfile "$pki/client.ext" -out "$pki/admin.crt" 2>/dev/null
	# Service-account token signing keys (TokenRequest works; tests mint ServiceAccount tokens).
	openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
	openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
	umask 022
}

start_etcd() {
	etcd_port=$(free_port)
	peer_port=$(free_port)
	rm -rf "$STATE/etcd"
	# Plain HTTP on loopback only; no fsync: the data is thrown away with the test run.
	"$BIN/etcd" --name testenv --data-dir "$STATE/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
		--initial-cluster "testenv=http://127.0.0.1:$peer_port" --listen-metrics-urls "" \
		--unsafe-no-fsync --log-level info >"$STATE/etcd.log" 2>&1 &
	echo $! >"$STATE/etcd.pid"
	poll "$STATE/etcd.pid" 300 0.2 etcd_serves || return 1
	echo "$etcd_port" >"$STATE/etcd.port"
}

# The (info-level) log line etcd prints once it serves clients: no curl or etcdctl needed.
etcd_serves() {
	grep -q 'ready to serve client requests' "$STATE/etcd.log"
}

start_apiserver() {
	port=$(free_port)
	pki="$STATE/pki"
	"$BIN/kube-apiserver" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" \
		--etcd-servers "http://127.0.0.1:$(cat "$STATE/etcd.port")" \
		--cert-dir "$STATE/apiserver-certs" \
		--tls-cert-file "$pki/serving.crt" --tls-private-key-file "$pki/serving.key" \
		--client-ca-file "$pki/ca.crt" \
		--service-account-issuer https://kubernetes.default.svc \
		--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
		--service-cluster-ip-range 10.0.0.0/24 \
		--authorization-mode Node,RBAC \
		--allow-privileged=true --profiling=false \
		>"$STATE/kube-apiserver.log" 2>&1 &
	echo $! >"$STATE/kube-apiserver.pid"
	echo "$port" >"$STATE/kube-apiserver.port"
}

write_kubeconfig() {
	kc="$STATE/kubeconfig"
	rm -f "$kc"
	k() { "$BIN/kubectl" --kubeconfig "$kc" config "$@" >/dev/null; }
	k set-cluster testenv --server "https://127.0.0.1:$1" --certificate-authority "$STATE/pki/ca.crt" --embed-certs
	k set-credentials testenv-admin --client-certificate "$STATE/pki/admin.crt" \
		--client-key "$STATE/pki/admin.key" --embed-certs
	k set-context testenv --cluster testenv --user testenv-admin --namespace default
	k use-context testenv
}

wait_ready() {
	# Cold start on 2 busy cores can take a while: bootstrap RBAC, priority levels, CRD informers.
	poll "$STATE/kube-apiserver.pid" 240 0.5 apiserver_ready
}

apiserver_ready() {
	[ "$("$BIN/kubectl" --kubeconfig "$STATE/kubeconfig" get --raw /readyz 2>/dev/null)" = ok ]
}

cmd_start() {
	BIN=$(cmd_build)
	if alive "$STATE/kube-apiserver.pid" || alive "$STATE/etcd.pid"; then
		die "already running from $STATE (run: $0 stop)"
	fi
	mkdir -p "$STATE"
	rm -f "$STATE/env" "$STATE/kubeconfig"
	certificates
	tries=0
	until start_etcd; do
		stop_one etcd
		tries=$((tries + 1))
		[ $tries -lt 3 ] || {
			tail -n 30 "$STATE/etcd.log" >&2
			die "etcd did not start (log: $STATE/etcd.log)"
		}
	done
	tries=0
	while :; do
		start_apiserver
		write_kubeconfig "$(cat "$STATE/kube-apiserver.port")"
		wait_ready && break
		stop_one kube-apiserver
		tries=$((tries + 1))
		if [ $tries -ge 3 ] || ! grep -q 'address already in use' "$STATE/kube-apiserver.log"; then
			tail -n 30 "$STATE/kube-apiserver.log" >&2
			stop_one etcd
			die "kube-apiserver did not become ready (log: $STATE/kube-apiserver.log)"
		fi
	done
	{
		printf 'export MIGRATE_TEST_KUBECONFIG=%s\n' "$STATE/kubeconfig"
		printf 'export MIGRATE_TEST_KUBECTL=%s\n' "$BIN/kubectl"
		printf 'export MIGRATE_TEST_HELM=%s\n' "$BIN/helm"
		printf 'export MIGRATE_TESTENV_BIN=%s\n' "$BIN"
	} >"$STATE/env"
	say "ready: https://127.0.0.1:$(cat "$STATE/kube-apiserver.port") (etcd 127.0.0.1:$(cat "$STATE/etcd.port")), state in $STATE"
	cat "$STATE/env"
}

cmd_env() {
	if ! [ -f "$STATE/env" ] || ! alive "$STATE/kube-apiserver.pid"; then
		die "not running (run: $0 start)"
	fi
	cat "$STATE/env"
}

# Stops one daemon by its pid file: TERM, then KILL after 10 s. Only a process still running
# our binary is signalled (a stale pid file never kills somebody else's process).
stop_one() {
	pidfile="$STATE/$1.pid"
	[ -f "$pidfile" ] || return 0
	pid=$(cat "$pidfile")
	if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "/$1 "; then
		kill "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do
			sleep 0.2
			i=$((i + 1))
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$pidfile"
}

cmd_stop() {
	stop_one kube-apiserver
	stop_one etcd
	rm -f "$STATE/env"
	say "stopped"
}

case "${1:-}" in
build) cmd_build >/dev/null ;;
start) cmd_start ;;
env) cmd_env ;;
stop) cmd_stop ;;
*)
	echo "usage: $0 build|start|env|stop" >&2
	exit 2
	;;
esac
