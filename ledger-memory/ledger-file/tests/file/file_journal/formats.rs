//! The older and newer formats, and a lock record a crash tore.

use super::*;

#[tokio::test]
async fn an_older_format_file_reads_keeps_its_lock_and_is_converted_by_the_first_write() {
    let (_dir, path) = scratch();
    let entry = sample_entry(EntryState::Ok, 1).encode();
    let legacy = serde_json::json!({
        "format": "migration-ledger/v1",
        "ledger": {"revision": 4, "data": {"version": "44", "m.s-1": entry, "a.s-1": "{\"count\":1,\"token\":\"t\"}"}},
        "lock": {"holder": "old-runner", "token": "7", "acquired_at": "2026-08-12T10:00:00Z", "expires_at": "2099-01-01T00:00:00Z"},
        "lock_generation": 7
    });
    std::fs::write(&path, serde_json::to_vec_pretty(&legacy).unwrap()).unwrap();
    let ledger = FileLedger::new(&path);
    let snapshot = ledger.read().await.unwrap().unwrap();
    assert_eq!(snapshot.version, migration_core::LegacyVersion::Known(44));
    assert_eq!(
        snapshot.entry(&slug(1)),
        Some(&sample_entry(EntryState::Ok, 1))
    );
    assert_eq!(snapshot.attempts_started.get(&slug(1)), Some(&1));
    assert_eq!(snapshot.revision.as_deref(), Some("4"));
    // The lock an older version holds is respected.
    match ledger.acquire("new-runner", Duration::from_secs(60)).await {
        Err(LedgerError::LockHeld { holder, .. }) => assert_eq!(holder, "old-runner"),
        other => panic!("the old holder's lock must hold: {other:?}"),
    }
    // The first write converts the file to the journal format.
    ledger
        .write(&entries(2..3, EntryState::Ok), WriteMode::Replace)
        .await
        .unwrap();
    let converted = bytes(&path);
    assert!(converted.starts_with(TAG.as_bytes()));
    let again = FileLedger::new(&path).read().await.unwrap().unwrap();
    assert_eq!(again.records.len(), 2);
    assert_eq!(again.version, migration_core::LegacyVersion::Known(44));
    assert_eq!(again.revision.as_deref(), Some("5"));
    // Still held by the old runner, now in the converted file.
    assert!(matches!(
        FileLedger::new(&path)
            .acquire("new-runner", Duration::from_secs(60))
            .await,
        Err(LedgerError::LockHeld { .. })
    ));
}

#[test]
fn an_older_reader_refuses_the_new_format_instead_of_misreading_it() {
    let (_dir, path) = scratch();
    journaled(&path);
    // The v1 reader parses the whole file as one JSON document (and maps
    // the failure to "unreadable"): the tag line makes that fail at once.
    let err = serde_json::from_slice::<serde_json::Value>(&bytes(&path)).unwrap_err();
    assert_eq!((err.line(), err.column()), (1, 1), "{err}");
}

#[tokio::test]
async fn a_newer_format_is_refused_and_left_alone() {
    let (_dir, path) = scratch();
    let newer = b"migration-ledger/v3\n00000000 {\"op\":\"object\",\"rev\":1,\"data\":{}}\n";
    std::fs::write(&path, newer).unwrap();
    let err = FileLedger::new(&path).read().await.unwrap_err();
    assert!(matches!(err, LedgerError::Unreadable { .. }), "{err:?}");
    assert!(err.to_string().contains("unknown format"), "{err}");
    assert!(err.to_string().contains("migration-ledger/v3"), "{err}");
    let err = FileLedger::new(&path)
        .write(&entries(1..2, EntryState::Ok), WriteMode::Replace)
        .await
        .unwrap_err();
    assert!(matches!(err, LedgerError::Unreadable { .. }), "{err:?}");
    assert!(FileLedger::new(&path).compact().is_err());
    assert_eq!(bytes(&path), newer);
    // A newer lock record is refused too, not taken for a free lock.
    let (_dir2, other) = scratch();
    let body = r#"{"format":"migration-lock/v2","lock":null,"generation":0}"#;
    let ledger = FileLedger::new(&other);
    ledger.create(&[]).await.unwrap();
    ledger
        .put_raw(migration_core::fence::LOCK_KEY, body)
        .unwrap();
    let err = ledger
        .acquire("r", Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown lock format"), "{err}");
}

#[tokio::test]
async fn a_lock_record_torn_by_its_holders_crash_reads_as_free() {
    let (_dir, path) = scratch();
    let clock = Arc::new(ManualClock::new(Timestamp::from_unix(1_786_529_040)));
    let ledger = FileLedger::with_clock(&path, clock.clone());
    ledger.create(&[]).await.unwrap();
    ledger.acquire("a", Duration::from_secs(60)).await.unwrap();
    // The take is the file's last record: tear it as a crash would (the
    // rest of it, newline included, still the preallocated NULs).
    let whole = bytes(&path);
    let end = whole.iter().rposition(|&b| b == b'\n').unwrap();
    let start = whole[..end].iter().rposition(|&b| b == b'\n').unwrap() + 1;
    for cut in start + 1..end {
        let mut torn = whole.clone();
        torn[cut..=end].fill(0);
        std::fs::write(&path, &torn).unwrap();
        let b = FileLedger::with_clock(&path, clock.clone());
        let lease = b.acquire("b", Duration::from_secs(60)).await.unwrap();
        assert_eq!(lease.holder, "b", "cut {cut}");
        b.release(&lease).await.unwrap();
    }
    std::fs::write(&path, &whole).unwrap();
    assert!(matches!(
        FileLedger::with_clock(&path, clock)
            .acquire("b", Duration::from_secs(60))
            .await,
        Err(LedgerError::LockHeld { .. })
    ));
}
