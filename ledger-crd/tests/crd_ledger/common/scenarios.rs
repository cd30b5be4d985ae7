//! Scenarios run both on the test API server (`tests/crd`) and on a real one (`tests/real_cluster`):
//! written once against a kube client, so the double and the real server are held to the
//! same assertions.

use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::core::DynamicObject;
use ledger_crd::CrdLedger;
use migration_core::testing::slug;
use migration_core::{EntryState, Ledger, LedgerError, LegacyVersion, WriteMode};
use serde_json::{Value, json};

pub use migration_core::testing::entries;

/// Writes [`entries`]`(range, state)` in `mode`, which must succeed.
pub async fn put(
    l: &impl Ledger,
    range: std::ops::Range<usize>,
    state: EntryState,
    mode: WriteMode,
) -> migration_core::WriteReport {
    l.write(&entries(range, state), mode).await.unwrap()
}

/// The object `name` as the server returns it.
pub async fn stored(api: &Api<DynamicObject>, name: &str) -> Value {
    serde_json::to_value(api.get(name).await.unwrap()).unwrap()
}

/// Seeds three entries through `l`, then applies spec, labels, annotations and (by mistake) a
/// status to object `name`, as a chart would: the status subresource keeps the entries out of
/// its reach, and the spec's version is read.
pub async fn a_chart_applies_spec_over_entries(
    l: &CrdLedger,
    api: &Api<DynamicObject>,
    name: &str,
) {
    l.create(&entries(0..3, EntryState::Ok)).await.unwrap();
    let applied = json!({
        "apiVersion": "migrations.cozystack.io/v1alpha1", "kind": "MigrationLedger",
        "metadata": {"name": name, "labels": {"app": "cozystack"}, "annotations": {"helm.sh/resource-policy": "keep"}},
        "spec": {"bundle": "cozystack", "version": 45},
        "status": {"entries": {}, "initialized": false},
    });
    api.patch(
        name,
        &PatchParams::apply("helm").force(),
        &Patch::Apply(&applied),
    )
    .await
    .unwrap();
    let snapshot = l.read().await.unwrap().unwrap();
    let kept = snapshot.records.len();
    assert_eq!(kept, 3, "a spec write cannot touch entries");
    assert_eq!(snapshot.version, LegacyVersion::Known(45));
}

/// After [`a_chart_applies_spec_over_entries`]: entry writes and attempt marks leave the
/// chart's spec, labels and annotations alone.
pub async fn entry_writes_leave_the_charts_fields_alone(
    l: &CrdLedger,
    api: &Api<DynamicObject>,
    name: &str,
) {
    put(l, 0..5, EntryState::Legacy, WriteMode::OnlyIfAbsent).await;
    put(l, 1..2, EntryState::Failed, WriteMode::Replace).await;
    l.note_attempt(&slug(7), "t", 0).await.unwrap();
    let object = stored(api, name).await;
    assert_eq!(
        object["spec"],
        json!({"bundle": "cozystack", "version": 45})
    );
    assert_eq!(object["metadata"]["labels"]["app"], "cozystack");
    assert_eq!(
        object["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    assert_eq!(object["status"]["entries"].as_object().unwrap().len(), 5);
}

/// Object `name` was declared (by a chart) with `spec.version` 45 and nothing else: it is an
/// existing cluster, never a fresh install, and the engine's first write initializes it.
pub async fn a_declared_ledger_is_an_existing_cluster(
    l: &CrdLedger,
    api: &Api<DynamicObject>,
    name: &str,
) {
    let snapshot = l.read().await.unwrap().expect("it exists");
    assert_eq!(snapshot.version, LegacyVersion::Known(45));
    assert!(snapshot.records.is_empty());
    assert!(matches!(
        l.create(&entries(0..2, EntryState::SkippedFreshInstall))
            .await
            .unwrap_err(),
        LedgerError::AlreadyExists { .. }
    ));
    put(l, 0..2, EntryState::Legacy, WriteMode::OnlyIfAbsent).await;
    let object = stored(api, name).await;
    assert_eq!(object["status"]["initialized"], true);
    assert_eq!(object["spec"]["version"], 45);
}
