//! `migrate plan` reads the tree and the ledger at once: what it reports
//! must not depend on which of the two finishes first.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Repo, assert_first_problem, json};

/// A tree of one script, `a`, in the manifest.
fn one_script() -> Repo {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("pre-apply", "a")]);
    let (code, _, err) = repo.manifest();
    assert_eq!(code, 0, "{err}");
    repo
}

#[test]
fn a_broken_tree_is_reported_before_an_unreadable_ledger() {
    let repo = one_script();
    repo.write("pre-apply/broken", "#!/bin/sh\n");
    let state = tempfile::tempdir().unwrap();
    let ledger = state.path().join("ledger");
    std::fs::write(&ledger, "not a ledger\n").unwrap();
    let spec = format!("file:{}", ledger.display());
    let (code, doc, _) = json(&["plan", repo.tree().to_str().unwrap(), "--ledger", &spec]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "pre-apply/broken");
}

#[test]
fn an_unreadable_ledger_under_a_good_tree_is_an_error_naming_the_ledger() {
    let repo = one_script();
    let state = tempfile::tempdir().unwrap();
    let ledger = state.path().join("ledger");
    std::fs::write(&ledger, "not a ledger\n").unwrap();
    let spec = format!("file:{}", ledger.display());
    let (code, doc, _) = json(&["plan", repo.tree().to_str().unwrap(), "--ledger", &spec]);
    assert_ne!(code, 0, "{doc}");
    assert_first_problem(&doc, &ledger.display().to_string());
}

#[test]
fn plan_counts_the_attempt_marks_of_the_ledger_it_planned_against() {
    let repo = one_script();
    let state = tempfile::tempdir().unwrap();
    let ledger = state.path().join("ledger");
    // `a` was started twice and never recorded (a crash each time).
    std::fs::write(
        &ledger,
        r#"{"format":"migration-ledger/v1","ledger":{"revision":1,"data":{"a.a":"{\"count\":2,\"token\":\"t\"}"}},"lock":null,"lock_generation":0}"#,
    )
    .unwrap();
    let spec = format!("file:{}", ledger.display());
    let (code, doc, err) = json(&["plan", repo.tree().to_str().unwrap(), "--ledger", &spec]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["pending"][0]["slug"], "a", "{doc}");
    assert_eq!(doc["pending"][0]["attempts_before"], 2, "{doc}");
}
