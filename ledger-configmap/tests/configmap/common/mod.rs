//! What the ConfigMap backend's test files share: scenarios and data run both on the test API
//! server (`configmap.rs`) and on a real one (`real_cluster.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use ledger_configmap::ConfigMapLedger;
use migration_core::testing::{sample_entry, sample_record, slug};
use migration_core::{EntryState, Ledger, LedgerEntry, Timestamp, WriteMode};
use serde_json::{Value, json};

/// The engine's three kinds of write on a ConfigMap that holds data of other owners: a legacy
/// entry for `s-1`, its replacement by an `ok` entry (`sample_entry(Ok, 2)`), and an attempt
/// mark for `s-2`. The callers then check that the other owners' data survived.
pub async fn write_beside_foreign_data(l: &ConfigMapLedger) {
    l.write(
        &[sample_record(1, EntryState::Legacy)],
        WriteMode::OnlyIfAbsent,
    )
    .await
    .unwrap();
    l.write(
        &[(slug(1), sample_entry(EntryState::Ok, 2))],
        WriteMode::Replace,
    )
    .await
    .unwrap();
    l.note_attempt(&slug(2), "t", 0).await.unwrap();
}

/// Asserts that the ConfigMap `data` (as `key → value` pairs) reads back
/// with the entry [`write_beside_foreign_data`] left for `s-1`.
#[track_caller]
pub fn assert_written_beside_foreign_data<'a>(data: impl IntoIterator<Item = (&'a str, &'a str)>) {
    let snapshot = migration_core::LedgerSnapshot::from_raw_data(data, None);
    assert_eq!(
        snapshot.entry(&slug(1)),
        Some(&sample_entry(EntryState::Ok, 2))
    );
}

/// ConfigMap `data` of ten thousand valid entries `m.k<n>`, of which `m.k4242` is then
/// overwritten with truncated JSON.
pub fn ten_thousand_keys_one_corrupt() -> Value {
    let value = LedgerEntry::new(EntryState::Ok, Timestamp::from_unix(0)).encode();
    let mut data = serde_json::Map::new();
    for n in 0..10_000 {
        data.insert(format!("m.k{n}"), json!(value));
    }
    data.insert("m.k4242".into(), json!("{\"state\":\"ok\""));
    Value::Object(data)
}
