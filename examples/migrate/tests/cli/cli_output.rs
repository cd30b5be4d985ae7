//! What `status`, `plan` and `run` tell a person, and the places where they
//! used to contradict themselves.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{Repo, assert_first_problem, json, migrate, text};

/// A repository with v1.0.0 (a, b) and v1.1.0 (c), all pre-apply, manifest generated.
fn released() -> Repo {
    Repo::released(&[
        ("v1.0.0", &[("pre-apply", "a"), ("pre-apply", "b")]),
        ("v1.1.0", &[("pre-apply", "c")]),
    ])
}

/// Writes a whole-document file ledger holding `data` and returns its spec.
fn ledger_with(dir: &tempfile::TempDir, data: serde_json::Value) -> String {
    let path = dir.path().join("ledger.json");
    let doc = serde_json::json!({"format": "migration-ledger/v1", "ledger": {"revision": 1, "data": data}, "lock": null, "lock_generation": 0});
    std::fs::write(&path, doc.to_string()).unwrap();
    common::file_spec(&path)
}

/// [`released`] with an existing, empty file ledger in a new directory
/// (kept alive by the returned guard), and the ledger's spec.
fn released_on_an_empty_ledger() -> (Repo, tempfile::TempDir, String) {
    let state = tempfile::tempdir().unwrap();
    let ledger = common::empty_file_ledger(&state.path().join("ledger.json"));
    (released(), state, ledger)
}

const FAILED: &str = r#"{"state":"failed","at":"2026-01-02T00:00:00Z","attempts":3,"reason":"exit-status","message":"first line of output\nsecond line\nkubectl: the server is unavailable"}"#;

#[test]
fn status_shows_attempted_but_unrecorded_slugs_and_corrupt_keys_first_and_counts_them() {
    let state = tempfile::tempdir().unwrap();
    let ledger = ledger_with(
        &state,
        serde_json::json!({
            "m.ok-one": r#"{"state":"ok","at":"2026-01-01T00:00:00Z","attempts":1}"#,
            "m.zz-failed": FAILED,
            "a.aborted": r#"{"count":2,"token":"t"}"#,
            "m.bad": "{",
        }),
    );
    let (code, doc, err) = json(&["status", "--ledger", &ledger]);
    assert_eq!(code, 0, "{err}");
    let order: Vec<(&str, &str)> = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["slug"].as_str().unwrap(), e["state"].as_str().unwrap()))
        .collect();
    assert_eq!(order, [("zz-failed", "failed"), ("ok-one", "ok")]);
    assert_eq!(doc["unrecorded"][0]["slug"], "aborted");
    assert_eq!(doc["unrecorded"][0]["state"], "unrecorded");
    assert_eq!(doc["unrecorded"][0]["attempts"], 2);
    assert_eq!(doc["unrecorded"].as_array().unwrap().len(), 1);
    assert_eq!(doc["corrupt"].as_array().unwrap().len(), 1);
    assert_eq!(doc["counts"]["failed"], 1);
    let (code, out, _) = text(&["status", "--ledger", &ledger]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].contains("1 corrupt") && lines[0].contains("1 unrecorded"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("CORRUPT m.bad"),
        "corrupt first: {out}"
    );
    assert!(lines[2].starts_with("SLUG"), "{out}");
    assert!(
        lines[4].starts_with("aborted ") && lines[4].contains("unrecorded"),
        "{out}"
    );
}

#[test]
fn status_of_one_slug_shows_the_entry_whole_with_its_failure_output() {
    let state = tempfile::tempdir().unwrap();
    let ledger = ledger_with(
        &state,
        serde_json::json!({"m.zz-failed": FAILED, "m.bad": "{"}),
    );
    let (code, doc, _) = json(&["status", "zz-failed", "--ledger", &ledger]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["state"], "failed");
    assert_eq!(doc["attempts"], 3);
    assert!(doc["message"].as_str().unwrap().contains("second line"));
    let (code, out, _) = text(&["status", "zz-failed", "--ledger", &ledger]);
    assert_eq!(code, 0);
    for needle in [
        "state:",
        "failed",
        "reason:",
        "exit-status",
        "output:",
        "  first line of output",
        "  second line",
        "  kubectl: the server is unavailable",
    ] {
        assert!(out.contains(needle), "{needle:?} in {out}");
    }
    let (code, doc, _) = json(&["status", "never-ran", "--ledger", &ledger]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "no entry for 'never-ran'");
    let (code, doc, _) = json(&["status", "bad", "--ledger", &ledger]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "'m.bad' is corrupt");
}

#[test]
fn plan_text_has_a_header_row_and_earlier_attempts_and_wide_names_seeded_and_skipped_slugs() {
    let repo = released();
    let state = tempfile::tempdir().unwrap();
    let ledger = ledger_with(
        &state,
        serde_json::json!({
            "m.a": r#"{"state":"ok","at":"2026-01-01T00:00:00Z","attempts":1}"#,
            "a.b": r#"{"count":2,"token":"t"}"#,
        }),
    );
    let tree = repo.tree();
    let tree = tree.to_str().unwrap();
    let (code, out, err) = text(&["plan", tree, "--ledger", &ledger]);
    assert_eq!(code, 0, "{err}");
    let header = out
        .lines()
        .find(|l| l.contains("SLUG"))
        .unwrap_or_else(|| panic!("{out}"));
    for column in ["SLUG", "TIER", "ON-ERROR", "BATCH", "ATTEMPTS"] {
        assert!(header.contains(column), "{column}: {out}");
    }
    let row = out
        .lines()
        .find(|l| l.contains(" b ") && l.contains("00001-v1.0.0"))
        .unwrap_or_else(|| panic!("{out}"));
    let attempts_at = header.find("ATTEMPTS").unwrap();
    assert_eq!(
        row[attempts_at..].split_whitespace().next(),
        Some("2"),
        "{out}"
    );
    assert!(
        out.contains("skipped: 1 recorded (--wide names them)"),
        "{out}"
    );
    let (code, doc, _) = repo.on_ledger("plan", &ledger, &[]);
    assert_eq!(code, 0);
    assert_eq!(doc["pending"][0]["slug"], "b");
    assert_eq!(doc["pending"][0]["attempts_before"], 2);
    let (_, wide, _) = text(&["plan", tree, "--ledger", &ledger, "--wide"]);
    assert!(
        wide.lines().any(|l| l.trim_start().starts_with("a ")
            && l.contains("recorded")
            && l.contains("ok")),
        "the skipped slug by name: {wide}"
    );
    let fresh = tempfile::tempdir().unwrap();
    let fresh = common::ledger_in(&fresh);
    let (_, seeded, _) = text(&["plan", tree, "--ledger", &fresh, "--wide"]);
    for slug in ["a", "b", "c"] {
        assert!(
            seeded
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{slug} "))
                    && l.contains("fresh-install")),
            "{slug} seeded by name: {seeded}"
        );
    }
}

#[test]
fn run_prints_n_of_total_progress_and_in_json_mode_one_json_object_per_stderr_line() {
    let (repo, _state, ledger) = released_on_an_empty_ledger();
    let tree = repo.tree();
    let tree = tree.to_str().unwrap();
    let out = migrate()
        .args(["run", tree, "--ledger", &ledger, "--output", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let (code, doc, _) = common::parse(out);
    assert_eq!(code, 0, "{doc} {stderr}");
    let events: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let starts: Vec<(u64, u64, &str)> = events
        .iter()
        .filter(|e| e["event"] == "start")
        .map(|e| {
            (
                e["n"].as_u64().unwrap(),
                e["total"].as_u64().unwrap(),
                e["slug"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(starts, [(1, 3, "a"), (2, 3, "b"), (3, 3, "c")]);
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "output" && e["slug"] == "b" && e["line"] == "b"),
        "{stderr}"
    );
    // Text mode: the same steps as lines.
    let state = tempfile::tempdir().unwrap();
    let ledger = common::empty_file_ledger(&state.path().join("ledger.json"));
    let (code, out, err) = text(&["run", tree, "--ledger", &ledger]);
    assert_eq!(code, 0, "{err}");
    for step in ["[1/3] running a", "[2/3] running b", "[3/3] running c"] {
        assert!(out.contains(step), "{step}: {out}");
    }
}

#[test]
fn only_re_running_a_changed_script_does_not_claim_it_is_not_re_run() {
    let (repo, _state, ledger) = released_on_an_empty_ledger();
    repo.succeeds("run", &ledger, &[]);
    let tree = repo.tree();
    let tree = tree.to_str().unwrap();
    repo.add("pre-apply", "a", "echo a, edited");
    let (_, plan, _) = text(&["plan", tree, "--ledger", &ledger, "--only", "a"]);
    assert!(
        plan.contains("a changed on disk") && plan.contains("it is re-run (ONLY)"),
        "{plan}"
    );
    assert!(!plan.contains("not re-run"), "{plan}");
    let (code, out, err) = text(&["run", tree, "--ledger", &ledger, "--only", "a"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("it is re-run now (ONLY)"), "{out}");
    assert!(!out.contains("not re-run"), "{out}");
    assert!(out.contains("[a] a, edited"), "it did re-run: {out}");
    // Without ONLY the warning stands.
    repo.add("pre-apply", "b", "echo b, edited");
    let (_, plan, _) = text(&["plan", tree, "--ledger", &ledger]);
    assert!(
        plan.contains("b changed on disk") && plan.contains("it is not re-run"),
        "{plan}"
    );
}

#[test]
fn the_refusal_for_a_retired_legacy_slug_names_a_release_and_says_it_once() {
    let repo = released();
    repo.write("legacy-map", "1 gone\n");
    let order = repo.tree().join("order.d");
    std::fs::write(order.join("00000-legacy"), "gone retired\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let ledger = ledger_with(&state, serde_json::json!({"version": "1"}));
    let (code, doc, _) = repo.on_ledger("plan", &ledger, &[]);
    assert_eq!(code, 3, "{doc}");
    let problem = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .find(|p| p.contains("'gone' was retired"))
        .unwrap_or_else(|| panic!("{doc}"));
    assert!(problem.contains("upgrade through v1.0.0"), "{problem}");
    assert_eq!(problem.matches("still ships").count(), 1, "{problem}");
}

#[test]
fn output_wide_and_yaml_and_v_mean_what_they_mean_to_kubectl() {
    let (repo, _state, _ledger) = released_on_an_empty_ledger();
    let tree = repo.tree();
    let tree = tree.to_str().unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let fresh = common::ledger_in(&fresh);
    // -o wide names each seeded slug, as --wide does.
    let (code, wide, stderr) = text(&["plan", tree, "--ledger", &fresh, "-o", "wide"]);
    assert_eq!(code, 0, "{stderr}");
    let (_, flag, _) = text(&["plan", tree, "--ledger", &fresh, "--wide"]);
    assert_eq!(wide, flag);
    // -v is log verbosity: the plain text, not the wide one.
    let (code, verbose, stderr) = text(&["plan", tree, "--ledger", &fresh, "-v", "4"]);
    assert_eq!(code, 0, "{stderr}");
    let (_, plain, _) = text(&["plan", tree, "--ledger", &fresh]);
    assert_eq!(verbose, plain);
    assert_ne!(plain, wide);
    // -o yaml is the JSON document, spelt as YAML.
    let (code, yaml, stderr) = text(&["plan", tree, "--ledger", &fresh, "-o", "yaml"]);
    assert_eq!(code, 0, "{stderr}");
    let (_, doc, _) = common::json(&["plan", tree, "--ledger", &fresh]);
    assert!(yaml.starts_with("---\n"), "{yaml}");
    for key in doc.as_object().unwrap().keys() {
        assert!(
            yaml.lines().any(|l| l.starts_with(&format!("{key}:"))),
            "{key} missing: {yaml}"
        );
    }
    // A failure is the error document in YAML too (a directory is no
    // file ledger).
    let not_a_file = tempfile::tempdir().unwrap();
    let spec = common::file_spec(not_a_file.path());
    let (code, yaml, _) = text(&["status", "--ledger", &spec, "-o", "yaml"]);
    assert_ne!(code, 0);
    assert!(
        yaml.contains("error:") && yaml.contains("problems:"),
        "{yaml}"
    );
}
