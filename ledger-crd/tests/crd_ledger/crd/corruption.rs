//! Corruption.

use super::*;

#[tokio::test]
async fn one_corrupt_entry_among_ten_thousand_is_exactly_one_corrupt_record() {
    let (server, l) = served_ledger().await;
    l.create(&[]).await.unwrap();
    let value =
        serde_json::to_value(LedgerEntry::new(EntryState::Ok, Timestamp::from_unix(0))).unwrap();
    let mut object = stored(&server);
    let map = object["status"]
        .as_object_mut()
        .unwrap()
        .entry("entries")
        .or_insert(json!({}));
    for n in 0..10_000 {
        map[format!("k{n}")] = value.clone();
    }
    map["k4242"] = json!({"state": "ok"});
    map["Bad_Key"] = value.clone();
    object["status"]["attempts"] = json!({"k1": {"count": 2, "token": "t"}, "k2": "nope"});
    server.put_object(RESOURCE, object).unwrap();

    let snapshot = l.read().await.unwrap().unwrap();
    assert_eq!(snapshot.records.len(), 10_000);
    assert_eq!(
        migration_core::testing::corrupt_keys(&snapshot),
        [("k4242".to_owned(), "m.k4242".to_owned())]
    );
    assert!(matches!(
        snapshot.record(&Slug::parse("k1").unwrap()),
        Some(Record::Entry(_))
    ));
    let unreadable = migration_core::testing::unreadable_keys(&snapshot);
    assert_eq!(unreadable, ["m.Bad_Key", "a.k2"]);
    assert_eq!(
        snapshot.attempts_started.get(&Slug::parse("k1").unwrap()),
        Some(&2)
    );

    // The corrupt entry blocks nothing else, and nothing overwrites it.
    put(&l, 0..1, EntryState::Ok, WriteMode::OnlyIfAbsent).await;
    let report = l
        .write(
            &[(
                Slug::parse("k4242").unwrap(),
                sample_entry(EntryState::Legacy, 1),
            )],
            WriteMode::OnlyIfAbsent,
        )
        .await
        .unwrap();
    assert_eq!(report.already_present, [Slug::parse("k4242").unwrap()]);
    assert_eq!(
        stored(&server)["status"]["entries"]["k4242"],
        json!({"state": "ok"})
    );
}

#[tokio::test]
async fn a_container_that_is_not_a_map_makes_the_ledger_unreadable_never_absent() {
    for (pointer, garbage) in [
        ("/status/entries", json!("oops")),
        ("/status/attempts", json!([1])),
        ("/status/initialized", json!("yes")),
        ("/status", json!(7)),
        ("/spec", json!("x")),
    ] {
        let (server, l) = served_ledger().await;
        l.create(&entries(0..1, EntryState::Ok)).await.unwrap();
        let mut object = stored(&server);
        let (parent, last) = pointer.rsplit_once('/').unwrap();
        let target = if parent.is_empty() {
            &mut object
        } else {
            object.pointer_mut(parent).unwrap()
        };
        target[last] = garbage;
        server.put_object(RESOURCE, object).unwrap();
        let err = l.read().await.unwrap_err();
        assert!(
            matches!(err, LedgerError::Unreadable { .. }),
            "{pointer}: {err:?}"
        );
        let last_word = pointer.rsplit('/').next().unwrap();
        assert!(err.to_string().contains(last_word), "{err}");
        let err = l
            .write(&entries(1..2, EntryState::Ok), WriteMode::OnlyIfAbsent)
            .await
            .unwrap_err();
        assert!(
            matches!(err, LedgerError::Unreadable { .. }),
            "{pointer}: {err:?}"
        );
    }
}
