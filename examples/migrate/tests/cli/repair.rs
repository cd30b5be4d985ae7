//! `migrate repair`: one command marks a slug to run again or as done by
//! hand, says who and why, keeps what the ledger said before, and refuses
//! (writing nothing) what would change nothing or lose data (issue 38).
//! Also the "did you mean" of `status SLUG` and `--only SLUG`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::tripwire::Scratch;
use crate::common::{assert_contains_all, json, parse};

/// `migrate repair` on the world's tree and ledger; (code, document, stderr).
fn repair(s: &Scratch, slug: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let tree = s.tree();
    let mut args = vec!["repair", tree.to_str().unwrap(), slug, "--ledger"];
    let ledger = s.ledger();
    args.push(&ledger);
    args.extend_from_slice(extra);
    json(&args)
}

/// `migrate repair` of `flaky` with `mark` (`--done`, `--rerun`) by `by`
/// for `reason`, which must succeed leaving it `state`: its entry.
fn repaired(s: &Scratch, mark: &str, by: &str, reason: &str, state: &str) -> serde_json::Value {
    let (code, doc, stderr) = repair(s, "flaky", &[mark, "--by", by, "--reason", reason]);
    assert_eq!(code, 0, "{doc:#} {stderr}");
    let entry = s.entry("flaky");
    assert_eq!(entry["state"], state, "{entry:#}");
    entry
}

/// A world whose one migration, `flaky`, fails until `$SCRATCH/fixed` exists.
fn flaky(on_error: &str) -> (crate::common::shells::Shell, Scratch) {
    Scratch::dash(on_error, &[("flaky", "test -f \"$SCRATCH/fixed\"")])
}

#[test]
fn a_failed_entry_marked_to_run_again_runs_again_and_keeps_its_failure_in_the_history() {
    let (shell, s) = flaky("warn");
    let (code, doc, _) = s.run(&shell, "ok");
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(s.entry("flaky")["state"], "failed");
    let entry = repaired(&s, "--rerun", "alice", "quota fixed, INC-42", "not-yet");
    let history = &entry["repairs"][0];
    assert_eq!(history["by"], "alice", "{entry:#}");
    assert_eq!(history["why"], "quota fixed, INC-42", "{entry:#}");
    assert_eq!(history["mark"], "rerun", "{entry:#}");
    assert_eq!(history["was"]["state"], "failed", "{entry:#}");
    // The next run executes it; the outcome keeps the history.
    std::fs::write(s.path().join("fixed"), "").unwrap();
    let (code, doc, _) = s.run(&shell, "ok");
    assert_eq!(code, 0, "{doc:#}");
    let entry = s.entry("flaky");
    assert_eq!(entry["state"], "ok", "{entry:#}");
    assert_eq!(entry["repairs"][0]["was"]["state"], "failed", "{entry:#}");
}

#[test]
fn a_migration_done_by_hand_is_recorded_ok_with_who_and_why_and_never_runs() {
    let (shell, s) = flaky("abort");
    let entry = repaired(&s, "--done", "bob", "applied by hand", "ok");
    assert!(entry["sha256"].is_string(), "{entry:#}");
    assert_contains_all(
        entry["message"].as_str().unwrap(),
        &["bob", "applied by hand"],
    );
    assert!(entry["repairs"][0]["was"].is_null(), "{entry:#}");
    let (code, doc, _) = s.run(&shell, "ok");
    assert_eq!(code, 0, "{doc:#}");
}

#[test]
fn a_corrupt_value_marked_to_run_again_keeps_the_value_in_the_history() {
    let (_shell, s) = flaky("abort");
    std::fs::write(
        s.ledger_path(),
        r#"{"format":"migration-ledger/v1","ledger":{"revision":1,"data":{"m.flaky":"not json"}},"lock":null,"lock_generation":0}"#,
    )
    .unwrap();
    let entry = repaired(&s, "--rerun", "carol", "restored by hand", "not-yet");
    assert_eq!(
        entry["repairs"][0]["was"]["corrupt"]["value"], "not json",
        "{entry:#}"
    );
}

#[test]
fn a_repair_that_would_change_nothing_or_names_no_migration_is_refused_and_writes_nothing() {
    let (shell, s) = flaky("warn");
    let before = std::fs::read(s.ledger_path()).unwrap();
    // No entry: the next run executes it already.
    let (code, doc, _) = repair(&s, "flaky", &["--rerun", "--by", "a", "--reason", "r"]);
    assert_eq!(code, 2, "{doc:#}");
    assert_contains_all(&doc.to_string(), &["nothing to run again"]);
    // A typo: named with the slug meant.
    let (code, doc, _) = repair(&s, "flakey", &["--done", "--by", "a", "--reason", "r"]);
    assert_eq!(code, 2, "{doc:#}");
    assert_contains_all(
        &doc.to_string(),
        &["no migration 'flakey'", "did you mean 'flaky'"],
    );
    // Without a reason: a usage error.
    let (code, _, stderr) = repair(&s, "flaky", &["--done", "--by", "a"]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(std::fs::read(s.ledger_path()).unwrap(), before);
    assert!(
        !s.path().join("ledger.json.lock").exists(),
        "a refused repair took the run lock"
    );
    // Already done.
    std::fs::write(s.path().join("fixed"), "").unwrap();
    assert_eq!(s.run(&shell, "ok").0, 0);
    let before = std::fs::read(s.ledger_path()).unwrap();
    let (code, doc, _) = repair(&s, "flaky", &["--done", "--by", "a", "--reason", "r"]);
    assert_eq!(code, 2, "{doc:#}");
    assert_contains_all(&doc.to_string(), &["already recorded ok"]);
    assert_eq!(std::fs::read(s.ledger_path()).unwrap(), before);
}

#[test]
fn status_and_only_name_the_slug_meant_when_one_is_close() {
    let (shell, s) = flaky("warn");
    assert_eq!(s.run(&shell, "ok").0, 0);
    let (code, doc, _) = json(&["status", "--ledger", &s.ledger(), "flakey"]);
    assert_eq!(code, 2, "{doc:#}");
    assert_contains_all(
        &doc.to_string(),
        &["no entry for 'flakey'", "did you mean 'flaky'"],
    );
    let (code, doc, stderr) = parse(
        s.command(&shell, "ok", "connection-refused")
            .args(["--only", "flakey"])
            .output()
            .unwrap(),
    );
    assert_eq!(code, 3, "{doc:#} {stderr}");
    assert_contains_all(&doc.to_string(), &["ONLY=flakey", "did you mean 'flaky'"]);
}
