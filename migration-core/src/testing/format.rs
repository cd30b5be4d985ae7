//! Conformance cases about the stored format (CONTRACT.md §5.2): compact
//! entries naming shared records, entries of the previous format, and
//! references that dangle.

use crate::entry::{EntryState, LedgerEntry};
use crate::ledger::{Record, WriteMode};
use crate::slug::Slug;

use super::{Harness, sample_entry, slug};

/// An entry of run `run` (image and `lib/` digest) in batch `batch`.
fn run_entry(n: u32, run: u32, batch: u32) -> LedgerEntry {
    LedgerEntry {
        batch: Some(format!("{batch:05}-v1.{batch}.0")),
        image: Some(format!(
            "registry.example/migrations:v{run}@sha256:{run:064x}"
        )),
        lib_sha256: Some(crate::Sha256Digest::of(&run.to_be_bytes())),
        ..sample_entry(EntryState::Ok, n)
    }
}

pub async fn entries_of_one_run_share_what_they_repeat_and_read_back_whole(h: &impl Harness) {
    let ledger = h.ledger().await;
    let first: Vec<(Slug, LedgerEntry)> = (0..6)
        .map(|n| (slug(n), run_entry(n as u32, 1, (n / 3) as u32)))
        .collect();
    ledger.create(&first).await.unwrap();
    // A later run, and an `ONLY` re-run recorded in yet another run.
    let second: Vec<(Slug, LedgerEntry)> = (6..9)
        .map(|n| (slug(n), run_entry(n as u32, 2, 7)))
        .chain([(slug(1), run_entry(100, 3, 0))])
        .collect();
    ledger.write(&second, WriteMode::Replace).await.unwrap();
    let snapshot = ledger.read().await.unwrap().unwrap();
    for (slug, entry) in first.iter().skip(2).chain(&second).chain(&first[..1]) {
        assert_eq!(snapshot.entry(slug), Some(entry), "{slug}");
    }
    assert!(
        snapshot.unreadable_keys.is_empty(),
        "{:?}",
        snapshot.unreadable_keys
    );
    let raw = h.raw("m.s-0").await.unwrap();
    assert!(
        !raw.contains("registry.example") && raw.contains("\"c\":"),
        "an entry names its run's image instead of repeating it: {raw}"
    );
}

/// An entry as every engine before the compact form stored it.
pub const PREVIOUS_FORMAT_OK: &str = r#"{"state":"ok","at":"2026-08-12T10:04:00Z","sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","lib_sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","batch":"00042-v1.7.12","image":"ghcr.io/cozystack/cozystack/migrations:v1.7.3@sha256:0000000000000000000000000000000000000000000000000000000000000001","attempts":2,"node":"n1"}"#;

pub async fn entries_of_the_previous_format_read_back_unchanged(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger.create(&[]).await.unwrap();
    h.plant_raw("m.old", PREVIOUS_FORMAT_OK).await;
    h.plant_raw(
        "a.old",
        r#"{"count":2,"token":"holder/old/1786529040123456789/3"}"#,
    )
    .await;
    let new = [(slug(1), run_entry(1, 1, 1))];
    ledger.write(&new, WriteMode::Replace).await.unwrap();
    let snapshot = ledger.read().await.unwrap().unwrap();
    let old = Slug::parse("old").unwrap();
    let expected = LedgerEntry::decode("m.old", PREVIOUS_FORMAT_OK).unwrap();
    assert_eq!(expected.attempts, 2);
    assert_eq!(snapshot.entry(&old), Some(&expected));
    assert_eq!(snapshot.attempts_started.get(&old), Some(&2));
    assert_eq!(snapshot.entry(&slug(1)), Some(&new[0].1));
    assert_eq!(
        ledger
            .note_attempt(&old, "holder/old/1786529040123456789/3", 0)
            .await
            .unwrap(),
        2,
        "a mark an older engine wrote stays idempotent for its token"
    );
    let raw = h.raw("m.old").await.unwrap();
    assert_eq!(
        LedgerEntry::decode("m.old", &raw).unwrap(),
        expected,
        "an old entry is left as it is"
    );
}

pub async fn a_reference_to_a_missing_shared_record_is_corrupt_naming_the_key(h: &impl Harness) {
    let ledger = h.ledger().await;
    ledger
        .create(&[(slug(0), run_entry(0, 1, 1))])
        .await
        .unwrap();
    h.plant_raw(
        "m.dangling",
        r#"{"s":"ok","t":"2026-08-12T10:04:00Z","c":"999999","n":1}"#,
    )
    .await;
    let snapshot = ledger.read().await.unwrap().unwrap();
    match snapshot.record(&Slug::parse("dangling").unwrap()) {
        Some(Record::Corrupt(c)) => {
            assert_eq!(c.key, "m.dangling");
            assert!(c.reason.contains("c.999999"), "{}", c.reason);
        }
        other => panic!("a dangling reference must read as Corrupt, got {other:?}"),
    }
    assert!(snapshot.entry(&slug(0)).is_some(), "it hides nothing else");
}
