//! Exact storage of entries.

use super::*;

/// `entry` carrying `fields` besides its own (as a newer engine's entry would).
fn with_extra<const N: usize>(mut entry: LedgerEntry, fields: [(&str, Value); N]) -> LedgerEntry {
    for (key, value) in fields {
        entry.extra.insert(key.into(), value);
    }
    entry
}

#[tokio::test]
async fn a_replaced_entry_keeps_none_of_the_fields_it_replaces() {
    let (server, l) = served_ledger().await;
    let failed = with_extra(
        sample_entry(EntryState::Failed, 1),
        [("retry_after", json!({"seconds": 30}))],
    );
    l.create(&[(slug(1), failed)]).await.unwrap();
    let ok = sample_entry(EntryState::Ok, 2);
    l.write(&[(slug(1), ok.clone())], WriteMode::Replace)
        .await
        .unwrap();
    let stored_entry = &stored(&server)["status"]["entries"]["s-1"];
    assert_eq!(
        *stored_entry,
        ok.compact_value(stored_entry["c"].as_str()),
        "a merge would have kept reason, message and retry_after"
    );
}

#[tokio::test]
async fn fields_a_newer_engine_recorded_survive_exactly() {
    let (server, l) = served_ledger().await;
    let newer = with_extra(
        sample_entry(EntryState::Ok, 1),
        [
            ("node", json!({"a": [1, null], "gone": null})),
            ("cleared", Value::Null),
        ],
    );
    l.create(&[(slug(1), newer.clone())]).await.unwrap();
    put(&l, 2..4, EntryState::Legacy, WriteMode::OnlyIfAbsent).await;
    put(&l, 2..3, EntryState::Ok, WriteMode::Replace).await;
    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(snapshot.entry(&slug(1)), Some(&newer));
    l.write(&[(slug(1), newer.clone())], WriteMode::Replace)
        .await
        .unwrap();
    assert_eq!(
        stored(&server)["status"]["entries"]["s-1"]["cleared"],
        Value::Null,
        "a null field is stored, not deleted"
    );
}
