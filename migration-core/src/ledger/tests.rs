use super::*;
use crate::entry::EntryState;

#[test]
fn raw_data_splits_into_version_entries_corrupt_and_unreadable() {
    let ok = LedgerEntry::new(EntryState::Ok, Timestamp::from_unix(0)).encode();
    let data = [
        ("version", "45"),
        ("m.good", ok.as_str()),
        ("m.broken", "{"),
        ("m.Bad_Key", ok.as_str()),
        ("owner-note", "ignored"),
    ];
    let snap = LedgerSnapshot::from_raw_data(data, Some("7".into()));
    assert_eq!(snap.version, LegacyVersion::Known(45));
    let good = Slug::parse("good").unwrap();
    let broken = Slug::parse("broken").unwrap();
    assert!(snap.entry(&good).is_some());
    assert!(matches!(snap.record(&broken), Some(Record::Corrupt(c)) if c.key == "m.broken"));
    assert!(
        snap.entry(&broken).is_none(),
        "a corrupt record has no entry"
    );
    assert_eq!(snap.corrupt().count(), 1);
    assert_eq!(snap.unreadable_keys.len(), 1);
    assert_eq!(snap.unreadable_keys[0].key, "m.Bad_Key");
    assert_eq!(snap.records.len(), 2);
    assert_eq!(snap.revision.as_deref(), Some("7"));
}

#[test]
fn attempt_marks_count_once_per_token_and_respect_the_floor() {
    let first = AttemptMark::next(None, "t1", 0);
    assert_eq!(first.count, 1);
    assert_eq!(
        AttemptMark::next(Some(&first), "t1", 0),
        first,
        "same token: no increment"
    );
    let second = AttemptMark::next(Some(&first), "t2", 0);
    assert_eq!(second.count, 2);
    assert_eq!(
        AttemptMark::next(Some(&second), "t3", 5).count,
        6,
        "an entry's attempts are a floor"
    );
    assert_eq!(AttemptMark::next(None, "t", 3).count, 4);
    let raw = second.encode();
    assert_eq!(
        raw,
        format!(r#"{{"count":2,"token":"{}"}}"#, fingerprint("t2"))
    );
    assert_eq!(fingerprint("t2").len(), FINGERPRINT_HEX_DIGITS);
    assert_eq!(
        raw.len(),
        r#"{"count":2,"token":"0123456789abcdef"}"#.len(),
        "a mark's size does not depend on the token's"
    );
    assert!(
        AttemptMark::largest().encode().len()
            >= AttemptMark::next(None, &"x".repeat(512), u32::MAX - 1)
                .encode()
                .len()
    );
    assert_eq!(AttemptMark::decode("a.x", &raw).unwrap(), second);
    assert!(AttemptMark::decode("a.x", "{").is_err());
}

#[test]
fn a_mark_an_older_engine_stored_with_the_token_itself_is_still_idempotent() {
    let old = AttemptMark::decode(
        "a.x",
        r#"{"count":3,"token":"holder/x/1786529040123456789/7"}"#,
    )
    .unwrap();
    assert_eq!(
        AttemptMark::next(Some(&old), "holder/x/1786529040123456789/7", 0),
        old
    );
    let next = AttemptMark::next(Some(&old), "another", 0);
    assert_eq!((next.count, next.token), (4, fingerprint("another")));
}

#[test]
fn attempt_keys_are_read_into_the_snapshot() {
    let snap = LedgerSnapshot::from_raw_data(
        [
            ("a.good", r#"{"count":3,"token":"t"}"#),
            ("a.bad", "x"),
            ("a.No", r#"{"count":1,"token":"t"}"#),
        ],
        None,
    );
    assert_eq!(
        snap.attempts_started.get(&Slug::parse("good").unwrap()),
        Some(&3)
    );
    assert_eq!(snap.unreadable_keys.len(), 2);
    assert!(snap.records.is_empty());
}

#[test]
fn version_values_that_are_not_integers_are_corrupt() {
    assert_eq!(LegacyVersion::parse(" 12 "), LegacyVersion::Known(12));
    assert!(matches!(
        LegacyVersion::parse("v45"),
        LegacyVersion::Corrupt { .. }
    ));
    assert!(matches!(
        LegacyVersion::parse("-1"),
        LegacyVersion::Corrupt { .. }
    ));
    assert!(matches!(
        LegacyVersion::parse(""),
        LegacyVersion::Corrupt { .. }
    ));
}
