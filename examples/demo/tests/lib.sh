# Helpers for migration tests. A test runs its migration against the fake
# kubectl from the tree root and checks the calls it made.
set -eu
TREE=$(cd "$(dirname "$0")/.." && pwd)
cd "$TREE"
export KUBECTL="$TREE/tests/fake-kubectl"
export FAKE_KUBECTL_LOG
FAKE_KUBECTL_LOG=$(mktemp)
trap 'rm -f "$FAKE_KUBECTL_LOG"' EXIT

run_migration() {
    sh -e "$1"
}

expect_call() {
    grep -qF -- "kubectl $1" "$FAKE_KUBECTL_LOG" || { echo "expected call: kubectl $1" >&2; cat "$FAKE_KUBECTL_LOG" >&2; exit 1; }
}

expect_failure_when_kubectl_fails() {
    if FAKE_KUBECTL_FAIL="$2" sh -e "$1" >/dev/null 2>&1; then
        echo "$1 succeeded although kubectl failed on '$2'" >&2
        exit 1
    fi
}
