//! ConfigMap-specific behaviour: what the object looks like and who may
//! touch which keys (API faults are the shared suite, in `faults.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use std::time::Duration;

use ledger_configmap::{CONFIGMAP_BUDGET_BYTES, ConfigMapLedger, Options};
use migration_core::Lock;
use migration_core::testing::{sample_entry, sample_record, slug};
use migration_core::{
    EntryState, Ledger, LedgerEntry, LedgerError, Sha256Digest, Timestamp, WriteMode,
};
use migration_kube::RetryPolicy;
use serde_json::json;
use test_apiserver::{TestApiServer, Verb};

const NS: &str = "cozy-system";
const NAME: &str = "cozystack-version";

fn ledger(server: &TestApiServer) -> ConfigMapLedger {
    let options = Options {
        retry: RetryPolicy::immediate(6),
        ..Options::default()
    };
    ConfigMapLedger::with_options(server.client(), NS, NAME, options)
}

fn plant(server: &TestApiServer, data: serde_json::Value) {
    server
        .put_object(
            "configmaps",
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {
                    "name": NAME, "namespace": NS,
                    "labels": {"platform.cozystack.io/no-delete": "true"},
                    "annotations": {"helm.sh/resource-policy": "keep", "meta.helm.sh/release-name": "cozystack"},
                },
                "data": data,
            }),
        )
        .unwrap();
}

fn stored(server: &TestApiServer) -> serde_json::Value {
    server.object("configmaps", NS, NAME).unwrap()
}

#[tokio::test]
async fn writes_keep_labels_annotations_and_foreign_keys() {
    let server = TestApiServer::start().await;
    plant(&server, json!({"version": "45", "owner-note": "hands off"}));
    let l = ledger(&server);
    common::write_beside_foreign_data(&l).await;
    let cm = stored(&server);
    assert_eq!(
        cm["metadata"]["labels"]["platform.cozystack.io/no-delete"],
        "true"
    );
    assert_eq!(
        cm["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    assert_eq!(
        cm["metadata"]["annotations"]["meta.helm.sh/release-name"],
        "cozystack"
    );
    assert_eq!(cm["data"]["version"], "45");
    assert_eq!(cm["data"]["owner-note"], "hands off");
    common::assert_written_beside_foreign_data(
        cm["data"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str().unwrap())),
    );
}

#[tokio::test]
async fn writes_are_merge_patches_carrying_the_resource_version_under_our_field_manager() {
    let server = TestApiServer::start().await;
    plant(&server, json!({}));
    server.requests().reset();
    ledger(&server)
        .write(&[sample_record(1, EntryState::Ok)], WriteMode::Replace)
        .await
        .unwrap();
    let log = server.requests().log();
    let patch = log
        .iter()
        .find(|r| r.verb == Verb::Patch)
        .expect("one patch");
    assert!(
        patch.method_path.contains("fieldManager=cozystack-migrate"),
        "{patch:?}"
    );
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    let body: serde_json::Value = serde_json::from_slice(&patch.body).unwrap();
    assert!(
        body["metadata"]["resourceVersion"].is_string(),
        "precondition missing: {body}"
    );
    assert_eq!(
        body["data"].as_object().unwrap().keys().collect::<Vec<_>>(),
        ["c.1", "c.2", "m.s-1"],
        "only our key and the shared records it names, new in this write"
    );
}

/// What `kubectl apply` (client-side) sends: a three-way patch computed from
/// the last-applied annotation, the new manifest and the live object. Keys
/// in the last-applied configuration but not in the new one are deleted;
/// keys it never listed are left alone.
fn client_side_apply_patch(
    last_applied: &serde_json::Value,
    new: &serde_json::Value,
) -> serde_json::Value {
    let mut data = serde_json::Map::new();
    for (k, v) in new["data"].as_object().unwrap() {
        data.insert(k.clone(), v.clone());
    }
    for k in last_applied["data"].as_object().unwrap().keys() {
        if new["data"].get(k).is_none() {
            data.insert(k.clone(), serde_json::Value::Null);
        }
    }
    json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": new.to_string()}},
        "data": data,
    })
}

#[tokio::test]
async fn a_kubectl_apply_of_version_by_another_manager_never_prunes_ledger_keys() {
    let server = TestApiServer::start().await;
    // The chart created the ConfigMap with kubectl apply: version only.
    let applied_v45 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NS}, "data": {"version": "45"}});
    plant(&server, json!({"version": "45"}));
    let mut cm = stored(&server);
    cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        json!(applied_v45.to_string());
    server.put_object("configmaps", cm).unwrap();
    // The engine records entries.
    let l = ledger(&server);
    let entries: Vec<_> = (0..5)
        .map(|n| (slug(n), sample_entry(EntryState::Ok, n as u32)))
        .collect();
    l.write(&entries, WriteMode::OnlyIfAbsent).await.unwrap();
    // A later release's chart applies version 46, and in another release drops the key.
    let client = server.client();
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(client, NS);
    let applied_v46 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NS}, "data": {"version": "46"}});
    let params = kube::api::PatchParams {
        field_manager: Some("kubectl-client-side-apply".into()),
        ..Default::default()
    };
    let patch = client_side_apply_patch(&applied_v45, &applied_v46);
    api.patch(NAME, &params, &kube::api::Patch::Strategic(&patch))
        .await
        .unwrap();
    let applied_empty = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": NAME, "namespace": NS}, "data": {"note": "x"}});
    let patch = client_side_apply_patch(&applied_v46, &applied_empty);
    api.patch(NAME, &params, &kube::api::Patch::Strategic(&patch))
        .await
        .unwrap();
    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(
        snapshot.records.len(),
        5,
        "every m.* key survives the apply"
    );
    assert!(
        stored(&server)["data"].get("version").is_none(),
        "the apply did prune what it owned (the control)"
    );
    // Had the engine put its keys into the last-applied set, the same apply would delete them:
    let owned = json!({"data": {"version": "46", "m.s-0": "x"}});
    let hazard = client_side_apply_patch(&owned, &applied_empty);
    assert!(
        hazard["data"]["m.s-0"].is_null(),
        "the hazard the field-scoped patches avoid"
    );
}

#[tokio::test]
async fn the_budget_is_enforced_before_the_api_server_sees_the_write() {
    let server = TestApiServer::start().await;
    plant(&server, json!({"version": "45"}));
    server.requests().reset();
    // An `ok` entry's message stays in the entry (a failure's output tail goes to the Secret).
    let mut big = sample_entry(EntryState::Ok, 1);
    big.message = Some("x".repeat(CONFIGMAP_BUDGET_BYTES as usize));
    let err = ledger(&server)
        .write(&[(slug(1), big)], WriteMode::Replace)
        .await
        .unwrap_err();
    assert!(
        matches!(err, LedgerError::Full { entry_count: 0, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("ledger full"));
    assert_eq!(
        server.requests().count(Verb::Patch, "configmaps"),
        0,
        "refused before sending"
    );
}

#[tokio::test]
async fn a_realistic_entry_is_compact_and_thousands_fit_the_budget() {
    let entry = LedgerEntry {
        sha256: Some(Sha256Digest::of(b"script")),
        lib_sha256: Some(Sha256Digest::of(b"lib")),
        batch: Some("00042-v1.7.12".into()),
        image: Some(format!(
            "ghcr.io/cozystack/cozystack/migrations@sha256:{}",
            Sha256Digest::of(b"image")
        )),
        attempts: 1,
        ..LedgerEntry::new(
            EntryState::Ok,
            Timestamp::parse("2026-08-12T10:04:00Z").unwrap(),
        )
    };
    let key = migration_core::keys::entry_key("redis-failover-group-label");
    // Stored compact, naming its run's shared record (a two-digit id here);
    // the records themselves are counted in benches/tests/density.rs.
    let bytes = key.len() + entry.encode_compact(Some("12")).len();
    assert!(bytes < 160, "{bytes} bytes per entry");
    let fit = CONFIGMAP_BUDGET_BYTES as usize / bytes;
    assert!(fit > 6500, "{fit} entries fit");
}

#[tokio::test]
async fn ten_thousand_keys_with_one_corrupt_read_as_exactly_one_corrupt() {
    let server = TestApiServer::start().await;
    plant(&server, common::ten_thousand_keys_one_corrupt());
    let snapshot = ledger(&server).read().await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), 10_000);
    assert_eq!(
        migration_core::testing::corrupt_keys(&snapshot),
        [("k4242".to_owned(), "m.k4242".to_owned())]
    );
}

#[tokio::test]
async fn a_chart_created_configmap_with_only_version_is_an_old_cluster_not_a_fresh_install() {
    let server = TestApiServer::start().await;
    plant(&server, json!({"version": "12"}));
    let snapshot = ledger(&server).read().await.unwrap().expect("it exists");
    assert_eq!(snapshot.version, migration_core::LegacyVersion::Known(12));
    assert!(snapshot.records.is_empty());
}

#[tokio::test]
async fn the_lock_is_an_annotation_of_the_configmap_that_leaves_the_others_and_needs_no_lease() {
    let server = TestApiServer::start().await;
    let l = ledger(&server);
    // No ConfigMap yet: nothing to lock, and nothing is created.
    let err = l
        .acquire("runner-a/pid-1", Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::NotFound { .. }), "{err:?}");
    assert!(server.object("configmaps", NS, NAME).is_none());
    plant(&server, json!({"version": "45"}));
    let lease = l
        .acquire("runner-a/pid-1", Duration::from_secs(30))
        .await
        .unwrap();
    let annotations = &stored(&server)["metadata"]["annotations"];
    let lock: serde_json::Value = serde_json::from_str(
        annotations[ledger_configmap::LOCK_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(lock["holder"], "runner-a/pid-1");
    assert_eq!(lock["ttl_seconds"], 30);
    assert!(lock["renewed"].as_str().unwrap().ends_with('Z'));
    assert_eq!(annotations["helm.sh/resource-policy"], "keep");
    l.release(&lease).await.unwrap();
    let cm = stored(&server);
    assert!(cm["metadata"]["annotations"][ledger_configmap::LOCK_ANNOTATION].is_null());
    assert_eq!(
        cm["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    assert_eq!(server.requests().count(Verb::Create, "leases"), 0);
}
