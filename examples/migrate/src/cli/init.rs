//! `migrate init DIR`: an empty migrations tree with the layout `new`,
//! `lint` and `manifest` expect, and the test helpers the first test sources.

use std::path::Path;

use migration_core::header::Tier;
use migration_core::tree::{LEGACY_MAP_FILE, REVOKED_FILE};
use serde::Serialize;

use super::args::InitArgs;
use super::{Failure, Out};

/// What `init` created.
#[derive(Debug, Serialize)]
pub struct InitView {
    /// The tree's root.
    pub tree: String,
    /// Every file created, relative to the root.
    pub created: Vec<String>,
}

const REVOKED_TEXT: &str = "\
# Slugs never to be run on a cluster that has not run them already,
# one a line (a comment after '#' says why).
";

const LEGACY_MAP_TEXT: &str = "\
# \"<integer> <slug>\" lines: the scripts of an older integer-numbered
# scheme, converted to slugs (see CONTRACT.md on the legacy version key).
";

const KUBE_SH: &str = "\
# Shared helpers, sourced by migration scripts from the tree root:
#   . ./lib/kube.sh
# A failing kubectl call returns non-zero, and the runner executes scripts
# with errexit, so the script stops there.

kube() {
    \"${KUBECTL:-kubectl}\" \"$@\"
}
";

/// `.gitignore`: the manifest is generated when a release is built and
/// never committed (AUTHORING.md), so the first `git add` after the quick
/// start must not pick it up.
const GITIGNORE: &str = "# order.d/ is generated when a release is built (migrate manifest); never committed.\n/order.d/\n";

/// `tests/lib.sh`: the helpers a test sources (the fake cluster in front
/// on `PATH`, `answer`, `run_migration`, `expect_safe_to_run_twice`, ...).
pub const TESTS_LIB_SH: &str = r##"# Helpers for migration tests (migrate init wrote them; edit freely),
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
"##;

/// `tests/fake-cluster`: the stand-in for every cluster command, answering
/// with the real commands' own error texts and exit statuses.
pub const FAKE_CLUSTER: &str = r##"#!/bin/sh
# The fake cluster of migration tests (migrate init wrote it; edit freely).
# tests/lib.sh links it as kubectl, helm, flux and the tree's other cluster
# commands; it answers as the real command would, by the name it was called
# by, and logs every call ("kubectl ARGS") to $FAKE_CLUSTER_LOG.
#
# Answers are lines of $FAKE_CLUSTER_ANSWERS written by lib.sh's `answer`:
#   answer 'kubectl get crd foo*' not-found customresourcedefinitions.apiextensions.k8s.io foo
# The last line whose glob matches "COMMAND ARGS" wins; an unanswered call
# succeeds and prints nothing. Each failure kind prints the real command's
# own text and exits with its status, so `migrate-tolerate` classifies the
# answer exactly as it would in production.
set -eu
name=${0##*/}
call="$name $*"
printf '%s\n' "$call" >> "${FAKE_CLUSTER_LOG:-/dev/null}"

# The call named in $FAKE_KUBECTL_FAIL (a substring) fails as an unreachable
# server does: the failure every migration must stop on.
if [ -n "${FAKE_KUBECTL_FAIL:-}" ]; then
    case "$*" in
        *"$FAKE_KUBECTL_FAIL"*)
            printf '%s\n' "$call" >> "${FAKE_CLUSTER_FAILED:-/dev/null}"
            echo "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?" >&2
            exit 1 ;;
    esac
fi

# kubectl words some answers by how the call named the object: the file of
# `-f FILE` (STDIN for -), or the generator of `kubectl create KIND NAME`.
file=
generator=
prev=
for a in "$@"; do
    case $prev in -f|--filename) file=$a ;; create) generator=$a ;; esac
    case $a in --filename=*) file=${a#*=} ;; esac
    prev=$a
done
[ "$file" != - ] || file=STDIN

kind=ok
detail=
if [ -f "${FAKE_CLUSTER_ANSWERS:-}" ]; then
    tab=$(printf '\t')
    while IFS=$tab read -r pattern k d; do
        # shellcheck disable=SC2254 # the pattern is a glob on purpose
        case "$call" in $pattern) kind=$k; detail=$d ;; esac
    done < "$FAKE_CLUSTER_ANSWERS"
fi

# The detail's words: RESOURCE NAME for the object kinds (RESOURCE is
# plural[.group], as kubectl names it), forbidden adds VERB [NAMESPACE] (no
# namespace: a cluster-scoped object; NAME '-': a list).
set -f
# shellcheck disable=SC2086 # split on purpose
set -- $detail
set +f
resource=${1:-}
object=${2:-}
group=
case "$resource" in *.*) group=${resource#*.}; resource=${resource%%.*} ;; esac
plural=$resource${group:+.$group}

fail() {
    printf '%s\n' "$2" >&2
    exit "$1"
}
unknown() {
    fail 2 "fake-cluster: no text of $name is known for '$kind'; answer it with: fail STATUS TEXT"
}

case "$name:$kind" in
    *:ok) [ -z "$detail" ] || printf '%b\n' "$detail" ;;
    *:fail) shift; fail "$resource" "$*" ;;
    helm:not-found) fail 1 "Error: release: not found" ;;
    helm:already-exists) fail 1 "Error: INSTALLATION FAILED: cannot re-use a name that is still in use" ;;
    helm:unreachable) fail 1 "Error: Kubernetes cluster unreachable: Get \"https://127.0.0.1:6443/version\": dial tcp 127.0.0.1:6443: connect: connection refused" ;;
    helm:*) unknown ;;
    kubectl:not-found) fail 1 "Error from server (NotFound): $plural \"$object\" not found" ;;
    kubectl:already-exists)
        if [ -n "$file" ]; then
            fail 1 "Error from server (AlreadyExists): error when creating \"$file\": $plural \"$object\" already exists"
        fi
        # Each generator words it its own way (kubectl 1.34 against a real API server).
        case $generator in
            namespace|ns|role|clusterrole)
                fail 1 "Error from server (AlreadyExists): $plural \"$object\" already exists" ;;
            secret) fail 1 "error: failed to create secret $plural \"$object\" already exists" ;;
        esac
        fail 1 "error: failed to create $generator: $plural \"$object\" already exists" ;;
    kubectl:not-served) fail 1 "error: the server doesn't have a resource type \"$resource\"" ;;
    kubectl:conflict) fail 1 "Error from server (Conflict): Operation cannot be fulfilled on $plural \"$object\": the object has been modified; please apply your changes to the latest version and try again" ;;
    kubectl:forbidden)
        verb=${3:-get}
        scope=" at the cluster scope"
        [ -z "${4:-}" ] || scope=" in the namespace \"$4\""
        what=$plural
        [ "$object" = - ] || what="$plural \"$object\""
        fail 1 "Error from server (Forbidden): $what is forbidden: User \"${FAKE_CLUSTER_USER:-system:serviceaccount:cozy-system:cozystack-migrations}\" cannot $verb resource \"$resource\" in API group \"$group\"$scope" ;;
    kubectl:timeout) fail 1 "Unable to connect to the server: context deadline exceeded" ;;
    kubectl:unreachable) fail 1 "The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?" ;;
    *) unknown ;;
esac
"##;

/// Creates the tree; refuses a directory that exists and is not empty.
pub fn init(args: InitArgs, out: &Out) -> Result<(), Failure> {
    let root = args.dir;
    let bad = |what: String| Failure::bad_input(vec![what]);
    match std::fs::read_dir(&root).map(|mut entries| entries.next().is_some()) {
        Ok(true) => {
            return Err(bad(format!(
                "{}: exists and is not empty; init creates a new tree",
                root.display()
            )));
        }
        Ok(false) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bad(format!("{}: {e}", root.display()))),
    }
    let mut files: Vec<(String, &str, u32)> = Tier::ALL
        .iter()
        .map(|t| (format!("{}/.gitkeep", t.as_str()), "", 0o644))
        .collect();
    files.extend([
        (REVOKED_FILE.to_owned(), REVOKED_TEXT, 0o644),
        (LEGACY_MAP_FILE.to_owned(), LEGACY_MAP_TEXT, 0o644),
        ("lib/kube.sh".to_owned(), KUBE_SH, 0o644),
        ("tests/lib.sh".to_owned(), TESTS_LIB_SH, 0o644),
        ("tests/fake-cluster".to_owned(), FAKE_CLUSTER, 0o755),
        (".gitignore".to_owned(), GITIGNORE, 0o644),
    ]);
    for (rel, text, mode) in &files {
        write_new(&root.join(rel), text, *mode).map_err(|e| {
            Failure::environment(vec![format!("{}: {e}", root.join(rel).display())])
        })?;
    }
    let view = InitView {
        tree: root.display().to_string(),
        created: files.into_iter().map(|(rel, _, _)| rel).collect(),
    };
    out.emit(&view, |_| {
        format!(
            "created the migrations tree {}\nnext: migrate new {} SLUG\n",
            view.tree, view.tree
        )
    });
    Ok(())
}

/// Writes a file that must not exist yet, with `mode`.
fn write_new(path: &Path, text: &str, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}
