//! The last failure of an `on-error=abort` migration (issue 27): kept in
//! the ledger beside its attempt mark (`f.<slug>`), non-terminal, shown by
//! `status`, `status SLUG` and `plan`, its output redacted, and gone once
//! the slug's next outcome is recorded. A retried upgrade deletes the hook
//! Job that printed the failure; the ledger still says what happened.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use common::shells::Shell;
use common::tripwire::Scratch;

/// The secret the failing script prints; never stored.
const SECRET: &str = "hunter2-very-secret";

/// A failing body: a secret-shaped line, then the line that explains it.
fn failing_body() -> String {
    format!("echo \"connecting with password={SECRET}\"\necho 'boom: the widget is broken'\nexit 3")
}

/// `/bin/sh`, which `plan` allows without `--allow-interpreter` (the shell
/// does not matter here: the scripts only print and exit).
fn sh() -> Shell {
    Shell {
        name: "sh",
        shebang: "/bin/sh".to_owned(),
        is_bash: false,
    }
}

fn world(shell: &Shell, second: &str) -> Scratch {
    Scratch::under(shell, "abort", &[("one", "echo one done"), ("two", second)])
}

fn status(s: &Scratch, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec!["status", "--ledger"];
    let ledger = s.ledger();
    args.push(&ledger);
    args.extend_from_slice(extra);
    common::json(&args)
}

fn text(s: &Scratch, args: &[&str]) -> String {
    let ledger = s.ledger();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--ledger", &ledger]);
    let (code, out, err) = common::text(&all);
    assert_eq!(code, 0, "{out}\n{err}");
    out
}

fn plan(s: &Scratch) -> serde_json::Value {
    let (code, doc, err) = common::on_ledger("plan", &s.tree(), &s.ledger(), &[]);
    assert_eq!(code, 0, "{doc}\n{err}");
    doc
}

/// The failure record as `status` shows it, asserted whole.
/// The `unrecorded` item of `slug` in a `status` document `doc`, where
/// nothing terminal is recorded of it.
fn unrecorded<'a>(doc: &'a serde_json::Value, slug: &str) -> &'a serde_json::Value {
    assert!(
        common::by_slug(&doc["entries"], slug).is_none(),
        "nothing terminal is recorded: {doc}"
    );
    common::by_slug(&doc["unrecorded"], slug)
        .unwrap_or_else(|| panic!("{slug} is unrecorded: {doc}"))
}

fn assert_failure(failure: &serde_json::Value, attempts: u64) {
    assert_eq!(failure["reason"], "exit-status-3", "{failure}");
    let message = failure["message"].as_str().unwrap();
    assert!(message.contains("boom: the widget is broken"), "{message}");
    assert!(message.contains("[redacted]"), "{message}");
    assert!(!message.contains(SECRET), "{message}");
    assert_eq!(failure["attempts"], attempts, "{failure}");
    let at = failure["at"].as_str().unwrap();
    assert!(at.ends_with('Z') && at.len() >= 20, "{at}");
}

#[test]
fn an_abort_failure_is_kept_redacted_shown_by_status_and_plan_and_gone_after_the_next_outcome() {
    let shell = sh();
    let s = world(&shell, &failing_body());

    // Two failing runs: nothing terminal recorded, the record replaced.
    for attempt in 1..=2u64 {
        let (code, report, stderr) = s.run(&shell, "up");
        assert_ne!(code, 0, "{report}\n{stderr}");
        let (code, doc, err) = status(&s, &[]);
        assert_eq!(code, 0, "{doc}\n{err}");
        let two = unrecorded(&doc, "two");
        assert_failure(&two["last_failure"], attempt);
    }
    let raw = std::fs::read_to_string(s.ledger_path()).unwrap();
    assert!(!raw.contains(SECRET), "the ledger never holds the secret");
    assert!(raw.contains("\"f.two\""), "the record is f.two: {raw}");

    // `status SLUG`: the record whole, as JSON and as text.
    let (code, one, err) = status(&s, &["two"]);
    assert_eq!(code, 0, "{one}\n{err}");
    assert_failure(&one["last_failure"], 2);
    let shown = text(&s, &["status", "two"]);
    common::assert_contains_all(
        &shown,
        &[
            "last failure:",
            "exit-status-3",
            "boom: the widget is broken",
            "[redacted]",
        ],
    );
    assert!(!shown.contains(SECRET), "{shown}");

    // `status`: the table flags it.
    let table = text(&s, &["status"]);
    assert!(table.contains("last failure"), "{table}");
    assert!(table.contains("exit-status-3"), "{table}");

    // `plan`: the pending slug says it failed last time, text and JSON.
    let doc = plan(&s);
    let pending = common::by_slug(&doc["pending"], "two").expect("two is pending");
    assert_failure(&pending["last_failure"], 2);
    let tree = s.tree();
    let shown = text(&s, &["plan", tree.to_str().unwrap()]);
    assert!(shown.contains("last failed"), "{shown}");
    assert!(shown.contains("exit-status-3"), "{shown}");

    // Fixed: it runs ok, and the record is gone.
    s.scripts(
        &shell,
        "abort",
        &[("one", "echo one done"), ("two", "echo fixed")],
    );
    let (code, report, stderr) = s.run(&shell, "up");
    assert_eq!(code, 0, "{report}\n{stderr}");
    let (_, doc, _) = status(&s, &[]);
    let two = common::by_slug(&doc["entries"], "two").expect("two is recorded");
    assert_eq!(two["state"], "ok");
    assert_eq!(two["attempts"], 3);
    assert!(two.get("last_failure").is_none(), "{two}");
    let raw = std::fs::read_to_string(s.ledger_path()).unwrap();
    let replayed = common::json(&["status", "--ledger", &s.ledger()]).1;
    assert!(
        common::by_slug(&replayed["unrecorded"], "two").is_none(),
        "{replayed}"
    );
    assert!(!status(&s, &["two"]).1.to_string().contains("last_failure"));
    assert!(!text(&s, &["status"]).contains("last failure"));
    // The journal keeps its history (the clearing is a put of its own),
    // but no reader shows a record any more.
    assert!(raw.contains("\"f.two\":\"\""), "{raw}");
}

#[test]
fn a_corrupt_last_failure_is_a_warning_and_blocks_nothing() {
    let shell = sh();
    let s = world(&shell, "echo two done");
    // A hand-edited ledger: a value that does not parse and a key that is
    // not a slug's.
    common::block_on(async {
        use migration_core::Ledger;
        let ledger = ledger_file::FileLedger::new(s.ledger_path());
        ledger.put_raw("f.two", "{not json").unwrap();
        ledger.put_raw("f.Not_A_Slug", "{}").unwrap();
        assert!(ledger.read().await.unwrap().unwrap().failures.is_empty());
    });
    let doc = plan(&s);
    let warnings = doc["warnings"].to_string();
    assert!(warnings.contains("f.two"), "{doc}");
    assert!(warnings.contains("f.Not_A_Slug"), "{doc}");
    let (code, report, stderr) = s.run(&shell, "up");
    assert_eq!(code, 0, "{report}\n{stderr}");
    let (_, doc, _) = status(&s, &[]);
    assert_eq!(
        common::by_slug(&doc["entries"], "two").unwrap()["state"],
        "ok"
    );
    // The entry's write removed the corrupt record with the rest.
    let corrupt = doc["corrupt"].to_string();
    assert!(!corrupt.contains("f.two"), "{doc}");
    assert!(corrupt.contains("f.Not_A_Slug"), "{doc}");
}

/// The kube ledgers through the binary: `a` in a first release (a fresh
/// install seeds it), then `b` (abort) failing in the next, then fixed.
mod kube {
    use super::{SECRET, assert_failure, failing_body};
    use crate::common;
    use migration_core::testing::fixtures::{ScratchTree, TreeBuilder, script_text};
    use migration_core::{OnError, Tier};
    use std::path::Path;

    async fn migrate(kubeconfig: &Path, args: &[&str]) -> (i32, serde_json::Value, String) {
        common::json_on_cluster(kubeconfig, args).await
    }

    /// Adds `b` to the tree in a second batch, with `body`.
    fn release_b(scratch: &ScratchTree, body: &str) {
        let root = scratch.root();
        std::fs::write(
            root.join("pre-apply/b"),
            script_text(Tier::PreApply, OnError::Abort, &[], body),
        )
        .unwrap();
        std::fs::write(root.join("order.d/00002-v2"), "b\n").unwrap();
    }

    /// The failure record as the ledger object holds it on a Kubernetes ledger: everything but
    /// the output, which is in the ledger's Secret, named (CONTRACT.md §5.2); `status SLUG`
    /// puts it back.
    fn assert_failure_kept_aside(failure: &serde_json::Value, attempts: u64) {
        assert_eq!(failure["reason"], "exit-status-3", "{failure}");
        assert_eq!(failure["attempts"], attempts, "{failure}");
        let message = failure["message"].as_str().unwrap();
        assert!(
            message.contains("[output tail kept in Secret "),
            "{message}"
        );
        assert!(!message.contains(SECRET), "{message}");
    }

    /// The whole story on ledger `spec` of the cluster `kubeconfig` names;
    /// `raw` reads the stored object (what must never hold the secret).
    pub(super) async fn abort_then_fix(
        kubeconfig: &Path,
        spec: &str,
        raw: impl AsyncFn() -> String,
    ) {
        let scratch = TreeBuilder::new()
            .script_with(Tier::PreApply, "a", OnError::Abort, &[], "echo a")
            .manifest(&[("00001-v1", "a\n")])
            .scratch();
        let root = scratch.root();
        let root = root.to_str().unwrap();
        let image = ["--image", "img@sha256:1"];
        let run = |extra: &'static [&'static str]| {
            let mut args = vec!["run", root, "--ledger", spec];
            args.extend_from_slice(&image);
            args.extend_from_slice(extra);
            args
        };
        // A new cluster: its ledger is created by this first run.
        let (code, doc, err) = migrate(kubeconfig, &run(&["--fresh-install"])).await;
        assert_eq!(
            (code, &doc["fresh_install"]),
            (0, &serde_json::json!(true)),
            "{err}"
        );

        release_b(&scratch, &failing_body());
        for attempt in 1..=2 {
            let (code, doc, err) = migrate(kubeconfig, &run(&[])).await;
            assert_eq!(code, 4, "{doc}\n{err}");
            let (code, status, err) = migrate(kubeconfig, &["status", "--ledger", spec]).await;
            assert_eq!(code, 0, "{err}");
            let b = super::unrecorded(&status, "b");
            assert_failure_kept_aside(&b["last_failure"], attempt);
            assert_eq!(b["last_failure"]["image"], "img@sha256:1");
        }
        let stored = raw().await;
        assert!(stored.contains("exit-status-3"), "{stored}");
        assert!(!stored.contains(SECRET), "{stored}");
        let (code, one, _) = migrate(kubeconfig, &["status", "b", "--ledger", spec]).await;
        assert_eq!(code, 0);
        assert_failure(&one["last_failure"], 2);
        let (code, plan, err) = migrate(kubeconfig, &["plan", root, "--ledger", spec]).await;
        assert_eq!(code, 0, "{err}");
        assert_failure_kept_aside(
            &common::by_slug(&plan["pending"], "b").unwrap()["last_failure"],
            2,
        );

        release_b(&scratch, "echo fixed");
        let (code, doc, err) = migrate(kubeconfig, &run(&[])).await;
        assert_eq!(code, 0, "{doc}\n{err}");
        let (_, status, _) = migrate(kubeconfig, &["status", "--ledger", spec]).await;
        let b = common::by_slug(&status["entries"], "b").expect("b is recorded");
        assert_eq!((&b["state"], &b["attempts"]), (&"ok".into(), &3.into()));
        assert!(b.get("last_failure").is_none(), "{b}");
        let stored = raw().await;
        assert!(!stored.contains("exit-status-3"), "removed: {stored}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_configmap_and_custom_resource_ledgers_a_last_failure_is_kept_and_then_removed() {
    use ledger_crd::{GROUP, KIND, PLURAL, VERSION};
    let server = test_apiserver::TestApiServer::start().await;
    server.register_custom_resource(GROUP, VERSION, PLURAL, KIND, false, true);
    let dir = tempfile::tempdir().unwrap();
    let kc = common::kubeconfig_for(dir.path(), &server.url());
    let object = |resource: &'static str, ns: &'static str, name: &'static str| {
        let server = &server;
        async move || server.object(resource, ns, name).unwrap().to_string()
    };
    kube::abort_then_fix(
        &kc,
        "configmap:cozy-system/cozystack-version",
        object("configmaps", "cozy-system", "cozystack-version"),
    )
    .await;
    kube::abort_then_fix(
        &kc,
        "crd:platform",
        object("migrationledgers.migrations.cozystack.io", "", "platform"),
    )
    .await;
}

/// The same against a real API server (`MIGRATE_TEST_KUBECONFIG`; skipped,
/// saying so, when unset): the real CRD's schema and structural pruning
/// keep `status.failures`, and the real merge patch removes `f.b`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn on_a_real_api_server_a_last_failure_is_kept_and_then_removed() {
    use ::kube::CustomResourceExt;
    use ::kube::api::{Api, DynamicObject, Patch, PatchParams};
    use ::kube::core::ApiResource;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use test_apiserver::real::{RealCluster, unique_name};

    let cluster =
        test_apiserver::or_skip!(RealCluster::from_env("last failure on real ledgers").await);
    let client = cluster.client();
    let ns = cluster.namespace().to_owned();
    let kc = cluster.kubeconfig().to_owned();

    // ConfigMap: an existing, empty ledger is not needed (a fresh install
    // creates it), only a name of this run's own.
    let cm_name = unique_name("last-failure");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let read_cm = {
        let (configmaps, name) = (configmaps.clone(), cm_name.clone());
        async move || serde_json::to_string(&configmaps.get(&name).await.unwrap()).unwrap()
    };
    kube::abort_then_fix(&kc, &format!("configmap:{ns}/{cm_name}"), read_cm).await;
    configmaps
        .delete(&cm_name, &Default::default())
        .await
        .unwrap();

    // The CRD this engine prints, applied as `migrate crd | kubectl apply` would.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_name = ledger_crd::MigrationLedger::crd_name();
    crds.patch(
        crd_name,
        &PatchParams::apply("cozystack-migrate-test-lane"),
        &Patch::Apply(ledger_crd::crd()),
    )
    .await
    .unwrap();
    test_apiserver::real::wait_until_established(&client, crd_name).await;
    let ledgers: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<ledger_crd::MigrationLedger>(&()),
    );
    let name = unique_name("last-failure");
    let read_cr = {
        let (ledgers, name) = (ledgers.clone(), name.clone());
        async move || serde_json::to_string(&ledgers.get(&name).await.unwrap()).unwrap()
    };
    // The Lease beside it lives in `cozy-system`, as in production.
    cluster.ensure_namespace("cozy-system").await;
    kube::abort_then_fix(&kc, &format!("crd:{name}"), read_cr).await;
    ledgers.delete(&name, &Default::default()).await.unwrap();
}
