//! `migrate lint` as a person reads it: each finding names its location
//! once, a bad file name gets a usable slug, and a stale `order.d/` is a
//! finding before `plan` ever meets it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::PathBuf;

use common::{Repo, json};

fn script(tier: &str, on_error: &str) -> String {
    migration_core::testing::fixtures::script_text(tier, on_error, &[], "echo hi")
}

fn findings(doc: &serde_json::Value) -> Vec<&serde_json::Value> {
    doc["findings"].as_array().unwrap().iter().collect()
}

/// The first finding of `rule` in the lint document `doc`.
fn finding<'a>(doc: &'a serde_json::Value, rule: &str) -> &'a serde_json::Value {
    findings(doc)
        .into_iter()
        .find(|f| f["rule"] == rule)
        .unwrap_or_else(|| panic!("no {rule}: {doc}"))
}

/// A tree `migrate init` made, with `files` (path in the tree, text) added,
/// and the JSON document of `migrate lint` on it, which must exit 2:
/// (the directory holding the tree, the tree, the document).
fn lint_refuses(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf, serde_json::Value) {
    let (dir, tree) = common::initialised("m");
    for (path, text) in files {
        std::fs::write(tree.join(path), text).unwrap();
    }
    let (code, doc, _) = json(&["lint", tree.to_str().unwrap()]);
    assert_eq!(code, 2, "{doc}");
    (dir, tree, doc)
}

#[test]
fn each_finding_names_its_location_once() {
    let (_dir, tree, doc) = lint_refuses(&[
        ("pre-apply/bad-header", &script("pre-apply", "sometimes")),
        ("tests/bad-header.sh", "exit 0\n"),
    ]);
    let header = finding(&doc, "header");
    assert_eq!(header["file"], "pre-apply/bad-header");
    assert_eq!(header["line"], 3);
    let message = header["message"].as_str().unwrap();
    assert!(!message.contains("pre-apply/bad-header"), "{message}");
    assert!(message.contains("sometimes"), "{message}");
    let out = common::migrate()
        .args(["lint", tree.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("[header]")).unwrap();
    assert_eq!(line.matches("pre-apply/bad-header").count(), 1, "{line}");
    assert!(
        line.starts_with("pre-apply/bad-header:3: error[header]"),
        "{line}"
    );
}

#[test]
fn a_file_name_that_is_no_slug_is_told_the_slug_to_use_not_a_test_name_built_from_it() {
    let (_dir, _, doc) =
        lint_refuses(&[("pre-apply/Rotate_Certs.sh", &script("pre-apply", "abort"))]);
    let all = doc.to_string();
    assert!(!all.contains("Rotate_Certs.sh.sh"), "{doc}");
    let slug = finding(&doc, "slug");
    common::assert_contains_all(
        slug["message"].as_str().unwrap(),
        &["rename it to 'rotate-certs'"],
    );
    assert!(
        findings(&doc).iter().all(|f| f["rule"] != "missing-test"),
        "the name is the problem, not the test: {doc}"
    );
}

#[test]
fn lint_finds_a_stale_order_d_before_plan_does() {
    let repo = Repo::new();
    repo.release_with("v1.0.0", &[("pre-apply", "a"), ("pre-apply", "b")]);
    assert_eq!(repo.manifest().0, 0);
    for slug in ["a", "b", "c"] {
        repo.write(&format!("tests/{slug}.sh"), "exit 0\n");
    }
    let tree = repo.tree();
    let tree = tree.to_str().unwrap();
    let (code, doc, _) = json(&["lint", tree]);
    assert_eq!(code, 0, "fresh manifest, clean tree: {doc}");
    repo.add("pre-apply", "c", "echo c");
    repo.remove("pre-apply", "b");
    let (code, doc, _) = json(&["lint", tree]);
    assert_eq!(code, 2, "{doc}");
    let stale: Vec<(&str, &str)> = findings(&doc)
        .into_iter()
        .filter(|f| f["rule"] == "stale-manifest")
        .map(|f| (f["file"].as_str().unwrap(), f["message"].as_str().unwrap()))
        .collect();
    assert_eq!(stale.len(), 2, "{doc}");
    assert!(
        stale
            .iter()
            .any(|(f, m)| *f == "pre-apply/c" && m.contains("'c' is in no batch")),
        "{stale:?}"
    );
    assert!(
        stale.iter().any(|(f, m)| *f == "order.d/00001-v1.0.0"
            && m.contains("'b' is listed but its script is not on disk")),
        "{stale:?}"
    );
    assert!(
        stale.iter().all(|(_, m)| m.contains("migrate manifest")),
        "{stale:?}"
    );
}

#[test]
fn a_test_file_no_migration_is_named_after_is_flagged_with_the_name_meant() {
    let (_dir, tree) = common::initialised("m");
    std::fs::write(
        tree.join("pre-apply/drop-token"),
        script("pre-apply", "abort"),
    )
    .unwrap();
    std::fs::write(tree.join("tests/drop-token.sh"), "exit 0\n").unwrap();
    std::fs::write(tree.join("tests/drop-tokens.sh"), "exit 0\n").unwrap();
    let (_, doc, _) = json(&["lint", tree.to_str().unwrap()]);
    let orphan = finding(&doc, "orphan-test");
    assert_eq!(orphan["file"], "tests/drop-tokens.sh", "{doc}");
    let message = orphan["message"].as_str().unwrap();
    assert!(message.contains("never runs"), "{message}");
    assert!(message.contains("did you mean drop-token.sh?"), "{message}");
    assert_eq!(
        findings(&doc)
            .iter()
            .filter(|f| f["rule"] == "orphan-test")
            .count(),
        1,
        "{doc}"
    );
}

#[test]
fn a_masked_failure_of_oc_is_told_with_an_not_a() {
    let (_dir, tree) = common::initialised("m");
    let body = migration_core::testing::fixtures::script_text(
        "pre-apply",
        "abort",
        &[],
        "oc get namespace x || true",
    );
    std::fs::write(tree.join("pre-apply/ask-oc"), body).unwrap();
    std::fs::write(tree.join("tests/ask-oc.sh"), "exit 0\n").unwrap();
    let (_, doc, _) = json(&["lint", tree.to_str().unwrap(), "--kubectl-command", "oc"]);
    let message = finding(&doc, "kubectl-error-ignored")["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("after an oc call"), "{message}");
}
