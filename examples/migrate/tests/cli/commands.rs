//! plan, status, seed-fresh, verify and new, through the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{Repo, assert_first_problem, fields, json, ledger_in, migrate, text};

/// A digest-pinned image reference.
const IMAGE: &str = "img@sha256:0000000000000000000000000000000000000000000000000000000000000001";

/// A repository with v1.0.0 (a, b) and v1.1.0 (c), manifest generated.
fn released() -> Repo {
    Repo::released(&[
        ("v1.0.0", &[("pre-apply", "a"), ("background", "b")]),
        ("v1.1.0", &[("pre-apply", "c")]),
    ])
}

/// The document of `migrate COMMAND TREE EXTRA...`, which must succeed
/// rendering a ConfigMap.
fn rendered_configmap(command: &str, tree: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![command, tree.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (code, doc, err) = json(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["kind"], "ConfigMap", "{doc}");
    doc
}

#[test]
fn plan_on_a_fresh_cluster_seeds_and_runs_nothing_then_writes_nothing() {
    let repo = released();
    let state = tempfile::tempdir().unwrap();
    let doc = repo.succeeds("plan", &ledger_in(&state), &[]);
    assert_eq!(doc["fresh_install"], true);
    assert_eq!(doc["seed"].as_array().unwrap().len(), 3);
    assert!(doc["pending"].as_array().unwrap().is_empty());
    assert!(
        !state.path().join("ledger.json").exists(),
        "plan is a dry run"
    );
}

#[test]
fn plan_lists_pending_in_order_with_what_the_runner_needs() {
    let repo = released();
    let state = tempfile::tempdir().unwrap();
    common::empty_file_ledger(&state.path().join("ledger.json"));
    let doc = repo.succeeds("plan", &ledger_in(&state), &["--tier", "pre-apply"]);
    assert_eq!(fields(&doc["pending"], "slug"), ["a", "c"]);
    assert_eq!(doc["pending"][1]["batch"], "00002-v1.1.0");
    assert_eq!(doc["pending"][1]["path"], "pre-apply/c");
    assert_eq!(doc["pending"][1]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(
        doc["skipped"][0],
        serde_json::json!({"slug": "b", "reason": "other-tier"})
    );
}

#[test]
fn a_refused_plan_exits_3_naming_every_problem() {
    let repo = released();
    repo.add("pre-apply", "stray", "echo not in the manifest");
    let state = tempfile::tempdir().unwrap();
    let (code, doc, _) = repo.on_ledger("plan", &ledger_in(&state), &[]);
    assert_eq!(code, 3);
    common::assert_error(
        &doc,
        "refused",
        "'stray' is on disk but in no manifest batch",
    );
}

#[test]
fn a_tree_that_does_not_load_exits_2_naming_the_file() {
    let repo = released();
    repo.write("pre-apply/broken", "#!/bin/sh\n");
    let (code, doc, _) = repo.on_ledger("plan", "memory:", &[]);
    assert_eq!(code, 2);
    assert_first_problem(&doc, "pre-apply/broken");
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, err) = text(&["plan", "x", "--ledger", "s3:bucket"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown backend"), "{err}");
    let (code, _, err) = text(&[
        "plan",
        "x",
        "--ledger",
        "memory:",
        "--only",
        "../../etc/passwd",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("position 0"), "{err}");
}

#[test]
fn seed_fresh_creates_the_ledger_once_and_refuses_an_existing_one() {
    let repo = released();
    let state = tempfile::tempdir().unwrap();
    let doc = repo.succeeds("seed-fresh", &ledger_in(&state), &[]);
    assert_eq!(doc["seeded"], 3);
    let (code, doc, _) = repo.on_ledger("seed-fresh", &ledger_in(&state), &[]);
    assert_eq!(code, 3, "{doc}");
    let (_, status, _) = json(&["status", "--ledger", &ledger_in(&state)]);
    assert_eq!(status["counts"]["skipped-fresh-install"], 3);
}

#[test]
fn seed_fresh_renders_a_configmap_a_chart_can_ship() {
    let repo = released();
    let tree = repo.tree();
    let render = [
        "--render",
        "configmap",
        "--namespace",
        "ns",
        "--name",
        "led",
    ];
    let doc = rendered_configmap("seed-fresh", &tree, &render);
    assert_eq!(doc["metadata"]["namespace"], "ns");
    let data = doc["data"].as_object().unwrap();
    assert_eq!(data.keys().filter(|k| k.starts_with("m.")).count(), 3);
    let snapshot = migration_core::LedgerSnapshot::from_raw_data(
        data.iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())),
        None,
    );
    let entry = snapshot
        .entry(&migration_core::Slug::parse("c").unwrap())
        .unwrap();
    assert_eq!(entry.state, migration_core::EntryState::SkippedFreshInstall);
    assert_eq!(entry.batch.as_deref(), Some("00002-v1.1.0"));
    let yaml = migrate()
        .args([
            "seed-fresh",
            repo.tree().to_str().unwrap(),
            "--render",
            "configmap",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&yaml.stdout);
    assert!(
        text.starts_with("apiVersion: v1\nkind: ConfigMap\n"),
        "{text}"
    );
    assert!(
        text.contains("  'm.a': '{\"s\":\"skipped-fresh-install\""),
        "{text}"
    );
}

#[test]
fn verify_fails_on_missing_entries_and_since_rejects_a_fresh_install() {
    let repo = released();
    let state = tempfile::tempdir().unwrap();
    let ledger = ledger_in(&state);
    let (code, doc, _) = repo.on_ledger("verify", &ledger, &[]);
    assert_eq!(code, 5);
    assert_eq!(doc["problems"].as_array().unwrap().len(), 3);
    repo.on_ledger("seed-fresh", &ledger, &[]);
    let (code, doc, _) = repo.on_ledger("verify", &ledger, &[]);
    assert_eq!((code, &doc["ok"]), (0, &serde_json::json!(true)));
    let (code, doc, _) = repo.on_ledger("verify", &ledger, &["--since", "v1.0.0"]);
    assert_eq!(code, 5, "{doc}");
    let problem = doc["problems"][0].as_str().unwrap();
    assert!(
        problem.contains("'c'") && problem.contains("not 'ok'"),
        "{problem}"
    );
}

#[test]
fn status_lists_failures_first() {
    let state = tempfile::tempdir().unwrap();
    let ok = r#"{\"state\":\"ok\",\"at\":\"2026-01-01T00:00:00Z\",\"attempts\":1}"#;
    let failed = r#"{\"state\":\"failed\",\"at\":\"2026-01-02T00:00:00Z\",\"attempts\":3,\"reason\":\"exit-status\",\"message\":\"boom\"}"#;
    let doc = format!(
        r#"{{"format":"migration-ledger/v1","ledger":{{"revision":1,"data":{{"version":"7","m.a":"{ok}","m.z":"{failed}","m.bad":"{{"}}}},"lock":null,"lock_generation":0}}"#
    );
    std::fs::write(state.path().join("ledger.json"), doc).unwrap();
    let (code, doc, err) = json(&["status", "--ledger", &ledger_in(&state)]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["version"], 7);
    assert_eq!(doc["entries"][0]["slug"], "z");
    assert_eq!(doc["entries"][0]["reason"], "exit-status");
    assert_eq!(doc["entries"][1]["slug"], "a");
    assert_eq!(doc["corrupt"][0]["key"], "m.bad");
    let text = migrate()
        .args(["status", "--ledger", &ledger_in(&state)])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    let lines: Vec<&str> = text.lines().collect();
    // Corrupt keys come first (issue 16), then the table.
    assert!(lines[1].starts_with("CORRUPT m.bad"), "{text}");
    assert!(lines[2].starts_with("SLUG"), "{text}");
    assert!(
        lines[3].starts_with("z ") && lines[3].contains("exit-status: boom"),
        "{text}"
    );
    assert!(
        !text.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );
}

#[test]
fn status_of_a_missing_ledger_says_so() {
    let state = tempfile::tempdir().unwrap();
    let (code, doc, _) = json(&["status", "--ledger", &ledger_in(&state)]);
    assert_eq!((code, &doc["exists"]), (0, &serde_json::json!(false)));
}

#[test]
fn an_unreadable_ledger_file_exits_1() {
    let state = tempfile::tempdir().unwrap();
    std::fs::write(state.path().join("ledger.json"), "{broken").unwrap();
    let (code, doc, _) = json(&["status", "--ledger", &ledger_in(&state)]);
    assert_eq!(code, 1);
    assert_first_problem(&doc, "unreadable");
}

#[test]
fn new_scaffolds_a_lint_clean_pair_and_refuses_a_slug_that_ever_shipped() {
    let repo = released();
    std::fs::remove_dir_all(repo.tree().join("order.d")).unwrap();
    let tree = repo.tree();
    let tree = tree.to_str().unwrap();
    let (code, doc, err) = json(&[
        "new",
        tree,
        "relabel-pvcs",
        "--tier",
        "background",
        "--on-error",
        "warn",
    ]);
    assert_eq!(code, 0, "{err}");
    let script = std::fs::read_to_string(doc["script"].as_str().unwrap()).unwrap();
    assert!(script.contains("tier=background") && script.contains("on-error=warn"));
    assert!(std::path::Path::new(doc["test"].as_str().unwrap()).is_file());
    // The scaffold follows the conventions lint enforces.
    let findings = json(&["lint", tree]).1;
    let about_new: Vec<_> = fields(&findings["findings"], "file")
        .into_iter()
        .filter(|file| file.contains("relabel-pvcs"))
        .collect();
    assert!(about_new.is_empty(), "{about_new:?}");
    // Exists now.
    assert_eq!(json(&["new", tree, "relabel-pvcs"]).0, 2);
    // Retired: deleted from disk but shipped in v1.0.0.
    repo.remove("pre-apply", "a");
    let (code, doc, _) = json(&["new", tree, "a"]);
    assert_eq!(code, 2);
    assert_first_problem(&doc, "git history");
}

#[test]
fn the_index_lists_exactly_the_manifests_runnable_background_slugs_in_order() {
    let repo = Repo::new();
    repo.add("pre-apply", "not-background", "echo p");
    repo.write("revoked", "bad\n");
    let background = ["zeta", "alpha", "gone", "bad"].map(|slug| ("background", slug));
    repo.release_with("v1.0.0", &background);
    repo.remove("background", "gone");
    repo.release_with("v1.1.0", &[("background", "later")]);
    let (code, _, err) = repo.manifest();
    assert_eq!(code, 0, "{err}");
    let tree = repo.tree();
    let image = ["--image", IMAGE, "--tree-path", "/m"];
    let cm = rendered_configmap("index", &tree, &image);
    assert_eq!(cm["metadata"]["name"], "cozystack-migrations-index");
    let slugs: Vec<&str> = cm["data"]["slugs"].as_str().unwrap().lines().collect();
    // The manifest's background lines, in order, minus the retired one.
    let manifest_order: Vec<String> = std::fs::read_dir(tree.join("order.d"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect::<std::collections::BTreeSet<_>>()
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    let expected: Vec<&str> = manifest_order
        .iter()
        .filter(|l| !l.ends_with(" retired"))
        .map(String::as_str)
        .filter(|s| tree.join("background").join(s).exists())
        .collect();
    assert_eq!(slugs, expected);
    assert_eq!(slugs, ["alpha", "bad", "zeta", "later"]);
    assert_eq!(cm["data"]["revoked"], "bad\n");
    assert_eq!(cm["data"]["image"], IMAGE);
    assert_eq!(cm["data"]["tree"], "/m");
    // Each slug's batch, so the operator's give-up entry records what a runner's would.
    let batches: Vec<&str> = cm["data"]["batches"].as_str().unwrap().lines().collect();
    assert_eq!(
        batches,
        [
            "alpha 00001-v1.0.0",
            "bad 00001-v1.0.0",
            "zeta 00001-v1.0.0",
            "later 00002-v1.1.0"
        ]
    );
}
