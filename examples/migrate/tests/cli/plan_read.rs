//! `migrate plan` reads the tree and the ledger at once: what it reports
//! must not depend on which of the two finishes first.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::PathBuf;

use common::{Repo, assert_first_problem};

/// A tree of one script, `a`, in the manifest.
fn one_script() -> Repo {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("pre-apply", "a")]);
    let (code, _, err) = repo.manifest();
    assert_eq!(code, 0, "{err}");
    repo
}

/// `migrate plan` of `repo` against a file ledger holding `ledger_text`:
/// (exit code, JSON document, stderr, the ledger file).
fn plan_with_ledger(repo: &Repo, ledger_text: &str) -> (i32, serde_json::Value, String, PathBuf) {
    let state = tempfile::tempdir().unwrap();
    let ledger = state.path().join("ledger");
    std::fs::write(&ledger, ledger_text).unwrap();
    let (code, doc, err) = repo.on_ledger("plan", &common::file_spec(&ledger), &[]);
    (code, doc, err, ledger)
}

#[test]
fn a_broken_tree_is_reported_before_an_unreadable_ledger() {
    let repo = one_script();
    repo.write("pre-apply/broken", "#!/bin/sh\n");
    let (code, doc, _, _) = plan_with_ledger(&repo, "not a ledger\n");
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "pre-apply/broken");
}

#[test]
fn an_unreadable_ledger_under_a_good_tree_is_an_error_naming_the_ledger() {
    let (code, doc, _, ledger) = plan_with_ledger(&one_script(), "not a ledger\n");
    assert_ne!(code, 0, "{doc}");
    assert_first_problem(&doc, &ledger.display().to_string());
}

#[test]
fn plan_counts_the_attempt_marks_of_the_ledger_it_planned_against() {
    // `a` was started twice and never recorded (a crash each time).
    let (code, doc, err, _) = plan_with_ledger(
        &one_script(),
        r#"{"format":"migration-ledger/v1","ledger":{"revision":1,"data":{"a.a":"{\"count\":2,\"token\":\"t\"}"}},"lock":null,"lock_generation":0}"#,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["pending"][0]["slug"], "a", "{doc}");
    assert_eq!(doc["pending"][0]["attempts_before"], 2, "{doc}");
}
