//! An absent ledger (CONTRACT.md §6.1): `run` refuses it unless told this is
//! a new cluster (`--fresh-install` / `MIGRATE_FRESH_INSTALL`), `plan` shows
//! the fresh install and says what `run` needs, and
//! `--require-existing-ledger` / `MIGRATE_REQUIRE_EXISTING_LEDGER` refuses it
//! in both; on the file ledger, on a ConfigMap of the test API server, and on
//! a real API server when `MIGRATE_TEST_KUBECONFIG` names one.

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
/// `scratch`'s tree with `env` set and the guard's variables otherwise unset.
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

/// Asserts that a refused command (`what`) created no ledger at `path`
/// and ran no script of `scratch`.
fn assert_refused_untouched(scratch: &ScratchTree, path: &std::path::Path, what: &str) {
    assert!(
        !path.exists(),
        "{what}: a refused command created the ledger"
    );
    assert!(!scratch.file("ran").exists(), "{what}: a script ran");
}

/// The scratch tree and a file ledger `name` beside it not created yet:
/// its path and `--ledger` spec.
fn no_ledger_at(name: &str) -> (ScratchTree, std::path::PathBuf, String) {
    let scratch = scratch_tree();
    let path = scratch.file(name);
    let spec = file_spec(&path);
    (scratch, path, spec)
}
#[test]
fn run_refuses_a_missing_file_ledger_by_default_naming_the_path_and_the_fresh_install_flag() {
    let (scratch, path, spec) = no_ledger_at("mistyped-ledger.json");
    let background = ["--tier", "background"];
    let dry_run = ["--dry-run"];
    let env_off = [("MIGRATE_FRESH_INSTALL", "false")];
    for (extra, env) in [
        (&[][..], &[][..]),
        (&background[..], &[][..]),
        (&dry_run[..], &[][..]),
        (&[][..], &env_off[..]),
    ] {
        let (code, doc, err) = on_ledger(&scratch, "run", &spec, extra, env);
        assert_eq!(code, 3, "run {extra:?} {env:?}: {doc} {err}");
        assert_eq!(doc["error"], "refused");
        // The refusal names the ledger, what is wrong, and both ways on.
        assert_first_problem(&doc, &path.display().to_string());
        assert_first_problem(&doc, "no ledger exists");
        assert_first_problem(&doc, "--fresh-install");
        assert_first_problem(&doc, "MIGRATE_FRESH_INSTALL");
        assert_refused_untouched(&scratch, &path, &format!("run {extra:?}"));
        assert!(
            !err.contains("FRESH INSTALL"),
            "a refused run is no fresh install: {err}"
        );
    }

    // Text mode says the same on stderr, where a Job's log shows it.
    let out = common::migrate()
        .arg("run")
        .arg(scratch.root())
        .args(["--ledger", &spec])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&path.display().to_string()) && err.contains("--fresh-install"),
        "{err}"
    );
    assert!(!path.exists());
}

#[test]
fn run_with_fresh_install_seeds_a_missing_ledger_and_runs_nothing() {
    let by_flag = ["--fresh-install"];
    for (extra, env) in [
        (&by_flag[..], &[][..]),
        (&[][..], &[("MIGRATE_FRESH_INSTALL", "true")][..]),
        (&[][..], &[("MIGRATE_FRESH_INSTALL", "1")][..]),
    ] {
        let (scratch, path, spec) = no_ledger_at("ledger.json");
        let (code, doc, err) = on_ledger(&scratch, "run", &spec, extra, env);
        assert_eq!(code, 0, "run {extra:?} {env:?}: {doc} {err}");
        assert_eq!(doc["fresh_install"], true);
        assert_eq!(doc["seeded"], 1);
        assert!(err.contains("FRESH INSTALL"), "run's stderr: {err}");
        let stored = std::fs::read_to_string(&path).expect("the fresh install wrote the ledger");
        assert!(stored.contains("skipped-fresh-install"), "{stored}");
        assert!(
            !scratch.file("ran").exists(),
            "a fresh install runs nothing"
        );

        // The ledger exists now: a plain run is an upgrade, not refused.
        let (code, again, err) = on_ledger(&scratch, "run", &spec, &[], &[]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(again["fresh_install"], false);
    }
}

#[test]
fn plan_shows_the_fresh_install_and_says_that_run_needs_fresh_install() {
    let (scratch, path, spec) = no_ledger_at("ledger.json");
    let (code, plan, err) = on_ledger(&scratch, "plan", &spec, &[], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(plan["fresh_install"], true);
    assert_eq!(fields(&plan["seed"], "kind"), ["fresh-install"]);
    let warnings = plan["warnings"].to_string();
    assert!(
        warnings.contains("migrate run") && warnings.contains("--fresh-install"),
        "plan's warnings: {warnings}"
    );
    assert!(
        err.contains("FRESH INSTALL") && err.contains("--fresh-install"),
        "plan's stderr: {err}"
    );
    assert!(!path.exists(), "plan wrote the ledger");

    // Told it is a new cluster, plan has nothing to warn about run.
    let (code, plan, err) = on_ledger(&scratch, "plan", &spec, &["--fresh-install"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(plan["fresh_install"], true);
    assert!(
        !plan["warnings"].to_string().contains("--fresh-install"),
        "{plan}"
    );

    // `run --dry-run --fresh-install` shows the same fresh install.
    let (code, dry, err) = on_ledger(
        &scratch,
        "run",
        &spec,
        &["--dry-run", "--fresh-install"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(dry["fresh_install"], true);
    assert!(!path.exists(), "a dry run wrote the ledger");
}

#[test]
fn fresh_install_and_require_existing_ledger_together_are_bad_input() {
    let (scratch, path, spec) = no_ledger_at("ledger.json");
    for command in ["plan", "run"] {
        let (code, doc, err) = on_ledger(
            &scratch,
            command,
            &spec,
            &["--fresh-install", "--require-existing-ledger"],
            &[],
        );
        assert_eq!(code, 2, "{command}: {doc} {err}");
        assert!(!path.exists());
    }
}

#[test]
fn plan_and_run_refuse_a_missing_file_ledger_when_an_existing_one_is_required() {
    let (scratch, path, spec) = no_ledger_at("mistyped-ledger.json");
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
        assert_refused_untouched(&scratch, &path, command);
    }
}

#[test]
fn a_false_environment_value_leaves_the_plan_guard_off() {
    let scratch = scratch_tree();
    let spec = file_spec(&scratch.file("ledger.json"));
    let off = [("MIGRATE_REQUIRE_EXISTING_LEDGER", "false")];
    let (code, doc, err) = on_ledger(&scratch, "plan", &spec, &[], &off);
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["fresh_install"], true);
}

#[test]
fn a_fresh_install_is_announced_on_stderr_and_in_the_json_of_plan_and_run() {
    let (scratch, path, spec) = no_ledger_at("ledger.json");
    let (code, plan, err) = on_ledger(&scratch, "plan", &spec, &["--tier", "pre-apply"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(plan["fresh_install"], true);
    let reason = plan["fresh_install_reason"].as_str().unwrap();
    assert!(reason.contains(&path.display().to_string()) && reason.contains("does not exist"));
    assert!(err.contains("FRESH INSTALL"), "plan's stderr: {err}");

    let (code, run, err) = on_ledger(&scratch, "run", &spec, &["--fresh-install"], &[]);
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
    for extra in [
        &["--require-existing-ledger"][..],
        &[][..],
        &["--fresh-install"][..],
    ] {
        let scratch = scratch_tree();
        let spec = common::empty_file_ledger(&scratch.file("ledger.json"));
        let (code, doc, err) = on_ledger(&scratch, "run", &spec, extra, &[]);
        assert_eq!(code, 0, "{extra:?}: {err}");
        assert_eq!(fields(&doc["results"], "outcome"), ["ok"]);
        assert!(scratch.file("ran").exists());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_ledger_configmap_is_refused_by_default_and_seeded_with_fresh_install() {
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
    for refusing in [&[][..], &["--require-existing-ledger"][..]] {
        let (code, doc, err) = run(refusing).await;
        assert_eq!(code, 3, "{refusing:?}: {doc} {err}");
        assert_first_problem(&doc, "cozy-system/cozystack-version");
        assert_first_problem(&doc, "no ledger exists");
        assert_first_problem(&doc, "--fresh-install");
        assert!(
            server
                .object("configmaps", "cozy-system", "cozystack-version")
                .is_none(),
            "a refused run created the ledger"
        );
    }

    let (code, doc, err) = run(&["--fresh-install"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["fresh_install"], true);
    assert!(err.contains("FRESH INSTALL"), "{err}");
    assert!(
        server
            .object("configmaps", "cozy-system", "cozystack-version")
            .is_some()
    );
    assert!(
        !scratch.file("ran").exists(),
        "a fresh install runs nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_missing_ledger_configmap_is_refused_by_default_on_a_real_server() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use test_apiserver::real::{RealCluster, unique_name};
    let cluster = test_apiserver::or_skip!(
        RealCluster::from_env("a missing ledger ConfigMap refused by default").await
    );
    let ns = cluster.namespace().to_owned();
    cluster.ensure_namespace(&ns).await;
    let name = unique_name("fresh-guard");
    let spec = format!("configmap:{ns}/{name}");
    let scratch = scratch_tree();
    let root = scratch.root();
    let kc = cluster.kubeconfig().to_path_buf();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", root.to_str().unwrap(), "--ledger", &spec];
        args.extend_from_slice(extra);
        common::json_on_cluster(&kc, &args)
    };
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);

    let (code, doc, err) = run(&[]).await;
    assert_eq!(code, 3, "{doc} {err}");
    assert_first_problem(&doc, &format!("{ns}/{name}"));
    assert_first_problem(&doc, "--fresh-install");
    assert!(
        configmaps.get_opt(&name).await.unwrap().is_none(),
        "a refused run created the ledger"
    );

    let (code, doc, err) = run(&["--fresh-install"]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["fresh_install"], true);
    let stored = configmaps
        .get_opt(&name)
        .await
        .unwrap()
        .expect("the seeded ledger");
    assert!(
        stored
            .data
            .unwrap_or_default()
            .values()
            .any(|v| v.contains("skipped-fresh-install")),
        "the ConfigMap holds no skipped-fresh-install entry"
    );
    assert!(
        !scratch.file("ran").exists(),
        "a fresh install runs nothing"
    );
    let leases = Api::namespaced(cluster.client(), &ns);
    test_apiserver::real::delete_with_lock(&configmaps, &leases, &name).await;
}

#[test]
fn a_fresh_install_into_a_directory_that_does_not_exist_is_refused_and_creates_nothing() {
    let scratch = scratch_tree();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nonexistent-dir");
    let spec = file_spec(&missing.join("l.json"));
    let (code, doc, _) = on_ledger(&scratch, "run", &spec, &["--fresh-install"], &[]);
    assert_eq!(code, 2, "{doc:#}");
    assert_first_problem(&doc, "does not exist");
    assert!(!missing.exists(), "the directory was created");
    assert!(!scratch.root().join("../ran").exists(), "a script ran");
}
