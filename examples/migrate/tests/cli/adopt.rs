//! `migrate adopt --legacy-version N`: the ledger of an existing cluster of a
//! numbered runner, from its integer (CONTRACT.md §6.2).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{assert_first_problem, fields, file_spec, json, on_ledger, strings};
use migration_core::testing::fixtures::{ScratchTree, TreeBuilder};
use migration_core::{OnError, Tier};
use test_apiserver::TestApiServer;

/// Legacy integers 1..3 became `one`, `two`, `three`; `fresh` shipped
/// after the move to slugs. Each script leaves its name beside the tree.
fn scratch_tree() -> ScratchTree {
    let mark = |name: &str| format!("echo {name} >> \"$MIGRATION_TREE/../ran\"");
    TreeBuilder::new()
        .script_with(Tier::PreApply, "one", OnError::Abort, &[], &mark("one"))
        .script_with(Tier::PreApply, "two", OnError::Abort, &[], &mark("two"))
        .script_with(Tier::PreApply, "three", OnError::Abort, &[], &mark("three"))
        .script_with(Tier::PreApply, "fresh", OnError::Abort, &[], &mark("fresh"))
        .legacy_map("1 one\n2 two\n3 three\n")
        .manifest(&[
            ("00000-legacy", "one\ntwo\nthree\n"),
            ("00001-v2.0.0", "fresh\n"),
        ])
        .scratch()
}

/// `scratch` and the `--ledger` spec of its file ledger `ledger.json` (not
/// created).
fn with_file_ledger(scratch: ScratchTree) -> (ScratchTree, String) {
    let spec = file_spec(&scratch.file("ledger.json"));
    (scratch, spec)
}

/// `migrate adopt ROOT --legacy-version VERSION --ledger SPEC [EXTRA...]`.
fn adopt(
    root: &std::path::Path,
    version: &str,
    spec: &str,
    extra: &[&str],
) -> (i32, serde_json::Value, String) {
    let root = root.to_str().unwrap();
    let mut args = vec!["adopt", root, "--legacy-version", version, "--ledger", spec];
    args.extend_from_slice(extra);
    json(&args)
}

/// The first `migrate run` after an adoption, which must find the ledger.
fn first_run(scratch: &ScratchTree, spec: &str) -> (i32, serde_json::Value, String) {
    on_ledger("run", &scratch.root(), spec, &["--require-existing-ledger"])
}

fn status(spec: &str) -> serde_json::Value {
    let (code, doc, err) = json(&["status", "--ledger", spec]);
    assert_eq!(code, 0, "{err}");
    doc
}

#[test]
fn adopting_creates_legacy_entries_below_the_version_and_the_first_run_runs_the_rest() {
    let (scratch, spec) = with_file_ledger(scratch_tree());
    let (code, doc, err) = adopt(&scratch.root(), "3", &spec, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["outcome"], "created");
    assert_eq!(strings(&doc["legacy"]), ["one", "two"]);
    let ledger = status(&spec);
    assert_eq!(fields(&ledger["entries"], "state"), ["legacy", "legacy"]);

    let (code, run, err) = first_run(&scratch, &spec);
    assert_eq!(code, 0, "{err}");
    assert_eq!(run["fresh_install"], false);
    assert_eq!(fields(&run["results"], "slug"), ["three", "fresh"]);
    assert_eq!(scratch.lines("ran"), ["three", "fresh"]);
}

#[test]
fn adopting_twice_is_a_no_op_and_a_ledger_with_other_entries_is_refused() {
    let (scratch, spec) = with_file_ledger(scratch_tree());
    let adopt_version = |version: &str| adopt(&scratch.root(), version, &spec, &[]);
    assert_eq!(adopt_version("4").0, 0);
    let (code, doc, err) = adopt_version("4");
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["outcome"], "already-adopted");
    assert_eq!(strings(&doc["legacy"]), ["one", "two", "three"]);

    // Another integer would mark other migrations applied.
    let (code, doc, _) = adopt_version("2");
    assert_eq!(code, 3, "{doc}");
    assert_first_problem(&doc, "not exactly this adoption");

    // Once the engine ran, the ledger is the engine's.
    assert_eq!(on_ledger("run", &scratch.root(), &spec, &[]).0, 0);
    let (code, doc, _) = adopt_version("4");
    assert_eq!(code, 3, "{doc}");
    assert_first_problem(&doc, "ledger.json");
    assert_first_problem(&doc, "never rewrites");
    assert_eq!(
        fields(&status(&spec)["entries"], "state"),
        ["ok", "legacy", "legacy", "legacy"],
        "a refused adoption changed the ledger"
    );
}

#[test]
fn a_version_beyond_the_legacy_map_or_a_tree_without_one_is_bad_input() {
    let (scratch, spec) = with_file_ledger(scratch_tree());
    let (code, doc, _) = adopt(&scratch.root(), "9", &spec, &[]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "legacy-map ends at 3");
    assert_first_problem(&doc, "4..8");
    assert!(!scratch.file("ledger.json").exists());

    let bare = TreeBuilder::new()
        .pre("a")
        .manifest(&[("00001-v1", "a\n")])
        .scratch();
    let (code, doc, _) = adopt(&bare.root(), "1", &spec, &[]);
    assert_eq!(code, 2, "{doc}");
    assert_first_problem(&doc, "no legacy-map");
}

#[test]
fn a_numbered_runners_version_file_is_refused_as_a_file_ledger_naming_adopt() {
    let scratch = scratch_tree();
    let path = scratch.file("version.json");
    std::fs::write(&path, r#"{"version":"4"}"#).unwrap();
    let spec = file_spec(&path);
    for args in [
        vec!["status", "--ledger", &spec],
        vec!["plan", scratch.root().to_str().unwrap(), "--ledger", &spec],
    ] {
        let (code, doc, _) = json(&args);
        assert_ne!(code, 0, "{args:?}: {doc}");
        assert_first_problem(&doc, "numbered runner");
        assert_first_problem(&doc, "migrate adopt --legacy-version 4");
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        r#"{"version":"4"}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_holding_only_the_version_is_completed_and_another_version_refused() {
    let server = TestApiServer::start().await;
    let scratch = scratch_tree();
    let kc = common::kubeconfig_for(scratch.dir(), &server.url());
    let root = scratch.root().to_str().unwrap().to_owned();
    server
        .put_object(
            "configmaps",
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cozystack-version", "namespace": "cozy-system",
                    "labels": {"platform": "keep-me"}},
                "data": {"version": "3"}}),
        )
        .unwrap();
    let adopt = |version: &str| {
        let ledger = "configmap:cozy-system/cozystack-version";
        let args = [
            "adopt",
            &root,
            "--legacy-version",
            version,
            "--ledger",
            ledger,
        ];
        common::json_on_cluster(&kc, &args)
    };
    let (code, doc, _) = adopt("2").await;
    assert_eq!(code, 3, "{doc}");
    assert_first_problem(&doc, "version is 3");

    let (code, doc, err) = adopt("3").await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["outcome"], "seeded");
    let cm = server
        .object("configmaps", "cozy-system", "cozystack-version")
        .unwrap();
    assert_eq!(cm["data"]["version"], "3");
    assert_eq!(cm["metadata"]["labels"]["platform"], "keep-me");
    for slug in ["one", "two"] {
        let entry: serde_json::Value =
            serde_json::from_str(cm["data"][format!("m.{slug}")].as_str().unwrap()).unwrap();
        assert_eq!(entry["s"], "legacy", "{slug}");
    }
    assert!(cm["data"].get("m.three").is_none());
}

/// Slot 2 diverged: this tree holds `two-main`, another line shipped
/// `two-backport` at the same integer.
fn diverged_tree() -> ScratchTree {
    let mark = |name: &str| format!("echo {name} >> \"$MIGRATION_TREE/../ran\"");
    TreeBuilder::new()
        .script_with(Tier::PreApply, "one", OnError::Abort, &[], &mark("one"))
        .script_with(
            Tier::PreApply,
            "two-main",
            OnError::Abort,
            &[],
            &mark("two-main"),
        )
        .script_with(Tier::PreApply, "three", OnError::Abort, &[], &mark("three"))
        .legacy_map("1 one\n2 two-main others=two-backport\n3 three\n")
        .manifest(&[("00000-legacy", "one\ntwo-main\nthree\n")])
        .scratch()
}

/// `migrate adopt` of version 3 with these `--ran` slugs, then (when it
/// succeeded) the first run: (adopt's exit, its document, the run's slugs).
fn adopt_then_run(scratch: &ScratchTree, ran: &[&str]) -> (i32, serde_json::Value, Vec<String>) {
    let spec = file_spec(&scratch.file("ledger.json"));
    let ran: Vec<&str> = ran.iter().flat_map(|slug| ["--ran", slug]).collect();
    let (code, doc, _) = adopt(&scratch.root(), "3", &spec, &ran);
    if code != 0 {
        return (code, doc, Vec::new());
    }
    let (run_code, run, err) = first_run(scratch, &spec);
    assert_eq!(run_code, 0, "{err}");
    assert_eq!(fields(&run["results"], "slug"), scratch.lines("ran"));
    (code, doc, scratch.lines("ran"))
}

#[test]
fn adopting_past_a_diverged_slot_nobody_answered_runs_this_trees_content_and_its_entry_says_why() {
    let scratch = diverged_tree();
    let (code, doc, ran) = adopt_then_run(&scratch, &[]);
    assert_eq!(
        code, 0,
        "the integer cannot say which content ran, nobody must: {doc}"
    );
    assert_eq!(strings(&doc["legacy"]), ["one"]);
    assert_eq!(fields(&doc["reruns"], "slug"), ["two-main"]);
    assert_eq!(ran, ["two-main", "three"]);
    let spec = file_spec(&scratch.file("ledger.json"));
    let ledger = status(&spec);
    let entry = common::by_slug(&ledger["entries"], "two-main").expect("two-main's entry");
    let message = entry["message"].as_str().unwrap_or_default();
    assert!(
        entry["state"] == "ok"
            && message.starts_with("diverged-legacy-rerun:")
            && message.contains("two-backport"),
        "the entry says why it ran: {entry}"
    );
}

#[test]
fn adopting_with_a_wrong_ran_is_bad_input_and_the_other_content_ran_runs_this_trees_once() {
    let scratch = diverged_tree();
    // A slug the tree says did not run (at or above the version) is bad
    // input, and so are two contents of one slot.
    assert_eq!(adopt_then_run(&scratch, &["three"]).0, 2);
    assert_eq!(adopt_then_run(&scratch, &["two-main", "two-backport"]).0, 2);
    assert!(
        !scratch.file("ledger.json").exists(),
        "a refused adoption writes nothing"
    );

    // The backport ran here: it is recorded, and this tree's content of the
    // slot is an ordinary migration the first run executes.
    let (code, doc, ran) = adopt_then_run(&scratch, &["two-backport"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(strings(&doc["legacy"]), ["one", "two-backport"]);
    assert!(strings(&doc["reruns"]).is_empty(), "{doc}");
    assert_eq!(ran, ["two-main", "three"]);
}

#[test]
fn adopting_with_this_trees_content_of_a_diverged_slot_records_it_and_runs_only_the_rest() {
    let scratch = diverged_tree();
    let (code, doc, ran) = adopt_then_run(&scratch, &["two-main"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(strings(&doc["legacy"]), ["one", "two-main"]);
    assert_eq!(ran, ["three"]);
}

#[test]
fn a_ran_naming_the_only_content_of_a_slot_below_the_version_is_consistent_and_accepted() {
    let scratch = diverged_tree();
    let (code, doc, ran) = adopt_then_run(&scratch, &["one"]);
    assert_eq!(code, 0, "slot 1 only ever held 'one', which ran: {doc}");
    assert_eq!(strings(&doc["legacy"]), ["one"]);
    assert_eq!(fields(&doc["reruns"], "slug"), ["two-main"]);
    assert_eq!(ran, ["two-main", "three"]);
}

#[test]
fn a_ran_the_tree_does_not_list_says_what_would_express_a_pre_release_content() {
    let scratch = diverged_tree();
    let spec = file_spec(&scratch.file("ledger.json"));
    let (code, doc, err) = adopt(&scratch.root(), "3", &spec, &["--ran", "2-v1-6-0-rc-1"]);
    assert_eq!(code, 2, "{doc}");
    let text = format!("{doc}{err}");
    assert!(
        text.contains("2-v1-6-0-rc-1") && text.contains("--count-prereleases"),
        "{text}"
    );
    assert!(!scratch.file("ledger.json").exists());
}

/// [`scratch_tree`] whose `three` and `fresh`, pending after an adoption at
/// 3, name the image's shell (`#!/usr/bin/dash` or wherever dash lives), as
/// a tree written for an alpine image names `#!/usr/bin/busybox ash`.
fn image_shell_tree(shebang: &str) -> ScratchTree {
    let mark = |name: &str| format!("echo {name} >> \"$MIGRATION_TREE/../ran\"");
    let script = |name: &str| {
        migration_core::testing::fixtures::script_text(
            Tier::PreApply,
            OnError::Abort,
            &[],
            &mark(name),
        )
        .replacen("#!/bin/sh", &format!("#!{shebang}"), 1)
    };
    TreeBuilder::new()
        .script_with(Tier::PreApply, "one", OnError::Abort, &[], &mark("one"))
        .script_with(Tier::PreApply, "two", OnError::Abort, &[], &mark("two"))
        .raw_script(Tier::PreApply, "three", script("three").as_bytes())
        .raw_script(Tier::PreApply, "fresh", script("fresh").as_bytes())
        .legacy_map("1 one\n2 two\n3 three\n")
        .manifest(&[
            ("00000-legacy", "one\ntwo\nthree\n"),
            ("00001-v2.0.0", "fresh\n"),
        ])
        .scratch()
}

#[test]
fn adopting_a_tree_whose_scripts_name_the_images_shell_takes_the_interpreters_run_is_given() {
    let dash = common::shells::dash().shebang;
    let (scratch, spec) = with_file_ledger(image_shell_tree(&dash));

    // Without it, adoption plans with the default shells and refuses, writing nothing.
    let (code, doc, _) = adopt(&scratch.root(), "3", &spec, &[]);
    assert_eq!(code, 3, "{doc}");
    assert_first_problem(&doc, &format!("'#!{dash}' is not an allowed interpreter"));
    assert!(!scratch.file("ledger.json").exists());

    let allow = ["--allow-interpreter", dash.as_str()];
    let (code, doc, err) = adopt(&scratch.root(), "3", &spec, &allow);
    assert_eq!(code, 0, "{err}\n{doc}");
    assert_eq!(strings(&doc["legacy"]), ["one", "two"]);
    // `plan` is given them as run is: refused for the defaults, planned with them.
    let (code, plan, _) = on_ledger("plan", &scratch.root(), &spec, &[]);
    assert_eq!(code, 3, "{plan}");
    let (code, plan, err) = on_ledger("plan", &scratch.root(), &spec, &allow);
    assert_eq!(code, 0, "{err}\n{plan}");
    let pending: Vec<&str> = plan["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["slug"].as_str().unwrap())
        .collect();
    assert_eq!(pending, ["three", "fresh"]);
    let (code, run, err) = on_ledger("run", &scratch.root(), &spec, &allow);
    assert_eq!(code, 0, "{err}\n{run}");
    assert_eq!(scratch.lines("ran"), ["three", "fresh"]);

    // The value is checked as run checks it.
    let root = scratch.root();
    let args = ["adopt", root.to_str().unwrap(), "--legacy-version", "3"];
    let (code, _, err) = common::text(
        &[
            &args[..],
            &["--ledger", &spec, "--allow-interpreter", "dash"],
        ]
        .concat(),
    );
    assert_eq!(code, 2, "{err}");
    common::assert_contains_all(&err, &["--allow-interpreter", "not an interpreter"]);
}
