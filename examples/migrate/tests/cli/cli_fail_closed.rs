//! The `migrate` command fails closed where it used to do the wrong thing
//! quietly: manifest paths and tag patterns, verify's baseline and
//! checksums, commands that must leave nothing behind, usage errors in JSON
//! mode, and a closed stdout.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::process::Stdio;

use common::{Repo, assert_first_problem, ledger_in, migrate};

/// A repository with v1.0.0 (a) and v1.1.0 (b), manifest generated.
fn released() -> Repo {
    Repo::released(&[
        ("v1.0.0", &[("pre-apply", "a")]),
        ("v1.1.0", &[("pre-apply", "b")]),
    ])
}

fn batch_names(doc: &serde_json::Value) -> Vec<String> {
    Repo::batches(doc).into_iter().map(|(n, _)| n).collect()
}

#[test]
fn manifest_normalises_dot_slash_trailing_slash_and_an_absolute_path_inside_the_repo() {
    let repo = released();
    let absolute = repo.tree().canonicalize().unwrap();
    for path in [
        "migrations",
        "./migrations",
        "migrations/",
        absolute.to_str().unwrap(),
    ] {
        let doc = repo.manifest_ok(path, &[]);
        assert_eq!(
            batch_names(&doc),
            ["00001-v1.0.0", "00002-v1.1.0"],
            "{path}: every script is in its release's batch, none untagged"
        );
    }
}

#[test]
fn manifest_refuses_an_absolute_path_outside_the_repo_and_a_missing_path() {
    let repo = released();
    let elsewhere = tempfile::tempdir().unwrap();
    let (code, doc, _) = repo.manifest_at(elsewhere.path().to_str().unwrap(), &[]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "outside the repository");
    let (code, doc, _) = repo.manifest_at("migratoins", &[]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "migratoins");
    assert_first_problem(&doc, "does not exist");
}

#[test]
fn manifest_with_a_tag_pattern_matching_no_tag_is_an_error_naming_the_pattern() {
    let repo = released();
    let (code, doc, _) = repo.manifest_at("migrations", &["--tag-pattern", "release-*"]);
    assert_eq!(code, 2, "{doc}");
    common::assert_error(
        &doc,
        "bad-input",
        "no tag matches --tag-pattern \"release-*\"",
    );
}

#[test]
fn manifest_of_a_path_that_no_tag_holds_is_an_error_unless_the_tree_is_declared_new() {
    let repo = released();
    repo.write("../other/pre-apply/.gitkeep", "");
    repo.write("../other/background/.gitkeep", "");
    let (code, doc, _) = repo.manifest_at("other", &[]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "other/pre-apply");
    assert_first_problem(&doc, "--allow-new-path");
    let doc = repo.manifest_ok("other", &["--allow-new-path"]);
    assert!(batch_names(&doc).is_empty(), "{doc}");
}

#[test]
fn manifest_in_a_repository_without_any_tag_puts_everything_untagged() {
    let repo = Repo::new();
    repo.add("pre-apply", "first", "echo first");
    repo.commit("first script, no release yet");
    let doc = repo.manifest_ok("migrations", &[]);
    assert_eq!(batch_names(&doc), ["99999-untagged"]);
}

#[test]
fn verify_since_an_unknown_tag_is_an_error_naming_it() {
    let repo = released();
    let state = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&state);
    repo.succeeds("seed-fresh", &ledger, &[]);
    let verify_since = |since: &str| repo.on_ledger("verify", &ledger, &["--since", since]);
    for since in ["v9.9.9", "1.1.0"] {
        let (code, doc, _) = verify_since(since);
        assert_eq!(code, 2, "{since}: {doc}");
        assert_first_problem(&doc, &format!("--since \"{since}\": no such release"));
    }
    // A tag that shipped no migration is still a release (git knows it).
    repo.release("v1.2.0");
    let (code, doc, _) = verify_since("v1.2.0");
    assert_eq!(code, 0, "{doc}");
}

#[test]
fn verify_fails_on_a_script_changed_since_it_ran_unless_allowed() {
    let repo = released();
    let state = tempfile::tempdir().unwrap();
    let ledger = common::empty_file_ledger(&state.path().join("ledger.json"));
    repo.succeeds("run", &ledger, &[]);
    repo.add("pre-apply", "a", "echo edited after it ran");
    let (code, doc, _) = repo.on_ledger("verify", &ledger, &[]);
    assert_eq!(code, 5, "{doc}");
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["checksum_mismatches"][0]["slug"], "a");
    assert_first_problem(&doc, "'a' changed on disk since it was recorded");
    let (code, doc, _) = repo.on_ledger("verify", &ledger, &["--allow-checksum-mismatch"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["checksum_mismatches"][0]["slug"], "a");
    let tree = repo.tree();
    let text = migrate()
        .args([
            "verify",
            tree.to_str().unwrap(),
            "--ledger",
            &ledger,
            "--allow-checksum-mismatch",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("warning: 'a' changed on disk"), "{text}");
}

fn files_in(dir: &tempfile::TempDir) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn plan_leaves_no_file_behind_on_a_fresh_or_an_existing_ledger() {
    let repo = released();
    let state = tempfile::tempdir().unwrap();
    repo.succeeds("plan", &ledger_in(&state), &[]);
    assert!(files_in(&state).is_empty(), "{:?}", files_in(&state));
    let ledger = common::empty_file_ledger(&state.path().join("ledger.json"));
    repo.succeeds("plan", &ledger, &[]);
    assert_eq!(files_in(&state), ["ledger.json"], "no ledger.json.lock");
}

#[test]
fn a_run_refused_for_a_missing_order_d_creates_no_ledger_and_no_lock_file() {
    let repo = released();
    std::fs::remove_dir_all(repo.tree().join("order.d")).unwrap();
    let state = tempfile::tempdir().unwrap();
    let (code, doc, _) = repo.on_ledger("run", &ledger_in(&state), &[]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "order.d does not exist");
    assert!(files_in(&state).is_empty(), "{:?}", files_in(&state));
}

#[test]
fn a_usage_error_in_json_mode_is_one_json_document_on_stdout() {
    for args in [
        vec!["--output", "json", "plan", "--bogus"],
        vec!["plan", "x", "--ledger", "s3:bucket", "--output=json"],
        vec!["--output", "json", "no-such-command"],
    ] {
        let out = migrate().args(&args).output().unwrap();
        let (code, doc, _) = common::parse(out);
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(doc["error"], "bad-input", "{args:?}");
        assert_eq!(doc["exit_code"], 2, "{args:?}");
        assert!(!doc["problems"].as_array().unwrap().is_empty(), "{doc}");
    }
    let out = migrate()
        .args(["--output", "json", "plan", "x", "--ledger", "s3:bucket"])
        .output()
        .unwrap();
    let (_, doc, _) = common::parse(out);
    assert_first_problem(&doc, "unknown backend");
    // Text mode keeps clap's message on stderr.
    let out = migrate().args(["plan", "--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bogus"));
}

/// Runs `migrate ARGS` with stdout a pipe whose reader is already gone.
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut child = migrate()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_closed_stdout_ends_every_output_path_quietly_without_a_panic() {
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join("ledger.json");
    let mut data = serde_json::Map::new();
    for i in 0..3000 {
        data.insert(
            format!("m.slug-{i}"),
            serde_json::json!(r#"{"state":"ok","at":"2026-01-01T00:00:00Z","attempts":1}"#),
        );
    }
    let doc = serde_json::json!({"format": "migration-ledger/v1", "ledger": {"revision": 1, "data": data}, "lock": null, "lock_generation": 0});
    std::fs::write(&path, doc.to_string()).unwrap();
    let ledger = common::file_spec(&path);
    for args in [
        vec!["status", "--ledger", &ledger],
        vec!["status", "--ledger", &ledger, "--output", "json"],
        vec!["crd"],
        vec!["completions", "bash"],
        vec!["--help"],
    ] {
        let (code, stderr) = with_closed_stdout(&args);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: nothing on stderr: {stderr}");
        assert!(matches!(code, Some(0 | 141)), "{args:?}: {code:?}");
    }
    let (code, _) = with_closed_stdout(&["status", "--ledger", &ledger]);
    assert_eq!(code, Some(141), "the status table meets the closed pipe");
}
