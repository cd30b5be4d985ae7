//! A handled failure as lint sees it, agreeing with the run-time tripwire:
//! a failure branch that always ends non-zero is fail-closed (accepted);
//! one that can also end in success (`exit 0`, `return 0`, `continue`)
//! accepts some failures by reading kubectl's error itself, which the
//! tripwire refuses at run time (masked-failure) unless the accepted
//! failure goes through `migrate-tolerate`: lint refuses it too.

use super::*;

/// From line 5: a probe whose "not served" failure ends the script with 0.
const EXITS_0_ON_A_CLASS: &str = "err=$(mktemp)\nif ! names=$(kubectl get clusters.postgresql.cnpg.io -A -o name 2>\"$err\"); then\n  if grep -q \"doesn't have a resource type\" \"$err\"; then\n    echo \"not served: nothing to do\"\n    exit 0\n  fi\n  cat \"$err\" >&2\n  exit 1\nfi\necho \"$names\"";

#[test]
fn a_failure_branch_that_can_exit_0_is_refused_naming_the_exit() {
    let (code, doc) = lint_body(EXITS_0_ON_A_CLASS);
    assert_eq!(code, 2, "{doc}");
    assert_eq!(
        placed(&doc),
        [("cluster-command-in-condition".to_owned(), 6)],
        "{doc}"
    );
    let message = doc["findings"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("pre-apply/a:9") && message.contains("migrate-tolerate"),
        "{message}"
    );
}

#[test]
fn a_helper_returning_0_or_continuing_on_a_class_it_reads_is_refused() {
    let body = "adopt() {\n  err=$(mktemp)\n  for ns in a b; do\n    if ! owner=$(kubectl get cm x -n \"$ns\" -o name 2>\"$err\"); then\n      if grep -q 'not found' \"$err\"; then\n        continue\n      fi\n      return 1\n    fi\n    echo \"$owner\"\n  done\n  if ! kubectl get crd x.example.io 2>\"$err\"; then\n    grep -q 'not found' \"$err\" && return 0\n    return 1\n  fi\n}\nadopt";
    let (code, doc) = lint_body(body);
    assert_eq!(code, 2, "{doc}");
    assert_eq!(
        placed(&doc),
        [
            ("cluster-command-in-condition".to_owned(), 8),
            ("cluster-command-in-condition".to_owned(), 16)
        ],
        "{doc}"
    );
}

#[test]
fn a_handler_after_or_that_can_continue_is_refused() {
    let body = "for ns in a b; do\n  kubectl get cm x -n \"$ns\" 2>err || {\n    grep -q 'not found' err && continue\n    exit 1\n  }\ndone";
    let (code, doc) = lint_body(body);
    assert_eq!(code, 2, "{doc}");
    assert_eq!(
        placed(&doc),
        [("cluster-command-in-condition".to_owned(), 6)],
        "{doc}"
    );
}

#[test]
fn failure_branches_that_always_end_non_zero_are_fail_closed_and_accepted() {
    for body in [
        "if ! names=$(kubectl get ns -o name 2>err); then\n  if grep -q Forbidden err; then\n    echo 'forbidden' >&2\n    exit 3\n  fi\n  cat err >&2\n  exit 1\nfi\necho \"$names\"",
        "kubectl get ns 2>err || {\n  echo 'cannot list namespaces' >&2\n  exit 1\n}",
    ] {
        let (code, doc) = lint_body(body);
        assert_eq!((code, placed(&doc)), (0, vec![]), "{body}\n{doc}");
    }
}
