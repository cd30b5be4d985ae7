//! A shipped script edited before the next release: `migrate lint`, in the
//! repository, names it with the tag that shipped it and the fix (a new
//! slug), by the guard `migrate manifest` applies at release time; and
//! `migrate plan` warns when a pending script is one of them. Without the
//! repository (a tree in an image) nothing records what a tag shipped:
//! `plan` then checks nothing of it (CONTRACT.md §4.5).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{Repo, json};

/// The rule of the finding.
const RULE: &str = "shipped-script-edited";

/// `migrate lint TREE --output json` of `repo`: (exit code, the findings of
/// [`RULE`]).
fn shipped_findings(repo: &Repo) -> (i32, Vec<serde_json::Value>) {
    let (code, doc, err) = json(&["lint", repo.tree().to_str().unwrap()]);
    let findings = doc["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings list: {doc} {err}"))
        .iter()
        .filter(|f| f["rule"] == RULE)
        .cloned()
        .collect();
    (code, findings)
}

/// A repository that released `a` and `b` in v1.0.0, then `c` in v1.1.0.
fn released() -> Repo {
    Repo::released(&[
        ("v1.0.0", &[("pre-apply", "a"), ("background", "b")]),
        ("v1.1.0", &[("pre-apply", "c")]),
    ])
}

#[test]
fn lint_names_a_script_edited_after_its_tag_shipped_it_with_the_tag_and_the_fix() {
    let repo = released();
    // Edited in the working tree, not committed yet.
    repo.add("pre-apply", "a", "echo a, but better");
    let (code, findings) = shipped_findings(&repo);
    assert_eq!(code, 2, "an edited shipped script fails lint: {findings:?}");
    assert_eq!(findings.len(), 1, "{findings:?}");
    let f = &findings[0];
    assert_eq!(f["file"], "pre-apply/a");
    assert_eq!(f["level"], "error");
    let message = f["message"].as_str().unwrap();
    for needle in ["'a'", "v1.0.0", "new slug"] {
        assert!(message.contains(needle), "{needle}: {message}");
    }

    // Committed after the tag, and a second one in the other tier: each
    // is named, with the tag that shipped it.
    repo.add("background", "b", "echo b, changed");
    repo.commit("edit shipped scripts");
    let (_, findings) = shipped_findings(&repo);
    let files: Vec<&str> = findings
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        ["pre-apply/a", "background/b"],
        "in slug order: {findings:?}"
    );
    // The fix names the file as git does, from the repository's top.
    common::assert_contains_all(
        findings[0]["message"].as_str().unwrap(),
        &["git checkout v1.0.0 -- migrations/pre-apply/a"],
    );
}

#[test]
fn lint_of_a_repository_with_no_commit_yet_says_nothing_of_what_shipped() {
    // Just `git init`: nothing was ever committed, let alone tagged.
    let repo = Repo::new();
    repo.add("pre-apply", "a", "echo a");
    let (_, findings) = shipped_findings(&repo);
    assert!(findings.is_empty(), "{findings:?}");
}

#[test]
fn lint_says_nothing_of_shipped_scripts_left_as_shipped_or_of_new_ones() {
    let repo = released();
    repo.add("pre-apply", "d", "echo d");
    repo.commit("new work");
    let (_, findings) = shipped_findings(&repo);
    assert!(findings.is_empty(), "{findings:?}");
    // A later tag that shipped one script is what it is compared with.
    repo.add("pre-apply", "c", "echo c, v2");
    let (_, findings) = shipped_findings(&repo);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(findings[0]["message"].as_str().unwrap().contains("v1.1.0"));
}

#[test]
fn plan_warns_when_a_pending_script_differs_from_what_its_tag_shipped() {
    let repo = released();
    // The manifest generated at the release is on disk; the edit comes after.
    repo.add("pre-apply", "a", "echo a, but better");
    let ledger_dir = tempfile::tempdir().unwrap();
    let ledger = common::empty_file_ledger(&ledger_dir.path().join("ledger.json"));
    let doc = repo.succeeds("plan", &ledger, &[]);
    let warnings: Vec<&str> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.contains("shipped"))
        .collect();
    assert_eq!(warnings.len(), 1, "{doc}");
    for needle in ["pre-apply/a", "v1.0.0", "new slug"] {
        assert!(warnings[0].contains(needle), "{needle}: {}", warnings[0]);
    }

    // Only pending scripts are compared: with `--only c`, `a` is not.
    let doc = repo.succeeds("plan", &ledger, &["--only", "c"]);
    let text = doc["warnings"].to_string();
    assert!(!text.contains("shipped"), "{text}");

    // Each against the tag its batch names; `run --dry-run` says the same.
    repo.add("pre-apply", "c", "echo c, v2");
    let doc = repo.succeeds("run", &ledger, &["--dry-run", "--only", "c"]);
    let text = doc["warnings"].to_string();
    assert!(
        text.contains("pre-apply/c") && text.contains("v1.1.0") && !text.contains("pre-apply/a"),
        "{text}"
    );
}

#[test]
fn plan_of_a_tree_outside_its_repository_checks_nothing_of_what_shipped() {
    let repo = released();
    repo.add("pre-apply", "a", "echo a, but better");
    // The tree as an image holds it: no repository around it.
    let copy = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-R")
        .arg(repo.tree())
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(status.success());
    let ledger = common::empty_file_ledger(&copy.path().join("ledger.json"));
    let (code, doc, err) = common::on_ledger("plan", &copy.path().join("migrations"), &ledger, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(!doc["warnings"].to_string().contains("shipped"), "{doc}");
}

#[test]
fn lint_reads_tags_from_before_the_tree_as_shipping_nothing() {
    let repo = Repo::new();
    // A release of the project before it had migrations at all.
    repo.git(&[
        "commit",
        "--quiet",
        "--allow-empty",
        "-m",
        "before the tree",
    ]);
    repo.tag("v0.9.0");
    repo.release_with("v1.0.0", &[("pre-apply", "a")]);
    repo.add("pre-apply", "a", "echo a, edited");
    let (_, doc, err) = json(&["lint", repo.tree().to_str().unwrap()]);
    let ours: Vec<&serde_json::Value> = doc["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("{doc} {err}"))
        .iter()
        .filter(|f| f["rule"] == RULE)
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "no warning about v0.9.0, one error: {ours:?}"
    );
    assert_eq!(ours[0]["level"], "error");
    assert!(ours[0]["message"].as_str().unwrap().contains("v1.0.0"));
}
