//! A handled failure as lint sees it, agreeing with the run-time tripwire:
//! a failure branch that always ends non-zero is fail-closed (accepted);
//! one that can also end in success (`exit 0`, `return 0`, `continue`)
//! accepts some failures by reading kubectl's error itself, which the
//! tripwire refuses at run time (masked-failure) unless the accepted
//! failure goes through `migrate-tolerate`: lint refuses it too. The same
//! holds for a status captured then tested (`|| rc=$?`, `set +e` ... `rc=$?`
//! ... `set -e`, then `if [ "$rc" -ne 0 ]` or `case $rc`) and for a bare
//! `|| return`, each run under dash, busybox ash and bash.

use super::*;
use common::tripwire::Scratch;

/// From line 5: a probe whose "not served" failure ends the script with 0.
const EXITS_0_ON_A_CLASS: &str = "err=$(mktemp)\nif ! names=$(kubectl get clusters.postgresql.cnpg.io -A -o name 2>\"$err\"); then\n  if grep -q \"doesn't have a resource type\" \"$err\"; then\n    echo \"not served: nothing to do\"\n    exit 0\n  fi\n  cat \"$err\" >&2\n  exit 1\nfi\necho \"$names\"";

#[test]
fn a_failure_branch_that_can_exit_0_is_refused_naming_the_exit() {
    let doc = refused(EXITS_0_ON_A_CLASS, &[("cluster-command-in-condition", 6)]);
    let message = doc["findings"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("pre-apply/a:9") && message.contains("migrate-tolerate"),
        "{message}"
    );
}

#[test]
fn a_helper_returning_0_or_continuing_on_a_class_it_reads_is_refused() {
    let body = "adopt() {\n  err=$(mktemp)\n  for ns in a b; do\n    if ! owner=$(kubectl get cm x -n \"$ns\" -o name 2>\"$err\"); then\n      if grep -q 'not found' \"$err\"; then\n        continue\n      fi\n      return 1\n    fi\n    echo \"$owner\"\n  done\n  if ! kubectl get crd x.example.io 2>\"$err\"; then\n    grep -q 'not found' \"$err\" && return 0\n    return 1\n  fi\n}\nadopt";
    refused(
        body,
        &[
            ("cluster-command-in-condition", 8),
            ("cluster-command-in-condition", 16),
        ],
    );
}

#[test]
fn a_handler_after_or_that_can_continue_is_refused() {
    let body = "for ns in a b; do\n  kubectl get cm x -n \"$ns\" 2>err || {\n    grep -q 'not found' err && continue\n    exit 1\n  }\ndone";
    refused(body, &[("cluster-command-in-condition", 6)]);
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

/// Fail-closed shapes (the failure handled, the script ends non-zero):
/// `(slug, body)`. Each works with a healthy cluster.
const FAIL_CLOSED: &[(&str, &str)] = &[
    (
        "or-captured-then-if",
        "rc=0\nkubectl get ns x 2>err || rc=$?\nif [ \"$rc\" -ne 0 ]; then\n  echo 'cannot read x' >&2\n  cat err >&2\n  exit \"$rc\"\nfi\necho read",
    ),
    (
        "set-plus-e-then-if",
        "set +e\nout=$(kubectl get ns x)\nrc=$?\nset -e\nif [ \"$rc\" -ne 0 ]; then\n  echo 'cannot read x' >&2\n  exit 1\nfi\necho \"$out\"",
    ),
    (
        "set-plus-e-then-case",
        "set +e\nkubectl get ns x\nrc=$?\nset -e\ncase $rc in\n  0) ;;\n  *) echo failed >&2; exit 1 ;;\nesac\necho read",
    ),
    (
        "or-bare-return",
        "read_x() {\n  kubectl get ns x || return\n  echo read\n}\nread_x",
    ),
];

/// The same shapes with a failure branch that can end in success (or does
/// not fail): refused by lint, and masked failures at run time.
const CAN_SUCCEED: &[(&str, &str, u64)] = &[
    (
        "or-captured-exits-0",
        "rc=0\nkubectl get ns x 2>err || rc=$?\nif [ \"$rc\" -ne 0 ]; then\n  grep -q NotFound err && exit 0\n  exit 1\nfi",
        6,
    ),
    (
        "set-plus-e-carries-on",
        "set +e\nkubectl get ns x\nrc=$?\nset -e\nif [ \"$rc\" -ne 0 ]; then\n  echo 'failed, carrying on'\nfi",
        6,
    ),
    (
        "set-plus-e-case-returns-0",
        "f() {\n  set +e\n  kubectl get ns x 2>err\n  rc=$?\n  set -e\n  case $rc in\n    0) ;;\n    *) grep -q NotFound err && return 0; return 1 ;;\n  esac\n}\nf",
        7,
    ),
    (
        "or-echo-then-bare-return",
        "f() {\n  kubectl get ns x || { echo failed; return; }\n}\nf",
        6,
    ),
];

#[test]
fn a_status_captured_then_tested_and_a_bare_return_after_or_are_fail_closed_for_lint_and_at_run_time()
 {
    for (slug, body) in FAIL_CLOSED {
        let (code, doc) = lint_body(body);
        assert_eq!((code, placed(&doc)), (0, vec![]), "{slug}\n{doc}");
    }
    for shell in common::shells::all() {
        for (slug, body) in FAIL_CLOSED {
            let s = Scratch::under(&shell, "warn", &[(slug, body)]);
            let (code, _, err) = parse(s.command(&shell, "ok", "forbidden").output().unwrap());
            assert_eq!(code, 0, "{} {slug}: {err}", shell.name);
            assert_eq!(s.entry(slug)["state"], "ok", "{} {slug}", shell.name);
            let s = Scratch::under(&shell, "warn", &[(slug, body)]);
            s.command(&shell, "fail", "forbidden").output().unwrap();
            let entry = s.entry(slug);
            assert_eq!(entry["state"], "failed", "{} {slug}: {entry}", shell.name);
            assert!(
                entry["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("exit-status-")),
                "{} {slug}: the script itself fails, nothing is masked: {entry}",
                shell.name
            );
        }
    }
}

#[test]
fn the_same_shapes_whose_failure_branch_can_succeed_are_refused_by_lint_and_masked_at_run_time() {
    for (slug, body, line) in CAN_SUCCEED {
        let (code, doc) = lint_body(body);
        assert_eq!(
            (code, placed(&doc)),
            (2, vec![("cluster-command-in-condition".to_owned(), *line)]),
            "{slug}\n{doc}"
        );
    }
    // At run time the pre-run scan would refuse them first; with the
    // failpoints build it is off for the tripwire's own proof.
    if !cfg!(feature = "failpoints") {
        return;
    }
    for shell in common::shells::all() {
        for (slug, body, _) in CAN_SUCCEED {
            // NotFound: the answer the branch reads itself and succeeds on.
            let s = Scratch::under(&shell, "warn", &[(slug, body)]);
            s.command(&shell, "fail", "not-found").output().unwrap();
            s.assert_masked(slug, "kubectl get ns");
        }
    }
}
