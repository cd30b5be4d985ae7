# Helpers for migration tests (migrate init wrote them; edit freely),
# sourced as . "$(dirname "$0")/lib.sh". `migrate test` runs each test from
# the tree root with every cluster command first on PATH refusing to run and
# KUBECONFIG pointing nowhere; this file puts the fake cluster
# (tests/fake-cluster) in front, so a test only ever talks to the fake.
set -eu
TREE=$(cd "$(dirname "$0")/.." && pwd)
cd "$TREE"
FAKE_CLUSTER_DIR=$(mktemp -d)
trap 'rm -rf "$FAKE_CLUSTER_DIR"' EXIT
export FAKE_CLUSTER_LOG="$FAKE_CLUSTER_DIR/calls"
export FAKE_CLUSTER_ANSWERS="$FAKE_CLUSTER_DIR/answers"
: > "$FAKE_CLUSTER_LOG"
: > "$FAKE_CLUSTER_ANSWERS"
# The cluster commands of this run (migrate test exports them), else the defaults.
_commands=$(printf '%s' "${MIGRATE_TRIPWIRE_COMMANDS:-kubectl,helm,flux}" | tr ',' ' ')
for _c in $_commands; do
    ln -s "$TREE/tests/fake-cluster" "$FAKE_CLUSTER_DIR/$_c"
done
export PATH="$FAKE_CLUSTER_DIR:$PATH"
export KUBECTL="$FAKE_CLUSTER_DIR/kubectl" HELM="$FAKE_CLUSTER_DIR/helm" FLUX="$FAKE_CLUSTER_DIR/flux"

# answer PATTERN KIND [DETAIL...]: calls matching the glob PATTERN (on
# "COMMAND ARGS") get this answer; a later answer overrides an earlier one.
# Kinds: ok [TEXT] | not-found RESOURCE NAME | not-served RESOURCE |
# already-exists RESOURCE NAME | conflict RESOURCE NAME |
# forbidden RESOURCE NAME VERB [NAMESPACE] | timeout | unreachable |
# fail STATUS TEXT. RESOURCE is plural[.group] (configmaps,
# customresourcedefinitions.apiextensions.k8s.io); helm knows not-found,
# already-exists and unreachable.
answer() {
    _pattern=$1
    _kind=$2
    shift 2
    printf '%s\t%s\t%s\n' "$_pattern" "$_kind" "$*" >> "$FAKE_CLUSTER_ANSWERS"
}

# Runs a migration as the runner does: its shebang's interpreter with
# errexit (bash also with pipefail), MIGRATION_SLUG and MIGRATION_TIER set.
run_migration() {
    _interpreter=/bin/sh
    IFS= read -r _first < "$1" || true
    case $_first in '#!'*) _interpreter=${_first#??} ;; esac
    _pipefail=
    case $_interpreter in */bash|*/bash\ *|*\ bash) _pipefail="-o pipefail" ;; esac
    # shellcheck disable=SC2086 # the interpreter's words split on purpose
    MIGRATION_SLUG=${1##*/} MIGRATION_TIER=${1%%/*} $_interpreter -e $_pipefail "$1"
}

# The call log must hold 'kubectl ARGS' (expect_call_of helm ARGS for another command).
expect_call() {
    expect_call_of kubectl "$1"
}
expect_call_of() {
    grep -qF -- "$1 $2" "$FAKE_CLUSTER_LOG" || {
        echo "expected call: $1 $2; the calls were:" >&2
        cat "$FAKE_CLUSTER_LOG" >&2
        exit 1
    }
}

# The migration must fail when the call whose arguments contain $2 fails.
# $2 is part of the arguments as the call log shows them after the command's
# name; a $2 that no call contains injects nothing, and is a failed test.
expect_failure_when_kubectl_fails() {
    _failed="$FAKE_CLUSTER_DIR/failed"
    : > "$_failed"
    _ended=succeeded
    FAKE_KUBECTL_FAIL="$2" FAKE_CLUSTER_FAILED="$_failed" run_migration "$1" >/dev/null 2>&1 || _ended=failed
    if [ ! -s "$_failed" ]; then
        echo "no kubectl call's arguments contained '$2', so nothing failed ($1 $_ended): name part of a call's arguments, without the command's name, as the call log shows them" >&2
        exit 1
    fi
    if [ "$_ended" = succeeded ]; then
        echo "$1 succeeded although kubectl failed on '$2'" >&2
        exit 1
    fi
}

# verb_first CALL: the call as "COMMAND VERB ARGS...", read as kubectl (and
# helm and flux) read their command lines: the global flags before the verb,
# with their values (-n NS, --context NAME, --kubeconfig PATH, ...), are
# moved after it, so `kubectl -n acme delete secret x --ignore-not-found`
# reads as `kubectl delete secret x --ignore-not-found -n acme`. A flag this
# table does not know is taken to stand alone, so its value reads as the
# verb and the call counts as a change (fail closed).
verb_first() (
    set -f
    # shellcheck disable=SC2086 # the call's words split on purpose
    set -- $1
    [ "$#" -gt 0 ] || exit 0
    _command=$1
    shift
    _moved=
    while [ "$#" -gt 0 ]; do
        case $1 in
            -n|-s|-v|--namespace|--context|--kubeconfig|--cluster|--user|--server|\
            --token|--as|--as-group|--as-uid|--request-timeout|--cache-dir|\
            --certificate-authority|--client-certificate|--client-key|\
            --tls-server-name|--username|--password|--log-file|--vmodule|--v|\
            --profile|--profile-output|--kube-context|--kube-apiserver|\
            --kube-as-user|--kube-as-group|--kube-ca-file|--kube-token|\
            --kube-tls-server-name|--registry-config|--repository-cache|\
            --repository-config|--burst-limit|--qps|--timeout|--kube-api-burst|\
            --kube-api-qps)
                [ "$#" -gt 1 ] || break
                _moved="$_moved $1 $2"
                shift 2
                ;;
            -*)
                _moved="$_moved $1"
                shift
                ;;
            *) break ;;
        esac
    done
    printf '%s %s%s\n' "$_command" "$*" "$_moved"
)

# expect_safe_to_run_twice MIGRATION [AFTER]: runs it, then (after calling
# the function AFTER, which answers as the cluster would after the first run)
# runs it again; the second run must succeed and change nothing: only reads,
# and writes that change nothing when repeated (kubectl apply, label or
# annotate with --overwrite, delete with --ignore-not-found). The proof on a
# real API server is `migrate test --real-cluster KUBECONFIG`.
expect_safe_to_run_twice() {
    run_migration "$1" > /dev/null
    [ -z "${2:-}" ] || "$2"
    : > "$FAKE_CLUSTER_LOG"
    if ! run_migration "$1" > /dev/null; then
        echo "$1 failed when run a second time" >&2
        exit 1
    fi
    _changes=$(while IFS= read -r _logged; do
        _call=$(verb_first "$_logged")
        case "$_call" in
            "kubectl get "*|"kubectl describe "*|"kubectl wait "*|"kubectl auth can-i "*|\
            "kubectl api-resources"*|"kubectl api-versions"*|"kubectl version"*|"kubectl diff "*|\
            "kubectl logs "*|"kubectl explain "*|"kubectl config "*|"kubectl apply "*) ;;
            "kubectl label "*--overwrite*|"kubectl annotate "*--overwrite*) ;;
            "kubectl delete "*--ignore-not-found*) ;;
            "helm status "*|"helm list"*|"helm get "*|"helm history "*|"helm template "*|\
            "helm show "*|"helm version"*|"helm search "*) ;;
            "flux get "*|"flux check"*|"flux version"*|"flux tree "*|"flux trace "*|"flux export "*|\
            "flux diff "*|"flux stats"*|"flux logs"*) ;;
            *) printf '%s\n' "$_logged" ;;
        esac
    done < "$FAKE_CLUSTER_LOG")
    if [ -n "$_changes" ]; then
        printf '%s changed the cluster again when run a second time:\n%s\n' "$1" "$_changes" >&2
        exit 1
    fi
}
