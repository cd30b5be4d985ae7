//! `migrate --ledger configmap:NS/NAME` end to end: the real binary finds
//! the in-process test API server through an ordinary kubeconfig.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::path::Path;

use common::{fields, kubeconfig_for};
use ledger_crd::{GROUP, KIND, PLURAL, VERSION};
use migration_core::testing::fixtures::{ScratchTree, TreeBuilder};
use migration_core::{OnError, Tier};
use test_apiserver::TestApiServer;

/// The tree both ledgers run: `a` succeeds, `b` fails under on-error=warn.
fn scratch_tree() -> ScratchTree {
    TreeBuilder::new()
        .script_with(Tier::PreApply, "a", OnError::Abort, &[], "echo a")
        .script_with(Tier::PreApply, "b", OnError::Warn, &[], "exit 2")
        .manifest(&[("00001-v1", "a\nb\n")])
        .scratch()
}

/// A test API server serving the `MigrationLedger` resource.
async fn crd_server() -> TestApiServer {
    let server = TestApiServer::start().await;
    server.register_custom_resource(GROUP, VERSION, PLURAL, KIND, false, true);
    server
}

/// The scratch tree, a kubeconfig in it naming `server`, and the tree's
/// root.
fn scratch_on(server: &TestApiServer) -> (ScratchTree, std::path::PathBuf, String) {
    let scratch = scratch_tree();
    let kc = kubeconfig_for(scratch.dir(), &server.url());
    let root = scratch.root().to_str().unwrap().to_owned();
    (scratch, kc, root)
}

/// Stores the ConfigMap of `metadata` and `data` on `server`.
fn put_version_configmap(
    server: &TestApiServer,
    metadata: serde_json::Value,
    data: serde_json::Value,
) {
    let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data});
    server.put_object("configmaps", object).unwrap();
}

async fn migrate(kubeconfig: &Path, args: &[&str]) -> (i32, serde_json::Value, String) {
    common::json_on_cluster(kubeconfig, args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_status_and_verify_on_the_configmap_ledger() {
    let server = TestApiServer::start().await;
    let (_scratch, kc, root) = scratch_on(&server);
    let root = root.as_str();
    put_version_configmap(
        &server,
        serde_json::json!({"name": "cozystack-version", "namespace": "cozy-system", "labels": {"keep": "me"}}),
        serde_json::json!({"version": "1"}),
    );
    let spec = "configmap:cozy-system/cozystack-version";
    let (code, doc, err) = migrate(
        &kc,
        &["run", root, "--ledger", spec, "--image", "img@sha256:1"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(fields(&doc["results"], "outcome"), ["ok", "failed"]);
    let cm = server
        .object("configmaps", "cozy-system", "cozystack-version")
        .unwrap();
    assert_eq!(cm["metadata"]["labels"]["keep"], "me");
    assert_eq!(cm["data"]["version"], "1");
    // Compact, its image in the shared record it names.
    let data = cm["data"].as_object().unwrap();
    let a: serde_json::Value = serde_json::from_str(data["m.a"].as_str().unwrap()).unwrap();
    let run = &data[&format!("c.{}", a["c"].as_str().unwrap())];
    let run: serde_json::Value = serde_json::from_str(run.as_str().unwrap()).unwrap();
    let base = &data[&format!("c.{}", run["base"].as_str().unwrap())];
    let base: serde_json::Value = serde_json::from_str(base.as_str().unwrap()).unwrap();
    assert_eq!(
        (a["s"].as_str(), base["image"].as_str(), a["n"].as_u64()),
        (Some("ok"), Some("img@sha256:1"), Some(1))
    );
    assert!(
        cm["data"]["a.a"].is_string(),
        "the attempt mark is stored beside the entry"
    );
    assert!(
        cm["metadata"]["annotations"][ledger_configmap::LOCK_ANNOTATION].is_null(),
        "the lock, kept in the ConfigMap, was released"
    );
    assert!(
        server.objects("leases").is_empty(),
        "the ConfigMap ledger needs no Lease"
    );
    let (code, status, _) = migrate(&kc, &["status", "--ledger", spec]).await;
    assert_eq!(code, 0);
    assert_eq!(status["entries"][0]["slug"], "b", "failures first");
    assert_eq!(status["entries"][0]["reason"], "exit-status-2");
    let (code, verify, _) = migrate(&kc, &["verify", root, "--ledger", spec]).await;
    assert_eq!((code, &verify["ok"]), (0, &serde_json::json!(true)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_is_an_environment_error_not_an_empty_ledger() {
    let dir = tempfile::tempdir().unwrap();
    // A loopback port with nothing listening: connections are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kc = kubeconfig_for(dir.path(), &format!("http://127.0.0.1:{port}"));
    let (code, doc, _) = migrate(
        &kc,
        &[
            "status",
            "--ledger",
            "configmap:cozy-system/cozystack-version",
        ],
    )
    .await;
    assert_eq!(code, 1, "{doc}");
    assert_eq!(doc["error"], "environment");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_and_status_on_the_custom_resource_ledger() {
    let server = crd_server().await;
    let (_scratch, kc, root) = scratch_on(&server);
    let root = root.as_str();
    // The first run is a fresh install: the ledger object is created, nothing runs.
    let (code, doc, err) = migrate(
        &kc,
        &["run", root, "--ledger", "crd:platform", "--fresh-install"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(doc["fresh_install"], true);
    let object = server
        .object("migrationledgers.migrations.cozystack.io", "", "platform")
        .expect("created");
    assert_eq!(object["status"]["initialized"], true);
    assert_eq!(
        object["status"]["entries"]["a"]["s"],
        "skipped-fresh-install"
    );
    let (code, status, _) = migrate(&kc, &["status", "--ledger", "crd:platform"]).await;
    assert_eq!(code, 0);
    assert_eq!(status["counts"]["skipped-fresh-install"], 2);
    let (code, crd, _) = migrate(&kc, &["crd"]).await;
    assert_eq!(code, 0);
    assert_eq!(crd["spec"]["names"]["kind"], "MigrationLedger");
}

/// `migrate repair` through the `Ledger` trait of a Kubernetes backend: a
/// `failed` entry marked to run again becomes `not-yet` with its history,
/// the lock is released, and a refused repair changes nothing.
async fn repair_on(server: &TestApiServer, kc: &Path, root: &str, spec: &str) {
    let (code, doc, err) = migrate(kc, &["run", root, "--ledger", spec]).await;
    assert_eq!(code, 0, "{spec}: {doc} {err}");
    let (code, doc, err) = migrate(
        kc,
        &[
            "repair", root, "b", "--ledger", spec, "--rerun", "--by", "alice", "--reason", "fixed",
        ],
    )
    .await;
    assert_eq!(code, 0, "{spec}: {doc} {err}");
    let (code, entry, _) = migrate(kc, &["status", "--ledger", spec, "b"]).await;
    assert_eq!(code, 0, "{spec}");
    assert_eq!(entry["state"], "not-yet", "{spec}: {entry}");
    assert_eq!(
        entry["repairs"][0]["was"]["state"], "failed",
        "{spec}: {entry}"
    );
    assert_eq!(entry["repairs"][0]["by"], "alice", "{spec}: {entry}");
    let (code, doc, _) = migrate(
        kc,
        &[
            "repair", root, "a", "--ledger", spec, "--done", "--by", "a", "--reason", "r",
        ],
    )
    .await;
    assert_eq!(code, 2, "{spec}: {doc}");
    assert!(
        server.objects("leases").is_empty(),
        "{spec}: a Lease was left"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_works_on_the_configmap_and_the_custom_resource_ledgers() {
    let server = crd_server().await;
    let (_scratch, kc, root) = scratch_on(&server);
    let root = root.as_str();
    put_version_configmap(
        &server,
        serde_json::json!({"name": "cozystack-version", "namespace": "cozy-system"}),
        serde_json::json!({}),
    );
    repair_on(
        &server,
        &kc,
        root,
        "configmap:cozy-system/cozystack-version",
    )
    .await;
    let cm = server
        .object("configmaps", "cozy-system", "cozystack-version")
        .unwrap();
    assert!(
        cm["metadata"]["annotations"][ledger_configmap::LOCK_ANNOTATION].is_null(),
        "the lock, kept in the ConfigMap, was released"
    );
    // The custom resource ledger, made by a fresh install (every slug
    // skipped-fresh-install): a slug marked to run again keeps that.
    let (code, _, err) = migrate(
        &kc,
        &["run", root, "--ledger", "crd:platform", "--fresh-install"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let (code, doc, _) = migrate(
        &kc,
        &[
            "repair",
            root,
            "b",
            "--ledger",
            "crd:platform",
            "--rerun",
            "--by",
            "alice",
            "--reason",
            "lost its effect",
        ],
    )
    .await;
    assert_eq!(code, 0, "{doc}");
    let (_, entry, _) = migrate(&kc, &["status", "--ledger", "crd:platform", "b"]).await;
    assert_eq!(entry["state"], "not-yet", "{entry}");
    assert_eq!(
        entry["repairs"][0]["was"]["state"], "skipped-fresh-install",
        "{entry}"
    );
}
