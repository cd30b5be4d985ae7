//! `migrate test --real-cluster` against a real API server
//! (`MIGRATE_TEST_KUBECONFIG`, `examples/kube-testenv`), and the fake
//! cluster's texts held to what the real `kubectl` (`MIGRATE_TEST_KUBECTL`)
//! prints against it. Unset, each test prints that it skipped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::Path;

use migrate_runner::tripwire::classify::classify;
use serde_json::Value;
use test_apiserver::real::{KUBECTL_VAR, PrivateCluster, RealCluster, unique_name};

/// The runs twice compare every object of the cluster, so each runs on a server of its own
/// (`RealCluster::private`: every other test of this binary writes to the shared one); on a
/// shared kubeconfig of another cluster, two at once would still see each other's changes.
static QUIET_CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A private server for `what` (`None`: skipped), held alone while the guard lives.
async fn quiet_cluster(
    what: &str,
) -> Option<(PrivateCluster, tokio::sync::MutexGuard<'static, ()>)> {
    let cluster = RealCluster::private(what).await?;
    Some((cluster, QUIET_CLUSTER.lock().await))
}

fn kubectl_path() -> String {
    std::env::var(KUBECTL_VAR).unwrap_or_else(|_| "kubectl".into())
}

/// `migrate test TREE --real-cluster KUBECONFIG --output json`.
fn test_on(cluster: &RealCluster, tree: &Path) -> (i32, Value, String) {
    let out = common::migrate()
        .args(["test", tree.to_str().unwrap(), "--output", "json"])
        .arg("--real-cluster")
        .arg(cluster.kubeconfig())
        .env("KUBECTL", kubectl_path())
        .output()
        .unwrap();
    common::parse(out)
}

fn twice<'a>(doc: &'a Value, slug: &str) -> &'a Value {
    &common::by_slug(&doc["results"], slug).unwrap_or_else(|| panic!("{slug}: {doc:#}"))["twice"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_demo_tree_runs_twice_on_a_real_server_and_the_second_run_moves_no_resource_version() {
    let (cluster, _quiet) = test_apiserver::or_skip!(
        quiet_cluster("migrate test --real-cluster on the demo tree").await
    );
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("demo");
    common::copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../demo"),
        &tree,
    );
    let (code, doc, stderr) = tokio::task::block_in_place(|| test_on(&cluster, &tree));
    assert_eq!(code, 0, "{doc:#}\n{stderr}");
    for slug in ["tenant-namespace-labels", "flux-crds-relabel"] {
        assert_eq!(twice(&doc, slug)["outcome"], "pass", "{slug}: {doc:#}");
    }
    assert_eq!(
        twice(&doc, "reindex-tenant-dashboards")["outcome"],
        "skipped",
        "no fixtures: {doc:#}"
    );
    // What the migration did is on the server.
    let label = cluster.kubectl_ok(
        &[
            "get",
            "namespace",
            "tenant-a",
            "-o",
            "jsonpath={.metadata.labels.cozystack\\.io/tenant}",
        ],
        "",
    );
    assert!(label.starts_with("tenant-a"), "{label}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn a_migration_whose_second_run_changes_an_object_fails_naming_the_object() {
    let (cluster, _quiet) = test_apiserver::or_skip!(
        quiet_cluster("migrate test --real-cluster, a changing migration").await
    );
    let ns = unique_name("twice");
    let (_dir, tree) = common::initialised("m");
    // Stamps the time on every run: never the same object twice.
    common::write_files(
        &tree,
        &[
            (
                "pre-apply/stamp-settings",
                &format!(
                    "#!/bin/sh\n# cozystack-migration: tier=pre-apply\n# cozystack-migration: on-error=abort\n\
                     stamp=$(date +%s%N)\n\
                     \"${{KUBECTL:-kubectl}}\" -n {ns} annotate configmap settings example.com/stamp=\"$stamp\" --overwrite\n"
                ),
            ),
            (
                "tests/stamp-settings.sh",
                ". \"$(dirname \"$0\")/lib.sh\"\nrun_migration pre-apply/stamp-settings\n",
            ),
            (
                "tests/stamp-settings.fixtures.yaml",
                &format!(
                    "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n\
                     apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {ns}}}\ndata: {{a: b}}\n"
                ),
            ),
        ],
    );
    let (code, doc, stderr) = tokio::task::block_in_place(|| test_on(&cluster, &tree));
    assert_eq!(code, 2, "{doc:#}\n{stderr}");
    let result = twice(&doc, "stamp-settings");
    assert_eq!(result["outcome"], "fail", "{doc:#}");
    let changed: Vec<&str> = common::strings(&result["changed"]);
    assert_eq!(changed.len(), 1, "{doc:#}");
    assert!(
        changed[0].starts_with(&format!("v1/ConfigMap {ns}/settings (resourceVersion ")),
        "{changed:?}"
    );
    common::assert_contains_all(
        result["reason"].as_str().unwrap(),
        &["must be safe to run twice"],
    );
}

/// The fake's stderr and status for `answer '*' KIND_AND_DETAIL` then `kubectl ARGS`.
fn fake(tree: &Path, kind_and_detail: &str, args: &str, user: &str) -> (Option<i32>, String) {
    let file = tree.join("tests/probe.sh");
    std::fs::write(
        &file,
        format!(". \"$(dirname \"$0\")/lib.sh\"\nanswer '*' {kind_and_detail}\nkubectl {args}\n"),
    )
    .unwrap();
    let out = std::process::Command::new("sh")
        .arg(&file)
        .env("FAKE_CLUSTER_USER", user)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MIGRATE_TEST_KUBECONFIG (examples/kube-testenv)"]
async fn the_fake_cluster_prints_what_the_real_kubectl_prints_against_a_real_server() {
    let cluster = test_apiserver::or_skip!(
        RealCluster::from_env("the fake cluster's texts against kubectl").await
    );
    let ns = unique_name("fake-texts");
    cluster.ensure_namespace(&ns).await;
    let (_dir, tree) = common::initialised("m");
    let user = "system:serviceaccount:cozy-system:cozystack-migrations";
    let cases: Vec<(String, String, Vec<String>)> = vec![
        (
            "not-found configmaps absent".into(),
            format!("-n {ns} get configmap absent"),
            vec![
                "-n".into(),
                ns.clone(),
                "get".into(),
                "configmap".into(),
                "absent".into(),
            ],
        ),
        (
            "not-served sprockets".into(),
            "get sprockets".into(),
            vec!["get".into(), "sprockets".into()],
        ),
        (
            format!("forbidden configmaps settings get {ns}"),
            format!("-n {ns} get configmap settings"),
            vec![
                "-n".into(),
                ns.clone(),
                "get".into(),
                "configmap".into(),
                "settings".into(),
                format!("--as={user}"),
            ],
        ),
        (
            "forbidden customresourcedefinitions.apiextensions.k8s.io widgets.example.com get"
                .into(),
            "get crd widgets.example.com".into(),
            vec![
                "get".into(),
                "crd".into(),
                "widgets.example.com".into(),
                format!("--as={user}"),
            ],
        ),
        (
            "already-exists namespaces NS".replace("NS", &ns),
            format!("create namespace {ns}"),
            vec!["create".into(), "namespace".into(), ns.clone()],
        ),
        (
            "already-exists configmaps settings".into(),
            format!("-n {ns} create configmap settings"),
            vec![
                "-n".into(),
                ns.clone(),
                "create".into(),
                "configmap".into(),
                "settings".into(),
            ],
        ),
        (
            "already-exists secrets settings".into(),
            format!("-n {ns} create secret generic settings"),
            vec![
                "-n".into(),
                ns.clone(),
                "create".into(),
                "secret".into(),
                "generic".into(),
                "settings".into(),
            ],
        ),
        (
            "already-exists configmaps settings".into(),
            "create -f -".into(),
            vec!["create".into(), "-f".into(), "-".into()],
        ),
        (
            "timeout".into(),
            "get configmaps".into(),
            vec![
                "get".into(),
                "configmaps".into(),
                "--request-timeout=1ms".into(),
            ],
        ),
    ];
    // The objects the AlreadyExists cases collide with.
    for args in [
        vec!["-n", ns.as_str(), "create", "configmap", "settings"],
        vec!["-n", ns.as_str(), "create", "secret", "generic", "settings"],
    ] {
        cluster.kubectl_ok(&args, "");
    }
    for (answer, fake_args, real_args) in cases {
        let real_args: Vec<&str> = real_args.iter().map(String::as_str).collect();
        let stdin = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings, namespace: {ns}}}\n"
        );
        let real = tokio::task::block_in_place(|| cluster.kubectl_with_stdin(&real_args, &stdin));
        let (status, text) = fake(&tree, &answer, &fake_args, user);
        if answer == "timeout" {
            // Where the deadline strikes decides kubectl's words ("context deadline exceeded",
            // or "net/http: request canceled ... (Client.Timeout exceeded ...)"): the fake's
            // must be one of them, so migrate-tolerate gives both the same class.
            let real_text = String::from_utf8_lossy(&real.stderr).into_owned();
            assert_eq!(status, real.status.code(), "{real_text}");
            assert!(
                real_text.starts_with("Unable to connect to the server: "),
                "{real_text}"
            );
            assert_eq!(
                classify(&text).classes,
                classify(&real_text).classes,
                "{text} / {real_text}"
            );
            assert_eq!(classify(&text).names(), "timeout");
            continue;
        }
        assert_eq!(
            (status, text),
            (
                real.status.code(),
                String::from_utf8_lossy(&real.stderr).into_owned()
            ),
            "{answer}: the fake against kubectl {real_args:?}"
        );
    }
}
