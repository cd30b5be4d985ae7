//! An absent ledger: a fresh install said loudly, or refused with
//! `--require-existing-ledger` / `MIGRATE_REQUIRE_EXISTING_LEDGER`
//! (CONTRACT.md §6.1), on the file ledger and on a ConfigMap of the test API
//! server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::{assert_first_problem, fields, file_spec, parse};
use migration_core::testing::fixtures::{ScratchTree, TreeBuilder};
use migration_core::{OnError, Tier};
use test_apiserver::TestApiServer;

/// One pre-apply script that leaves a mark beside the tree when it runs.
fn scratch_tree() -> ScratchTree {
    TreeBuilder::new()
        .script_with(
            Tier::PreApply,
            "a",
            OnError::Abort,
            &[],
            "echo ran >> \"$MIGRATION_TREE/../ran\"",
        )
        .manifest(&[("00001-v1", "a\n")])
        .scratch()
}

/// `migrate COMMAND ROOT --ledger SPEC EXTRA... --output json` on
/// `scratch`'s tree with `env` set and the guard's variable otherwise unset.
fn on_ledger(
    scratch: &ScratchTree,
    command: &str,
    spec: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (i32, serde_json::Value, String) {
    let mut cmd = common::migrate();
    cmd.arg(command)
        .arg(scratch.root())
        .args(["--ledger", spec])
        .args(extra)
        .args(["--output", "json"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    parse(cmd.output().unwrap())
}

#[test]
fn plan_and_run_refuse_a_missing_file_ledger_when_an_existing_one_is_required() {
    let scratch = scratch_tree();
    let path = scratch.file("mistyped-ledger.json");
    let spec = file_spec(&path);
    let by_flag = ["--require-existing-ledger"];
    for (command, extra, env) in [
        ("plan", &by_flag[..], &[][..]),
        ("run", &by_flag[..], &[][..]),
        (
            "plan",
            &[][..],
            &[("MIGRATE_REQUIRE_EXISTING_LEDGER", "1")][..],
        ),
        (
            "run",
            &[][..],
            &[("MIGRATE_REQUIRE_EXISTING_LEDGER", "true")][..],
        ),
    ] {
        let (code, doc, err) = on_ledger(&scratch, command, &spec, extra, env);
        assert_eq!(code, 3, "{command} {extra:?} {env:?}: {doc} {err}");
        assert_eq!(doc["error"], "refused");
        // The refusal names the ledger and why.
        assert_first_problem(&doc, &path.display().to_string());
        assert_first_problem(&doc, "no ledger exists");
        assert_first_problem(&doc, "fresh install");
        assert!(
            !path.exists(),
            "{command}: a refused command created the ledger"
        );
        assert!(!scratch.file("ran").exists(), "{command}: a script ran");
    }
}

#[test]
fn a_false_environment_value_leaves_the_guard_off() {
    let scratch = scratch_tree();
    let spec = file_spec(&scratch.file("ledger.json"));
    let off = [("MIGRATE_REQUIRE_EXISTING_LEDGER", "false")];
    let (code, doc, err) = on_ledger(&scratch, "plan", &spec, &[], &off);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["fresh_install"], true);
}

#[test]
fn a_fresh_install_is_announced_on_stderr_and_in_the_json_of_plan_and_run() {
    let scratch = scratch_tree();
    let path = scratch.file("ledger.json");
    let spec = file_spec(&path);
    let (code, plan, err) = on_ledger(&scratch, "plan", &spec, &["--tier", "pre-apply"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(plan["fresh_install"], true);
    let reason = plan["fresh_install_reason"].as_str().unwrap();
    assert!(reason.contains(&path.display().to_string()) && reason.contains("does not exist"));
    assert!(
        err.contains("FRESH INSTALL") && err.contains("--require-existing-ledger"),
        "plan's stderr: {err}"
    );

    let (code, run, err) = on_ledger(&scratch, "run", &spec, &[], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(run["fresh_install"], true);
    assert_eq!(run["fresh_install_reason"], reason);
    assert!(err.contains("FRESH INSTALL"), "run's stderr: {err}");
    assert!(
        !scratch.file("ran").exists(),
        "a fresh install runs nothing"
    );

    // Text mode says it on stderr too, where a hook Job's log shows it.
    let path2 = scratch.file("ledger2.json");
    let out = common::migrate()
        .arg("plan")
        .arg(scratch.root())
        .args(["--ledger", &file_spec(&path2)])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("FRESH INSTALL"));

    // The ledger exists now: neither the notice nor the field again.
    let (code, again, err) = on_ledger(&scratch, "plan", &spec, &[], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(again["fresh_install"], false);
    assert!(again["fresh_install_reason"].is_null());
    assert!(!err.contains("FRESH INSTALL"), "{err}");
}

#[test]
fn an_existing_ledger_passes_the_guard_and_its_migrations_run() {
    let scratch = scratch_tree();
    let spec = common::empty_file_ledger(&scratch.file("ledger.json"));
    let (code, doc, err) = on_ledger(&scratch, "run", &spec, &["--require-existing-ledger"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fields(&doc["results"], "outcome"), ["ok"]);
    assert!(scratch.file("ran").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_ledger_configmap_is_refused_when_an_existing_one_is_required() {
    let server = TestApiServer::start().await;
    let scratch = scratch_tree();
    let kc = common::kubeconfig_for(scratch.dir(), &server.url());
    let root = scratch.root();
    let run = |extra: &[&str]| {
        let ledger = "configmap:cozy-system/cozystack-version";
        let mut args = vec!["run", root.to_str().unwrap(), "--ledger", ledger];
        args.extend_from_slice(extra);
        common::json_on_cluster(&kc, &args)
    };
    let (code, doc, err) = run(&["--require-existing-ledger"]).await;
    assert_eq!(code, 3, "{doc} {err}");
    assert_first_problem(&doc, "cozy-system/cozystack-version");
    assert_first_problem(&doc, "no ledger exists");
    assert!(
        server
            .object("configmaps", "cozy-system", "cozystack-version")
            .is_none(),
        "a refused run created the ledger"
    );

    let (code, doc, err) = run(&[]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["fresh_install"], true);
    assert!(err.contains("FRESH INSTALL"), "{err}");
    assert!(
        server
            .object("configmaps", "cozy-system", "cozystack-version")
            .is_some()
    );
}
